/* SPDX-License-Identifier: MIT */
/*
 * Watchpoints: the CPU's debug address registers on your own memory, with a callback.
 *
 *	static long balance;
 *
 *	static void on_write(const struct lk_watch_hit *hit, void *arg)
 *	{
 *		// in the SIGTRAP handler of the thread that wrote, just after the write
 *		record(hit->tid, hit->ip, hit->value);
 *	}
 *
 *	struct lk_watch *w;
 *	int err = lk_watch_add(&w, &balance, sizeof(balance), LK_WATCH_WRITE | LK_WATCH_PROCESS,
 *			       on_write, NULL);
 *	...
 *	lk_watch_remove(w);
 *
 * Each watchpoint is a perf breakpoint event with `sigtrap` (Linux >= 5.13): the access raises a
 * synchronous SIGTRAP in the thread that made it, which lowkey's dispatcher (shared with static
 * keys, and chained to the handler the application had) turns into the callback. No other thread
 * stops, nothing is single-stepped, and code runs at full speed until it touches the watched bytes.
 *
 * Slots. A thread has a fixed number of debug address registers (4 on x86-64), shared by data and
 * execute watchpoints (arm64 has 2 to 16 watchpoint registers, as the CPU says). A LK_WATCH_THREAD watchpoint takes one in its thread; a LK_WATCH_PROCESS
 * watchpoint takes one in every thread, present and future. lowkey keeps the same count the kernel
 * keeps, so lk_watch_add() says exactly what is full (-ENOSPC) and what is malformed (-EINVAL)
 * before it asks the kernel. Thread-scope adds and removes take only their thread's lock and the
 * process-wide count as a reader (a per-CPU reader-writer lock), so threads never wait for each
 * other; process-scope adds and removes take it as the writer.
 *
 * Lengths (x86-64): 1, 2, 4 or 8 bytes at an address that is a multiple of the length; AMD CPUs
 * with the breakpoint address-mask extension (BPEXT) also take larger powers of two. An execute
 * watchpoint takes len 1 at the instruction's first byte. arm64: 1 to 8 bytes inside one aligned
 * 8-byte doubleword, execute at a 4-byte-aligned address; only samplers (below) there, as the
 * kernel's step over the access goes wrong when the watchpoint signals (lk_watch_add() returns
 * -EOPNOTSUPP, saying so). Other architectures: -EOPNOTSUPP. Data watchpoints fire on accesses by
 * user code only: the kernel writing into watched memory (read(2) into a buffer) does not fire.
 *
 * Threads: a thread's watchpoints end with it (its fds are closed when it exits; the handle stays
 * valid until lk_watch_remove()). exec() removes every watchpoint (remove_on_exec); a fork()ed
 * child has none: its handles are inert and lk_watch_remove() only frees them there.
 */
#ifndef LOWKEY_WATCH_H
#define LOWKEY_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <lowkey/bits/compiler.h>

LK_BEGIN_DECLS

/* What to watch: exactly one of these. */
#define LK_WATCH_WRITE 0x001u	  /* stores to the bytes */
#define LK_WATCH_READWRITE 0x002u /* loads and stores (x86 has no load-only watchpoint) */
#define LK_WATCH_EXEC 0x004u	  /* executing the instruction at addr (len 1) */

/* Where: LK_WATCH_THREAD (the default, 0) or LK_WATCH_PROCESS. */
#define LK_WATCH_THREAD 0x000u	/* the calling thread only */
#define LK_WATCH_PROCESS 0x010u /* every thread, those that exist and those created later */

/* How the callback runs (default: in the signal handler of the thread that made the access). */
#define LK_WATCH_DEFERRED 0x100u /* on lowkey's delivery thread, through a bounded queue */
#define LK_WATCH_DISABLED 0x200u /* start disabled (the slot is taken); lk_watch_enable() */

/* Hits the deferred queue holds; more waiting than this are dropped and counted. */
#define LK_WATCH_QUEUE_LEN 4096

struct lk_watch;

struct lk_watch_hit {
	struct lk_watch *watch;
	const void *addr;    /* the watched address (the start of the range) */
	size_t len;	     /* the watched length */
	const void *ip;	     /* the instruction pointer after the access; for LK_WATCH_EXEC, the
				 * instruction about to run */
	pid_t tid;	     /* the thread that made the access */
	unsigned int access; /* LK_WATCH_WRITE, LK_WATCH_READWRITE or LK_WATCH_EXEC */
	bool has_value;	     /* value holds the watched bytes just after the access */
	bool late;	     /* the thread had SIGTRAP blocked: the signal came when it unblocked
				 * it, and ip is where that happened, not the access */
	uint64_t value;	     /* LK_WATCH_WRITE of 1..8 bytes: the bytes after the write,
				 * zero-extended (as the CPU loads them: little-endian on x86) */
	uint64_t time_ns;    /* CLOCK_MONOTONIC when lowkey caught the hit */
	void *context;	     /* the signal's ucontext_t (registers) in the handler; NULL when
				 * deferred */
};

/*
 * A callback. By default it runs inside the SIGTRAP handler of the thread that made the access,
 * before that thread runs its next instruction. There it may only do what a signal handler may:
 *   - read the hit and its own data; atomics (__atomic_*, <stdatomic.h>) and lock-free structures;
 *   - async-signal-safe functions (write(2), clock_gettime, sem_post, the ones in signal-safety(7));
 *   - lowkey's lk_watch_stats(), lk_branch_*() sites, and lk_strerror();
 * and must not: malloc/free, printf, take a mutex the interrupted code may hold, call any other
 * lowkey function (lk_watch_add/remove/move take locks), or longjmp out.
 * Accesses the callback itself makes to watched memory (a READWRITE watchpoint read in its own
 * callback) do not call it again: they are counted as ignored.
 * With LK_WATCH_DEFERRED it runs on lowkey's delivery thread, one hit at a time in the order they
 * were queued, and may do anything, lk_watch_remove() of its own watchpoint included.
 */
typedef void (*lk_watch_fn)(const struct lk_watch_hit *hit, void *arg);

/*
 * lk_watch_add - watch len bytes at addr.
 * @out:   receives the handle.
 * @flags: one access (LK_WATCH_WRITE, LK_WATCH_READWRITE, LK_WATCH_EXEC), optionally
 *         LK_WATCH_PROCESS (default: the calling thread), LK_WATCH_DEFERRED, LK_WATCH_DISABLED.
 * @fn:    the callback, or NULL to only count hits (lk_watch_stats()).
 *
 * Cost: one perf_event_open() for a thread-scope watchpoint, plus a sigaction() to make sure
 * lowkey's SIGTRAP dispatcher is still installed; no global lock. A process-scope watchpoint costs
 * one perf_event_open() per thread alive, takes the process-wide slot state as the writer, and
 * reads /proc/self/task. Threads created later inherit it in the kernel at no cost to lowkey.
 * Not async-signal-safe.
 *
 * Returns 0, or:
 *   -EINVAL      flags name no access or several, or unknown bits; len or addr alignment not
 *                what this CPU accepts (the message lists what it does); a kernel address; out
 *                NULL. Checked before any system call.
 *   -ENOSPC      no free debug register: the message says how many the thread (or, for
 *                LK_WATCH_PROCESS, the fullest thread) uses for thread-scope and for process-scope
 *                watchpoints; or the kernel refused although lowkey's count had room (a debugger or
 *                another perf user holds registers; the message says so).
 *   -EOPNOTSUPP  the kernel has no perf `sigtrap` (Linux < 5.13), or no hardware breakpoints, or
 *                the architecture cannot signal a watchpoint (arm64: the message says why).
 *   -EACCES, -EPERM  perf_event_open() denied: the message names the sysctl
 *                (kernel.perf_event_paranoid), the capability (CAP_PERFMON) or the seccomp filter.
 *   -EMFILE      out of file descriptors; -ENOMEM out of memory; -EAGAIN the delivery thread
 *                could not be started.
 *   -EDEADLK     called from a callback running in the signal handler.
 */
LK_API int lk_watch_add(struct lk_watch **out, const void *addr, size_t len, unsigned int flags,
			lk_watch_fn fn, void *arg);

/*
 * lk_watch_remove - stop watching and free w. When it returns the callback is not running and
 * will not run again (a signal still in flight is swallowed), so arg may be freed. Any thread may
 * remove any watchpoint; a deferred callback may remove its own. Must not be called from a
 * signal handler (a callback in the handler included): it waits for callbacks in flight.
 * Cost: one close() per fd (one for thread scope), plus a wait for callbacks running elsewhere.
 * Returns 0, -EINVAL for NULL, or -EDEADLK from a callback running in the signal handler.
 */
LK_API int lk_watch_remove(struct lk_watch *w);

/*
 * lk_watch_move - watch len bytes at addr instead, keeping the slot and the handle
 * (PERF_EVENT_IOC_MODIFY_ATTRIBUTES on the open event, inherited copies in other threads included):
 * for tools that watch many addresses in turn. A hit racing with the move reports the address the
 * CPU matched. Cost: one ioctl() per fd. Not async-signal-safe.
 * Returns 0, or -EINVAL (NULL w, bad len/alignment as for lk_watch_add(), checked first),
 * -ESRCH (the watchpoint's thread has exited, or this is a fork()ed child's inert handle),
 * -EOPNOTSUPP (kernel before 4.17, which cannot modify a breakpoint).
 */
LK_API int lk_watch_move(struct lk_watch *w, const void *addr, size_t len);

/*
 * lk_watch_enable / lk_watch_disable - resume / pause a watchpoint. A paused watchpoint keeps its
 * slot (as in the kernel). Cost: one ioctl() per fd; the kernel's own work grows with the number
 * of threads holding an inherited copy. Returns 0, -EINVAL for NULL, -ESRCH as lk_watch_move().
 */
LK_API int lk_watch_enable(struct lk_watch *w);
LK_API int lk_watch_disable(struct lk_watch *w);

struct lk_watch_stats {
	uint64_t hits;	       /* accesses caught */
	uint64_t delivered;    /* callbacks run (or hits counted when fn is NULL) */
	uint64_t dropped;      /* deferred hits lost because the queue was full */
	uint64_t ignored;      /* accesses made by a callback itself (same thread, nested) or by
				 * lowkey's delivery thread, not reported */
	uint64_t unattributed; /* process-wide only: debug traps that came without saying which
				 * breakpoint fired (some hypervisors lose the CPU's DR6 bits under
				 * load); each is most likely one hit of some watchpoint, lost.
				 * lowkey swallows them so they do not kill the program. */
};

/*
 * lk_watch_stats - w's counters, or with w NULL the whole process's since it started. For a
 * deferred watchpoint hits == delivered + dropped + (queued) + (discarded after removal). An
 * access is normally one hit; see unattributed for the exception.
 * Relaxed atomic loads: async-signal-safe. Returns 0, or -EINVAL for a NULL out.
 */
LK__SAME_NAME_BEGIN
LK_API int lk_watch_stats(const struct lk_watch *w, struct lk_watch_stats *out);
LK__SAME_NAME_END

/*
 * lk_watch_counted - the accesses the kernel itself counted for w: the counts of its perf events
 * (process scope: of every thread it was opened in, with the copies their children inherited).
 * Each one reached lowkey's handler as a hit or an ignored access (hits + ignored == counted), so
 * fewer than the accesses made means the CPU never raised them: a machine that drops debug traps
 * (docs/watch.md), or a thread the watchpoint does not cover. A trap counted in unattributed is
 * not in it. Costs one read(2) per event; not async-signal-safe. Returns 0 and sets *count;
 * -EINVAL (NULL argument), -ESRCH (a thread-scope watchpoint whose thread exited, or a fork()ed
 * copy), or a read's -errno.
 */
LK_API int lk_watch_counted(struct lk_watch *w, uint64_t *count);

/*
 * lk_watch_sync - wait until every deferred hit queued before the call has been delivered (or
 * discarded because its watchpoint was removed). Returns 0 at once when nothing is queued, or
 * -EDEADLK from a deferred callback (the delivery thread cannot wait for itself). Not
 * async-signal-safe.
 */
LK_API int lk_watch_sync(void);

struct lk_watch_slots {
	unsigned int total;	 /* debug address registers a thread has (4 on x86-64) */
	unsigned int thread;	 /* used by the calling thread's thread-scope watchpoints */
	unsigned int process;	 /* used in every thread by process-scope watchpoints */
	unsigned int max_thread; /* the most any thread uses for thread-scope watchpoints */
};

/*
 * lk_watch_slots - lowkey's count for the calling thread and the process. Others (a debugger, a
 * perf user) may hold registers lowkey does not see. Takes the calling thread's lock and the
 * process-wide state as the writer (to read every thread's count): for tools, not hot paths.
 * Returns 0, or -EINVAL for NULL.
 */
LK__SAME_NAME_BEGIN
LK_API int lk_watch_slots(struct lk_watch_slots *out);
LK__SAME_NAME_END

/* ---- watching another process (what `lowkey watch -p PID` uses) ---- */

/*
 * A sampler watches memory in another process (or this one) without sending it any signal: each
 * access is recorded by the kernel in a ring buffer per CPU, which lk_watch_sampler_read() drains.
 * It follows every thread of the process, those created later included (inherited events).
 */
struct lk_watch_sampler;

struct lk_watch_sample {
	uint64_t time_ns; /* CLOCK_MONOTONIC of the access */
	pid_t pid, tid;
	uint64_t ip;	/* instruction pointer after the access (as for lk_watch_hit); on
				 * arm64 the accessing instruction itself (its watchpoints fire
				 * before the access) */
	uint64_t addr;	/* the watched address */
	bool has_value; /* value read from the process when lowkey read the sample: the
				 * bytes after the access unless the process wrote them again since */
	uint64_t value;
};

typedef void (*lk_watch_sample_fn)(const struct lk_watch_sample *sample, void *arg);

/*
 * lk_watch_sampler_open - watch len bytes at addr in process pid (its threads that exist now and
 * those they create). flags: one access (LK_WATCH_WRITE, LK_WATCH_READWRITE, LK_WATCH_EXEC).
 * Cost: one perf_event_open() per thread and CPU, one ring buffer (up to 33 pages) per CPU.
 * Returns 0, or -EINVAL (as lk_watch_add()), -ESRCH (no such process), -EACCES/-EPERM (perf
 * denied: the message names the sysctl, capability or seccomp filter; another user's process
 * needs the rights to ptrace it, CAP_SYS_PTRACE), -ENOSPC (a thread of pid has no free debug
 * register), -EOPNOTSUPP (no hardware breakpoints), -EMFILE, -ENOMEM.
 */
LK_API int lk_watch_sampler_open(struct lk_watch_sampler **out, pid_t pid, uint64_t addr,
				 size_t len, unsigned int flags);

/*
 * lk_watch_sampler_read - wait up to timeout_ms (-1: no limit) for samples and pass each to fn in
 * time order per CPU. Returns the number of samples passed (0 on timeout), -ESRCH once the process
 * has exited and every sample has been passed, -EINTR when a signal interrupted the wait, or
 * -EINVAL. Not thread-safe for one sampler.
 */
LK_API int lk_watch_sampler_read(struct lk_watch_sampler *s, int timeout_ms, lk_watch_sample_fn fn,
				 void *arg);

/* lk_watch_sampler_lost - samples the kernel lost because a ring buffer was full. */
LK_API uint64_t lk_watch_sampler_lost(const struct lk_watch_sampler *s);

/*
 * lk_watch_sampler_stop - stop recording: no access is recorded once this returns (in any thread),
 * and what was recorded before can still be read. Costs one ioctl(2) per event; not
 * async-signal-safe. Returns 0, -EINVAL for NULL, or an ioctl's -errno.
 */
LK_API int lk_watch_sampler_stop(struct lk_watch_sampler *s);

/*
 * lk_watch_sampler_counted - the accesses the kernel has counted so far in every watched thread,
 * those that exited included. Every counted access is either a sample lk_watch_sampler_read()
 * passes on or one lk_watch_sampler_lost() counts, so a larger figure than their sum means the
 * kernel dropped samples without saying so. Costs one read(2) per event (threads x CPUs); not
 * async-signal-safe. Returns 0 and sets *count; -EINVAL for a NULL argument, or a read's -errno.
 */
LK_API int lk_watch_sampler_counted(const struct lk_watch_sampler *s, uint64_t *count);

/* lk_watch_sampler_close - stop and free s. NULL is ignored. */
LK_API void lk_watch_sampler_close(struct lk_watch_sampler *s);

LK_END_DECLS

#endif
