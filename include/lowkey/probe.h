/* SPDX-License-Identifier: MIT */
/*
 * Probes: tracepoints that cost one NOP while off.
 *
 *	LK_PROBE(db, query, id, rows);		// an event with two integer arguments
 *
 *	void handle(struct request *r)
 *	{
 *		LK_SPAN(db, handle);		// a span from here to the end of the scope
 *		LK_COUNTER(db, queue_depth, r->queue->depth);
 *		...
 *	}
 *
 *	lk_probe_enable("db:*");
 *	lk_trace_start(&(struct lk_trace_config){ .path = "trace.ctf" });
 *	...
 *	lk_trace_stop();
 *
 * Every site is guarded by its own static key: while off it is one 5-byte NOP and its arguments are
 * not evaluated. While on, an event is written, unformatted, into the calling thread's ring
 * buffer: a TSC timestamp, the site's id, the arguments (and the thread's CPU time when the trace
 * asks for it); a consumer thread drains the buffers into the trace. A full buffer drops events and
 * counts them; the count is in the trace and in lk_trace_stats().
 *
 * Arguments: up to 8, each a signed or unsigned integer, a float or double, a string (char *,
 * const char *, or a char array: copied, up to LK_PROBE_STRING_MAX bytes), or any other pointer
 * (recorded as its address). Types are found at compile time. Strings and pointers may be NULL.
 *
 * Traces are CTF 1.8 directories (babeltrace2, Trace Compass, the LTTng tools read them) or Chrome
 * Trace Event JSON (Perfetto UI, chrome://tracing). `lowkey trace -- cmd` traces a program from the
 * outside; `lowkey report TRACE` summarizes a trace.
 *
 * Providers and events are identifiers. Any number of LK_PROBEs may share a line; LK_SPAN, one per line.
 */
#ifndef LOWKEY_PROBE_H
#define LOWKEY_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <lowkey/bits/compiler.h>
#include <lowkey/key.h>
#ifdef __cplusplus
#include <type_traits>
#if __cplusplus >= 201703L
#include <string_view>
#endif
#endif

LK_BEGIN_DECLS

/* ---- sites ---- */

enum lk_probe_kind {
	LK_PROBE_EVENT = 1,		/* LK_PROBE: an instant */
	LK_PROBE_SPAN_BEGIN = 2,	/* LK_SPAN, LK_SPAN_BEGIN */
	LK_PROBE_SPAN_END = 3,		/* the end of LK_SPAN's scope, LK_SPAN_END */
	LK_PROBE_COUNTER = 4,		/* LK_COUNTER: a value track */
};

enum lk_probe_type {
	LK_PROBE_I64 = 1,	/* any signed integer, widened */
	LK_PROBE_U64 = 2,	/* any unsigned integer or _Bool, widened */
	LK_PROBE_F64 = 3,	/* float or double */
	LK_PROBE_STR = 4,	/* char *, const char *, char arrays: copied */
	LK_PROBE_PTR = 5,	/* any other pointer: its address */
};

#define LK_PROBE_MAX_ARGS 8
#define LK_PROBE_STRING_MAX 1024	/* longer strings are truncated */

/* What a site is; the library owns everything but the static fields. */
struct lk_probe_site {
	struct lk_key_false key;	/* on while the site records */
	uint32_t magic;
	uint16_t abi;
	uint8_t kind;			/* enum lk_probe_kind */
	uint8_t nargs;
	uint32_t arg_types;		/* enum lk_probe_type, 4 bits per argument, first in the low bits */
	uint32_t line;
	uint32_t id;			/* the event id in traces, given when the site registers */
	uint32_t flags;
	const char *provider;
	const char *event;
	const char *file;
	const char *arg_names;		/* the macro's arguments as written: "db, query, id, rows"
					 * (the registry drops the provider and event) */
	const char *function;		/* __func__ in C; __PRETTY_FUNCTION__ in C++ */
};

#define LK__PROBE_MAGIC 0x6c6b7072u	/* "lkpr" */
#define LK__SITE_TRACER 0x100u	/* flags: on for a USDT tracer (set and read atomically) */
#define LK__PROBE_ABI 3	/* 2: 8-byte record header; 3: string views */

/*
 * An argument type of arg_types only, never of a trace or of lk_probe_info: a C++ string view,
 * passed as the address of this pair and recorded as LK_PROBE_STR (up to its first NUL byte).
 */
#define LK__PROBE_VIEW 6
struct lk__probe_view {
	const char *ptr;
	size_t len;
};

/* ---- enabling, listing ---- */

/*
 * lk_probe_enable / lk_probe_disable - add a rule: sites matching glob record (or stop recording)
 * while a trace runs. glob matches "provider:event" (fnmatch(3)), or the provider alone when it
 * has no ':'. Rules apply in order, the last matching one wins, and they also apply to objects
 * loaded later (dlopen). While a trace runs the matching sites are flipped at once, in one batch.
 *
 * Returns the number of sites loaded now that match glob (0 is not an error: a later dlopen may
 * bring some), or -EINVAL (NULL or empty glob), -ENOMEM, or a key-flipping error (-EPERM where
 * code cannot be rewritten: see lowkey/key.h). Thread-safe; not async-signal-safe. Costs a pass
 * over all sites and, while tracing, one key batch.
 */
LK_API int lk_probe_enable(const char *glob);
LK_API int lk_probe_disable(const char *glob);

/* lk_probe_reset_rules - forget every rule (and, while tracing, turn every site off). */
LK_API int lk_probe_reset_rules(void);

struct lk_probe_info {
	const char *provider;
	const char *event;
	const char *file;
	unsigned int line;
	enum lk_probe_kind kind;
	unsigned int nargs;
	enum lk_probe_type arg_types[LK_PROBE_MAX_ARGS];
	const char *arg_names;
	const char *object;	/* the shared object holding the site; "" for the main program */
	unsigned int id;
	bool enabled;		/* recording now */
	const char *function;	/* the function holding the site: its name in C, its signature with
				 * template arguments in C++ ("T twice(T) [with T = int]"), which tells
				 * a template's instantiations apart */
};

/*
 * lk_probe_list - call fn for every site of every loaded object, in registration order, until it
 * returns non-zero. Returns the number of sites visited, or fn's non-zero value. fn must not call
 * lk_probe_* or lk_trace_* (the registry is locked). Not async-signal-safe.
 */
LK_API int lk_probe_list(int (*fn)(const struct lk_probe_info *info, void *arg), void *arg);

/* lk_probe_type_name - "i64", "u64", "f64", "string", "pointer". */
LK_API const char *lk_probe_type_name(enum lk_probe_type type);

/* ---- USDT: sites for perf, bpftrace and SystemTap ---- */

/*
 * Every site carries an SDT note (provider:event; spans event_begin and event_end, LK_SPAN's end
 * too, which fires while the span is on for a tracer, see docs/probe.md; arguments
 * as 64-bit values, signed integers "-8@REG", others "8@REG": a double as its bits, a string as
 * its address), so `bpftrace -l 'usdt:PROG:*'`, `perf probe -x PROG sdt_PROVIDER:EVENT` and
 * SystemTap see it. Its probe point is on the path that runs only while the site is on, so a
 * tracer sees events once the site is on for it, even while no lowkey trace runs:
 *  - lk_probe_usdt_enable / lk_probe_usdt_disable add a USDT rule (the same globs as
 *    lk_probe_enable; in order, the last matching one wins; objects loaded later too), as
 *    `lowkey enable --pid PID GLOB` / `lowkey disable --pid PID GLOB` do from outside;
 *  - a tracer that attaches with the site's semaphore (bpftrace, `perf record -e sdt_*`: the
 *    kernel increments it) turns it on when the library next reads the semaphores: at
 *    lk_probe_usdt_poll(), whenever rules are applied (lk_probe_enable, a trace starting or
 *    stopping, an object loading), at each `lowkey enable`, and every interval_ms after
 *    lk_probe_usdt_watch(interval_ms) (or LOWKEY_USDT_WATCH=MS in the environment). Off again
 *    at the first read after the last tracer detaches.
 * A site on for a tracer records into a lowkey trace running at the same time, as if a rule
 * had selected it. The sites themselves never read a semaphore: off, a site is one NOP; on for a
 * tracer with no trace running, its arguments are evaluated and the event goes as far as the
 * check that no trace runs (see docs/BENCHMARKS.md). -DLK_NO_SDT builds sites without notes.
 *
 * lk_probe_usdt_enable/disable return the number of loaded sites glob matches, or -EINVAL (NULL
 * or empty glob), -ENOMEM, or a key-flipping error (-EPERM where code cannot be rewritten).
 * lk_probe_usdt_reset_rules forgets every USDT rule: 0 or a key-flipping error.
 * lk_probe_usdt_poll returns how many sites have a tracer attached, or a key-flipping error;
 * it costs a 2-byte load per copy of each site's code, and a key batch when a site changes.
 * lk_probe_usdt_watch(ms) starts (or, with 0, stops and joins) a thread, with every signal
 * blocked, that polls every ms milliseconds: 0, -EINVAL (over an hour), or pthread_create's
 * error. Not inherited by a fork()ed child. All: thread-safe, not async-signal-safe.
 */
LK_API int lk_probe_usdt_enable(const char *glob);
LK_API int lk_probe_usdt_disable(const char *glob);
LK_API int lk_probe_usdt_reset_rules(void);
LK_API int lk_probe_usdt_poll(void);
LK_API int lk_probe_usdt_watch(unsigned int interval_ms);

/* ---- tracing ---- */

enum lk_trace_format {
	LK_TRACE_CTF = 0,	/* a CTF 1.8 trace directory */
	LK_TRACE_JSON = 1,	/* a Chrome Trace Event JSON file (written at lk_trace_stop) */
	LK_TRACE_PERFETTO = 2,	/* a Perfetto protobuf trace, .pftrace (written while recording) */
};

#define LK_TRACE_CPUTIME 0x1	/* record each event's thread CPU time (lk_thread_cputime_ns) */
#define LK_TRACE_FIXED_BUFFER 0x2 /* a thread's ring never grows past buffer_size (see below) */
#define LK_TRACE_OVERWRITE 0x4	/* flight recorder: keep each thread's newest events, write them
				 * only at lk_trace_snapshot() (see below) */
#define LK_TRACE_SCHED 0x8	/* record the threads' context switches: off-CPU time, preempted or
				 * blocked, on the timeline (see below); needs perf_event_open */

/*
 * Each thread records into a ring of buffer_size bytes, resident from its first event. While the
 * consumer thread lags more than half a ring behind (it was descheduled, the disk is slow), the
 * ring grows into a reservation of 8 times that size instead of dropping events, and gives the
 * extra pages back once the consumer has caught up: by default 2 MiB resident, up to 16 MiB
 * during a stall. LK_TRACE_FIXED_BUFFER keeps it at buffer_size; events that find it full are
 * dropped and counted as lost.
 */
struct lk_trace_config {
	const char *path;		/* the directory (CTF) or file (JSON, Perfetto) to write; required */
	enum lk_trace_format format;
	size_t buffer_size;		/* bytes per thread, rounded up to a power of two; 0: 2 MiB */
	unsigned int flags;		/* LK_TRACE_CPUTIME, LK_TRACE_FIXED_BUFFER, LK_TRACE_OVERWRITE,
					 * LK_TRACE_SCHED */
	unsigned int flush_ms;		/* longest a written event waits in its buffer; 0: 100 ms */
};

/*
 * lk_trace_start - start writing a trace and turn on the sites the rules select. The output is
 * created now: a new or empty directory (CTF); a new file, or an existing regular file replaced
 * (JSON, Perfetto), kept open until the trace is written at stop. Never through a symbolic link
 * at path, nor into a file or directory another user owns in a sticky directory (/tmp), unless
 * that user owns the directory too.
 * Errors: -EINVAL (no path, bad format or size), -EBUSY (a trace is already running in this
 * process), -EEXIST (path is in use: not an empty directory, not a regular file), -ELOOP (path is
 * a symbolic link), -EACCES (path is another user's in a sticky directory; or the system's
 * refusal), -errno from creating the output (the message names the path and the system's
 * reason), -ENOMEM, or a key-flipping error. Not async-signal-safe.
 */
LK_API int lk_trace_start(const struct lk_trace_config *config);

/*
 * lk_trace_stop - turn every site off, write out what every thread recorded, and close the
 * trace (for JSON: convert it, which takes time in proportion to its size). Returns 0, -ENOENT
 * if no trace runs, or the first output error met while tracing (-ENOSPC: the disk filled; what
 * was written before stays readable), or else the first error met turning on the sites of an
 * object loaded while tracing (-EPERM where writable code is forbidden, -ENOSYS where
 * membarrier is denied: the trace lacks those sites' events; lk_last_error() names the object
 * and the cause). Not async-signal-safe. fork() waits while another thread starts or stops a
 * trace.
 */
LK_API int lk_trace_stop(void);

struct lk_trace_stats {
	bool running;		/* recording: started, not stopped, no output error */
	uint64_t events;	/* written to the trace so far */
	uint64_t lost;		/* dropped because a thread's buffer was full, or recorded and then
				 * not written because the output failed */
	uint64_t bytes;		/* written to the output */
	unsigned int threads;	/* threads that have recorded */
	int error;		/* 0, or the output error that stopped the trace */
};

/* lk_trace_stats - counters of the running (or last) trace. Thread-safe; takes a lock the trace's
 * consumer thread takes briefly, so not async-signal-safe. Errors: -EINVAL (stats is NULL). */
LK__SAME_NAME_BEGIN
LK_API int lk_trace_stats(struct lk_trace_stats *stats);
LK__SAME_NAME_END

/*
 * Flight recorder. A trace started with LK_TRACE_OVERWRITE writes nothing while it runs: each
 * thread's ring (buffer_size bytes, plus an eighth kept spare; it never grows) keeps the thread's
 * newest events, the oldest overwritten whole, 8 sub-buffers at a time. Recording costs what it
 * costs in a streaming trace. A snapshot writes what the rings hold as a complete trace in the
 * trace's format (CTF; JSON and Perfetto converted from it), consistent per thread: every event
 * whole, each thread's events in order, and each stream's events_discarded counting exactly the
 * events that thread recorded before (and, when it raced the snapshot, between) the ones written
 * -- overwritten, or dropped as in a streaming trace. With LK_TRACE_SCHED each thread also keeps
 * its newest context switches (buffer_size / 8 bytes of them, 16 bytes each, at least 1024), and
 * each snapshot writes them. Threads that exited keep their ring until a snapshot has written it
 * (at most 64 of them). lk_trace_stop() writes nothing more.
 */

/*
 * lk_trace_snapshot - write what the running overwrite-mode trace holds to path: a new or empty
 * directory (CTF) or file (JSON, Perfetto), created or opened at once and written through that
 * descriptor; never through a symbolic link at path, nor into another user's file or directory in
 * a sticky directory (as lk_trace_start). NULL: the trace's own path the first time, then PATH.1,
 * PATH.2, ... (names in use, links and other users' files included, are skipped). Snapshots may be taken as often as wanted; the recording
 * goes on meanwhile (a thread that fills a sub-buffer being written uses the spare one, so it never
 * waits).
 *
 * Costs: the rings' bytes written to the file system (64 MiB of rings in tens of milliseconds, see
 * docs/BENCHMARKS.md), on the calling thread; it takes the trace's lock, so a concurrent
 * lk_trace_start/stop waits for it. Not async-signal-safe (it allocates and takes locks): from a
 * signal handler, call lk_trace_snapshot_request().
 *
 * Returns 0, or -ENOENT (no trace is running), -EINVAL (the running trace streams: it was not
 * started with LK_TRACE_OVERWRITE), -EEXIST (path exists and is not an empty directory or file),
 * -ELOOP (path is a symbolic link), -EACCES (path is another user's in a sticky directory; or the
 * system's refusal, named as such), -errno from creating or writing the output (lk_last_error()
 * names the path and the system's reason).
 */
LK_API int lk_trace_snapshot(const char *path);

/*
 * lk_trace_snapshot_request - ask the trace's own thread to take a snapshot to the next default
 * name (as lk_trace_snapshot(NULL)) as soon as it can. Async-signal-safe: an atomic increment
 * and at most one futex wake-up. Requests that arrive while one is being taken are served by the
 * next one. The first error a requested snapshot meets is returned by lk_trace_stop(). Returns 0,
 * or -ENOENT when no overwrite-mode trace runs.
 */
LK_API int lk_trace_snapshot_request(void);

/*
 * lk_trace_snapshot_signal - from now on, signal sig requests a snapshot (as
 * lk_trace_snapshot_request); 0 removes the handler and restores the one there was. A handler that
 * was installed before is called after the request (the default action, such as SIGUSR2's
 * termination, is not taken). Returns 0, or -EINVAL: sig is not a signal, cannot be caught
 * (SIGKILL, SIGSTOP), or is synchronous (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS: the
 * kernel sends it to a thread that faults, and again each time the handler returns, so each
 * fault would take a snapshot). Not async-signal-safe.
 */
LK_API int lk_trace_snapshot_signal(int sig);

/* ---- the control socket: enabling from outside (`lowkey trace --pid`) ---- */

/*
 * lk_control_open - accept commands from `lowkey trace --pid` and `lowkey list --pid` on a Unix
 * socket at $XDG_RUNTIME_DIR/lowkey/PID.sock (or /tmp/lowkey-EUID/PID.sock when XDG_RUNTIME_DIR is
 * unset or not a private directory of this user), in a directory only this user can enter. Only
 * peers with this process's effective uid, or root, are served (SO_PEERCRED); every message is
 * validated, and a bad one is refused and counted, never acted on. A service thread, with every
 * signal blocked, serves the socket. LOWKEY_CONTROL=1 in the environment opens it at start-up.
 * A forked child does not inherit it (it may open its own). See docs/trace.md.
 *
 * Returns 0 (also when already open), or: -ENOTDIR (the directory's place holds a symbolic link
 * or a file), -EPERM (the directory belongs to another user or is open to others),
 * -ENAMETOOLONG, or the -errno of mkdir, socket, bind, listen or thread creation; lk_last_error()
 * names the path and the fix. Costs a directory check, a socket and a thread. Thread-safe; not
 * async-signal-safe.
 */
LK_API int lk_control_open(void);

/*
 * lk_control_close - stop serving: end every connection (removing the rules clients added for
 * their session, and stopping a trace a client started to last only while it is connected), stop
 * the thread, remove the socket. exit() does this too, and also finishes a trace started over the
 * socket. Nothing if not open. Waits for a command in progress. Not async-signal-safe.
 */
LK_API void lk_control_close(void);

/* ---- internals ---- */

/*
 * The calling thread's write position, in initial-exec TLS so the fast path reaches it with one
 * %fs-relative access. All zero until the thread records its first event, which sends that
 * event to the slow path; the slow path allocates the thread's buffer and fills this in.
 */
struct lk__probe_tls {
	/*
	 * Where the next record goes, and where the records end for the consumer: the same place,
	 * since a record is committed before its emit ends and a nested emit never writes.
	 */
	uintptr_t committed;
	uintptr_t fast_end;	/* the fast path may write up to here */
	unsigned int nesting;	/* emits in progress on this thread (signal handlers nest) */
	unsigned int spare;
};

extern __thread struct lk__probe_tls lk__probe_tls __attribute__((tls_model("initial-exec")));

/* Both return whether the event was recorded (false: no trace, or dropped and counted). */
LK_API bool lk__probe_emit_slow(struct lk_probe_site *site, unsigned int n, const uint64_t *vals);

/*
 * Whether a lowkey trace records: while it is false an event that the fast path cannot take (a
 * site on only for a USDT tracer) ends there, without calling the slow path. Written by the
 * registry as it applies rules (true before a trace's sites turn on); read on enabled paths only.
 */
LK_API extern bool lk__probe_recording;

static inline __attribute__((always_inline)) bool lk__probe_no_trace(void)
{
	return LK__UNLIKELY(!__atomic_load_n(&lk__probe_recording, __ATOMIC_RELAXED));
}

static inline __attribute__((always_inline)) uint64_t lk__probe_tsc(void)
{
#if defined(__x86_64__)
	uint32_t lo, hi;

	__asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
	return LK__CAST(uint64_t, hi) << 32 | lo;
#elif defined(__aarch64__)
	uint64_t v;

	__asm__ __volatile__("mrs %0, cntvct_el0" : "=r"(v));
	return v;
#elif defined(__riscv) && __riscv_xlen == 64
	uint64_t v;

	__asm__ __volatile__("rdtime %0" : "=r"(v));	/* the time CSR, as src/clock/arch/counter.h */
	return v;
#else
#error "lowkey probes need a cycle counter for this architecture"
#endif
}

/* A record's header: one u64, the event id in its low 16 bits and the TSC's low 48 bits above
 * (the shift drops the TSC's top bits, no mask needed). The consumer and readers extend the
 * timestamp from the packet's; 48 bits last 34 hours at 2.3 GHz. */
#define LK__PROBE_HEADER 8
#define LK__PROBE_ID_BITS 16
#define LK__PROBE_TSC_BITS 48
#define LK__PROBE_TSC_MASK ((UINT64_C(1) << LK__PROBE_TSC_BITS) - 1)

static inline uint64_t lk__probe_header(uint64_t tsc, uint32_t id)
{
	return tsc << LK__PROBE_ID_BITS | id;
}

/*
 * The fast path for numeric arguments: claim the thread, reserve, stamp, copy, commit, release.
 * The claim (nesting 0 -> 1) is stored before the write position is read, so a signal handler
 * that interrupts this event and records one of its own sees the claim and takes the slow path,
 * which drops and counts its event rather than writing over this one. Anything unusual (no buffer
 * yet, the watermark or the end of the ring reached, CPU time requested, tracing stopped) goes
 * to the slow path too: fast_end routes it there.
 */
static inline __attribute__((always_inline)) bool
lk__probe_emit(struct lk_probe_site *site, unsigned int n, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3,
	       uint64_t a4, uint64_t a5, uint64_t a6, uint64_t a7)
{
	struct lk__probe_tls *t = &lk__probe_tls;
	uint32_t size = LK__PROBE_HEADER + 8 * n;
	unsigned int nested = __atomic_load_n(&t->nesting, __ATOMIC_RELAXED);
	uintptr_t p;

	__atomic_store_n(&t->nesting, nested + 1, __ATOMIC_RELAXED);	/* read by lk_trace_stop */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	p = __atomic_load_n(&t->committed, __ATOMIC_RELAXED);
	if (LK__LIKELY(nested == 0 && p + size <= __atomic_load_n(&t->fast_end, __ATOMIC_RELAXED))) {
		const uint64_t args[8] = { a0, a1, a2, a3, a4, a5, a6, a7 };
		uint64_t head = lk__probe_header(lk__probe_tsc(), site->id);

		memcpy(LK__REINTERPRET(void *, p), &head, 8);
		for (unsigned int i = 0; i < n; i++)	/* n is a constant: unrolled, from registers */
			memcpy(LK__REINTERPRET(void *, p + LK__PROBE_HEADER + 8 * i), &args[i], 8);
		__atomic_store_n(&t->committed, p + size, __ATOMIC_RELEASE);
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		__atomic_store_n(&t->nesting, 0, __ATOMIC_RELAXED);
		return true;
	}
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(&t->nesting, nested, __ATOMIC_RELAXED);
	if (lk__probe_no_trace())
		return false;
	{
		const uint64_t args[8] = { a0, a1, a2, a3, a4, a5, a6, a7 };

		return lk__probe_emit_slow(site, n, args);
	}
}

#define lk__probe_emit0(site) lk__probe_emit((site), 0, 0, 0, 0, 0, 0, 0, 0, 0)

/*
 * Argument counting, in standard C99 and C++11 (no GNU ", ##__VA_ARGS__"): LK__NARGS counts the
 * provider and the event too, 2 to 11 tokens, and picks LK__PROBE_<count>.
 */
#define LK__CAT_(a, b) a##b
#define LK__CAT(a, b) LK__CAT_(a, b)
#define LK__NARGS(...) LK__NARGS_(__VA_ARGS__, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define LK__NARGS_(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, n, ...) n

static inline uint64_t lk__u64_i(int64_t v) { return LK__CAST(uint64_t, v); }
static inline uint64_t lk__u64_u(uint64_t v) { return v; }
static inline uint64_t lk__u64_p(const volatile void *p) { return LK__REINTERPRET(uintptr_t, p); }
static inline uint64_t lk__u64_f(double v)
{
	uint64_t u;

	memcpy(&u, &v, sizeof(u));
	return u;
}

#ifndef __cplusplus
#define LK__ARG_TYPE(x)                                                                       \
	(__extension__ _Generic((x),                                                          \
		_Bool: LK_PROBE_U64, unsigned char: LK_PROBE_U64, unsigned short: LK_PROBE_U64, \
		unsigned int: LK_PROBE_U64, unsigned long: LK_PROBE_U64,                      \
		unsigned long long: LK_PROBE_U64,                                             \
		char: LK_PROBE_I64, signed char: LK_PROBE_I64, short: LK_PROBE_I64,           \
		int: LK_PROBE_I64, long: LK_PROBE_I64, long long: LK_PROBE_I64,               \
		float: LK_PROBE_F64, double: LK_PROBE_F64,                                    \
		char *: LK_PROBE_STR, const char *: LK_PROBE_STR,                             \
		default: LK_PROBE_PTR))
#define LK__ARG_DECL(i, x)                                                                    \
	const uint64_t lk__a##i = (__extension__ _Generic((x),                                \
		_Bool: lk__u64_u, unsigned char: lk__u64_u, unsigned short: lk__u64_u,        \
		unsigned int: lk__u64_u, unsigned long: lk__u64_u, unsigned long long: lk__u64_u, \
		char: lk__u64_i, signed char: lk__u64_i, short: lk__u64_i, int: lk__u64_i,    \
		long: lk__u64_i, long long: lk__u64_i,                                        \
		float: lk__u64_f, double: lk__u64_f,                                          \
		default: lk__u64_p)(x));
#define LK__PROBE_TOO_MANY _Static_assert(0, "a probe takes at most 8 arguments")
#else
} /* extern "C" */
/*
 * What a C++ argument records as: integers, bool and enumerations (as their underlying type) as
 * integers, floating point as f64, char pointers and arrays as strings, whatever converts to
 * std::string_view (std::string too) as a string, any other pointer as its address.
 */
template <typename T, bool = std::is_enum<T>::value> struct lk__int_of { typedef T type; };
template <typename T> struct lk__int_of<T, true> { typedef typename std::underlying_type<T>::type type; };

/* Whether T has a c_str() returning a char pointer (std::string and its kind). */
template <typename T> struct lk__has_c_str {
	template <typename U> static char test(decltype(static_cast<const char *>(static_cast<const U *>(nullptr)->c_str())));
	template <typename U> static long test(...);
	static constexpr bool value = sizeof(test<T>(nullptr)) == 1;
};

/* How an argument is converted: its lk_probe_type, or one of these (recorded as strings). */
#define LK__ARG_C_STR 7	/* an object with c_str() */

template <typename T> struct lk__arg_kind {
	typedef typename std::decay<T>::type D;
	typedef typename lk__int_of<D>::type I;
	static constexpr bool is_cstr = std::is_same<D, char *>::value || std::is_same<D, const char *>::value;
	static constexpr bool is_object = !std::is_pointer<D>::value && !std::is_same<D, std::nullptr_t>::value;
#if __cplusplus >= 201703L
	static constexpr bool is_view = is_object && std::is_convertible<const D &, std::string_view>::value;
#else
	static constexpr bool is_view = false;
#endif
	static constexpr int how =
		std::is_same<I, char>::value ? LK_PROBE_I64 :
		std::is_integral<I>::value ? (std::is_signed<I>::value ? LK_PROBE_I64 : LK_PROBE_U64) :
		std::is_floating_point<D>::value ? LK_PROBE_F64 :
		is_cstr ? LK_PROBE_STR :
		is_view ? LK__PROBE_VIEW :
		is_object && lk__has_c_str<D>::value ? LK__ARG_C_STR :
		std::is_pointer<D>::value || std::is_same<D, std::nullptr_t>::value ? LK_PROBE_PTR : 0;
	static constexpr int type = how == LK__ARG_C_STR ? LK_PROBE_STR : how;
	static_assert(how != 0, "a lowkey probe argument is an integer, bool, enum, float, double, string "
				"(char pointer or array, std::string_view, std::string) or pointer");
};

template <int Type> struct lk__arg_tag {};

template <typename T> inline uint64_t lk__arg_value(T v, struct lk__probe_view &, lk__arg_tag<LK_PROBE_I64>)
{
	return static_cast<uint64_t>(static_cast<int64_t>(v));
}
template <typename T> inline uint64_t lk__arg_value(T v, struct lk__probe_view &, lk__arg_tag<LK_PROBE_U64>)
{
	return static_cast<uint64_t>(v);
}
template <typename T> inline uint64_t lk__arg_value(T v, struct lk__probe_view &, lk__arg_tag<LK_PROBE_F64>)
{
	return lk__u64_f(static_cast<double>(v));
}
template <typename T> inline uint64_t lk__arg_value(T v, struct lk__probe_view &, lk__arg_tag<LK_PROBE_STR>)
{
	return reinterpret_cast<uintptr_t>(static_cast<const char *>(v));
}
template <typename T> inline uint64_t lk__arg_value(T v, struct lk__probe_view &, lk__arg_tag<LK_PROBE_PTR>)
{
	return reinterpret_cast<uintptr_t>(v);
}
inline uint64_t lk__arg_value(std::nullptr_t, struct lk__probe_view &, lk__arg_tag<LK_PROBE_PTR>)
{
	return 0;
}
template <typename T> inline uint64_t lk__arg_value(const T &v, struct lk__probe_view &, lk__arg_tag<LK__ARG_C_STR>)
{
	return reinterpret_cast<uintptr_t>(static_cast<const char *>(v.c_str()));
}
#if __cplusplus >= 201703L
/* Scalars go by value (a reference would keep the caller's variable in memory, on the hot path too).
 * The view lives in the caller's block until the event is recorded. */
template <typename T> inline uint64_t lk__arg_value(const T &v, struct lk__probe_view &view, lk__arg_tag<LK__PROBE_VIEW>)
{
	std::string_view sv(v);

	view.ptr = sv.data();
	view.len = sv.size();
	return reinterpret_cast<uintptr_t>(&view);
}
#endif

#define LK__ARG_TYPE(x) (lk__arg_kind<decltype((x))>::type)
/*
 * The argument is bound to a reference first: a temporary (std::string(s), a returned view) then
 * lives to the end of the probe's block, past the copy of its bytes into the record.
 */
#define LK__ARG_DECL(i, x)                                                                    \
	auto &&lk__ref##i = (x);                                                              \
	struct lk__probe_view lk__view##i;                                                    \
	const uint64_t lk__a##i = lk__arg_value(lk__ref##i, lk__view##i, lk__arg_tag<lk__arg_kind<decltype((x))>::how>()); \
	LK__SDT_DECL(i, lk__arg_kind<decltype((x))>::how)
#define LK__PROBE_TOO_MANY static_assert(false, "a probe takes at most 8 arguments")

/* What an SDT note shows of an argument: its record value, but a string view's data pointer. */
template <int How> inline uint64_t lk__sdt_value(uint64_t a)
{
	return a;
}
template <> inline uint64_t lk__sdt_value<LK__PROBE_VIEW>(uint64_t a)
{
	return reinterpret_cast<uintptr_t>(reinterpret_cast<const struct lk__probe_view *>(a)->ptr);
}

extern "C" {
#endif

#define LK__TYPE(i, x) (LK__CAST(uint32_t, LK__ARG_TYPE(x)) << (4 * (i)))
#define LK__IS_STRING(types, i) (((types) >> (4 * (i)) & 0xf) == LK_PROBE_STR || ((types) >> (4 * (i)) & 0xf) == LK__PROBE_VIEW)
#define LK__HAS_STRINGS(types)                                                                \
	(LK__IS_STRING(types, 0) || LK__IS_STRING(types, 1) || LK__IS_STRING(types, 2) ||      \
	 LK__IS_STRING(types, 3) || LK__IS_STRING(types, 4) || LK__IS_STRING(types, 5) ||      \
	 LK__IS_STRING(types, 6) || LK__IS_STRING(types, 7))

/*
 * A site is its descriptor (in .data, next to its key), a slot holding the descriptor's address,
 * and an entry in section __lk_probe_sites: the slot's offset from the entry. The entry comes
 * from an asm statement in the function, not a variable's section attribute, which g++ drops in
 * templates; like a key site's entry, it belongs to the function's section group, and is repeated
 * in every copy of the code (the registry counts each descriptor once). The slot must have
 * internal linkage, for its address to be a constant in position-independent code: a static of
 * the function in C, key.h's lk__slot of a class local to the site in C++.
 */
#define LK__PROBE_ENTRY_ASM                                                                   \
	".pushsection __lk_probe_sites, \"aR?\", @progbits\n\t"                               \
	".balign 8\n\t"                                                                       \
	".quad " LK__SYM(0) " - .\n\t"                                                          \
	".popsection"

#ifdef __cplusplus
#define LK__FUNCTION __PRETTY_FUNCTION__
#else
#define LK__FUNCTION __func__
#endif
#define LK__PROBE_DESCRIPTOR(var, provider, event, kind, nargs, types, names)                 \
	static struct lk_probe_site var = {                                                   \
		LK_KEY_INIT_FALSE, LK__PROBE_MAGIC, LK__PROBE_ABI, (kind), (nargs), (types),  \
		__LINE__, 0, 0, #provider, #event, __FILE__, names, LK__FUNCTION              \
	}

#ifndef __cplusplus
#define LK__PROBE_SITE(var, provider, event, kind, nargs, types, names)                       \
	LK__PROBE_DESCRIPTOR(var, provider, event, kind, nargs, types, names);                \
	static struct lk_key *const var##_slot = &var.key.key
#define LK__PROBE_SLOT(var) (&var##_slot)
#define LK__PROBE_ENTRY(var) __asm__ __volatile__(LK__PROBE_ENTRY_ASM : : LK__SYMBOL(&var##_slot))
#define LK__PROBE_ON(var) LK__SITE_EXPECT(lk__branch_slot(&var##_slot, 0, 1), 0)
#else
#define LK__PROBE_SITE(var, provider, event, kind, nargs, types, names)                       \
	LK__PROBE_DESCRIPTOR(var, provider, event, kind, nargs, types, names);                \
	struct var##_tag {                                                                    \
		static constexpr struct lk_key *key() { return &var.key.key; }                \
	}
#define LK__PROBE_SLOT(var) (&lk__slot<var##_tag>::value)
#define LK__PROBE_ENTRY(var) __asm__ __volatile__(LK__PROBE_ENTRY_ASM : : LK__SYMBOL(&lk__slot<var##_tag>::value))
#define LK__PROBE_ON(var) LK__SITE_EXPECT(lk__branch_tag(var##_tag, 0, 1), 0)
#endif

/*
 * USDT: each site also describes itself to perf, bpftrace, SystemTap and other readers of SDT
 * notes. On the path that runs while the site is on, where its arguments are in registers, a
 * `nop` is the probe point; an ELF note (.note.stapsdt, type 3, owner "stapsdt") names it
 * provider:event (spans: event_begin and event_end), gives its address, a semaphore and the
 * arguments' places ("-8@%rax": 8 bytes, signed, in %rax); .stapsdt.base lets a reader find where
 * the object was loaded. The semaphore is a 2-byte counter in .probes that the kernel increments
 * while a uprobe with its ref_ctr_offset is attached; an entry in __lk_probe_sdt (the slot's
 * offset, then the semaphore's) lets the library find the site of each semaphore (see
 * lk_probe_usdt_poll). Every copy of the code has its own note and semaphore, in the function's
 * section group like the other entries. Arguments are their 64-bit record values: integers
 * widened (signed ones -8, others 8), a double's bits, a string's or a pointer's address.
 * -DLK_NO_SDT leaves all this out. The site itself is unchanged: while off, one NOP.
 */
#if !defined(LK_NO_SDT) && (defined(__x86_64__) || defined(__aarch64__) || (defined(__riscv) && __riscv_xlen == 64))
#define LK__SDT 1
#endif

#ifdef LK__SDT
#define LK__SDT_SUFFIX_LK_PROBE_EVENT ""
#define LK__SDT_SUFFIX_LK_PROBE_COUNTER ""
#define LK__SDT_SUFFIX_LK_PROBE_SPAN_BEGIN "_begin"
#define LK__SDT_SUFFIX_LK_PROBE_SPAN_END "_end"

/* Argument i: operand 3 + i; operand 1 is the packed types, operand 2 the count. */
#define LK__SDT_ARG(i, op, sep)                                                               \
	".if " LK__SYM(2) " > " #i "\n\t"                                                     \
	".ascii \"" sep "\"\n\t"                                                              \
	".if ((" LK__SYM(1) " >> (" #i " * 4)) & 15) == 1\n\t"                                \
	".ascii \"-\"\n\t"                                                                    \
	".endif\n\t"                                                                          \
	".ascii \"8@%" #op "\"\n\t"                                                           \
	".endif\n\t"

/*
 * The note of the probe point at label 990, its semaphore and its __lk_probe_sdt entry, whose
 * site is operand slot (an LK__SYM). args: the arguments' places, "" for none.
 */
#define LK__SDT_NOTE(provider, name, args, slot)                                              \
	".pushsection .probes, \"aw?\", @progbits\n\t"                                        \
	".balign 2\n"                                                                          \
	"991: .2byte 0\n\t"                                                                   \
	".popsection\n\t"                                                                     \
	".pushsection .note.stapsdt, \"?\", @note\n\t"                                        \
	".balign 4\n\t"                                                                       \
	".4byte 993f - 992f, 995f - 994f, 3\n"                                                 \
	"992: .asciz \"stapsdt\"\n"                                                            \
	"993: .balign 4\n"                                                                     \
	"994: .8byte 990b, _.stapsdt.base, 991b\n\t"                                          \
	".asciz \"" provider "\"\n\t"                                                         \
	".asciz \"" name "\"\n\t"                                                             \
	args                                                                                  \
	".byte 0\n"                                                                            \
	"995: .balign 4\n\t"                                                                  \
	".popsection\n\t"                                                                     \
	".ifndef _.stapsdt.base\n\t"                                                          \
	".pushsection .stapsdt.base, \"aG\", @progbits, .stapsdt.base, comdat\n\t"           \
	".weak _.stapsdt.base\n\t"                                                            \
	".hidden _.stapsdt.base\n"                                                             \
	"_.stapsdt.base: .space 1\n\t"                                                        \
	".size _.stapsdt.base, 1\n\t"                                                         \
	".popsection\n\t"                                                                     \
	".endif\n\t"                                                                          \
	".pushsection __lk_probe_sdt, \"aR?\", @progbits\n\t"                                 \
	".balign 8\n\t"                                                                       \
	".quad " slot " - .\n\t"                                                              \
	".quad 991b - .\n\t"                                                                  \
	".popsection"

#define LK__SDT_ARGS                                                                          \
	LK__SDT_ARG(0, 3, "") LK__SDT_ARG(1, 4, " ") LK__SDT_ARG(2, 5, " ")                  \
	LK__SDT_ARG(3, 6, " ") LK__SDT_ARG(4, 7, " ") LK__SDT_ARG(5, 8, " ")                 \
	LK__SDT_ARG(6, 9, " ") LK__SDT_ARG(7, 10, " ")

#define LK__SDT_ASM(provider, name) "990: nop\n\t" LK__SDT_NOTE(provider, name, LK__SDT_ARGS, LK__SYM(0))

/*
 * The end of LK_SPAN's scope runs lk__span_close, one function for every span, where no asm can
 * name a site. Its probe point is therefore a stub of the site's own, in the function's section
 * group, called from lk__span_close: `nop` (the probe point), then it returns the end's
 * descriptor, read from the end's slot (operand 2). Operand 0 receives the stub's address (label
 * 988), 4-aligned; operand 1 is the begin's slot, which the end's semaphore turns on (a scoped
 * span is one site for a tracer). An indirect call lands on the stub: it starts with the landing
 * pad the build asks for (x86-64 CET, aarch64 BTI), before the probe point.
 */
#if defined(__x86_64__)
#if defined(__CET__) && (__CET__ & 1)
#define LK__SDT_LANDING "endbr64\n"
#else
#define LK__SDT_LANDING ""
#endif
#define LK__SDT_STUB_CODE                                                                     \
	"990: nop\n\t"                                                                        \
	"movq " LK__SYM(2) "(%%rip), %%rax\n\t"                                               \
	"ret\n\t"
#define LK__SDT_STUB_ADDRESS "leaq 988b(%%rip), %0"
#elif defined(__aarch64__)
#if defined(__ARM_FEATURE_BTI_DEFAULT) && __ARM_FEATURE_BTI_DEFAULT
#define LK__SDT_LANDING "hint 34\n"	/* bti c */
#else
#define LK__SDT_LANDING ""
#endif
#define LK__SDT_STUB_CODE                                                                     \
	"990: nop\n\t"                                                                        \
	"adrp x0, " LK__SYM(2) "\n\t"                                                         \
	"ldr x0, [x0, :lo12:" LK__SYM(2) "]\n\t"                                              \
	"ret\n\t"
#define LK__SDT_STUB_ADDRESS "adrp %0, 988b\n\tadd %0, %0, :lo12:988b"
#else
#define LK__SDT_LANDING ""
#define LK__SDT_STUB_CODE                                                                     \
	"990: nop\n"                                                                           \
	"989: auipc a0, %%pcrel_hi(" LK__SYM(2) ")\n\t"                                       \
	"ld a0, %%pcrel_lo(989b)(a0)\n\t"                                                     \
	"ret\n\t"
#define LK__SDT_STUB_ADDRESS "lla %0, 988b"
#endif
#define LK__SDT_STUB_ASM(provider, name)                                                      \
	".pushsection .text.lk__sdt_stub, \"ax?\", @progbits\n\t"                             \
	".balign 4\n"                                                                          \
	"988:\n"                                                                               \
	LK__SDT_LANDING                                                                       \
	LK__SDT_STUB_CODE                                                                     \
	".popsection\n\t"                                                                     \
	LK__SDT_NOTE(provider, name, "", LK__SYM(1)) "\n\t"                                    \
	LK__SDT_STUB_ADDRESS

/*
 * Operands: used arguments in registers (x86-64 also takes constants, "$5", which its readers
 * parse), unused ones as constants the note never names.
 */
#if defined(__x86_64__)
#define LK__SDT_R(i) "nr"(LK__SDT_VAL(i))
#else
#define LK__SDT_R(i) "r"(LK__SDT_VAL(i))
#endif
#define LK__SDT_Z "n"(0)
#define LK__SDT_OPS_0 LK__SDT_Z, LK__SDT_Z, LK__SDT_Z, LK__SDT_Z, LK__SDT_Z, LK__SDT_Z, LK__SDT_Z, LK__SDT_Z
#define LK__SDT_OPS_1 LK__SDT_R(0), LK__SDT_Z, LK__SDT_Z, LK__SDT_Z, LK__SDT_Z, LK__SDT_Z, LK__SDT_Z, LK__SDT_Z
#define LK__SDT_OPS_2 LK__SDT_R(0), LK__SDT_R(1), LK__SDT_Z, LK__SDT_Z, LK__SDT_Z, LK__SDT_Z, LK__SDT_Z, LK__SDT_Z
#define LK__SDT_OPS_3 LK__SDT_R(0), LK__SDT_R(1), LK__SDT_R(2), LK__SDT_Z, LK__SDT_Z, LK__SDT_Z, LK__SDT_Z, LK__SDT_Z
#define LK__SDT_OPS_4 LK__SDT_R(0), LK__SDT_R(1), LK__SDT_R(2), LK__SDT_R(3), LK__SDT_Z, LK__SDT_Z, LK__SDT_Z, LK__SDT_Z
#define LK__SDT_OPS_5                                                                         \
	LK__SDT_R(0), LK__SDT_R(1), LK__SDT_R(2), LK__SDT_R(3), LK__SDT_R(4), LK__SDT_Z, LK__SDT_Z, LK__SDT_Z
#define LK__SDT_OPS_6                                                                         \
	LK__SDT_R(0), LK__SDT_R(1), LK__SDT_R(2), LK__SDT_R(3), LK__SDT_R(4), LK__SDT_R(5), LK__SDT_Z, LK__SDT_Z
#define LK__SDT_OPS_7                                                                         \
	LK__SDT_R(0), LK__SDT_R(1), LK__SDT_R(2), LK__SDT_R(3), LK__SDT_R(4), LK__SDT_R(5), LK__SDT_R(6), LK__SDT_Z
#define LK__SDT_OPS_8                                                                         \
	LK__SDT_R(0), LK__SDT_R(1), LK__SDT_R(2), LK__SDT_R(3), LK__SDT_R(4), LK__SDT_R(5), LK__SDT_R(6), \
		LK__SDT_R(7)

#ifdef __cplusplus
#define LK__SDT_VAL(i) lk__s##i
#define LK__SDT_DECL(i, how) const uint64_t lk__s##i = lk__sdt_value<how>(lk__a##i);
#else
#define LK__SDT_VAL(i) lk__a##i
#endif
#define LK__PROBE_SDT(var, provider, event, kind, nargs, types)                               \
	__asm__ __volatile__(LK__SDT_ASM(#provider, #event LK__SDT_SUFFIX_##kind)             \
			     : /* no outputs */                                               \
			     : LK__SYMBOL(LK__PROBE_SLOT(var)), "i"(types), "i"(nargs), LK__SDT_OPS_##nargs)
#else
#define LK__SDT_DECL(i, how)
#define LK__PROBE_SDT(var, provider, event, kind, nargs, types) do { } while (0)
#endif

#define LK__ZEROS_0 LK__ZEROS_1 const uint64_t lk__a0 = 0;
#define LK__ZEROS_1 LK__ZEROS_2 const uint64_t lk__a1 = 0;
#define LK__ZEROS_2 LK__ZEROS_3 const uint64_t lk__a2 = 0;
#define LK__ZEROS_3 LK__ZEROS_4 const uint64_t lk__a3 = 0;
#define LK__ZEROS_4 LK__ZEROS_5 const uint64_t lk__a4 = 0;
#define LK__ZEROS_5 LK__ZEROS_6 const uint64_t lk__a5 = 0;
#define LK__ZEROS_6 LK__ZEROS_7 const uint64_t lk__a6 = 0;
#define LK__ZEROS_7 LK__ZEROS_8 const uint64_t lk__a7 = 0;
#define LK__ZEROS_8
#define LK__ARGS8 lk__a0, lk__a1, lk__a2, lk__a3, lk__a4, lk__a5, lk__a6, lk__a7

/*
 * One site with nargs arguments: while on, each argument is converted once into a 64-bit local
 * and the fast path stores them from registers. types is a constant, so the string test folds.
 */
#define LK__PROBE_DO(var, kind, provider, event, nargs, types, names, decls)                  \
	do {                                                                                  \
		LK__PROBE_SITE(var, provider, event, kind, nargs, types, names);              \
		LK__PROBE_ENTRY(var);                                                         \
		if (LK__PROBE_ON(var)) {                                                      \
			decls                                                                 \
			LK__ZEROS_##nargs                                                     \
			LK__PROBE_SDT(var, provider, event, kind, nargs, types);              \
			if (LK__HAS_STRINGS(types)) {                                         \
				const uint64_t lk__vals[8] = { LK__ARGS8 };                   \
				if (!lk__probe_no_trace())                                    \
					lk__probe_emit_slow(&var, nargs, lk__vals);           \
			} else {                                                              \
				lk__probe_emit(&var, nargs, LK__ARGS8);                       \
			}                                                                     \
		}                                                                             \
	} while (0)

/*
 * The site's names must not depend on where the translation unit is (no __COUNTER__): an inline
 * function's static has one name in every unit that defines it, so that all its copies share one
 * descriptor. A probe's block is its own scope, where a fixed name does.
 */
#define LK__PROBE_AT(kind, names, ...)                                                        \
	LK__CAT(LK__PROBE_, LK__NARGS(__VA_ARGS__))(lk__probe_site, kind, names, __VA_ARGS__)
#define LK__PROBE_1(v, k, names, p) LK__PROBE_TOO_MANY /* a provider without an event */
#define LK__PROBE_2(v, k, names, p, e) LK__PROBE_DO(v, k, p, e, 0, 0u, names, )
#define LK__PROBE_3(v, k, names, p, e, a0) LK__PROBE_DO(v, k, p, e, 1, LK__TYPE(0, a0), names, LK__ARG_DECL(0, a0))
#define LK__PROBE_4(v, k, names, p, e, a0, a1)                                                \
	LK__PROBE_DO(v, k, p, e, 2, LK__TYPE(0, a0) | LK__TYPE(1, a1), names,                 \
		     LK__ARG_DECL(0, a0) LK__ARG_DECL(1, a1))
#define LK__PROBE_5(v, k, names, p, e, a0, a1, a2)                                            \
	LK__PROBE_DO(v, k, p, e, 3, LK__TYPE(0, a0) | LK__TYPE(1, a1) | LK__TYPE(2, a2), names, \
		     LK__ARG_DECL(0, a0) LK__ARG_DECL(1, a1) LK__ARG_DECL(2, a2))
#define LK__PROBE_6(v, k, names, p, e, a0, a1, a2, a3)                                        \
	LK__PROBE_DO(v, k, p, e, 4, LK__TYPE(0, a0) | LK__TYPE(1, a1) | LK__TYPE(2, a2) | LK__TYPE(3, a3), \
		     names, LK__ARG_DECL(0, a0) LK__ARG_DECL(1, a1) LK__ARG_DECL(2, a2) LK__ARG_DECL(3, a3))
#define LK__PROBE_7(v, k, names, p, e, a0, a1, a2, a3, a4)                                    \
	LK__PROBE_DO(v, k, p, e, 5,                                                           \
		     LK__TYPE(0, a0) | LK__TYPE(1, a1) | LK__TYPE(2, a2) | LK__TYPE(3, a3) | LK__TYPE(4, a4), \
		     names, LK__ARG_DECL(0, a0) LK__ARG_DECL(1, a1) LK__ARG_DECL(2, a2) LK__ARG_DECL(3, a3) \
		     LK__ARG_DECL(4, a4))
#define LK__PROBE_8(v, k, names, p, e, a0, a1, a2, a3, a4, a5)                                \
	LK__PROBE_DO(v, k, p, e, 6,                                                           \
		     LK__TYPE(0, a0) | LK__TYPE(1, a1) | LK__TYPE(2, a2) | LK__TYPE(3, a3) | LK__TYPE(4, a4) | \
		     LK__TYPE(5, a5),                                                         \
		     names, LK__ARG_DECL(0, a0) LK__ARG_DECL(1, a1) LK__ARG_DECL(2, a2) LK__ARG_DECL(3, a3) \
		     LK__ARG_DECL(4, a4) LK__ARG_DECL(5, a5))
#define LK__PROBE_9(v, k, names, p, e, a0, a1, a2, a3, a4, a5, a6)                            \
	LK__PROBE_DO(v, k, p, e, 7,                                                           \
		     LK__TYPE(0, a0) | LK__TYPE(1, a1) | LK__TYPE(2, a2) | LK__TYPE(3, a3) | LK__TYPE(4, a4) | \
		     LK__TYPE(5, a5) | LK__TYPE(6, a6),                                       \
		     names, LK__ARG_DECL(0, a0) LK__ARG_DECL(1, a1) LK__ARG_DECL(2, a2) LK__ARG_DECL(3, a3) \
		     LK__ARG_DECL(4, a4) LK__ARG_DECL(5, a5) LK__ARG_DECL(6, a6))
#define LK__PROBE_10(v, k, names, p, e, a0, a1, a2, a3, a4, a5, a6, a7)                       \
	LK__PROBE_DO(v, k, p, e, 8,                                                           \
		     LK__TYPE(0, a0) | LK__TYPE(1, a1) | LK__TYPE(2, a2) | LK__TYPE(3, a3) | LK__TYPE(4, a4) | \
		     LK__TYPE(5, a5) | LK__TYPE(6, a6) | LK__TYPE(7, a7),                     \
		     names, LK__ARG_DECL(0, a0) LK__ARG_DECL(1, a1) LK__ARG_DECL(2, a2) LK__ARG_DECL(3, a3) \
		     LK__ARG_DECL(4, a4) LK__ARG_DECL(5, a5) LK__ARG_DECL(6, a6) LK__ARG_DECL(7, a7))
#define LK__PROBE_11(...) LK__PROBE_TOO_MANY

/*
 * LK_PROBE(provider, event, args...) - record an event with 0 to 8 arguments.
 * Off: one NOP, arguments not evaluated. On: about the cost of a TSC read and a few stores, no
 * lock, no system call (except, rarely, to wake the consumer or when the thread records its first
 * event). Async-signal-safe, once the thread has recorded an event outside a handler: an event
 * recorded by a signal handler that interrupts another event on the same thread is dropped and
 * counted as lost, never written over it.
 */
#define LK_PROBE(...) LK__PROBE_AT(LK_PROBE_EVENT, #__VA_ARGS__, __VA_ARGS__)

/* LK_COUNTER(provider, name, value) - record a value of a counter track (an integer or double). */
#define LK_COUNTER(provider, name, value)                                                     \
	LK__PROBE_AT(LK_PROBE_COUNTER, #provider ", " #name ", " #value, provider, name, value)

/*
 * LK_SPAN_BEGIN(provider, name) / LK_SPAN_END(provider, name) - a span that crosses scopes, on one
 * thread; spans nest. Each end is its own site, enabled by the same rules as its begin.
 */
#define LK_SPAN_BEGIN(provider, name) LK__PROBE_AT(LK_PROBE_SPAN_BEGIN, "", provider, name)
#define LK_SPAN_END(provider, name) LK__PROBE_AT(LK_PROBE_SPAN_END, "", provider, name)

/*
 * LK_SPAN(provider, name) - a span from here to the end of the enclosing scope, however the scope
 * is left: return, break, goto, and in C++ an exception unwinding through it. A declaration: use
 * it where a declaration may go, one per line. Off: one NOP here, and at scope exit a test of a register the
 * NOP left at zero. The end is recorded only when the begin was (a begin whose end is dropped
 * because the buffer is full, or cut by lk_trace_stop, stays open). For a USDT tracer the end
 * fires (NAME_end) whenever the begin did (NAME_begin), through a stub of the site's own.
 */
#define LK_SPAN(provider, name) LK__SPAN_AT(__LINE__, provider, name)

/*
 * The guard LK_SPAN leaves for its scope's end: 0 (nothing to do), the end's descriptor (record
 * the end), or, while the span is on for a USDT tracer (LK__SITE_TRACER), the address of the
 * end's SDT stub | LK__SPAN_STUB, and LK__SPAN_RECORDED when the begin was recorded.
 */
#define LK__SPAN_RECORDED 1u
#define LK__SPAN_STUB 2u

static inline void lk__span_close_stub(uintptr_t guard)
{
	typedef struct lk_probe_site *(*lk__sdt_stub)(void);
	struct lk_probe_site *end = LK__REINTERPRET(lk__sdt_stub, guard & ~LK__CAST(uintptr_t, 3))();

	if (guard & LK__SPAN_RECORDED)
		lk__probe_emit0(end);
}

static inline __attribute__((always_inline)) void lk__span_close(uintptr_t *guard)
{
	if (LK__UNLIKELY(*guard != 0)) {
		if (LK__UNLIKELY(*guard & LK__SPAN_STUB))
			lk__span_close_stub(*guard);
		else
			lk__probe_emit0(LK__REINTERPRET(struct lk_probe_site *, *guard));
	}
}

#ifdef LK__SDT
/* The guard of a span on for a tracer: the end's stub, with the begin's outcome. */
#define LK__SPAN_FOR_TRACER(g, begin, end, provider, name)                                    \
	do {                                                                                  \
		if (LK__UNLIKELY(__atomic_load_n(&begin.flags, __ATOMIC_RELAXED) & LK__SITE_TRACER)) { \
			uintptr_t lk__stub;                                                   \
			__asm__ __volatile__(LK__SDT_STUB_ASM(#provider, #name "_end")        \
					     : "=r"(lk__stub)                                 \
					     : LK__SYMBOL(LK__PROBE_SLOT(begin)),             \
					       LK__SYMBOL(LK__PROBE_SLOT(end)));              \
			g = lk__stub | LK__SPAN_STUB | (g ? LK__SPAN_RECORDED : 0u);          \
		}                                                                             \
	} while (0)
#else
#define LK__SPAN_FOR_TRACER(g, begin, end, provider, name) do { } while (0)
#endif

#define LK__SPAN_AT(n, provider, name) LK__SPAN_DO(LK__CAT(lk__span_begin_, n), LK__CAT(lk__span_end_, n), \
						   LK__CAT(lk__span_guard_, n), provider, name)
#define LK__SPAN_DO(begin, end, guard, provider, name)                                        \
	LK__PROBE_SITE(begin, provider, name, LK_PROBE_SPAN_BEGIN, 0, 0u, "");                \
	LK__PROBE_SITE(end, provider, name, LK_PROBE_SPAN_END, 0, 0u, "");                    \
	uintptr_t guard __attribute__((cleanup(lk__span_close), unused)) = __extension__({     \
		uintptr_t lk__g = 0;                                                          \
		LK__PROBE_ENTRY(begin);                                                       \
		LK__PROBE_ENTRY(end);                                                         \
		if (LK__PROBE_ON(begin)) {                                                    \
			LK__PROBE_SDT(begin, provider, name, LK_PROBE_SPAN_BEGIN, 0, 0u);     \
			if (lk__probe_emit0(&begin))                                          \
				lk__g = LK__REINTERPRET(uintptr_t, &end);                     \
			LK__SPAN_FOR_TRACER(lk__g, begin, end, provider, name);               \
		}                                                                             \
		lk__g;                                                                        \
	})

LK_END_DECLS

#endif
