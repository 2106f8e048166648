// SPDX-License-Identifier: MIT
/*
 * liblowkey loaded with dlopen() by a program that does not link it: the clocks work there (their
 * per-thread state is initial-exec TLS, taken from glibc's static TLS reserve), and a thread that
 * used them may outlive dlclose() and exit safely (liblowkey is never unloaded: -z nodelete).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

static uint64_t (*cputime)(void);
static uint64_t (*now)(void);

static uint64_t ref(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int ok_samples(void)
{
	int bad = 0;

	for (int i = 0; i < 1000; i++) {
		uint64_t b0 = ref(CLOCK_THREAD_CPUTIME_ID), a = cputime(),
			 b1 = ref(CLOCK_THREAD_CPUTIME_ID);
		uint64_t c0 = ref(CLOCK_MONOTONIC), n = now(), c1 = ref(CLOCK_MONOTONIC);

		/* Loose bounds: this test is about loading, the others about accuracy. */
		bad += a + 10000 < b0 || a > b1 + 2000000;
		bad += n + 200000 < c0 || n > c1 + 200000;
	}
	return bad;
}

static pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;

static void *user(void *arg)
{
	*(int *)arg = ok_samples();
	pthread_mutex_lock(&gate); /* held until after dlclose */
	pthread_mutex_unlock(&gate);
	return NULL;
}

static void clocks_in_a_dlopened_liblowkey(void **state)
{
	void *lib;
	pthread_t t[4];
	int bad[4];

	(void)state;
	lib = dlopen(LIBLOWKEY_PATH, RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		fail_msg("dlopen: %s", dlerror());
	cputime = (uint64_t(*)(void))dlsym(lib, "lk_thread_cputime_ns");
	now = (uint64_t(*)(void))dlsym(lib, "lk_now_ns");
	assert_non_null(cputime);
	assert_non_null(now);
	assert_int_equal(ok_samples(), 0);

	pthread_mutex_lock(&gate);
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, user, &bad[i]), 0);
	usleep(100000);
	dlclose(lib);
	pthread_mutex_unlock(&gate); /* the threads exit now: liblowkey's destructor runs */
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(bad[i], 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(clocks_in_a_dlopened_liblowkey),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
