// SPDX-License-Identifier: MIT
/* lk__json_string: the one JSON string writer of the library, the CLI and the benches. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

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
	expect("caf\xc3\xa9", "\"caf\xc3\xa9\"");	/* UTF-8 passes through */
	expect("\xf0\x9f\x98\x80!", "\"\xf0\x9f\x98\x80!\"");	/* four bytes too */
	/* bytes that are not UTF-8 become U+FFFD, one each: the output is always JSON text */
	expect("\xff\xfe ok", "\"\\ufffd\\ufffd ok\"");
	expect("cut \xe2\x82", "\"cut \\ufffd\\ufffd\"");
	expect("\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"");	/* a surrogate */
	expect("\xc0\xaf\"", "\"\\ufffd\\ufffd\\\"\"");	/* overlong, then a quote */
	expect(NULL, "null");
}

int main(void)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(escapes_what_json_requires) };

	return cmocka_run_group_tests(tests, NULL, NULL);
}
