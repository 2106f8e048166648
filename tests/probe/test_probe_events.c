// SPDX-License-Identifier: MIT
/*
 * Probes in one thread: what a site records (every argument type, exactly), in order; that a
 * disabled site is a NOP that evaluates nothing; spans and counters; rules; and that the trace is
 * read the same by lowkey's reader, by babeltrace2 and as Chrome JSON.
 */
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <cmocka.h>

#include <lowkey/lowkey.h>

#include "key/sites.h"
#include "probe/probe_internal.h"
#include "trace_check.h"

static int evaluated;

static int side_effect(void)
{
	return ++evaluated;
}

static __attribute__((noinline)) void all_types(int i)
{
	char array[16] = "in an array";
	const char *null_string = NULL;
	unsigned char uc = 200;
	short sh = -300;
	float f = 0.25f;
	_Bool yes = 1;

	LK_PROBE(t, ints, i, (long)INT64_MIN, (unsigned long long)UINT64_MAX, -1, uc, sh, yes, 'x');
	LK_PROBE(t, floats, 1.0 / 3.0, f, -DBL_MAX);
	LK_PROBE(t, strings, "hello", array, null_string, (const char *)"", &evaluated);
}

static __attribute__((noinline)) void quiet_site(void)
{
	LK_PROBE(quiet, never, side_effect(), side_effect());
}

static __attribute__((noinline)) void nested_spans(int depth)
{
	LK_SPAN(t, outer);
	LK_COUNTER(t, depth, depth);
	{
		LK_SPAN(t, inner);
		if (depth > 0)
			return; /* leaving both scopes early closes both spans */
	}
	LK_PROBE(t, after_inner);
}

static void start(char *dir, size_t len, const char *what, unsigned int flags)
{
	struct lk_trace_config c = { .path = dir, .flags = flags, .flush_ms = 5 };

	lkt_path(dir, len, what);
	assert_int_equal(lk_trace_start(&c), 0);
}

static void records_every_type_exactly(void **state)
{
	struct lkt_trace t;
	char dir[256];
	double d;

	(void)state;
	assert_int_equal(lk_probe_enable("t"), 11); /* the sites of provider t in this program */
	start(dir, sizeof(dir), "types", 0);
	for (int i = 0; i < 100; i++)
		all_types(i);
	assert_int_equal(lk_trace_stop(), 0);

	assert_int_equal(lkt_read(&t, dir), 0);
	assert_int_equal(lkt_count(&t, "t:ints"), 100);
	assert_int_equal(lkt_count(&t, "t:floats"), 100);
	assert_int_equal(lkt_count(&t, "t:strings"), 100);
	assert_int_equal(t.lost, 0);
	for (size_t k = 0, i = 0; k < t.n; k++) {
		struct lkt_event *e = &t.ev[k];

		if (strcmp(e->name, "t:ints") == 0) {
			assert_int_equal((int64_t)e->v[0], (int64_t)i); /* in order */
			assert_true((int64_t)e->v[1] == INT64_MIN);
			assert_true(e->v[2] == UINT64_MAX);
			assert_int_equal((int64_t)e->v[3], -1);
			assert_int_equal(e->v[4], 200);
			assert_int_equal((int64_t)e->v[5], -300);
			assert_int_equal(e->v[6], 1);
			assert_int_equal(e->v[7], 'x');
			i++;
		} else if (strcmp(e->name, "t:floats") == 0) {
			memcpy(&d, &e->v[0], 8);
			assert_true(d == 1.0 / 3.0);
			memcpy(&d, &e->v[1], 8);
			assert_true(d == 0.25);
			memcpy(&d, &e->v[2], 8);
			assert_true(d == -DBL_MAX);
		} else if (strcmp(e->name, "t:strings") == 0) {
			assert_string_equal(e->s[0], "hello");
			assert_string_equal(e->s[1], "in an array");
			assert_string_equal(e->s[2], "(null)");
			assert_string_equal(e->s[3], "");
			assert_true(e->v[4] == (uint64_t)(uintptr_t)&evaluated);
		}
	}
	for (size_t k = 1; k < t.n; k++)
		assert_true(t.ev[k].tsc >= t.ev[k - 1].tsc);
	lkt_free(&t);
	lkt_rmrf(dir);
}

static void disabled_site_is_a_nop(void **state)
{
	struct lkt_trace t;
	char dir[256];

	(void)state;
	start(dir, sizeof(dir), "quiet", 0);
	quiet_site(); /* no rule selects provider quiet */
	assert_int_equal(evaluated, 0);
	assert_int_equal(lk_trace_stop(), 0);
	assert_int_equal(lkt_read(&t, dir), 0);
	assert_int_equal(lkt_count(&t, "quiet:never"), 0);
	lkt_free(&t);
	lkt_rmrf(dir);
#if !defined(LK_KEYS_PORTABLE)
	{
		size_t n;
		struct lk__probe_site_rt *sites = lk__probe_sites(&n);

		for (size_t i = 0; i < n; i++)
			if (sites[i].site && strcmp(sites[i].provider, "quiet") == 0)
				assert_int_equal(lkt_check_sites(&sites[i].site->key), 1);
	}
#endif
}

static void long_strings_are_truncated(void **state)
{
	char big[3000], dir[256];
	struct lkt_trace t;

	(void)state;
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	start(dir, sizeof(dir), "long", 0);
	LK_PROBE(t, long_string, big);
	assert_int_equal(lk_trace_stop(), 0);
	assert_int_equal(lkt_read(&t, dir), 0);
	assert_int_equal(lkt_count(&t, "t:long_string"), 1);
	for (size_t k = 0; k < t.n; k++)
		if (strcmp(t.ev[k].name, "t:long_string") == 0)
			assert_int_equal(t.ev[k].slen[0], LK_PROBE_STRING_MAX - 1);
	lkt_free(&t);
	lkt_rmrf(dir);
}

static void spans_pair_up_however_scopes_end(void **state)
{
	struct lkt_trace t;
	int open = 0, max_open = 0;
	char dir[256];

	(void)state;
	start(dir, sizeof(dir), "spans", 0);
	nested_spans(0);
	nested_spans(1);
	assert_int_equal(lk_trace_stop(), 0);
	assert_int_equal(lkt_read(&t, dir), 0);
	for (size_t k = 0; k < t.n; k++) {
		if (t.ev[k].kind == LK_PROBE_SPAN_BEGIN)
			open++;
		if (t.ev[k].kind == LK_PROBE_SPAN_END)
			open--;
		assert_true(open >= 0);
		if (open > max_open)
			max_open = open;
	}
	assert_int_equal(open, 0);
	assert_int_equal(max_open, 2);
	assert_int_equal(lkt_count(&t, "t:outer"), 4); /* begin and end, twice */
	assert_int_equal(lkt_count(&t, "t:depth"), 2);
	assert_int_equal(lkt_count(&t, "t:after_inner"), 1);
	lkt_free(&t);
	lkt_rmrf(dir);
}

static void cputime_recorded_when_asked(void **state)
{
	struct lkt_trace t;
	char dir[256];
	volatile double x = 1;

	(void)state;
	start(dir, sizeof(dir), "cpu", LK_TRACE_CPUTIME);
	for (int i = 0; i < 20; i++) {
		LK_PROBE(t, tick, i);
		for (int k = 0; k < 200000; k++)
			x = x * 1.0000001;
	}
	assert_int_equal(lk_trace_stop(), 0);
	assert_int_equal(lkt_read(&t, dir), 0);
	assert_true(t.r.cputime);
	assert_int_equal(lkt_count(&t, "t:tick"), 20);
	for (size_t k = 1; k < t.n; k++)
		assert_true(t.ev[k].cputime >= t.ev[k - 1].cputime);
	assert_true(t.ev[t.n - 1].cputime > t.ev[1].cputime); /* the loop used CPU */
	lkt_free(&t);
	lkt_rmrf(dir);
}

static void rules_apply_in_order(void **state)
{
	struct lkt_trace t;
	char dir[256];

	(void)state;
	assert_int_equal(lk_probe_disable("t:strings"), 1);
	start(dir, sizeof(dir), "rules", 0);
	all_types(1);
	assert_int_equal(lk_probe_enable("t:str*"), 1); /* while tracing: flips at once */
	all_types(2);
	assert_int_equal(lk_trace_stop(), 0);
	assert_int_equal(lkt_read(&t, dir), 0);
	assert_int_equal(lkt_count(&t, "t:ints"), 2);
	assert_int_equal(lkt_count(&t, "t:strings"), 1);
	lkt_free(&t);
	lkt_rmrf(dir);

	assert_int_equal(lk_probe_enable(""), -EINVAL);
	assert_int_equal(lk_probe_enable(NULL), -EINVAL);
	assert_int_equal(lk_probe_enable("nothing:matches"), 0);
}

static void trace_errors(void **state)
{
	struct lk_trace_config c = { 0 };
	char dir[256], file[300];
	FILE *f;

	(void)state;
	assert_int_equal(lk_trace_stop(), -ENOENT);
	assert_int_equal(lk_trace_start(NULL), -EINVAL);
	assert_int_equal(lk_trace_start(&c), -EINVAL);
	c.path = "/proc/no/such/place";
	assert_true(lk_trace_start(&c) < 0);
	assert_non_null(strstr(lk_last_error(), "/proc/no/such/place"));
	/*
	 * A directory with a file in it, not "/tmp": qemu-user looks a name in "/" up in the
	 * target's sysroot first, where the trace would be made.
	 */
	lkt_path(dir, sizeof(dir), "not-empty");
	assert_int_equal(mkdir(dir, 0755), 0);
	snprintf(file, sizeof(file), "%s/file", dir);
	f = fopen(file, "w");
	assert_non_null(f);
	fclose(f);
	c.path = dir;
	assert_int_equal(lk_trace_start(&c), -EEXIST);
	lkt_rmrf(dir);
	c.path = "/tmp/x";
	c.buffer_size = 100;
	assert_int_equal(lk_trace_start(&c), -EINVAL);
	c.buffer_size = 0;
	c.format = (enum lk_trace_format)7;
	assert_int_equal(lk_trace_start(&c), -EINVAL);

	start(dir, sizeof(dir), "busy", 0);
	c.format = LK_TRACE_CTF;
	assert_int_equal(lk_trace_start(&c), -EBUSY);
	assert_int_equal(lk_trace_stop(), 0);
	lkt_rmrf(dir);
}

static int count_site(const struct lk_probe_info *info, void *arg)
{
	if (strcmp(info->provider, "t") == 0 && strcmp(info->event, "ints") == 0) {
		assert_int_equal(info->nargs, 8);
		assert_int_equal(info->arg_types[0], LK_PROBE_I64);
		assert_int_equal(info->arg_types[2], LK_PROBE_U64);
		assert_int_equal(info->arg_types[4], LK_PROBE_U64);
		assert_int_equal(info->arg_types[6], LK_PROBE_U64);
		assert_non_null(strstr(info->file, "test_probe_events.c"));
		assert_string_equal(info->object, "");
		(*(int *)arg)++;
	}
	if (strcmp(info->event, "strings") == 0) {
		assert_int_equal(info->arg_types[0], LK_PROBE_STR);
		assert_int_equal(info->arg_types[1], LK_PROBE_STR);
		assert_int_equal(info->arg_types[4], LK_PROBE_PTR);
	}
	return 0;
}

static void listing(void **state)
{
	int found = 0;

	(void)state;
	assert_true(lk_probe_list(count_site, &found) >= 11);
	assert_int_equal(found, 1);
	assert_int_equal(lk_probe_list(NULL, NULL), -EINVAL);
}

static int run(const char *fmt, const char *arg)
{
	char cmd[4200];

	snprintf(cmd, sizeof(cmd), fmt, arg);
	return system(cmd);
}

/* The 48-bit timestamps across the wrap of their low bits (every 34 hours at 2.3 GHz). */
static void timestamps_extend_across_the_wrap(void **state)
{
	const uint64_t wrap = LK__PROBE_TSC_MASK + 1, base = 7 * wrap;

	(void)state;
	/* the consumer: from a TSC read shortly after the record, or (another CPU) shortly before */
	assert_true(lk__tsc_extend(base + 100, 40) == base + 40);
	assert_true(lk__tsc_extend(base + 10, wrap - 30) == base - 30); /* record before the wrap */
	assert_true(lk__tsc_extend(base - 10, 25) == base + 25);	/* record after it */
	assert_true(lk__tsc_extend(base + wrap / 4, 0) == base);
	/* readers: forward from the previous timestamp */
	assert_true(lk__tsc_advance(base - 5, wrap - 2) == base - 2);
	assert_true(lk__tsc_advance(base - 5, 3) == base + 3);
	assert_true(lk__tsc_advance(base + 9, 9) == base + 9);
	assert_int_equal(lk__header_id(lk__probe_header(base + 0x123456789aULL, 0xbeef)), 0xbeef);
	assert_true(lk__header_tsc48(lk__probe_header(base + 0x123456789aULL, 0xbeef)) ==
		    0x123456789aULL);
	assert_int_equal(lk__header_id(lk__pad(0)), 0xffff); /* a pad is no event's header */
	assert_int_equal(lk__header_id(lk__pad(12345)), 0xffff);
	assert_true(lk__pad(12345) >> 16 == 12345);
}

static int by_value(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* babeltrace2's timestamps in cycles, sorted; NULL if it cannot be run. */
static uint64_t *babeltrace_cycles(const char *dir, size_t *n)
{
	char cmd[4200];
	unsigned long long v;
	size_t cap = 1024;
	uint64_t *out;
	FILE *p;

	if (run("command -v %s >/dev/null", "babeltrace2") != 0)
		return NULL;
	snprintf(cmd, sizeof(cmd), "babeltrace2 --clock-cycles '%s' 2>/dev/null", dir);
	p = popen(cmd, "r");
	assert_non_null(p);
	out = malloc(cap * sizeof(*out));
	*n = 0;
	while (fscanf(p, " [%llu] %*[^\n]", &v) == 1) {
		if (*n == cap)
			out = realloc(out, (cap *= 2) * sizeof(*out));
		out[(*n)++] = v;
	}
	pclose(p);
	qsort(out, *n, sizeof(*out), by_value);
	return out;
}

/*
 * babeltrace2 reads every event, and extends the records' 48-bit timestamps to the same full TSC
 * values as lowkey's reader; both fall between the TSC before the trace and after it.
 */
static void other_readers_agree(void **state)
{
	char dir[256], json[300], cmd[4200];
	struct lkt_trace t;
	uint64_t before, after, *bt, *ours;
	size_t nbt = 0;

	(void)state;
	before = lk__probe_tsc();
	start(dir, sizeof(dir), "babeltrace", 0);
	for (int i = 0; i < 50; i++)
		all_types(i);
	nested_spans(0);
	assert_int_equal(lk_trace_stop(), 0);
	after = lk__probe_tsc();
	assert_int_equal(lkt_read(&t, dir), 0);

	ours = malloc(t.n * sizeof(*ours));
	for (size_t i = 0; i < t.n; i++) {
		ours[i] = t.ev[i].tsc;
		assert_true(ours[i] >= before && ours[i] <= after);
	}
	qsort(ours, t.n, sizeof(*ours), by_value);
	bt = babeltrace_cycles(dir, &nbt);
	if (bt) {
		assert_int_equal(nbt, t.n); /* every event, thread names included */
		for (size_t i = 0; i < t.n; i++)
			assert_true(bt[i] == ours[i]);
		free(bt);
	}
	free(ours);

	snprintf(json, sizeof(json), "%s.json", dir);
	assert_int_equal(lk__json_convert(dir, json, t.err, sizeof(t.err)), 0);
	if (run("command -v %s >/dev/null", "python3") == 0) {
		snprintf(
			cmd, sizeof(cmd),
			"python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
			"ev=[e for e in d[\"traceEvents\"] if e[\"ph\"]!=\"M\"]; "
			"assert len(ev)==%zu, len(ev); "
			"assert all(set(e)>={\"name\",\"ph\",\"ts\",\"pid\",\"tid\"} for e in ev); "
			"assert {e[\"ph\"] for e in ev}>={\"i\",\"B\",\"E\",\"C\"}' '%s'",
			t.n - (size_t)t.streams, json);
		assert_int_equal(system(cmd), 0);
	}
	lkt_free(&t);
	lkt_rmrf(dir);
	lkt_rmrf(json);
}

static void json_format_end_to_end(void **state)
{
	struct lk_trace_config c = { .format = LK_TRACE_JSON, .flush_ms = 5 };
	char path[256];
	FILE *f;
	char head[64] = "";

	(void)state;
	lkt_path(path, sizeof(path), "json");
	strcat(path, ".json");
	c.path = path;
	assert_int_equal(lk_trace_start(&c), 0);
	all_types(7);
	assert_int_equal(lk_trace_stop(), 0);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_non_null(fgets(head, sizeof(head), f));
	fclose(f);
	assert_non_null(strstr(head, "traceEvents"));
	assert_int_equal(run("ls -d %s.ctf-* >/dev/null 2>&1", path) != 0, 1); /* the CTF is gone */
	lkt_rmrf(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(records_every_type_exactly),
		cmocka_unit_test(disabled_site_is_a_nop),
		cmocka_unit_test(long_strings_are_truncated),
		cmocka_unit_test(spans_pair_up_however_scopes_end),
		cmocka_unit_test(cputime_recorded_when_asked),
		cmocka_unit_test(rules_apply_in_order),
		cmocka_unit_test(trace_errors),
		cmocka_unit_test(listing),
		cmocka_unit_test(other_readers_agree),
		cmocka_unit_test(timestamps_extend_across_the_wrap),
		cmocka_unit_test(json_format_end_to_end),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
