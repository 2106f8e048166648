/* SPDX-License-Identifier: MIT */
/*
 * The architecture layer of the inline code: what the public headers and the library read or
 * emit that differs from one processor to another. Nothing here is API.
 *
 * One header per architecture (bits/arch/<arch>.h) provides, for the one it is included on:
 *
 *   lk__arch_counter()          the cycle counter, the cheapest read: may be performed out of
 *                               order with the instructions around it.
 *   lk__arch_counter_ordered()  the cycle counter, read only after every earlier instruction has
 *                               completed.
 *   lk__arch_thread_pointer()   the thread pointer: a value unique to the calling thread while it
 *                               lives, read without a call.
 *   LK__SYM(n), LK__SYMBOL      an asm operand that is a symbol's address, written bare into a
 *                               table (the template modifier and its constraint).
 *   LK__ARCH_SITE_CODE          a static key's site: the NOP or the jump (see bits/key_site.h).
 *   LK__ARCH_SDT_*              the pieces of a USDT probe point (see bits/probe_site.h).
 *
 * and says what it has with feature macros, each defined to 0 or 1:
 *
 *   LK_ARCH_HAVE_CYCLE_COUNTER  a constant-rate counter readable from user space;
 *   LK_ARCH_HAVE_PATCHED_SITES  static key sites that are code to rewrite;
 *   LK_ARCH_HAVE_SDT            USDT probe points.
 *
 * Which read to use. All of them cost one instruction or two, are async-signal-safe, and never
 * fail. The ordered read is for the ends of a bracket around a system call whose time is kept
 * with the bracket's first read (the clock's rebase of a thread's CPU time, src/clock/cputime.c):
 * the end must not be read before the call has returned, or the bracket's width, which decides
 * whether the pair is kept, would leave part of the call out. Everything else takes the
 * unordered read, the cheapest: probe timestamps, lock hold and wait times, and the clock's own
 * reads of the thread's CPU time and of lk_now_ns(). Those need no order with other
 * instructions: the CPU time is extrapolated from a base only while the thread's seqcount has not
 * moved, and an interrupt or a context switch stops the CPU at a precise instruction boundary, so
 * a counter read in one stretch of running is checked against a seqcount read in the same
 * stretch, whatever order the CPU executed them in. The probes' timestamps feed that same path
 * (one read stamps an event and gives its CPU time). lk_now_ns()'s calibration pairs a vDSO
 * clock_gettime() with the middle of two unordered reads around it: fenced reads are each taken
 * late by the fence's wait, which moves the middle past the vDSO's reading and puts lk_now_ns()
 * below CLOCK_MONOTONIC (lowkey bench cputime shows it, "n below").
 *
 *   x86-64: rdtsc, or lfence; rdtsc (the kernel's rdtsc_ordered()).
 *   aarch64: mrs cntvct_el0, or isb; mrs cntvct_el0 (the kernel's __arch_counter_get_cntvct()):
 *     the architecture lets the counter be read speculatively and out of order, as rdtsc.
 *   riscv64: rdtime for both: the time CSR, which Linux's own vDSO reads with no fence around it
 *     (on many implementations the read traps to M-mode, which orders it).
 *
 * The fallback, where no header matches: the counter is CLOCK_MONOTONIC in nanoseconds
 * (clock_gettime(), a vDSO call; LK_ARCH_HAVE_CYCLE_COUNTER is 0, so the clock does not treat it
 * as a cycle counter), the thread pointer is pthread_self(), key sites are load + branch, and
 * there is no USDT. clock_gettime() is POSIX: a strict ISO C build on such an architecture
 * defines _POSIX_C_SOURCE.
 */
#ifndef LOWKEY_BITS_ARCH_H
#define LOWKEY_BITS_ARCH_H

#include <stdint.h>
#include <lowkey/bits/compiler.h>

#if defined(__x86_64__)
#include <lowkey/bits/arch/x86_64.h>
#elif defined(__aarch64__)
#include <lowkey/bits/arch/aarch64.h>
#elif defined(__riscv) && __riscv_xlen == 64
#include <lowkey/bits/arch/riscv64.h>
#else
#include <pthread.h>
#include <time.h>

#define LK_ARCH_HAVE_CYCLE_COUNTER 0
#define LK_ARCH_HAVE_PATCHED_SITES 0
#define LK_ARCH_HAVE_SDT 0

static inline uint64_t lk__arch_counter(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return LK__CAST(uint64_t, ts.tv_sec) * 1000000000u + LK__CAST(uint64_t, ts.tv_nsec);
}

static inline uint64_t lk__arch_counter_ordered(void)
{
	return lk__arch_counter();
}

static inline uintptr_t lk__arch_thread_pointer(void)
{
	return LK__CAST(uintptr_t, pthread_self()); /* glibc: pthread_t is an unsigned long */
}

#define LK__SYM(n) "%c" #n
#define LK__SYMBOL "i"
#endif

#endif
