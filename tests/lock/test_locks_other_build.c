// SPDX-License-Identifier: MIT
/*
 * `lowkey locks` names call sites from the files of the objects the process loaded, read after it
 * ran: the file at an object's name may be another build by then (replaced, or the host's file of
 * the name a container's process used). The process writes each object's build-id down; a file
 * with another is not read, and lowkey says so once. dlopen_swap loads a library through a link
 * and then points the link at another build of it, the same code on other lines.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "cli/run.h"

static char dir[] = "/tmp/lkt-locks-build-XXXXXX";
static struct lkt_run r;

static int setup(void **state)
{
	(void)state;
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	return lkt_sh(&r, "rm -rf '%s'", dir);
}

/* lowkey locks over dlopen_swap, the link pointing at then, its output in r. */
static void locks_with_swap(const char *then)
{
	lkt_sh(&r,
	       "cd '%s' && cp '%s' lib.so && cp '%s' then.so && rm -f link.so && "
	       "ln -s lib.so link.so && '%s' locks -- '%s' \"$PWD/link.so\" \"$PWD/%s\"",
	       dir, CTOR_LIB, then, LOWKEY, DLOPEN_SWAP,
	       strcmp(then, CTOR_LIB) ? "then.so" : "lib.so");
}

static void the_same_build_is_named(void **state)
{
	(void)state;
	locks_with_swap(CTOR_LIB);
	if (r.status != 0 || !strstr(r.out, "taken_when_loaded (ctor_lock.c:"))
		print_error("lowkey locks (exit %d):\n%s\n", r.status, r.out);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "taken_when_loaded (ctor_lock.c:"));
	assert_null(strstr(r.out, "another build-id"));
}

static void another_build_is_not_read(void **state)
{
	(void)state;
	locks_with_swap(CTOR_DECOY);
	if (r.status != 0 || strstr(r.out, "ctor_lock.c:") || !strstr(r.out, "another build-id"))
		print_error("lowkey locks (exit %d):\n%s\n", r.status, r.out);
	assert_int_equal(r.status, 0);
	assert_null(strstr(r.out, "ctor_lock.c:")); /* no line of the other build */
	assert_non_null(strstr(r.out, "link.so is not the build process"));
	assert_non_null(strstr(r.out, "link.so+0x")); /* named by object and offset */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(the_same_build_is_named),
		cmocka_unit_test(another_build_is_not_read),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
