// SPDX-License-Identifier: MIT
/*
 * Perfetto's native trace format (a protobuf `Trace`: a stream of `TracePacket`s): from a lowkey
 * CTF trace read back through the reader, the whole trace at once (lk__perfetto_convert) or a
 * stream's packets as a batch (the context switches' streams while recording), or from a thread's
 * ring, the records the consumer drains (lk__pft_records, perfetto.h, perfetto_live.c). Field
 * numbers are those of Perfetto's protos/perfetto/trace/ (trace_packet.proto, track_event/ (every
 * .proto there), clock_snapshot.proto).
 *
 * Layout:
 * - one packet sequence per stream, that is per thread and per thread's context switches
 *   (trusted_packet_sequence_id SEQ_BASE + n, after the process's own, SEQ_BASE), as Perfetto's
 *   SDK writes one per thread; each batch of a stream (the whole stream, when converting a
 *   trace) begins with a packet that clears the sequence's incremental state and sets its
 *   defaults (the thread's track, the incremental clock, the CPU-time track), every later one
 *   uses that state. Event packets do not say so (SEQ_NEEDS_INCREMENTAL_STATE, 2 bytes of about
 *   18): trace_processor reads the flag only to skip packets of a sequence whose state was lost
 *   (a ring that wrapped, a dropped chunk), and no sequence here is cut before its end;
 * - event names, categories (providers) and argument names are interned per batch: the first
 *   packet that uses one carries it in InternedData, the others its iid;
 * - timestamps are deltas on a sequence-scoped incremental clock (LK_CLOCK, ns) that each batch's
 *   first packet ties, in a ClockSnapshot, to CLOCK_MONOTONIC, CLOCK_BOOTTIME and CLOCK_REALTIME
 *   at the clock's value then (see docs/trace.md for why a clock of its own);
 * - a process track, a track per thread (TrackDescriptor), a counter track per LK_COUNTER and,
 *   with CPU time, a thread-time counter track per thread, whose values ride on each slice's
 *   begin and end (extra_counter_values);
 * - spans are TYPE_SLICE_BEGIN/END on their thread's track, events instants with their arguments
 *   as debug annotations, counters TYPE_COUNTER events. An event class this file does not know
 *   (one added to lowkey later) becomes an instant with its fields as annotations;
 * - a thread's context switches (its stream-TID-sched, a sequence of its own) become off-CPU
 *   slices "preempted" or "blocked" on a child track of the thread's, "off-CPU", from a switch out
 *   to the next switch in (docs/trace.md says why a track of their own).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <lowkey/probe.h>

#include "internal/failf.h"
#include "internal/outfile.h"
#include "internal/trace_convert.h"
#include "format/perfetto/perfetto.h"
#include "format/perfetto/perfetto_proto.h"
#include "probe/probe_internal.h"
#include "format/protobuf/protobuf.h"
#include "internal/ctf_reader.h"
#include "internal/trace_file.h"
#include "internal/ticks.h"

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

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15u; /* splitmix64's finalizer */
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
	return x ^ (x >> 31);
}

/* A track's uuid: unique to this trace (its start time and pid) and what the track is. */
static uint64_t track_uuid(const struct lk__pft *p, unsigned int what, uint64_t which)
{
	return mix64(p->uuid_seed ^ mix64((uint64_t)what << 56 ^ which));
}

enum { TRACK_PROCESS = 1, TRACK_THREAD, TRACK_CPUTIME, TRACK_COUNTER, TRACK_OFF_CPU };

/* ---- interning ---- */

static uint64_t hash_string(const char *s)
{
	uint64_t h = 0xcbf29ce484222325u; /* FNV-1a */

	while (*s)
		h = (h ^ (unsigned char)*s++) * 0x100000001b3u;
	return h;
}

static int table_grow(struct intern_table *t, uint32_t gen)
{
	size_t n = t->slots ? (t->mask + 1) * 2 : 64;
	struct intern_slot *slots = calloc(n, sizeof(*slots)), *old = t->slots;
	size_t oldn = t->slots ? t->mask + 1 : 0;

	if (!slots)
		return -ENOMEM;
	t->slots = slots;
	t->mask = n - 1;
	for (size_t i = 0; i < oldn; i++) {
		if (old[i].gen != gen || !old[i].s)
			continue;
		for (size_t k = hash_string(old[i].s) & t->mask;; k = (k + 1) & t->mask) {
			if (!slots[k].s) {
				slots[k] = old[i];
				break;
			}
		}
	}
	free(old);
	return 0;
}

/* s's iid in this sequence; a new one is queued for the packet's InternedData. 0: no memory. */
static uint64_t intern(struct lk__pft *p, enum intern_kind kind, const char *s)
{
	struct intern_table *t = &p->tables[kind];
	size_t k;

	if ((t->used + 1) * 2 > (t->slots ? t->mask + 1 : 0) && table_grow(t, p->gen) != 0) {
		p->pb.failed = true;
		return 0;
	}
	for (k = hash_string(s) & t->mask; t->slots[k].s && t->slots[k].gen == p->gen;
	     k = (k + 1) & t->mask)
		if (strcmp(t->slots[k].s, s) == 0)
			return t->slots[k].iid;
	t->slots[k] = (struct intern_slot){ s, ++t->next_iid, p->gen };
	t->used++;
	p->pending[p->npending++] = (struct pending){ kind, t->next_iid, s };
	return t->next_iid;
}

static void reset_interning(struct lk__pft *p)
{
	for (int i = 0; i < 4; i++)
		p->tables[i].used = 0, p->tables[i].next_iid = 0;
}

/* The iids of e's class in this sequence: name, category, argument names. */
static const struct class_iids *class_iids(struct lk__pft *p, const struct lk__event_class *c)
{
	struct class_iids *ci = &p->classes[c->id];

	if (ci->gen == p->gen)
		return ci;
	ci->name = intern(p, NAMES, c->event);
	ci->category = intern(p, CATEGORIES, c->provider);
	for (unsigned int i = 0; i < c->nargs; i++)
		ci->arg[i] = intern(p, ARG_NAMES, c->arg_name[i]);
	ci->gen = p->gen;
	return ci;
}

/* Bytes the queued interned strings may take (each repaired to UTF-8 at worst). */
static size_t interned_room(const struct lk__pft *p)
{
	size_t n = 0;

	for (unsigned int i = 0; i < p->npending; i++)
		n += 3 * strlen(p->pending[i].s) + 4 * LK__PB_VARINT_MAX;
	return n;
}

static uint8_t *put_interned(struct lk__pft *p, uint8_t *w)
{
	uint8_t *data, *entry;

	if (!p->npending)
		return w;
	data = lk__pbw_begin(w, PKT_INTERNED_DATA);
	w = data;
	for (unsigned int i = 0; i < p->npending; i++) {
		entry = lk__pbw_begin(w, p->pending[i].kind);
		w = lk__pbw_uint(entry, 1, p->pending[i].iid);
		w = lk__pbw_utf8(w, 2, p->pending[i].s, strlen(p->pending[i].s));
		w = lk__pbw_end(w, entry);
	}
	p->npending = 0;
	return lk__pbw_end(w, data);
}

/* ---- output ---- */

static int flush(struct lk__pft *p)
{
	size_t done = 0;

	if (p->pb.failed)
		return -ENOMEM;
	while (done < p->pb.len) {
		ssize_t n = write(p->fd, p->pb.buf + done, p->pb.len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			p->write_error = n < 0 ? errno : ENOSPC;
			/* what a write cut short left of a packet goes: the file ends with a whole one */
			if (ftruncate(p->fd, (off_t)p->written) == 0)
				lseek(p->fd, (off_t)p->written, SEEK_SET);
			return -p->write_error;
		}
		done += (size_t)n;
	}
	p->written += done;
	p->pb.len = 0;
	return 0;
}

static int packet_done(struct lk__pft *p)
{
	lk__pb_end(&p->pb);
	if (p->pb.failed)
		return -ENOMEM;
	return p->pb.len >= FLUSH_AT ? flush(p) : 0;
}

/* A packet of this sequence; timestamped ones take the incremental clock's delta. */
static void begin_packet(struct lk__pft *p, unsigned int flags)
{
	lk__pb_begin(&p->pb, TRACE_PACKET);
	lk__pb_uint(&p->pb, PKT_SEQUENCE_ID, p->st->seq);
	if (flags)
		lk__pb_uint(&p->pb, PKT_SEQUENCE_FLAGS, flags);
}

static void put_clock(struct lk__pb *pb, uint32_t id, uint64_t ns, bool incremental)
{
	lk__pb_begin(pb, SNAP_CLOCKS);
	lk__pb_uint(pb, CLOCK_ID, id);
	lk__pb_uint(pb, CLOCK_TIMESTAMP, ns);
	if (incremental)
		lk__pb_uint(pb, CLOCK_INCREMENTAL, 1);
	lk__pb_end(pb);
}

/*
 * A batch's first packet: the sequence's incremental state cleared, its defaults, its clock tied
 * to the system's at the clock's current value (the trace's start for a new sequence). The
 * stream's first batch starts its sequence.
 */
static int begin_batch(struct lk__pft *p, struct lk__pft_stream *st)
{
	struct lk__pb *pb = &p->pb;
	uint64_t base;
	bool first = !st->started;
	int tid = st->tid;

	if (first) {
		st->seq = SEQ_BASE + p->nseq++ % SEQ_SPAN;
		st->last_ns = p->r->monotonic0_ns;
		st->started = true;
	}
	base = st->last_ns;
	p->st = st;
	p->gen++;
	p->prefix_len = (uint8_t)(lk__pbw_uint(p->prefix, PKT_SEQUENCE_ID, st->seq) - p->prefix);
	reset_interning(p);
	begin_packet(p, SEQ_INCREMENTAL_STATE_CLEARED);
	if (first)
		lk__pb_uint(pb, PKT_FIRST_ON_SEQUENCE, 1);
	lk__pb_uint(pb, PKT_TIMESTAMP, base);
	lk__pb_uint(pb, PKT_TIMESTAMP_CLOCK_ID, BUILTIN_MONOTONIC);
	lk__pb_begin(pb, PKT_DEFAULTS);
	lk__pb_uint(pb, DEF_TIMESTAMP_CLOCK_ID, LK_CLOCK);
	if (tid) {
		lk__pb_begin(pb, DEF_TRACK_EVENT);
		lk__pb_uint(pb, TED_TRACK_UUID,
			    track_uuid(p, st->sched ? TRACK_OFF_CPU : TRACK_THREAD, (uint64_t)tid));
		if (p->r->cputime && !st->sched)
			lk__pb_uint(pb, TED_EXTRA_COUNTER_TRACKS,
				    track_uuid(p, TRACK_CPUTIME, (uint64_t)tid));
		lk__pb_end(pb);
	}
	lk__pb_end(pb);
	lk__pb_begin(pb, PKT_CLOCK_SNAPSHOT);
	put_clock(pb, LK_CLOCK, base, true);
	put_clock(pb, BUILTIN_MONOTONIC, base, false);
	put_clock(pb, BUILTIN_BOOTTIME, base + p->boot_offset_ns, false);
	put_clock(pb, BUILTIN_REALTIME, p->r->realtime0_ns + (base - p->r->monotonic0_ns), false);
	lk__pb_end(pb);
	return packet_done(p);
}

static int describe_process(struct lk__pft *p)
{
	struct lk__pb *pb = &p->pb;

	begin_packet(p, 0);
	lk__pb_begin(pb, PKT_TRACK_DESCRIPTOR);
	lk__pb_uint(pb, TD_UUID, track_uuid(p, TRACK_PROCESS, 0));
	lk__pb_begin(pb, TD_PROCESS);
	lk__pb_uint(pb, PD_PID, (uint64_t)p->r->pid);
	lk__pb_utf8(pb, PD_NAME, p->r->procname);
	if (p->r->overwrite) { /* a flight recorder's snapshot: its lost events are older ones overwritten */
		char dropped[48];

		snprintf(dropped, sizeof(dropped), "lowkey:dropped=%" PRIu64, p->r->dropped);
		lk__pb_utf8(pb, PD_LABELS, "lowkey:overwrite");
		lk__pb_utf8(pb, PD_LABELS, dropped);
	}
	lk__pb_end(pb);
	lk__pb_end(pb);
	return packet_done(p);
}

/* The thread's track (again with its name, when the trace names it) and its CPU-time track. */
static int describe_thread(struct lk__pft *p, const char *name)
{
	struct lk__pb *pb = &p->pb;
	uint64_t uuid = track_uuid(p, TRACK_THREAD, (uint64_t)p->st->tid);

	begin_packet(p, 0);
	lk__pb_begin(pb, PKT_TRACK_DESCRIPTOR);
	lk__pb_uint(pb, TD_UUID, uuid);
	lk__pb_uint(pb, TD_PARENT_UUID, track_uuid(p, TRACK_PROCESS, 0));
	lk__pb_begin(pb, TD_THREAD);
	lk__pb_uint(pb, THD_PID, (uint64_t)p->r->pid);
	lk__pb_uint(pb, THD_TID, (uint64_t)p->st->tid);
	if (name)
		lk__pb_utf8(pb, THD_NAME, name);
	lk__pb_end(pb);
	lk__pb_end(pb);
	packet_done(p);
	if (p->st->thread_described || (!p->r->cputime && !p->st->sched)) {
		p->st->thread_described = true;
		return p->pb.failed ? -ENOMEM : 0;
	}
	p->st->thread_described = true;
	begin_packet(p, 0);
	lk__pb_begin(pb, PKT_TRACK_DESCRIPTOR);
	lk__pb_uint(pb, TD_UUID,
		    track_uuid(p, p->st->sched ? TRACK_OFF_CPU : TRACK_CPUTIME,
			       (uint64_t)p->st->tid));
	lk__pb_uint(pb, TD_PARENT_UUID, uuid);
	if (p->st->sched) {
		lk__pb_utf8(pb, TD_NAME, "off-CPU");
	} else {
		lk__pb_utf8(pb, TD_NAME, "thread CPU time");
		lk__pb_begin(pb, TD_COUNTER);
		lk__pb_uint(pb, CD_TYPE, COUNTER_THREAD_TIME_NS);
		lk__pb_uint(pb, CD_UNIT, UNIT_TIME_NS);
		lk__pb_end(pb);
	}
	lk__pb_end(pb);
	return packet_done(p);
}

/*
 * A counter's track: one per provider:event, whichever sites record it. Described the first time
 * each site's values come (a counter with several sites is described as many times, the same).
 */
static uint64_t counter_uuid(const struct lk__pft *p, const struct lk__event_class *c)
{
	/*
	 * Every value names its track: 35 bits are 5 bytes of varint instead of 10, and still leave
	 * a collision with another track of this trace or a merged one a chance in billions.
	 */
	return track_uuid(p, TRACK_COUNTER,
			  hash_string(c->provider) ^ mix64(hash_string(c->event))) >>
		       29 |
	       1;
}

static int describe_counter(struct lk__pft *p, const struct lk__event_class *c)
{
	struct lk__pb *pb = &p->pb;
	char name[256];

	p->classes[c->id].counter_described = true;
	p->classes[c->id].counter_track = counter_uuid(p, c);
	snprintf(name, sizeof(name), "%s:%s", c->provider, c->event);
	begin_packet(p, 0);
	lk__pb_begin(pb, PKT_TRACK_DESCRIPTOR);
	lk__pb_uint(pb, TD_UUID, counter_uuid(p, c));
	lk__pb_uint(pb, TD_PARENT_UUID, track_uuid(p, TRACK_PROCESS, 0));
	lk__pb_utf8(pb, TD_NAME, name);
	lk__pb_begin(pb, TD_COUNTER);
	lk__pb_end(pb);
	lk__pb_end(pb);
	return packet_done(p);
}

/* ---- events ---- */

/*
 * An event's packet, on a cursor: room for its fixed fields, its arguments (strings repaired to
 * UTF-8 at worst) and the strings it interns. Returns where its track event's body starts.
 */
#define EVENT_ROOM 160

/* The incremental clock's delta to a TSC value, and the clock moved there. */
static inline uint64_t clock_delta(struct lk__pft *p, uint64_t tsc)
{
	uint64_t ticks = tsc - p->r->tsc0, last = p->st->last_ns, ns;

	if (__builtin_expect(tsc < p->r->tsc0 || !lk__ns_scale_apply(&p->scale, ticks, &ns) ||
				     __builtin_add_overflow(ns, p->ns0, &ns),
			     0))
		ns = lk__reader_ns(p->r, tsc); /* a damaged trace: outside the trace's time */
	/* Another CPU's TSC may be a hair behind: keep the thread's events in order. */
	if (ns <= last)
		return 0;
	p->st->last_ns = ns;
	return ns - last;
}

static uint8_t *event_packet(struct lk__pft *p, uint64_t tsc, size_t room, uint8_t **packet)
{
	uint8_t *w = lk__pb_reserve(&p->pb, room);

	if (!w)
		return NULL;
	*packet = lk__pbw_begin(w, TRACE_PACKET);
	memcpy(*packet, p->prefix, sizeof(p->prefix));
	w = lk__pbw_uint(*packet + p->prefix_len, PKT_TIMESTAMP, clock_delta(p, tsc));
	w = put_interned(p, w);
	return lk__pbw_begin(w, PKT_TRACK_EVENT);
}

static int event_done(struct lk__pft *p, uint8_t *w, uint8_t *event, uint8_t *packet)
{
	lk__pb_commit(&p->pb, lk__pbw_end(lk__pbw_end(w, event), packet));
	return p->pb.len >= FLUSH_AT ? flush(p) : 0;
}

static uint8_t *put_arg(uint8_t *w, uint64_t name_iid, unsigned int type, uint64_t v, const char *s)
{
	uint8_t *a = lk__pbw_begin(w, TE_DEBUG_ANNOTATIONS);

	w = lk__pbw_uint(a, DA_NAME_IID, name_iid);
	switch (type) {
	case LK_PROBE_I64:
		w = lk__pbw_uint(w, DA_INT, v);
		break;
	case LK_PROBE_U64:
		w = lk__pbw_uint(w, DA_UINT, v);
		break;
	case LK_PROBE_F64:
		w = lk__pbw_fixed64(w, DA_DOUBLE, v);
		break;
	case LK_PROBE_STR:
		w = lk__pbw_utf8(w, DA_STRING, s ? s : "", s ? strlen(s) : 0);
		break;
	case LK_PROBE_PTR:
		w = lk__pbw_uint(w, DA_POINTER, v);
		break;
	default:
		w = lk__pbw_uint(w, DA_UINT, v);
		break;
	}
	return lk__pbw_end(w, a);
}

static uint8_t *put_args(uint8_t *w, const struct lk__event *e, const struct class_iids *ci)
{
	size_t off = 0;

	for (unsigned int i = 0; i < e->cls->nargs; i++) {
		uint64_t v = 0;
		const char *s;

		off = lk__event_arg(e, off, i, &v, &s);
		if (!off)
			break;
		w = put_arg(w, ci->arg[i], lk__arg_type(e->cls->arg_types, i), v, s);
	}
	return w;
}

/* A slice's begin or end, an instant, or an event of a class this file does not know. */
static int put_track_event(struct lk__pft *p, const struct lk__event *e, unsigned int type)
{
	const struct class_iids *ci = type == TYPE_SLICE_END ? NULL : class_iids(p, e->cls);
	size_t room = EVENT_ROOM + e->cls->nargs * 32 + 3 * e->payload_len + interned_room(p);
	uint8_t *packet, *event, *w;

	event = event_packet(p, e->tsc, room, &packet);
	if (!event)
		return -ENOMEM;
	w = lk__pbw_uint(event, TE_TYPE, type);
	if (ci) {
		w = lk__pbw_uint(w, TE_NAME_IID, ci->name);
		w = lk__pbw_uint(w, TE_CATEGORY_IIDS, ci->category);
		w = put_args(w, e, ci);
	}
	if (p->r->cputime && type != TYPE_INSTANT)
		w = lk__pbw_uint(w, TE_EXTRA_COUNTER_VALUES, e->cputime_ns);
	return event_done(p, w, event, packet);
}

static int put_counter(struct lk__pft *p, const struct lk__event *e)
{
	struct class_iids *ci = &p->classes[e->cls->id];
	unsigned int type = lk__arg_type(e->cls->arg_types, 0);
	uint8_t *packet, *event, *w;
	uint64_t v = 0;
	const char *s;
	double d;
	int rc;

	if (e->cls->nargs != 1 || !lk__event_arg(e, 0, 0, &v, &s) || type == LK_PROBE_STR)
		return put_track_event(p, e, TYPE_INSTANT);
	if (!ci->counter_described && (rc = describe_counter(p, e->cls)) != 0)
		return rc;
	event = event_packet(p, e->tsc, EVENT_ROOM, &packet);
	if (!event)
		return -ENOMEM;
	w = lk__pbw_uint(event, TE_TYPE, TYPE_COUNTER);
	w = lk__pbw_uint(w, TE_TRACK_UUID, ci->counter_track);
	if (type == LK_PROBE_F64) {
		w = lk__pbw_fixed64(w, TE_DOUBLE_COUNTER_VALUE,
				    v); /* NaN and infinities as they are */
	} else if (type == LK_PROBE_U64 && v > INT64_MAX) {
		d = (double)v;
		memcpy(&v, &d, sizeof(v));
		w = lk__pbw_fixed64(w, TE_DOUBLE_COUNTER_VALUE, v);
	} else {
		w = lk__pbw_uint(w, TE_COUNTER_VALUE, v);
	}
	return event_done(p, w, event, packet);
}

/*
 * An off-CPU slice on the thread's off-CPU track (the sequence's default): its begin at the switch
 * out, with the CPU left and, when the thread came back (in_tsc non-zero), the CPU it came back
 * on, and its end at the switch in. Without a switch in (the trace stopped, or the thread exited,
 * while it was off its CPU) the slice is left open, as Perfetto marks a slice that did not end.
 */
static int put_off_cpu(struct lk__pft *p, uint64_t in_tsc, uint64_t next_cpu)
{
	uint64_t name = intern(p, NAMES, p->st->out.preempted ? "preempted" : "blocked");
	uint64_t category = intern(p, CATEGORIES, "off-cpu"), cpu = intern(p, ARG_NAMES, "cpu");
	uint64_t next = in_tsc ? intern(p, ARG_NAMES, "next_cpu") : 0;
	uint8_t *packet, *event, *w;
	int rc;

	event = event_packet(p, p->st->out.tsc, EVENT_ROOM + interned_room(p), &packet);
	if (!event)
		return -ENOMEM;
	p->st->out.pending = false;
	w = lk__pbw_uint(event, TE_TYPE, TYPE_SLICE_BEGIN);
	w = lk__pbw_uint(w, TE_NAME_IID, name);
	w = lk__pbw_uint(w, TE_CATEGORY_IIDS, category);
	w = put_arg(w, cpu, LK_PROBE_U64, p->st->out.cpu, NULL);
	if (in_tsc)
		w = put_arg(w, next, LK_PROBE_U64, next_cpu, NULL);
	if ((rc = event_done(p, w, event, packet)) != 0 || !in_tsc)
		return rc;
	event = event_packet(p, in_tsc, EVENT_ROOM, &packet);
	if (!event)
		return -ENOMEM;
	return event_done(p, lk__pbw_uint(event, TE_TYPE, TYPE_SLICE_END), event, packet);
}

/*
 * lowkey:sched_out is held until its lowkey:sched_in, which writes the slice. A switch in with no
 * switch out before it (the thread's first run, or a thread that was off its CPU when the trace
 * began) makes none: when and why it left is unknown. Two switches out in a row (the kernel lost
 * the switch in between, counted in sched_lost) keep the later one.
 */
static int on_switch(struct lk__pft *p, const struct lk__event *e)
{
	struct lk__switch sw = lk__event_switch(e);

	if (sw.out) {
		p->st->out = (struct lk__pft_switched_out){ true, sw.preempted, e->tsc, sw.cpu };
		return 0;
	}
	return p->st->out.pending ? put_off_cpu(p, e->tsc, sw.cpu) : 0;
}

static int on_event(const struct lk__event *e, void *arg)
{
	struct lk__pft *p = arg;
	uint64_t v;
	const char *name = NULL;
	int rc;

	if (e->cls->id == LK__EVENT_THREAD_NAME) {
		lk__event_arg(e, 0, 0, &v, &name);
		return describe_thread(p, name ? name : "");
	}
	if (!p->st->thread_described && (rc = describe_thread(p, NULL)) != 0)
		return rc;
	if (p->st->sched && (e->cls->id == LK__EVENT_SCHED_OUT || e->cls->id == LK__EVENT_SCHED_IN))
		return on_switch(p, e);
	switch (e->cls->kind) {
	case LK_PROBE_SPAN_BEGIN:
		return put_track_event(p, e, TYPE_SLICE_BEGIN);
	case LK_PROBE_SPAN_END:
		return put_track_event(p, e, TYPE_SLICE_END);
	case LK_PROBE_COUNTER:
		return put_counter(p, e);
	default:
		return put_track_event(p, e, TYPE_INSTANT);
	}
}

/* A whole stream's batch (lk__perfetto_convert), or the batch lk__pft_batch set. */
static int on_stream_begin(const struct lk__stream_info *s, void *arg)
{
	struct lk__pft *p = arg;

	if (p->whole)
		p->one = (struct lk__pft_stream){ .tid = s->tid, .sched = s->stream_id == 1 };
	return begin_batch(p, p->whole ? &p->one : p->st);
}

/* Lost events: an instant lowkey:lost with their count, after the thread's last event. */
static int put_lost(struct lk__pft *p, uint64_t lost)
{
	uint64_t name = intern(p, NAMES, "lost"), category = intern(p, CATEGORIES, "lowkey");
	uint64_t events = intern(p, ARG_NAMES, "events");
	uint8_t *packet, *event, *w;

	if (!(w = lk__pb_reserve(&p->pb, EVENT_ROOM + interned_room(p))))
		return -ENOMEM;
	packet = lk__pbw_begin(w, TRACE_PACKET);
	w = lk__pbw_uint(packet, PKT_SEQUENCE_ID, p->st->seq);
	w = lk__pbw_uint(w, PKT_TIMESTAMP, 0);
	w = put_interned(p, w);
	event = lk__pbw_begin(w, PKT_TRACK_EVENT);
	w = lk__pbw_uint(event, TE_TYPE, TYPE_INSTANT);
	w = lk__pbw_uint(w, TE_NAME_IID, name);
	w = lk__pbw_uint(w, TE_CATEGORY_IIDS, category);
	w = put_arg(w, events, LK_PROBE_U64, lost, NULL);
	return event_done(p, w, event, packet);
}

/* The end of the stream's last batch: the switch out left open and the lost events, if any. */
static int finish_stream(struct lk__pft *p)
{
	int rc = 0;

	if (p->st->out.pending)
		rc = put_off_cpu(p, 0, 0);
	if (!rc && p->st->lost)
		rc = put_lost(p, p->st->lost);
	return rc;
}

static int on_stream_end(const struct lk__stream_info *s, void *arg)
{
	struct lk__pft *p = arg;
	int rc;

	if (!p->st->thread_described && (rc = describe_thread(p, NULL)) != 0)
		return rc;
	if (s->lost > p->st->lost)
		p->st->lost = s->lost; /* cumulative: the last packet's count */
	return p->whole ? finish_stream(p) : 0;
}

/* ---- the conversion ---- */

static uint64_t clock_now(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * How far CLOCK_BOOTTIME is ahead of CLOCK_MONOTONIC (the time the machine spent suspended) as
 * it is now, which is as it was during the trace unless the machine suspended since (see
 * docs/trace.md). Read between two MONOTONIC reads: never negative.
 */
static uint64_t boot_offset_ns(void)
{
	uint64_t before = clock_now(CLOCK_MONOTONIC), boot = clock_now(CLOCK_BOOTTIME);
	uint64_t mid = before + (clock_now(CLOCK_MONOTONIC) - before) / 2;

	return boot > mid ? boot - mid : 0;
}

void lk__pft_set_rate(struct lk__pft *p, uint64_t tsc_hz)
{
	/* lk__reader_ns's result by multiplication: a division per event would cost more */
	p->scale = lk__ns_scale(tsc_hz);
}

int lk__pft_set_reader(struct lk__pft *p, struct lk__trace_reader *r)
{
	size_t had = p->r ? p->r->nclasses : 0, n = r->nclasses ? r->nclasses : 1;

	if (r->nclasses > had || !p->classes) {
		struct class_iids *grown = realloc(p->classes, n * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		memset(grown + had, 0, (n - had) * sizeof(*grown));
		p->classes = grown;
	}
	p->r = r;
	return 0;
}

static void pft_free(struct lk__pft *p)
{
	for (int i = 0; i < 4; i++)
		free(p->tables[i].slots);
	free(p->classes);
	free(p->path);
	lk__pb_free(&p->pb);
	free(p);
}

int lk__pft_open(struct lk__pft **out, int fd, const char *path, struct lk__trace_reader *r,
		 char *err, size_t errlen)
{
	struct lk__pft *p = calloc(1, sizeof(*p));
	struct stat st;
	int rc;

	*out = NULL;
	if (!p || !(p->path = strdup(path)) || lk__pft_set_reader(p, r) != 0) {
		if (p)
			pft_free(p);
		return lk__failf(err, errlen, -ENOMEM, "out of memory converting %s", r->dir);
	}
	/*
	 * Emptied only if it is not empty: ext4 flushes a file truncated to nothing when it is closed
	 * (its safeguard for files replaced in place), which made lk_trace_stop wait for the disk
	 * on the file lk_trace_start had just created.
	 */
	p->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (p->fd < 0 || fstat(p->fd, &st) != 0 || (st.st_size && ftruncate(p->fd, 0) != 0) ||
	    lseek(p->fd, 0, SEEK_SET) != 0) {
		rc = lk__failf(err, errlen, -errno, "cannot write %s: %s", path, strerror(errno));
		if (p->fd >= 0)
			close(p->fd);
		pft_free(p);
		return rc;
	}
	p->boot_offset_ns = boot_offset_ns();
	p->ns0 = r->monotonic0_ns;
	lk__pft_set_rate(p, r->tsc_hz);
	p->uuid_seed = mix64(r->realtime0_ns ^ (uint64_t)r->pid << 32);
	rc = begin_batch(p, &p->process);
	if (!rc)
		rc = describe_process(p);
	*out = p;
	return rc ? lk__failf(err, errlen, rc, "out of memory converting %s", r->dir) : 0;
}

int lk__pft_batch(struct lk__pft *p, struct lk__pft_stream *st, const uint8_t *data, size_t len,
		  size_t *consumed)
{
	static const struct lk__reader_ops ops = { on_stream_begin, on_event, on_stream_end };
	struct lk__stream_info s = { .tid = st->tid, .stream_id = st->sched, .file = "" };
	int rc;

	p->st = st;
	rc = lk__reader_walk_bytes(p->r, data, len, &s, &ops, p);
	*consumed = rc ? 0 : len - (size_t)s.truncated;
	return rc ? rc : p->pb.failed ? -ENOMEM : 0;
}

int lk__pft_stream_done(struct lk__pft *p, struct lk__pft_stream *st)
{
	int rc;

	if (!st->out.pending && !st->lost)
		return 0;
	rc = begin_batch(p, st);
	if (!rc && !st->thread_described)
		rc = describe_thread(p, NULL); /* a thread that lost every event it recorded */
	return rc ? rc : finish_stream(p);
}

/* ---- the consumer's fast path ---- */

/* The fixed start of argument i's annotation: its name's iid and its value's key. */
static void template_arg(struct event_template *t, unsigned int i, uint64_t name_iid,
			 unsigned int type)
{
	uint8_t *w = lk__pbw_uint(t->arg[i], DA_NAME_IID, name_iid);

	t->arg_double[i] = type == LK_PROBE_F64;
	switch (type) {
	case LK_PROBE_I64:
		w = lk__pbw_varint(w, DA_INT << 3 | LK__PB_VARINT);
		break;
	case LK_PROBE_F64:
		w = lk__pbw_varint(w, DA_DOUBLE << 3 | LK__PB_FIXED64);
		break;
	case LK_PROBE_PTR:
		w = lk__pbw_varint(w, DA_POINTER << 3 | LK__PB_VARINT);
		break;
	default:
		w = lk__pbw_varint(w, DA_UINT << 3 | LK__PB_VARINT);
		break;
	}
	t->arg_len[i] = (uint8_t)(w - t->arg[i]);
}

/* The track event's fixed start for a counter's value (as put_counter writes it), false if none. */
static bool template_counter(struct event_template *t, const struct class_iids *ci,
			     const struct lk__event_class *c)
{
	unsigned int type = lk__arg_type(c->arg_types, 0);
	uint8_t *w;

	if (c->nargs != 1 || !ci->counter_described || type == LK_PROBE_STR)
		return false;
	w = lk__pbw_uint(t->te, TE_TYPE, TYPE_COUNTER);
	w = lk__pbw_uint(w, TE_TRACK_UUID, ci->counter_track);
	if (type == LK_PROBE_F64)
		w = lk__pbw_varint(w, TE_DOUBLE_COUNTER_VALUE << 3 | LK__PB_FIXED64);
	else
		w = lk__pbw_varint(w, TE_COUNTER_VALUE << 3 | LK__PB_VARINT);
	t->counter = true;
	t->counter_u64 = type == LK_PROBE_U64;
	t->arg_double[0] = type == LK_PROBE_F64;
	t->te_len = (uint8_t)(w - t->te);
	return true;
}

/* The most bytes a packet from template t takes, its key and length aside (put_fast). */
static size_t longest_packet(const struct lk__pft *p, const struct event_template *t)
{
	size_t n = p->prefix_len + 1 + LK__PB_VARINT_MAX + 2 + t->te_len;

	if (t->counter)
		return n + LK__PB_VARINT_MAX;
	for (unsigned int i = 0; i < t->nargs; i++)
		n += 2 + t->arg_len[i] + LK__PB_VARINT_MAX;
	if (p->r->cputime && !t->instant)
		n += 1 + LK__PB_VARINT_MAX;
	return n;
}

/*
 * After a class's event went the slow way in this batch (its strings interned, its counter track
 * described): lay out its template, when its records have a fixed size and its packets a fixed
 * shape. Anything else keeps the slow path.
 */
static void make_template(struct lk__pft *p, uint32_t id, const struct lk__event_class *c)
{
	const struct lk__record_layout *l = &lk__record_layouts[id];
	struct class_iids *ci = &p->classes[id];
	struct event_template *t = &ci->fast;
	unsigned int type = c->kind == LK_PROBE_SPAN_BEGIN ? TYPE_SLICE_BEGIN :
			    c->kind == LK_PROBE_SPAN_END   ? TYPE_SLICE_END :
							     TYPE_INSTANT;
	uint8_t *w;

	if (p->slow_only || id < LK__FIRST_SITE_ID || !l->valid || l->strings ||
	    l->nargs != c->nargs || c->nargs > LK_PROBE_MAX_ARGS ||
	    lk__has_strings(c->arg_types, c->nargs) || p->st->sched || !p->st->thread_described)
		return;
	*t = (struct event_template){ .nargs = c->nargs, .instant = type == TYPE_INSTANT };
	t->record_size = (uint8_t)(LK__PROBE_HEADER + (p->r->cputime ? 8 : 0) + 8u * c->nargs);
	if (c->kind == LK_PROBE_COUNTER) {
		if (!template_counter(t, ci, c))
			return;
	} else if (type == TYPE_SLICE_END) {
		t->te_len = (uint8_t)(lk__pbw_uint(t->te, TE_TYPE, type) - t->te);
		t->nargs = 0; /* an end carries none (put_track_event) */
	} else {
		if (ci->gen != p->gen)
			return; /* its strings are not interned in this batch */
		w = lk__pbw_uint(t->te, TE_TYPE, type);
		w = lk__pbw_uint(w, TE_NAME_IID, ci->name);
		w = lk__pbw_uint(w, TE_CATEGORY_IIDS, ci->category);
		t->te_len = (uint8_t)(w - t->te);
		for (unsigned int i = 0; i < c->nargs; i++)
			template_arg(t, i, ci->arg[i], lk__arg_type(c->arg_types, i));
	}
	t->short_packet = longest_packet(p, t) < 0x80;
	t->gen = p->gen;
}

#define FAST_ROOM                                                                              \
	(2 + sizeof(((struct lk__pft *)0)->prefix) + 2 * LK__PB_VARINT_MAX + 2 + TEMPLATE_TE + \
	 LK_PROBE_MAX_ARGS * (2 + TEMPLATE_ARG + LK__PB_VARINT_MAX) + 2 * LK__PB_VARINT_MAX + 8)

/*
 * What the fast path reads for every record, in locals: the encoder writes bytes through a
 * uint8_t pointer, which may alias anything, so fields read through p would be read again after
 * every store.
 */
struct fast_run {
	const struct class_iids *classes;
	size_t nclasses;
	uint32_t gen;
	uint64_t now, tsc0, ns0, last_ns;
	struct lk__ns_scale scale;
	size_t fixed; /* a record's header and CPU time */
	bool cputime;
	bool slow; /* fast_records stopped at a record for the slow path */
	uint8_t prefix_len;
	uint8_t prefix[sizeof(((struct lk__pft *)0)->prefix)];
};

/* The template for the record at rec (avail bytes), if it goes the fast way; else NULL. */
static inline const struct event_template *fast_template(const struct fast_run *f, uint32_t id,
							 const uint8_t *rec, size_t avail)
{
	const struct event_template *t;
	uint64_t v;

	if (id >= f->nclasses)
		return NULL; /* a pad, or a class not known yet */
	t = &f->classes[id].fast;
	if (t->gen != f->gen || avail < t->record_size)
		return NULL; /* never laid out in this batch (always so with slow_only) */
	if (t->counter_u64) {
		memcpy(&v, rec + t->record_size - 8, sizeof(v));
		if (v > INT64_MAX)
			return NULL; /* a double (put_counter) */
	}
	return t;
}

/* Close a nested message whose length is known to fit in its one byte. */
static inline uint8_t *end_short(uint8_t *w, uint8_t *start)
{
	start[-1] = (uint8_t)(w - start);
	return w;
}

/* A record's packet from its template, as the slow path would write it, at w (FAST_ROOM bytes). */
static inline uint8_t *put_fast(struct fast_run *f, const struct event_template *t,
				const uint8_t *rec, uint8_t *w, uint64_t delta)
{
	const uint8_t *arg = rec + f->fixed;
	uint8_t *packet, *event;
	uint64_t v;

	packet = lk__pbw_begin(w, TRACE_PACKET);
	memcpy(packet, f->prefix, sizeof(f->prefix));
	w = lk__pbw_uint(packet + f->prefix_len, PKT_TIMESTAMP, delta);
	event = lk__pbw_begin(w, PKT_TRACK_EVENT);
	memcpy(event, t->te, TEMPLATE_TE);
	w = event + t->te_len;
	if (t->counter) {
		memcpy(&v, arg, sizeof(v));
		if (t->arg_double[0])
			memcpy(w, &v, 8), w += 8;
		else
			w = lk__pbw_varint(w, v);
	} else {
		for (unsigned int i = 0; i < t->nargs; i++, arg += 8) {
			uint8_t *a = lk__pbw_begin(w, TE_DEBUG_ANNOTATIONS);

			memcpy(a, t->arg[i], TEMPLATE_ARG);
			w = a + t->arg_len[i];
			memcpy(&v, arg, sizeof(v));
			if (t->arg_double[i])
				memcpy(w, &v, 8), w += 8;
			else
				w = lk__pbw_varint(w, v);
			w = t->short_packet ? end_short(w, a) : lk__pbw_end(w, a);
		}
		if (f->cputime && !t->instant) {
			memcpy(&v, rec + LK__PROBE_HEADER, sizeof(v));
			w = lk__pbw_uint(w, TE_EXTRA_COUNTER_VALUES, v);
		}
	}
	if (t->short_packet)
		return end_short(end_short(w, event), packet);
	return lk__pbw_end(lk__pbw_end(w, event), packet);
}

/*
 * The records from at that go the fast way, while the buffer has room below FLUSH_AT: returns
 * where it stopped (at a record for the slow path, at end, or where the buffer needs a flush).
 */
static const uint8_t *fast_records(struct lk__pft *p, struct fast_run *f, const uint8_t *at,
				   const uint8_t *end, uint64_t *events)
{
	uint8_t *w = p->pb.buf + p->pb.len, *stop = p->pb.buf + (p->pb.cap - FAST_ROOM);
	uint64_t n = 0;

	if (FLUSH_AT < p->pb.cap - FAST_ROOM)
		stop = p->pb.buf + FLUSH_AT;
	f->slow = true;
	while ((size_t)(end - at) >= LK__PROBE_HEADER) {
		const struct event_template *t;
		uint64_t head, tsc, ticks, ns;

		if (w > stop) {
			f->slow = false; /* room first */
			break;
		}
		memcpy(&head, at, sizeof(head));
		if (!(t = fast_template(f, lk__header_id(head), at, (size_t)(end - at))))
			break;
		tsc = lk__tsc_extend(f->now, lk__header_tsc48(head));
		ticks = tsc - f->tsc0;
		if (tsc < f->tsc0 || !lk__ns_scale_apply(&f->scale, ticks, &ns) ||
		    __builtin_add_overflow(ns, f->ns0, &ns))
			break; /* outside the trace's time: the slow path's clock_delta */
		/* Another CPU's TSC may be a hair behind: keep the thread's events in order. */
		w = put_fast(f, t, at, w, ns > f->last_ns ? ns - f->last_ns : 0);
		f->last_ns = ns > f->last_ns ? ns : f->last_ns;
		at += t->record_size;
		n++;
	}
	p->pb.len = (size_t)(w - p->pb.buf);
	p->fast += n;
	*events += n;
	return at;
}

/* A record the slow way: decoded as the reader decodes it from the CTF, written by the same code. */
static int put_record(struct lk__pft *p, const uint8_t *rec, size_t size, uint32_t id, uint64_t tsc)
{
	size_t fixed = LK__PROBE_HEADER + (p->r->cputime ? 8 : 0);
	struct lk__event e = { .tid = p->st->tid, .tsc = tsc, .cls = p->r->classes[id] };
	int rc;

	if (p->r->cputime)
		memcpy(&e.cputime_ns, rec + LK__PROBE_HEADER, sizeof(e.cputime_ns));
	e.payload = rec + fixed;
	e.payload_len = size - fixed;
	rc = on_event(&e, p);
	if (!rc)
		make_template(p, id, e.cls);
	return rc;
}

/*
 * A batch of st from its thread's ring: the records in [start, end), each with its full TSC
 * extended from now (read after they were committed). Runs of records with templates go the fast
 * way; the others, and each class's first in the batch, the slow way.
 */
int lk__pft_records(struct lk__pft *p, struct lk__pft_stream *st, const uint8_t *start,
		    const uint8_t *end, uint64_t now, const uint8_t **next, uint64_t *events)
{
	struct fast_run f = { .classes = p->classes,
			      .nclasses = p->r->nclasses,
			      .now = now,
			      .tsc0 = p->r->tsc0,
			      .ns0 = p->ns0,
			      .fixed = LK__PROBE_HEADER + (p->r->cputime ? 8 : 0),
			      .cputime = p->r->cputime };
	const uint8_t *at = start;
	int rc = begin_batch(p, st);

	*events = 0;
	f.gen = p->gen;
	f.prefix_len = p->prefix_len;
	memcpy(f.prefix, p->prefix, sizeof(f.prefix));
	while (!rc && (size_t)(end - at) >= LK__PROBE_HEADER) {
		uint64_t head;
		uint32_t id;
		size_t size;

		if (!lk__pb_room(&p->pb, FAST_ROOM)) {
			rc = -ENOMEM;
			break;
		}
		f.scale = p->scale;
		f.last_ns = st->last_ns;
		at = fast_records(p, &f, at, end, events);
		st->last_ns = f.last_ns;
		if (p->pb.len >= FLUSH_AT && (rc = flush(p)) != 0)
			break;
		if ((size_t)(end - at) < LK__PROBE_HEADER)
			break;
		if (!f.slow)
			continue; /* it stopped for room */
		memcpy(&head, at, sizeof(head));
		id = lk__header_id(head);
		size = lk__record_size(at, (size_t)(end - at), p->r->cputime);
		if (!size)
			break; /* a pad, or the end of what was committed */
		if (id >= p->r->nclasses || !p->r->classes[id]) {
			rc = -ENOENT; /* a site registered since the metadata was read */
			break;
		}
		if ((rc = put_record(p, at, size, id,
				     lk__tsc_extend(now, lk__header_tsc48(head)))) != 0)
			break;
		at += size;
		++*events;
	}
	*next = at;
	return rc ? rc : p->pb.failed ? -ENOMEM : 0;
}

void lk__pft_slow_only(struct lk__pft *p, bool slow)
{
	p->slow_only = slow;
}

uint64_t lk__pft_fast_records(const struct lk__pft *p)
{
	return p->fast;
}

int lk__pft_flush(struct lk__pft *p)
{
	return flush(p);
}

uint64_t lk__pft_bytes(const struct lk__pft *p)
{
	return p->written + p->pb.len;
}

int lk__pft_close(struct lk__pft *p, char *err, size_t errlen)
{
	int rc = flush(p);

	if (p->write_error)
		rc = lk__failf(err, errlen, -p->write_error, "writing %s failed: %s", p->path,
			       strerror(p->write_error));
	else if (rc)
		rc = lk__failf(err, errlen, rc, "out of memory writing %s", p->path);
	if (close(p->fd) != 0 && !rc)
		rc = lk__failf(err, errlen, -errno, "writing %s failed: %s", p->path,
			       strerror(errno));
	pft_free(p);
	return rc;
}

void lk__pft_discard(struct lk__pft *p)
{
	if (!p)
		return;
	close(p->fd);
	pft_free(p);
}

int lk__perfetto_convert(const char *in, const char *path, char *err, size_t errlen)
{
	int fd = lk__out_open(path, LK__OUT_REPLACE, NULL, err, errlen), rc;

	if (fd < 0)
		return fd;
	rc = lk__perfetto_convert_fd(in, fd, path, err, errlen);
	close(fd);
	return rc;
}

int lk__perfetto_write(struct lk__trace_file *t, int fd, const char *path, char *err, size_t errlen)
{
	static const struct lk__reader_ops ops = { on_stream_begin, on_event, on_stream_end };
	struct lk__pft *p = NULL;
	int rc = lk__pft_open(&p, fd, path, &t->r, err, errlen);

	if (!p)
		return rc;
	p->whole = true;
	if (!rc)
		rc = lk__trace_file_walk(t, &ops, p, err, errlen);
	if (rc == -ENOMEM || p->pb.failed)
		rc = lk__failf(err, errlen, -ENOMEM, "out of memory converting %s", t->r.dir);
	if (rc && rc != -EINVAL) {
		lk__pft_close(p, NULL, 0); /* err says what went wrong */
	} else {
		int closed = lk__pft_close(p, err,
					   errlen); /* after damage too: what came before is good */

		rc = rc ? rc : closed;
	}
	return rc;
}

int lk__perfetto_convert_fd(const char *in, int fd, const char *path, char *err, size_t errlen)
{
	struct lk__trace_file t;
	int rc;

	rc = lk__perfetto_live_finish(in, path, err, errlen);
	if (rc <= 0)
		return rc; /* written while the trace recorded */
	rc = lk__convert_open(&t, in, err, errlen);
	if (rc)
		return rc;
	rc = lk__perfetto_write(&t, fd, path, err, errlen);
	lk__trace_file_close(&t);
	return rc;
}
