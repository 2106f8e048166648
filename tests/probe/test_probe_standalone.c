// SPDX-License-Identifier: MIT
/*
 * A trace stands on its own and says the same to every reader:
 *   - `lowkey report` reads a copy of the trace's visible files (cp DIR/STAR COPY/, which leaves
 *     hidden files out), and says what it says of the original;
 *   - the events babeltrace2 reports discarded are exactly lowkey's count, losses before a
 *     stream's first packet included;
 *   - a recording's events are its rings' bytes, the thread the stream's; lowkey convert gives
 *     every event its thread's id as the `vtid` context (what Trace Compass's UST analyses read),
 *     and the metadata has no padding field for readers to show.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <cmocka.h>

#include <lowkey/lowkey.h>

#include "cli/run.h"
#include "consumer_hold.h"
#include "probe/probe_internal.h"
#include "trace_check.h"

static struct lkt_run out;

static bool have(const char *tool)
{
	return lkt_sh(&out, "command -v %s", tool) == 0;
}

static void *worker(void *arg)
{
	int n = *(int *)arg;

	for (int i = 0; i < n; i++) {
		LK_SPAN(alone, work);
		LK_PROBE(alone, tid, (long)syscall(SYS_gettid), i);
	}
	return NULL;
}

/* Two threads' spans and events; the trace's path in dir. */
static void small_trace(char *dir, size_t len, const char *name)
{
	struct lk_trace_config c = { .flush_ms = 5 };
	pthread_t t;
	int n = 200;

	assert_true(lk_probe_enable("alone") >= 0);
	lkt_path(dir, len, name);
	c.path = dir;
	assert_int_equal(lk_trace_start(&c), 0);
	pthread_create(&t, NULL, worker, &n);
	worker(&n);
	pthread_join(t, NULL);
	assert_int_equal(lk_trace_stop(), 0);
	assert_int_equal(lk_probe_reset_rules(), 0);
}

static void report_reads_a_plain_copy(void **state)
{
	char dir[256], copy[256], original[65536];

	(void)state;
	small_trace(dir, sizeof(dir), "alone");
	lkt_path(copy, sizeof(copy), "alone-copy");
	/* `*` leaves hidden files out: whatever the trace needs must be in plain sight */
	assert_int_equal(lkt_sh(&out,
				"mkdir '%s' && cp '%s'/* '%s'/ && ls -A '%s' | grep -c '^[.]'",
				copy, dir, copy, copy),
			 1);
	assert_int_equal(atoi(out.out), 0);
	lkt_sh(&out, "%s report --json '%s' | sed 's/\"trace\": \"[^\"]*\"//'", LOWKEY, dir);
	lkt_expect(&out, 0, "\"alone\"");
	snprintf(original, sizeof(original), "%s", out.out);
	lkt_sh(&out, "%s report --json '%s' | sed 's/\"trace\": \"[^\"]*\"//'", LOWKEY, copy);
	lkt_expect(&out, 0, "\"alone\"");
	assert_string_equal(out.out, original);
	lkt_sh(&out, "%s report '%s'", LOWKEY, copy);
	lkt_expect(&out, 0, "alone:work");
	lkt_rmrf(copy);
	lkt_rmrf(dir);
}

static uint64_t events_written(void)
{
	struct lk_trace_stats st;

	lk_trace_stats(&st);
	return st.events;
}

static bool written(void *arg)
{
	return events_written() >= *(uint64_t *)arg;
}

static void wait_for(bool (*cond)(void *), void *arg)
{
	for (int i = 0; i < 6000 && !cond(arg); i++)
		usleep(10000);
	assert_true(cond(arg));
}

/* Emit n events with the consumer held still, so that a 4 KiB ring overflows. */
static void burst_held(int n)
{
	lkt_hold_consumer(true);
	for (int i = 0; i < n; i++)
		LK_PROBE(lossy, tick, i);
	lkt_hold_consumer(false);
}

static void babeltrace2_counts_every_loss(void **state)
{
	struct lk_trace_config c = { .buffer_size = 4096,
				     .flags = LK_TRACE_FIXED_BUFFER,
				     .flush_ms = 5 };
	struct lk_trace_stats st;
	uint64_t some = 1;
	char dir[256];

	(void)state;
	if (!have("babeltrace2")) {
		print_message(
			"babeltrace2 is not installed (Debian: babeltrace2): nothing to compare with\n");
		skip();
	}
	assert_true(lk_probe_enable("lossy") >= 0);
	lkt_path(dir, sizeof(dir), "lossy");
	c.path = dir;
	/* losses before the stream's first packet: nothing was written yet */
	__atomic_store_n(&lk__consumer_hold, 1, __ATOMIC_SEQ_CST);
	assert_int_equal(lk_trace_start(&c), 0);
	burst_held(2000);
	wait_for(written, &some);
	some = events_written() + 1;
	burst_held(2000); /* and between later packets */
	wait_for(written, &some);
	burst_held(2000);
	assert_int_equal(lk_trace_stop(), 0);
	assert_int_equal(lk_trace_stats(&st), 0);
	assert_true(st.lost > 2000); /* each burst overflowed */

	/* babeltrace2 says "Tracer discarded N events" once per packet that counts more */
	lkt_sh(&out,
	       "babeltrace2 '%s' 2>&1 >/dev/null | tr -s ' \\n' '  ' | grep -o 'discarded [0-9]* events' | "
	       "awk '{ n += $2 } END { print n + 0 }'",
	       dir);
	assert_int_equal(out.status, 0);
	assert_int_equal(strtoull(out.out, NULL, 10), st.lost);
	lkt_sh(&out, "babeltrace2 '%s' 2>&1 >/dev/null", dir);
	assert_null(strstr(out.out, "may have discarded"));
	lkt_sh(&out, "%s report --json '%s'", LOWKEY, dir);
	assert_non_null(strstr(out.out, "\"lost\":"));
	assert_int_equal(strtoull(strstr(out.out, "\"lost\":") + 7, NULL, 10), st.lost);
	assert_int_equal(lk_probe_reset_rules(), 0);
	lkt_rmrf(dir);
}

/*
 * A recording's events are the rings' bytes: no vtid, the thread is the stream's. lowkey convert
 * writes it again with each event's vtid, the recording thread's (arg0 is its gettid()).
 */
static void convert_gives_each_event_its_vtid(void **state)
{
	char dir[256], tc[300];

	(void)state;
	if (!have("babeltrace2")) {
		print_message("babeltrace2 is not installed (Debian: babeltrace2)\n");
		skip();
	}
	small_trace(dir, sizeof(dir), "vtid");
	lkt_sh(&out, "babeltrace2 '%s' | grep -c 'alone:tid: { arg0 = [0-9]*,'", dir);
	assert_int_equal(atoi(out.out), 400);
	lkt_sh(&out, "babeltrace2 '%s' | grep -c vtid", dir);
	assert_int_equal(atoi(out.out), 0);
	lkt_sh(&out, "grep -c 'lowkey_format = 4;' '%s/metadata'", dir);
	assert_int_equal(atoi(out.out), 1);

	snprintf(tc, sizeof(tc), "%s.tc", dir);
	lkt_sh(&out, "%s convert '%s' -o '%s' --format ctf", LOWKEY, dir, tc);
	lkt_expect(&out, 0, "");
	lkt_sh(&out, "grep -c 'lowkey_format = 3;' '%s/metadata'", tc);
	assert_int_equal(atoi(out.out), 1);
	lkt_sh(&out,
	       "babeltrace2 '%s' | grep -c 'alone:tid: { vtid = \\([0-9]*\\) }, { arg0 = \\1,'",
	       tc);
	assert_int_equal(atoi(out.out), 400);
	lkt_sh(&out, "babeltrace2 '%s' | grep -vc 'vtid = [0-9]'", tc);
	assert_int_equal(atoi(out.out), 0);
	lkt_sh(&out, "babeltrace2 '%s' | grep -o 'vtid = [0-9]*' | sort -u | wc -l", tc);
	assert_int_equal(atoi(out.out), 2);
	/* and lowkey report says the same of both */
	lkt_sh(&out, "%s report --json '%s' | sed 's/\"trace\": \"[^\"]*\"//'", LOWKEY, dir);
	lkt_expect(&out, 0, "\"alone\"");
	{
		char first[65536];

		snprintf(first, sizeof(first), "%s", out.out);
		lkt_sh(&out, "%s report --json '%s' | sed 's/\"trace\": \"[^\"]*\"//'", LOWKEY, tc);
		lkt_expect(&out, 0, "\"alone\"");
		assert_string_equal(out.out, first);
	}
	lkt_sh(&out, "grep -c spare '%s/metadata' '%s/metadata' | grep -vc ':0$'", dir, tc);
	assert_int_equal(atoi(out.out), 0);
	lkt_rmrf(tc);
	lkt_rmrf(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(report_reads_a_plain_copy),
		cmocka_unit_test(babeltrace2_counts_every_loss),
		cmocka_unit_test(convert_gives_each_event_its_vtid),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
