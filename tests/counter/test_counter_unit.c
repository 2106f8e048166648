// SPDX-License-Identifier: MIT
/*
 * The counter module's pure parts: perf's event syntax, modifiers, the multiplexing arithmetic and
 * the parsing of a group read. No perf_event_open here.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <lowkey/counter.h>
#include <lowkey/error.h>

#include "counter/counter_internal.h"

/* ---- syntax ---- */

static void parses_plain_list(void **state)
{
	struct lk__event_list l;

	(void)state;
	assert_int_equal(lk__events_parse("task-clock,page-faults:u, cycles:uk", false, &l), 0);
	assert_int_equal(l.n, 3);
	assert_int_equal(l.ngroups, 3);
	assert_string_equal(l.specs[0].base, "task-clock");
	assert_false(l.specs[0].has_mods);
	assert_string_equal(l.specs[1].text, "page-faults:u");
	assert_string_equal(l.specs[1].base, "page-faults");
	assert_true(l.specs[1].mods.user);
	assert_false(l.specs[1].mods.kernel);
	assert_string_equal(l.specs[2].base, "cycles"); /* spaces around commas are dropped */
	assert_true(l.specs[2].mods.user && l.specs[2].mods.kernel);
	assert_int_equal(l.specs[2].group, 2);
	lk__events_free(&l);
}

static void parses_groups_and_group_modifiers(void **state)
{
	struct lk__event_list l;

	(void)state;
	assert_int_equal(lk__events_parse("a,{b,c:k}:u,d", false, &l), 0);
	assert_int_equal(l.n, 4);
	assert_int_equal(l.ngroups, 3);
	assert_int_equal(l.specs[0].group, 0);
	assert_int_equal(l.specs[1].group, 1);
	assert_int_equal(l.specs[2].group, 1);
	assert_int_equal(l.specs[3].group, 2);
	/* The group's :u applies to b; c's own :k wins over it. */
	assert_true(l.specs[1].mods.user && !l.specs[1].mods.kernel);
	assert_true(l.specs[2].mods.kernel && !l.specs[2].mods.user);
	assert_false(l.specs[3].has_mods);
	lk__events_free(&l);

	assert_int_equal(lk__events_parse("a,b,c", true, &l), 0); /* LK_COUNTERS_GROUP */
	assert_int_equal(l.ngroups, 1);
	assert_int_equal(l.specs[2].group, 0);
	lk__events_free(&l);
}

static void pmu_terms_keep_their_commas(void **state)
{
	struct lk__event_list l;

	(void)state;
	assert_int_equal(lk__events_parse("cpu/event=0x3c,umask=0x1/u,msr/tsc/,{x/a=1,b=2/,y}",
					  false, &l),
			 0);
	assert_int_equal(l.n, 4);
	assert_string_equal(l.specs[0].base, "cpu/event=0x3c,umask=0x1/");
	assert_true(l.specs[0].mods.user);
	assert_string_equal(l.specs[1].base, "msr/tsc/");
	assert_false(l.specs[1].has_mods);
	assert_string_equal(l.specs[2].base, "x/a=1,b=2/");
	assert_int_equal(l.specs[2].group, l.specs[3].group);
	lk__events_free(&l);

	assert_int_equal(lk__events_parse("cpu/event=1/:k", false, &l), 0);
	assert_true(l.specs[0].mods.kernel);
	lk__events_free(&l);
}

static void colons_that_are_not_modifiers_stay_in_the_name(void **state)
{
	struct lk__event_list l;

	(void)state;
	/* A tracepoint and a libpfm4 EVENT:UMASK: the part after ':' is not all modifier letters. */
	assert_int_equal(lk__events_parse("sched:sched_switch,INST_RETIRED:ANY_P:u", false, &l), 0);
	assert_string_equal(l.specs[0].base, "sched:sched_switch");
	assert_false(l.specs[0].has_mods);
	assert_string_equal(l.specs[1].base, "INST_RETIRED:ANY_P");
	assert_true(l.specs[1].mods.user);
	lk__events_free(&l);
}

static void expect_syntax_error(const char *events, const char *needle)
{
	struct lk__event_list l;

	assert_int_equal(lk__events_parse(events, false, &l), -EINVAL);
	if (!strstr(lk_last_error(), needle))
		fail_msg("'%s': message '%s' lacks '%s'", events, lk_last_error(), needle);
}

static void syntax_errors_say_where(void **state)
{
	(void)state;
	expect_syntax_error("", "empty event at column 1");
	expect_syntax_error("a,,b", "empty event at column 3");
	expect_syntax_error("a,", "empty event at column 3");
	expect_syntax_error("{a,b", "never closed");
	expect_syntax_error("a}", "'}'");
	expect_syntax_error("{a,{b}}", "cannot nest");
	expect_syntax_error("{}", "empty group");
	expect_syntax_error("{a,}", "empty event");
	expect_syntax_error("cpu/event=1", "unterminated '/'");
	expect_syntax_error("a{b}", "unexpected '{'");
}

static void modifier_errors(void **state)
{
	struct lk__modifiers m = { 0 };
	bool ukh = false;

	(void)state;
	assert_int_equal(lk__modifiers_parse("ukhGHIDep", &m, &ukh), 0);
	assert_true(ukh && m.user && m.kernel && m.hv && m.guest && m.host && m.exclude_idle &&
		    m.pinned && m.exclusive && m.precise == 1);
	memset(&m, 0, sizeof(m));
	assert_int_equal(lk__modifiers_parse("pppp", &m, &ukh), -EINVAL);
	assert_non_null(strstr(lk_last_error(), "ppp"));
	assert_int_equal(lk__modifiers_parse("x", &m, &ukh), -EINVAL);
	assert_non_null(strstr(lk_last_error(), "'x'"));
}

static void modifiers_follow_perf_rules(void **state)
{
	struct perf_event_attr a;
	struct lk__modifiers m;
	bool ukh;

	(void)state;
	/* No u/k/h: count every level. */
	memset(&a, 0, sizeof(a));
	memset(&m, 0, sizeof(m));
	lk__modifiers_apply(&m, false, &a);
	assert_false(a.exclude_user || a.exclude_kernel || a.exclude_hv);

	/* :u counts user space only. */
	memset(&m, 0, sizeof(m));
	ukh = false;
	lk__modifiers_parse("u", &m, &ukh);
	lk__modifiers_apply(&m, ukh, &a);
	assert_true(!a.exclude_user && a.exclude_kernel && a.exclude_hv);

	/* :k the kernel only; :uk both but not the hypervisor. */
	memset(&m, 0, sizeof(m));
	lk__modifiers_parse("k", &m, &ukh);
	lk__modifiers_apply(&m, ukh, &a);
	assert_true(a.exclude_user && !a.exclude_kernel && a.exclude_hv);
	memset(&m, 0, sizeof(m));
	lk__modifiers_parse("uk", &m, &ukh);
	lk__modifiers_apply(&m, ukh, &a);
	assert_true(!a.exclude_user && !a.exclude_kernel && a.exclude_hv);

	/* :G guest only, D pinned. */
	memset(&a, 0, sizeof(a));
	memset(&m, 0, sizeof(m));
	ukh = false;
	lk__modifiers_parse("GD", &m, &ukh);
	lk__modifiers_apply(&m, ukh, &a);
	assert_true(!a.exclude_guest && a.exclude_host && a.pinned);
}

/* ---- multiplexing arithmetic ---- */

static void scale_multiplexed_values(void **state)
{
	(void)state;
	/* Not multiplexed: the value itself. */
	assert_int_equal(lk_counter_scale(1000, 500, 500), 1000);
	/* Never ran: nothing to estimate from. */
	assert_int_equal(lk_counter_scale(1000, 500, 0), 0);
	assert_int_equal(lk_counter_scale(0, 0, 0), 0);
	/* Counted half the time: twice the count. A third: three times. */
	assert_int_equal(lk_counter_scale(1000, 1000, 500), 2000);
	assert_int_equal(lk_counter_scale(1000, 3000, 1000), 3000);
	/* Rounded to nearest: 10 * 3 / 2 = 15; 7 * 2 / 3 = 4.67 -> 5. */
	assert_int_equal(lk_counter_scale(10, 3, 2), 15);
	assert_int_equal(lk_counter_scale(7, 2, 3), 7);	 /* running > enabled: value */
	assert_int_equal(lk_counter_scale(7, 3, 2), 11); /* 10.5 -> 11 */
	/* Products past 64 bits: 2^40 counts over 2^30 ns enabled, 2^29 running. */
	assert_int_equal(lk_counter_scale(1ull << 40, 1ull << 30, 1ull << 29), 1ull << 41);
	assert_int_equal(lk_counter_scale(UINT64_MAX / 2, 1ull << 62, 1ull << 60), UINT64_MAX);
}

/* A set with 4 events in two groups, the second event not opened. */
static void fake_set(struct lk_counters *c, struct lk__event *ev, struct lk__group *g)
{
	memset(c, 0, sizeof(*c));
	memset(ev, 0, 4 * sizeof(*ev));
	memset(g, 0, 2 * sizeof(*g));
	for (int i = 0; i < 4; i++)
		ev[i].opened = i != 1;
	g[0].first = 0;
	g[0].n = 3;
	g[0].nopen = 2;
	g[1].first = 3;
	g[1].n = 1;
	g[1].nopen = 1;
	c->events = ev;
	c->nevents = 4;
	c->groups = g;
	c->ngroups = 2;
}

static void group_reads_accumulate_in_event_order(void **state)
{
	struct lk_counter_value v[4];
	struct lk__event ev[4];
	struct lk__group g[2];
	struct lk_counters c;
	/* { nr, enabled, running, values... } as read() returns with PERF_FORMAT_GROUP */
	uint64_t group0[] = { 2, 1000, 250, 10, 20 };
	uint64_t group1[] = { 1, 1000, 1000, 7 };

	(void)state;
	fake_set(&c, ev, g);
	memset(v, 0, sizeof(v));
	assert_int_equal(lk__group_accumulate(&c, &g[0], group0, 5, v, 4), 0);
	assert_int_equal(lk__group_accumulate(&c, &g[1], group1, 4, v, 4), 0);
	assert_int_equal(v[0].value, 10);
	assert_int_equal(v[0].scaled, 40); /* ran a quarter of the time */
	assert_int_equal(v[0].time_enabled, 1000);
	assert_int_equal(v[0].time_running, 250);
	assert_int_equal(v[1].value, 0); /* not opened: untouched */
	assert_int_equal(v[2].value, 20);
	assert_int_equal(v[2].scaled, 80);
	assert_int_equal(v[3].value, 7);
	assert_int_equal(v[3].scaled, 7);

	/* A second thread's reading adds up (LK_COUNTERS_PROCESS sums threads). */
	assert_int_equal(lk__group_accumulate(&c, &g[1], group1, 4, v, 4), 0);
	assert_int_equal(v[3].value, 14);
	assert_int_equal(v[3].time_enabled, 2000);

	/* A caller's array shorter than the set: only its slots are written. */
	memset(v, 0, sizeof(v));
	assert_int_equal(lk__group_accumulate(&c, &g[0], group0, 5, v, 1), 0);
	assert_int_equal(v[0].value, 10);
	assert_int_equal(v[2].value, 0);
}

static void malformed_group_reads_are_refused(void **state)
{
	struct lk_counter_value v[4];
	struct lk__event ev[4];
	struct lk__group g[2];
	struct lk_counters c;
	uint64_t wrong_nr[] = { 3, 1000, 1000, 1, 2, 3 };
	uint64_t short_read[] = { 2, 1000, 1000, 1 };

	(void)state;
	fake_set(&c, ev, g);
	assert_int_equal(lk__group_accumulate(&c, &g[0], wrong_nr, 6, v, 4), -EIO);
	assert_int_equal(lk__group_accumulate(&c, &g[0], short_read, 4, v, 4), -EIO);
	assert_int_equal(lk__group_accumulate(&c, &g[0], short_read, 2, v, 4), -EIO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(parses_plain_list),
		cmocka_unit_test(parses_groups_and_group_modifiers),
		cmocka_unit_test(pmu_terms_keep_their_commas),
		cmocka_unit_test(colons_that_are_not_modifiers_stay_in_the_name),
		cmocka_unit_test(syntax_errors_say_where),
		cmocka_unit_test(modifier_errors),
		cmocka_unit_test(modifiers_follow_perf_rules),
		cmocka_unit_test(scale_multiplexed_values),
		cmocka_unit_test(group_reads_accumulate_in_event_order),
		cmocka_unit_test(malformed_group_reads_are_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
