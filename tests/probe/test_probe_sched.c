// SPDX-License-Identifier: MIT
/*
 * Off-CPU time on the timeline (LK_TRACE_SCHED, lowkey trace --sched): the threads' context
 * switches are in the trace, and `lowkey report` splits each span's wall time by them.
 *   - a span that sleeps is blocked for at least its sleep; a span that spins is on a CPU for at
 *     least the CPU time it spun, less the scheduler's switches into it, which the kernel charges
 *     before the switch-in record (each bounded by a short sleep's charge, measured: lower bounds
 *     the kernel guarantees, not timings);
 *   - two threads spinning on one CPU (pinned there) are preempted for each other: runnable time;
 *   - threads started after the trace began are covered (all three above run in such threads),
 *     and the streams of threads that exited are closed (64 threads come and go);
 *   - `lowkey trace --pid --sched` asks it of a running process;
 *   - a flight recorder (LK_TRACE_OVERWRITE) keeps each thread's newest switches for its
 *     snapshots, in every format;
 *   - babeltrace2 reads the switches; the JSON conversion makes them off-CPU slices;
 *   - where perf_event_open is denied (a seccomp filter), LK_TRACE_SCHED and `lowkey trace
 *     --sched` fail saying why and what to change, and a trace without it still works.
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <cmocka.h>

#include <lowkey/lowkey.h>

#include "cli/run.h"
#include "counter/helpers.h"
#include "format/ctf/ctf.h"
#include "internal/probe.h"
#include "trace_check.h"

static struct lkt_run out;

static void sleepy(void)
{
	struct timespec ms20 = { 0, 20 * 1000 * 1000 };

	LK_SPAN(sch, sleepy);
	nanosleep(&ms20, NULL);
}

/*
 * On-CPU time (the switches') falls short of the CPU time the kernel charged by the scheduler's
 * path into the thread at each switch in, which the kernel charges to it before its switch-in
 * record (docs/trace.md, "Two CPU times"). Each spinning thread counts its switches while it
 * spins and bounds that path by the largest charge of a short sleep, which holds a whole switch
 * in and a system call besides.
 */
struct switch_gap {
	uint64_t switches, charge_max;
};

static struct switch_gap busy_gap, contend_gap[2];

static uint64_t thread_switches(void)
{
	struct rusage ru;

	getrusage(RUSAGE_THREAD, &ru);
	return (uint64_t)(ru.ru_nvcsw + ru.ru_nivcsw);
}

static void measure_switch_charge(struct switch_gap *g)
{
	struct timespec us1 = { 0, 1000 };

	for (int i = 0; i < 8; i++) {
		uint64_t before = lkt_thread_cpu_ns(), charged;

		nanosleep(&us1, NULL);
		charged = lkt_thread_cpu_ns() - before;
		if (charged > g->charge_max)
			g->charge_max = charged;
	}
}

/* Spin ns of CPU time, counting the switches meanwhile into g. */
static void spin_counted(uint64_t ns, struct switch_gap *g)
{
	uint64_t before = thread_switches();

	lkt_spin_cpu(ns);
	g->switches += thread_switches() - before;
}

/* The most on-CPU time can fall short of the CPU time spun by, in ns. */
static double gap_ns(const struct switch_gap *g)
{
	return (double)g->switches * (double)g->charge_max;
}

static void busy(void)
{
	LK_SPAN(sch, busy);
	spin_counted(20 * 1000 * 1000, &busy_gap);
}

static void *sleeper_and_spinner(void *arg)
{
	(void)arg;
	measure_switch_charge(&busy_gap);
	for (int i = 0; i < 3; i++) {
		sleepy();
		busy();
	}
	return NULL;
}

static int shared_cpu;

/* Pinned to shared_cpu with the other one, each spins 60 ms of CPU time in a span. */
static void *contender(void *arg)
{
	struct switch_gap *g = arg;
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(shared_cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) != 0)
		return (void *)1;
	measure_switch_charge(g);
	{
		LK_SPAN(sch, contend);
		spin_counted(60 * 1000 * 1000, g);
	}
	return NULL;
}

static void spans_are_split_by_the_switches(void **state)
{
	struct lk_trace_config c = { .flags = LK_TRACE_SCHED, .flush_ms = 10 };
	pthread_t a, b, s;
	void *ra, *rb;
	cpu_set_t mine;
	char dir[256];

	(void)state;
	if (!lkt_sched_allowed() || lkt_sh(&out, "command -v python3") != 0)
		skip();
	assert_int_equal(sched_getaffinity(0, sizeof(mine), &mine), 0);
	for (shared_cpu = 0; !CPU_ISSET(shared_cpu, &mine); shared_cpu++)
		;
	assert_true(lk_probe_enable("sch") >= 0);
	lkt_path(dir, sizeof(dir), "sched");
	c.path = dir;
	assert_int_equal(lk_trace_start(&c), 0);
	/* every thread here starts after the trace did */
	pthread_create(&s, NULL, sleeper_and_spinner, NULL);
	pthread_join(s, NULL);
	pthread_create(&a, NULL, contender, &contend_gap[0]);
	pthread_create(&b, NULL, contender, &contend_gap[1]);
	pthread_join(a, &ra);
	pthread_join(b, &rb);
	assert_null(ra);
	assert_null(rb);
	assert_int_equal(lk_trace_stop(), 0);
	assert_int_equal(lk_probe_reset_rules(), 0);
	print_message("switches while spinning: busy %llu, contend %llu + %llu; the largest charge "
		      "of a short sleep %.1f us\n",
		      (unsigned long long)busy_gap.switches,
		      (unsigned long long)contend_gap[0].switches,
		      (unsigned long long)contend_gap[1].switches,
		      (double)contend_gap[0].charge_max / 1e3);

	lkt_sh(&out,
	       "%s report --json '%s' | python3 -c '"
	       "import json,sys; d=json.load(sys.stdin)\n"
	       "assert d[\"sched\"] and d[\"switches\"] > 0, d\n"
	       "c={x[\"event\"]: x[\"split\"] for x in d[\"classes\"] if \"split\" in x}\n"
	       "s=c[\"sleepy\"]; b=c[\"busy\"]; k=c[\"contend\"]\n"
	       /* three 20 ms sleeps: blocked for 60 ms at least, whatever else happened */
	       "assert s[\"blocked_ns\"] >= 59e6 and s[\"blocked_ns\"] <= s[\"wall_ns\"], s\n"
	       /* three spans spinning 20 ms of CPU time: on a CPU that long at least, but for the
		* switches into them (switch_gap) */
	       "assert b[\"on_cpu_ns\"] >= 59e6 - %.0f and b[\"blocked_ns\"] < b[\"on_cpu_ns\"], b\n"
	       /* two spinners on one CPU wait for each other */
	       "assert k[\"runnable_ns\"] > 0 and k[\"on_cpu_ns\"] >= 119e6 - %.0f, k\n"
	       "for x in (s, b, k):\n"
	       "  assert abs(x[\"on_cpu_ns\"] + x[\"runnable_ns\"] + x[\"blocked_ns\"] - x[\"wall_ns\"]) < 1e3, x\n"
	       "t=[x for x in d[\"threads\"] if x[\"events\"] > 0]\n"
	       "assert len(t) == 3 and all(x[\"switches\"] > 0 for x in t), t\n'",
	       LOWKEY, dir, gap_ns(&busy_gap), gap_ns(&contend_gap[0]) + gap_ns(&contend_gap[1]));
	if (out.status)
		print_error("%s\n", out.out);
	assert_int_equal(out.status, 0);
	lkt_sh(&out, "%s report '%s'", LOWKEY, dir);
	lkt_expect(&out, 0, "runnable");

	/* JSON: the switches as off-CPU slices of their thread */
	lkt_sh(&out,
	       "%s convert '%s' -o '%s.json' --format json && python3 -c '"
	       "import json,sys; d=json.load(open(sys.argv[1]))[\"traceEvents\"]\n"
	       "x=[e for e in d if e.get(\"cat\") == \"off-cpu\"]\n"
	       "assert all(e[\"ph\"] == \"X\" and e[\"dur\"] >= 0 for e in x), x[:3]\n"
	       "b=sum(e[\"dur\"] for e in x if e[\"name\"] == \"blocked\")\n"
	       "p=sum(e[\"dur\"] for e in x if e[\"name\"] == \"preempted\")\n"
	       "assert b >= 59e3 and p > 0, (b, p)\n' '%s.json'",
	       LOWKEY, dir, dir, dir);
	if (out.status)
		print_error("%s\n", out.out);
	assert_int_equal(out.status, 0);
	lkt_sh(&out, "rm -f '%s.json'", dir);

	if (lkt_sh(&out, "command -v babeltrace2") == 0) {
		lkt_sh(&out,
		       "babeltrace2 '%s' | grep -c 'lowkey:sched_out: { vtid = [0-9]* }, { cpu = [0-9]*, "
		       "preempted = 1 }'",
		       dir);
		assert_true(atoi(out.out) > 0);
		lkt_sh(&out,
		       "babeltrace2 '%s' | grep -c 'lowkey:sched_in: { vtid = [0-9]* }, { cpu = %d }'",
		       dir, shared_cpu);
		assert_true(atoi(out.out) > 0);
	}
	lkt_rmrf(dir);
}

static void *short_lived(void *arg)
{
	struct timespec ms1 = { 0, 1000 * 1000 };

	(void)arg;
	LK_SPAN(sch, short);
	nanosleep(&ms1, NULL);
	return NULL;
}

static int open_fds(void)
{
	struct dirent *e;
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

/* Threads that come and go leave no stream open behind them: the trace's fds stay bounded. */
static void exited_threads_close_their_streams(void **state)
{
	struct lk_trace_config c = { .flags = LK_TRACE_SCHED, .flush_ms = 10 };
	char dir[256];
	int before, after = 0;

	(void)state;
	if (!lkt_sched_allowed())
		skip();
	assert_true(lk_probe_enable("sch") >= 0);
	lkt_path(dir, sizeof(dir), "sched-exits");
	c.path = dir;
	assert_int_equal(lk_trace_start(&c), 0);
	before = open_fds();
	for (int i = 0; i < 64; i++) {
		pthread_t t;

		pthread_create(&t, NULL, short_lived, NULL);
		pthread_join(t, NULL);
	}
	/* the consumer closes a stream once it has written the thread's exit (a hang guard, not a timing) */
	for (int i = 0; i < 6000 && (after = open_fds()) > before + 4; i++)
		usleep(10000);
	assert_int_equal(lk_trace_stop(), 0);
	assert_int_equal(lk_probe_reset_rules(), 0);
	assert_true(after <= before + 4);
	lkt_sh(&out, "ls '%s' | grep -c -- '-sched$'", dir);
	assert_true(atoi(out.out) >= 64); /* and every one of them was written */
	lkt_rmrf(dir);
}

/* lowkey trace --pid --sched: a running process records its threads' switches too. */
static void sched_asked_of_a_running_process(void **state)
{
	char dir[256];

	(void)state;
	if (!lkt_sched_allowed())
		skip();
	lkt_path(dir, sizeof(dir), "sched-pid");
	lkt_sh(&out,
	       "(LOWKEY_CONTROL=1 %s serve >/dev/null 2>&1 & p=$!; "
	       "for i in $(seq 100); do %s list --pid $p >/dev/null 2>&1 && break; sleep 0.1; done; "
	       "%s trace --pid $p --sched --duration 0.5 -o '%s' 2>&1; s=$?; kill $p; exit $s)",
	       TARGET, LOWKEY, LOWKEY, dir);
	lkt_expect(&out, 0, "events (0 lost)");
	lkt_sh(&out, "ls '%s' | grep -c -- '-sched$'", dir);
	assert_true(atoi(out.out) >= 1);
	lkt_sh(&out, "%s report --json '%s'", LOWKEY, dir);
	lkt_expect(&out, 0, "\"sched\": true");
	lkt_rmrf(dir);
}

/* ---- the flight recorder (LK_TRACE_OVERWRITE) ---- */

/* Two threads hand a token to each other through pipes: every hand-off switches both. */
struct ping {
	int to[2], back[2];
	int rounds;
};

static void *pong_main(void *arg)
{
	struct ping *p = arg;
	char c;

	for (int i = 0; i < p->rounds; i++)
		if (read(p->to[0], &c, 1) != 1 || write(p->back[1], &c, 1) != 1)
			return (void *)1;
	return NULL;
}

static void ping_pong(int rounds)
{
	struct ping p = { .rounds = rounds };
	pthread_t t;
	void *rt;
	char c = 'x';

	assert_int_equal(pipe(p.to), 0);
	assert_int_equal(pipe(p.back), 0);
	pthread_create(&t, NULL, pong_main, &p);
	for (int i = 0; i < rounds; i++) {
		LK_PROBE(sch, ping, i);
		assert_int_equal(write(p.to[1], &c, 1), 1);
		assert_int_equal(read(p.back[0], &c, 1), 1);
	}
	pthread_join(t, &rt);
	assert_null(rt);
	close(p.to[0]);
	close(p.to[1]);
	close(p.back[0]);
	close(p.back[1]);
}

/* Per thread of a snapshot: its switches, in order, the newest's time. */
struct switches {
	size_t n;
	uint64_t first, last;
	bool in_order;
};

static struct switches switches_of(const struct lkt_trace *t, int tid)
{
	struct switches w = { 0, 0, 0, true };

	for (size_t i = 0; i < t->n; i++) {
		const struct lkt_event *e = &t->ev[i];

		if (e->tid != tid || strncmp(e->name, "lowkey:sched_", 13) != 0)
			continue;
		if (w.n++ && e->tsc < w.last)
			w.in_order = false;
		if (w.n == 1)
			w.first = e->tsc;
		w.last = e->tsc;
	}
	return w;
}

/*
 * Each snapshot has the threads' switches, the newest ones: a thread keeps 1024 of them with a
 * 64 KiB ring (buffer_size / 8 bytes, 16 each, 1024 at least), the older ones overwritten; and
 * snapshot after snapshot they are in order and move on.
 */
static void a_flight_recorder_keeps_the_newest_switches(void **state)
{
	struct lk_trace_config c = { .flags = LK_TRACE_SCHED | LK_TRACE_OVERWRITE,
				     .buffer_size = 64 << 10,
				     .flush_ms = 10 };
	struct timespec settle = { 0, 30 * 1000 * 1000 }; /* older than the drain's 2 ms cut */
	struct switches before = { 0 };
	char dir[256], snap[300];
	struct lkt_trace t;
	int me = gettid();

	(void)state;
	if (!lkt_sched_allowed())
		skip();
	assert_true(lk_probe_enable("sch") >= 0);
	lkt_path(dir, sizeof(dir), "sched-fr");
	c.path = dir;
	assert_int_equal(lk_trace_start(&c), 0);
	for (int round = 0; round < 3; round++) {
		struct switches w;

		ping_pong(100);
		nanosleep(&settle, NULL);
		snprintf(snap, sizeof(snap), "%s-%d", dir, round);
		assert_int_equal(lk_trace_snapshot(snap), 0);
		if (lkt_read(&t, snap) != 0)
			fail_msg("reading %s: %s", snap, t.err);
		assert_true(t.r.sched && t.r.overwrite);
		assert_int_equal(lkt_count(&t, "sch:ping"), 100 * (round + 1));
		w = switches_of(&t, me);
		assert_true(w.in_order);
		/* more than before (the 30 ms sleep switched out at least), not yet a full ring */
		assert_true(w.n > before.n && w.n <= 1024);
		assert_true(w.last > before.last);
		assert_true(w.first == before.first ||
			    !before.n); /* the ring keeps the same first */
		before = w;
		lkt_free(&t);
		lkt_rmrf(snap);
	}
	/* 2000 hand-offs more: the oldest switches are overwritten, the ring holds its 1024 newest */
	ping_pong(2000);
	nanosleep(&settle, NULL);
	assert_int_equal(lk_trace_snapshot(dir), 0);
	if (lkt_read(&t, dir) != 0)
		fail_msg("reading %s: %s", dir, t.err);
	assert_int_equal(switches_of(&t, me).n, 1024);
	assert_true(switches_of(&t, me).first > before.last);
	assert_true(switches_of(&t, me).in_order);
	lkt_free(&t);
	assert_int_equal(lk_trace_stop(), 0);
	assert_int_equal(lk_probe_reset_rules(), 0);
	lkt_rmrf(dir);
}

/* lowkey trace --overwrite --sched in each format: every snapshot has the switches. */
static void snapshots_in_every_format_with_switches(void **state)
{
	static const char *const formats[][2] = { { "ctf", "ctf" },
						  { "json", "json" },
						  { "perfetto", "pftrace" } };
	char dir[256];

	(void)state;
	if (!lkt_sched_allowed() || lkt_sh(&out, "command -v python3") != 0)
		skip();
	for (size_t f = 0; f < sizeof(formats) / sizeof(formats[0]); f++) {
		lkt_path(dir, sizeof(dir), "sched-fr-cli");
		strcat(dir, ".");
		strcat(dir, formats[f][1]);
		/*
		 * the snapshot at exit; 20000 ticks lap the 64 KiB ring. The nap after them switches
		 * the thread out and in: JSON and Perfetto have an off-CPU slice then, whatever the timing
		 * (a busy loop alone may run its whole life without one).
		 */
		lkt_sh(&out,
		       "%s trace --overwrite --sched --format %s -b 64K -e 'app:*' -o '%s' -- %s emit-nap 20000",
		       LOWKEY, formats[f][0], dir, TARGET);
		lkt_expect(&out, 0, "flight recorder");
		lkt_sh(&out,
		       "%s report --json '%s' | python3 -c '"
		       "import json,sys; d=json.load(sys.stdin)\n"
		       "assert d[\"sched\"] and d[\"switches\"] > 0, d\n"
		       "assert d[\"events\"] > 0 and d[\"lost\"] > 0, d\n'",
		       LOWKEY, dir);
		if (out.status)
			print_error("%s: %s\n", formats[f][0], out.out);
		assert_int_equal(out.status, 0);
		lkt_rmrf(dir);
	}
}

static int deny_eperm(void)
{
	return deny_perf_event_open(EPERM);
}

static pid_t napper_tid;

/* Three spans that each sleep 5 ms: a switch out and a switch in inside each. */
static void *napper(void *arg)
{
	struct timespec ms5 = { 0, 5 * 1000 * 1000 };

	(void)arg;
	napper_tid = (pid_t)syscall(SYS_gettid);
	{
		LK_SPAN(lostin, a);
		nanosleep(&ms5, NULL);
	}
	{
		LK_SPAN(lostin, b);
		nanosleep(&ms5, NULL);
	}
	{
		LK_SPAN(lostin, c);
		nanosleep(&ms5, NULL);
	}
	return NULL;
}

struct switch_rec {
	uint64_t tsc;
	unsigned int cpu;
	bool out, preempted;
};

/* The napper's switches, and the span lostin:b's ends; how many switches. */
static size_t napper_switches(const char *dir, struct switch_rec *sw, size_t cap, uint64_t *b_begin,
			      uint64_t *b_end)
{
	struct lk_trace_file *tf;
	struct lk_trace_event ev;
	size_t n = 0;

	assert_int_equal(lk_trace_file_open(dir, &tf), 0);
	while (lk_trace_file_next(tf, &ev) == 1) {
		if (ev.tid != napper_tid)
			continue;
		if (ev.type != LK_TRACE_EV_PROBE && n < cap)
			sw[n++] = (struct switch_rec){ ev.ticks, ev.cpu,
						       ev.type == LK_TRACE_EV_SWITCH_OUT,
						       ev.preempted };
		if (ev.type == LK_TRACE_EV_PROBE && ev.kind == LK_PROBE_SPAN_END && ev.paired &&
		    strcmp(ev.name, "b") == 0) {
			*b_begin = ev.begin_ticks;
			*b_end = ev.ticks;
		}
	}
	lk_trace_file_close(tf);
	return n;
}

/* The napper's switch stream written again without the switch in at index lost (sched.c's layout). */
static void rewrite_without(const char *dir, const struct switch_rec *sw, size_t n, size_t lost)
{
	unsigned char head[20], uuid[16], rec[28 * 256];
	char path[512];
	size_t len = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/stream-%d-sched", dir, (int)napper_tid);
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, head, sizeof(head), 0), (ssize_t)sizeof(head));
	memcpy(uuid, head + 4, sizeof(uuid)); /* after the packet's magic */
	for (size_t i = 0; i < n; i++) {
		uint64_t h = lk__probe_header(sw[i].tsc,
					      sw[i].out ? LK__EVENT_SCHED_OUT : LK__EVENT_SCHED_IN);
		int32_t vtid = (int32_t)napper_tid;
		uint64_t cpu = sw[i].cpu, preempted = sw[i].preempted;

		if (i == lost)
			continue;
		memcpy(rec + len, &h, 8);
		memcpy(rec + len + 8, &vtid, 4);
		memcpy(rec + len + 12, &cpu, 8);
		len += 20;
		if (sw[i].out) {
			memcpy(rec + len, &preempted, 8);
			len += 8;
		}
	}
	assert_int_equal(ftruncate(fd, 0), 0);
	assert_int_equal(lk__ctf_put_packet(fd, uuid, 1, napper_tid, sw[0].tsc, sw[n - 1].tsc, 0, 0,
					    false, rec, len),
			 0);
	close(fd);
}

/*
 * A switch in the kernel lost (its ring full) leaves a switch out with no switch in after it: the
 * report counts that interval for nothing, not as blocked to the end of the trace, so the spans
 * after it are split as before (on-CPU never below zero, blocked never above the wall time).
 */
static void a_lost_switch_in_blocks_no_later_span(void **state)
{
	struct lk_trace_config c = { .flags = LK_TRACE_SCHED, .flush_ms = 10 };
	struct switch_rec sw[256];
	uint64_t b_begin = 0, b_end = 0;
	size_t n, lost;
	pthread_t t;
	char dir[256];

	(void)state;
	if (!lkt_sched_allowed() || lkt_sh(&out, "command -v python3") != 0)
		skip();
	assert_true(lk_probe_enable("lostin") >= 0);
	lkt_path(dir, sizeof(dir), "sched-lost-in");
	c.path = dir;
	assert_int_equal(lk_trace_start(&c), 0);
	pthread_create(&t, NULL, napper, NULL);
	pthread_join(t, NULL);
	assert_int_equal(lk_trace_stop(), 0);
	assert_int_equal(lk_probe_reset_rules(), 0);

	n = napper_switches(dir, sw, 256, &b_begin, &b_end);
	assert_true(n > 0 && n < 256 && b_end > b_begin);
	for (lost = 0;
	     lost < n && (sw[lost].out || sw[lost].tsc <= b_begin || sw[lost].tsc >= b_end); lost++)
		;
	assert_true(lost < n); /* b slept: it was switched back in inside the span */
	rewrite_without(dir, sw, n, lost);
	lkt_sh(&out,
	       "%s report --json '%s' | python3 -c '"
	       "import json,sys; d=json.load(sys.stdin)\n"
	       "c={x[\"event\"]: x[\"split\"] for x in d[\"classes\"] if \"split\" in x}\n"
	       "assert sorted(c) == [\"a\", \"b\", \"c\"], c\n"
	       "for x in c.values():\n"
	       "  assert x[\"on_cpu_ns\"] >= 0 and x[\"blocked_ns\"] <= x[\"wall_ns\"], c\n"
	       /* a and c slept 5 ms and were switched back in: blocked that long */
	       "assert c[\"a\"][\"blocked_ns\"] >= 4.9e6 and c[\"c\"][\"blocked_ns\"] >= 4.9e6, c\n'",
	       LOWKEY, dir);
	if (out.status)
		print_error("%s\n", out.out);
	assert_int_equal(out.status, 0);
	lkt_rmrf(dir);
}

/* In a child under a seccomp filter that denies perf_event_open: LK_TRACE_SCHED says so. */
static void denied_sched_says_why(void **state)
{
	int status;
	pid_t child;

	(void)state;
	child = fork();
	if (child == 0) {
		struct lk_trace_config c = { .flags = LK_TRACE_SCHED };
		char dir[256];
		int err;

		if (deny_eperm() != 0)
			_exit(77);
		lkt_path(dir, sizeof(dir), "sched-denied");
		c.path = dir;
		err = lk_trace_start(&c);
		if (err != -EPERM || !strstr(lk_last_error(), "seccomp") ||
		    !strstr(lk_last_error(), "LK_TRACE_SCHED") ||
		    !strstr(lk_last_error(), "perf_event_open")) {
			fprintf(stderr, "lk_trace_start: %d: %s\n", err, lk_last_error());
			_exit(1);
		}
		/* without it, the trace works */
		c.flags = 0;
		lk_probe_enable("sch");
		if (lk_trace_start(&c) != 0)
			_exit(2);
		sleepy();
		if (lk_trace_stop() != 0)
			_exit(3);
		lkt_rmrf(dir);
		_exit(0);
	}
	assert_true(child > 0);
	assert_int_equal(waitpid(child, &status, 0), child);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
		skip(); /* no seccomp filter can be installed here */
	assert_int_equal(status, 0);
}

static void denied_sched_cli_says_why(void **state)
{
	int status;
	pid_t child;

	(void)state;
	child = fork();
	if (child == 0) {
		char dir[256];

		if (deny_eperm() != 0)
			_exit(77);
		lkt_path(dir, sizeof(dir), "sched-denied-cli");
		lkt_sh(&out, "%s trace --sched -o '%s' -- %s emit 3", LOWKEY, dir, TARGET);
		if (out.status != 1 || !strstr(out.out, "--sched") || !strstr(out.out, "seccomp")) {
			fprintf(stderr, "exit %d: %s\n", out.status, out.out);
			_exit(1);
		}
		lkt_sh(&out, "%s trace -o '%s' -- %s emit 3", LOWKEY, dir, TARGET);
		if (out.status != 0 || !strstr(out.out, "events (0 lost)")) {
			fprintf(stderr, "exit %d: %s\n", out.status, out.out);
			_exit(2);
		}
		lkt_rmrf(dir);
		_exit(0);
	}
	assert_true(child > 0);
	assert_int_equal(waitpid(child, &status, 0), child);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
		skip();
	assert_int_equal(status, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(spans_are_split_by_the_switches),
		cmocka_unit_test(exited_threads_close_their_streams),
		cmocka_unit_test(a_lost_switch_in_blocks_no_later_span),
		cmocka_unit_test(sched_asked_of_a_running_process),
		cmocka_unit_test(a_flight_recorder_keeps_the_newest_switches),
		cmocka_unit_test(snapshots_in_every_format_with_switches),
		cmocka_unit_test(denied_sched_says_why),
		cmocka_unit_test(denied_sched_cli_says_why),
	};

	lkt_perf_require();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
