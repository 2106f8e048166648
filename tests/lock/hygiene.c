/* SPDX-License-Identifier: MIT */
/*
 * Header hygiene (test_header_hygiene_lock): every macro and inline function of lock.h, sem.h,
 * clock.h, counter.h, watch.h, error.h and version.h, as a user's translation unit would use them.
 * Compiled with -fsyntax-only as C (C99, C11, C17, GNU11) and, through hygiene.cpp, as C++, by
 * every compiler at hand, with warnings as errors: so it is written in the subset of C that C++
 * takes too (no designated initializers, no implicit void * conversions). Never run.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <lowkey/version.h>
#include <lowkey/error.h>
#include <lowkey/clock.h>
#include <lowkey/counter.h>
#include <lowkey/lock.h>
#include <lowkey/sem.h>
#include <lowkey/watch.h>

#ifdef __cplusplus
#define HYG_NULL nullptr /* clang++'s NULL (__null) is a zero as null pointer constant */
#else
#define HYG_NULL NULL
#endif

/* Static initializers, at file scope and in a function. */
static lk_mutex_t hyg_mutex = LK_MUTEX_INIT("hygiene-mutex");
static lk_spinlock_t hyg_spin = LK_SPINLOCK_INIT("hygiene-spin");
static lk_rwlock_t hyg_rw = LK_RWLOCK_INIT("hygiene-rw");
static lk_pcpu_rwlock_t hyg_pcpu = LK_PCPU_RWLOCK_INIT;

int hyg_locks(void);
int hyg_modules(void);
void hyg_on_hit(const struct lk_watch_hit *hit, void *arg);

static int hyg_each(const struct lk_lockstat *st, void *arg)
{
	(void)st;
	(void)arg;
	return 0;
}

int hyg_locks(void)
{
	static lk_mutex_t local_mutex = LK_MUTEX_INIT(HYG_NULL);
	lk_mutex_t auto_mutex = LK_MUTEX_INIT("auto");
	lk_spinlock_t auto_spin = LK_SPINLOCK_INIT("auto");
	lk_rwlock_t auto_rw = LK_RWLOCK_INIT("auto");
	lk_pcpu_rwlock_t auto_pcpu = LK_PCPU_RWLOCK_INIT;
	struct lk_lockstat st;
	int n = 0;

	lk_mutex_lock(&hyg_mutex);
	lk_mutex_unlock(&hyg_mutex);
	if (lk_mutex_trylock(&local_mutex) == 0)
		lk_mutex_unlock(&local_mutex);
	n += lk_mutex_init(&auto_mutex, "auto") + lk_mutex_destroy(&auto_mutex);

	lk_spin_lock(&hyg_spin);
	lk_spin_unlock(&hyg_spin);
	if (lk_spin_trylock(&hyg_spin) == 0)
		lk_spin_unlock(&hyg_spin);
	n += lk_spinlock_init(&auto_spin, "auto") + lk_spinlock_destroy(&auto_spin);

	lk_rwlock_read_lock(&hyg_rw);
	lk_rwlock_read_unlock(&hyg_rw);
	lk_rwlock_write_lock(&hyg_rw);
	lk_rwlock_write_unlock(&hyg_rw);
	if (lk_rwlock_read_trylock(&hyg_rw) == 0)
		lk_rwlock_read_unlock(&hyg_rw);
	if (lk_rwlock_write_trylock(&hyg_rw) == 0)
		lk_rwlock_write_unlock(&hyg_rw);
	n += lk_rwlock_init(&auto_rw, "auto") + lk_rwlock_destroy(&auto_rw);

	lk_pcpu_read_lock(&hyg_pcpu);
	lk_pcpu_read_unlock(&hyg_pcpu);
	lk_pcpu_write_lock(&hyg_pcpu);
	lk_pcpu_write_unlock(&hyg_pcpu);
	n += lk_pcpu_rwlock_init(&auto_pcpu);
	lk_pcpu_rwlock_destroy(&auto_pcpu);

	n += lk_mutex_stat(&hyg_mutex, &st) + lk_spinlock_stat(&hyg_spin, &st) +
	     lk_rwlock_stat(&hyg_rw, &st);
	n += st.kind == LK_LOCK_MUTEX || st.kind == LK_LOCK_RWLOCK || st.kind == LK_LOCK_SPINLOCK;
	n += lk_lockstat_foreach(hyg_each, HYG_NULL);
	n += lk_lockstat_report(stderr, LK_LOCKSTAT_JSON | LK_LOCKSTAT_CONTENDED);
	n += lk_lockstat_set_hold_sampling(16);
	return n;
}

void hyg_on_hit(const struct lk_watch_hit *hit, void *arg)
{
	(void)hit;
	(void)arg;
}

int hyg_modules(void)
{
	struct lk_sembuf wait_job = { 0, -1, 0 },
			 take_two[2] = { { 0, -1, 0 }, { 1, -1, LK_IPC_NOWAIT } };
	struct lk_semset *set = HYG_NULL;
	struct lk_semset_stats sst;
	struct lk_counters *c = HYG_NULL;
	struct lk_counter_value v[2];
	struct lk_clock_info info;
	struct lk_watch *w = HYG_NULL;
	struct lk_watch_stats wst;
	static long watched;
	unsigned int sem_flags = 0600u | LK_SEMSET_EXCL | LK_SEMSET_WAITERS(300);
	int n = LK_VERSION_MAJOR + LK_VERSION_MINOR + LK_VERSION_PATCH +
		(LK_VERSION_STRING[0] != 0);

	n += lk_semset_create(&set, HYG_NULL, 2, sem_flags);
	n += lk_semctl(set, 0, LK_SETVAL, LK_SEMVMX) + lk_semctl(set, 0, LK_GETVAL);
	n += lk_semop(set, &wait_job, 1, HYG_NULL) + lk_semop(set, take_two, 2, HYG_NULL);
	n += lk_semset_stats(set, &sst) + (LK_SEMOPM + LK_SEMMSL > 0) + (LK_SEM_UNDO != 0);
	n += lk_semctl(set, 0, LK_IPC_RMID) + lk_semset_close(set);

	n += lk_counters_open(&c, "{task-clock,page-faults}", 0,
			      LK_COUNTERS_INHERIT | LK_COUNTERS_DISABLED |
				      LK_COUNTERS_SKIP_UNSUPPORTED);
	n += lk_counters_read(c, v, 2);
	lk_counters_close(c);

	n += (lk_thread_cputime_ns() + lk_now_ns() + lk_cycles()) != 0;
	n += lk_clock_info(&info) + (info.cputime == LK_CPUTIME_SEQ) + (info.now == LK_NOW_TSC);

	n += lk_watch_add(&w, &watched, sizeof(watched),
			  LK_WATCH_WRITE | LK_WATCH_PROCESS | LK_WATCH_DEFERRED, hyg_on_hit,
			  HYG_NULL);
	n += lk_watch_stats(w, &wst) + lk_watch_remove(w) + LK_WATCH_QUEUE_LEN;

	n += lk_strerror(-1)[0] + lk_last_error()[0] + lk_version()[0];
	return n;
}
