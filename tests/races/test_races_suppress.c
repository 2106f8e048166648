// SPDX-License-Identifier: MIT
/*
 * The suppressions of `lowkey races` (tools/lowkey/util/races_suppress.c): ThreadSanitizer's
 * pattern match (substring, * wildcard, ^ and $ anchors), the file's syntax (race: and race_top:
 * kept, TSan's other kinds read and ignored, anything else refused with its line), and what each
 * kind matches of a race built here as the report names one: race: any frame of either stack
 * (function demangled or mangled, file, object) and the global, race_top: the first frame of each.
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

/*
 * The race of races_fixture's deep mode as the report names it: the reader two calls deep, the
 * writer's access in a function inlined in its caller, and a C++ frame below.
 */
static const struct races_names reader[] = {
	{ "inner_read", "inner_read", "/src/races_fixture.c", "/bin/races_fixture" },
	{ "outer_read", "outer_read", "/src/races_fixture.c", "/bin/races_fixture" },
	{ "Pool::run(int)", "_ZN4Pool3runEi", "/src/pool.cpp", "/usr/lib/libpool.so" },
	{ "start_thread", "start_thread", "./nptl/pthread_create.c", "/lib/libc.so.6" },
};
static const struct races_names writer[] = {
	{ "deep_add", "deep_add", "/src/races_fixture.c", "/bin/races_fixture" },
	{ "inner_write", "inner_write", "/src/races_fixture.c", "/bin/races_fixture" },
	{ "outer_write", "outer_write", "/src/races_fixture.c", "/bin/races_fixture" },
};
static const struct races_names deep_value = { "deep_value", "deep_value", NULL,
					       "/bin/races_fixture" };

/* Whether the suppressions file text suppresses the race: the n first of reader and writer. */
static bool suppresses(const char *text, size_t n)
{
	const struct races_access_names accesses[] = {
		{ reader, sizeof(reader) / sizeof(reader[0]) },
		{ writer, sizeof(writer) / sizeof(writer[0]) },
	};
	struct races_suppressions s = { 0 };
	char err[512];
	bool suppressed;

	assert_int_equal(read_text(&s, text, err, sizeof(err)), 0);
	suppressed = races_race_suppressed(&s, accesses, n, &deep_value, 1);
	races_suppressions_free(&s);
	return suppressed;
}

static void file_syntax(void **state)
{
	struct races_suppressions s = { 0 };
	char err[512];

	(void)state;
	assert_int_equal(read_text(&s,
				   "# comment\n\n  race:races_lib.c  \nrace_top:^seq\r\n"
				   "thread:x\nmutex:y\nsignal:z\ndeadlock:w\ncalled_from_lib:v\n",
				   err, sizeof(err)),
			 0);
	assert_int_equal(s.n, 2);
	assert_string_equal(s.patterns[0].text, "races_lib.c");
	assert_false(s.patterns[0].top);
	assert_string_equal(s.patterns[1].text, "^seq");
	assert_true(s.patterns[1].top);
	races_suppressions_free(&s);
	/* the kinds lowkey ignores suppress nothing */
	assert_false(suppresses("thread:outer_read\nmutex:deep_value\n", 2));
}

/* race: matches every frame of both stacks, whatever of it the pattern names. */
static void race_matches_any_frame(void **state)
{
	(void)state;
	assert_true(suppresses("race:outer_read\n", 2));  /* a caller */
	assert_true(suppresses("race:outer_write\n", 2)); /* the other thread's caller */
	assert_true(suppresses("race:inner_write\n", 2)); /* the function deep_add is inlined in */
	assert_true(suppresses("race:^Pool::run(int)$\n", 2)); /* demangled, anchored */
	assert_true(suppresses("race:_ZN4Pool3runEi\n", 2));   /* mangled */
	assert_true(suppresses("race:pool.cpp\n", 2));	       /* a caller's file */
	assert_true(suppresses("race:libc.so\n", 2));	       /* a caller's object */
	assert_true(suppresses("race:deep_value\n", 2));       /* the global */
	assert_false(suppresses("race:main\n", 2));
	assert_false(suppresses("race:^outer$\n", 2));
	/* only the held access known: the other thread's frames are not there to match */
	assert_false(suppresses("race:outer_write\n", 1));
	assert_true(suppresses("race:outer_read\n", 1));
}

/* race_top: matches the first frame of each access only, never the global (as TSan). */
static void race_top_matches_the_accesses(void **state)
{
	(void)state;
	assert_true(suppresses("race_top:inner_read\n", 2));
	assert_true(suppresses("race_top:^deep_add$\n", 2)); /* the inlined function is the top */
	assert_true(suppresses("race_top:races_fixture.c\n", 2));
	assert_true(suppresses("race_top:/bin/races_fixture\n", 2));
	assert_false(suppresses("race_top:outer_read\n", 2));
	assert_false(
		suppresses("race_top:inner_write\n", 2)); /* deep_add's caller, at the access */
	assert_false(suppresses("race_top:Pool\n", 2));
	assert_false(suppresses("race_top:libc.so\n", 2));
	assert_false(suppresses("race_top:deep_value\n", 2));
	assert_false(suppresses("race_top:deep_add\n", 1));
	/* either pattern of a file suppresses */
	assert_true(suppresses("race_top:outer_read\nrace:outer_read\n", 2));
}

/* An access with no frame named (its address in no object known) matches nothing; a location does. */
static void no_frames(void **state)
{
	const struct races_access_names accesses[] = { { reader, 0 }, { writer, 0 } };
	const struct races_names locations[] = {
		deep_value,
		{ "make_block", "make_block", "/src/block.c", NULL },
	};
	struct races_suppressions s = { 0 };
	char err[512];

	(void)state;
	assert_int_equal(read_text(&s, "race_top:inner_read\nrace:outer\n", err, sizeof(err)), 0);
	assert_false(races_race_suppressed(&s, accesses, 2, &deep_value, 1));
	assert_false(races_race_suppressed(&s, accesses, 2, NULL, 0));
	races_suppressions_free(&s);
	assert_int_equal(read_text(&s, "race:deep_value\n", err, sizeof(err)), 0);
	assert_true(races_race_suppressed(&s, accesses, 2, &deep_value, 1));
	assert_false(races_race_suppressed(&s, accesses, 2, NULL, 0));
	races_suppressions_free(&s);
	/* every location is matched by race: only */
	assert_int_equal(read_text(&s, "race_top:make_block\n", err, sizeof(err)), 0);
	assert_false(races_race_suppressed(&s, accesses, 2, locations, 2));
	races_suppressions_free(&s);
	assert_int_equal(read_text(&s, "race:make_block\n", err, sizeof(err)), 0);
	assert_true(races_race_suppressed(&s, accesses, 2, locations, 2));
	assert_false(races_race_suppressed(&s, accesses, 2, locations, 1));
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
		cmocka_unit_test(race_matches_any_frame),
		cmocka_unit_test(race_top_matches_the_accesses),
		cmocka_unit_test(no_frames),
		cmocka_unit_test(file_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
