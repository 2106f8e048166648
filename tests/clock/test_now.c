// SPDX-License-Identifier: MIT
/*
 * lk_now_ns(): CLOCK_MONOTONIC's epoch and rate within the promised bound, monotonic per thread
 * across resyncs, sleeps, migrations and threads; lk_cycles() and the frequency lk_clock_info()
 * reports.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>
#include <cmocka.h>

#include "clock_test.h"

/*
 * The bound the header promises: an error of LK__STEP_NS or less is slewed, a larger one stepped,
 * at every resync; between resyncs the rate may be off by the slew plus NTP's largest (500 ppm
 * each) for one interval.
 */
#define NOW_BOUND (LK__STEP_NS + LK__RESYNC_NS * 1000 / 1000000)

static bool now_sample_ok(uint64_t *prev)
{
	uint64_t c0 = ref_ns(CLOCK_MONOTONIC);
	uint64_t n = lk_now_ns();
	uint64_t c1 = ref_ns(CLOCK_MONOTONIC);
	bool ok = n + NOW_BOUND >= c0 && n <= c1 + NOW_BOUND && n >= *prev;

	if (!ok)
		fprintf(stderr, "lk_now_ns out of bounds: c0 %llu n %llu c1 %llu prev %llu\n",
			(unsigned long long)c0, (unsigned long long)n, (unsigned long long)c1,
			(unsigned long long)*prev);
	*prev = n;
	return ok;
}

static void agrees_with_monotonic(void **state)
{
	struct lk_clock_info info;
	uint64_t prev = 0, end = ref_ns(CLOCK_MONOTONIC) + 300000000ull;
	unsigned seed = 7;
	int bad = 0;

	(void)state;
	/* 300 ms: 30 resyncs, with sleeps longer than the interval between some reads. */
	while (ref_ns(CLOCK_MONOTONIC) < end) {
		bad += !now_sample_ok(&prev);
		switch (rand_r(&seed) % 64) {
		case 0:
			usleep((useconds_t)(rand_r(&seed) % 20000));
			break;
		case 1:
			sched_yield();
			break;
		default:
			break;
		}
	}
	assert_int_equal(bad, 0);
	assert_int_equal(lk_clock_info(&info), 0);
	if (info.now == LK_NOW_TSC) {
		assert_true(info.now_resyncs > 0);
		assert_true(info.now_max_error_ns <= NOW_BOUND);
		assert_int_equal(info.now_steps, 0); /* nothing here makes the counter jump */
	}
}

struct reader {
	pthread_t thread;
	int bad;
};

static void *read_now(void *arg)
{
	struct reader *r = arg;
	uint64_t prev = 0;
	int cpus[2], n = allowed_cpus(cpus, 2);

	for (int i = 0; i < 20000; i++) {
		r->bad += !now_sample_ok(&prev);
		if (i % 1000 == 0) {
			cpu_set_t set;

			CPU_ZERO(&set);
			CPU_SET(cpus[(i / 1000) % n], &set);
			pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
			usleep(500);
		}
	}
	return NULL;
}

static void threads_and_migrations(void **state)
{
	struct reader r[8];

	(void)state;
	for (int i = 0; i < 8; i++) {
		r[i].bad = 0;
		assert_int_equal(pthread_create(&r[i].thread, NULL, read_now, &r[i]), 0);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(r[i].thread, NULL);
		assert_int_equal(r[i].bad, 0);
	}
}

/* lk_cycles() and CLOCK_MONOTONIC_RAW read together, to within 50 µs. */
static void cycles_at(uint64_t *cycles, uint64_t *ns)
{
	uint64_t before, after;

	do {
		before = ref_ns(CLOCK_MONOTONIC_RAW);
		*cycles = lk_cycles();
		after = ref_ns(CLOCK_MONOTONIC_RAW);
	} while (after - before > 50000);
	*ns = before + (after - before) / 2;
}

static void frequency_is_right(void **state)
{
	struct lk_clock_info info;
	uint64_t c0, c1, n0, n1;
	double measured;

	(void)state;
	assert_int_equal(lk_clock_info(&info), 0);
	if (!info.counter_usable)
		skip();
	assert_true(info.tsc_hz > 0);
	cycles_at(&c0, &n0);
	usleep(100000);
	cycles_at(&c1, &n1);
	assert_true(c1 > c0);
	/* 100 ms apart, each end known to 25 µs: the ratio is right to 0.05%. */
	measured = (double)(c1 - c0) * 1e9 / (double)(n1 - n0);
	assert_true(measured > (double)info.tsc_hz * 0.999 &&
		    measured < (double)info.tsc_hz * 1.001);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(agrees_with_monotonic),
		cmocka_unit_test(threads_and_migrations),
		cmocka_unit_test(frequency_is_right),
	};

	unsetenv("LOWKEY_CLOCK_NOW");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
