// SPDX-License-Identifier: MIT
/*
 * lowkey bench probe: what a probe costs, off and on, beside LTTng-UST's tracepoint.
 *
 * 1. ns per event, in one run: a disabled site (against the empty loop), an enabled event with
 *    two integers (TSC stamp), the same with the thread's CPU time, a span (begin and end).
 *    Enabled rows are timed in bursts that fit the buffers, with a pause between bursts for the
 *    consumer: an event dropped because a buffer is full costs less than one written, and would
 *    flatter either tracer.
 * 1b. Beside LTTng-UST 2.13's tracepoint with the same two integers, like for like: both tracers
 *    in one process (lowkey-bench-lttng, which links both), one thread, bursts of the same length,
 *    lowkey and LTTng-UST alternating burst by burst, the same pause after each; disabled (no
 *    trace, no session) and enabled (a lowkey trace and an LTTng session this bench creates, with
 *    a session daemon it starts if none runs). Medians of the rounds, and the per-round ratios.
 * 2. Sustained events/s to a file without loss at the default buffer size, from one and two
 *    producer threads: producers paced at a given rate, the rate raised until events are lost.
 * 3. Memory per thread.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <lowkey/lowkey.h>

#include "bench.h"
#include "probe_loop.h"

static const char *trace_dir = "/dev/shm";
static int runs = 21;
static long burst = LKB_DEFAULT_BURST;	/* events per timed burst, lowkey and LTTng-UST alike */

/* The longest burst: 32-byte events (two integers and the CPU time) then fill half of lowkey's
 * default 2 MiB buffer. */
#define MAX_BURST 32768
/* The LTTng-UST comparison's disabled rounds: nothing to drain, so long loops and no pause. */
#define DISABLED_BURST (1L << 20)
#define PEER_PAUSE_MS 20

/* ---- the loops ---- */

static __attribute__((noinline)) uint64_t loop_empty(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		asm volatile("" : : "r"(i));
	return n;
}

static __attribute__((noinline)) uint64_t loop_disabled(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		LK_PROBE(lkbench_off, two_ints, (long)i, (long)n);
		asm volatile("" : : "r"(i));
	}
	return n;
}

/* A site on for a USDT tracer (lk_probe_usdt_enable) while no lowkey trace runs. */
static __attribute__((noinline)) uint64_t loop_usdt(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		LK_PROBE(lkbench_usdt, two_ints, (long)i, (long)n);
		asm volatile("" : : "r"(i));
	}
	return n;
}

/* A scoped span on for a USDT tracer while no lowkey trace runs: its end goes through the stub. */
static __attribute__((noinline)) uint64_t loop_usdt_span(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		LK_SPAN(lkbench_usdt, span);
		asm volatile("" : : "r"(i));
	}
	return n;
}

static __attribute__((noinline)) uint64_t loop_span(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		LK_SPAN(lkbench, span);
		asm volatile("" : : "r"(i));
	}
	return n;
}

static double median_of(double *v, int n)
{
	return lkb_median(v, (size_t)n);
}

/* ns per iteration of a loop that records nothing, median of runs. */
static double time_unrecorded(uint64_t (*loop)(uint64_t))
{
	double v[64];
	uint64_t n = 20 * 1000 * 1000;

	for (int r = 0; r < runs && r < 64; r++) {
		uint64_t t0 = lkb_now_ns();

		loop(n);
		v[r] = (double)(lkb_now_ns() - t0) / (double)n;
	}
	return median_of(v, runs < 64 ? runs : 64);
}

/* Wait until the consumer has written everything recorded so far. */
static void wait_drained(uint64_t expected)
{
	struct lk_trace_stats st;

	for (int i = 0; i < 2000; i++) {
		lk_trace_stats(&st);
		if (st.events + st.lost >= expected)
			return;
		usleep(500);
	}
}

static int start_trace(const char *name, unsigned int flags, size_t buffer, char *dir, size_t dirlen)
{
	struct lk_trace_config c = { .path = dir, .flags = flags, .buffer_size = buffer, .flush_ms = 5 };

	snprintf(dir, dirlen, "%s/lowkey-bench-%s-%d", trace_dir, name, (int)getpid());
	return lk_trace_start(&c);
}

static void remove_trace(const char *dir)
{
	char cmd[4200];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "lowkey bench probe: could not remove %s\n", dir);
}

struct burst_result {
	double ns;		/* median ns per iteration */
	uint64_t lost;
	int err;
};

/* Time `runs` bursts of loop(burst) inside a trace; records_per_iter records per iteration. */
static struct burst_result time_bursts(const char *name, uint64_t (*loop)(uint64_t), unsigned int flags,
				       unsigned int records_per_iter)
{
	struct burst_result res = { 0 };
	struct lk_trace_stats st;
	char dir[4096];
	double v[64];
	int n = runs < 64 ? runs : 64;

	res.err = start_trace(name, flags, 0, dir, sizeof(dir));
	if (res.err)
		return res;
	loop((uint64_t)burst / records_per_iter);	/* the thread's first event sets up its buffer */
	wait_drained((uint64_t)burst / records_per_iter * records_per_iter + 1);
	for (int r = 0; r < n; r++) {
		uint64_t t0, recorded;

		lk_trace_stats(&st);
		recorded = st.events + st.lost;
		t0 = lkb_now_ns();
		loop((uint64_t)burst / records_per_iter);
		v[r] = (double)(lkb_now_ns() - t0) / (double)((uint64_t)burst / records_per_iter);
		wait_drained(recorded + (uint64_t)burst / records_per_iter * records_per_iter);
	}
	lk_trace_stop();
	lk_trace_stats(&st);
	res.lost = st.lost;
	res.ns = median_of(v, n);
	remove_trace(dir);
	return res;
}

/* ---- LTTng-UST, like for like ---- */

/*
 * One mode of the comparison, as lowkey-bench-lttng measured it: both tracers in one process and
 * one thread, bursts of the same length alternating lowkey, LTTng-UST, lowkey, ... per round.
 */
struct lttng_side {
	long burst;		/* events per burst, both tracers */
	int rounds;		/* rounds the peer reported */
	double lowkey_ns, lttng_ns;	/* ns per event, medians of the rounds */
	double ratio_of_medians;	/* lttng_ns / lowkey_ns */
	double ratio_median, ratio_min, ratio_max;	/* of the per-round ratios LTTng-UST / lowkey */
	unsigned long long lowkey_lost;
};

struct lttng_result {
	struct lttng_side off, on;	/* disabled (no trace, no session), enabled */
	bool have_off, have_on;
	char discarded[200];	/* what `lttng stop` said of discarded events, or "" */
	const char *missing;	/* why there are no (or not all) LTTng figures, or NULL */
};

static const char *lttng_peer(void)
{
	const char *env = getenv("LOWKEY_BENCH_LTTNG");

	if (env && access(env, X_OK) == 0)
		return env;
#ifdef LK_BENCH_LTTNG_BUILD
	if (access(LK_BENCH_LTTNG_BUILD, X_OK) == 0)
		return LK_BENCH_LTTNG_BUILD;
	if (access(LK_BENCH_LTTNG_INSTALLED, X_OK) == 0)
		return LK_BENCH_LTTNG_INSTALLED;
#endif
	return NULL;
}

static int quiet(const char *fmt, const char *a, const char *b)
{
	char cmd[4200];

	snprintf(cmd, sizeof(cmd), fmt, a, b);
	strncat(cmd, " >/dev/null 2>&1", sizeof(cmd) - strlen(cmd) - 1);
	return system(cmd);
}

/*
 * Run the peer: `runs` rounds of `events`-event bursts, lowkey tracing into lowkey_dir ("-": its
 * sites off). Returns 0 with *s filled, or -1.
 */
static int run_peer(const char *peer, long events, const char *lowkey_dir, int pause_ms, struct lttng_side *s)
{
	double lk[64], lt[64], ratio[64];
	char cmd[4400], line[256];
	int n = 0;
	FILE *p;

	memset(s, 0, sizeof(*s));
	s->burst = events;
	snprintf(cmd, sizeof(cmd), "'%s' %d %ld '%s' %d 2>/dev/null", peer, runs, events, lowkey_dir, pause_ms);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p)) {
		unsigned long long lost;

		if (n < 64 && sscanf(line, "%lf %lf", &lk[n], &lt[n]) == 2 && lk[n] > 0 && lt[n] > 0) {
			ratio[n] = lt[n] / lk[n];
			n++;
		} else if (sscanf(line, "lowkey_lost %llu", &lost) == 1) {
			s->lowkey_lost = lost;
		}
	}
	if (pclose(p) != 0 || n == 0)
		return -1;
	s->rounds = n;
	s->ratio_median = lkb_median(ratio, (size_t)n);	/* sorts ratio */
	s->ratio_min = ratio[0];
	s->ratio_max = ratio[n - 1];
	s->lowkey_ns = lkb_median(lk, (size_t)n);
	s->lttng_ns = lkb_median(lt, (size_t)n);
	s->ratio_of_medians = s->lttng_ns / s->lowkey_ns;
	return 0;
}

/* The session daemon's pid, from the pid file it writes (root: /var/run/lttng; others: ~/.lttng,
 * or $LTTNG_HOME/.lttng); 0 if unknown. */
static pid_t sessiond_pid(void)
{
	const char *home = getenv("LTTNG_HOME") ? getenv("LTTNG_HOME") : getenv("HOME");
	char path[4200];
	long pid = 0;
	FILE *f;

	if (geteuid() == 0)
		snprintf(path, sizeof(path), "/var/run/lttng/lttng-sessiond.pid");
	else
		snprintf(path, sizeof(path), "%s/.lttng/lttng-sessiond.pid", home ? home : "");
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fscanf(f, "%ld", &pid) != 1)
		pid = 0;
	fclose(f);
	return (pid_t)pid;
}

/* `lttng stop`, keeping what it says of discarded events (it warns when there were any). */
static void lttng_stop(const char *session, char *discarded, size_t len)
{
	char cmd[256], line[512];
	FILE *p;

	discarded[0] = 0;
	snprintf(cmd, sizeof(cmd), "lttng stop %s 2>&1", session);
	p = popen(cmd, "r");
	if (!p)
		return;
	while (fgets(line, sizeof(line), p))
		if (!discarded[0] && (strstr(line, "discarded") || strstr(line, "lost"))) {
			line[strcspn(line, "\n")] = 0;
			line[len - 1 < sizeof(line) - 1 ? len - 1 : sizeof(line) - 1] = 0;
			memcpy(discarded, line, strlen(line) + 1);
		}
	pclose(p);
}

static struct lttng_result bench_lttng(void)
{
	struct lttng_result r = { 0 };
	const char *peer = lttng_peer();
	char session[64], dir[4096], lowkey_dir[4096];
	pid_t started_daemon = 0;

	if (!peer) {
		r.missing = "lowkey-bench-lttng was not built (install liblttng-ust-dev and rebuild)";
		return r;
	}
	if (quiet("command -v lttng%s%s", "", "") != 0) {
		r.missing = "the lttng command is missing (install lttng-tools)";
		return r;
	}
	if (quiet("lttng list%s%s", "", "") != 0) {
		if (quiet("lttng-sessiond --daemonize%s%s", "", "") != 0) {
			r.missing = "could not start lttng-sessiond";
			return r;
		}
		started_daemon = sessiond_pid();
	}
	r.have_off = run_peer(peer, DISABLED_BURST, "-", 0, &r.off) == 0;
	if (!r.have_off)
		r.missing = "lowkey-bench-lttng failed (run it by hand to see why)";

	snprintf(session, sizeof(session), "lowkey-bench-%d", (int)getpid());
	snprintf(dir, sizeof(dir), "%s/%s", trace_dir, session);
	snprintf(lowkey_dir, sizeof(lowkey_dir), "%s/lowkey-bench-peer-%d", trace_dir, (int)getpid());
	if (quiet("lttng create %s --output='%s'", session, dir) == 0 &&
	    quiet("lttng enable-channel -u --subbuf-size=8M --num-subbuf=4 -s %s lkch%s", session, "") == 0 &&
	    quiet("lttng enable-event -u -c lkch -s %s lkbench:two_ints%s", session, "") == 0 &&
	    quiet("lttng start %s%s", session, "") == 0) {
		r.have_on = run_peer(peer, burst, lowkey_dir, PEER_PAUSE_MS, &r.on) == 0;
		if (!r.have_on)
			r.missing = "lowkey-bench-lttng failed (run it by hand to see why)";
		lttng_stop(session, r.discarded, sizeof(r.discarded));
	} else {
		r.missing = "could not set up an LTTng session";
	}
	quiet("lttng destroy %s%s", session, "");
	remove_trace(dir);
	remove_trace(lowkey_dir);
	if (started_daemon > 0)	/* the one this bench started, by its pid */
		kill(started_daemon, SIGTERM);
	return r;
}

/* ---- sustained rate ---- */

struct producer {
	double rate;		/* events per second */
	double seconds;
	uint64_t emitted;
	double achieved;
	pthread_t thread;
	int cpu;
};

/* Emit at `rate`, in batches of 64 between looks at the clock. */
static void *produce(void *arg)
{
	struct producer *p = arg;
	uint64_t t0 = lkb_now_ns(), end = t0 + (uint64_t)(p->seconds * 1e9), n = 0;
	double per_ns = p->rate / 1e9;

	if (p->cpu >= 0)
		lkb_pin(p->cpu);
	for (;;) {
		uint64_t now = lkb_now_ns();

		if (now >= end)
			break;
		if ((double)n > (double)(now - t0) * per_ns)
			continue;
		for (int i = 0; i < 64; i++)
			LK_PROBE(lkbench, rate, (long)n, (long)i);
		n += 64;
	}
	p->emitted = n;
	p->achieved = (double)n / ((double)(lkb_now_ns() - t0) / 1e9);
	return NULL;
}

struct rate_trial {
	double rate_per_thread, achieved_total;
	uint64_t events, lost;
	int err;
};

static struct rate_trial run_rate(int threads, double rate, double seconds, unsigned int flags)
{
	struct rate_trial t = { rate, 0, 0, 0, 0 };
	struct producer p[2];
	struct lk_trace_stats st;
	char dir[4096];

	t.err = start_trace("rate", flags, 0, dir, sizeof(dir));
	if (t.err)
		return t;
	for (int i = 0; i < threads; i++) {
		p[i] = (struct producer){ .rate = rate, .seconds = seconds, .cpu = threads == 1 ? -1 : i };
		pthread_create(&p[i].thread, NULL, produce, &p[i]);
	}
	for (int i = 0; i < threads; i++) {
		pthread_join(p[i].thread, NULL);
		t.achieved_total += p[i].achieved;
	}
	t.err = lk_trace_stop();
	lk_trace_stats(&st);
	t.events = st.events;
	t.lost = st.lost;
	remove_trace(dir);
	return t;
}

/* The highest per-thread rate with no loss: double until loss or the producers cannot keep up,
 * then bisect. */
static struct rate_trial find_rate(int threads, double seconds, unsigned int flags)
{
	struct rate_trial best = { 0 }, t;
	double lo = 0, hi = 0, rate = 2.5e6;

	for (; rate < 1e9; rate *= 2) {
		t = run_rate(threads, rate, seconds, flags);
		if (t.err)
			return t;
		if (t.lost || t.achieved_total < 0.95 * rate * threads) {
			hi = rate;
			break;
		}
		best = t;
		lo = rate;
	}
	for (int step = 0; step < 4 && hi > 0; step++) {
		double mid = (lo + hi) / 2;

		t = run_rate(threads, mid, seconds, flags);
		if (t.err)
			return t;
		if (t.lost || t.achieved_total < 0.95 * mid * threads) {
			hi = mid;
		} else {
			best = t;
			lo = mid;
		}
	}
	return best;
}

/* ---- memory ---- */

static long resident_pages(void)
{
	long size = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "re");

	if (f) {
		if (fscanf(f, "%ld %ld", &size, &resident) != 2)
			resident = 0;
		fclose(f);
	}
	return resident;
}

static void *record_once(void *arg)
{
	long *delta = arg;
	long before = resident_pages();

	LK_PROBE(lkbench, rate, 1L, 2L);
	*delta = resident_pages() - before;
	return NULL;
}

static long memory_per_thread(void)
{
	struct lk_trace_config c = { .flush_ms = 5 };
	char dir[4096];
	pthread_t t;
	long delta = 0;

	snprintf(dir, sizeof(dir), "%s/lowkey-bench-mem-%d", trace_dir, (int)getpid());
	c.path = dir;
	if (lk_trace_start(&c) != 0)
		return -1;
	pthread_create(&t, NULL, record_once, &delta);
	pthread_join(t, NULL);
	lk_trace_stop();
	remove_trace(dir);
	return delta * sysconf(_SC_PAGESIZE);
}

/* ---- output ---- */

#define SEARCHES 3

struct rate_summary {
	double median, min, max;	/* events/s over SEARCHES searches */
	struct rate_trial best;
};

struct results {
	double empty_ns, disabled_ns, usdt_ns, usdt_span_ns;
	struct burst_result two, cpu, span;
	struct lttng_result lttng;
	struct rate_summary rate1, rate2, rate1_fixed;
	long mem;
};

/* The no-loss rate, searched SEARCHES times: trials are short and this machine's stalls are not. */
static struct rate_summary summarize_rate(int threads, double seconds, unsigned int flags)
{
	struct rate_summary s = { 0 };
	double v[SEARCHES];

	for (int i = 0; i < SEARCHES; i++) {
		struct rate_trial t = find_rate(threads, seconds, flags);

		v[i] = t.achieved_total;
		if (i == 0 || t.achieved_total > s.best.achieved_total)
			s.best = t;
	}
	s.median = lkb_median(v, SEARCHES);
	s.min = v[0];
	s.max = v[SEARCHES - 1];
	return s;
}

static void print_lttng_side(const char *name, const struct lttng_side *s)
{
	lkb_row("%-34s %8ld %9.3f %10.3f %8.2fx   %.2fx (%.2fx..%.2fx)\n", name, s->burst, s->lowkey_ns, s->lttng_ns,
	        s->ratio_of_medians, s->ratio_median, s->ratio_min, s->ratio_max);
}

static void print_lttng_text(const struct lttng_result *l)
{
	lkb_row("\nbeside LTTng-UST 2.13, like for like: both tracers in one process (lowkey-bench-lttng) and one\n"
	        "thread, the same loop around each one's two-integer event, bursts of the same length;\n"
	        "lowkey and LTTng-UST alternate burst by burst (lowkey, LTTng-UST, lowkey, ...), %d rounds,\n"
	        "a %d ms pause after every enabled burst (lowkey's also waits until its consumer has written\n"
	        "it). ns/event: medians of the rounds; ratio: LTTng-UST / lowkey, of those medians, and the\n"
	        "median (min..max) of the per-round ratios\n", runs, PEER_PAUSE_MS);
	if (!l->have_off && !l->have_on) {
		lkb_row("%-34s %10s   (%s)\n", "LTTng-UST tracepoint", "n/a", l->missing ? l->missing : "not run");
		return;
	}
	lkb_row("%-34s %8s %9s %10s %9s   %s\n", "ns/event", "burst", "lowkey", "LTTng-UST", "ratio",
	        "per round");
	if (l->have_off)
		print_lttng_side("disabled (no trace, no session)", &l->off);
	if (l->have_on)
		print_lttng_side("enabled (trace, session)", &l->on);
	if (l->missing)
		lkb_row("(%s)\n", l->missing);
	if (l->have_on) {
		lkb_row("\nLTTng-UST enabled / lowkey enabled: %.1fx (ratio of the medians; per round %.1fx, "
		        "%.1fx..%.1fx)\n", l->on.ratio_of_medians, l->on.ratio_median, l->on.ratio_min,
		        l->on.ratio_max);
		if (l->on.lowkey_lost)
			lkb_row("(lowkey lost %llu events in the timed bursts)\n", l->on.lowkey_lost);
		if (l->discarded[0])
			lkb_row("(LTTng-UST: %s)\n", l->discarded);
	}
}

/* The text table, a row as soon as it is measured (lkb_row); JSON is printed at the end. */
static void text_heading(void)
{
	lkb_row("lowkey bench probe: what a probe costs, beside LTTng-UST\n");
	lkb_row("machine: %s\n", lkb_machine());
	lkb_row("method:  median of %d runs; enabled rows in bursts of %ld events that fit the buffer,\n"
		"         traces written to %s\n\n", runs, burst, trace_dir);
	lkb_row("%-46s %10s\n", "", "ns/event");
}

static void text_rate_heading(double seconds)
{
	lkb_row("\nsustained rate without loss, default buffer (2 MiB per thread, growing to 16 MiB while the\n"
		"consumer lags): the highest rate a %.1f s trial recorded with no event lost; median of %d\n"
		"searches (min, max)\n", seconds, SEARCHES);
}

static void text_rate(const char *name, const struct rate_summary *s)
{
	lkb_row("%-46s %10.1f M events/s (min %.1f, max %.1f)\n", name, s->median / 1e6, s->min / 1e6,
		s->max / 1e6);
}

static void json_lttng_side(struct lk__json *j, const char *key, const struct lttng_side *s, bool have)
{
	if (!have) {
		lk__json_null(j, key);
		return;
	}
	lk__json_object(j, key);
	lk__json_int(j, "burst", s->burst);
	lk__json_int(j, "rounds", s->rounds);
	lk__json_num(j, "lowkey_ns", s->lowkey_ns);
	lk__json_num(j, "lttng_ns", s->lttng_ns);
	lk__json_num(j, "ratio_of_medians", s->ratio_of_medians);
	lk__json_num(j, "ratio_per_round_median", s->ratio_median);
	lk__json_num(j, "ratio_per_round_min", s->ratio_min);
	lk__json_num(j, "ratio_per_round_max", s->ratio_max);
	lk__json_int(j, "lowkey_lost", (long long)s->lowkey_lost);
	lk__json_close(j);
}

/* The like-for-like comparison; ns_per_event.lttng_* hold its LTTng-UST medians. */
static void print_lttng_json(struct lk__json *j, const struct lttng_result *l)
{
	lk__json_object(j, "lttng_comparison");
	lk__json_str(j, "method", "one process (lowkey-bench-lttng), one thread, same burst length, "
				 "lowkey and LTTng-UST bursts alternating; ns: medians of the rounds; "
				 "ratio: LTTng-UST / lowkey");
	lk__json_str(j, "ratio", "ratio_of_medians");
	lk__json_int(j, "pause_ms", PEER_PAUSE_MS);
	json_lttng_side(j, "disabled", &l->off, l->have_off);
	json_lttng_side(j, "enabled", &l->on, l->have_on);
	lk__json_num(j, "lttng_enabled_over_lowkey_enabled", l->have_on ? l->on.ratio_of_medians : -1);
	if (l->discarded[0])
		lk__json_str(j, "lttng_discarded", l->discarded);
	else
		lk__json_null(j, "lttng_discarded");
	lk__json_close(j);
}

static void print_json(const struct results *r)
{
	struct lk__json j;

	lk__json_begin(&j, stdout, false);
	lk__json_str(&j, "bench", "probe");
	lk__json_str(&j, "machine", lkb_machine());
	lk__json_int(&j, "runs", runs);
	lk__json_int(&j, "burst", burst);
	lk__json_str(&j, "trace_dir", trace_dir);
	lk__json_object(&j, "ns_per_event");
	lk__json_num(&j, "empty_loop", r->empty_ns);
	lk__json_num(&j, "disabled", r->disabled_ns);
	lk__json_num(&j, "usdt_no_trace", r->usdt_ns);
	lk__json_num(&j, "usdt_span_no_trace", r->usdt_span_ns);
	lk__json_num(&j, "enabled_two_ints", r->two.ns);
	lk__json_num(&j, "enabled_with_cputime", r->cpu.ns);
	lk__json_num(&j, "span", r->span.ns);
	lk__json_num(&j, "lttng_disabled", r->lttng.have_off ? r->lttng.off.lttng_ns : -1);
	lk__json_num(&j, "lttng_enabled", r->lttng.have_on ? r->lttng.on.lttng_ns : -1);
	lk__json_close(&j);
	if (r->lttng.missing)
		lk__json_str(&j, "lttng_missing", r->lttng.missing);
	print_lttng_json(&j, &r->lttng);
	lk__json_object(&j, "sustained_events_per_s");
	lk__json_num(&j, "one_thread", r->rate1.median);
	lk__json_num(&j, "one_thread_min", r->rate1.min);
	lk__json_num(&j, "one_thread_max", r->rate1.max);
	lk__json_num(&j, "two_threads", r->rate2.median);
	lk__json_num(&j, "two_threads_min", r->rate2.min);
	lk__json_num(&j, "two_threads_max", r->rate2.max);
	lk__json_num(&j, "one_thread_fixed_buffer", r->rate1_fixed.median);
	lk__json_num(&j, "one_thread_fixed_buffer_min", r->rate1_fixed.min);
	lk__json_num(&j, "one_thread_fixed_buffer_max", r->rate1_fixed.max);
	lk__json_close(&j);
	lk__json_int(&j, "memory_per_thread_bytes", r->mem);
	lk__json_end(&j);
}

static const char probe_usage[] =
	"usage: lowkey bench probe [--runs N] [--burst N] [--seconds S] [--dir DIR] [--no-lttng] [-j|--json]\n"
	"\n"
	"What a probe costs: a disabled site, an enabled event (two integers), with the thread's CPU\n"
	"time, a span; beside LTTng-UST's tracepoint disabled and enabled into a session (the bench\n"
	"starts lttng-sessiond if none runs), like for like: both in one process, bursts of the same\n"
	"length alternating between the two. Then the highest rate one and two threads sustain with\n"
	"no event lost at the default buffer size, and the memory a recording thread uses.\n"
	"\n"
	"  --runs N      repetitions of each row, and rounds of the LTTng-UST comparison (default 21)\n"
	"  --burst N     events per timed burst of every enabled row, lowkey's and LTTng-UST's alike\n"
	"                (default 16384, at most 32768)\n"
	"  --seconds S   length of each sustained-rate trial (default 1)\n"
	"  --dir DIR     where the traces go (default /dev/shm, else /tmp)\n"
	"  --no-lttng    skip the LTTng-UST rows\n"
	"  -j, --json    print the figures as JSON\n";

static int probe_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "runs", required_argument, NULL, 'r' },
		{ "burst", required_argument, NULL, 'b' },
		{ "seconds", required_argument, NULL, 's' },
		{ "dir", required_argument, NULL, 'd' },
		{ "no-lttng", no_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	struct results r = { 0 };
	double seconds = 1.0;
	bool json = false, lttng = true;
	struct stat st;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "r:b:s:d:nj", opts, NULL)) != -1) {
		switch (c) {
		case 'r': runs = atoi(optarg); break;
		case 'b': burst = atol(optarg); break;
		case 's': seconds = atof(optarg); break;
		case 'd': trace_dir = optarg; break;
		case 'n': lttng = false; break;
		case 'j': json = true; break;
		default: fputs(probe_usage, stderr); return 2;
		}
	}
	if (runs < 1 || runs > 64 || burst < 2 || burst > MAX_BURST || seconds <= 0 || optind != argc) {
		fputs(probe_usage, stderr);
		return 2;
	}
	if (stat(trace_dir, &st) != 0 || !S_ISDIR(st.st_mode))
		trace_dir = "/tmp";

	if (lk_probe_enable("lkbench") < 0) {
		fprintf(stderr, "lowkey bench probe: %s\n", lk_last_error());
		return 1;
	}
	if (!json)
		text_heading();
	lkb_progress("empty loop, %d runs", runs);
	r.empty_ns = time_unrecorded(loop_empty);
	if (!json)
		lkb_row("%-46s %10.3f\n", "empty loop (baseline)", r.empty_ns);
	lkb_progress("disabled site, %d runs", runs);
	r.disabled_ns = time_unrecorded(loop_disabled);
	if (!json)
		lkb_row("%-46s %10.3f   (%+.3f over the empty loop)\n", "lowkey disabled site", r.disabled_ns,
			r.disabled_ns - r.empty_ns);
	lkb_progress("site on for a USDT tracer, no trace, %d runs", runs);
	if (lk_probe_usdt_enable("lkbench_usdt") < 0) {
		fprintf(stderr, "lowkey bench probe: %s\n", lk_last_error());
		return 1;
	}
	r.usdt_ns = time_unrecorded(loop_usdt);
	lkb_progress("span on for a USDT tracer, no trace, %d runs", runs);
	r.usdt_span_ns = time_unrecorded(loop_usdt_span);
	lk_probe_usdt_reset_rules();
	if (!json) {
		lkb_row("%-46s %10.3f   (%+.3f over the empty loop)\n", "lowkey site on for USDT, no trace", r.usdt_ns,
			r.usdt_ns - r.empty_ns);
		lkb_row("%-46s %10.3f   (begin and end)\n", "lowkey span on for USDT, no trace", r.usdt_span_ns);
	}
	lkb_progress("enabled event, %d runs", runs);
	r.two = time_bursts("two", lkb_loop_two_ints, 0, 1);
	if (!json && !r.two.err)
		lkb_row("%-46s %10.3f\n", "lowkey enabled event, 2 integers, TSC stamp", r.two.ns);
	lkb_progress("enabled event with CPU time, %d runs", runs);
	r.cpu = time_bursts("cpu", lkb_loop_two_ints, LK_TRACE_CPUTIME, 1);
	if (!json && !r.cpu.err)
		lkb_row("%-46s %10.3f\n", "lowkey enabled event + thread CPU time", r.cpu.ns);
	lkb_progress("span, %d runs", runs);
	r.span = time_bursts("span", loop_span, 0, 2);
	if (r.two.err || r.cpu.err || r.span.err) {
		fprintf(stderr, "lowkey bench probe: cannot trace: %s\n", lk_last_error());
		return 1;
	}
	if (!json) {
		lkb_row("%-46s %10.3f   (begin and end)\n", "lowkey span", r.span.ns);
		if (r.two.lost || r.cpu.lost || r.span.lost)
			lkb_row("(events lost during the timed bursts: %llu, %llu, %llu)\n",
				(unsigned long long)r.two.lost, (unsigned long long)r.cpu.lost,
				(unsigned long long)r.span.lost);
	}
	lkb_progress("beside LTTng-UST, %d rounds", runs);
	r.lttng = lttng ? bench_lttng() : (struct lttng_result){ .missing = "skipped (--no-lttng)" };
	if (!json) {
		print_lttng_text(&r.lttng);
		text_rate_heading(seconds);
	}
	lkb_progress("sustained rate, 1 thread, %d searches", SEARCHES);
	r.rate1 = summarize_rate(1, seconds, 0);
	if (!json)
		text_rate("1 producer thread", &r.rate1);
	lkb_progress("sustained rate, 2 threads, %d searches", SEARCHES);
	r.rate2 = lkb_ncpus() >= 2 ? summarize_rate(2, seconds, 0) : (struct rate_summary){ 0 };
	if (!json)
		text_rate("2 producer threads, together", &r.rate2);
	lkb_progress("sustained rate, fixed ring, %d searches", SEARCHES);
	r.rate1_fixed = summarize_rate(1, seconds, LK_TRACE_FIXED_BUFFER);
	if (!json)
		text_rate("1 thread, ring fixed at 2 MiB (no growth)", &r.rate1_fixed);
	lkb_progress("memory per thread");
	r.mem = memory_per_thread();
	if (json)
		print_json(&r);
	else
		lkb_row("\nmemory per recording thread: %ld KiB resident (the ring, allocated at its first event)\n",
			r.mem / 1024);
	return 0;
}

LK_BENCH(probe_bench, "probe", "probe cost off and on, beside LTTng-UST; sustained events/s",
	 probe_usage, probe_run);
