// SPDX-License-Identifier: MIT
/*
 * The Chrome JSON a trace converts to is JSON whatever the program recorded: a string argument,
 * a thread name or an event's bytes that are not UTF-8 become U+FFFD; NaN and infinite
 * arguments become strings and such counter values are left out (counted); and timestamps are
 * the CTF trace's real time. Checked on the bytes, and with Python's strict json module where
 * there is one.
 */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>
#include <cmocka.h>

#include <lowkey/lowkey.h>

#include "internal/utf8.h"
#include "internal/trace_convert.h"
#include "trace_check.h"

static __attribute__((noinline)) void record(void)
{
	const char *bad = "\xff\xfe ok";
	double nan_value = NAN, inf = INFINITY, fine = 2.5;

	LK_PROBE(j, strings, bad);
	LK_PROBE(j, doubles, nan_value, inf, -inf, fine);
	LK_COUNTER(j, level, nan_value);
	LK_COUNTER(j, level, inf);
	LK_COUNTER(j, level, fine);
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	struct stat st;

	assert_non_null(f);
	assert_int_equal(fstat(fileno(f), &st), 0);
	buf = malloc((size_t)st.st_size + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)st.st_size, f), (size_t)st.st_size);
	buf[st.st_size] = 0;
	*len = (size_t)st.st_size;
	fclose(f);
	return buf;
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void json_is_json_whatever_was_recorded(void **state)
{
	struct lk_trace_config c = { .flush_ms = 5 };
	char dir[256], json[300], cmd[2048], err[512];
	uint64_t before, after;
	size_t len;
	char *text;

	(void)state;
	pthread_setname_np(pthread_self(), "bad\xff"
					   "name");
	assert_true(lk_probe_enable("j") > 0);
	lkt_path(dir, sizeof(dir), "json-fixes");
	c.path = dir;
	before = realtime_ns();
	assert_int_equal(lk_trace_start(&c), 0);
	record();
	assert_int_equal(lk_trace_stop(), 0);
	after = realtime_ns();
	snprintf(json, sizeof(json), "%s.json", dir);
	assert_int_equal(lk__json_convert(dir, json, err, sizeof(err)), 0);

	text = slurp(json, &len);
	assert_true(lk__utf8_valid((const unsigned char *)text, len));
	assert_null(strstr(text, "null"));
	assert_non_null(strstr(text, "\"\\ufffd\\ufffd ok\""));
	assert_non_null(strstr(text, "\"bad\\ufffdname\""));
	assert_non_null(strstr(
		text,
		"{\"nan_value\":\"NaN\",\"inf\":\"Infinity\",\"arg2\":\"-Infinity\",\"fine\":2.5}"));
	assert_non_null(strstr(text, "\"args\":{\"value\":2.5}"));
	assert_non_null(strstr(text, "\"nonfinite_counter_values\":2"));
	free(text);

	if (system("python3 -c 'import json' 2>/dev/null") == 0) {
		/* strict: NaN and Infinity tokens refused; timestamps within the run, in real time */
		snprintf(
			cmd, sizeof(cmd),
			"python3 -c 'import json,sys\n"
			"def no(x): raise ValueError(x)\n"
			"d = json.load(open(sys.argv[1], encoding=\"utf-8\", errors=\"strict\"), parse_constant=no)\n"
			"ev = [e for e in d[\"traceEvents\"] if e[\"ph\"] != \"M\"]\n"
			"assert [e[\"args\"][\"bad\"] for e in ev if e[\"name\"] == \"strings\"] == [\"\\ufffd\\ufffd ok\"]\n"
			"assert [e[\"args\"][\"value\"] for e in ev if e[\"name\"] == \"level\"] == [2.5]\n"
			"ts = [e[\"ts\"] * 1000 for e in ev]\n"
			"assert all(%" PRIu64 " - 1e6 <= t <= %" PRIu64 " + 1e6 for t in ts), ts\n"
			"' '%s'",
			before, after, json);
		assert_int_equal(system(cmd), 0);
	} else {
		fprintf(stderr, "python3 not found: the JSON was checked on its bytes only\n");
	}
	lkt_rmrf(dir);
	lkt_rmrf(json);
}

int main(void)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(json_is_json_whatever_was_recorded) };

	return cmocka_run_group_tests(tests, NULL, NULL);
}
