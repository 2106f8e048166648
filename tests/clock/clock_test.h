/* SPDX-License-Identifier: MIT */
/* Shared by the clock tests: reference clocks and the bounds lk_thread_cputime_ns() promises. */
#ifndef LK_TESTS_CLOCK_TEST_H
#define LK_TESTS_CLOCK_TEST_H

#include <dirent.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <lowkey/clock.h>

#include "clock/clock_internal.h"

static inline uint64_t ref_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t sys_cputime(void)
{
	return ref_ns(CLOCK_THREAD_CPUTIME_ID);
}

/*
 * lk_thread_cputime_ns() read between two clock_gettime(CLOCK_THREAD_CPUTIME_ID) b0 and b1 must
 * lie in [b0 - low, b1 + high]. A base is stamped with the counter read before its system call,
 * so base + cycles since never falls behind the thread's CPU time but for the frequency's error
 * (at most LK__RATE_PPM_MAX) over one rebase interval: that, plus 2 ns of rounding, is `low`.
 * `high` is the longest clock_gettime() a rebase accepts (the kernel may read the CPU time at its
 * end), plus the rebase interval (the most time the thread can have been kept off its CPU by the
 * hypervisor since its base without the kernel counting it), plus the same frequency error.
 */
struct cputime_bounds {
	uint64_t low, high;
};

static inline struct cputime_bounds cputime_bounds(void)
{
	struct lk_clock_info info;
	struct cputime_bounds b = { 2, 2 + LK__BRACKET_NS_MAX };

	if (lk_clock_info(&info) == 0 && info.thread_cputime != LK_CPUTIME_SYSCALL) {
		uint64_t rate_err = info.rebase_ns * LK__RATE_PPM_MAX / 1000000;

		b.low += rate_err;
		b.high += info.rebase_ns + rate_err;
	}
	return b;
}

static inline bool cputime_sample_ok(struct cputime_bounds b, uint64_t *prev)
{
	uint64_t b0 = sys_cputime();
	uint64_t a = lk_thread_cputime_ns();
	uint64_t b1 = sys_cputime();
	bool ok = a + b.low >= b0 && a <= b1 + b.high && a >= *prev;

	if (!ok)
		fprintf(stderr,
			"sample out of bounds: b0 %llu a %llu b1 %llu prev %llu (low %llu high %llu)\n",
			(unsigned long long)b0, (unsigned long long)a, (unsigned long long)b1,
			(unsigned long long)*prev, (unsigned long long)b.low,
			(unsigned long long)b.high);
	*prev = a;
	return ok;
}

/* Spin for about ns of CPU time. */
static inline void burn(uint64_t ns)
{
	uint64_t end = sys_cputime() + ns;

	while (sys_cputime() < end)
		;
}

static inline int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* Mappings of perf events in this process (each thread's task-clock page is one). */
static inline int count_perf_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, "[perf_event]") != NULL;
	fclose(f);
	return n;
}

static inline int allowed_cpus(int *cpus, int max)
{
	cpu_set_t set;
	int n = 0;

	sched_getaffinity(0, sizeof(set), &set);
	for (int c = 0; c < CPU_SETSIZE && n < max; c++)
		if (CPU_ISSET(c, &set))
			cpus[n++] = c;
	return n;
}

#endif
