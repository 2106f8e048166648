// SPDX-License-Identifier: MIT
/*
 * The Perfetto writer's general path (write.h): an event decoded as the CTF reader decodes it
 * becomes its packet -- a slice's begin or end, an instant, a counter's value, an off-CPU slice
 * from a thread's context switches, lowkey:lost -- timed on the sequence's incremental clock.
 * Converting a CTF trace, every event goes this way; on the consumer's fast path, each class's
 * first record of a batch and those without a template.
 */
#include <errno.h>
#include <string.h>

#include "format/perfetto/write.h"
#include "probe/probe_internal.h"

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
	w = lk__pft_put_interned(p, w);
	return lk__pbw_begin(w, PKT_TRACK_EVENT);
}

static int event_done(struct lk__pft *p, uint8_t *w, uint8_t *event, uint8_t *packet)
{
	lk__pb_commit(&p->pb, lk__pbw_end(lk__pbw_end(w, event), packet));
	return p->pb.len >= FLUSH_AT ? lk__pft_flush(p) : 0;
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
	const struct class_iids *ci = type == TYPE_SLICE_END ? NULL : lk__pft_class_iids(p, e->cls);
	size_t room =
		EVENT_ROOM + e->cls->nargs * 32 + 3 * e->payload_len + lk__pft_interned_room(p);
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
	if (!ci->counter_described && (rc = lk__pft_describe_counter(p, e->cls)) != 0)
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
	uint64_t name = lk__pft_intern(p, NAMES, p->st->out.preempted ? "preempted" : "blocked");
	uint64_t category = lk__pft_intern(p, CATEGORIES, "off-cpu"),
		 cpu = lk__pft_intern(p, ARG_NAMES, "cpu");
	uint64_t next = in_tsc ? lk__pft_intern(p, ARG_NAMES, "next_cpu") : 0;
	uint8_t *packet, *event, *w;
	int rc;

	event = event_packet(p, p->st->out.tsc, EVENT_ROOM + lk__pft_interned_room(p), &packet);
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

int lk__pft_on_event(const struct lk__event *e, void *arg)
{
	struct lk__pft *p = arg;
	uint64_t v;
	const char *name = NULL;
	int rc;

	if (e->cls->id == LK__EVENT_THREAD_NAME) {
		lk__event_arg(e, 0, 0, &v, &name);
		return lk__pft_describe_thread(p, name ? name : "");
	}
	if (!p->st->thread_described && (rc = lk__pft_describe_thread(p, NULL)) != 0)
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
int lk__pft_on_stream_begin(const struct lk__stream_info *s, void *arg)
{
	struct lk__pft *p = arg;

	if (p->whole)
		p->one = (struct lk__pft_stream){ .tid = s->tid, .sched = s->stream_id == 1 };
	return lk__pft_begin_batch(p, p->whole ? &p->one : p->st);
}

/* Lost events: an instant lowkey:lost with their count, after the thread's last event. */
static int put_lost(struct lk__pft *p, uint64_t lost)
{
	uint64_t name = lk__pft_intern(p, NAMES, "lost"),
		 category = lk__pft_intern(p, CATEGORIES, "lowkey");
	uint64_t events = lk__pft_intern(p, ARG_NAMES, "events");
	uint8_t *packet, *event, *w;

	if (!(w = lk__pb_reserve(&p->pb, EVENT_ROOM + lk__pft_interned_room(p))))
		return -ENOMEM;
	packet = lk__pbw_begin(w, TRACE_PACKET);
	w = lk__pbw_uint(packet, PKT_SEQUENCE_ID, p->st->seq);
	w = lk__pbw_uint(w, PKT_TIMESTAMP, 0);
	w = lk__pft_put_interned(p, w);
	event = lk__pbw_begin(w, PKT_TRACK_EVENT);
	w = lk__pbw_uint(event, TE_TYPE, TYPE_INSTANT);
	w = lk__pbw_uint(w, TE_NAME_IID, name);
	w = lk__pbw_uint(w, TE_CATEGORY_IIDS, category);
	w = put_arg(w, events, LK_PROBE_U64, lost, NULL);
	return event_done(p, w, event, packet);
}

/* The end of the stream's last batch: the switch out left open and the lost events, if any. */
int lk__pft_finish_stream(struct lk__pft *p)
{
	int rc = 0;

	if (p->st->out.pending)
		rc = put_off_cpu(p, 0, 0);
	if (!rc && p->st->lost)
		rc = put_lost(p, p->st->lost);
	return rc;
}

int lk__pft_on_stream_end(const struct lk__stream_info *s, void *arg)
{
	struct lk__pft *p = arg;
	int rc;

	if (!p->st->thread_described && (rc = lk__pft_describe_thread(p, NULL)) != 0)
		return rc;
	if (s->lost > p->st->lost)
		p->st->lost = s->lost; /* cumulative: the last packet's count */
	return p->whole ? lk__pft_finish_stream(p) : 0;
}
