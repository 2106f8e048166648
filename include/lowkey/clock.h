/* SPDX-License-Identifier: MIT */
/*
 * Clocks: the calling thread's CPU time without a system call, and a calibrated TSC clock.
 *
 *	uint64_t t0 = lk_thread_cputime_ns();
 *	work();
 *	uint64_t used = lk_thread_cputime_ns() - t0;	// CPU time this thread spent in work()
 *
 * lk_thread_cputime_ns() gives what clock_gettime(CLOCK_THREAD_CPUTIME_ID) gives (same epoch: the
 * thread's start; same unit: ns of CPU time) for the cost of a TSC read instead of a system call.
 * It uses the mmap page of a per-thread perf "task-clock" event (see docs/clock.md):
 *
 *  - "page" (with cap_user_time: bare-metal x86, arm64): the thread's task-clock is computed from the
 *    page and the cycle counter alone; one clock_gettime() per rebase interval keeps it on
 *    CLOCK_THREAD_CPUTIME_ID's scale (the two drift apart by interrupt and steal time).
 *  - "seq" (without cap_user_time: x86 virtual machines): the page's seqcount changes every time
 *    the thread is scheduled in, so it tells whether the thread has run without a switch since a
 *    base {cpu ns, cycles, seq} taken with one clock_gettime(); while it has, CPU time is the base
 *    plus the cycles since, scaled. A new base is taken when the seqcount moves or the base is
 *    older than the rebase interval (1 ms by default).
 *  - "syscall": clock_gettime(CLOCK_THREAD_CPUTIME_ID) on every call. Used where perf events are
 *    denied (kernel.perf_event_paranoid 3/4 on some distributions, seccomp, no CONFIG_PERF_EVENTS),
 *    where a thread cannot get a file descriptor (EMFILE), where the cycle counter has no constant
 *    rate, and when LOWKEY_CLOCK=syscall. Values are right, only slower. lk_clock_info() says which
 *    method is used and why.
 *
 * Environment (read once, at the first call in the process; ignored in set-user-ID programs):
 *   LOWKEY_CLOCK=auto|page|seq|syscall	thread CPU time method (default auto: page, else seq,
 *					else syscall)
 *   LOWKEY_CLOCK_NOW=auto|tsc|vdso	lk_now_ns() method (default auto: tsc where usable)
 *   LOWKEY_CLOCK_REBASE_US=N		rebase interval in µs, 10..1000000 (default 1000)
 * A value that is not understood is ignored; lk_clock_info() says so.
 *
 * Signals: every function here except lk_clock_info() may be called from a signal handler, also
 * as the first call in a thread or in the process (set-up uses only async-signal-safe system calls
 * and glibc's pthread_setspecific, which does not allocate for lowkey's key). A call that
 * interrupts another clock call in the same thread returns a right value; where that interrupted
 * call was mid-way through set-up or a rebase, the nested call uses the system call. The one
 * approximation: when a handler's call lands in the two instructions where the interrupted call
 * records its result, a later call of that thread can return a value lower than the handler's by
 * at most the error bound below.
 *
 * Threads and processes: each thread sets itself up on its first call (one perf_event_open and
 * one mmap; the file descriptor is closed at once, the page is unmapped when the
 * thread exits). Unprivileged threads share their user's perf mmap budget
 * (kernel.perf_event_mlock_kb per CPU + RLIMIT_MEMLOCK, one page each: 2,306 threads at once with
 * the defaults on 2 CPUs); threads beyond it use the system call and try again every 100 ms. A child made by
 * fork(), _Fork() or clone() without CLONE_VM sets itself up again on its first call. A thread that
 * calls prctl(PR_TASK_PERF_EVENTS_DISABLE) disables lowkey's event too: the next base that ages
 * out notices (the page stopped following the thread's context switches) and maps a new one.
 *
 * The first call in the process also calibrates the cycle counter: instant where CPUID or the perf
 * page gives its frequency, otherwise a 200 µs measurement.
 *
 * liblowkey keeps the per-thread state (192 bytes) in initial-exec TLS; a dlopen()ed liblowkey
 * takes its whole TLS block (960 bytes, with core's message buffer) from glibc's static TLS
 * reserve, and is never unloaded (-z nodelete: exiting threads run its destructor).
 */
#ifndef LOWKEY_CLOCK_H
#define LOWKEY_CLOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <lowkey/bits/compiler.h>

LK_BEGIN_DECLS

/*
 * lk_thread_cputime_ns - the calling thread's CPU time in ns, on clock_gettime(
 * CLOCK_THREAD_CPUTIME_ID)'s scale. Never decreases within a thread, and is never below a
 * clock_gettime(CLOCK_THREAD_CPUTIME_ID) the thread made before it.
 *
 * Error (methods page and seq): never below the thread's CPU time but for the counter frequency's
 * error over one rebase interval (at most 1000 ppm of it by construction, a few ppm in practice: a
 * few ns). A base carries the counter value read *before* its clock_gettime(), so reads are above
 * the CPU time by the system call's time up to the kernel's reading: a bias of about half the call
 * that differences of reads do not see; at most the whole call (a base is taken only from one
 * shorter than 10 µs), plus the time since the base during which the thread was off its CPU
 * without the kernel switching it out: hypervisor steal time and, on kernels with
 * CONFIG_IRQ_TIME_ACCOUNTING, interrupt time. The rebase interval (LOWKEY_CLOCK_REBASE_US, 1 ms by
 * default) caps the latter. A base that carried the middle of its bracket instead would be closer
 * on average, but an interrupt charged to the thread after the kernel's reading would make every
 * read from it lag by half of that interrupt, below an earlier clock_gettime() (docs/clock.md,
 * "Error"; lowkey bench cputime measures the error).
 *
 * Cost: one cycle-counter read and a few loads on the fast path; one clock_gettime() system call
 * per rebase, plus one getrusage() when a base ages
 * out without a switch; set-up on the first call of a thread. With method syscall, one system call
 * per call. Async-signal-safe (see above). Never fails.
 */
LK_API uint64_t lk_thread_cputime_ns(void);

/*
 * lk_now_ns - CLOCK_MONOTONIC in ns (same epoch, same rate, NTP adjustments included), read from
 * the cycle counter. Never decreases within a thread.
 *
 * Calibration: the counter's frequency comes from CPUID leaf 0x15, the hypervisor's leaf
 * 0x40000010, the perf page's time_mult (cap_user_time), or by measurement against
 * CLOCK_MONOTONIC_RAW (200 µs on the first call, then refined every 10 ms over all the time since);
 * lk_clock_info() says which. The frequency only scales CPU-time extrapolations; lk_now_ns()
 * takes its rate from CLOCK_MONOTONIC itself.
 *
 * Steering: no value is extrapolated more than 10 ms of counter time past a reading of
 * CLOCK_MONOTONIC; the call that finds its mapping that old re-reads CLOCK_MONOTONIC (vDSO, the
 * narrowest of three brackets) and starts a new mapping with CLOCK_MONOTONIC's rate over the last
 * interval (NTP's frequency changes included). Where the old mapping fell behind, the new one
 * starts on CLOCK_MONOTONIC; where it ran ahead, the new one continues from where it ended and runs
 * up to 500 ppm slow until CLOCK_MONOTONIC catches up; an error beyond 100 µs (suspend, a counter
 * jump) is stepped. The error against clock_gettime(CLOCK_MONOTONIC) is therefore at most what
 * the rate can drift in 10 ms plus what is left of an earlier lead (< 100 µs), in practice a few
 * ns (lk_clock_info() reports the error seen at each resync). Each thread's own readings
 * never go back; two threads' readings may be out of order by a few ns across a resync, and by the
 * stepped amount after a step.
 *
 * Falls back to clock_gettime(CLOCK_MONOTONIC) (vDSO) where the counter has no constant rate or
 * the kernel's clocksource is not the counter (the kernel does not trust it), and with
 * LOWKEY_CLOCK_NOW=vdso.
 *
 * Cost: one counter read and a few loads, no vDSO call; three vDSO clock_gettime() brackets once
 * per 10 ms for the resync. Async-signal-safe. Never fails.
 */
LK_API uint64_t lk_now_ns(void);

/*
 * lk_cycles - the raw cycle counter (x86: rdtsc; arm64: cntvct_el0); 0 where there is none.
 * Not serializing. lk_clock_info().tsc_hz gives its frequency. Async-signal-safe.
 */
LK_API uint64_t lk_cycles(void);

enum lk_cputime_method {
	LK_CPUTIME_SYSCALL = 0, /* clock_gettime(CLOCK_THREAD_CPUTIME_ID) on every call */
	LK_CPUTIME_PAGE = 1,	/* task-clock page + cycle counter (cap_user_time) */
	LK_CPUTIME_SEQ = 2,	/* page seqcount + per-thread base */
};

enum lk_now_method {
	LK_NOW_VDSO = 0, /* clock_gettime(CLOCK_MONOTONIC) */
	LK_NOW_TSC = 1,	 /* cycle counter, calibrated */
};

struct lk_clock_info {
	/* Thread CPU time, for the process: the method new threads use, and why. */
	enum lk_cputime_method cputime;
	const char *cputime_name; /* "page", "seq" or "syscall" */
	char cputime_reason[512]; /* which step failed, and what to change */
	/* The calling thread's method: differs when this thread's own set-up failed (EMFILE). */
	enum lk_cputime_method thread_cputime;
	const char *thread_cputime_name;
	char thread_reason[256];
	int perf_errno;	    /* perf_event_open's errno when it failed, else 0 */
	bool cap_user_time; /* the perf page converts the counter to time */

	/* lk_now_ns(). */
	enum lk_now_method now;
	const char *now_name; /* "tsc" or "vdso" */
	char now_reason[256];

	/* The cycle counter. */
	bool counter_usable;	   /* present and constant-rate */
	const char *counter_name;  /* "TSC", "CNTVCT", or "none" */
	uint64_t tsc_hz;	   /* its frequency, 0 if unknown */
	const char *tsc_hz_source; /* how tsc_hz was found (static string) */

	uint64_t rebase_ns; /* longest a CPU-time base is used */
	uint64_t resync_ns; /* lk_now_ns() steers to CLOCK_MONOTONIC this often */
	char env_note[192]; /* environment values that were ignored, "" if none */

	/* Counters since the process started, all threads. */
	uint64_t threads_set_up;	/* threads that mapped a task-clock page */
	uint64_t thread_setup_failures; /* threads whose set-up failed (they use syscall) */
	uint64_t rebases_switch;	/* bases retaken because the thread was switched */
	uint64_t rebases_age;		/* bases retaken because they reached rebase_ns */
	uint64_t rebase_retries;	/* switched or interrupted during a rebase: tried again */
	uint64_t syscall_reads;		/* calls of a fast-path thread that the system
						   call answered (rebase gave up, nested) */
	uint64_t pages_reopened;	/* pages that stopped following their thread
						   (prctl(PR_TASK_PERF_EVENTS_DISABLE)), replaced */
	uint64_t now_resyncs;		/* lk_now_ns() resynchronizations */
	uint64_t now_steps;		/* ... that stepped instead of slewing */
	int64_t now_last_error_ns;	/* CLOCK_MONOTONIC - lk_now_ns() at the last resync */
	uint64_t now_max_error_ns;	/* largest |error| seen at a resync */
};

/*
 * lk_clock_info - which methods are in use, why, and how the cycle counter was calibrated.
 * Sets the calling thread up first (like a first lk_thread_cputime_ns()), so thread_cputime is
 * what this thread uses.
 *
 * Returns 0, or -EINVAL if info is NULL. Not async-signal-safe: to explain a perf_event_open
 * failure it may open a perf event again and read /proc. Costs tens of µs.
 */
LK__SAME_NAME_BEGIN
LK_API int lk_clock_info(struct lk_clock_info *info);
LK__SAME_NAME_END

LK_END_DECLS

#endif
