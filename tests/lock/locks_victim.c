// SPDX-License-Identifier: MIT
/*
 * A program for `lowkey locks` to profile: every kind of lock the preload wraps, with known
 * counts and known contention, and checks that each call returns what POSIX says it returns.
 * It exits 0 only if every call behaved; the test runs it with and without the preload, so any
 * change of behaviour the preload caused makes it fail. It prints "name=address" for each lock
 * so that the test can find the figures of each one.
 *
 * Contention is made certain, not likely: a holder releases only after it has seen the waiter
 * blocked inside the lock call (its thread sleeping, in /proc), or, for a spinlock, after the
 * waiter has burnt CPU time spinning.
 *
 * Modes: all (default), fork, exec, exec-child, destroy [N], every, wait (prints "waiting" and
 * waits for a signal to end it).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define UNCONTENDED 1000
#define BEFORE_MAIN 500

static int failures;

#define EXPECT(cond)                                                                             \
	do {                                                                                     \
		if (!(cond)) {                                                                   \
			fprintf(stderr, "locks_victim: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
			failures++;                                                              \
		}                                                                                \
	} while (0)

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) != 0)
		;
}

static pid_t gettid_(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* A field of /proc/self/task/TID/stat: the state letter (field 3) or utime (field 14). */
static long task_stat(pid_t tid, int field, char *state)
{
	char path[64], buf[1024], *p;
	FILE *f;
	long v = -1;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')'))) {
		p += 2; /* state */
		if (state)
			*state = *p;
		for (int i = 3; i < field && p; i++)
			p = strchr(p + 1, ' ');
		if (p)
			v = strtol(p + 1, NULL, 10);
	}
	fclose(f);
	return v;
}

/* ---- the waiter side ---- */

struct waiter {
	void (*block)(void *); /* the blocking call, made once the flag is up */
	void *arg;
	pid_t tid;
	int ready;
	pthread_t thread;
};

static void *waiter_main(void *p)
{
	struct waiter *w = p;

	w->tid = gettid_();
	__atomic_store_n(&w->ready, 1, __ATOMIC_SEQ_CST);
	w->block(w->arg);
	return NULL;
}

static void start_waiter(struct waiter *w)
{
	EXPECT(pthread_create(&w->thread, NULL, waiter_main, w) == 0);
	while (!__atomic_load_n(&w->ready, __ATOMIC_SEQ_CST))
		sched_yield();
}

/* The waiter is asleep: it can only be asleep inside its blocking call. */
static void await_asleep(struct waiter *w)
{
	char state = 0;

	for (;;) {
		task_stat(w->tid, 3, &state);
		if (state == 'S')
			return;
		sleep_ms(1);
	}
}

/* The waiter has spun for two clock ticks of CPU time: it is inside pthread_spin_lock. */
static void await_spinning(struct waiter *w)
{
	long start = task_stat(w->tid, 14, NULL);

	while (task_stat(w->tid, 14, NULL) < start + 2)
		sleep_ms(5);
}

/* ---- mutexes ---- */

static pthread_mutex_t plain = PTHREAD_MUTEX_INITIALIZER;     /* UNCONTENDED acquisitions */
static pthread_mutex_t contended = PTHREAD_MUTEX_INITIALIZER; /* 2 acquisitions, 1 contended */
static pthread_mutex_t before_main = PTHREAD_MUTEX_INITIALIZER;

static void lock_contended(void *arg)
{
	EXPECT(pthread_mutex_lock(arg) == 0);
	EXPECT(pthread_mutex_unlock(arg) == 0);
}

static void mutexes(void)
{
	struct waiter w = { lock_contended, &contended };
	pthread_mutexattr_t attr;
	static pthread_mutex_t recursive;
	pthread_mutex_t errorcheck;

	for (int i = 0; i < UNCONTENDED; i++) {
		EXPECT(pthread_mutex_lock(&plain) == 0);
		EXPECT(pthread_mutex_unlock(&plain) == 0);
	}

	EXPECT(pthread_mutex_lock(&contended) == 0);
	EXPECT(pthread_mutex_trylock(&contended) == EBUSY); /* default kind: busy, 1 failed try */
	start_waiter(&w);
	await_asleep(&w);
	sleep_ms(20);
	EXPECT(pthread_mutex_unlock(&contended) == 0);
	EXPECT(pthread_join(w.thread, NULL) == 0);

	pthread_mutexattr_init(&attr);
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
	EXPECT(pthread_mutex_init(&recursive, &attr) == 0);
	EXPECT(pthread_mutex_lock(&recursive) == 0);
	EXPECT(pthread_mutex_lock(&recursive) == 0);
	EXPECT(pthread_mutex_trylock(&recursive) == 0);
	EXPECT(pthread_mutex_unlock(&recursive) == 0);
	EXPECT(pthread_mutex_unlock(&recursive) == 0);
	EXPECT(pthread_mutex_unlock(&recursive) == 0);
	EXPECT(pthread_mutex_unlock(&recursive) == EPERM); /* not held any more */
	printf("recursive=%p\n", (void *)&recursive);
	fflush(stdout);

	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ERRORCHECK);
	EXPECT(pthread_mutex_init(&errorcheck, &attr) == 0);
	EXPECT(pthread_mutex_lock(&errorcheck) == 0);
	EXPECT(pthread_mutex_lock(&errorcheck) == EDEADLK);
	EXPECT(pthread_mutex_trylock(&errorcheck) == EBUSY);
	EXPECT(pthread_mutex_unlock(&errorcheck) == 0);
	EXPECT(pthread_mutex_unlock(&errorcheck) == EPERM);
	EXPECT(pthread_mutex_destroy(&errorcheck) == 0);
	pthread_mutexattr_destroy(&attr);
	/* leave the recursive one alive for the report */
}

/* ---- a robust mutex whose owner dies ---- */

static pthread_mutex_t robust;

static void *die_holding(void *arg)
{
	EXPECT(pthread_mutex_lock(&robust) == 0);
	return arg; /* exits holding it */
}

static void robust_mutex(void)
{
	pthread_mutexattr_t attr;
	pthread_t t;

	pthread_mutexattr_init(&attr);
	pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
	EXPECT(pthread_mutex_init(&robust, &attr) == 0);
	pthread_mutexattr_destroy(&attr);
	EXPECT(pthread_create(&t, NULL, die_holding, NULL) == 0);
	EXPECT(pthread_join(t, NULL) == 0);
	EXPECT(pthread_mutex_lock(&robust) == EOWNERDEAD);
	EXPECT(pthread_mutex_consistent(&robust) == 0);
	EXPECT(pthread_mutex_unlock(&robust) == 0);
	EXPECT(pthread_mutex_lock(&robust) == 0);
	EXPECT(pthread_mutex_unlock(&robust) == 0);
	printf("robust=%p\n", (void *)&robust);
}

/* ---- timed lock that times out ---- */

static void *hold_for_a_while(void *arg)
{
	EXPECT(pthread_mutex_lock(&contended) == 0);
	__atomic_store_n((int *)arg, 1, __ATOMIC_SEQ_CST);
	sleep_ms(60);
	EXPECT(pthread_mutex_unlock(&contended) == 0);
	return NULL;
}

static void timed_out(void)
{
	int held = 0;
	pthread_t t;
	struct timespec soon;

	EXPECT(pthread_create(&t, NULL, hold_for_a_while, &held) == 0);
	while (!__atomic_load_n(&held, __ATOMIC_SEQ_CST))
		sched_yield();
	clock_gettime(CLOCK_REALTIME, &soon);
	soon.tv_nsec += 5 * 1000 * 1000;
	if (soon.tv_nsec >= 1000000000) {
		soon.tv_sec++;
		soon.tv_nsec -= 1000000000;
	}
	EXPECT(pthread_mutex_timedlock(&contended, &soon) == ETIMEDOUT);
	EXPECT(pthread_join(t, NULL) == 0);
}

/* ---- rwlock ---- */

static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;

static void read_contended(void *arg)
{
	EXPECT(pthread_rwlock_rdlock(arg) == 0);
	EXPECT(pthread_rwlock_unlock(arg) == 0);
}

static void rwlocks(void)
{
	struct waiter w = { read_contended, &rw };

	for (int i = 0; i < 10; i++) {
		EXPECT(pthread_rwlock_rdlock(&rw) == 0);
		EXPECT(pthread_rwlock_rdlock(&rw) == 0); /* readers share */
		EXPECT(pthread_rwlock_unlock(&rw) == 0);
		EXPECT(pthread_rwlock_unlock(&rw) == 0);
	}
	EXPECT(pthread_rwlock_wrlock(&rw) == 0);
	EXPECT(pthread_rwlock_wrlock(&rw) == EDEADLK);
	EXPECT(pthread_rwlock_tryrdlock(&rw) == EBUSY);
	start_waiter(&w);
	await_asleep(&w);
	sleep_ms(20);
	EXPECT(pthread_rwlock_unlock(&rw) == 0);
	EXPECT(pthread_join(w.thread, NULL) == 0);
	/* 20 reads by main + 1 by the waiter; 1 write; 1 contended; 1 failed try */
}

/* ---- spinlock ---- */

static pthread_spinlock_t spin;

static void spin_contended(void *arg)
{
	EXPECT(pthread_spin_lock(arg) == 0);
	EXPECT(pthread_spin_unlock(arg) == 0);
}

static void spinlocks(void)
{
	struct waiter w = { spin_contended, (void *)&spin };

	EXPECT(pthread_spin_init(&spin, PTHREAD_PROCESS_PRIVATE) == 0);
	EXPECT(pthread_spin_lock(&spin) == 0);
	EXPECT(pthread_spin_trylock(&spin) == EBUSY);
	start_waiter(&w);
	await_spinning(&w);
	EXPECT(pthread_spin_unlock(&spin) == 0);
	EXPECT(pthread_join(w.thread, NULL) == 0);
	/* 2 acquisitions, 1 contended, 1 failed try */
}

/* ---- condition variable ---- */

static pthread_mutex_t cond_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int signalled;

static void *signaller(void *arg)
{
	sleep_ms(10);
	EXPECT(pthread_mutex_lock(&cond_mutex) == 0);
	signalled = 1;
	EXPECT(pthread_cond_signal(&cond) == 0);
	EXPECT(pthread_mutex_unlock(&cond_mutex) == 0);
	return arg;
}

static void condvars(void)
{
	struct timespec past = { 0, 0 };
	pthread_t t;

	EXPECT(pthread_mutex_lock(&cond_mutex) == 0);
	/* a deadline in the past: ETIMEDOUT, and the mutex is held again */
	EXPECT(pthread_cond_timedwait(&cond, &cond_mutex, &past) == ETIMEDOUT);
	EXPECT(pthread_create(&t, NULL, signaller, NULL) == 0);
	while (!signalled)
		EXPECT(pthread_cond_wait(&cond, &cond_mutex) == 0);
	EXPECT(pthread_mutex_unlock(&cond_mutex) == 0);
	EXPECT(pthread_join(t, NULL) == 0);
	/* re-acquired by the waits: at least 2 (the timed one, and each wait that returned) */
}

/* ---- semaphore ---- */

static sem_t sem;

static void sem_contended(void *arg)
{
	EXPECT(sem_wait(arg) == 0);
}

static void semaphores(void)
{
	struct waiter w = { sem_contended, &sem };

	EXPECT(sem_init(&sem, 0, 2) == 0);
	EXPECT(sem_wait(&sem) == 0);
	EXPECT(sem_trywait(&sem) == 0);
	errno = 1234;
	EXPECT(sem_trywait(&sem) == -1 && errno == EAGAIN);
	start_waiter(&w);
	await_asleep(&w);
	errno = 4321;
	EXPECT(sem_post(&sem) == 0);
	EXPECT(errno == 4321); /* success leaves errno alone */
	EXPECT(pthread_join(w.thread, NULL) == 0);
	/* 3 acquisitions, 1 contended, 1 failed try, 1 post */
}

/* ---- a thread that runs before main ---- */

static pthread_t early;

static void *early_thread(void *arg)
{
	for (int i = 0; i < BEFORE_MAIN; i++) {
		pthread_mutex_lock(&before_main);
		pthread_mutex_unlock(&before_main);
	}
	return arg;
}

__attribute__((constructor)) static void start_before_main(void)
{
	pthread_mutex_lock(&before_main);
	pthread_create(&early, NULL, early_thread, NULL);
	pthread_mutex_unlock(&before_main);
}

static void print_addresses(void)
{
	printf("plain=%p\ncontended=%p\nbefore_main=%p\nrw=%p\nspin=%p\ncond_mutex=%p\nsem=%p\n",
	       (void *)&plain, (void *)&contended, (void *)&before_main, (void *)&rw, (void *)&spin,
	       (void *)&cond_mutex, (void *)&sem);
	fflush(stdout);
}

/* ---- locks never contended, some of them destroyed ---- */

#define EVERY_LIVE 6
#define EVERY_GONE 5

/*
 * One contended mutex, EVERY_LIVE never contended and left alive (the i-th taken 3 (i + 1)
 * times), EVERY_GONE never contended and destroyed (the i-th taken 100 + i times).
 */
static void every_mode(void)
{
	static pthread_mutex_t live[EVERY_LIVE], gone[EVERY_GONE];
	struct waiter w = { lock_contended, &contended };

	EXPECT(pthread_mutex_lock(&contended) == 0);
	start_waiter(&w);
	await_asleep(&w);
	EXPECT(pthread_mutex_unlock(&contended) == 0);
	EXPECT(pthread_join(w.thread, NULL) == 0);
	for (int i = 0; i < EVERY_LIVE; i++) {
		EXPECT(pthread_mutex_init(&live[i], NULL) == 0);
		for (int n = 0; n < 3 * (i + 1); n++) {
			EXPECT(pthread_mutex_lock(&live[i]) == 0);
			EXPECT(pthread_mutex_unlock(&live[i]) == 0);
		}
		printf("live%d=%p\n", i, (void *)&live[i]);
	}
	for (int i = 0; i < EVERY_GONE; i++) {
		EXPECT(pthread_mutex_init(&gone[i], NULL) == 0);
		for (int n = 0; n < 100 + i; n++) {
			EXPECT(pthread_mutex_lock(&gone[i]) == 0);
			EXPECT(pthread_mutex_unlock(&gone[i]) == 0);
		}
		EXPECT(pthread_mutex_destroy(&gone[i]) == 0);
		printf("gone%d=%p\n", i, (void *)&gone[i]);
	}
	fflush(stdout);
}

/* ---- fork and exec ---- */

static int fork_mode(void)
{
	pid_t pid;
	int status;

	for (int i = 0; i < 100; i++) {
		pthread_mutex_lock(&plain);
		pthread_mutex_unlock(&plain);
	}
	pthread_mutex_lock(&plain); /* held across fork */
	pid = fork();
	if (pid == 0) {
		pthread_mutex_unlock(&plain);
		for (int i = 0; i < 30; i++) {
			pthread_mutex_lock(&plain);
			pthread_mutex_unlock(&plain);
		}
		exit(failures ? 1 : 0);
	}
	pthread_mutex_unlock(&plain);
	EXPECT(waitpid(pid, &status, 0) == pid);
	EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "all";

	EXPECT(pthread_join(early, NULL) == 0);
	print_addresses();
	if (strcmp(mode, "fork") == 0) {
		fork_mode();
	} else if (strcmp(mode, "exec") == 0) {
		for (int i = 0; i < 40; i++) {
			pthread_mutex_lock(&plain);
			pthread_mutex_unlock(&plain);
		}
		fflush(stdout);
		execl("/proc/self/exe", argv[0], "exec-child", (char *)NULL);
		EXPECT(!"exec failed");
	} else if (strcmp(mode, "destroy") == 0) {
		/* one address, made, used once and destroyed N times (default 10): N locks */
		int times = argc > 2 ? atoi(argv[2]) : 10;

		for (int i = 0; i < times; i++) {
			pthread_mutex_t m;

			EXPECT(pthread_mutex_init(&m, NULL) == 0);
			EXPECT(pthread_mutex_lock(&m) == 0);
			EXPECT(pthread_mutex_unlock(&m) == 0);
			EXPECT(pthread_mutex_destroy(&m) == 0);
		}
	} else if (strcmp(mode, "every") == 0) {
		every_mode();
	} else if (strcmp(mode, "wait") == 0) {
		printf("waiting\n");
		fflush(stdout);
		for (;;)
			pause();
	} else if (strcmp(mode, "exec-child") == 0) {
		for (int i = 0; i < 7; i++) {
			pthread_mutex_lock(&plain);
			pthread_mutex_unlock(&plain);
		}
	} else {
		mutexes();
		robust_mutex();
		timed_out();
		rwlocks();
		spinlocks();
		condvars();
		semaphores();
	}
	if (failures)
		fprintf(stderr, "locks_victim: %d check(s) failed\n", failures);
	return failures ? 1 : 0;
}
