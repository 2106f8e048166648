// SPDX-License-Identifier: MIT
/* Probes from C++: the argument types found by templates instead of _Generic, spans, counters. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string>
#include <unistd.h>
extern "C" {
#include <cmocka.h> /* has no C++ guard of its own */
}

#include <lowkey/lowkey.h>

struct thing {
	int x;
};

static int sites_of(const struct lk_probe_info *info, void *arg)
{
	if (std::string(info->provider) == "cxx" && std::string(info->event) == "types") {
		const enum lk_probe_type want[] = { LK_PROBE_I64, LK_PROBE_U64, LK_PROBE_F64,
						    LK_PROBE_STR, LK_PROBE_STR, LK_PROBE_PTR,
						    LK_PROBE_U64, LK_PROBE_F64 };

		assert_int_equal(info->nargs, 8);
		for (unsigned int i = 0; i < 8; i++)
			assert_int_equal(info->arg_types[i], want[i]);
		(*static_cast<int *>(arg))++;
	}
	return 0;
}

static void work(int i)
{
	LK_SPAN(cxx, work);
	thing t = { i };
	char buf[8] = "buf";
	std::string s = "std::string";

	LK_PROBE(cxx, types, i, 2u, 1.5, s.c_str(), buf, &t, true, 0.5f);
	LK_COUNTER(cxx, value, i);
}

static void probes_from_cxx(void **)
{
	char dir[] = "/tmp/lowkey-test-cxx-XXXXXX";
	struct lk_trace_config c = {};
	struct lk_trace_stats st;
	int found = 0;

	assert_non_null(mkdtemp(dir));
	assert_int_equal(rmdir(dir), 0);
	assert_true(lk_probe_enable("cxx") >= 0);
	lk_probe_list(sites_of, &found);
	assert_int_equal(found, 1);
	c.path = dir;
	assert_int_equal(lk_trace_start(&c), 0);
	for (int i = 0; i < 10; i++)
		work(i);
	assert_int_equal(lk_trace_stop(), 0);
	assert_int_equal(lk_trace_stats(&st), 0);
	assert_int_equal(st.events, 10 * 4); /* begin, types, value, end */
	assert_int_equal(st.lost, 0);
	assert_int_equal(system((std::string("rm -rf ") + dir).c_str()), 0);
}

int main()
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(probes_from_cxx),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
