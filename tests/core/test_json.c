// SPDX-License-Identifier: MIT
/* lk__json_string and the lk__json writer: the one JSON output of the library, the CLI and the benches. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>
#include <math.h>

#include "internal/json.h"

static void expect(const char *in, const char *out)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	lk__json_string(f, in);
	fclose(f);
	assert_string_equal(buf, out);
	free(buf);
}

static void escapes_what_json_requires(void **state)
{
	(void)state;
	expect("plain", "\"plain\"");
	expect("", "\"\"");
	expect("a\"b\\c", "\"a\\\"b\\\\c\"");
	expect("tab\there\nnl\x01", "\"tab\\u0009here\\u000anl\\u0001\"");
	expect("caf\xc3\xa9", "\"caf\xc3\xa9\"");	      /* UTF-8 passes through */
	expect("\xf0\x9f\x98\x80!", "\"\xf0\x9f\x98\x80!\""); /* four bytes too */
	/* bytes that are not UTF-8 become U+FFFD, one each: the output is always JSON text */
	expect("\xff\xfe ok", "\"\\ufffd\\ufffd ok\"");
	expect("cut \xe2\x82", "\"cut \\ufffd\\ufffd\"");
	expect("\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\""); /* a surrogate */
	expect("\xc0\xaf\"", "\"\\ufffd\\ufffd\\\"\"");	     /* overlong, then a quote */
	expect(NULL, "null");
}

static void layout_one_member_per_line(void **state)
{
	struct lk__json j;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	(void)state;
	assert_non_null(f);
	lk__json_begin(&j, f, false);
	lk__json_str(&j, "name", "a\"b");
	lk__json_array(&j, "rows");
	lk__json_object_line(&j, NULL);
	lk__json_int(&j, "i", -1);
	lk__json_array(&j, "v"); /* inside a one-line container: on its line too */
	lk__json_uint(&j, NULL, UINT64_MAX);
	lk__json_null(&j, NULL);
	lk__json_close(&j);
	lk__json_close(&j);
	lk__json_object(&j, NULL);
	lk__json_bool(&j, "ok", true);
	lk__json_close(&j);
	lk__json_close(&j);
	lk__json_array(&j, "empty");
	lk__json_close(&j);
	lk__json_object_line(&j, "none");
	lk__json_close(&j);
	lk__json_end(&j);
	fclose(f);
	assert_string_equal(buf, "{\n"
				 "  \"name\": \"a\\\"b\",\n"
				 "  \"rows\": [\n"
				 "    {\"i\": -1, \"v\": [18446744073709551615, null]},\n"
				 "    {\n"
				 "      \"ok\": true\n"
				 "    }\n"
				 "  ],\n"
				 "  \"empty\": [],\n"
				 "  \"none\": {}\n"
				 "}\n");
	free(buf);
}

static void layout_one_line_and_values(void **state)
{
	struct lk__json j;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	(void)state;
	assert_non_null(f);
	lk__json_begin(&j, f, true);
	lk__json_num(&j, "num", 1.0 / 3);
	lk__json_num(&j, "nan", NAN);
	lk__json_fixed(&j, "fixed", 2.5, 3);
	lk__json_fixed(&j, "inf", -INFINITY, 3);
	lk__json_str(&j, "empty", NULL);
	lk__json_str_or_null(&j, "unknown", NULL);
	lk__json_strf(&j, "hex", "%#x", 255u);
	lk__json_object(&j, "k\x01"); /* keys are escaped too */
	lk__json_bool(&j, "no", false);
	lk__json_close(&j);
	lk__json_end(&j);
	fclose(f);
	assert_string_equal(
		buf,
		"{\"num\": 0.333333, \"nan\": null, \"fixed\": 2.500, \"inf\": null, \"empty\": \"\", "
		"\"unknown\": null, \"hex\": \"0xff\", \"k\\u0001\": {\"no\": false}}\n");
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(escapes_what_json_requires),
		cmocka_unit_test(layout_one_member_per_line),
		cmocka_unit_test(layout_one_line_and_values),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
