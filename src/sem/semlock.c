// SPDX-License-Identifier: MIT
/*
 * The locks inside a semaphore set: a futex lock in the set's memory, with the figures that
 * ipc/sem.c's spinlock-contention series printed for the ipc lock. A shared set's locks use
 * process-shared futexes.
 *
 * A lock is held for a few instructions; in a shared set its holder may still die there (killed,
 * crashed), or stop (SIGSTOP, a debugger), or be a peer that never lets go. So a waiter never
 * waits without end for a shared lock: it sleeps in slices (LOCK_FIRST_SLICE_NS, then
 * LOCK_SLICE_NS: a lock is normally held for microseconds), and after each looks
 * at the set (removed: -EIDRM; found broken by someone else: -ENOTRECOVERABLE), at its own
 * deadline (-ETIMEDOUT), and at the holder the word names. A holder that no longer exists -- no
 * such thread, or a zombie -- died inside the lock, leaving the set possibly half-updated (values
 * of a call half done, a queue half linked); nothing says which, so the set is marked broken for
 * everyone: every call fails with -ENOTRECOVERABLE, and only removal still works.
 *
 * The holder is named by its thread id, which means something only in the PID namespace of the
 * set's creator: a process in another one takes locks unnamed (LOCK_NOCHECK) and judges no
 * holder, and a holder it waits for can then only make it time out. A thread id reused by a new
 * thread before anyone looked makes a dead holder look alive, with the same result.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "sem/sem_internal.h"

#define SPINS 64
#define TLS_IE __attribute__((tls_model("initial-exec")))

static __thread uint32_t my_tid TLS_IE;
static pthread_once_t tid_once = PTHREAD_ONCE_INIT;

static void forget_tid(void)
{
	my_tid = 0; /* the child of fork: a new thread id */
}

static void tid_init(void)
{
	pthread_atfork(NULL, NULL, forget_tid);
}

uint32_t lk__sem_tid(void)
{
	if (LK__UNLIKELY(!my_tid)) {
		pthread_once(&tid_once, tid_init);
		my_tid = (uint32_t)gettid() & LOCK_TID;
	}
	return my_tid;
}

uint64_t lk__monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The inode of this process's PID namespace; 0 if /proc cannot tell. */
uint64_t lk__pid_ns(void)
{
	struct stat st;

	return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* Whether thread tid has ended: gone, or a zombie that nobody has waited for yet. */
static bool thread_gone(uint32_t tid)
{
	char path[64], buf[512], *paren;
	ssize_t n;
	int fd;

	if (kill((pid_t)tid, 0) != 0 && errno == ESRCH)
		return true;
	snprintf(path, sizeof(path), "/proc/%u/stat", tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false; /* no /proc: a zombie holder times callers out instead */
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	paren = strrchr(buf, ')'); /* "tid (comm) S ...": comm may hold anything */
	return paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

/* A wait slice on a shared lock ended: look at the set and at the holder named in word. */
static int look_at_holder(struct lk_semset *s, struct semlock *l, uint32_t word)
{
	struct semset_header *h = s->hdr;
	uint32_t tid = word & LOCK_TID;

	if (__atomic_load_n(&h->removed, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(&h->broken, __ATOMIC_ACQUIRE))
		return lk__semset_check(s);
	if (!s->owners || (word & LOCK_NOCHECK) || !tid || !thread_gone(tid))
		return 0;
	if (__atomic_load_n(&l->word, __ATOMIC_ACQUIRE) != word)
		return 0; /* it changed hands meanwhile */
	__atomic_store_n(&h->broken, 1, __ATOMIC_RELEASE);
	return lk__semset_check(s);
}

/* Sleep on word (which has LOCK_WAITERS) for a slice at most: 0 to try again, or why not. */
static int sleep_on(struct lk_semset *s, struct semlock *l, uint32_t word, uint64_t deadline,
		    uint64_t slice)
{
	uint64_t now, until;
	struct timespec ts;

	if (deadline == NO_DEADLINE && !s->shared) {
		lk__futex_wait(&l->word, word, false);
		return 0;
	}
	now = lk__monotonic_ns();
	if (now >= deadline)
		return -ETIMEDOUT;
	until = deadline;
	if (s->shared && until - now > slice)
		until = now + slice;
	ts = (struct timespec){ (time_t)(until / 1000000000u), (long)(until % 1000000000u) };
	if (lk__futex_wait_until(&l->word, word, &ts, s->shared) == 0 || errno != ETIMEDOUT ||
	    !s->shared)
		return 0;
	return look_at_holder(s, l, word);
}

static int lock_wait(struct lk_semset *s, struct semlock *l, uint32_t owner, uint64_t deadline)
{
	uint64_t slice = LOCK_FIRST_SLICE_NS;

	for (;;) {
		uint32_t word = __atomic_load_n(&l->word, __ATOMIC_RELAXED);
		int err;

		if (word == 0) {
			/* taken after a sleep: others may sleep too, so unlock must wake */
			if (__atomic_compare_exchange_n(&l->word, &word, owner | LOCK_WAITERS,
							false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
				return 0;
			continue;
		}
		if (!(word & LOCK_WAITERS)) {
			if (!__atomic_compare_exchange_n(&l->word, &word, word | LOCK_WAITERS,
							 false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
				continue;
			word |= LOCK_WAITERS;
		}
		if (s->shared && __atomic_load_n(&s->hdr->broken, __ATOMIC_ACQUIRE))
			return lk__semset_check(s);
		err = sleep_on(s, l, word, deadline, slice);
		if (err)
			return err;
		slice = LOCK_SLICE_NS;
	}
}

int lk__semlock_slow(struct lk_semset *s, struct semlock *l, uint32_t owner, uint64_t deadline)
{
	uint64_t start = lk__lock_ticks();
	bool got = false;

	for (int i = 0; i < SPINS && !got; i++) {
		uint32_t free_word = 0;

		lk__cpu_relax();
		got = __atomic_load_n(&l->word, __ATOMIC_RELAXED) == 0 &&
		      __atomic_compare_exchange_n(&l->word, &free_word, owner, false,
						  __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
	}
	if (!got) {
		int err = lock_wait(s, l, owner, deadline);

		if (err)
			return err;
	}
	/* holding it now: the figures are ours to change */
	LK__ST(l->contended, LK__LD(l->contended) + 1);
	LK__ST(l->wait, LK__LD(l->wait) + (lk__lock_ticks() - start));
	return 0;
}
