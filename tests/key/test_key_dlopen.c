// SPDX-License-Identifier: MIT
/*
 * A dlopen()ed plugin with sites on a key of the executable and on its own key: it comes up in
 * the key's present direction, follows flips, is forgotten at dlclose() (later flips must not
 * touch its unmapped code), and comes back right when opened again.
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <lowkey/lowkey.h>

#include "sites.h"

LK_DEFINE_KEY_FALSE(host_key);

static __attribute__((noinline)) int host_site(void)
{
	return lk_branch_unlikely(&host_key) ? 1 : 0;
}

struct plugin {
	void *handle;
	int (*host_site)(void);
	int (*own_site)(void);
	struct lk_key *(*own_key)(void);
	int (*check_sites)(const void *key);
};

static void plugin_open(struct plugin *p)
{
	p->handle = dlopen(PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
	assert_non_null(p->handle);
	*(void **)&p->host_site = dlsym(p->handle, "plugin_host_site");
	*(void **)&p->own_site = dlsym(p->handle, "plugin_own_site");
	*(void **)&p->own_key = dlsym(p->handle, "plugin_own_key");
	*(void **)&p->check_sites = dlsym(p->handle, "plugin_check_sites");
	assert_non_null(p->host_site);
	assert_non_null(p->own_site);
	assert_non_null(p->own_key);
	assert_non_null(p->check_sites);
}

static void plugin_close(struct plugin *p)
{
	assert_int_equal(dlclose(p->handle), 0);
	p->handle = NULL;
}

static void comes_up_in_present_direction(void **state)
{
	struct plugin p;

	(void)state;
	assert_int_equal(lk_key_sites(&host_key), LKT_PATCHING ? 1 : 0);
	assert_int_equal(lk_key_enable(&host_key), 0); /* flipped before the plugin exists */

	plugin_open(&p);
	assert_int_equal(p.host_site(), 1);
	assert_int_equal(p.check_sites(&host_key), LKT_PATCHING ? 1 : 0);
	assert_int_equal(lk_key_sites(&host_key), LKT_PATCHING ? 2 : 0);

	assert_int_equal(lk_key_disable(&host_key), 0);
	assert_int_equal(p.host_site(), 0);
	assert_int_equal(host_site(), 0);
	assert_int_equal(p.check_sites(&host_key), LKT_PATCHING ? 1 : 0);

	/* its own key, flipped from here */
	assert_int_equal(p.own_site(), 0);
	assert_int_equal((lk_key_enable)(p.own_key()), 0);
	assert_int_equal(p.own_site(), 1);
	assert_int_equal(p.check_sites(p.own_key()), LKT_PATCHING ? 1 : 0);
	plugin_close(&p);
}

static void closed_plugin_is_forgotten(void **state)
{
	struct plugin p;

	(void)state;
	plugin_open(&p);
	assert_int_equal(lk_key_sites(&host_key), LKT_PATCHING ? 2 : 0);
	plugin_close(&p);
	assert_int_equal(lk_key_sites(&host_key), LKT_PATCHING ? 1 : 0);

	/* The plugin's code is unmapped: flipping must not write there (it would fault). */
	for (int i = 0; i < 100; i++) {
		assert_int_equal(lk_key_enable(&host_key), 0);
		assert_int_equal(host_site(), 1);
		assert_int_equal(lk_key_disable(&host_key), 0);
		assert_int_equal(host_site(), 0);
	}
}

static void reopened_plugin_is_right_again(void **state)
{
	struct plugin p;

	(void)state;
	assert_int_equal(lk_key_enable(&host_key), 0);
	for (int round = 0; round < 20; round++) {
		plugin_open(&p);
		assert_int_equal(p.host_site(), 1);
		/* A new instance of the plugin: its own key starts off again. */
		assert_int_equal(p.own_site(), 0);
		assert_int_equal(p.check_sites(&host_key), LKT_PATCHING ? 1 : 0);
		assert_int_equal(lk_key_disable(&host_key), 0);
		assert_int_equal(p.host_site(), 0);
		assert_int_equal(lk_key_enable(&host_key), 0);
		plugin_close(&p);
	}
	assert_int_equal(lk_key_disable(&host_key), 0);
	assert_int_equal(lk_key_sites(&host_key), LKT_PATCHING ? 1 : 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(comes_up_in_present_direction),
		cmocka_unit_test(closed_plugin_is_forgotten),
		cmocka_unit_test(reopened_plugin_is_right_again),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
