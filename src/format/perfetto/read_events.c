// SPDX-License-Identifier: MIT
/*
 * Reading a lowkey Perfetto trace back (read.h): its track events, into the trace file's events
 * -- slices paired into spans (an end, nameless, closes the thread's latest open slice), instants
 * with their arguments, lowkey:lost, counter values, and the off-CPU slices of a thread's context
 * switches.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/failf.h"
#include "format/perfetto/read.h"

struct track_event {
	uint64_t type, name_iid, category_iid, track, cpu_ns;
	bool has_track, has_cpu, has_value, is_double;
	uint64_t value;			/* counter_value, or double_counter_value's bits */
	uint64_t events, cpu, next_cpu; /* annotations lowkey's own events carry */
	bool has_events, has_cpu_arg, has_next_cpu;
};

/* The probe argument type of a debug annotation's value field as lowkey writes it; 0: none. */
static unsigned int annotation_type(const struct pb_field *f)
{
	switch (f->number) {
	case DA_UINT:
		return f->type == PB_VARINT ? LK_PROBE_U64 : 0;
	case DA_INT:
		return f->type == PB_VARINT ? LK_PROBE_I64 : 0;
	case DA_DOUBLE:
		return f->type == PB_FIXED64 ? LK_PROBE_F64 : 0;
	case DA_STRING:
		return f->type == PB_LEN ? LK_PROBE_STR : 0;
	case DA_POINTER:
		return f->type == PB_VARINT ? LK_PROBE_PTR : 0;
	default:
		return 0;
	}
}

/*
 * A debug annotation: a probe's argument, into the trace's collector (lk__trace_file.args); and
 * lowkey:lost's events, an off-CPU slice's cpu and next_cpu.
 */
static int annotation(struct pft_reader *p, const struct sequence *sq, const struct pb_field *a,
		      struct track_event *te)
{
	struct pb_cursor c = pb_cursor(a->data, a->len);
	uint64_t name_iid = 0, v = 0;
	unsigned int type = 0;
	const uint8_t *str = NULL;
	size_t slen = 0;
	struct pb_field f;
	struct str name;
	int got, rc;

	while ((got = pb_next(&c, &f)) > 0) {
		if (f.number == DA_NAME_IID && f.type == PB_VARINT)
			name_iid = f.value;
		else if (annotation_type(&f))
			type = annotation_type(&f), v = f.value, str = f.data, slen = f.len;
	}
	if (got < 0)
		return lk__pfr_malformed(p);
	if (!lk__pfr_lookup(sq, 3, name_iid, &name))
		return lk__pfr_refuse(p, "%s", "names an argument its sequence did not intern");
	if (!type)
		return 0;
	rc = lk__tf_arg(&p->t->args, name.s, name.n, type, v, (const char *)str, slen);
	if (rc == -E2BIG)
		return lk__pfr_refuse(p, "%s", "has more arguments than a probe can have");
	if (rc)
		return rc;
	if (type != LK_PROBE_U64)
		return 0;
	if (name.n == 6 && memcmp(name.s, "events", 6) == 0)
		te->events = v, te->has_events = true;
	else if (name.n == 3 && memcmp(name.s, "cpu", 3) == 0)
		te->cpu = v, te->has_cpu_arg = true;
	else if (name.n == 8 && memcmp(name.s, "next_cpu", 8) == 0)
		te->next_cpu = v, te->has_next_cpu = true;
	return 0;
}

/* Whether a track event's field has the wire type lowkey writes it with (others are skipped). */
static bool event_field_ok(const struct pb_field *f)
{
	switch (f->number) {
	case TE_DEBUG_ANNOTATIONS:
		return f->type == PB_LEN;
	case TE_DOUBLE_COUNTER_VALUE:
		return f->type == PB_FIXED64;
	case TE_TYPE:
	case TE_NAME_IID:
	case TE_CATEGORY_IIDS:
	case TE_TRACK_UUID:
	case TE_EXTRA_COUNTER_VALUES:
	case TE_COUNTER_VALUE:
		return f->type == PB_VARINT;
	default:
		return true;
	}
}

static int decode_event(struct pft_reader *p, const struct sequence *sq, const struct pb_field *ev,
			struct track_event *te)
{
	struct pb_cursor c = pb_cursor(ev->data, ev->len);
	struct pb_field f;
	int got, rc;

	lk__tf_args_reset(&p->t->args);
	while ((got = pb_next(&c, &f)) > 0) {
		if (!event_field_ok(&f))
			return lk__pfr_refuse(p, "%s",
					      "has a track event field of the wrong wire type");
		switch (f.number) {
		case TE_TYPE:
			te->type = f.value;
			break;
		case TE_NAME_IID:
			te->name_iid = f.value;
			break;
		case TE_CATEGORY_IIDS:
			te->category_iid = f.value;
			break;
		case TE_TRACK_UUID:
			te->track = f.value, te->has_track = true;
			break;
		case TE_EXTRA_COUNTER_VALUES:
			if (!te->has_cpu)
				te->cpu_ns = f.value, te->has_cpu = true;
			break;
		case TE_COUNTER_VALUE:
			te->value = f.value, te->has_value = true, te->is_double = false;
			break;
		case TE_DOUBLE_COUNTER_VALUE:
			te->value = f.value, te->has_value = true, te->is_double = true;
			break;
		case TE_DEBUG_ANNOTATIONS:
			if ((rc = annotation(p, sq, &f, te)) != 0)
				return rc;
			break;
		default:
			break;
		}
	}
	return got < 0 ? lk__pfr_malformed(p) : 0;
}

static int named_class(struct pft_reader *p, const struct sequence *sq,
		       const struct track_event *te, unsigned int kind, uint32_t *cls)
{
	struct str name, cat;
	int rc;

	if (!lk__pfr_lookup(sq, 2, te->name_iid, &name) ||
	    !lk__pfr_lookup(sq, 1, te->category_iid, &cat))
		return lk__pfr_refuse(p, "%s",
				      "names an event or category its sequence did not intern");
	rc = lk__tf_class_args(p->t, cat.s, cat.n, name.s, name.n, kind, &p->t->args, cls);
	return rc == -E2BIG ?
		       lk__pfr_refuse(p, "%s", "names more events than a lowkey trace can have") :
		       rc;
}

static int push_open(struct lk__tf_thread *th, uint32_t cls)
{
	if (th->depth == th->cap) {
		size_t cap = th->cap ? th->cap * 2 : 16;
		uint32_t *grown = realloc(th->open, cap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		th->open = grown;
		th->cap = cap;
	}
	th->open[th->depth++] = cls;
	return 0;
}

/* A slice's end closes the thread's latest open slice: the end of that span's class. */
static int end_class(struct pft_reader *p, struct lk__tf_thread *th, uint32_t *cls)
{
	const struct lk__event_class *begin;
	uint32_t id;
	int rc;

	if (!th->depth) /* its begin is not in the trace: a name Perfetto's ends do not carry */
		return lk__tf_class(p->t, "?", 1, "?", 1, LK_PROBE_SPAN_END, cls);
	id = th->open[--th->depth];
	if (lk__tf_map_get(&p->end_of, id, cls))
		return 0;
	begin = p->t->r.classes[id];
	rc = lk__tf_class(p->t, begin->provider, strlen(begin->provider), begin->event,
			  strlen(begin->event), LK_PROBE_SPAN_END, cls);
	return rc ? rc : lk__tf_map_put(&p->end_of, id, *cls);
}

static bool is(struct str s, const char *text)
{
	return s.n == strlen(text) && memcmp(s.s, text, s.n) == 0;
}

static int thread_event(struct pft_reader *p, const struct sequence *sq, struct lk__tf_thread *th,
			const struct track_event *te, uint64_t ns)
{
	uint32_t cls;
	struct str name, cat;
	int rc;

	switch (te->type) {
	case TYPE_SLICE_BEGIN:
		if ((rc = named_class(p, sq, te, LK_PROBE_SPAN_BEGIN, &cls)) ||
		    (rc = push_open(th, cls)))
			return rc;
		return lk__tf_event(p->t, th, cls, ns, te->cpu_ns, p->t->args.payload,
				    p->t->args.len);
	case TYPE_SLICE_END:
		if ((rc = end_class(p, th, &cls)) != 0)
			return rc == -E2BIG ?
				       lk__pfr_refuse(
					       p, "%s",
					       "names more events than a lowkey trace can have") :
				       rc;
		return lk__tf_event(p->t, th, cls, ns, te->cpu_ns, NULL, 0);
	case TYPE_INSTANT:
		if (lk__pfr_lookup(sq, 2, te->name_iid, &name) &&
		    lk__pfr_lookup(sq, 1, te->category_iid, &cat) && is(name, "lost") &&
		    is(cat, "lowkey") && te->has_events) {
			if (th->lost > UINT64_MAX - te->events)
				return lk__pfr_refuse(p, "%s",
						      "counts more lost events than can be");
			th->lost += te->events;
			return 0;
		}
		if ((rc = named_class(p, sq, te, LK_PROBE_EVENT, &cls)) != 0)
			return rc;
		return lk__tf_event(p->t, th, cls, ns, te->cpu_ns, p->t->args.payload,
				    p->t->args.len);
	default:
		return lk__pfr_refuse(p, "%s",
				      "puts an event lowkey does not write on a thread's track");
	}
}

static struct pending_out *pending_out(struct pft_reader *p, struct lk__tf_thread *th)
{
	size_t i = (size_t)(th - p->t->threads);

	if (i >= p->capouts) {
		size_t cap = p->capouts ? p->capouts : 16;
		struct pending_out *grown;

		while (cap <= i)
			cap *= 2;
		grown = realloc(p->outs, cap * sizeof(*grown));
		if (!grown)
			return NULL;
		memset(grown + p->capouts, 0, (cap - p->capouts) * sizeof(*grown));
		p->outs = grown;
		p->capouts = cap;
	}
	return &p->outs[i];
}

/* The off-CPU track: a slice from the switch out to the switch in, never nested. */
static int off_cpu_event(struct pft_reader *p, const struct sequence *sq, struct lk__tf_thread *th,
			 const struct track_event *te, uint64_t ns)
{
	struct pending_out *out = pending_out(p, th);
	struct str name, cat;
	int rc;

	if (!out)
		return -ENOMEM;
	if (te->type == TYPE_SLICE_END) {
		if (!out->pending)
			return lk__pfr_refuse(p, "%s", "ends an off-CPU slice that did not begin");
		out->pending = false;
		rc = lk__tf_off_cpu(p->t, th, out->ns, ns, out->preempted, out->cpu, out->next_cpu);
		return rc == -ERANGE ?
			       lk__pfr_refuse(
				       p, "%s",
				       "has off-CPU time before the thread's previous ended") :
			       rc;
	}
	if (te->type != TYPE_SLICE_BEGIN || !lk__pfr_lookup(sq, 2, te->name_iid, &name) ||
	    !lk__pfr_lookup(sq, 1, te->category_iid, &cat) || !is(cat, "off-cpu") ||
	    !(is(name, "preempted") || is(name, "blocked")) || !te->has_cpu_arg)
		return lk__pfr_refuse(p, "%s", "has an off-CPU event unlike lowkey's");
	if (out->pending)
		return lk__pfr_refuse(p, "%s", "nests off-CPU slices");
	*out = (struct pending_out){ true, is(name, "preempted"), ns, te->cpu, te->next_cpu };
	return 0;
}

int lk__pfr_track_event(struct pft_reader *p, struct sequence *sq, const struct pb_field *ev,
			uint64_t ns)
{
	struct track_event te = { 0 };
	const struct track *tr, *own;
	struct lk__tf_thread *th;
	int rc;

	if ((rc = decode_event(p, sq, ev, &te)) != 0)
		return rc;
	tr = lk__pfr_track(p, te.has_track ? te.track : sq->track);
	own = lk__pfr_track(p, sq->track); /* the sequence's: its thread's, or its off-CPU track */
	if (!tr || !own || own->kind == TRACK_PROCESS || own->kind == TRACK_COUNTER)
		return lk__pfr_refuse(p, "%s", "has an event on a track not described before it");
	if (!(th = lk__tf_thread(p->t, tr->kind == TRACK_THREAD ? tr->tid : own->tid)))
		return -ENOMEM;
	switch (tr->kind) {
	case TRACK_THREAD:
		return thread_event(p, sq, th, &te, ns);
	case TRACK_COUNTER:
		if (te.type != TYPE_COUNTER || !te.has_value)
			return lk__pfr_refuse(p, "%s", "has a counter event without a value");
		if (te.is_double) {
			double d;

			memcpy(&d, &te.value, sizeof(d));
			return lk__tf_counter(p->t, th, tr->cls, ns, d);
		}
		return lk__tf_counter(p->t, th, tr->cls, ns, (double)(int64_t)te.value);
	case TRACK_OFF_CPU:
		return off_cpu_event(p, sq, th, &te, ns);
	default:
		return lk__pfr_refuse(p, "%s", "has an event on a track lowkey puts none on");
	}
}

/* Off-CPU slices that did not end: the thread was off its CPU when the trace stopped. */
int lk__pfr_open_slices(struct pft_reader *p)
{
	for (size_t i = 0; i < p->capouts && i < p->t->nthreads; i++) {
		int rc;

		if (!p->outs[i].pending)
			continue;
		rc = lk__tf_off_cpu(p->t, &p->t->threads[i], p->outs[i].ns, UINT64_MAX,
				    p->outs[i].preempted, p->outs[i].cpu, 0);
		if (rc == -ERANGE)
			return lk__failf(p->err, p->errlen, -EINVAL,
					 "%s is damaged: thread %d's last off-CPU slice "
					 "begins before its previous one ended",
					 p->name, p->t->threads[i].tid);
		if (rc)
			return rc;
	}
	return 0;
}
