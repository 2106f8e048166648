// SPDX-License-Identifier: MIT
/*
 * `lowkey report` on one run in each of lowkey's formats: a CTF trace recorded here (spans that
 * sleep and spans that spin, nested, with thread CPU time; a counter; two named threads; events
 * lost, too large for the ring or to a full one), converted to JSON and Perfetto with `lowkey
 * convert`, reported with --json in each format and compared by compare_reports.py (the same
 * rows, counts, percentiles to the formats' nanosecond, threads, lost events); the text report
 * names the same rows with the same counts; --html names them in the same order. With --sched
 * (where perf_event_open allows it), the same split of the spans' time into on-CPU, runnable and
 * blocked. The same program recorded in each format by lk_trace_start reports the same rows and
 * counts. `lowkey convert` takes each format into each other (and into itself), and the report of
 * every result, after one conversion or two, is the CTF trace's. And files that are not lowkey's
 * traces, or are cut short, are refused with a message and exit status 1, by report and convert.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <cmocka.h>

#include <lowkey/lowkey.h>

#include "cli/run.h"
#include "trace_check.h"

static struct lkt_run out;

static void sleepy(void)
{
	struct timespec us300 = { 0, 300 * 1000 };

	LK_SPAN(fmt, sleepy);
	nanosleep(&us300, NULL);
}

static void busy(void)
{
	volatile double x = 1;

	LK_SPAN(fmt, busy);
	for (int i = 0; i < 200000; i++)
		x = x * 1.0000001;
	sleepy(); /* nested */
}

#define OVERSIZED 10

static void burst(const char *text)
{
	LK_PROBE(fmt, burst, text);
}

static void *second_thread(void *arg)
{
	char big[600], huge[LK_PROBE_STRING_MAX + 1];

	pthread_setname_np(pthread_self(), "fmt-second");
	for (int i = 0; i < 4; i++)
		busy();
	if (arg) {
		/*
		 * Larger than a record may be in a 4 KiB ring (a quarter of it): each of these is
		 * lost, whatever the timing; the burst after them loses more if the consumer lags.
		 */
		memset(huge, 'y', sizeof(huge) - 1);
		huge[sizeof(huge) - 1] = 0;
		for (int i = 0; i < OVERSIZED; i++)
			burst(huge);
		memset(big, 'x', sizeof(big) - 1);
		big[sizeof(big) - 1] = 0;
		for (int i = 0; i < 2000; i++) /* 1.2 MB in a tight loop through a 4 KiB ring */
			burst(big);
	}
	return NULL;
}

/* Record a trace into path in format; -1 (and a skip) where context switches cannot be recorded. */
static int record_as(const char *path, enum lk_trace_format format, unsigned int flags)
{
	struct lk_trace_config c = {
		.path = path, .format = format, .flags = LK_TRACE_CPUTIME | flags, .flush_ms = 20
	};
	pthread_t t;
	int rc;

	if (flags & LK_TRACE_FIXED_BUFFER)
		c.buffer_size =
			4096; /* the oversized events are lost, and maybe some of the burst */
	assert_true(lk_probe_enable("fmt") >= 0);
	rc = lk_trace_start(&c);
	if ((flags & LK_TRACE_SCHED) && rc != 0) {
		print_message("context switches cannot be recorded here: %s\n", lk_last_error());
		return -1;
	}
	assert_int_equal(rc, 0);
	pthread_setname_np(pthread_self(), "fmt-main");
	pthread_create(&t, NULL, second_thread, flags & LK_TRACE_FIXED_BUFFER ? "burst" : NULL);
	for (int i = 0; i < 6; i++) {
		sleepy();
		busy();
		LK_COUNTER(fmt, level, i * 10 - 20);
	}
	pthread_join(t, NULL);
	assert_int_equal(lk_trace_stop(), 0);
	return 0;
}

/* A CTF trace, with events lost to a 4 KiB ring unless it records context switches. */
static int record(const char *dir, unsigned int flags)
{
	return record_as(dir, LK_TRACE_CTF,
			 flags | (flags & LK_TRACE_SCHED ? 0 : LK_TRACE_FIXED_BUFFER));
}

/* dir's trace as dir.json and dir.pftrace; `lowkey report --json` of all three agree. */
static void convert_and_compare(const char *dir)
{
	assert_int_equal(lkt_sh(&out,
				"%s convert '%s' -o '%s.json' && %s convert '%s' -o '%s.pftrace'",
				LOWKEY, dir, dir, LOWKEY, dir, dir),
			 0);
	lkt_sh(&out,
	       "%s report --json '%s' > '%s.r1' && %s report --json '%s.json' > '%s.r2' && "
	       "%s report --json '%s.pftrace' > '%s.r3' && python3 '%s' '%s.r1' '%s.r2' '%s.r3'",
	       LOWKEY, dir, dir, LOWKEY, dir, dir, LOWKEY, dir, dir, COMPARE, dir, dir, dir);
	lkt_expect(&out, 0, "agree: ");
}

/* The text report's event rows (name and count) are the same in the three formats. */
static void same_text_rows(const char *dir)
{
	lkt_sh(&out,
	       "for f in '%s' '%s.json' '%s.pftrace'; do %s report \"$f\" | "
	       "sed -n '/^events/,/^$/p' | awk '{print $1, $2}' > \"$f.rows\" || exit 1; done; "
	       "cmp '%s.rows' '%s.json.rows' && cmp '%s.rows' '%s.pftrace.rows' && grep -c fmt: '%s.rows'",
	       dir, dir, dir, LOWKEY, dir, dir, dir, dir, dir);
	lkt_expect(&out, 0, NULL);
	assert_true(atoi(out.out) >= 3);
}

static void cleanup(const char *dir)
{
	lkt_sh(&out,
	       "rm -f '%s'.json* '%s'.pftrace* '%s'.r1 '%s'.r2 '%s'.r3 '%s'.rows '%s'.html '%s'.names",
	       dir, dir, dir, dir, dir, dir, dir, dir);
	lkt_rmrf(dir);
}

/*
 * A JSON or Perfetto trace cannot carry the bytes of streams cut short nor the switches the
 * kernel lost: its text report does not raise either, on every trace, as if something were wrong.
 */
static void no_alarm_for_what_the_format_cannot_carry(const char *report)
{
	if (strstr(report, "cut short") || strstr(report, "kernel lost"))
		print_error("%s\n", report);
	assert_null(strstr(report, "cut short"));
	assert_null(strstr(report, "kernel lost"));
}

static void one_run_in_three_formats(void **state)
{
	char dir[256];

	(void)state;
	if (lkt_sh(&out, "command -v python3") != 0)
		skip(); /* the reports are compared with python3 */
	lkt_path(dir, sizeof(dir), "report-formats");
	record(dir, 0);
	convert_and_compare(dir);
	same_text_rows(dir);
	lkt_sh(&out, "%s report --json '%s' | grep -o '\"lost\": [0-9]*' | head -1", LOWKEY, dir);
	/* the oversized events at least were lost: the comparison covered lost counts */
	assert_true(atoi(out.out + 7) >= OVERSIZED);
	/* the page names the rows in the same order from each format */
	lkt_sh(&out,
	       "for f in '%s' '%s.json' '%s.pftrace'; do %s report --html \"$f.html\" \"$f\" && "
	       "grep -o 'fmt:[a-z]*' \"$f.html\" | uniq > \"$f.names\" || exit 1; done; "
	       "cmp '%s.names' '%s.json.names' && cmp '%s.names' '%s.pftrace.names' && grep -c fmt:sleepy '%s.names'",
	       dir, dir, dir, LOWKEY, dir, dir, dir, dir, dir);
	lkt_expect(&out, 0, NULL);
	assert_true(atoi(out.out) >= 1);
	lkt_sh(&out, "%s report '%s.json'", LOWKEY, dir);
	lkt_expect(&out, 0, "read from lowkey's Chrome JSON output");
	no_alarm_for_what_the_format_cannot_carry(out.out);
	lkt_sh(&out, "%s report '%s.pftrace'", LOWKEY, dir);
	lkt_expect(&out, 0, "read from lowkey's Perfetto output");
	no_alarm_for_what_the_format_cannot_carry(out.out);
	cleanup(dir);
}

static void one_run_with_context_switches(void **state)
{
	char dir[256];

	(void)state;
	if (lkt_sh(&out, "command -v python3") != 0)
		skip();
	lkt_path(dir, sizeof(dir), "report-formats-sched");
	if (record(dir, LK_TRACE_SCHED) != 0) {
		lkt_rmrf(dir);
		skip();
	}
	convert_and_compare(dir);
	lkt_sh(&out, "%s report '%s.pftrace'", LOWKEY, dir);
	lkt_expect(&out, 0, "spans (time, --sched)");
	no_alarm_for_what_the_format_cannot_carry(out.out);
	lkt_sh(&out, "%s report '%s.json'", LOWKEY, dir);
	lkt_expect(&out, 0, "JSON has the intervals off the CPU, not the switches");
	no_alarm_for_what_the_format_cannot_carry(out.out);
	cleanup(dir);
}

/*
 * The same program recorded three times, in each format as lk_trace_start writes it (JSON
 * converted at the stop, Perfetto written while it records): the same rows and counts.
 */
static void the_program_recorded_in_each_format(void **state)
{
	char dir[256];

	(void)state;
	if (lkt_sh(&out, "command -v python3") != 0)
		skip();
	lkt_path(dir, sizeof(dir), "report-runs");
	record_as(dir, LK_TRACE_CTF, 0);
	lkt_sh(&out, "mv '%s' '%s.ctf'", dir, dir);
	record_as(dir, LK_TRACE_JSON, 0);
	lkt_sh(&out, "mv '%s' '%s.json'", dir, dir);
	record_as(dir, LK_TRACE_PERFETTO, 0);
	lkt_sh(&out, "mv '%s' '%s.pftrace'", dir, dir);
	lkt_sh(&out,
	       "%s report --json '%s.ctf' > '%s.r1' && %s report --json '%s.json' > '%s.r2' && "
	       "%s report --json '%s.pftrace' > '%s.r3' && python3 '%s' --runs '%s.r1' '%s.r2' '%s.r3'",
	       LOWKEY, dir, dir, LOWKEY, dir, dir, LOWKEY, dir, dir, COMPARE, dir, dir, dir);
	lkt_expect(&out, 0, "runs agree: ");
	lkt_sh(&out, "rm -rf '%s.ctf'", dir);
	cleanup(dir);
}

/*
 * The text report's count of events, with the records it says it did not count as events, is
 * babeltrace2's count of the trace's events: it leaves nothing out without saying so.
 */
static void report_counts_what_babeltrace2_counts(void **state)
{
	char dir[256];
	unsigned long long events = 0, names = 0, switches = 0, theirs;

	(void)state;
	if (lkt_sh(&out, "command -v babeltrace2") != 0)
		skip(); /* the count is compared with babeltrace2's */
	lkt_path(dir, sizeof(dir), "report-count");
	if (record(dir, LK_TRACE_SCHED) != 0) {
		lkt_rmrf(dir);
		skip(); /* perf_event_open denied: no context switches (test_probe_sched says why) */
	}
	lkt_sh(&out, "%s report '%s' | head -2", LOWKEY, dir);
	lkt_expect(&out, 0, "not counted as events: ");
	assert_non_null(strstr(out.out, " events over "));
	events = strtoull(strstr(out.out, "), ") + 3, NULL, 10);
	assert_int_equal(
		sscanf(strstr(out.out, "not counted as events: "),
		       "not counted as events: %llu thread-name records, %llu context-switch",
		       &names, &switches),
		2);
	assert_true(names > 0); /* the threads were named */
	lkt_sh(&out, "babeltrace2 '%s' | wc -l", dir);
	lkt_expect(&out, 0, NULL);
	theirs = strtoull(out.out, NULL, 10);
	if (events + names + switches != theirs)
		print_error("report: %llu events + %llu names + %llu switches; babeltrace2: %llu\n",
			    events, names, switches, theirs);
	assert_true(events + names + switches == theirs);
	cleanup(dir);
}

/*
 * dir's trace into each format, and each of those into each format (CTF->JSON->CTF,
 * Perfetto->JSON, JSON->JSON, ...): every conversion succeeds and `lowkey report --json` of every
 * result is dir's (compare_reports.py --converted-list; JSON's allowance for switches when one of the
 * two was JSON). Prints the number of results compared.
 */
static void every_format_into_every_other(const char *dir)
{
	lkt_sh(&out,
	       "set -e; d='%s'; L='%s'; C='%s'; rm -f \"$d.list\"; "
	       "fmt() { case $1 in pftrace) echo perfetto;; *) echo $1;; esac; }; "
	       "$L report --json \"$d\" > \"$d.ref\"; "
	       "for a in ctf json pftrace; do $L convert \"$d\" -o \"$d.1.$a\"; done; "
	       "for a in ctf json pftrace; do for b in ctf json pftrace; do "
	       "$L convert \"$d.1.$a\" -o \"$d.$a.$b\"; done; done; "
	       "for f in \"$d\".1.* \"$d\".ctf.* \"$d\".json.* \"$d\".pftrace.*; do "
	       "b=${f##*.}; a=${f%%.*}; a=${a##*.}; via=; "
	       "case \"$a.$b\" in *json*) via=json;; esac; "
	       "$L report --json \"$f\" > \"$f.r\"; "
	       "echo \"$f.r $(fmt $b) $via\" >> \"$d.list\"; done; "
	       "python3 \"$C\" --converted-list \"$d.ref\" \"$d.list\"",
	       dir, LOWKEY, COMPARE);
	lkt_expect(&out, 0, "converted: 12");
}

static void convert_cleanup(const char *dir)
{
	lkt_sh(&out, "rm -rf '%s'.ref '%s'.list '%s'.1.* '%s'.ctf.* '%s'.json.* '%s'.pftrace.*",
	       dir, dir, dir, dir, dir, dir);
}

static void convert_any_format_into_any(void **state)
{
	char dir[256];

	(void)state;
	if (lkt_sh(&out, "command -v python3") != 0)
		skip(); /* the reports are compared with python3 */
	lkt_path(dir, sizeof(dir), "convert-any");
	record(dir, 0); /* spans, a counter, string arguments, two named threads, lost events */
	every_format_into_every_other(dir);
	convert_cleanup(dir);
	lkt_rmrf(dir);
	if (record(dir, LK_TRACE_SCHED) != 0) {
		lkt_rmrf(dir);
		skip(); /* perf_event_open denied: no context switches (test_probe_sched says why) */
	}
	every_format_into_every_other(dir);
	convert_cleanup(dir);
	lkt_rmrf(dir);
}

/* A damaged JSON or Perfetto input is an error with a message, whatever the output; nothing crashes. */
static void convert_refuses_damaged_input(void **state)
{
	char dir[256];

	(void)state;
	lkt_path(dir, sizeof(dir), "convert-damaged");
	record(dir, 0);
	assert_int_equal(lkt_sh(&out,
				"%s convert '%s' -o '%s.json' && %s convert '%s' -o '%s.pftrace'",
				LOWKEY, dir, dir, LOWKEY, dir, dir),
			 0);
	lkt_sh(&out, "truncate -s -40 '%s.json' && %s convert '%s.json' -o '%s.out.ctf'", dir,
	       LOWKEY, dir, dir);
	lkt_expect(&out, 1, "cut short");
	lkt_sh(&out, "truncate -s -3 '%s.pftrace' && %s convert '%s.pftrace' -o '%s.out.json'", dir,
	       LOWKEY, dir, dir);
	lkt_expect(&out, 1, "cut short or damaged at byte");
	/* a byte changed in the middle of the Perfetto file: refused, or converted, never a crash */
	lkt_sh(&out,
	       "%s convert '%s' -o '%s.pftrace' && printf '\\377' | dd of='%s.pftrace' bs=1 "
	       "seek=$(($(stat -c %%s '%s.pftrace') / 2)) conv=notrunc status=none && "
	       "%s convert '%s.pftrace' -o '%s.out.pftrace'; test $? -le 1",
	       LOWKEY, dir, dir, dir, dir, LOWKEY, dir, dir);
	lkt_expect(&out, 0, NULL);
	lkt_sh(&out, "printf 'hello' > '%s.json' && %s convert '%s.json' -o '%s.out.pftrace'", dir,
	       LOWKEY, dir, dir);
	lkt_expect(&out, 1, "not a lowkey trace");
	/* into itself: refused before anything is written over it */
	lkt_sh(&out, "%s convert '%s' -o '%s.json' && %s convert '%s.json' -o '%s.json'", LOWKEY,
	       dir, dir, LOWKEY, dir, dir);
	lkt_expect(&out, 1, "would be written over the trace it is converted from");
	lkt_sh(&out, "%s report '%s.json'", LOWKEY, dir);
	lkt_expect(&out, 0, "fmt:");
	lkt_sh(&out, "rm -rf '%s'.out.* '%s'.json '%s'.pftrace", dir, dir, dir);
	lkt_rmrf(dir);
}

/* `lowkey convert` writes the format OUT's extension names, or --format's; never a guess. */
static void convert_writes_the_format_asked_for(void **state)
{
	char dir[256];

	(void)state;
	lkt_path(dir, sizeof(dir), "convert-formats");
	record(dir, 0);
	lkt_sh(&out, "%s convert '%s' -o '%s.xyz'", LOWKEY, dir, dir);
	lkt_expect(&out, 2, "cannot tell which format to write");
	lkt_sh(&out, "test -e '%s.xyz'", dir);
	assert_int_not_equal(out.status, 0); /* nothing written */
	lkt_sh(&out, "%s convert '%s' -o '%s.xyz' --format json && head -c 1 '%s.xyz'", LOWKEY, dir,
	       dir, dir);
	lkt_expect(&out, 0, "{");
	lkt_sh(&out, "%s convert '%s' -o '%s.perfetto-trace' && %s report '%s.perfetto-trace'",
	       LOWKEY, dir, dir, LOWKEY, dir);
	lkt_expect(&out, 0, "fmt:");
	lkt_sh(&out, "rm -f '%s.xyz' '%s.perfetto-trace'", dir, dir);
	cleanup(dir);
}

static void files_that_are_not_lowkey_traces(void **state)
{
	char dir[256], base[300];

	(void)state;
	lkt_path(dir, sizeof(dir), "report-not-traces");
	assert_int_equal(lkt_sh(&out, "mkdir -p '%s'", dir), 0);
	snprintf(base, sizeof(base), "%s/f", dir);
	lkt_sh(&out, "printf 'hello' > '%s' && %s report '%s'", base, LOWKEY, base);
	lkt_expect(
		&out, 1,
		"not a lowkey trace: not a CTF trace's directory, nor Chrome JSON, nor Perfetto");
	lkt_sh(&out, "printf '{\"traceEvents\":[]}' > '%s' && %s report '%s'", base, LOWKEY, base);
	lkt_expect(&out, 1, "is JSON, but not a trace lowkey wrote");
	/* a packet of sequence 1: the service's first writer, as in a system trace */
	lkt_sh(&out, "printf '\\n\\002P\\001' > '%s' && %s report '%s'", base, LOWKEY, base);
	lkt_expect(&out, 1, "on a sequence lowkey does not use");
	lkt_sh(&out, "printf '' > '%s' && %s report '%s'", base, LOWKEY, base);
	lkt_expect(&out, 1, "it is empty");
	lkt_sh(&out, "mkfifo '%s.fifo' && timeout 60 %s report '%s.fifo'", base, LOWKEY, base);
	lkt_expect(&out, 1, "not a lowkey trace");

	lkt_rmrf(dir);

	/* lowkey's own, cut short */
	lkt_path(dir, sizeof(dir), "report-cut");
	record(dir, 0);
	assert_int_equal(lkt_sh(&out,
				"%s convert '%s' -o '%s.json' && %s convert '%s' -o '%s.pftrace'",
				LOWKEY, dir, dir, LOWKEY, dir, dir),
			 0);
	lkt_sh(&out, "truncate -s -40 '%s.json' && %s report '%s.json'", dir, LOWKEY, dir);
	lkt_expect(&out, 1, "cut short");
	lkt_sh(&out, "truncate -s -3 '%s.pftrace' && %s report --json '%s.pftrace'", dir, LOWKEY,
	       dir);
	lkt_expect(&out, 1, "cut short or damaged at byte");
	cleanup(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(one_run_in_three_formats),
		cmocka_unit_test(one_run_with_context_switches),
		cmocka_unit_test(the_program_recorded_in_each_format),
		cmocka_unit_test(report_counts_what_babeltrace2_counts),
		cmocka_unit_test(convert_writes_the_format_asked_for),
		cmocka_unit_test(convert_any_format_into_any),
		cmocka_unit_test(convert_refuses_damaged_input),
		cmocka_unit_test(files_that_are_not_lowkey_traces),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
