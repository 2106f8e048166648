// SPDX-License-Identifier: MIT
/*
 * lowkey's Perfetto traces (perfetto.c, docs/trace.md "Perfetto") read back into a trace file of
 * any format (trace_file.h), with the wire-format decoder of protobuf/pb_read.h.
 *
 * Only what lowkey writes is read, and anything else is refused: packets on lowkey's sequences
 * (8192 to 16383), each sequence opened by a packet that clears its state and ties its clock (id
 * 64, incremental, in ns) in a ClockSnapshot; strings interned per sequence with iids 1, 2, 3...;
 * a process track, a track per thread, a "thread CPU time" counter track per thread, a counter
 * track per provider:event and an "off-CPU" track per thread recorded with --sched. On those:
 * slices for spans (their ends, nameless, close the thread's latest open slice), instants for
 * events and for lowkey:lost, counter values, and off-CPU slices "preempted" or "blocked".
 *
 * A Perfetto file has no end marker: one cut at a packet's boundary reads as a shorter trace.
 * Cut anywhere else, or damaged so that a packet is not lowkey's, it is an error naming the byte.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lowkey/probe.h>

#include "internal/failf.h"
#include "format/perfetto/perfetto_proto.h"
#include "format/protobuf/pb_read.h"
#include "internal/trace_file.h"

struct str {
	const char *s;
	size_t n;
};

/* A sequence's interned strings of one kind: iid i is v[i - 1]. */
struct str_table {
	struct str *v;
	size_t n, cap;
};

struct sequence {
	bool started;
	uint64_t clock_ns;	    /* the incremental clock: the time of its last packet */
	uint64_t track;		    /* the defaults' track (0: none) */
	struct str_table tables[4]; /* 1: categories, 2: event names, 3: annotation names */
};

enum track_kind { TRACK_PROCESS = 1, TRACK_THREAD, TRACK_CPUTIME, TRACK_COUNTER, TRACK_OFF_CPU };

struct track {
	enum track_kind kind;
	int tid;      /* thread, CPU-time and off-CPU tracks */
	uint32_t cls; /* counter tracks */
};

/* A switch out whose switch in has not come yet. */
struct pending_out {
	bool pending, preempted;
	uint64_t ns, cpu, next_cpu;
};

struct pft_reader {
	struct lk__trace_file *t;
	const char *name;
	char *err;
	size_t errlen;
	size_t at; /* the packet's offset, for messages */
	struct sequence *seqs[SEQ_SPAN];
	struct track *tracks;
	size_t ntracks, captracks;
	struct lk__tf_map track_of; /* uuid to index in tracks */
	struct lk__tf_map end_of;   /* a span begin's class to its end's */
	struct pending_out *outs;   /* by thread index */
	size_t capouts;
	bool process_seen;
};

/* What one packet holds, gathered before any of it is acted on (fields may come in any order). */
struct packet {
	uint64_t seq, flags, timestamp, clock_id;
	bool has_seq, has_timestamp, has_clock_id;
	struct pb_field defaults, snapshot, descriptor, interned, event;
};

static int refuse(struct pft_reader *p, const char *fmt, const char *what)
{
	char why[200];

	snprintf(why, sizeof(why), fmt, what);
	return lk__failf(
		p->err, p->errlen, -EINVAL,
		"%s: the packet at byte %zu %s: not a Perfetto trace lowkey "
		"wrote, or a damaged one (lowkey report reads the traces of lowkey trace --format "
		"perfetto; open others in ui.perfetto.dev)",
		p->name, p->at, why);
}

static int malformed(struct pft_reader *p)
{
	return refuse(p, "%s", "is not a well-formed protobuf message");
}

/* ---- interned strings ---- */

static int intern_entry(struct pft_reader *p, struct str_table *tab, const struct pb_field *entry)
{
	struct pb_cursor c = pb_cursor(entry->data, entry->len);
	struct str s = { NULL, 0 };
	uint64_t iid = 0;
	struct pb_field f;
	int got;

	while ((got = pb_next(&c, &f)) > 0) {
		if (f.number == 1 && f.type == PB_VARINT)
			iid = f.value;
		else if (f.number == 2 && f.type == PB_LEN)
			s = (struct str){ (const char *)f.data, f.len };
	}
	if (got < 0)
		return malformed(p);
	if (iid != tab->n + 1 || !s.s)
		return refuse(p, "%s",
			      "interns a string out of order (lowkey numbers them 1, 2, 3...)");
	if (tab->n == tab->cap) {
		size_t cap = tab->cap ? tab->cap * 2 : 16;
		struct str *grown = realloc(tab->v, cap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		tab->v = grown;
		tab->cap = cap;
	}
	tab->v[tab->n++] = s;
	return 0;
}

static int interned_data(struct pft_reader *p, struct sequence *sq, const struct pb_field *data)
{
	struct pb_cursor c = pb_cursor(data->data, data->len);
	struct pb_field f;
	int got, rc;

	while ((got = pb_next(&c, &f)) > 0) {
		if (f.number < 1 || f.number > 3 || f.type != PB_LEN)
			return refuse(p, "%s", "interns something lowkey does not");
		if ((rc = intern_entry(p, &sq->tables[f.number], &f)) != 0)
			return rc;
	}
	return got < 0 ? malformed(p) : 0;
}

static bool lookup(const struct sequence *sq, unsigned int table, uint64_t iid, struct str *s)
{
	if (iid == 0 || iid > sq->tables[table].n)
		return false;
	*s = sq->tables[table].v[iid - 1];
	return true;
}

/* ---- sequences ---- */

static void clear_sequence(struct sequence *sq)
{
	for (int i = 0; i < 4; i++)
		sq->tables[i].n = 0;
	sq->track = 0;
	sq->clock_ns = 0;
	sq->started = false;
}

/* The first packet of a sequence: its clock, at the time the ClockSnapshot gives clock 64. */
static int clock_snapshot(struct pft_reader *p, struct sequence *sq, const struct pb_field *snap)
{
	struct pb_cursor c = pb_cursor(snap->data, snap->len);
	struct pb_field f, g;
	int got, got2;

	while ((got = pb_next(&c, &f)) > 0) {
		struct pb_cursor k;
		uint64_t id = 0, ts = 0;

		if (f.number != SNAP_CLOCKS || f.type != PB_LEN)
			continue;
		k = pb_cursor(f.data, f.len);
		while ((got2 = pb_next(&k, &g)) > 0) {
			if (g.number == CLOCK_ID && g.type == PB_VARINT)
				id = g.value;
			else if (g.number == CLOCK_TIMESTAMP && g.type == PB_VARINT)
				ts = g.value;
		}
		if (got2 < 0)
			return malformed(p);
		if (id == LK_CLOCK) {
			sq->clock_ns = ts;
			sq->started = true;
		}
	}
	if (got < 0)
		return malformed(p);
	return sq->started ?
		       0 :
		       refuse(p, "%s",
			      "starts a sequence without lowkey's clock (64) in its snapshot");
}

static int defaults(struct pft_reader *p, struct sequence *sq, const struct pb_field *def)
{
	struct pb_cursor c = pb_cursor(def->data, def->len), k;
	struct pb_field f, g;
	int got, got2;

	while ((got = pb_next(&c, &f)) > 0) {
		if (f.number == DEF_TIMESTAMP_CLOCK_ID && f.type == PB_VARINT &&
		    f.value != LK_CLOCK)
			return refuse(p, "%s", "times its sequence on a clock lowkey does not use");
		if (f.number != DEF_TRACK_EVENT || f.type != PB_LEN)
			continue;
		k = pb_cursor(f.data, f.len);
		while ((got2 = pb_next(&k, &g)) > 0)
			if (g.number == TED_TRACK_UUID && g.type == PB_VARINT)
				sq->track = g.value;
		if (got2 < 0)
			return malformed(p);
	}
	return got < 0 ? malformed(p) : 0;
}

/* ---- tracks ---- */

static int add_track(struct pft_reader *p, uint64_t uuid, struct track tr)
{
	uint32_t i;

	if (lk__tf_map_get(&p->track_of, uuid, &i)) {
		if (p->tracks[i].kind != tr.kind || p->tracks[i].tid != tr.tid ||
		    p->tracks[i].cls != tr.cls)
			return refuse(p, "%s", "describes a track again as something else");
		return 0;
	}
	if (p->ntracks == p->captracks) {
		size_t cap = p->captracks ? p->captracks * 2 : 64;
		struct track *grown = realloc(p->tracks, cap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		p->tracks = grown;
		p->captracks = cap;
	}
	if (p->ntracks >= UINT32_MAX - 1 ||
	    lk__tf_map_put(&p->track_of, uuid, (uint32_t)p->ntracks))
		return -ENOMEM;
	p->tracks[p->ntracks++] = tr;
	return 0;
}

static const struct track *track(const struct pft_reader *p, uint64_t uuid)
{
	uint32_t i;

	return lk__tf_map_get(&p->track_of, uuid, &i) ? &p->tracks[i] : NULL;
}

/* lowkey's labels of a flight recorder's snapshot: its lost events are older ones overwritten. */
static void process_label(struct pft_reader *p, const struct pb_field *f)
{
	static const char overwrite[] = "lowkey:overwrite", dropped[] = "lowkey:dropped=";
	const size_t prefix = sizeof(dropped) - 1;
	uint64_t n = 0;

	if (f->len == sizeof(overwrite) - 1 && !memcmp(f->data, overwrite, f->len)) {
		p->t->r.overwrite = true;
		return;
	}
	if (f->len <= prefix || f->len > prefix + 19 || memcmp(f->data, dropped, prefix))
		return;
	for (size_t i = prefix; i < f->len; i++) {
		if (f->data[i] < '0' || f->data[i] > '9')
			return;
		n = n * 10 + (uint64_t)(f->data[i] - '0'); /* 19 digits cannot overflow */
	}
	p->t->r.dropped = n;
}

static int process_descriptor(struct pft_reader *p, uint64_t uuid, const struct pb_field *pd)
{
	struct pb_cursor c = pb_cursor(pd->data, pd->len);
	struct pb_field f;
	int got;

	while ((got = pb_next(&c, &f)) > 0) {
		if (f.number == PD_PID && f.type == PB_VARINT && f.value <= INT_MAX)
			p->t->r.pid = (int)f.value;
		else if (f.number == PD_NAME && f.type == PB_LEN)
			snprintf(p->t->r.procname, sizeof(p->t->r.procname), "%.*s",
				 (int)(f.len < 63 ? f.len : 63), (const char *)f.data);
		else if (f.number == PD_LABELS && f.type == PB_LEN)
			process_label(p, &f);
	}
	if (got < 0)
		return malformed(p);
	p->process_seen = true;
	return add_track(p, uuid, (struct track){ TRACK_PROCESS, 0, 0 });
}

static int thread_descriptor(struct pft_reader *p, uint64_t uuid, const struct pb_field *td)
{
	struct pb_cursor c = pb_cursor(td->data, td->len);
	struct str name = { NULL, 0 };
	struct lk__tf_thread *th;
	struct pb_field f;
	uint64_t tid = 0;
	int got, rc;

	while ((got = pb_next(&c, &f)) > 0) {
		if (f.number == THD_TID && f.type == PB_VARINT)
			tid = f.value;
		else if (f.number == THD_NAME && f.type == PB_LEN)
			name = (struct str){ (const char *)f.data, f.len };
	}
	if (got < 0)
		return malformed(p);
	if (tid == 0 || tid > INT_MAX)
		return refuse(p, "%s", "describes a thread without a thread id lowkey records");
	if ((rc = add_track(p, uuid, (struct track){ TRACK_THREAD, (int)tid, 0 })) != 0)
		return rc;
	if (!(th = lk__tf_thread(p->t, (int)tid)))
		return -ENOMEM;
	return name.s ? lk__tf_thread_name(p->t, th, 0, name.s, name.n) : 0;
}

/* A child track of a thread's (CPU time, off-CPU) or of the process's (a counter's: "provider:event"). */
static int child_track(struct pft_reader *p, uint64_t uuid, uint64_t parent, struct str name,
		       bool counter, uint64_t counter_type)
{
	const struct track *of = track(p, parent);
	const char *colon = name.s ? memchr(name.s, ':', name.n) : NULL;
	uint32_t cls;
	int rc;

	if (!of)
		return refuse(p, "%s", "describes a track whose parent is not described before it");
	if (of->kind == TRACK_THREAD && counter && counter_type == COUNTER_THREAD_TIME_NS) {
		p->t->r.cputime = true;
		return add_track(p, uuid, (struct track){ TRACK_CPUTIME, of->tid, 0 });
	}
	if (of->kind == TRACK_THREAD && !counter && name.s && name.n == 7 &&
	    memcmp(name.s, "off-CPU", 7) == 0)
		return add_track(p, uuid, (struct track){ TRACK_OFF_CPU, of->tid, 0 });
	if (of->kind != TRACK_PROCESS || !counter || counter_type || !colon)
		return refuse(p, "%s", "describes a track lowkey does not write");
	rc = lk__tf_class(p->t, name.s, (size_t)(colon - name.s), colon + 1,
			  name.n - (size_t)(colon - name.s) - 1, LK_PROBE_COUNTER, &cls);
	if (rc == -E2BIG)
		return refuse(p, "%s", "names more counters than a lowkey trace can have");
	return rc ? rc : add_track(p, uuid, (struct track){ TRACK_COUNTER, 0, cls });
}

static int track_descriptor(struct pft_reader *p, const struct pb_field *td)
{
	struct pb_cursor c = pb_cursor(td->data, td->len), k;
	struct pb_field f, process = { 0 }, thread = { 0 }, g;
	uint64_t uuid = 0, parent = 0, counter_type = 0;
	bool counter = false;
	struct str name = { NULL, 0 };
	int got;

	while ((got = pb_next(&c, &f)) > 0) {
		if (f.number == TD_UUID && f.type == PB_VARINT)
			uuid = f.value;
		else if (f.number == TD_PARENT_UUID && f.type == PB_VARINT)
			parent = f.value;
		else if (f.number == TD_NAME && f.type == PB_LEN)
			name = (struct str){ (const char *)f.data, f.len };
		else if (f.number == TD_PROCESS && f.type == PB_LEN)
			process = f;
		else if (f.number == TD_THREAD && f.type == PB_LEN)
			thread = f;
		else if (f.number == TD_COUNTER && f.type == PB_LEN) {
			counter = true;
			k = pb_cursor(f.data, f.len);
			while ((got = pb_next(&k, &g)) > 0)
				if (g.number == CD_TYPE && g.type == PB_VARINT)
					counter_type = g.value;
			if (got < 0)
				return malformed(p);
		}
	}
	if (got < 0)
		return malformed(p);
	if (!uuid)
		return refuse(p, "%s", "describes a track without a uuid");
	if (process.data)
		return process_descriptor(p, uuid, &process);
	if (thread.data)
		return thread_descriptor(p, uuid, &thread);
	return child_track(p, uuid, parent, name, counter, counter_type);
}

/* ---- track events ---- */

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
		return malformed(p);
	if (!lookup(sq, 3, name_iid, &name))
		return refuse(p, "%s", "names an argument its sequence did not intern");
	if (!type)
		return 0;
	rc = lk__tf_arg(&p->t->args, name.s, name.n, type, v, (const char *)str, slen);
	if (rc == -E2BIG)
		return refuse(p, "%s", "has more arguments than a probe can have");
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
			return refuse(p, "%s", "has a track event field of the wrong wire type");
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
	return got < 0 ? malformed(p) : 0;
}

static int named_class(struct pft_reader *p, const struct sequence *sq,
		       const struct track_event *te, unsigned int kind, uint32_t *cls)
{
	struct str name, cat;
	int rc;

	if (!lookup(sq, 2, te->name_iid, &name) || !lookup(sq, 1, te->category_iid, &cat))
		return refuse(p, "%s", "names an event or category its sequence did not intern");
	rc = lk__tf_class_args(p->t, cat.s, cat.n, name.s, name.n, kind, &p->t->args, cls);
	return rc == -E2BIG ? refuse(p, "%s", "names more events than a lowkey trace can have") :
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
				       refuse(p, "%s",
					      "names more events than a lowkey trace can have") :
				       rc;
		return lk__tf_event(p->t, th, cls, ns, te->cpu_ns, NULL, 0);
	case TYPE_INSTANT:
		if (lookup(sq, 2, te->name_iid, &name) && lookup(sq, 1, te->category_iid, &cat) &&
		    is(name, "lost") && is(cat, "lowkey") && te->has_events) {
			if (th->lost > UINT64_MAX - te->events)
				return refuse(p, "%s", "counts more lost events than can be");
			th->lost += te->events;
			return 0;
		}
		if ((rc = named_class(p, sq, te, LK_PROBE_EVENT, &cls)) != 0)
			return rc;
		return lk__tf_event(p->t, th, cls, ns, te->cpu_ns, p->t->args.payload,
				    p->t->args.len);
	default:
		return refuse(p, "%s", "puts an event lowkey does not write on a thread's track");
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
			return refuse(p, "%s", "ends an off-CPU slice that did not begin");
		out->pending = false;
		rc = lk__tf_off_cpu(p->t, th, out->ns, ns, out->preempted, out->cpu, out->next_cpu);
		return rc == -ERANGE ?
			       refuse(p, "%s",
				      "has off-CPU time before the thread's previous ended") :
			       rc;
	}
	if (te->type != TYPE_SLICE_BEGIN || !lookup(sq, 2, te->name_iid, &name) ||
	    !lookup(sq, 1, te->category_iid, &cat) || !is(cat, "off-cpu") ||
	    !(is(name, "preempted") || is(name, "blocked")) || !te->has_cpu_arg)
		return refuse(p, "%s", "has an off-CPU event unlike lowkey's");
	if (out->pending)
		return refuse(p, "%s", "nests off-CPU slices");
	*out = (struct pending_out){ true, is(name, "preempted"), ns, te->cpu, te->next_cpu };
	return 0;
}

static int track_event(struct pft_reader *p, struct sequence *sq, const struct pb_field *ev,
		       uint64_t ns)
{
	struct track_event te = { 0 };
	const struct track *tr, *own;
	struct lk__tf_thread *th;
	int rc;

	if ((rc = decode_event(p, sq, ev, &te)) != 0)
		return rc;
	tr = track(p, te.has_track ? te.track : sq->track);
	own = track(p, sq->track); /* the sequence's: its thread's, or its off-CPU track */
	if (!tr || !own || own->kind == TRACK_PROCESS || own->kind == TRACK_COUNTER)
		return refuse(p, "%s", "has an event on a track not described before it");
	if (!(th = lk__tf_thread(p->t, tr->kind == TRACK_THREAD ? tr->tid : own->tid)))
		return -ENOMEM;
	switch (tr->kind) {
	case TRACK_THREAD:
		return thread_event(p, sq, th, &te, ns);
	case TRACK_COUNTER:
		if (te.type != TYPE_COUNTER || !te.has_value)
			return refuse(p, "%s", "has a counter event without a value");
		if (te.is_double) {
			double d;

			memcpy(&d, &te.value, sizeof(d));
			return lk__tf_counter(p->t, th, tr->cls, ns, d);
		}
		return lk__tf_counter(p->t, th, tr->cls, ns, (double)(int64_t)te.value);
	case TRACK_OFF_CPU:
		return off_cpu_event(p, sq, th, &te, ns);
	default:
		return refuse(p, "%s", "has an event on a track lowkey puts none on");
	}
}

/* ---- packets ---- */

static int gather(struct pft_reader *p, const struct pb_field *packet, struct packet *pk)
{
	struct pb_cursor c = pb_cursor(packet->data, packet->len);
	struct pb_field f;
	int got;

	while ((got = pb_next(&c, &f)) > 0) {
		bool varint = f.type == PB_VARINT, message = false;

		switch (f.number) {
		case PKT_SEQUENCE_ID:
			pk->seq = f.value, pk->has_seq = varint;
			break;
		case PKT_SEQUENCE_FLAGS:
			pk->flags = f.value;
			break;
		case PKT_TIMESTAMP:
			pk->timestamp = f.value, pk->has_timestamp = varint;
			break;
		case PKT_TIMESTAMP_CLOCK_ID:
			pk->clock_id = f.value, pk->has_clock_id = varint;
			break;
		case PKT_FIRST_ON_SEQUENCE:
			break; /* the cleared state says as much */
		case PKT_DEFAULTS:
			pk->defaults = f, message = true;
			break;
		case PKT_CLOCK_SNAPSHOT:
			pk->snapshot = f, message = true;
			break;
		case PKT_TRACK_DESCRIPTOR:
			pk->descriptor = f, message = true;
			break;
		case PKT_INTERNED_DATA:
			pk->interned = f, message = true;
			break;
		case PKT_TRACK_EVENT:
			pk->event = f, message = true;
			break;
		default:
			return refuse(p, "%s", "has a field lowkey does not write");
		}
		if (f.type != (message ? PB_LEN : PB_VARINT))
			return refuse(p, "%s", "has a field of the wrong wire type");
	}
	return got < 0 ? malformed(p) : 0;
}

static struct sequence *sequence(struct pft_reader *p, uint64_t id)
{
	struct sequence **sq = &p->seqs[id - SEQ_BASE];

	if (!*sq)
		*sq = calloc(1, sizeof(**sq));
	return *sq;
}

/* A sequence's state first, then its strings, then the packet's time, then what it describes. */
static int packet(struct pft_reader *p, const struct pb_field *field)
{
	struct packet pk = { 0 };
	struct sequence *sq;
	int rc;

	if ((rc = gather(p, field, &pk)) != 0)
		return rc;
	if (!pk.has_seq || pk.seq < SEQ_BASE || pk.seq >= SEQ_BASE + SEQ_SPAN)
		return refuse(
			p, "%s",
			"is on a sequence lowkey does not use (it numbers its own 8192 to 16383)");
	if (!(sq = sequence(p, pk.seq)))
		return -ENOMEM;
	if (pk.flags & SEQ_INCREMENTAL_STATE_CLEARED) {
		clear_sequence(sq);
		if (!pk.snapshot.data)
			return refuse(p, "%s", "starts a sequence without a clock snapshot");
		if ((rc = clock_snapshot(p, sq, &pk.snapshot)) != 0)
			return rc;
	} else if (!sq->started || pk.snapshot.data) {
		return refuse(p, "%s", "comes on a sequence before the packet that starts it");
	}
	if (pk.defaults.data && (rc = defaults(p, sq, &pk.defaults)) != 0)
		return rc;
	if (pk.interned.data && (rc = interned_data(p, sq, &pk.interned)) != 0)
		return rc;
	if (pk.has_timestamp && (!pk.has_clock_id || pk.clock_id == LK_CLOCK)) {
		if (sq->clock_ns > UINT64_MAX - pk.timestamp)
			return refuse(p, "%s", "has a time past the clock's range");
		sq->clock_ns += pk.timestamp;
	}
	if (pk.descriptor.data && (rc = track_descriptor(p, &pk.descriptor)) != 0)
		return rc;
	if (pk.event.data) {
		if (!pk.has_timestamp || (pk.has_clock_id && pk.clock_id != LK_CLOCK))
			return refuse(p, "%s", "has an event without a time on lowkey's clock");
		return track_event(p, sq, &pk.event, sq->clock_ns);
	}
	return 0;
}

/* Off-CPU slices that did not end: the thread was off its CPU when the trace stopped. */
static int open_slices(struct pft_reader *p)
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

static void free_reader(struct pft_reader *p)
{
	for (size_t i = 0; i < SEQ_SPAN; i++) {
		if (!p->seqs[i])
			continue;
		for (int k = 0; k < 4; k++)
			free(p->seqs[i]->tables[k].v);
		free(p->seqs[i]);
	}
	free(p->tracks);
	free(p->outs);
	lk__tf_map_free(&p->track_of);
	lk__tf_map_free(&p->end_of);
}

static int read_packets(struct pft_reader *p, const uint8_t *data, size_t len)
{
	struct pb_cursor c = pb_cursor(data, len);
	struct pb_field f;
	int got, rc;

	for (;;) {
		p->at = (size_t)(c.p - data);
		lk__tf_parsed(p->t, p->at);
		if ((got = pb_next(&c, &f)) <= 0)
			break;
		if (f.number != TRACE_PACKET || f.type != PB_LEN)
			return refuse(p, "%s", "is not a TracePacket");
		if ((rc = packet(p, &f)) != 0)
			return rc;
	}
	if (got < 0)
		return lk__failf(p->err, p->errlen, -EINVAL,
				 "%s is cut short or damaged at byte %zu (a packet runs past "
				 "the end of the file, or its length is not a varint)",
				 p->name, p->at);
	if (!p->process_seen)
		return lk__failf(p->err, p->errlen, -EINVAL,
				 "%s is not a Perfetto trace lowkey wrote: it describes no "
				 "process",
				 p->name);
	return open_slices(p);
}

int lk__perfetto_read(struct lk__trace_file *t, const uint8_t *data, size_t len, const char *name,
		      char *err, size_t errlen)
{
	struct pft_reader *p = calloc(1, sizeof(*p));
	int rc;

	if (!p)
		return lk__failf(err, errlen, -ENOMEM, "out of memory reading %s", name);
	*p = (struct pft_reader){ .t = t, .name = name, .err = err, .errlen = errlen };
	rc = read_packets(p, data, len);
	if (rc == -ENOMEM || rc == -E2BIG)
		rc = lk__failf(err, errlen, -ENOMEM, "out of memory reading %s", name);
	free_reader(p);
	free(p);
	return rc;
}
