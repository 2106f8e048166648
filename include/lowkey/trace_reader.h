/* SPDX-License-Identifier: MIT */
/*
 * Reading traces: a trace lowkey wrote, in any of its formats, as one stream of events in time
 * order.
 *
 *	struct lk_trace_file *tf;
 *	struct lk_trace_event ev;
 *	int rc = lk_trace_file_open("trace.ctf", &tf);
 *
 *	while (rc == 0 && (rc = lk_trace_file_next(tf, &ev)) == 1)
 *		if (ev.type == LK_TRACE_EV_PROBE && ev.kind == LK_PROBE_SPAN_END && ev.paired)
 *			printf("%s:%s %" PRIu64 " ns\n", ev.provider, ev.name, ev.duration_ns);
 *	lk_trace_file_close(tf);
 *
 * The format is told by content, not by the name: a CTF trace directory, a Perfetto protobuf
 * file (.pftrace) or a Chrome JSON file, as lk_trace_start() writes them (enum lk_trace_format).
 * A CTF directory lowkey's writer did not write -- a lowkey trace babeltrace2 rewrote or cut, an
 * LTTng trace, traces below the directory named -- is read through libbabeltrace2, loaded then
 * (docs/trace.md says what is read of it: threads, times, spans by a name convention, arguments,
 * losses); it is read whole at open, as JSON and Perfetto are, and its times are its clock's ns
 * from the clock's origin (a lowkey trace's: CLOCK_MONOTONIC, as the original's).
 * The events of every thread come merged in time order (ties: by thread id, then in the order the
 * thread recorded them), with what the library makes of them once for every reader:
 *  - spans paired: an end closes the latest open begin of the same provider:name on its thread,
 *    and the spans opened after that begin and still open are dropped with it (`lowkey report`
 *    counts them the same way); an end carries its begin's time and the duration (Perfetto's
 *    slice ends carry no name: there, an end no begin was open for is named "?:?");
 *  - counters decoded into a double, whatever the type recorded;
 *  - context switches (traces recorded with LK_TRACE_SCHED) as events of their own;
 *  - each event's thread name, as soon as the thread's name record is read (see Counts below).
 * The trace's own records of thread names are not events here (JSON and Perfetto give them no
 * time); lk_trace_file_get_info() counts them.
 *
 * Arguments keep their names in every format, and their types in CTF and Perfetto. JSON keeps a
 * number's text only: an integer reads as LK_PROBE_U64, or LK_PROBE_I64 if negative; one with a
 * fraction or an exponent as LK_PROBE_F64; a pointer ("0x...") and a double that is not finite
 * ("NaN") as strings.
 *
 * Times are nanoseconds on the trace's clock: CLOCK_MONOTONIC for CTF (the recording process's
 * clock); for JSON and Perfetto, counted from just before the file's first event (the file's own
 * clock: real time for JSON). Durations are the same in every format, to the format's resolution
 * (1 ns in all three): each converts the cycle counter to ns by the same rule, exactly, rounded
 * down. Two threads' events at the same ns may come in the other order in Perfetto. A thread's
 * events come in the order it recorded them: one timed before the thread's previous event (a CPU
 * whose counter is a hair behind another's) is given that event's time.
 *
 * Cost: a CTF trace is streamed, never held whole: each stream (a thread's events, its context
 * switches) has one packet in memory (256 KiB as lowkey writes them), read with pread when the
 * one before is done, and the events are decoded from it where they lie. lk_trace_file_open()
 * reads the metadata, lists the streams and reads the first packet of each: the file is read
 * once, by lk_trace_file_next(), which decodes one event but its arguments (lk_trace_event_arg()
 * decodes those a reader asks for) and costs O(log streams) (a merge of the streams with a binary
 * heap), and allocates only while spans nest deeper than before, or for a
 * thread's name. A JSON or Perfetto file is read and parsed whole at open (its events in memory,
 * with their arguments' bytes) and merged the same way. A trace of more than 64 CTF streams opens
 * each stream's file only while it reads a packet, so that it needs no more file descriptors than
 * that.
 *
 * Counts: what a CTF trace counts (lk_trace_file_info's events, thread_names, lost and
 * truncated_streams; lk_trace_thread's events, lost and truncated) is known only once every
 * stream is read. They are 0 until they are complete: when lk_trace_file_next() has returned 0
 * (the end), or lk_trace_file_count() has counted them; a JSON or Perfetto trace's are complete
 * at open. What the trace says of itself (format, pid, process name, threads, classes, the flags,
 * tick_hz, sched_lost, dropped, nonfinite_counters) is complete at open. A thread's name is known
 * from its stream's first record (CTF: in the first packet, which open reads): every event has
 * its name but for a thread whose name record comes later in its stream (a thread that renamed
 * itself: its events have the name it had when they were read, the last one once counted).
 *
 * Nothing in a trace is trusted: a file or directory that is not a whole trace lowkey wrote --
 * cut short, damaged at any byte, another program's -- is -EINVAL with a message
 * (lk_last_error()), never a crash. What is not a trace, or a JSON or Perfetto file damaged
 * anywhere, is refused at open; a CTF stream damaged in a packet gives its events before the
 * damage, and lk_trace_file_next() then returns -EINVAL where that stream's next event would be
 * (after its last good one, in time order). A CTF stream cut inside its last packet gives its
 * whole packets (lk_trace_file_get_info().truncated_streams). What is allocated is bounded by the
 * trace's size.
 *
 * Threads: an lk_trace_file is used by one thread at a time; separate ones are independent. None
 * of these functions is async-signal-safe (they allocate).
 */
#ifndef LOWKEY_TRACE_READER_H
#define LOWKEY_TRACE_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <lowkey/error.h>
#include <lowkey/probe.h>

#ifdef __cplusplus
extern "C" {
#endif

struct lk_trace_file; /* opaque */

enum lk_trace_event_type {
	LK_TRACE_EV_PROBE = 1,	    /* a probe's event: see kind */
	LK_TRACE_EV_SWITCH_OUT = 2, /* the thread left its CPU (cpu; preempted or blocked) */
	LK_TRACE_EV_SWITCH_IN = 3,  /* the thread got a CPU again (cpu) */
};

/* An argument of a probe's event, as recorded. */
struct lk_trace_arg {
	const char *name; /* as the site named it ("rows"), or "arg0", "arg1"... */
	enum lk_probe_type type;
	union {
		int64_t i64;	 /* LK_PROBE_I64 */
		uint64_t u64;	 /* LK_PROBE_U64, LK_PROBE_PTR (the address) */
		double f64;	 /* LK_PROBE_F64 */
		const char *str; /* LK_PROBE_STR: NUL-terminated */
	} v;
};

/*
 * One event. Its strings (its arguments', pointing into the packet the event was read from) live
 * until the next lk_trace_file_next(), lk_trace_file_rewind() or lk_trace_file_close() on the
 * same file, unless said otherwise: the stream of the event given moves on only at the next call.
 */
struct lk_trace_event {
	enum lk_trace_event_type type;
	enum lk_probe_kind kind; /* LK_TRACE_EV_PROBE: instant, span begin or end, counter */
	uint64_t seq;		 /* its position in the file's order: 0, 1, 2... */
	int tid;
	unsigned int thread;	     /* its thread's index (lk_trace_file_thread) */
	const char *thread_name;     /* the thread's name, "" if the trace has none; lives as
					 * long as the file is open */
	uint64_t ns;		     /* when (see the top of this header) */
	uint64_t ticks;		     /* the same, on the trace's own clock (tick_hz) */
	unsigned int class_id;	     /* its provider:name and kind (lk_trace_file_class) */
	uint64_t cpu_ns;	     /* the thread's CPU time then; 0 unless the trace records it
					 * (lk_trace_file_get_info().cputime) */
	const char *provider, *name; /* "lowkey" and "sched_out"/"sched_in" for switches */
	unsigned int nargs;	     /* its arguments: lk_trace_event_arg() decodes each */

	/* LK_PROBE_SPAN_BEGIN: how many spans were open on the thread under it (0: outermost).
	 * LK_PROBE_SPAN_END, paired: the same for its begin. */
	unsigned int depth;
	/* LK_PROBE_SPAN_END: whether a begin was open for it; if so, that begin's class (of kind
	 * LK_PROBE_SPAN_BEGIN, the same provider:name), seq and times. */
	bool paired;
	unsigned int begin_class_id;
	uint64_t begin_seq, begin_ns, begin_ticks, begin_cpu_ns;
	uint64_t duration_ns;	  /* ns - begin_ns */
	uint64_t cpu_duration_ns; /* cpu_ns - begin_cpu_ns; 0 without CPU time */

	double value; /* LK_PROBE_COUNTER: the value, as a double */

	unsigned int cpu; /* LK_TRACE_EV_SWITCH_OUT, _IN: the CPU left or taken */
	bool preempted;	  /* LK_TRACE_EV_SWITCH_OUT: still runnable, or blocked */

	/* The record the arguments are decoded from: the reader's, not to be read or changed. */
	struct {
		const void *bytes, *cls;
		size_t len;
	} record;
};

/*
 * What a trace says about itself, and what it counts: events, thread_names, lost and
 * truncated_streams are 0 until the counts are complete (see Counts at the top).
 */
struct lk_trace_file_info {
	enum lk_trace_format format;
	const char *format_name; /* "CTF", "Chrome JSON", "Perfetto" */
	int pid;		 /* the process recorded */
	const char *process_name;
	unsigned int threads;	     /* threads with a stream of events, switches or a name */
	uint64_t events;	     /* events lk_trace_file_next() gives, switches included
					 * (a damaged CTF stream: those before the damage) */
	uint64_t thread_names;	     /* the trace's records of thread names (not events here) */
	uint64_t lost;		     /* events the threads lost (full rings), all together */
	uint64_t sched_lost;	     /* context switch records the kernel dropped */
	uint64_t dropped;	     /* flight recorder snapshots: of the events older
					 * ones overwrote, those the threads dropped */
	uint64_t truncated_streams;  /* CTF: streams cut inside their last packet */
	uint64_t nonfinite_counters; /* JSON: counter values the file left out (NaN, inf) */
	bool cputime;		     /* events carry CPU time */
	bool sched;		     /* context switches were recorded */
	bool overwrite;		     /* a flight recorder's snapshot */
	uint64_t tick_hz;	     /* ticks per second of lk_trace_event.ticks: the cycle
					 * counter's in CTF, 10^9 (ns) in JSON and Perfetto */
	unsigned int classes;	     /* the class_id values: 0 to classes - 1 */
};

/*
 * A class of events: every event of one provider:name and kind, whichever site or library
 * recorded it. Class ids run in the order of provider, then name (strcmp), then kind, so a
 * listing by id reads the same for one recording in every format. Switches have classes too.
 */
struct lk_trace_class {
	const char *provider, *name; /* live as long as the file is open */
	enum lk_probe_kind kind;
};

/* A thread of the trace: events, lost and truncated 0 until the counts are complete. */
struct lk_trace_thread {
	int tid;
	const char *name;    /* "" if none or not read yet; lives while the file is open */
	uint64_t events;     /* its events lk_trace_file_next() gives, switches too */
	uint64_t lost;	     /* events it lost (a full ring) */
	uint64_t truncated;  /* CTF: bytes at the end of its stream that were not a whole
					 * packet (a program killed while writing); 0 elsewhere */
	uint64_t open_spans; /* spans open on it after the latest lk_trace_file_next():
					 * at the end, those its trace never closed */
};

/*
 * lk_trace_file_open - open the trace at path (a CTF directory, a .pftrace or a JSON file, told by
 * content): a CTF trace's metadata and the first packet of each stream read, a JSON or Perfetto
 * file read into memory and counted (see Cost above). *tf is set on success only.
 * Errors: -ENOENT, -EACCES, -ENOTDIR and the like: path cannot be opened (the message names it);
 * -EINVAL: not a trace lowkey reads, or damaged (the message names the format and where; a CTF
 * stream damaged in a packet is told by lk_trace_file_next() instead; for a CTF trace lowkey did
 * not write, babeltrace2's message); -ENOTSUP: a CTF trace lowkey did not write, and no
 * libbabeltrace2 to read it (the message says what to install);
 * -EFBIG: a file too large to read into memory; -E2BIG: more event classes than a trace can hold
 * (65,535); -ENOMEM. Not async-signal-safe.
 */
LK_API int lk_trace_file_open(const char *path, struct lk_trace_file **tf);

/*
 * lk_trace_file_next - the next event in time order into *ev; the previous event's strings are
 * gone. Returns 1 with *ev set, 0 at the end (and on every call after it: the counts are complete
 * from the first), -ENOMEM (pairing a span nested deeper than any before; the file stays usable,
 * the event is lost), or, for a CTF trace, -EINVAL (a stream damaged after the events given: the
 * message names its file and the byte) or the system's error reading a stream (-EIO and the like;
 * -ENOMEM keeping a thread's name), given again on every call after it until
 * lk_trace_file_rewind(): such a trace never reaches its end, and its counts are made only by
 * lk_trace_file_count(). Not async-signal-safe.
 */
LK_API int lk_trace_file_next(struct lk_trace_file *tf, struct lk_trace_event *ev);

/*
 * lk_trace_file_rewind - start again from the first event (spans unpaired again): the first
 * packet of every CTF stream read again. O(streams).
 */
LK_API void lk_trace_file_rewind(struct lk_trace_file *tf);

/*
 * lk_trace_file_count - complete the counts now (see Counts above), wherever the reading is: for a
 * CTF trace whose end lk_trace_file_next() has not reached, one more read of every stream, with a
 * cursor of its own (the sizes of the records only: no times, no arguments; O(trace size) and the
 * whole trace read from disk again); nothing once they are complete. The events given and to come
 * are unchanged; a thread renamed later in its stream has its last name from then on. A stream
 * damaged or unreadable past some event is counted as far as it reads, as lk_trace_file_next()
 * gives it, and the error is left to lk_trace_file_next(). Returns 0, -ENOMEM (the counts still
 * 0), or the error listing or opening the trace's stream files again, with a message (one removed
 * or replaced since open: -ENOENT, -EINVAL and the like). Not async-signal-safe.
 */
LK_API int lk_trace_file_count(struct lk_trace_file *tf);

/*
 * lk_trace_file_get_info - what the trace says about itself; valid while tf is open, its counts
 * filled in where it is when they are complete (see Counts above). O(1).
 */
LK_API const struct lk_trace_file_info *lk_trace_file_get_info(const struct lk_trace_file *tf);

/*
 * lk_trace_file_thread - thread i (0 to lk_trace_file_get_info()->threads - 1) into *th, in the
 * order of the trace's streams. 0, or -ERANGE past the last. O(1).
 */
LK_API int lk_trace_file_thread(const struct lk_trace_file *tf, unsigned int i,
				struct lk_trace_thread *th);

/* lk_trace_file_class - class id (lk_trace_event.class_id) into *cls. 0, or -ERANGE. O(1). */
LK_API int lk_trace_file_class(const struct lk_trace_file *tf, unsigned int id,
			       struct lk_trace_class *cls);

/*
 * lk_trace_event_arg - argument i of ev (0 to ev->nargs - 1) into *arg, decoded from the event's
 * record now: lk_trace_file_next() leaves the arguments where they lie, for the readers that want
 * them. O(i): the strings before it are stepped over (memchr), numbers are 8 bytes each. A
 * string's bytes (arg->v.str) live as the event's strings do (see struct lk_trace_event): until
 * the next lk_trace_file_next(), lk_trace_file_rewind() or lk_trace_file_close() on its file; ev
 * may be a copy of the event given, not one kept past that. 0, or -ERANGE past its arguments.
 * Allocates nothing, calls nothing but memchr: async-signal-safe.
 */
LK_API int lk_trace_event_arg(const struct lk_trace_event *ev, unsigned int i,
			      struct lk_trace_arg *arg);

/*
 * lk_trace_event_arg_named - ev's first argument named name into *arg, as lk_trace_event_arg()
 * decodes it. O(arguments). 0, or -ENOENT if it has none of that name. Async-signal-safe.
 */
LK_API int lk_trace_event_arg_named(const struct lk_trace_event *ev, const char *name,
				    struct lk_trace_arg *arg);

/* lk_trace_file_close - free everything; tf may be NULL. Strings of its events are gone after. */
LK_API void lk_trace_file_close(struct lk_trace_file *tf);

#ifdef __cplusplus
}
#endif

#endif
