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
 * buffer: a cycle-counter timestamp, the site's id, the arguments (and the thread's CPU time when the trace
 * asks for it); a consumer thread drains the buffers into the trace. A full buffer drops events and
 * counts them; the count is in the trace and in lk_trace_stats().
 *
 * Arguments: up to 8, each a signed or unsigned integer, a float or double, a string (char *,
 * const char *, or a char array: copied, up to LK_PROBE_STRING_MAX bytes), or any other pointer
 * (recorded as its address). Types are found at compile time. Strings and pointers may be NULL.
 *
 * A trace is written in one of three formats (lk_trace_config.format): a CTF 1.8 directory
 * (babeltrace2, Trace Compass, the LTTng tools read it), a Chrome Trace Event JSON file
 * (chrome://tracing, the Perfetto UI), or a Perfetto protobuf trace, .pftrace (the Perfetto UI,
 * trace_processor). `lowkey trace -- cmd` traces a program from the outside; `lowkey report TRACE`
 * summarizes a trace.
 *
 * Providers and events are identifiers. Any number of LK_PROBEs may share a line; LK_SPAN, one per line.
 */
#ifndef LOWKEY_PROBE_H
#define LOWKEY_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <lowkey/bits/compiler.h>
#include <lowkey/key.h>

LK_BEGIN_DECLS

/* ---- sites ---- */

enum lk_probe_kind {
	LK_PROBE_EVENT = 1,	 /* LK_PROBE: an instant */
	LK_PROBE_SPAN_BEGIN = 2, /* LK_SPAN, LK_SPAN_BEGIN */
	LK_PROBE_SPAN_END = 3,	 /* the end of LK_SPAN's scope, LK_SPAN_END */
	LK_PROBE_COUNTER = 4,	 /* LK_COUNTER: a value track */
};

enum lk_probe_type {
	LK_PROBE_I64 = 1, /* any signed integer, widened */
	LK_PROBE_U64 = 2, /* any unsigned integer or _Bool, widened */
	LK_PROBE_F64 = 3, /* float or double */
	LK_PROBE_STR = 4, /* char *, const char *, char arrays: copied */
	LK_PROBE_PTR = 5, /* any other pointer: its address */
};

#define LK_PROBE_MAX_ARGS 8
#define LK_PROBE_STRING_MAX 1024 /* longer strings are truncated */

/* What a site is; the library owns everything but the static fields. */
struct lk_probe_site {
	struct lk_key_false key; /* on while the site records */
	uint32_t magic;
	uint16_t abi;
	uint8_t kind; /* enum lk_probe_kind */
	uint8_t nargs;
	uint32_t arg_types; /* enum lk_probe_type, 4 bits per argument, first in the low bits */
	uint32_t line;
	uint32_t id; /* the event id in traces, given when the site registers */
	uint32_t flags;
	const char *provider;
	const char *event;
	const char *file;
	const char *arg_names; /* the macro's arguments as written: "db, query, id, rows"
					 * (the registry drops the provider and event) */
	const char *function;  /* __func__ in C; __PRETTY_FUNCTION__ in C++ */
};

/* ---- recording ---- */

/*
 * LK_PROBE(provider, event, args...) - record an event with 0 to 8 arguments.
 * Off: one NOP, arguments not evaluated. On: about the cost of a cycle-counter read and a few
 * stores, no lock, no system call (except, rarely, to wake the consumer or when the thread records
 * its first event). Async-signal-safe, once the thread has recorded an event outside a handler: an event
 * recorded by a signal handler that interrupts another event on the same thread is dropped and
 * counted as lost, never written over it.
 */
#define LK_PROBE(...) LK__PROBE_AT(LK_PROBE_EVENT, #__VA_ARGS__, __VA_ARGS__)

/* LK_COUNTER(provider, name, value) - record a value of a counter track (an integer or double). */
#define LK_COUNTER(provider, name, value) \
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
 * it where a declaration may go, one per line. Off: one NOP here, and at scope exit a test of a
 * register the NOP left at zero. The end is recorded only when the begin was (a begin whose end is dropped
 * because the buffer is full, or cut by lk_trace_stop, stays open). For a USDT tracer the end
 * fires (NAME_end) whenever the begin did (NAME_begin), through a stub of the site's own.
 */
#define LK_SPAN(provider, name) LK__SPAN_AT(__LINE__, provider, name)

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
	const char *object; /* the shared object holding the site; "" for the main program */
	unsigned int id;
	bool enabled;	      /* recording now */
	const char *function; /* the function holding the site: its name in C, its signature with
				 * template arguments in C++ ("T twice(T) [with T = int]"), which tells
				 * a template's instantiations apart */
	bool tracer; /* an outside tracer (bpftrace, perf) holds one of the site's USDT semaphores
		      * at the last read of them (lowkey raises none itself): see below */
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
 *    kernel increments it), before the program starts or while it runs, turns it on when the
 *    library next reads the semaphores: every 50 ms on a thread of its own (the watcher, named
 *    "lowkey-usdt"; see below), at lk_probe_usdt_poll(), whenever rules are applied
 *    (lk_probe_enable, a trace starting or stopping, an object loading), and at each
 *    `lowkey enable` or `lowkey list --pid`. Off again at the first read after the last tracer
 *    detaches, unless a USDT rule or a trace keeps it on.
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
 * The watcher starts when the first object with USDT sites registers (at start-up, or at the
 * dlopen of such a library), with every signal blocked; it sleeps between polls, each a 2-byte
 * load per site copy under the registry lock. LOWKEY_USDT_WATCH=MS in the environment sets its
 * interval (1 .. 3600000 ms), LOWKEY_USDT_WATCH=0 starts none. A fork()ed child of a watching
 * process starts its own (a thread creation in the child, from a pthread_atfork handler).
 * lk_probe_usdt_watch(ms) starts the watcher or sets its interval, or, with 0, stops and joins
 * it; either way no object loaded later starts it again: 0, -EINVAL (over an hour), or
 * pthread_create's error. All: thread-safe, not async-signal-safe.
 */
LK_API int lk_probe_usdt_enable(const char *glob);
LK_API int lk_probe_usdt_disable(const char *glob);
LK_API int lk_probe_usdt_reset_rules(void);
LK_API int lk_probe_usdt_poll(void);
LK_API int lk_probe_usdt_watch(unsigned int interval_ms);

/* ---- tracing ---- */

enum lk_trace_format {
	LK_TRACE_CTF = 0,      /* a CTF 1.8 trace directory */
	LK_TRACE_JSON = 1,     /* a Chrome Trace Event JSON file (written at lk_trace_stop) */
	LK_TRACE_PERFETTO = 2, /* a Perfetto protobuf trace, .pftrace (written while recording) */
};

#define LK_TRACE_CPUTIME 0x1	  /* record each event's thread CPU time (lk_thread_cputime_ns) */
#define LK_TRACE_FIXED_BUFFER 0x2 /* a thread's ring never grows past buffer_size (see below) */
#define LK_TRACE_OVERWRITE \
	0x4 /* flight recorder: keep each thread's newest events, write them
				 * only at lk_trace_snapshot() (see below) */
#define LK_TRACE_SCHED \
	0x8 /* record the threads' context switches: off-CPU time, preempted or
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
	const char *path; /* the directory (CTF) or file (JSON, Perfetto) to write; required */
	enum lk_trace_format format;
	size_t buffer_size;    /* bytes per thread, rounded up to a power of two; 0: 2 MiB */
	unsigned int flags;    /* LK_TRACE_CPUTIME, LK_TRACE_FIXED_BUFFER, LK_TRACE_OVERWRITE,
					 * LK_TRACE_SCHED */
	unsigned int flush_ms; /* longest a written event waits in its buffer; 0: 100 ms */
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
	bool running;	      /* recording: started, not stopped, no output error */
	uint64_t events;      /* written to the trace so far: what the sites recorded (a thread's
				 name and its context switches are records of the trace, not
				 events; `lowkey report` lists them apart) */
	uint64_t lost;	      /* dropped because a thread's buffer was full, or recorded and then
				 * not written because the output failed */
	uint64_t bytes;	      /* written to the output */
	unsigned int threads; /* threads that have recorded */
	int error;	      /* 0, or the output error that stopped the trace */
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
LK_END_DECLS

/* The inline machinery of the sites and the emit path; not API. */
#include <lowkey/bits/probe_site.h>

#endif
