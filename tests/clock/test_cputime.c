// SPDX-License-Identifier: MIT
/*
 * lk_thread_cputime_ns() in one process: monotonic per thread and within its bounds of
 * clock_gettime(CLOCK_THREAD_CPUTIME_ID) under busy loops, sleeps, sched_yield, migrations and 64
 * threads at once; a rebase after every switch; nothing left behind by 10,000 threads; forked
 * children; signal handlers. The rebase interval is 200 µs here (LOWKEY_CLOCK_REBASE_US, set
 * before the first call), which keeps the upper bound tight.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "clock_test.h"

static struct cputime_bounds bounds;

/* The fast path must be in use, or these tests test the system call. */
static void need_fast_path(void)
{
	struct lk_clock_info info;

	assert_int_equal(lk_clock_info(&info), 0);
	if (info.thread_cputime == LK_CPUTIME_SYSCALL) {
		fprintf(stderr, "skipped: %s\n", info.cputime_reason);
		skip();
	}
}

static void info_says_why(void **state)
{
	struct lk_clock_info info;

	(void)state;
	assert_int_equal(lk_clock_info(NULL), -EINVAL);
	assert_int_equal(lk_clock_info(&info), 0);
	assert_non_null(info.cputime_name);
	assert_non_null(info.thread_cputime_name);
	assert_true(strlen(info.cputime_reason) > 20);
	assert_true(strlen(info.thread_reason) > 10);
	assert_true(strlen(info.now_reason) > 10);
	assert_int_equal(info.rebase_ns, 200000);
	assert_string_equal(info.env_note, "");
	if (info.cputime == LK_CPUTIME_SEQ)
		assert_false(info.cap_user_time);
	if (info.cputime == LK_CPUTIME_PAGE)
		assert_true(info.cap_user_time);
	if (info.counter_usable) {
		/* x86's TSC runs at GHz; arm64's generic timer at 24 MHz (Apple), 25 MHz (Ampere) or
		 * 1 GHz (Armv8.6), qemu's at 62.5 MHz; RISC-V timebases at 1 to 100 MHz. */
		assert_true(info.tsc_hz >= 1000000ull); /* a counter of at least 1 MHz */
		assert_string_not_equal(info.tsc_hz_source, "unknown");
	}
}

static void agrees_under_busy_sleep_yield(void **state)
{
	uint64_t prev = 0;
	unsigned seed = 1;
	int bad = 0;

	(void)state;
	need_fast_path();
	for (int i = 0; i < 20000; i++) {
		bad += !cputime_sample_ok(bounds, &prev);
		switch (rand_r(&seed) % 16) {
		case 0:
			burn((uint64_t)(rand_r(&seed) % 2000) * 1000);
			break; /* up to 2 ms */
		case 1:
			usleep((useconds_t)(rand_r(&seed) % 500));
			break;
		case 2:
			sched_yield();
			break;
		default:
			break;
		}
	}
	assert_int_equal(bad, 0);
}

static void every_switch_rebases(void **state)
{
	struct lk_clock_info before, after;
	uint64_t prev = 0;

	(void)state;
	need_fast_path();
	assert_int_equal(lk_clock_info(&before), 0);
	if (before.thread_cputime != LK_CPUTIME_SEQ)
		skip(); /* method page does not rebase on switches */
	for (int i = 0; i < 50; i++) {
		lk_thread_cputime_ns();
		usleep(50); /* a switch, shorter than the rebase interval */
		assert_true(cputime_sample_ok(bounds, &prev));
	}
	assert_int_equal(lk_clock_info(&after), 0);
	assert_true(after.rebases_switch - before.rebases_switch >= 50);
}

/* The first read after a switch comes from a new base (the system call's value, plus at most the
 * call's own length: the base's bias), not from the old base plus the cycles spent off the CPU;
 * only the floor may hold it at the last value. */
static void reads_after_a_switch_are_fresh(void **state)
{
	int stale = 0;

	(void)state;
	need_fast_path();
	for (int i = 0; i < 200; i++) {
		uint64_t before = lk_thread_cputime_ns(), b0, a, b1;

		usleep(50); /* a switch, well inside the rebase interval */
		b0 = sys_cputime();
		a = lk_thread_cputime_ns();
		b1 = sys_cputime();
		assert_true(a + bounds.low >= b0);
		stale += a > b1 + LK__BRACKET_NS_MAX + bounds.low && a != before;
	}
	assert_int_equal(stale, 0);
}

static void pin_to(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	assert_int_equal(pthread_setaffinity_np(pthread_self(), sizeof(set), &set), 0);
}

static void agrees_across_migrations(void **state)
{
	cpu_set_t all;
	uint64_t prev = 0;
	int cpus[2];

	(void)state;
	need_fast_path();
	if (allowed_cpus(cpus, 2) < 2)
		skip();
	sched_getaffinity(0, sizeof(all), &all);
	for (int i = 0; i < 2000; i++) {
		pin_to(cpus[i & 1]);
		assert_true(cputime_sample_ok(bounds, &prev));
		burn(20000);
		assert_true(cputime_sample_ok(bounds, &prev));
	}
	pthread_setaffinity_np(pthread_self(), sizeof(all), &all);
}

/* ---- many threads ---- */

struct worker {
	pthread_t thread;
	int bad;
	int method;
	unsigned seed;
};

static void *sample_worker(void *arg)
{
	struct worker *w = arg;
	uint64_t prev = 0;
	int cpus[2], ncpus = allowed_cpus(cpus, 2);
	cpu_set_t set;

	for (int i = 0; i < 2000; i++) {
		w->bad += !cputime_sample_ok(bounds, &prev);
		switch (rand_r(&w->seed) % 8) {
		case 0:
			burn((uint64_t)(rand_r(&w->seed) % 200) * 1000);
			break;
		case 1:
			usleep((useconds_t)(rand_r(&w->seed) % 200));
			break;
		case 2:
			sched_yield();
			break;
		case 3:
			CPU_ZERO(&set);
			CPU_SET(cpus[rand_r(&w->seed) % ncpus], &set);
			pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
			break;
		default:
			break;
		}
	}
	{
		struct lk_clock_info info;

		lk_clock_info(&info);
		w->method = info.thread_cputime;
	}
	return NULL;
}

static void sixty_four_threads_at_once(void **state)
{
	struct worker w[64];

	(void)state;
	need_fast_path();
	for (int i = 0; i < 64; i++) {
		w[i] = (struct worker){ .seed = (unsigned)i + 1 };
		assert_int_equal(pthread_create(&w[i].thread, NULL, sample_worker, &w[i]), 0);
	}
	for (int i = 0; i < 64; i++) {
		pthread_join(w[i].thread, NULL);
		assert_int_equal(w[i].bad, 0);
		assert_int_not_equal(w[i].method, LK_CPUTIME_SYSCALL);
	}
}

/* ---- threads come and go ---- */

static void *one_call(void *arg)
{
	uint64_t prev = 0;

	*(int *)arg = cputime_sample_ok(bounds, &prev) ? 0 : 1;
	return NULL;
}

/*
 * Threads made and ended, 50 at a time: 10,000, or 2,000 under a sanitizer, whose runtime makes
 * each thread's start and end several times slower (a leak of one descriptor or mapping a thread
 * shows in the first 50).
 */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define MANY_THREADS 2000
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define MANY_THREADS 2000
#endif
#endif
#ifndef MANY_THREADS
#define MANY_THREADS 10000
#endif

static void nothing_left_by_thousands_of_threads(void **state)
{
	int fds, maps, bad = 0;

	(void)state;
	need_fast_path();
	fds = count_fds();
	maps = count_perf_maps();
	assert_true(fds > 0 && maps >= 0);
	for (int round = 0; round < MANY_THREADS / 50; round++) {
		pthread_t t[50];
		int r[50];

		for (int i = 0; i < 50; i++)
			assert_int_equal(pthread_create(&t[i], NULL, one_call, &r[i]), 0);
		for (int i = 0; i < 50; i++) {
			pthread_join(t[i], NULL);
			bad += r[i];
		}
	}
	assert_int_equal(bad, 0);
	assert_int_equal(count_fds(), fds);
	assert_int_equal(count_perf_maps(), maps);
}

/* A destructor that runs after lowkey's (its key is created later): the clock still answers,
 * from the system call, and sets nothing up again. */
static pthread_key_t late_key;
static int late_bad;

static void late_destructor(void *arg)
{
	uint64_t prev = *(uint64_t *)arg, v = lk_thread_cputime_ns();

	late_bad += v < prev || v > sys_cputime() + bounds.high;
}

static void *exits_with_destructor(void *arg)
{
	static __thread uint64_t seen;

	(void)arg;
	seen = lk_thread_cputime_ns();
	pthread_setspecific(late_key, &seen);
	return NULL;
}

static void calls_from_late_destructors(void **state)
{
	int maps;

	(void)state;
	need_fast_path();
	maps = count_perf_maps();
	assert_int_equal(pthread_key_create(&late_key, late_destructor), 0);
	for (int i = 0; i < 100; i++) {
		pthread_t t;

		assert_int_equal(pthread_create(&t, NULL, exits_with_destructor, NULL), 0);
		pthread_join(t, NULL);
	}
	assert_int_equal(late_bad, 0);
	assert_int_equal(count_perf_maps(), maps);
	pthread_key_delete(late_key);
}

/* ---- fork ---- */

/* In a child: its own clock, its own page, right values. Exit status 0 if all holds. */
static int child_checks(void)
{
	struct lk_clock_info info;
	uint64_t prev = 0;

	for (int i = 0; i < 1000; i++) {
		if (!cputime_sample_ok(bounds, &prev))
			return 1;
		if (i % 100 == 0)
			usleep(100);
	}
	if (lk_clock_info(&info) != 0 || info.thread_cputime == LK_CPUTIME_SYSCALL)
		return 2;
	return count_perf_maps() == 1 ? 0 : 3; /* the parent's pages are not inherited */
}

static void expect_child_ok(pid_t pid)
{
	int status;

	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void forked_child_gets_its_own(void **state)
{
	uint64_t parent_before;
	pid_t pid;

	(void)state;
	need_fast_path();
	burn(5000000); /* the parent's clock is well above what the child's will be */
	parent_before = lk_thread_cputime_ns();
	pid = fork();
	if (pid == 0) {
		/* The child's thread CPU time starts again near zero. */
		uint64_t v = lk_thread_cputime_ns();

		_exit(v >= parent_before ? 10 : child_checks());
	}
	expect_child_ok(pid);
	assert_true(lk_thread_cputime_ns() >= parent_before);
}

static void underscore_fork_child_too(void **state)
{
	pid_t pid;

	(void)state;
	need_fast_path();
	lk_thread_cputime_ns();
	/* _Fork() runs no atfork handlers: only the wiped cookie page tells the child. */
	pid = _Fork();
	if (pid == 0)
		_exit(child_checks());
	expect_child_ok(pid);
}

static void *fork_from_thread(void *arg)
{
	pid_t pid;

	(void)arg;
	lk_thread_cputime_ns();
	pid = fork();
	if (pid == 0)
		_exit(child_checks());
	return (void *)(intptr_t)pid;
}

static void fork_from_a_second_thread(void **state)
{
	pthread_t t;
	void *pid;

	(void)state;
	need_fast_path();
	assert_int_equal(pthread_create(&t, NULL, fork_from_thread, NULL), 0);
	pthread_join(t, &pid);
	expect_child_ok((pid_t)(intptr_t)pid);
}

/* ---- signals ---- */

#define HANDLER_MAX 4096
/*
 * Handlers enough to have landed in both paths: the loop stops there, or after 20 s of its CPU
 * time where signals come slower (under AddressSanitizer on a busy machine, fewer than 100 came
 * in 2 s).
 */
#define HANDLER_ENOUGH 150
static uint64_t handler_prev;
static volatile int handler_samples, handler_bad;

static void on_sigprof(int sig)
{
	int saved = errno;

	(void)sig;
	errno = EILSEQ;
	if (handler_samples < HANDLER_MAX) {
		handler_bad += !cputime_sample_ok(bounds, &handler_prev);
		handler_bad += errno != EILSEQ;
		handler_samples++;
	}
	errno = saved;
}

static void safe_in_signal_handlers(void **state)
{
	struct itimerval every = { { 0, 200 }, { 0, 200 } }, off = { { 0, 0 }, { 0, 0 } };
	struct sigaction sa = { .sa_handler = on_sigprof, .sa_flags = SA_RESTART };
	uint64_t prev = 0, end;
	int bad = 0;

	(void)state;
	need_fast_path();
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGPROF, &sa, NULL), 0);
	handler_prev = lk_thread_cputime_ns();
	prev = handler_prev;
	assert_int_equal(setitimer(ITIMER_PROF, &every, NULL), 0);
	end = sys_cputime() + 20000000000ull;
	/* The main line keeps calling, sleeping and so rebasing, so handlers land everywhere in
	 * the fast and the slow path. */
	while (handler_samples < HANDLER_ENOUGH && sys_cputime() < end) {
		for (int i = 0; i < 100; i++) {
			uint64_t v = lk_thread_cputime_ns();

			bad += v < prev;
			prev = v;
		}
		bad += !cputime_sample_ok(bounds, &prev);
		if (rand() % 4 == 0)
			usleep(10);
	}
	setitimer(ITIMER_PROF, &off, NULL);
	signal(SIGPROF, SIG_DFL);
	assert_int_equal(bad, 0);
	assert_int_equal(handler_bad, 0);
	assert_true(handler_samples > 100);
}

/* A thread whose very first call is in a signal handler. */
static volatile uint64_t first_in_handler, first_b0, first_b1;

static void on_sigusr1(int sig)
{
	(void)sig;
	first_b0 = sys_cputime();
	first_in_handler = lk_thread_cputime_ns();
	first_b1 = sys_cputime();
}

static void *first_call_in_handler(void *arg)
{
	(void)arg;
	burn(1000000);
	pthread_kill(pthread_self(), SIGUSR1);
	return NULL;
}

static void first_call_of_a_thread_in_a_handler(void **state)
{
	struct sigaction sa = { .sa_handler = on_sigusr1 };
	pthread_t t;

	(void)state;
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGUSR1, &sa, NULL), 0);
	assert_int_equal(pthread_create(&t, NULL, first_call_in_handler, NULL), 0);
	pthread_join(t, NULL);
	signal(SIGUSR1, SIG_DFL);
	assert_true(first_in_handler + bounds.low >= first_b0);
	assert_true(first_in_handler <= first_b1 + bounds.high);
	assert_true(first_in_handler >= 1000000);
}

static void *errno_worker(void *arg)
{
	(void)arg;
	errno = EILSEQ;
	lk_thread_cputime_ns(); /* set-up */
	usleep(100);
	errno = EILSEQ;
	lk_thread_cputime_ns(); /* rebase */
	lk_now_ns();
	return (void *)(intptr_t)errno;
}

static void errno_is_left_alone(void **state)
{
	pthread_t t;
	void *ret;

	(void)state;
	assert_int_equal(pthread_create(&t, NULL, errno_worker, NULL), 0);
	pthread_join(t, &ret);
	assert_int_equal((int)(intptr_t)ret, EILSEQ);
}

/* The thread disables its own perf events (prctl(PR_TASK_PERF_EVENTS_DISABLE)), lowkey's task
 * clock among them: the next base that ages out finds the page no longer follows the thread's
 * switches and maps a new one; values stay within bounds throughout. */
static void *disables_its_events(void *arg)
{
	struct lk_clock_info info;
	uint64_t prev = 0;
	int *bad = arg;

	lk_thread_cputime_ns();
	prctl(PR_TASK_PERF_EVENTS_DISABLE, 0, 0, 0, 0);
	for (int i = 0; i < 200; i++) {
		usleep(50);
		*bad += !cputime_sample_ok(bounds, &prev);
		if (i % 20 == 0)
			burn(300000); /* a base that ages out */
	}
	lk_clock_info(&info);
	*bad += info.thread_cputime == LK_CPUTIME_SYSCALL;
	/* Fresh reads after switches again: the new page follows them. */
	for (int i = 0; i < 100; i++) {
		uint64_t before = lk_thread_cputime_ns(), b0, a, b1;

		usleep(50);
		b0 = sys_cputime();
		a = lk_thread_cputime_ns();
		b1 = sys_cputime();
		*bad += a + bounds.low < b0 ||
			(a > b1 + LK__BRACKET_NS_MAX + bounds.low && a != before);
	}
	prctl(PR_TASK_PERF_EVENTS_ENABLE, 0, 0, 0, 0);
	return NULL;
}

static void survives_perf_events_disable(void **state)
{
	struct lk_clock_info before, after;
	pthread_t t;
	int bad = 0;

	(void)state;
	need_fast_path();
	assert_int_equal(lk_clock_info(&before), 0);
	assert_int_equal(before.pages_reopened, 0); /* nothing before this test needed it */
	assert_int_equal(pthread_create(&t, NULL, disables_its_events, &bad), 0);
	pthread_join(t, NULL);
	assert_int_equal(bad, 0);
	assert_int_equal(lk_clock_info(&after), 0);
	assert_true(after.pages_reopened >= 1);
}

static int group_setup(void **state)
{
	(void)state;
	bounds = cputime_bounds();
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(info_says_why),
		cmocka_unit_test(agrees_under_busy_sleep_yield),
		cmocka_unit_test(every_switch_rebases),
		cmocka_unit_test(reads_after_a_switch_are_fresh),
		cmocka_unit_test(agrees_across_migrations),
		cmocka_unit_test(sixty_four_threads_at_once),
		cmocka_unit_test(nothing_left_by_thousands_of_threads),
		cmocka_unit_test(calls_from_late_destructors),
		cmocka_unit_test(forked_child_gets_its_own),
		cmocka_unit_test(underscore_fork_child_too),
		cmocka_unit_test(fork_from_a_second_thread),
		cmocka_unit_test(safe_in_signal_handlers),
		cmocka_unit_test(first_call_of_a_thread_in_a_handler),
		cmocka_unit_test(errno_is_left_alone),
		cmocka_unit_test(survives_perf_events_disable),
	};

	/* Before the first clock call: the environment is read once. */
	setenv("LOWKEY_CLOCK_REBASE_US", "200", 1);
	unsetenv("LOWKEY_CLOCK");
	unsetenv("LOWKEY_CLOCK_NOW");
	return cmocka_run_group_tests(tests, group_setup, NULL);
}
