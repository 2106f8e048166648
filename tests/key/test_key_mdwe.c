// SPDX-License-Identifier: MIT
/*
 * Under memory-deny-write-execute (prctl PR_SET_MDWE, what systemd's MemoryDenyWriteExecute=
 * sets), code cannot be made writable: flipping returns -EPERM with a message and changes
 * nothing, and the program runs on. In a portable build (sites are load + branch) it just works.
 * MDWE cannot be undone, so this is its own program.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>
#include <cmocka.h>

#include <lowkey/lowkey.h>

#include "sites.h"

#ifndef PR_SET_MDWE
#define PR_SET_MDWE 65
#define PR_MDWE_REFUSE_EXEC_GAIN 1
#endif
#ifndef PR_GET_MDWE
#define PR_GET_MDWE 66
#endif

static LK_DEFINE_KEY_FALSE(mdwe_key);
static LK_DEFINE_KEY_TRUE(mdwe_true_key);

static __attribute__((noinline)) int mdwe_site(void)
{
	return lk_branch_unlikely(&mdwe_key) ? 1 : 0;
}

static __attribute__((noinline)) int mdwe_true_site(void)
{
	return lk_branch_likely(&mdwe_true_key) ? 1 : 0;
}

static int enter_mdwe(void **state)
{
	(void)state;
	if (prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) != 0)
		return errno == EINVAL ? 0 : -1; /* kernel < 6.3: the test skips */
	return 0;
}

static void flipping_is_refused_cleanly(void **state)
{
	(void)state;
	if (prctl(PR_GET_MDWE, 0, 0, 0, 0) <= 0)
		skip(); /* this kernel has no MDWE (Linux < 6.3) */
#if LKT_PATCHING
	assert_int_equal(lk_key_enable(&mdwe_key), -EPERM);
	assert_non_null(strstr(lk_last_error(), "memory-deny-write-execute"));
	assert_non_null(strstr(lk_last_error(), "LK_KEYS_PORTABLE"));
	assert_false(lk_key_enabled(&mdwe_key));
	assert_int_equal(mdwe_site(), 0);
	assert_int_equal(lkt_check_sites(&mdwe_key), 1);

	assert_int_equal(lk_key_dec(&mdwe_true_key), -EPERM);
	assert_true(lk_key_enabled(&mdwe_true_key));
	assert_int_equal(mdwe_true_site(), 1);

	/* what needs no rewriting still works */
	assert_int_equal(lk_key_disable(&mdwe_key), 0);
	assert_int_equal(lk_key_inc(&mdwe_true_key), 0);
	assert_int_equal(lk_key_dec(&mdwe_true_key), 0);
	assert_int_equal(mdwe_true_site(), 1);
#else
	assert_int_equal(lk_key_enable(&mdwe_key), 0);
	assert_int_equal(mdwe_site(), 1);
	assert_int_equal(lk_key_disable(&mdwe_true_key), 0);
	assert_int_equal(mdwe_true_site(), 0);
#endif
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(flipping_is_refused_cleanly),
	};
	return cmocka_run_group_tests(tests, enter_mdwe, NULL);
}
