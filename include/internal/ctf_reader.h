/* SPDX-License-Identifier: MIT */
/*
 * Internal: reading lowkey's own CTF traces back (for the JSON conversion and `lowkey report`).
 * It reads the event classes from the trace's `metadata` (the TSDL lowkey writes; a trace of
 * lowkey 0.x before format 3 had them in a hidden `.lowkey-index`, read when it is there) and
 * walks each stream file's packets.
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
 * there is one; 0 or -errno with a message in err.
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

/* Nanoseconds on CLOCK_MONOTONIC for a TSC value of this trace. */
uint64_t lk__reader_ns(const struct lk__trace_reader *r, uint64_t tsc);

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

#endif
