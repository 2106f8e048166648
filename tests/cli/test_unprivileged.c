// SPDX-License-Identifier: MIT
/*
 * The tests named on the command line, run again as an unprivileged user (nobody, no
 * capabilities) the way users run lowkey. Each program and the library are copied to a directory
 * nobody can read, since the build tree may live under a private home. Modules add their tests to
 * the global CMake property LK_UNPRIVILEGED_TESTS. Skipped when not root: the normal run already
 * was unprivileged.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>
#include <cmocka.h>

#include "run.h"

static int nargs;
static char **args;
static char dir[] = "/tmp/lowkey-unpriv-XXXXXX";
static struct lkt_run r;

static int stage(void **state)
{
	(void)state;
	if (geteuid() != 0)
		return 0;
	if (!mkdtemp(dir) ||
	    lkt_sh(&r, "chmod 755 '%s' && cp -L '%s' '%s'/ && cp '%s'* '%s'/ && chmod -R a+rX '%s'",
		   dir, LIBRARY, dir, LIBRARY, dir, dir) != 0)
		return -1;
	return 0;
}

static int unstage(void **state)
{
	(void)state;
	if (geteuid() == 0)
		lkt_sh(&r, "rm -rf '%s'", dir);
	return 0;
}

static void each_test_passes_as_nobody(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip();
	if (lkt_sh(&r, "command -v setpriv") != 0)
		skip(); /* util-linux's setpriv is missing */
	for (int i = 1; i < nargs; i++) {
		const char *name = strrchr(args[i], '/') ? strrchr(args[i], '/') + 1 : args[i];

		assert_int_equal(lkt_sh(&r, "cp '%s' '%s'/ && chmod a+rx '%s/%s'", args[i], dir,
					dir, name),
				 0);
		lkt_sh(&r,
		       "cd '%s' && LD_LIBRARY_PATH='%s' setpriv --reuid=65534 --regid=65534 --clear-groups "
		       "--inh-caps=-all --bounding-set=-all ./%s",
		       dir, dir, name);
		if (r.status != 0)
			print_error("%s as nobody exited %d:\n%s\n", name, r.status, r.out);
		assert_int_equal(r.status, 0);
	}
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(each_test_passes_as_nobody),
	};

	nargs = argc;
	args = argv;
	return cmocka_run_group_tests(tests, stage, unstage);
}
