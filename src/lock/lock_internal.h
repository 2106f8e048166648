/* SPDX-License-Identifier: MIT */
/* Internal to the lock and sem modules: futexes, the clock, the registry. */
#ifndef LK_LOCK_INTERNAL_H
#define LK_LOCK_INTERNAL_H

#include <limits.h>
#include <linux/futex.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <lowkey/lock.h>

#if defined(__x86_64__) || defined(__i386__)
#define lk__cpu_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define lk__cpu_relax() __asm__ __volatile__("yield" ::: "memory")
#elif defined(__riscv)
/* Zihintpause's pause, encoded as the FENCE hint it is (a no-op on harts without it). */
#define lk__cpu_relax() __asm__ __volatile__(".4byte 0x0100000f" ::: "memory")
#else
#define lk__cpu_relax() __asm__ __volatile__("" ::: "memory")
#endif

/* futex(2) on a word; `shared` selects the key kind (a word other processes map, or not). */
static inline long lk__futex_wait(uint32_t *word, uint32_t expected, bool shared)
{
	return syscall(SYS_futex, word, shared ? FUTEX_WAIT : FUTEX_WAIT_PRIVATE, expected, NULL,
		       NULL, 0);
}

static inline long lk__futex_wake(uint32_t *word, int n, bool shared)
{
	return syscall(SYS_futex, word, shared ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

/*
 * Wait until *word != expected, a wake-up, a signal, or the CLOCK_MONOTONIC deadline (absolute).
 * FUTEX_WAIT_BITSET with an absolute deadline is interrupted by every signal handler, SA_RESTART
 * or not (the kernel restarts it only through restart_syscall, which it does not do for a
 * handler): the EINTR that System V semop() gives.
 */
static inline long lk__futex_wait_until(uint32_t *word, uint32_t expected,
					const struct timespec *deadline, bool shared)
{
	int op = (shared ? FUTEX_WAIT_BITSET : FUTEX_WAIT_BITSET_PRIVATE);

	return syscall(SYS_futex, word, op, expected, deadline, NULL, FUTEX_BITSET_MATCH_ANY);
}

/* Ticks (lk__lock_ticks) per nanosecond; calibrated once, see ticks.c. */
double lk__ticks_per_ns(void);
uint64_t lk__ticks_to_ns(uint64_t ticks);

/* Registry of named locks. */
void lk__lock_unregister(struct lk__lockmeta *meta);
void lk__lockmeta_init(struct lk__lockmeta *meta, const char *name, enum lk_lock_kind kind);

/* Add one timed wait to meta, from the holder (plain) or from concurrent waiters (atomic). */
static inline void lk__wait_account(struct lk__lockmeta *meta, uint64_t waited)
{
	LK__ST(meta->contended, LK__LD(meta->contended) + 1);
	LK__ST(meta->wait_total, LK__LD(meta->wait_total) + waited);
	if (waited > LK__LD(meta->wait_max))
		LK__ST(meta->wait_max, waited);
}

static inline void lk__atomic_max(uint64_t *p, uint64_t v)
{
	uint64_t cur = LK__LD(*p);

	while (v > cur &&
	       !__atomic_compare_exchange_n(p, &cur, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

static inline void lk__wait_account_atomic(struct lk__lockmeta *meta, uint64_t waited)
{
	__atomic_fetch_add(&meta->contended, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&meta->wait_total, waited, __ATOMIC_RELAXED);
	lk__atomic_max(&meta->wait_max, waited);
}

#endif
