/* SPDX-License-Identifier: MIT */
/*
 * Locks.
 *
 * 1. Named locks that keep statistics: lk_mutex_t, lk_rwlock_t, lk_spinlock_t.
 *
 *	static lk_mutex_t table_lock = LK_MUTEX_INIT("table");
 *
 *	lk_mutex_lock(&table_lock);
 *	...
 *	lk_mutex_unlock(&table_lock);
 *
 *	lk_lockstat_report(stderr, 0);	// every named lock, most waited-for first
 *
 * C++: lowkey/lock.hpp wraps the three as lowkey::mutex, lowkey::spinlock and lowkey::shared_mutex
 * for std::lock_guard, std::unique_lock, std::scoped_lock, std::shared_lock and
 * std::condition_variable_any. The header itself compiles without a warning as C99 to C17 and as
 * C++11 to C++20 (-Wall -Wextra -pedantic -Wold-style-cast -Wzero-as-null-pointer-constant).
 *
 * Each lock counts, always: acquisitions, how many of them had to wait (contended), the time they
 * waited (total, max, mean), the time the lock was held (total, max, mean), how often it passed
 * from one thread to another, and the share of the machine's CPU time spent waiting for it -- the
 * "free / contended / wait / avg / 1/1000 cpu time" that Manfred Spraul's ipc/sem.c series
 * ("Optimization for reducing spinlock contention") printed for the ipc lock.
 *
 * Cost. An uncontended lock + unlock is one compare-and-swap and one exchange on the lock word, as
 * for pthread_mutex, plus a few plain stores to the lock's own cache line: no system call, no
 * write anywhere else, nothing allocated. Waits are timed exactly (the waiter reads the clock when
 * it starts and stops waiting, on the slow path). Hold times need a cycle-counter read at lock and
 * at unlock, which together cost more than the lock itself, so holds are timed on a sample of
 * acquisitions: 1 in 16 by default, chosen by a Weyl sequence over the
 * acquisition number so that periodic patterns do not bias it. The mean and max are those of the
 * timed holds; the total is mean x acquisitions. lk_lockstat_set_hold_sampling(1) times every hold.
 *
 * Layout. The fields written on every lock/unlock share the lock's first 64-byte line; contention
 * figures and the name live on the next line, written only by waiters. The types are 64-byte
 * aligned: put them in static storage, on the stack, or allocate what contains them with
 * aligned_alloc()/posix_memalign() (C++17 `new` does it). Locks work in process-private memory only.
 *
 * A lock appears in lk_lockstat_foreach()/lk_lockstat_report() from its init (or, statically
 * initialized, from its first acquisition) until its destroy. A lock in memory that is freed must
 * be destroyed first. The name is not copied: pass a string that outlives the lock.
 *
 * 2. Per-CPU reader-writer lock (lk_pcpu_rwlock_t): for state that many threads read or update on
 * their own behalf and that changes globally only rarely -- the shape of the kernel's
 * percpu_rw_semaphore, which the kernel's hw_breakpoint constraint accounting took up to stop
 * thousands of tasks serializing on one mutex.
 * Readers touch only their CPU's cache line, so they do not contend with each other; a writer
 * shuts readers out and waits for those inside to leave. Writers are expected to be rare: a
 * writer costs a pass over every CPU's slot, and readers that arrive meanwhile wait.
 *
 *	static lk_pcpu_rwlock_t slots = LK_PCPU_RWLOCK_INIT;
 *
 *	lk_pcpu_read_lock(&slots);	// many threads at once
 *	...
 *	lk_pcpu_read_unlock(&slots);
 *
 *	lk_pcpu_write_lock(&slots);	// alone
 *	...
 *	lk_pcpu_write_unlock(&slots);
 */
#ifndef LOWKEY_LOCK_H
#define LOWKEY_LOCK_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <lowkey/bits/compiler.h>
#include <lowkey/bits/lock_hold.h>

LK_BEGIN_DECLS

/*
 * The initializers below are positional and name every field, in the structs' order: that is the
 * one form C (C99 on) and C++ (C++11 on) both take without a warning (C++ before C++20 has no
 * designated initializers, and -Wmissing-field-initializers counts every field left out). In C++
 * the null pointer is nullptr (-Wzero-as-null-pointer-constant).
 */
#ifndef LK__NULL
#ifdef __cplusplus
#define LK__NULL nullptr
#else
#define LK__NULL ((void *)0)
#endif
#endif

struct lk__pcpu_slot;

typedef struct lk_pcpu_rwlock {
	struct lk__pcpu_slot *slots; /* one cache line per CPU; allocated on first use */
	unsigned int nslots;
	int writer;	      /* 1 while a writer holds or waits for the lock */
	int writer_mutex;     /* serializes writers (a futex word) */
	unsigned int drained; /* bumped when a reader leaves while a writer waits (futex word) */
	long fallback_count;  /* readers' slot when allocation failed: still correct, shared */
} lk_pcpu_rwlock_t;

/* clang-format off */
#define LK_PCPU_RWLOCK_INIT { LK__NULL, 0, 0, 0, 0, 0 }
/* clang-format on */

/*
 * lk_pcpu_rwlock_init - initialize l (same as LK_PCPU_RWLOCK_INIT). Allocates the per-CPU slots,
 * one cache line per possible CPU. Returns 0; if memory is short the lock still works with one
 * shared slot (readers then contend on it). Not async-signal-safe.
 */
LK_API int lk_pcpu_rwlock_init(lk_pcpu_rwlock_t *l);

/* lk_pcpu_rwlock_destroy - free l's slots. No thread may hold or wait for l. */
LK_API void lk_pcpu_rwlock_destroy(lk_pcpu_rwlock_t *l);

/*
 * lk_pcpu_read_lock / lk_pcpu_read_unlock - shared access.
 * Cost without a writer: one atomic add on this CPU's cache line and one load, no
 * system call; the first use of a statically initialized lock allocates its slots. While a writer
 * holds or waits for the lock, read_lock sleeps (futex) until it leaves. Readers may nest, unless
 * a writer arrives between (as with any reader-writer lock that keeps writers from starving).
 * A reader may unlock on another CPU than it locked on. Not async-signal-safe: a handler that
 * interrupts a writer would wait forever.
 */
LK_API void lk_pcpu_read_lock(lk_pcpu_rwlock_t *l);
LK_API void lk_pcpu_read_unlock(lk_pcpu_rwlock_t *l);

/*
 * lk_pcpu_write_lock / lk_pcpu_write_unlock - exclusive access.
 * Cost: serializes with other writers, then waits until every reader inside has left; a pass over
 * all CPUs' slots per check. Writers are not reentrant. Not async-signal-safe.
 */
LK_API void lk_pcpu_write_lock(lk_pcpu_rwlock_t *l);
LK_API void lk_pcpu_write_unlock(lk_pcpu_rwlock_t *l);

/* ======================================================================================== */
/* Named locks with statistics.                                                              */
/* ======================================================================================== */

enum lk_lock_kind {
	LK_LOCK_MUTEX = 1,
	LK_LOCK_RWLOCK = 2,
	LK_LOCK_SPINLOCK = 3,
};

/* A snapshot of one lock's statistics. Times are in nanoseconds. */
struct lk_lockstat {
	const char *name; /* as given at init; "" when none was */
	const void *lock; /* the lock's address */
	enum lk_lock_kind kind;
	uint64_t acquisitions; /* exclusive ones: every lock of a mutex or spinlock, writes of an rwlock */
	uint64_t read_acquisitions; /* shared acquisitions of an rwlock; 0 for the others */
	uint64_t contended; /* acquisitions (either kind) that found the lock taken and waited */
	uint64_t wait_total_ns; /* time spent waiting, all contended acquisitions together */
	uint64_t wait_max_ns;
	uint64_t wait_mean_ns;	/* wait_total_ns / contended */
	uint64_t hold_samples;	/* exclusive holds that were timed */
	uint64_t hold_total_ns; /* hold_mean_ns x acquisitions (exact when every hold is timed) */
	uint64_t hold_max_ns;	/* longest timed exclusive hold */
	uint64_t hold_mean_ns;
	uint64_t read_hold_samples;  /* rwlock: shared holds that were timed */
	uint64_t read_hold_total_ns; /* read_hold_mean_ns x read_acquisitions */
	uint64_t read_hold_max_ns;
	uint64_t read_hold_mean_ns;
	uint64_t owner_changes; /* exclusive acquisitions by another thread than the previous one */
	uint64_t lifetime_ns;	/* since init, or since the first acquisition of a static lock */
	/*
	 * wait_total / (lifetime x online CPUs): the share of the machine's time that threads spent
	 * waiting for this lock. The ipc lock's "1/1000 cpu time" is this x 1000. A spinlock's waiters
	 * burn that CPU time; a mutex's and an rwlock's sleep through most of it.
	 */
	double wait_fraction;
};

/* ---- lk_mutex_t: sleeps (futex) when contended, after a short spin ---- */

typedef struct lk_mutex {
	uint32_t lk__word; /* 0 free, 1 held, 2 held and someone may be asleep */
	uint32_t lk__spare;
	uintptr_t lk__owner; /* thread pointer of the latest holder */
	uint64_t lk__acq;
	uint64_t lk__owner_changes;
	struct lk__hold lk__hold;
	struct lk__lockmeta lk__meta;
} __attribute__((aligned(64))) lk_mutex_t;

/* clang-format off */
#define LK_MUTEX_INIT(name_) { 0, 0, 0, 0, 0, LK__HOLD_INIT, LK__LOCKMETA_INIT(name_, LK_LOCK_MUTEX) }
/* clang-format on */

/*
 * lk_mutex_init - initialize m and register it under name (may be NULL) for the reports.
 * Equivalent to LK_MUTEX_INIT, except that the lock is listed (and its lifetime counted) from now
 * rather than from its first acquisition. Returns 0, or -EINVAL if m is NULL. Takes the registry
 * lock: not async-signal-safe.
 */
LK_API int lk_mutex_init(lk_mutex_t *m, const char *name);

/*
 * lk_mutex_destroy - take m off the registry. Returns 0, or -EBUSY (nothing done) if m is held.
 * Not async-signal-safe.
 */
LK_API int lk_mutex_destroy(lk_mutex_t *m);

/*
 * lk_mutex_lock - acquire m. Uncontended: one compare-and-swap and a few stores to m's first cache
 * line. Contended: spins briefly, then sleeps in futex(2); the wait is timed. Not recursive: a
 * thread that locks a mutex it holds deadlocks, as with a default pthread mutex. Not
 * async-signal-safe.
 */
static inline void lk_mutex_lock(lk_mutex_t *m);

/* lk_mutex_trylock - acquire m if it is free: 0, or -EBUSY. One compare-and-swap; never waits; a
 * failure is not counted as contention. Not async-signal-safe. */
static inline int lk_mutex_trylock(lk_mutex_t *m);

/*
 * lk_mutex_unlock - release m, which the calling thread holds. One exchange; a futex wake-up only
 * when a waiter may be asleep. Not async-signal-safe.
 */
static inline void lk_mutex_unlock(lk_mutex_t *m);

/* ---- lk_spinlock_t: spins (with pause, then sched_yield) when contended ---- */

typedef struct lk_spinlock {
	uint32_t lk__word; /* 0 free, 1 held */
	uint32_t lk__spare;
	uintptr_t lk__owner;
	uint64_t lk__acq;
	uint64_t lk__owner_changes;
	struct lk__hold lk__hold;
	struct lk__lockmeta lk__meta;
} __attribute__((aligned(64))) lk_spinlock_t;

/* clang-format off */
#define LK_SPINLOCK_INIT(name_) { 0, 0, 0, 0, 0, LK__HOLD_INIT, LK__LOCKMETA_INIT(name_, LK_LOCK_SPINLOCK) }
/* clang-format on */

/* lk_spinlock_init / lk_spinlock_destroy: as lk_mutex_init / lk_mutex_destroy. */
LK_API int lk_spinlock_init(lk_spinlock_t *s, const char *name);
LK_API int lk_spinlock_destroy(lk_spinlock_t *s);

/*
 * lk_spin_lock - acquire s. Uncontended: as lk_mutex_lock. Contended: spins on a load with the
 * CPU's pause hint, and yields the CPU between rounds so a preempted holder can run; the wait is
 * timed. Never sleeps in the kernel. Async-signal-safe only if no handler can interrupt a holder.
 */
static inline void lk_spin_lock(lk_spinlock_t *s);

/* lk_spin_trylock - 0, or -EBUSY if s is held. One compare-and-swap; never waits. */
static inline int lk_spin_trylock(lk_spinlock_t *s);

/* lk_spin_unlock - release s: one store (and a clock read when the hold is timed). */
static inline void lk_spin_unlock(lk_spinlock_t *s);

/* ---- lk_rwlock_t: readers share, a writer excludes; a waiting writer holds new readers back ---- */

typedef struct lk_rwlock {
	uint32_t lk__state;	 /* readers, or LK__RW_WRITE_LOCKED, | waiting bits */
	uint32_t lk__writer_seq; /* futex word writers sleep on */
	uintptr_t lk__owner;	 /* latest writer */
	uint64_t lk__acq;	 /* writes, counted by the writer */
	uint64_t lk__read_acq;	 /* reads, atomic */
	uint64_t lk__owner_changes;
	uint64_t lk__read_timing; /* shared holds being timed now (atomic) */
	uint64_t lk__spare[2];
	struct lk__hold lk__hold;      /* writers' holds */
	struct lk__hold lk__read_hold; /* readers' holds (start unused: kept per thread) */
	struct lk__lockmeta lk__meta;
} __attribute__((aligned(64))) lk_rwlock_t;

#define LK_RWLOCK_INIT(name_)                                                \
	{                                                                    \
		0, 0, 0, 0, 0, 0, 0, { 0, 0 }, LK__HOLD_INIT, LK__HOLD_INIT, \
			LK__LOCKMETA_INIT(name_, LK_LOCK_RWLOCK)             \
	}

/* lk_rwlock_init / lk_rwlock_destroy: as lk_mutex_init / lk_mutex_destroy (-EBUSY if held). */
LK_API int lk_rwlock_init(lk_rwlock_t *l, const char *name);
LK_API int lk_rwlock_destroy(lk_rwlock_t *l);

/*
 * lk_rwlock_read_lock - shared acquisition. Uncontended: one compare-and-swap and one atomic add
 * on l's first line. Waits (futex) while a writer holds l or waits for it, so writers do not
 * starve; a thread that already reads l and reads it again while a writer waits deadlocks, as with
 * any writer-preferring lock. Not async-signal-safe.
 */
static inline void lk_rwlock_read_lock(lk_rwlock_t *l);

/* lk_rwlock_read_trylock - 0, or -EBUSY if a writer holds or waits for l. Never waits. */
static inline int lk_rwlock_read_trylock(lk_rwlock_t *l);

/* lk_rwlock_read_unlock - end a shared hold. One atomic subtract; wakes a writer if it was the last. */
static inline void lk_rwlock_read_unlock(lk_rwlock_t *l);

/* lk_rwlock_write_lock - exclusive acquisition; as lk_mutex_lock. */
static inline void lk_rwlock_write_lock(lk_rwlock_t *l);

/* lk_rwlock_write_trylock - 0, or -EBUSY if l is held in either mode. Never waits. */
static inline int lk_rwlock_write_trylock(lk_rwlock_t *l);

/* lk_rwlock_write_unlock - end an exclusive hold; wakes a waiting writer, else the waiting readers. */
static inline void lk_rwlock_write_unlock(lk_rwlock_t *l);

/* ---- statistics ---- */

/*
 * lk_mutex_stat / lk_rwlock_stat / lk_spinlock_stat - a snapshot of one lock's figures.
 * Lock-free (relaxed loads; a snapshot taken while threads use the lock may be off by the
 * acquisitions in flight). Costs a few dozen loads; where the CPU does not publish the cycle
 * counter's frequency, the first call of the process may sleep until the library has been loaded
 * 20 ms, to measure it to 0.1 % (longer, up to 1 s, when preemptions make the measurement
 * uncertain). Returns 0 or -EINVAL (NULL argument).
 * Not async-signal-safe (that calibration).
 */
LK_API int lk_mutex_stat(const lk_mutex_t *m, struct lk_lockstat *out);
LK_API int lk_rwlock_stat(const lk_rwlock_t *l, struct lk_lockstat *out);
LK_API int lk_spinlock_stat(const lk_spinlock_t *s, struct lk_lockstat *out);

/*
 * lk_lockstat_foreach - call fn for every registered lock (initialized, or statically initialized
 * and used at least once, and not destroyed), in no particular order. The figures are copied under
 * the registry lock, then fn runs without it: fn may lock, init or destroy locks. fn returns 0 to
 * go on, anything else to stop; lk_lockstat_foreach returns that value, 0 when every lock was
 * seen, or -ENOMEM. Allocates; not async-signal-safe.
 */
LK_API int lk_lockstat_foreach(int (*fn)(const struct lk_lockstat *stat, void *arg), void *arg);

#define LK_LOCKSTAT_JSON 0x1u	   /* JSON instead of a table */
#define LK_LOCKSTAT_CONTENDED 0x2u /* only locks that were contended at least once */

/*
 * lk_lockstat_report - print every registered lock's figures to out, sorted by total wait (then
 * acquisitions): a table, or with LK_LOCKSTAT_JSON one JSON object {"locks": [...]}.
 * Returns 0, -EINVAL (out NULL or unknown flags), -ENOMEM, or -EIO if writing failed.
 * Allocates; not async-signal-safe.
 */
LK_API int lk_lockstat_report(FILE *out, unsigned int flags);

/*
 * lk_lockstat_set_hold_sampling - time one hold in `period` (1: every hold, exact totals; the
 * default is 16). Applies to acquisitions from now on, in every lock. Returns the previous period,
 * or -EINVAL if period is 0. Also set at start-up by the LOWKEY_LOCK_HOLD_SAMPLING environment
 * variable. Async-signal-safe (one store).
 */
LK_API int lk_lockstat_set_hold_sampling(unsigned int period);

LK_END_DECLS

/* The inline fast paths of the functions above; not API. */
#include <lowkey/bits/lock_inline.h>

#endif
