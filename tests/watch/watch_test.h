/* SPDX-License-Identifier: MIT */
/* Shared by the watch tests: a recorder of hits, and running code in another thread or a child. */
#ifndef LK_TEST_WATCH_H
#define LK_TEST_WATCH_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lowkey/error.h>
#include <lowkey/watch.h>

#define MAX_HITS 64

/* What callbacks saw; written in signal handlers, so only atomics and plain stores of copies. */
struct recorder {
	int n;
	struct lk_watch_hit hits[MAX_HITS];
};

/* A callback that appends the hit to the recorder in arg. Async-signal-safe. */
static inline void record_hit(const struct lk_watch_hit *hit, void *arg)
{
	struct recorder *r = arg;
	int i = __atomic_fetch_add(&r->n, 1, __ATOMIC_RELAXED);

	if (i < MAX_HITS)
		r->hits[i] = *hit;
}

static inline int hits_of(struct recorder *r)
{
	return __atomic_load_n(&r->n, __ATOMIC_ACQUIRE);
}

static inline pid_t test_gettid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* Store through a volatile pointer, so the compiler keeps every access the test counts on. */
#define WRITE_ONCE(x, v) (*(volatile __typeof__(x) *)&(x) = (v))
#define READ_ONCE(x) (*(volatile __typeof__(x) *)&(x))

/* Run fn(arg) in a new thread and wait for it; returns the thread's id. */
struct thread_call {
	void (*fn)(void *);
	void *arg;
	pid_t tid;
};

static inline void *thread_call_main(void *p)
{
	struct thread_call *c = p;

	c->tid = test_gettid();
	c->fn(c->arg);
	return NULL;
}

static inline pid_t run_in_thread(void (*fn)(void *), void *arg)
{
	struct thread_call c = { fn, arg, 0 };
	pthread_t t;

	if (pthread_create(&t, NULL, thread_call_main, &c) != 0)
		return -1;
	pthread_join(t, NULL);
	return c.tid;
}

/* Run fn() in a fork()ed child; returns its exit status (or 128 + signal). */
static inline int run_in_child(int (*fn)(void))
{
	int status;
	pid_t pid = fork();

	if (pid == 0)
		_exit(fn());
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/*
 * Exit 77 (CTest: skipped) with lowkey's reason when no watchpoint can be added here: no support
 * for this architecture, or no perf_event_open() (qemu-user has none). Tried in a child, so the
 * test's own process starts with nothing of the watch module set up.
 */
static inline void lkt_watch_require(void)
{
	static long probe_var;
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		struct lk_watch *w;
		int err =
			lk_watch_add(&w, &probe_var, sizeof(probe_var), LK_WATCH_WRITE, NULL, NULL);

		if (err == -EOPNOTSUPP || err == -ENOSYS) {
			printf("SKIPPED: watchpoints are not available here: %s\n",
			       lk_last_error());
			fflush(stdout);
			_exit(77);
		}
		_exit(0);
	}
	if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	    WEXITSTATUS(status) == 77)
		exit(77);
}

#endif
