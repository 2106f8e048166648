// SPDX-License-Identifier: MIT
/*
 * What the seq method relies on, asserted against the running kernel with raw perf calls (no
 * lowkey): the `lock` seqcount of a thread's task-clock mmap page moves by exactly 2 each time
 * the thread is scheduled in, and at no other time, so that between two consistent snapshots
 * Δlock = 2 × Δ(voluntary + involuntary context switches) for sleeps, yields to a competitor,
 * migrations and preemption. And the owner never sees it odd.
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

struct task_page {
	const volatile struct perf_event_mmap_page *page;
	size_t len;
};

static int map_task_clock(struct task_page *tp)
{
	struct perf_event_attr attr;
	long fd;

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_SOFTWARE;
	attr.config = PERF_COUNT_SW_TASK_CLOCK;
	attr.exclude_kernel = 1;
	attr.exclude_hv = 1;
	fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return -errno;
	tp->len = (size_t)getpagesize();
	tp->page = mmap(NULL, tp->len, PROT_READ, MAP_SHARED, (int)fd, 0);
	close((int)fd);
	return tp->page == MAP_FAILED ? -errno : 0;
}

struct snapshot {
	uint32_t lock;
	long switches;
};

/* lock and the switch count with no sched-in between them. */
static struct snapshot snap(const struct task_page *tp)
{
	struct snapshot s;
	struct rusage ru;
	uint32_t before;

	do {
		before = tp->page->lock;
		getrusage(RUSAGE_THREAD, &ru);
		s.lock = tp->page->lock;
	} while (s.lock != before);
	assert_int_equal(s.lock & 1, 0);
	s.switches = ru.ru_nvcsw + ru.ru_nivcsw;
	return s;
}

static void expect_tracks(const struct task_page *tp, struct snapshot a, bool must_switch)
{
	struct snapshot b = snap(tp);

	assert_int_equal((uint32_t)(b.lock - a.lock), 2 * (uint32_t)(b.switches - a.switches));
	if (must_switch)
		assert_true(b.switches > a.switches);
}

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	assert_int_equal(pthread_setaffinity_np(pthread_self(), sizeof(set), &set), 0);
}

static int cpus_allowed(int cpus[2])
{
	cpu_set_t set;
	int n = 0;

	sched_getaffinity(0, sizeof(set), &set);
	for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
		if (CPU_ISSET(c, &set))
			cpus[n++] = c;
	return n;
}

static cpu_set_t all_cpus;

static int setup_page(void **state)
{
	static struct task_page tp;

	sched_getaffinity(0, sizeof(all_cpus), &all_cpus);
	if (map_task_clock(&tp) != 0)
		return 0; /* each test skips */
	*state = &tp;
	return 0;
}

static const struct task_page *page_or_skip(void **state)
{
	if (!*state)
		skip(); /* perf_event_open is denied here: the fallback tests cover this case */
	return *state;
}

static void moves_on_sleep(void **state)
{
	const struct task_page *tp = page_or_skip(state);

	for (int i = 0; i < 20; i++) {
		struct snapshot a = snap(tp);

		usleep(200);
		expect_tracks(tp, a, true);
	}
}

static int spin_stop;

static void *spinner(void *arg)
{
	pin(*(int *)arg);
	while (!__atomic_load_n(&spin_stop, __ATOMIC_RELAXED))
		;
	return NULL;
}

static void moves_on_yield_and_preemption(void **state)
{
	const struct task_page *tp = page_or_skip(state);
	int cpus[2];
	pthread_t t;

	assert_true(cpus_allowed(cpus) >= 1);
	pin(cpus[0]);
	__atomic_store_n(&spin_stop, 0, __ATOMIC_RELAXED);
	assert_int_equal(pthread_create(&t, NULL, spinner, &cpus[0]), 0);
	usleep(10000);
	for (int i = 0; i < 20; i++) {
		struct snapshot a = snap(tp);

		sched_yield();
		expect_tracks(tp, a, false);
	}
	{
		/* Spinning beside a competitor on one CPU: preempted at every slice. */
		struct snapshot a = snap(tp);
		struct timespec t0, t1;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		do
			clock_gettime(CLOCK_MONOTONIC, &t1);
		while ((t1.tv_sec - t0.tv_sec) * 1000000000l + (t1.tv_nsec - t0.tv_nsec) <
		       200000000l);
		expect_tracks(tp, a, true);
	}
	__atomic_store_n(&spin_stop, 1, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	assert_int_equal(pthread_setaffinity_np(pthread_self(), sizeof(all_cpus), &all_cpus), 0);
}

static void moves_on_migration(void **state)
{
	const struct task_page *tp = page_or_skip(state);
	int cpus[2];

	if (cpus_allowed(cpus) < 2)
		skip(); /* one CPU: nowhere to migrate */
	for (int i = 0; i < 20; i++) {
		struct snapshot a = snap(tp);

		pin(cpus[i & 1]);
		assert_int_equal(sched_getcpu(), cpus[i & 1]);
		expect_tracks(tp, a, i > 0);
	}
}

static void still_without_switches(void **state)
{
	const struct task_page *tp = page_or_skip(state);

	/* Whatever happens meanwhile (timer interrupts, a yield with nothing else to run), the
	 * seqcount moves only with the switch count. */
	for (int i = 0; i < 1000; i++) {
		struct snapshot a = snap(tp);

		for (volatile int k = 0; k < 1000; k++)
			;
		sched_yield();
		expect_tracks(tp, a, false);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(moves_on_sleep),
		cmocka_unit_test(moves_on_yield_and_preemption),
		cmocka_unit_test(moves_on_migration),
		cmocka_unit_test(still_without_switches),
	};
	return cmocka_run_group_tests(tests, setup_page, NULL);
}
