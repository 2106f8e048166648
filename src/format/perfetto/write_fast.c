// SPDX-License-Identifier: MIT
/*
 * The Perfetto writer's fast path (write.h), for the consumer writing Perfetto while a trace
 * records: a class's events are packets that differ only in their timestamp's delta and their
 * arguments' values, so what does not change is laid out once a batch, after the class's first
 * event (which interns its strings and goes the general way, write_events.c), and copied for the
 * others. The bytes are those the general path writes (test_probe_pft_fast).
 */
#include <errno.h>
#include <string.h>

#include "format/perfetto/write.h"
#include "probe/probe_internal.h"

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
	rc = lk__pft_on_event(&e, p);
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
	int rc = lk__pft_begin_batch(p, st);

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
		if (p->pb.len >= FLUSH_AT && (rc = lk__pft_flush(p)) != 0)
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
