// SPDX-License-Identifier: MIT
/*
 * `lowkey report` on a trace of known shape: spans that sleep (long by wall time, short by CPU
 * time), spans that spin (CPU time close to wall time), a counter, two threads, and lost events.
 * And on traces it did not write: one cut inside its last packet (a program killed mid-write) is
 * reported up to there; a FIFO or a crafted index is refused at once. A site registered again
 * (its library dlopen()ed again) is one row, not one per registration.
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
		skip(); /* the JSON is checked with python3 */
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

	lkt_sh(&out,
	       "%s report --json '%s' | python3 -c '"
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
	/* a trace that is not there cannot be opened; it is not called a bad trace */
	assert_int_equal(lkt_sh(&out, "%s report /nonexistent/trace", LOWKEY), 1);
	assert_non_null(
		strstr(out.out, "cannot open /nonexistent/trace: No such file or directory"));
	assert_null(strstr(out.out, "not a lowkey trace"));
	assert_int_equal(
		lkt_sh(&out, "%s convert /nonexistent/trace -o \"$(mktemp -u).json\"", LOWKEY), 1);
	assert_non_null(
		strstr(out.out, "cannot open /nonexistent/trace: No such file or directory"));
	assert_null(strstr(out.out, "not a lowkey trace"));
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
	uint64_t first = 20;

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
	lkt_expect(&out, 0, "\"truncated_streams\": 1");
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
	assert_int_equal(
		lkt_sh(&out,
		       "printf 'event {\\n\\tname = \"p:e\";\\n\\tid = 99999999;\\n};\\n' >> '%s/metadata'",
		       dir),
		0);
	lkt_sh(&out, "%s report '%s'", LOWKEY, dir);
	lkt_expect(&out, 1, "of its metadata is damaged: an event number out of range");
	/* and in the index of a trace of lowkey before format 3, which is read first */
	assert_int_equal(
		lkt_sh(&out,
		       "printf 'lowkey-trace 2\\ntsc_hz 1000\\nevent\\t99999999\\t1\\t0\\t0\\tp\\te\\tf.c:1\\t\\n' "
		       "> '%s/.lowkey-index'",
		       dir),
		0);
	lkt_sh(&out, "%s report '%s'", LOWKEY, dir);
	lkt_expect(&out, 1, "of the trace index .lowkey-index is damaged: a number out of range");
	lkt_rmrf(dir);
}

/*
 * A trace written by hand: index lines for classes, and one packet of records (no arguments) of
 * these ids, 1000 cycles apart, from thread 7.
 */
static void synthetic_trace(const char *dir, const char *classes, const uint16_t *ids, size_t n)
{
	uint8_t packet[4096] = { 0 };
	uint64_t bits, v;
	size_t len = 88;
	char path[512];
	FILE *f;

	assert_int_equal(mkdir(dir, 0755), 0);
	snprintf(path, sizeof(path), "%s/.lowkey-index", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f,
		"lowkey-trace 2\ntsc_hz 1000000000\ntsc0 0\nmonotonic0_ns 0\npid 1\nprocname synth\n%s",
		classes);
	fclose(f);
	for (size_t i = 0; i < n; i++, len += 8) {
		v = (uint64_t)(1000 * (i + 1)) << 16 | ids[i];
		memcpy(packet + len, &v, 8);
	}
	memcpy(packet, &(uint32_t){ 0xc1fc1fc1u }, 4);
	memcpy(packet + 32, &(uint64_t){ 1000 }, 8); /* timestamp_begin */
	bits = len * 8;
	memcpy(packet + 48, &bits, 8); /* content_size */
	memcpy(packet + 56, &bits, 8); /* packet_size */
	snprintf(path, sizeof(path), "%s/stream-7", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(packet, 1, len, f), len);
	fclose(f);
}

static void a_site_registered_again_is_one_row(void **state)
{
	/* gen:tick in three registrations (a library dlopen()ed three times), gen:work's span in two */
	static const char classes[] = "event\t16\t1\t0\t0\tgen\ttick\tlib.c:5\t\n"
				      "event\t17\t1\t0\t0\tgen\ttick\tlib.c:5\t\n"
				      "event\t18\t1\t0\t0\tgen\ttick\tlib.c:5\t\n"
				      "event\t19\t2\t0\t0\tgen\twork\tlib.c:9\t\n"
				      "event\t20\t3\t0\t0\tgen\twork\tlib.c:9\t\n"
				      "event\t21\t2\t0\t0\tgen\twork\tlib.c:9\t\n"
				      "event\t22\t3\t0\t0\tgen\twork\tlib.c:9\t\n"
				      "event\t23\t1\t0\t0\tgen\tother\tlib.c:7\t\n";
	static const uint16_t ids[] = { 16, 17, 18, 19, 20, 21, 22, 23, 18 };
	char dir[256];

	(void)state;
	if (lkt_sh(&out, "command -v python3") != 0)
		skip(); /* the JSON is checked with python3 */
	lkt_path(dir, sizeof(dir), "report-generations");
	synthetic_trace(dir, classes, ids, sizeof(ids) / sizeof(ids[0]));
	assert_int_equal(lkt_sh(&out, "%s report '%s' | grep -c 'gen:tick '", LOWKEY, dir), 0);
	assert_int_equal(atoi(out.out), 1);
	lkt_sh(&out,
	       "%s report --json '%s' | python3 -c '"
	       "import json,sys; d=json.load(sys.stdin)\n"
	       "c=[(x[\"event\"], x[\"kind\"], x[\"count\"], x.get(\"spans\")) for x in d[\"classes\"]]\n"
	       "assert sorted(c)==[(\"other\",\"event\",1,None),(\"tick\",\"event\",4,None),"
	       "(\"work\",\"span-begin\",2,2),(\"work\",\"span-end\",2,None)], c\n'",
	       LOWKEY, dir);
	if (out.status)
		print_error("%s\n", out.out);
	assert_int_equal(out.status, 0);
	lkt_rmrf(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(report_of_known_trace),
		cmocka_unit_test(report_errors),
		cmocka_unit_test(report_of_a_trace_cut_short),
		cmocka_unit_test(report_refuses_what_is_not_a_trace),
		cmocka_unit_test(a_site_registered_again_is_one_row),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
