/* SPDX-License-Identifier: MIT */
/*
 * Internal to the Perfetto writer (perfetto.h): its state and what its parts share.
 * - perfetto.c: a writer's life, its file, each batch's first packet, a whole trace converted;
 * - write_intern.c: the strings interned per batch;
 * - write_tracks.c: the track descriptors;
 * - write_events.c: an event's packet, of each kind, from an event the reader decoded;
 * - write_fast.c: the consumer's fast path, packets from a ring's records by template.
 * Not thread-safe: one thread writes a given lk__pft.
 */
#ifndef LK_FORMAT_PERFETTO_WRITE_H
#define LK_FORMAT_PERFETTO_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <lowkey/probe.h>

#include "format/perfetto/perfetto.h"
#include "format/perfetto/perfetto_proto.h"
#include "format/protobuf/protobuf.h"
#include "internal/ticks.h"
#include "internal/ctf_reader.h"

/* InternedData and its entries (EventCategory, EventName, DebugAnnotationName: iid 1, name 2) */
enum intern_kind { CATEGORIES = 1, NAMES = 2, ARG_NAMES = 3 };

#define FLUSH_AT (256u << 10)
#define MAX_PENDING (2 + LK_PROBE_MAX_ARGS + 1)

/* Strings interned in the current sequence: open addressing, emptied by bumping seq. */
struct intern_slot {
	const char *s;
	uint64_t iid;
	uint32_t gen;
};

struct intern_table {
	struct intern_slot *slots;
	size_t mask, used;
	uint64_t next_iid;
};

/*
 * The consumer's fast path (lk__pft_records): a class's events are packets that differ only in
 * their timestamp's delta and their arguments' values, so what does not change is laid out once
 * a batch, after the class's first event (which interns its strings), and copied for the others.
 * Classes of numbers only (no strings, whose records have no fixed size) and of the four kinds.
 */
#define TEMPLATE_TE 32	/* room for the track event's fixed start */
#define TEMPLATE_ARG 16 /* room for an annotation's: name iid, the value's key */

struct event_template {
	uint32_t gen;	     /* the batch it was laid out in: valid in that one only */
	uint8_t record_size; /* the ring's record: header, CPU time, 8 bytes an argument */
	uint8_t nargs;
	uint8_t te_len;
	bool instant;	   /* no CPU-time value (as put_track_event) */
	bool counter;	   /* a counter's value: te ends with its key */
	bool counter_u64;  /* ... an unsigned one: over INT64_MAX it is a double (slow path) */
	bool short_packet; /* its packet, at its longest, under 128 bytes: every length one byte */
	uint8_t te[TEMPLATE_TE]; /* type, name iid, category iid; counter: type, track, the value's key */
	uint8_t arg_len[LK_PROBE_MAX_ARGS];
	bool arg_double[LK_PROBE_MAX_ARGS]; /* 8 bytes as they are, else a varint */
	uint8_t arg[LK_PROBE_MAX_ARGS][TEMPLATE_ARG];
};

/* A class's iids in the current sequence (valid when gen is the current one). */
struct class_iids {
	uint32_t gen;
	uint64_t name, category, arg[LK_PROBE_MAX_ARGS];
	bool counter_described;	    /* its counter track (global, not per sequence) ... */
	uint64_t counter_track;	    /* ... and that track's uuid */
	struct event_template fast; /* its events' packets, but for what changes */
};

struct pending {
	enum intern_kind kind;
	uint64_t iid;
	const char *s;
};

struct lk__pft {
	int fd;
	char *path;
	struct lk__pb pb;
	struct lk__trace_reader *r;
	uint64_t uuid_seed, boot_offset_ns;
	uint32_t nseq;		   /* sequences started */
	uint32_t gen;		   /* batches begun: tells the interned strings of this batch */
	uint64_t ns0;		   /* CLOCK_MONOTONIC at the trace's tsc0 ... */
	struct lk__ns_scale scale; /* ... and the TSC's rate (internal/ticks.h) */
	uint64_t written;	   /* bytes written to the file */
	bool whole;		   /* lk__perfetto_convert: each stream in one batch */
	bool slow_only; /* lk__pft_records without its fast path (tests compare the two) */
	uint64_t fast;	/* records written the fast way */
	struct lk__pft_stream *st; /* the stream of the batch being written */
	uint8_t prefix[16];	   /* its event packets' sequence id and flags, encoded */
	uint8_t prefix_len;
	struct lk__pft_stream process, one; /* the process's sequence; whole: the stream read */
	struct intern_table tables[4];	    /* by enum intern_kind */
	struct class_iids *classes;	    /* by class id */
	struct pending pending[MAX_PENDING];
	unsigned int npending;
	int write_error;
};

/* ---- identifiers ---- */

static inline uint64_t lk__pft_mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15u; /* splitmix64's finalizer */
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
	return x ^ (x >> 31);
}

/* A track's uuid: unique to this trace (its start time and pid) and what the track is. */
static inline uint64_t lk__pft_track_uuid(const struct lk__pft *p, unsigned int what,
					  uint64_t which)
{
	return lk__pft_mix64(p->uuid_seed ^ lk__pft_mix64((uint64_t)what << 56 ^ which));
}

enum { TRACK_PROCESS = 1, TRACK_THREAD, TRACK_CPUTIME, TRACK_COUNTER, TRACK_OFF_CPU };

static inline uint64_t lk__pft_hash_string(const char *s)
{
	uint64_t h = 0xcbf29ce484222325u; /* FNV-1a */

	while (*s)
		h = (h ^ (unsigned char)*s++) * 0x100000001b3u;
	return h;
}

/* ---- interning (write_intern.c) ---- */

/* s's iid in this sequence; a new one is queued for the packet's InternedData. 0: no memory. */
uint64_t lk__pft_intern(struct lk__pft *p, enum intern_kind kind, const char *s);

/* A new batch: no string is interned in it yet. */
void lk__pft_reset_interning(struct lk__pft *p);

/* The iids of c in this sequence, interned now: lk__pft_class_iids's way when they are not yet. */
const struct class_iids *lk__pft_intern_class(struct lk__pft *p, const struct lk__event_class *c);

/* The iids of c's class in this sequence: name, category, argument names. */
static inline const struct class_iids *lk__pft_class_iids(struct lk__pft *p,
							  const struct lk__event_class *c)
{
	const struct class_iids *ci = &p->classes[c->id];

	return ci->gen == p->gen ? ci : lk__pft_intern_class(p, c);
}

/* Bytes the queued interned strings may take (each repaired to UTF-8 at worst). */
static inline size_t lk__pft_interned_room(const struct lk__pft *p)
{
	size_t n = 0;

	for (unsigned int i = 0; i < p->npending; i++)
		n += 3 * strlen(p->pending[i].s) + 4 * LK__PB_VARINT_MAX;
	return n;
}

/* The queued strings as the packet's InternedData at w (lk__pft_interned_room bytes), dequeued. */
uint8_t *lk__pft_put_pending(struct lk__pft *p, uint8_t *w);

static inline uint8_t *lk__pft_put_interned(struct lk__pft *p, uint8_t *w)
{
	return p->npending ? lk__pft_put_pending(p, w) : w;
}

/* ---- output (perfetto.c) ---- */

/* Closes the packet begun; the buffer written out once it holds FLUSH_AT. 0, -ENOMEM or -errno. */
int lk__pft_packet_done(struct lk__pft *p);

/* A packet of this sequence; timestamped ones take the incremental clock's delta. */
void lk__pft_begin_packet(struct lk__pft *p, unsigned int flags);

/*
 * A batch's first packet: the sequence's incremental state cleared, its defaults, its clock tied
 * to the system's at the clock's current value (the trace's start for a new sequence). The
 * stream's first batch starts its sequence.
 */
int lk__pft_begin_batch(struct lk__pft *p, struct lk__pft_stream *st);

/* ---- tracks (write_tracks.c) ---- */

int lk__pft_describe_process(struct lk__pft *p);

/* The thread's track (again with its name, when the trace names it) and its CPU-time track. */
int lk__pft_describe_thread(struct lk__pft *p, const char *name);

/* c's counter track, described (again: once per site of the counter). */
int lk__pft_describe_counter(struct lk__pft *p, const struct lk__event_class *c);

/* ---- events (write_events.c): the reader's callbacks (lk__reader_ops), arg a struct lk__pft ---- */

int lk__pft_on_stream_begin(const struct lk__stream_info *s, void *arg);
int lk__pft_on_event(const struct lk__event *e, void *arg);
int lk__pft_on_stream_end(const struct lk__stream_info *s, void *arg);

/* The end of the stream's last batch: the switch out left open and the lost events, if any. */
int lk__pft_finish_stream(struct lk__pft *p);

#endif
