// SPDX-License-Identifier: MIT
/* The public headers from C++: keys of both kinds, sites, flips and batches. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
extern "C" {
#include <cmocka.h> /* has no C++ guard of its own */
}

#include <lowkey/lowkey.h>

LK_DEFINE_KEY_FALSE(cxx_false);
static LK_DEFINE_KEY_TRUE(cxx_true);

static __attribute__((noinline)) int false_site()
{
	return lk_branch_unlikely(&cxx_false) ? 1 : 0;
}
static __attribute__((noinline)) int true_site()
{
	return lk_branch_likely(&cxx_true) ? 1 : 0;
}

static void keys_from_cxx(void **)
{
	assert_int_equal(false_site(), 0);
	assert_int_equal(true_site(), 1);
	assert_int_equal(lk_key_enable(&cxx_false), 0);
	assert_int_equal(lk_key_disable(&cxx_true), 0);
	assert_int_equal(false_site(), 1);
	assert_int_equal(true_site(), 0);

	lk_key_change changes[] = { { LK_KEY(&cxx_false), LK_KEY_DISABLE },
				    { LK_KEY(&cxx_true), LK_KEY_ENABLE } };
	assert_int_equal(lk_key_apply(changes, 2), 0);
	assert_int_equal(false_site(), 0);
	assert_int_equal(true_site(), 1);
#ifndef LK_KEYS_PORTABLE
	assert_int_equal(lk_key_sites(&cxx_false), 1);
#endif
}

int main()
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(keys_from_cxx),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
