// SPDX-License-Identifier: MIT
/*
 * `lowkey report` on a trace of known shape: spans that sleep (long by wall time, short by CPU
 * time), spans that spin (CPU time close to wall time), a counter, two threads, and lost events.
 * And on traces it did not write: one cut inside its last packet (a program killed mid-write) is
 * reported up to there; a FIFO or a crafted index is refused at once.
 */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>
#include <cmocka.h>

#include <lowkey/lowkey.h>

#include "cli/run.h"
#include "trace_check.h"

static void sleepy(void)
{
	struct timespec ms2 = { 0, 2 * 1000 * 1000 };

	LK_SPAN(rep, sleepy);
	nanosleep(&ms2, NULL);
}

static void busy(void)
{
	volatile double x = 1;

	LK_SPAN(rep, busy);
	for (int i = 0; i < 2000000; i++)
		x = x * 1.0000001;
}

static void *second_thread(void *arg)
{
	(void)arg;
	for (int i = 0; i < 3; i++)
		busy();
	return NULL;
}

static struct lkt_run out;

static void report_of_known_trace(void **state)
{
	struct lk_trace_config c = { .flags = LK_TRACE_CPUTIME, .flush_ms = 5 };
	char dir[256];
	pthread_t t;

	(void)state;
	if (lkt_sh(&out, "command -v python3") != 0)
		skip();	/* the JSON is checked with python3 */
	assert_true(lk_probe_enable("rep") >= 0);
	lkt_path(dir, sizeof(dir), "report");
	c.path = dir;
	assert_int_equal(lk_trace_start(&c), 0);
	pthread_create(&t, NULL, second_thread, NULL);
	for (int i = 0; i < 5; i++) {
		sleepy();
		busy();
		LK_COUNTER(rep, level, i * 10);
	}
	pthread_join(t, NULL);
	assert_int_equal(lk_trace_stop(), 0);

	assert_int_equal(lkt_sh(&out, "%s report '%s'", LOWKEY, dir), 0);
	assert_non_null(strstr(out.out, "rep:sleepy"));
	assert_non_null(strstr(out.out, "p50 cpu"));

	lkt_sh(&out, "%s report --json '%s' | python3 -c '"
			 "import json,sys; d=json.load(sys.stdin); c={x[\"event\"]+x[\"kind\"]: x for x in d[\"classes\"]}\n"
			 "s=c[\"sleepyspan-begin\"]; b=c[\"busyspan-begin\"]; l=c[\"levelcounter\"]\n"
			 "assert s[\"spans\"]==5 and b[\"spans\"]==8, (s, b)\n"
			 "assert s[\"wall_ns\"][\"p50\"] >= 2e6, s\n"
			 "assert s[\"cpu_ns\"][\"p50\"] < 0.5 * s[\"wall_ns\"][\"p50\"], s\n"
			 "assert 0 < b[\"cpu_ns\"][\"p50\"] <= b[\"wall_ns\"][\"p50\"] + 1e5, b\n"
			 "assert l[\"count\"]==5 and l[\"min\"]==0 and l[\"max\"]==40 and l[\"last\"]==40, l\n"
			 "assert len(d[\"threads\"])==2 and d[\"lost\"]==0 and d[\"cputime\"]\n'",
			 LOWKEY, dir);
	if (out.status)
		print_error("%s\n", out.out);
	assert_int_equal(out.status, 0);
	lkt_rmrf(dir);
}

static void report_errors(void **state)
{
	(void)state;
	assert_int_equal(lkt_sh(&out, "%s report /nonexistent/trace", LOWKEY), 1);
	assert_non_null(strstr(out.out, "not a lowkey trace"));
	assert_int_equal(lkt_sh(&out, "%s report", LOWKEY), 2);
	assert_int_equal(lkt_sh(&out, "%s report a b", LOWKEY), 2);
}

static bool ticks_written(void *arg)
{
	struct lk_trace_stats st;

	lk_trace_stats(&st);
	return st.events >= *(uint64_t *)arg;
}

/* A trace of two packets at least: 20 ticks written before 20 more. */
static void two_packet_trace(char *dir, size_t len)
{
	struct lk_trace_config c = { .flush_ms = 5 };
	uint64_t first = 21;	/* and the thread's name */

	assert_true(lk_probe_enable("cut") >= 0);
	lkt_path(dir, len, "report-cut");
	c.path = dir;
	assert_int_equal(lk_trace_start(&c), 0);
	for (int i = 0; i < 20; i++)
		LK_PROBE(cut, tick, i);
	for (int i = 0; i < 6000 && !ticks_written(&first); i++)
		usleep(10000);
	for (int i = 0; i < 20; i++)
		LK_PROBE(cut, tick, i);
	assert_int_equal(lk_trace_stop(), 0);
}

/* Cut the trace's stream one byte before its end: inside its last packet. */
static void cut_last_packet(const char *dir)
{
	assert_int_equal(lkt_sh(&out, "f=$(ls -d '%s'/stream-*) && truncate -s -1 \"$f\"", dir), 0);
}

static void report_of_a_trace_cut_short(void **state)
{
	char dir[256];

	(void)state;
	two_packet_trace(dir, sizeof(dir));
	cut_last_packet(dir);
	lkt_sh(&out, "%s report '%s'", LOWKEY, dir);
	lkt_expect(&out, 0, "stream ends inside a packet");
	assert_non_null(strstr(out.out, "cut:tick"));
	lkt_sh(&out, "%s report --json '%s'", LOWKEY, dir);
	lkt_expect(&out, 0, "\"truncated_streams\":1");
	lkt_rmrf(dir);
}

static void report_refuses_what_is_not_a_trace(void **state)
{
	char dir[256], path[300];

	(void)state;
	two_packet_trace(dir, sizeof(dir));
	/* a FIFO named like a stream: refused at once, not waited on (the timeout is a hang guard) */
	snprintf(path, sizeof(path), "%s/stream-1", dir);
	assert_int_equal(mkfifo(path, 0600), 0);
	lkt_sh(&out, "timeout 120 %s report '%s'", LOWKEY, dir);
	lkt_expect(&out, 1, "stream-1 is not a regular file");
	unlink(path);

	/* an event id past the 16 bits records have: refused, nothing allocated for it */
	assert_int_equal(lkt_sh(&out, "printf 'event\\t99999999\\t1\\t0\\t0\\tp\\te\\tf.c:1\\t\\n' >> '%s/.lowkey-index'",
				dir), 0);
	lkt_sh(&out, "%s report '%s'", LOWKEY, dir);
	lkt_expect(&out, 1, "of the trace index .lowkey-index is damaged: a number out of range");
	lkt_rmrf(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(report_of_known_trace),
		cmocka_unit_test(report_errors),
		cmocka_unit_test(report_of_a_trace_cut_short),
		cmocka_unit_test(report_refuses_what_is_not_a_trace),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
