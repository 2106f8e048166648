// SPDX-License-Identifier: MIT
/*
 * Probes in a shared object loaded during a trace: listed once loaded, selected by the rules
 * already in force, described in the trace's metadata (babeltrace2 reads their events), and gone
 * from the list after dlclose -- while the trace still describes the events it recorded.
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <lowkey/lowkey.h>

#include "trace_check.h"

static int count_plugin(const struct lk_probe_info *info, void *arg)
{
	if (strcmp(info->provider, "plug") == 0) {
		assert_non_null(strstr(info->object, "lkt_probe_plugin"));
		(*(int *)arg)++;
	}
	return 0;
}

static int plugin_sites(void)
{
	int n = 0;

	lk_probe_list(count_plugin, &n);
	return n;
}

static void plugin_loaded_mid_trace(void **state)
{
	struct lk_trace_config c = { .flush_ms = 5 };
	void (*fire)(long);
	struct lkt_trace t;
	char dir[256], cmd[512];
	void *h;

	(void)state;
	assert_int_equal(lk_probe_enable("plug:*"), 0); /* nothing loaded matches yet */
	lkt_path(dir, sizeof(dir), "dso");
	c.path = dir;
	assert_int_equal(lk_trace_start(&c), 0);
	assert_int_equal(plugin_sites(), 0);

	h = dlopen(PLUGIN_PATH, RTLD_NOW);
	assert_non_null(h);
	*(void **)&fire = dlsym(h, "plugin_fire");
	assert_non_null(fire);
	assert_int_equal(plugin_sites(), 1);
	fire(10);
	assert_int_equal(dlclose(h), 0);
	assert_int_equal(plugin_sites(), 0);

	h = dlopen(PLUGIN_PATH, RTLD_NOW); /* again: a new registration, recording again */
	*(void **)&fire = dlsym(h, "plugin_fire");
	fire(5);
	dlclose(h);
	assert_int_equal(lk_trace_stop(), 0);

	assert_int_equal(lkt_read(&t, dir), 0);
	assert_int_equal(lkt_count(&t, "plug:fired"), 15);
	for (size_t k = 0; k < t.n; k++)
		if (strcmp(t.ev[k].name, "plug:fired") == 0)
			assert_string_equal(t.ev[k].s[1], "from the plugin");
	if (system("command -v babeltrace2 >/dev/null") == 0) {
		snprintf(cmd, sizeof(cmd),
			 "test $(babeltrace2 '%s' 2>/dev/null | grep -c plug:fired) = 15", dir);
		assert_int_equal(system(cmd), 0);
	}
	lkt_free(&t);
	lkt_rmrf(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(plugin_loaded_mid_trace),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
