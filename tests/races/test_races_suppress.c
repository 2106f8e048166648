// SPDX-License-Identifier: MIT
/*
 * The suppressions of `lowkey races` (tools/lowkey/util/races_suppress.c): ThreadSanitizer's
 * pattern match (substring, * wildcard, ^ and $ anchors) and the file's syntax (race: and
 * race_top: kept, TSan's other kinds read and ignored, anything else refused with its line).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "races.h"

static void pattern_is_a_substring(void **state)
{
	(void)state;
	assert_true(races_pattern_match("bump", "bump_plain"));
	assert_true(races_pattern_match("plain", "bump_plain"));
	assert_true(races_pattern_match("races_lib.c", "/src/tests/races/races_lib.c"));
	assert_false(races_pattern_match("bump_plainer", "bump_plain"));
	assert_false(races_pattern_match("bump", ""));
	assert_false(races_pattern_match("bump", NULL));
}

static void pattern_wildcards_and_anchors(void **state)
{
	(void)state;
	assert_true(races_pattern_match("b*_plain", "bump_plain"));
	assert_true(races_pattern_match("^bump", "bump_plain"));
	assert_false(races_pattern_match("^plain", "bump_plain"));
	assert_true(races_pattern_match("plain$", "bump_plain"));
	assert_false(races_pattern_match("bump$", "bump_plain"));
	assert_true(races_pattern_match("^bump_plain$", "bump_plain"));
	assert_false(races_pattern_match("^bump_plai$", "bump_plain"));
	assert_true(races_pattern_match("^*plain$", "bump_plain"));
	assert_true(races_pattern_match("std::*::load", "std::__atomic_base<int>::load"));
	assert_false(races_pattern_match("std::*::store", "std::__atomic_base<int>::load"));
	assert_true(races_pattern_match("a*a*a$", "aaaa"));
	assert_false(races_pattern_match("a*b", "aaaa"));
}

/* A file of text, read into s: races_suppressions_read's result, its message in err. */
static int read_text(struct races_suppressions *s, const char *text, char *err, size_t errlen)
{
	char path[] = "/tmp/lowkey-supp.XXXXXX";
	int fd = mkstemp(path), ret;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	ret = races_suppressions_read(s, path, err, errlen);
	unlink(path);
	return ret;
}

static void file_syntax(void **state)
{
	struct races_suppressions s = { 0 };
	const char *one[] = { NULL, "other_function", "/x/races_lib.c" };
	const char *none[] = { "bump_plain", NULL, "/x/races_fixture.c" };
	char err[512];

	(void)state;
	assert_int_equal(read_text(&s,
				   "# comment\n\n  race:races_lib.c  \nrace_top:^seq\r\n"
				   "thread:x\nmutex:y\nsignal:z\ndeadlock:w\ncalled_from_lib:v\n",
				   err, sizeof(err)),
			 0);
	assert_int_equal(s.n, 2);
	assert_string_equal(s.patterns[0], "races_lib.c");
	assert_string_equal(s.patterns[1], "^seq");
	assert_true(races_suppressed(&s, one, 3));
	assert_false(races_suppressed(&s, none, 3));
	races_suppressions_free(&s);
}

static void file_errors(void **state)
{
	struct races_suppressions s = { 0 };
	char err[512];

	(void)state;
	assert_int_equal(read_text(&s, "race:a\nrcae:b\n", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, ":2: unknown kind 'rcae'"));
	races_suppressions_free(&s);
	assert_int_equal(read_text(&s, "race:\n", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, ":1: not KIND:PATTERN"));
	races_suppressions_free(&s);
	assert_int_equal(read_text(&s, "just_a_name\n", err, sizeof(err)), -EINVAL);
	races_suppressions_free(&s);
	assert_int_equal(races_suppressions_read(&s, "/nonexistent/lowkey.supp", err, sizeof(err)),
			 -ENOENT);
	assert_non_null(strstr(err, "cannot read /nonexistent/lowkey.supp"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(pattern_is_a_substring),
		cmocka_unit_test(pattern_wildcards_and_anchors),
		cmocka_unit_test(file_syntax),
		cmocka_unit_test(file_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
