// SPDX-License-Identifier: MIT
/*
 * CTF that lowkey's writer did not write, read through libbabeltrace2:
 *  - a lowkey trace (nested spans with thread CPU time, a counter, named threads, events lost to
 *    a full ring) rewritten whole by babeltrace2 (--output-format=ctf) gives `lowkey report
 *    --json` what the original gives: rows, counts, spans and their percentiles to 2 ns, threads,
 *    names and lost events (compare_reports.py --converted);
 *  - the same cut by babeltrace2 with --begin/--end between two events: the report's rows count
 *    exactly the events of the original inside the cut, and its spans those wholly inside it;
 *    its events, with the thread names it reports, are babeltrace2's count of the cut;
 *  - an LTTng-UST trace of lttng_target (root, lttng-sessiond; skipped with the reason where it
 *    cannot run): babeltrace2's count of events, each thread's events and name, the spans of its
 *    _begin/_end tracepoints;
 *  - a directory without a CTF trace is refused, and a lowkey trace's damaged metadata is still
 *    lowkey's reader's to refuse, not babeltrace2's.
 * Skipped with the reason where babeltrace2, or the library's libbabeltrace2 reader, is missing.
 */
#include <errno.h>
#include <signal.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <lowkey/lowkey.h>

#include "cli/run.h"
#include "consumer_hold.h"
#include "trace_check.h"

static struct lkt_run out;

static void sleepy(void)
{
	struct timespec us100 = { 0, 100 * 1000 };

	LK_SPAN(fct, sleepy);
	nanosleep(&us100, NULL);
}

static void busy(int i)
{
	volatile double x = 1;

	LK_SPAN(fct, busy);
	for (int k = 0; k < 20000; k++)
		x = x * 1.0000001;
	LK_PROBE(fct, step, i, "text", (void *)&x);
	sleepy(); /* nested */
}

static void *second_thread(void *arg)
{
	char big[900];

	pthread_setname_np(pthread_self(), "fct-second");
	for (int i = 0; i < 20; i++)
		busy(i);
	if (arg) { /* a burst through a 4 KiB ring that nothing drains: some are lost */
		memset(big, 'x', sizeof(big) - 1);
		big[sizeof(big) - 1] = 0;
		lkt_hold_consumer(true);
		for (int i = 0; i < 500; i++)
			LK_PROBE(fct, burst, big);
		lkt_hold_consumer(false);
	}
	return NULL;
}

/* A CTF trace into dir; with lose, a small ring and a burst that overflows it. */
static void record(const char *dir, bool lose)
{
	struct lk_trace_config c = {
		.path = dir, .format = LK_TRACE_CTF, .flags = LK_TRACE_CPUTIME, .flush_ms = 20
	};
	pthread_t t;

	if (lose) {
		c.flags |= LK_TRACE_FIXED_BUFFER;
		c.buffer_size = 4096;
	}
	assert_true(lk_probe_enable("fct") >= 0);
	assert_int_equal(lk_trace_start(&c), 0);
	pthread_setname_np(pthread_self(), "fct-main");
	pthread_create(&t, NULL, second_thread, lose ? "burst" : NULL);
	for (int i = 0; i < 30; i++) {
		busy(i);
		LK_COUNTER(fct, level, i * 10 - 50);
	}
	pthread_join(t, NULL);
	assert_int_equal(lk_trace_stop(), 0);
}

/* babeltrace2 is there, and this library reads through libbabeltrace2; else the test skips. */
static bool can_rewrite(const char *dir)
{
	if (lkt_sh(&out, "command -v babeltrace2") != 0) {
		print_message("babeltrace2 is not installed (deps/probe.deps)\n");
		return false;
	}
	lkt_sh(&out,
	       "babeltrace2 '%s' --output-format=ctf --output='%s.probe' && %s report '%s.probe'",
	       dir, dir, LOWKEY, dir);
	if (strstr(out.out, "built without (apt-get") || strstr(out.out, "cannot load")) {
		print_message("%s\n", out.out);
		return false;
	}
	lkt_sh(&out, "rm -rf '%s.probe'", dir);
	return true;
}

static void cleanup(const char *dir)
{
	lkt_sh(&out, "rm -rf '%s.bt' '%s.cut' '%s.probe' '%s'.r1 '%s'.r2 '%s'.want", dir, dir, dir,
	       dir, dir, dir);
	lkt_rmrf(dir);
}

/*
 * The public reader gives the rewritten trace's events as the original's: the same threads, names,
 * kinds and arguments, and the same times on CLOCK_MONOTONIC (to the rewritten clock's rounding).
 */
static void same_events(const char *dir, const char *copy)
{
	struct lk_trace_file *a, *b;
	struct lk_trace_event x, y;
	uint64_t n = 0;
	int ra, rb;

	assert_int_equal(lk_trace_file_open(dir, &a), 0);
	assert_int_equal(lk_trace_file_open(copy, &b), 0);
	while ((ra = lk_trace_file_next(a, &x)) == 1 && (rb = lk_trace_file_next(b, &y)) == 1) {
		assert_true(x.ns - y.ns + 2 <= 4); /* within 2 ns either way */
		assert_int_equal(x.tid, y.tid);
		assert_int_equal(x.kind, y.kind);
		assert_string_equal(x.name, y.name);
		assert_string_equal(x.thread_name, y.thread_name);
		assert_int_equal(x.nargs, y.nargs);
		for (unsigned int i = 0; i < x.nargs; i++) {
			struct lk_trace_arg ax, ay;

			assert_int_equal(lk_trace_event_arg(&x, i, &ax), 0);
			assert_int_equal(lk_trace_event_arg(&y, i, &ay), 0);
			assert_string_equal(ax.name, ay.name);
			assert_int_equal(ax.type, ay.type);
			if (ax.type == LK_PROBE_STR)
				assert_string_equal(ax.v.str, ay.v.str);
			else
				assert_true(ax.v.u64 == ay.v.u64);
		}
		assert_true(x.cpu_ns == y.cpu_ns);
		n++;
	}
	assert_int_equal(ra, 0);
	assert_int_equal(lk_trace_file_next(b, &y), 0);
	assert_true(n > 0);
	lk_trace_file_close(a);
	lk_trace_file_close(b);
}

static void a_rewritten_trace_reports_as_the_original(void **state)
{
	char dir[256];

	(void)state;
	lkt_path(dir, sizeof(dir), "foreign-whole");
	record(dir, true);
	if (!can_rewrite(dir)) {
		cleanup(dir);
		skip();
	}
	lkt_sh(&out, "babeltrace2 '%s' --output-format=ctf --output='%s.bt'", dir, dir);
	lkt_expect(&out, 0, NULL);
	lkt_sh(&out,
	       "%s report --json '%s' > '%s.r1' && %s report --json '%s.bt' > '%s.r2' && "
	       "python3 '%s' --converted '%s.r1' '%s.r2' ctf",
	       LOWKEY, dir, dir, LOWKEY, dir, dir, COMPARE, dir, dir);
	lkt_expect(&out, 0, "converted agrees: ");
	same_events(dir, strcat(strcpy(out.out, dir), ".bt"));
	/* the losses are there to compare */
	lkt_sh(&out,
	       "python3 -c 'import json,sys; sys.exit(json.load(open(\"%s.r2\"))[\"lost\"] == 0)'",
	       dir);
	lkt_expect(&out, 0, NULL);
	cleanup(dir);
}

/* ---- the cut ---- */

struct seen {
	uint64_t *ns;
	size_t n, cap;
};

static void push_ns(struct seen *s, uint64_t ns)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 1024;
		s->ns = realloc(s->ns, s->cap * sizeof(*s->ns));
		assert_non_null(s->ns);
	}
	s->ns[s->n++] = ns;
}

/* Every event's time in the original (the reader gives them in time order). */
static void event_times(const char *dir, struct seen *s)
{
	struct lk_trace_file *tf;
	struct lk_trace_event ev;
	int rc;

	assert_int_equal(lk_trace_file_open(dir, &tf), 0);
	while ((rc = lk_trace_file_next(tf, &ev)) == 1)
		push_ns(s, ev.ns);
	assert_int_equal(rc, 0);
	lk_trace_file_close(tf);
}

/*
 * A time in the middle of a gap of more than 20 ns between two events, near the fraction at of
 * the trace: the rewritten clock may round an event's time 1 ns from lowkey's reader.
 */
static uint64_t gap_near(const struct seen *s, double at)
{
	for (size_t i = (size_t)(at * (double)s->n); i + 1 < s->n; i++)
		if (s->ns[i + 1] - s->ns[i] > 20)
			return s->ns[i] + (s->ns[i + 1] - s->ns[i]) / 2;
	fail_msg("no gap between events after %.0f%% of the trace", at * 100);
	return 0;
}

/*
 * What a cut to [begin, end] keeps of the original, as the report's rows print it (one line a
 * row: provider:event kind count spans), into path: the events inside, and the spans begun and
 * ended inside (no span of this program nests in one of its own name).
 */
static void expected_rows(const char *dir, uint64_t begin, uint64_t end, const char *path)
{
	static const char *const kinds[] = { "?", "event", "span-begin", "span-end", "counter" };
	struct lk_trace_file *tf;
	struct lk_trace_event ev;
	struct lk_trace_class cls;
	uint64_t count[64] = { 0 }, spans[64] = { 0 };
	FILE *f = fopen(path, "w");
	int rc;

	assert_non_null(f);
	assert_int_equal(lk_trace_file_open(dir, &tf), 0);
	while ((rc = lk_trace_file_next(tf, &ev)) == 1) {
		if (ev.type != LK_TRACE_EV_PROBE || ev.ns < begin || ev.ns > end)
			continue;
		assert_true(ev.class_id < 64);
		count[ev.class_id]++;
		if (ev.kind == LK_PROBE_SPAN_END && ev.paired && ev.begin_ns >= begin)
			spans[ev.begin_class_id]++;
	}
	assert_int_equal(rc, 0);
	for (unsigned int id = 0; id < lk_trace_file_get_info(tf)->classes && id < 64; id++) {
		assert_int_equal(lk_trace_file_class(tf, id, &cls), 0);
		if (count[id] && strcmp(cls.provider, "lowkey") != 0)
			fprintf(f, "%s:%s %s %" PRIu64 " %" PRIu64 "\n", cls.provider, cls.name,
				kinds[cls.kind <= 4 ? cls.kind : 0], count[id], spans[id]);
	}
	lk_trace_file_close(tf);
	fclose(f);
}

/* The trace's env: lowkey_realtime0_ns - lowkey_monotonic0_ns, babeltrace2's clock from ours. */
static int64_t realtime_offset(const char *dir)
{
	long long real0 = 0, mono0 = 0;

	lkt_sh(&out, "grep -h 'lowkey_realtime0_ns\\|lowkey_monotonic0_ns' '%s/metadata'", dir);
	assert_non_null(strstr(out.out, "lowkey_realtime0_ns"));
	sscanf(strstr(out.out, "lowkey_realtime0_ns"), "lowkey_realtime0_ns = %lld", &real0);
	sscanf(strstr(out.out, "lowkey_monotonic0_ns"), "lowkey_monotonic0_ns = %lld", &mono0);
	assert_true(real0 > 0);
	return real0 - mono0;
}

static void a_cut_reports_what_it_keeps(void **state)
{
	char dir[256];
	struct seen s = { 0 };
	uint64_t begin, end, events = 0, names = 0, theirs;
	int64_t offset;

	(void)state;
	lkt_path(dir, sizeof(dir), "foreign-cut");
	record(dir, false);
	if (!can_rewrite(dir)) {
		cleanup(dir);
		skip();
	}
	event_times(dir, &s);
	begin = gap_near(&s, 0.3);
	end = gap_near(&s, 0.7);
	free(s.ns);
	expected_rows(dir, begin, end, strcat(strcpy(out.out, dir), ".want"));
	offset = realtime_offset(dir);
	lkt_sh(&out,
	       "babeltrace2 '%s' --begin=%" PRIu64 ".%09" PRIu64 " --end=%" PRIu64 ".%09" PRIu64
	       " --output-format=ctf --output='%s.cut'",
	       dir, (begin + offset) / 1000000000u, (begin + offset) % 1000000000u,
	       (end + offset) / 1000000000u, (end + offset) % 1000000000u, dir);
	lkt_expect(&out, 0, NULL);
	lkt_sh(&out,
	       "%s report --json '%s.cut' > '%s.r2' && python3 -c 'import json; "
	       "r = json.load(open(\"%s.r2\")); "
	       "print(\"\\n\".join(\"%%s:%%s %%s %%d %%d\" %% (c[\"provider\"], c[\"event\"], "
	       "c[\"kind\"], c[\"count\"], c.get(\"spans\", 0)) for c in r[\"classes\"]))' | "
	       "diff '%s.want' -",
	       LOWKEY, dir, dir, dir, dir);
	lkt_expect(&out, 0, NULL);
	/* the report's events and thread names are what babeltrace2 counts */
	lkt_sh(&out, "%s report '%s.cut' | head -2", LOWKEY, dir);
	lkt_expect(&out, 0, " events over ");
	events = strtoull(strstr(out.out, "), ") + 3, NULL, 10);
	if (strstr(out.out, "not counted as events: "))
		names = strtoull(strstr(out.out, "not counted as events: ") + 23, NULL, 10);
	lkt_sh(&out, "babeltrace2 '%s.cut' | wc -l", dir);
	lkt_expect(&out, 0, NULL);
	theirs = strtoull(out.out, NULL, 10);
	if (events + names != theirs)
		print_error("report: %" PRIu64 " events + %" PRIu64 " names; babeltrace2: %" PRIu64
			    "\n",
			    events, names, theirs);
	assert_true(events > 0 && events + names == theirs);
	cleanup(dir);
}

/* ---- LTTng-UST ---- */

#define LTTNG_SPANS 20 /* thread k of lttng_target makes LTTNG_SPANS * (k + 1) spans */

static bool lttng_usable(pid_t *started, char *why, size_t len)
{
	FILE *f;
	long pid = 0;

	*started = 0;
	if (!LTTNG_TARGET[0]) {
		snprintf(why, len,
			 "lttng_target was not built: liblttng-ust-dev is missing "
			 "(deps/probe-bench.deps)");
		return false;
	}
	if (geteuid() != 0) {
		snprintf(why, len, "lttng-sessiond is run as root here, and this is not root");
		return false;
	}
	if (lkt_sh(&out, "command -v lttng && command -v lttng-sessiond") != 0) {
		snprintf(why, len, "lttng-tools is not installed (deps/probe-bench.deps)");
		return false;
	}
	if (lkt_sh(&out, "lttng list") == 0)
		return true;
	if (lkt_sh(&out, "lttng-sessiond --daemonize") != 0) {
		snprintf(why, len, "lttng-sessiond cannot run here: %.400s", out.out);
		return false;
	}
	f = fopen("/var/run/lttng/lttng-sessiond.pid", "re");
	if (f && fscanf(f, "%ld", &pid) == 1)
		*started = (pid_t)pid;
	if (f)
		fclose(f);
	return true;
}

/* Thread k's line of lttng_target's output: its tid. */
static int target_tid(const char *text, int k)
{
	char line[32];
	const char *p;

	snprintf(line, sizeof(line), " lkf-%d\n", k);
	p = strstr(text, line);
	assert_non_null(p);
	while (p > text && p[-1] != ' ')
		p--;
	return atoi(p);
}

static void an_lttng_ust_trace_reads_as_babeltrace2_counts(void **state)
{
	char dir[256], session[64], why[512], printed[4096] = "";
	unsigned long long theirs;
	pid_t started;

	(void)state;
	if (!lttng_usable(&started, why, sizeof(why))) {
		print_message("%s\n", why);
		skip();
	}
	lkt_path(dir, sizeof(dir), "foreign-lttng");
	snprintf(session, sizeof(session), "lkforeign-%d", (int)getpid());
	lkt_sh(&out,
	       "set -e; lttng create %s --output='%s'; lttng enable-event -u -s %s 'lkforeign:*'; "
	       "lttng add-context -u -s %s -t vtid -t vpid -t procname; lttng start %s",
	       session, dir, session, session, session);
	if (out.status == 0) {
		lkt_sh(&out, "%s %d", LTTNG_TARGET, LTTNG_SPANS);
		snprintf(printed, sizeof(printed), "%.4000s", out.out);
	}
	lkt_sh(&out, "lttng stop %s; lttng destroy %s", session, session);
	if (started > 0) /* the daemon this test started, by its pid */
		kill(started, SIGTERM);
	assert_non_null(strstr(printed, " lkf-2\n"));
	if (!can_rewrite(dir)) {
		cleanup(dir);
		skip();
	}
	lkt_sh(&out, "babeltrace2 '%s' | wc -l", dir);
	lkt_expect(&out, 0, NULL);
	theirs = strtoull(out.out, NULL, 10);
	assert_int_equal(theirs, 3 * LTTNG_SPANS * (1 + 2 + 3));
	lkt_sh(&out,
	       "%s report --json '%s' > '%s.r1' && python3 -c 'import json; "
	       "r = json.load(open(\"%s.r1\")); "
	       "print(r[\"events\"], r[\"pid\"], r[\"procname\"]); "
	       "[print(\"thread\", t[\"tid\"], t[\"name\"], t[\"events\"]) for t in r[\"threads\"]]; "
	       "[print(\"row\", c[\"provider\"], c[\"event\"], c[\"kind\"], c[\"count\"], "
	       "c.get(\"spans\", 0)) for c in r[\"classes\"]]'",
	       LOWKEY, dir, dir, dir);
	lkt_expect(&out, 0, NULL);
	assert_int_equal(strtoull(out.out, NULL, 10), theirs);
	for (int k = 0; k < 3; k++) {
		char line[64];

		snprintf(line, sizeof(line), "thread %d lkf-%d %d\n", target_tid(printed, k), k,
			 3 * LTTNG_SPANS * (k + 1));
		if (!strstr(out.out, line))
			print_error("no \"%s\" in:\n%s\n", line, out.out);
		assert_non_null(strstr(out.out, line));
	}
	assert_non_null(strstr(out.out, "row lkforeign work span-begin 120 120\n"));
	assert_non_null(strstr(out.out, "row lkforeign work span-end 120 0\n"));
	assert_non_null(strstr(out.out, "row lkforeign note event 120 0\n"));
	cleanup(dir);
}

/* A directory with no CTF trace in it or below it, and lowkey's own damaged metadata: refused. */
static void what_is_not_a_trace_is_refused(void **state)
{
	char dir[256];

	(void)state;
	lkt_path(dir, sizeof(dir), "foreign-none");
	record(dir, false);
	if (!can_rewrite(dir)) {
		cleanup(dir);
		skip();
	}
	lkt_sh(&out, "mkdir -p '%s.bt/a/b' && touch '%s.bt/a/b/stream' && %s report '%s.bt'", dir,
	       dir, LOWKEY, dir);
	lkt_expect(&out, 1, "not a CTF trace: no metadata file in it or below it");
	/* lowkey's metadata damaged after its first lines is still lowkey's reader's to refuse */
	lkt_sh(&out, "sed -i 's/^env {/env {{/' '%s/metadata' && %s report '%s'", dir, LOWKEY, dir);
	lkt_expect(&out, 1, "of its metadata is damaged");
	cleanup(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_rewritten_trace_reports_as_the_original),
		cmocka_unit_test(a_cut_reports_what_it_keeps),
		cmocka_unit_test(an_lttng_ust_trace_reads_as_babeltrace2_counts),
		cmocka_unit_test(what_is_not_a_trace_is_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
