// SPDX-License-Identifier: MIT
/*
 * The program test_agent runs with liblowkey-locks.so preloaded, for the agent's --locks-dir: plain
 * pthread mutexes, one command a line on its standard input, "done" on its standard output once
 * the locks are taken. Not linked with lowkey, and never sanitized (a sanitizer's runtime must
 * come before any LD_PRELOAD).
 *   locks N  4 threads, N times each: the global mutex agt_pmutex, then a mutex of the heap
 *            (first taken in pthread_worker); then one contention made certain: this thread holds
 *            agt_pmutex until a thread blocked on it has slept in the lock call, and 20 ms more.
 *            agt_pmutex is taken 4N + 2 times, the heap mutex 4N
 *   many N   N more mutexes of the heap, each locked once and kept (bench/agent_locks_dir.sh: a
 *            table of N locks)
 *   quit     exit(0)
 * LKT_PROG_NAME in its environment renames it (its comm).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

pthread_mutex_t agt_pmutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t *heap_mutex;
static long rounds;

static void sleep_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) != 0)
		;
}

static void *pthread_worker(void *arg)
{
	(void)arg;
	for (long i = 0; i < rounds; i++) {
		pthread_mutex_lock(&agt_pmutex);
		if (i % 64 == 0)
			sleep_us(20);
		pthread_mutex_unlock(&agt_pmutex);
		pthread_mutex_lock(heap_mutex);
		pthread_mutex_unlock(heap_mutex);
	}
	return NULL;
}

static pid_t blocked_tid;

static void *blocked(void *arg)
{
	(void)arg;
	__atomic_store_n(&blocked_tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
	pthread_mutex_lock(&agt_pmutex);
	pthread_mutex_unlock(&agt_pmutex);
	return NULL;
}

/* Whether thread tid sleeps (state S in /proc: blocked in the lock call, as nothing else waits). */
static int sleeping(pid_t tid)
{
	char path[64], buf[512], *p;
	FILE *f;
	int yes = 0;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	f = fopen(path, "re");
	if (f && fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')))
		yes = p[2] == 'S';
	if (f)
		fclose(f);
	return yes;
}

static void contend_once(void)
{
	pthread_t t;
	pid_t tid;

	pthread_mutex_lock(&agt_pmutex);
	__atomic_store_n(&blocked_tid, 0, __ATOMIC_RELEASE);
	pthread_create(&t, NULL, blocked, NULL);
	while (!(tid = __atomic_load_n(&blocked_tid, __ATOMIC_ACQUIRE)) || !sleeping(tid))
		sleep_us(1000);
	sleep_us(20000);
	pthread_mutex_unlock(&agt_pmutex);
	pthread_join(t, NULL);
}

static void locks(long n)
{
	pthread_t t[4];

	rounds = n;
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, pthread_worker, NULL);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	contend_once();
}

static void many(long n)
{
	for (long i = 0; i < n; i++) {
		pthread_mutex_t *m = malloc(sizeof(*m));

		if (!m)
			return;
		pthread_mutex_init(m, NULL);
		pthread_mutex_lock(m);
		pthread_mutex_unlock(m);
	}
}

int main(void)
{
	const char *name = getenv("LKT_PROG_NAME");
	char line[256];

	if (name)
		prctl(PR_SET_NAME, name, 0, 0, 0);
	heap_mutex = malloc(sizeof(*heap_mutex));
	if (!heap_mutex)
		return 1;
	pthread_mutex_init(heap_mutex, NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	while (fgets(line, sizeof(line), stdin)) {
		long n;

		if (sscanf(line, "locks %ld", &n) == 1)
			locks(n);
		else if (sscanf(line, "many %ld", &n) == 1)
			many(n);
		else if (strncmp(line, "quit", 4) == 0)
			exit(0);
		printf("done\n");
	}
	return 0;
}
