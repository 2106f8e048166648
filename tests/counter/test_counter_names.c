// SPDX-License-Identifier: MIT
/*
 * perf's software event names resolve without libpfm4 (starting it costs milliseconds), to the
 * same events and the same canonical names libpfm4 gives them.
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "helpers.h"

#include <lowkey/counter.h>
#include <lowkey/error.h>

#include "internal/pfm.h"

static const char *const software_names[] = {
	"cpu-clock", "task-clock",     "page-faults", "faults",	      "context-switches",
	"cs",	     "cpu-migrations", "migrations",  "minor-faults", "major-faults",
};

static bool pfm_loaded(void)
{
	void *lib = dlopen("libpfm.so.4", RTLD_NOW | RTLD_NOLOAD);

	if (lib)
		dlclose(lib);
	return lib != NULL;
}

static void software_names_do_not_start_libpfm4(void **state)
{
	struct lk_counters *c;

	(void)state;
	assert_false(pfm_loaded());
	assert_int_equal(
		lk_counters_open(&c, "task-clock,cs,page-faults,minor-faults:u,dummy", 0, 0), 0);
	assert_false(pfm_loaded());
	lk_counters_close(c);
	assert_int_equal(lk_counters_open(&c, "cycles", 0, LK_COUNTERS_SKIP_UNSUPPORTED), 0);
	assert_true(pfm_loaded()); /* the check above can see libpfm4 when it is there */
	lk_counters_close(c);
}

static void software_names_match_libpfm4(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(software_names) / sizeof(software_names[0]); i++) {
		struct lk_counter_info info;
		struct lk__pfm_event pe;
		struct lk_counters *c;

		assert_int_equal(lk_counters_open(&c, software_names[i], 0, 0), 0);
		assert_int_equal(lk_counters_describe(c, 0, &info), 0);
		assert_int_equal(lk__pfm_encode(software_names[i], &pe), 0);
		assert_int_equal(info.type, pe.type);
		assert_int_equal(info.config, pe.config);
		assert_string_equal(info.event, pe.canonical);
		lk_counters_close(c);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(software_names_do_not_start_libpfm4),
		cmocka_unit_test(software_names_match_libpfm4),
	};

	lkt_perf_require();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
