// SPDX-License-Identifier: MIT
/*
 * Keys across shared objects: a key defined in a shared library tested in the executable and in
 * the library, and a key of the executable tested in the library.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <lowkey/lowkey.h>

#include "sites.h"

LK_DEFINE_KEY_FALSE(exe_key);
LK_DECLARE_KEY(lib_key);
LK_DECLARE_KEY_TRUE(lib_true_key);

int lib_site_lib_key(void);
int lib_site_lib_true_key(void);
int lib_site_exe_key(void);
int lib_check_sites(const void *key);

static __attribute__((noinline)) int exe_site_lib_key(void)
{
	return lk_branch_unlikely(&lib_key) ? 1 : 0;
}

static __attribute__((noinline)) int exe_site_lib_true_key(void)
{
	return lk_branch_unlikely(&lib_true_key) ? 1 : 0;
}

static __attribute__((noinline)) int exe_site_exe_key(void)
{
	return lk_branch_unlikely(&exe_key) ? 1 : 0;
}

static void expect(int on_lib, int on_lib_true, int on_exe)
{
	assert_int_equal(exe_site_lib_key(), on_lib);
	assert_int_equal(lib_site_lib_key(), on_lib);
	assert_int_equal(exe_site_lib_true_key(), on_lib_true);
	assert_int_equal(lib_site_lib_true_key(), on_lib_true);
	assert_int_equal(exe_site_exe_key(), on_exe);
	assert_int_equal(lib_site_exe_key(), on_exe);
	assert_int_equal(lkt_check_sites(&lib_key), LKT_PATCHING ? 1 : 0);
	assert_int_equal(lib_check_sites(&lib_key), LKT_PATCHING ? 1 : 0);
	assert_int_equal(lkt_check_sites(&lib_true_key), LKT_PATCHING ? 1 : 0);
	assert_int_equal(lib_check_sites(&lib_true_key), LKT_PATCHING ? 1 : 0);
	assert_int_equal(lkt_check_sites(&exe_key), LKT_PATCHING ? 1 : 0);
	assert_int_equal(lib_check_sites(&exe_key), LKT_PATCHING ? 1 : 0);
}

static void keys_cross_objects(void **state)
{
	(void)state;
	expect(0, 1, 0);
	assert_int_equal(lk_key_sites(&lib_key), LKT_PATCHING ? 2 : 0);
	assert_int_equal(lk_key_sites(&exe_key), LKT_PATCHING ? 2 : 0);

	assert_int_equal(lk_key_enable(&lib_key), 0);
	expect(1, 1, 0);
	assert_int_equal(lk_key_disable(&lib_true_key), 0);
	expect(1, 0, 0);
	assert_int_equal(lk_key_enable(&exe_key), 0);
	expect(1, 0, 1);
	assert_int_equal(lk_key_disable(&lib_key), 0);
	assert_int_equal(lk_key_enable(&lib_true_key), 0);
	assert_int_equal(lk_key_disable(&exe_key), 0);
	expect(0, 1, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(keys_cross_objects),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
