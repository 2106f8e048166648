/* SPDX-License-Identifier: MIT */
/*
 * Internal: reading lowkey's own CTF traces back (for the conversions and the public reader).
 * It reads the event classes from the trace's `metadata` (the TSDL lowkey writes; a trace of
 * lowkey 0.x before format 3 had them in a hidden `.lowkey-index`, read when it is there), and
 * each stream file's packets with a cursor: one event at a time, one packet in memory
 * (lk__ctf_cursor), which the walk of a whole trace (lk__reader_walk) uses too.
 *
 * A trace may have been written by someone else, or by a program killed mid-write: nothing in it
 * is trusted. Files are opened only through the trace directory's descriptor, never through a
 * symbolic link and only if they are regular files (a FIFO named like a stream is refused, not
 * waited on); what is allocated is bounded by the files' sizes and the protocol's limits; a
 * stream whose last packet was cut short yields its whole packets and says how many bytes it
 * left out.
 */
#ifndef LK_FORMAT_CTF_READER_H
#define LK_FORMAT_CTF_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal/ticks.h"

struct lk__event_class {
	uint32_t id;
	uint8_t kind; /* enum lk_probe_kind; 0 for lowkey's own events */
	uint8_t nargs;
	uint32_t arg_types;
	char *provider, *event, *where, *arg_names;
	char arg_name[8][64]; /* field names, as in the metadata */
};

struct lk__trace_reader {
	char *dir;  /* as named, for messages */
	int dir_fd; /* -1 when the index came from memory */
	uint64_t tsc_hz, tsc0, monotonic0_ns, realtime0_ns;
	bool cputime;
	bool sched;	     /* context switches recorded: stream-TID-sched files */
	uint64_t sched_lost; /* context switch records the kernel dropped */
	bool overwrite;	  /* a flight recorder's snapshot: the streams' lost events are older ones
				   the rings overwrote, but for `dropped` of them */
	uint64_t dropped; /* of those, what the threads dropped (overwrite only) */
	unsigned int format; /* 2: 88-byte packet prefix, no vtid; 3: LK__CTF_PACKET_PREFIX, vtid */
	int pid;
	char procname[64];
	struct lk__event_class **classes; /* by id; NULL where none */
	size_t nclasses;
	uint64_t truncated_streams; /* in the last walk: streams whose last packet was cut short */
	struct lk__ns_scale clock;  /* lk__reader_ns's scale for tsc_hz (lk__reader_set_clock) */
};

struct lk__event {
	int tid;
	uint64_t tsc;
	uint64_t cputime_ns; /* 0 unless the trace records CPU time */
	const struct lk__event_class *cls;
	const uint8_t *payload;
	size_t payload_len;
};

struct lk__stream_info {
	int tid;
	unsigned int
		stream_id; /* 0: probes; 1: context switches (lowkey:sched_out, lowkey:sched_in) */
	const char *file;
	uint64_t packets, events, lost;
	uint64_t truncated; /* bytes at the end that are not a whole packet (0: none); the events
				   of the packets before them were all read */
};

struct lk__reader_ops {
	/* called per stream before its events; may be NULL */
	int (*stream_begin)(const struct lk__stream_info *s, void *arg);
	int (*event)(const struct lk__event *e, void *arg);
	/* called after a stream's events, with its totals; may be NULL */
	int (*stream_end)(const struct lk__stream_info *s, void *arg);
};

/*
 * Open a trace directory (followed if dir is a symbolic link): its metadata, or its index when
 * there is one; 0 or -errno with a message in err: "cannot open DIR: " and the errno's text for
 * a path that cannot be opened as a directory (-ENOENT, -EACCES, -ENOTDIR, ...), "is not a lowkey
 * trace" for a directory without metadata (-ENOENT).
 */
int lk__reader_open(struct lk__trace_reader *r, const char *dir, char *err, size_t errlen);

/* The same for a directory already open (dir_fd is duplicated); name is for messages. */
int lk__reader_openat(struct lk__trace_reader *r, int dir_fd, const char *name, char *err,
		      size_t errlen);

void lk__reader_close(struct lk__trace_reader *r);

/*
 * Visit every stream and its events in order. Returns 0, a callback's non-zero value, or -errno:
 * -EINVAL for a damaged stream (after the events before the damage were visited). A stream that
 * ends inside a packet is not damaged: see lk__stream_info.truncated.
 */
int lk__reader_walk(struct lk__trace_reader *r, const struct lk__reader_ops *ops, void *arg,
		    char *err, size_t errlen);

/*
 * The names of the stream files of r's directory (stream-TID, stream-TID-sched), sorted as the
 * walk visits them: how many, or -errno. Free each and the array.
 */
int lk__reader_streams(struct lk__trace_reader *r, char ***names);

/*
 * Called on this thread with each packet's size after its events were visited (NULL: nothing):
 * how a conversion tells how far it is (progress.c sets it for the conversion's time).
 */
extern __thread void (*lk__reader_packet_hook)(uint64_t bytes);

/* Argument i of e as raw 8 bytes or a string; returns the next offset, or 0 past the end. */
size_t lk__event_arg(const struct lk__event *e, size_t offset, unsigned int i, uint64_t *value,
		     const char **str);

/*
 * A context switch's record (e is lowkey:sched_out or lowkey:sched_in): the CPU, and for a switch
 * out whether the thread was preempted (still runnable) rather than blocked.
 */
struct lk__switch {
	bool out, preempted;
	uint64_t cpu;
};
struct lk__switch lk__event_switch(const struct lk__event *e);

/* A counter's value (its first argument: a double, or an integer converted); 0 if it has none. */
double lk__event_counter(const struct lk__event *e);

/*
 * Nanoseconds on CLOCK_MONOTONIC for a TSC value of this trace: monotonic0_ns + (tsc - tsc0) *
 * 10^9 / tsc_hz rounded down, exactly, in integers (0 before the clock's start, UINT64_MAX past
 * its range): internal/ticks.h's rule, which the Perfetto writer times by too. Three
 * multiplications where lk__reader_set_clock was called for r's tsc_hz; two divisions otherwise.
 */
static inline uint64_t lk__reader_ns(const struct lk__trace_reader *r, uint64_t tsc);
uint64_t lk__reader_ns_divided(const struct lk__trace_reader *r, uint64_t tsc);

/* Precompute lk__reader_ns's scale for r->tsc_hz (the readers call it when they set it). */
void lk__reader_set_clock(struct lk__trace_reader *r);

/*
 * A stream read one event at a time: the packet being read is in memory (read with pread), the
 * next is read when its records are done. An event's payload points into that packet: it stays
 * valid until the cursor is moved on (next, rewind, close). Damage is found as it is read: the
 * events before it are given, then -EINVAL. What it allocates: one buffer, the largest packet
 * met (at most 64 MiB). The packet hook (above) is told each packet once its records are read.
 */
struct lk__ctf_cursor {
	const struct lk__trace_reader *r;
	struct lk__stream_info s; /* tid, stream_id, file; its counters as far as it has read */
	char *name;		  /* the stream's file in r's directory; NULL: bytes */
	int fd;			  /* -1 while closed (between packets if transient), or bytes */
	bool transient;		  /* close the file after each packet: many streams open at once */
	bool done;		  /* at the end of the stream */
	const uint8_t *bytes;	  /* the stream in memory (the fuzzer, the live Perfetto writer) */
	uint64_t size;		  /* the stream's bytes, as when it was opened */
	uint8_t *buf;		  /* the packet being read ... */
	size_t cap;
	uint64_t at, len;	/* ... where it starts in the stream, its length (0: none) */
	const uint8_t *p, *end; /* its records not read yet */
	uint64_t tsc;		/* the latest event's timestamp */
	bool cpu;		/* records carry the thread's CPU time */
	size_t head;		/* a record's bytes before its payload */
	int read_error;		/* -errno from reading, 0 */
};

/*
 * A cursor on the stream file name (stream-TID or stream-TID-sched) of r's directory, before its
 * first event. 0, or -errno with a message in err (the file cannot be opened, or is not a regular
 * file), -ENOMEM.
 */
int lk__ctf_cursor_open(struct lk__ctf_cursor *c, const struct lk__trace_reader *r,
			const char *name, bool transient, char *err, size_t errlen);

/* A cursor on a stream's bytes in memory (kept by the caller), as thread tid's stream stream_id. */
void lk__ctf_cursor_bytes(struct lk__ctf_cursor *c, const struct lk__trace_reader *r,
			  const uint8_t *data, size_t len, int tid, unsigned int stream_id);

/*
 * The stream's next event into *e: 1; 0 at its end (c->s.truncated: bytes after its last whole
 * packet), and on every call after; -EINVAL where the stream is damaged (at byte c->at: a packet
 * or record runs past its bounds), an error from reading (c->read_error), or -ENOMEM.
 */
int lk__ctf_cursor_next(struct lk__ctf_cursor *c, struct lk__event *e);

/*
 * Every event left in the stream to event(e, arg) (NULL: none), decoded as lk__ctf_cursor_next
 * decodes them: 0 at the end, event's non-zero value, or an error of lk__ctf_cursor_next.
 */
int lk__ctf_cursor_walk(struct lk__ctf_cursor *c, int (*event)(const struct lk__event *, void *),
			void *arg);

/*
 * Count the stream's events onto *events up to its next thread name (lowkey:thread_name), which
 * is decoded into *e: 1; or up to its end, 0, or an error, as lk__ctf_cursor_next. A pass that
 * only counts: the events' times and arguments are not decoded.
 */
int lk__ctf_cursor_count(struct lk__ctf_cursor *c, uint64_t *events, struct lk__event *e);

/*
 * A stream still being written (a trace a process records now, whose consumer appends whole
 * packets): the file has size bytes now. A cursor at its end (lk__ctf_cursor_next gave 0) reads on
 * from its last whole packet, the bytes of a packet not yet whole included, as if the stream had
 * been opened that long. A size not past the one known changes nothing. O(1).
 */
void lk__ctf_cursor_follow(struct lk__ctf_cursor *c, uint64_t size);

/* Back to the stream's start; its counters zeroed. */
void lk__ctf_cursor_rewind(struct lk__ctf_cursor *c);

/* The message for rc, an error lk__ctf_cursor_next returned; returns rc. */
int lk__ctf_cursor_error(const struct lk__ctf_cursor *c, int rc, char *err, size_t errlen);

void lk__ctf_cursor_close(struct lk__ctf_cursor *c);

/*
 * The two parsers on their own, for the fuzzer. lk__reader_parse_index reads an index or a
 * lowkey metadata (TSDL text, told by its first line) held in text (len bytes, modified;
 * text[len] must be writable) into r, which it initializes;
 * lk__reader_walk_bytes walks one stream's bytes (s: its tid and file name; the counters are set).
 * Same results as the functions above.
 */
int lk__reader_parse_index(struct lk__trace_reader *r, char *text, size_t len, char *err,
			   size_t errlen);
int lk__reader_walk_bytes(struct lk__trace_reader *r, const uint8_t *data, size_t len,
			  struct lk__stream_info *s, const struct lk__reader_ops *ops, void *arg);

static inline uint64_t lk__reader_ns(const struct lk__trace_reader *r, uint64_t tsc)
{
	uint64_t ns;

	if (__builtin_expect(tsc < r->tsc0 || r->clock.hz != r->tsc_hz || !r->tsc_hz ||
				     !lk__ns_scale_apply(&r->clock, tsc - r->tsc0, &ns),
			     0))
		return lk__reader_ns_divided(r, tsc);
	if (__builtin_add_overflow(ns, r->monotonic0_ns, &ns))
		return UINT64_MAX;
	return ns;
}

#endif
