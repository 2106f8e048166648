// SPDX-License-Identifier: MIT
/*
 * `cmake --install` gives a user what the README promises: headers, both libraries, the CLI,
 * its manual pages and bash completion, lowkey.pc for pkg-config and a CMake package for
 * find_package(lowkey). A consumer program built each way runs, and its static key flips.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>
#include <cmocka.h>

#include "run.h"

static char prefix[] = "/tmp/lowkey-install-XXXXXX";
static struct lkt_run r;

static int install(void **state)
{
	(void)state;
	if (!mkdtemp(prefix))
		return -1;
	if (lkt_sh(&r, "cmake --install '%s' --prefix '%s'", BUILD_DIR, prefix) != 0) {
		fprintf(stderr, "%s", r.out);
		return -1;
	}
	return 0;
}

static int uninstall(void **state)
{
	(void)state;
	lkt_sh(&r, "rm -rf '%s'", prefix);
	return 0;
}

static void files_in_place(void **state)
{
	(void)state;
	assert_int_equal(
		lkt_sh(&r,
		       "cd '%s' && ls include/lowkey/lowkey.h include/lowkey/key.h include/lowkey/lock.hpp "
		       "include/lowkey/bits/dso.h include/lowkey/version.h lib*/liblowkey.so lib*/liblowkey.a "
		       "lib*/pkgconfig/lowkey.pc lib*/cmake/lowkey/lowkeyConfig.cmake bin/lowkey "
		       "share/man/man1/lowkey.1 share/man/man1/lowkey-trace.1 "
		       "share/bash-completion/completions/lowkey",
		       prefix),
		0);
	assert_int_equal(lkt_sh(&r, "LD_LIBRARY_PATH='%s'/lib:'%s'/lib64 '%s'/bin/lowkey --version",
				prefix, prefix, prefix),
			 0);
}

static void consumer_with_pkg_config(void **state)
{
	(void)state;
	assert_int_equal(
		lkt_sh(&r,
		       "cd '%s' && export PKG_CONFIG_PATH=$(ls -d '%s'/lib*/pkgconfig) && "
		       "cc -Wall -Werror %s/examples/keys.c $(pkg-config --cflags --libs lowkey) "
		       "-Wl,-rpath,$(pkg-config --variable=libdir lowkey) -o keys-pc && ./keys-pc",
		       prefix, prefix, SOURCE_DIR),
		0);
	assert_non_null(strstr(r.out, "work(3)"));
	assert_null(strstr(r.out, "work(0)"));
}

static void consumer_with_find_package(void **state)
{
	(void)state;
	assert_int_equal(
		lkt_sh(&r,
		       "mkdir -p '%s/consumer' && cd '%s/consumer' && "
		       "printf 'cmake_minimum_required(VERSION 3.20)\\nproject(c C)\\n"
		       "find_package(lowkey REQUIRED)\\nadd_executable(keys %s/examples/keys.c)\\n"
		       "target_link_libraries(keys PRIVATE lowkey::lowkey)\\n"
		       "add_executable(keys_static %s/examples/keys.c)\\n"
		       "target_link_libraries(keys_static PRIVATE lowkey::lowkey_static)\\n' > CMakeLists.txt && "
		       "cmake -S . -B b -DCMAKE_PREFIX_PATH='%s' >/dev/null && cmake --build b >/dev/null && "
		       "b/keys && b/keys_static",
		       prefix, prefix, SOURCE_DIR, SOURCE_DIR, prefix),
		0);
	assert_non_null(strstr(r.out, "work(3)"));
}

/*
 * A C++ program (examples/cxx.cpp: templates, spans, lock.hpp) built against the installed
 * headers by g++ and clang++ with the warnings C++ users turn on, through pkg-config, then traced.
 */
static void cxx_consumer_with_pkg_config(void **state)
{
	const char *compilers[] = { "g++", "clang++" };

	(void)state;
	for (size_t i = 0; i < sizeof(compilers) / sizeof(compilers[0]); i++) {
		if (lkt_sh(&r, "command -v %s", compilers[i]) != 0) {
			print_message("%s not installed: skipped\n", compilers[i]);
			continue;
		}
		assert_int_equal(
			lkt_sh(&r,
			       "cd '%s' && export PKG_CONFIG_PATH=$(ls -d '%s'/lib*/pkgconfig) && "
			       "%s -std=c++17 -O2 -Wall -Wextra -pedantic -Wold-style-cast "
			       "-Wzero-as-null-pointer-constant -Werror %s/examples/cxx.cpp "
			       "$(pkg-config --cflags --libs lowkey) -Wl,-rpath,$(pkg-config --variable=libdir lowkey) "
			       "-o cxx-%zu && ./cxx-%zu trace-%zu.ctf && LD_LIBRARY_PATH=$(pkg-config --variable=libdir lowkey) "
			       "bin/lowkey report trace-%zu.ctf",
			       prefix, prefix, compilers[i], SOURCE_DIR, i, i, i, i),
			0);
		assert_non_null(strstr(r.out, "caught: empty book"));
		assert_non_null(
			strstr(r.out, "orders:order                                   2001"));
		assert_non_null(
			strstr(r.out, "orders:best                                       3"));
	}
}

static void cxx_consumer_with_find_package(void **state)
{
	(void)state;
	assert_int_equal(
		lkt_sh(&r,
		       "mkdir -p '%s/cxx-consumer' && cd '%s/cxx-consumer' && "
		       "printf 'cmake_minimum_required(VERSION 3.20)\\nproject(c CXX)\\n"
		       "set(CMAKE_CXX_STANDARD 17)\\nfind_package(lowkey REQUIRED)\\n"
		       "add_executable(cxx %s/examples/cxx.cpp)\\n"
		       "target_link_libraries(cxx PRIVATE lowkey::lowkey)\\n' > CMakeLists.txt && "
		       "cmake -S . -B b -DCMAKE_PREFIX_PATH='%s' >/dev/null && cmake --build b >/dev/null && b/cxx",
		       prefix, prefix, SOURCE_DIR, prefix),
		0);
	assert_non_null(strstr(r.out, "best: 42 and 99.5"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(files_in_place),
		cmocka_unit_test(consumer_with_pkg_config),
		cmocka_unit_test(consumer_with_find_package),
		cmocka_unit_test(cxx_consumer_with_pkg_config),
		cmocka_unit_test(cxx_consumer_with_find_package),
	};
	return cmocka_run_group_tests(tests, install, uninstall);
}
