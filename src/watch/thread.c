// SPDX-License-Identifier: MIT
/*
 * Per-thread state: the thread's lock (the only lock a thread-scope add or remove takes besides
 * the process-wide reader side), its thread-scope watchpoints, and what happens at its exit and in
 * a fork()ed child.
 *
 * The state lives while its thread runs or while it has watchpoints, so another thread removing a
 * watchpoint can still take the lock of a thread that has exited. Both conditions are only changed
 * and tested under the state's lock, so no reference count is needed.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "watch/watch_internal.h"

#define TLS_IE __attribute__((tls_model("initial-exec")))

unsigned int lk__watch_fork_gen;

/* initial-exec: read in the signal handler, where a lazily allocated TLS block is not allowed. */
static __thread struct lk__wthread *self TLS_IE;
static __thread pid_t cached_tid TLS_IE;

static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

pid_t lk__watch_gettid(void)
{
	pid_t tid = cached_tid;

	if (!tid) {
		tid = (pid_t)syscall(SYS_gettid);
		cached_tid = tid;
	}
	return tid;
}

void lk__wthread_unlock(struct lk__wthread *t)
{
	bool last = t->exited && !t->watches;

	pthread_mutex_unlock(&t->lock);
	if (last) {
		pthread_mutex_destroy(&t->lock);
		free(t);
	}
}

/*
 * The thread is exiting: its kernel events die with it, so close their fds now and give its
 * slots back. The handles stay valid (ended) until lk_watch_remove().
 */
static void thread_exit(void *arg)
{
	struct lk__wthread *t = arg;

	if (t->fork_gen != __atomic_load_n(&lk__watch_fork_gen, __ATOMIC_RELAXED))
		return; /* a parent's thread, copied by fork(): nothing of it is real here */
	pthread_mutex_lock(&t->lock);
	for (struct lk_watch *w = t->watches; w; w = w->thread_next) {
		if (w->ended)
			continue;
		w->ended = true;
		close(w->fd);
		w->fd = -1;
	}
	lk__slots_release_thread_all(t);
	lk__watch_entry_cache_flush(t->entry_cache, &t->nr_cached);
	if (self == t)
		self = NULL;
	t->exited = true;
	lk__wthread_unlock(t);
}

static void make_exit_key(void)
{
	pthread_key_create(&exit_key, thread_exit);
}

struct lk__wthread *lk__wthread_peek(void)
{
	return self;
}

struct lk__wthread *lk__wthread_self(void)
{
	struct lk__wthread *t = self;

	if (t)
		return t;
	pthread_once(&exit_key_once, make_exit_key);
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	pthread_mutex_init(&t->lock, NULL);
	t->tid = lk__watch_gettid();
	t->fork_gen = __atomic_load_n(&lk__watch_fork_gen, __ATOMIC_RELAXED);
	if (pthread_setspecific(exit_key, t) != 0) {
		pthread_mutex_destroy(&t->lock);
		free(t);
		return NULL;
	}
	self = t;
	return t;
}

/*
 * In the child, only the thread that called fork() exists, and the kernel gave it none of the
 * parent's watchpoints (inherit_thread: they follow CLONE_THREAD only). Everything recorded before
 * belongs to the parent: a new generation makes it inert, and the child starts with empty counts.
 */
static void fork_prepare(void)
{
	lk__slots_fork_prepare();
}

static void fork_parent(void)
{
	lk__slots_fork_parent();
}

static void fork_child(void)
{
	__atomic_store_n(&lk__watch_fork_gen, lk__watch_fork_gen + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&lk__watch_armed, false, __ATOMIC_RELAXED);
	cached_tid = 0;
	self = NULL;
	pthread_once(&exit_key_once, make_exit_key);
	pthread_setspecific(exit_key, NULL);
	lk__slots_fork_child();
	lk__watch_deliver_fork_child();
}

static void register_atfork(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

void lk__watch_fork_init(void)
{
	pthread_once(&fork_once, register_atfork);
}
