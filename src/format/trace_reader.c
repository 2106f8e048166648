// SPDX-License-Identifier: MIT
/*
 * The public trace reader (lowkey/trace_reader.h): a cursor on each stream of the trace file of
 * any format (trace_file.h), merged in time order with a binary heap of the streams, spans paired
 * as they come out (spans.h). Nothing is copied: the event given out points into its stream's
 * packet, so its stream moves on only at the next call. A CTF trace's counts are made by the
 * reading itself, complete at its end; a pass that counts only is made on demand
 * (lk_trace_file_count). A thread's name is read with its first packet, normally.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <lowkey/trace_reader.h>

#include "core/error.h"
#include "internal/trace_classes.h"
#include "internal/trace_spans.h"
#include "internal/trace_file.h"
#include "probe/probe_internal.h"

/* A stream, and the event it is at: the next it gives unless others are earlier. */
struct tr_stream {
	struct lk__tf_cursor *cur;
	struct lk__event e; /* its time in ns where the cursor put the TSC */
	uint64_t ticks;	    /* e's TSC */
	int tid;
	uint32_t thread; /* index in lk_trace_file.threads */
	uint64_t events; /* events given from it in this pass ... */
	size_t names;	 /* ... and its thread-name records read */
};

struct tr_thread {
	int tid;
	const char *name; /* the latest of names read, "" before the first */
	char **names;	  /* what its stream's name records say, in their order */
	size_t nnames, capnames;
	uint64_t events, lost, truncated; /* once lk_trace_file.counted; 0 before */
	struct lk__pair_stack open;	  /* its open spans ... */
	uint64_t *seq;			  /* ... and their begins' seq, by position */
	uint64_t *ticks;		  /* ... and ticks */
	size_t seq_cap, ticks_cap;
};

#define NONE SIZE_MAX

/* A stream in the merge's heap: the time of its event, then its thread and position as ties. */
struct tr_slot {
	uint64_t ns;
	uint64_t order; /* the tid (sign flipped: compared unsigned), then the stream's index */
};

struct lk_trace_file {
	struct lk__trace_file file;
	struct lk_trace_file_info info;
	struct tr_thread *threads;
	size_t nthreads, capthreads;
	struct lk__tf_map thread_of; /* tid to index in threads */
	struct lk__tf_cursor *cursors;
	struct tr_stream *streams;
	size_t nstreams;
	struct lk__pair_index pairs;
	uint32_t *class_of;    /* by the trace's class id: lk_trace_event.class_id */
	uint32_t *class_first; /* by class_id: the trace's first class id of it */
	struct tr_slot *heap;  /* streams at an event, the earliest first */
	size_t nheap;
	struct tr_slot second; /* the earliest of the heap's others: its top's children */
	size_t given;	/* the stream whose event was given last: moved on at the next call */
	size_t damaged; /* the stream an error was met on ... */
	int error;	/* ... that error, given from then on until a rewind */
	uint64_t seq;
	bool counted; /* the counts of info and threads are complete */
};

static int grow(void **v, size_t *cap, size_t need, size_t size)
{
	size_t n = *cap ? *cap : 16;
	void *grown;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	if (n > SIZE_MAX / size)
		return -ENOMEM;
	grown = realloc(*v, n * size);
	if (!grown)
		return -ENOMEM;
	*v = grown;
	*cap = n;
	return 0;
}

/* ---- the streams, their threads, and what they count ---- */

static int thread_index(struct lk_trace_file *tf, int tid, uint32_t *i)
{
	if (lk__tf_map_get(&tf->thread_of, (uint64_t)(uint32_t)tid, i))
		return 0;
	if (tf->nthreads >= UINT32_MAX - 1 ||
	    grow((void **)&tf->threads, &tf->capthreads, tf->nthreads + 1, sizeof(*tf->threads)))
		return -ENOMEM;
	*i = (uint32_t)tf->nthreads;
	if (lk__tf_map_put(&tf->thread_of, (uint64_t)(uint32_t)tid, *i))
		return -ENOMEM;
	tf->threads[tf->nthreads++] = (struct tr_thread){ .tid = tid, .name = "" };
	return 0;
}

/*
 * The k-th name record of th's stream, e, read: the thread is named by it. Each record's name is
 * kept once, however often the stream is read, and lives as long as the file: events point to it.
 */
static int read_name(struct tr_thread *th, size_t k, const struct lk__event *e)
{
	uint64_t unused;
	const char *name = NULL;
	char *copy;

	if (k < th->nnames) {
		th->name = th->names[k];
		return 0;
	}
	lk__event_arg(e, 0, 0, &unused, &name);
	if (grow((void **)&th->names, &th->capnames, th->nnames + 1, sizeof(*th->names)))
		return -ENOMEM;
	copy = strdup(name ? name : "");
	if (!copy)
		return -ENOMEM;
	th->names[th->nnames++] = copy;
	th->name = copy;
	return 0;
}

static void clear_counts(struct lk_trace_file *tf)
{
	struct lk_trace_file_info *in = &tf->info;

	in->events = in->thread_names = in->lost = in->truncated_streams = 0;
	for (size_t i = 0; i < tf->nthreads; i++)
		tf->threads[i].events = tf->threads[i].lost = tf->threads[i].truncated = 0;
}

/* A stream's counts added to its thread's and the trace's; whole: read to its end. */
static void add_stream(struct lk_trace_file *tf, struct tr_thread *th,
		       const struct lk__stream_info *in, uint64_t events, size_t names, bool whole)
{
	th->events += events;
	tf->info.events += events;
	tf->info.thread_names += names;
	if (in->stream_id == 0) {
		tf->info.lost += in->lost;
		th->lost += in->lost;
	}
	th->truncated += in->truncated;
	tf->info.truncated_streams += whole && in->truncated;
}

/*
 * One stream read through from its start by a cursor of its own: its events counted (the sizes
 * of the records only), its thread named. A damaged stream is counted as far as the damage, which
 * the merge meets and gives; a stream that was not there at open is left out.
 */
static int count_stream(struct lk_trace_file *tf, struct lk__tf_cursor *cur)
{
	const struct lk__stream_info *in = lk__tf_cursor_info(cur);
	uint64_t events = 0;
	size_t names = 0;
	struct lk__event e;
	uint32_t i;
	int rc;

	if (!lk__tf_map_get(&tf->thread_of, (uint64_t)(uint32_t)in->tid, &i))
		return 0;
	while ((rc = lk__tf_cursor_count(cur, &events, &e)) == 1)
		if (read_name(&tf->threads[i], names++, &e))
			return -ENOMEM;
	if (rc == -ENOMEM)
		return rc;
	add_stream(tf, &tf->threads[i], in, events, names, rc == 0);
	return 0;
}

/* Names a foreign CTF trace gave in a context field are not records of the trace: not counted. */
static void uncount_context_names(struct lk_trace_file *tf)
{
	uint64_t n = tf->file.context_names;

	tf->info.thread_names -= n < tf->info.thread_names ? n : tf->info.thread_names;
}

/* Every stream counted through the cursors v[n]: the counts complete. */
static int count_streams(struct lk_trace_file *tf, struct lk__tf_cursor *v, size_t n)
{
	clear_counts(tf);
	for (size_t i = 0; i < n; i++) {
		if (count_stream(tf, &v[i])) {
			clear_counts(tf);
			return -ENOMEM;
		}
	}
	uncount_context_names(tf);
	tf->counted = true;
	return 0;
}

/* The reading has come to the end of every stream: the counts are those it made. */
static void count_from_reading(struct lk_trace_file *tf)
{
	clear_counts(tf);
	for (size_t i = 0; i < tf->nstreams; i++) {
		const struct tr_stream *s = &tf->streams[i];

		add_stream(tf, &tf->threads[s->thread], lk__tf_cursor_info(s->cur), s->events,
			   s->names, true);
	}
	uncount_context_names(tf);
	tf->counted = true;
}

static int open_streams(struct lk_trace_file *tf)
{
	char err[512];
	int rc = lk__tf_cursors_open(&tf->file, &tf->cursors, &tf->nstreams, err, sizeof(err));

	if (rc)
		return lk__fail(rc, "%s", err);
	tf->streams = calloc(tf->nstreams + 1, sizeof(*tf->streams));
	tf->heap = malloc((tf->nstreams + 1) * sizeof(*tf->heap));
	rc = tf->streams && tf->heap ? 0 : -ENOMEM;
	for (size_t i = 0; i < tf->nstreams && !rc; i++) {
		struct tr_stream *s = &tf->streams[i];

		s->cur = &tf->cursors[i];
		s->tid = lk__tf_cursor_info(s->cur)->tid;
		rc = thread_index(tf, s->tid, &s->thread);
	}
	/* a file parsed whole at open is counted there: no reading from disk */
	if (!rc && tf->file.format != LK__TF_CTF)
		rc = count_streams(tf, tf->cursors, tf->nstreams);
	if (rc)
		return lk__fail(rc, "out of memory reading %s",
				tf->file.r.dir ? tf->file.r.dir : "a trace");
	lk__tf_sort_streams(&tf->file);
	return 0;
}

static void fill_info(struct lk_trace_file *tf)
{
	const struct lk__trace_reader *r = &tf->file.r;
	struct lk_trace_file_info *in = &tf->info;

	in->format = tf->file.format == LK__TF_JSON	? LK_TRACE_JSON :
		     tf->file.format == LK__TF_PERFETTO ? LK_TRACE_PERFETTO :
							  LK_TRACE_CTF;
	in->format_name = tf->file.format_name;
	in->pid = r->pid;
	in->process_name = r->procname;
	in->threads = (unsigned int)tf->nthreads;
	in->sched_lost = r->sched_lost;
	in->dropped = r->dropped;
	in->cputime = r->cputime;
	in->sched = r->sched;
	in->overwrite = r->overwrite;
	in->tick_hz = r->tsc_hz;
	in->nonfinite_counters = tf->file.nonfinite_counters;
}

/* lk_trace_event.class_id: the rows of lk__group_classes, numbered in their order. */
static int number_classes(struct lk_trace_file *tf, const uint32_t *first, const uint32_t *rows,
			  size_t nrows)
{
	size_t n = 0;

	tf->class_of = calloc(tf->file.r.nclasses + 1, sizeof(*tf->class_of));
	tf->class_first = calloc(nrows + 1, sizeof(*tf->class_first));
	if (!tf->class_of || !tf->class_first)
		return -ENOMEM;
	for (size_t k = 0; k < nrows; k++) {
		if (first[rows[k]] == rows[k])
			tf->class_first[n++] = rows[k];
		tf->class_of[rows[k]] = (uint32_t)n - 1;
	}
	tf->info.classes = (unsigned int)n;
	return 0;
}

/* The pairing's view of the classes: every provider:event is one name, whatever its kind. */
static int init_pairs(struct lk_trace_file *tf)
{
	const struct lk__trace_reader *r = &tf->file.r;
	uint32_t *first = calloc(r->nclasses + 1, sizeof(*first)), *rows = NULL;
	size_t nrows = 0;
	int rc = -ENOMEM;

	if (first)
		rows = lk__group_classes(r, first, &nrows);
	if (rows)
		rc = lk__pair_init(&tf->pairs, r, rows, nrows);
	if (!rc)
		rc = number_classes(tf, first, rows, nrows);
	free(rows);
	free(first);
	return rc ? lk__fail(rc, "out of memory reading %s", r->dir ? r->dir : "a trace") : 0;
}

/* ---- the merge ---- */

static inline bool earlier(const struct tr_slot *a, const struct tr_slot *b)
{
	/* a thread's probes before its switches (streams in the walk's order) */
	return a->ns < b->ns || (a->ns == b->ns && a->order < b->order);
}

/*
 * x put in the heap at i or below, where it belongs: the hole moves, x is written once (given by
 * value: a slot just changed in memory and read back whole would stall its store's forwarding).
 */
static void sift_down(struct lk_trace_file *tf, size_t i, struct tr_slot x)
{
	struct tr_slot *h = tf->heap;
	size_t n = tf->nheap;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= n)
			break;
		if (c + 1 < n && earlier(&h[c + 1], &h[c]))
			c++;
		if (!earlier(&h[c], &x))
			break;
		h[i] = h[c];
		i = c;
	}
	h[i] = x;
}

/* The heap's second earliest slot, or one later than any (a stream alone needs no merging). */
static struct tr_slot second(const struct lk_trace_file *tf)
{
	const struct tr_slot *h = tf->heap;

	if (tf->nheap > 2)
		return earlier(&h[1], &h[2]) ? h[1] : h[2];
	return tf->nheap == 2 ? h[1] : (struct tr_slot){ UINT64_MAX, UINT64_MAX };
}

static struct tr_slot slot(const struct tr_stream *s, size_t i)
{
	return (struct tr_slot){ s->e.tsc, (uint64_t)((uint32_t)s->tid ^ 0x80000000u) << 32 | i };
}

/*
 * The stream's next event, its time in ns in place of the TSC: 1, 0 at its end, or an error. A
 * time before the stream's previous one (a CPU whose counter is a hair behind another's) is
 * taken as that one: a thread's events keep the order it recorded them in.
 */
static inline __attribute__((always_inline)) int advance(struct lk_trace_file *tf,
							 struct tr_stream *s)
{
	uint64_t before = s->e.tsc, ns;
	int rc;

	for (;;) {
		rc = s->cur->v ? lk__tf_cursor_next(s->cur, &s->e) :
				 lk__ctf_cursor_next(&s->cur->ctf, &s->e);
		if (rc != 1 || s->e.cls->id != LK__EVENT_THREAD_NAME)
			break;
		/* once counted, the thread has the name of its last record */
		if (!tf->counted && read_name(&tf->threads[s->thread], s->names, &s->e))
			return -ENOMEM;
		s->names++;
	}
	if (rc != 1)
		return rc;
	s->ticks = s->e.tsc;
	ns = lk__reader_ns(&tf->file.r, s->ticks);
	s->e.tsc = ns > before ? ns : before;
	return 1;
}

static void close_all_spans(struct lk_trace_file *tf)
{
	for (size_t i = 0; i < tf->nthreads; i++)
		lk__pair_close_from(&tf->pairs, &tf->threads[i].open, 0);
}

/* Stream i has met an error: given now, and at every call until a rewind. */
static void damaged(struct lk_trace_file *tf, size_t i, int rc)
{
	tf->damaged = i;
	tf->error = rc;
}

void lk_trace_file_rewind(struct lk_trace_file *tf)
{
	close_all_spans(tf);
	tf->nheap = 0;
	tf->seq = 0;
	tf->given = NONE;
	tf->error = 0;
	for (size_t i = 0; i < tf->nstreams; i++) {
		struct tr_stream *s = &tf->streams[i];
		int rc;

		lk__tf_cursor_rewind(s->cur);
		s->e.tsc = 0;
		s->events = 0;
		s->names = 0;
		rc = advance(tf, s);
		if (rc == 1)
			tf->heap[tf->nheap++] = slot(s, i);
		else if (rc && !tf->error)
			damaged(tf, i, rc); /* before any event of its stream */
	}
	for (size_t i = tf->nheap; i-- > 0;)
		sift_down(tf, i, tf->heap[i]);
	tf->second = second(tf);
}

/* ---- one event out ---- */

static int begin_span(struct lk_trace_file *tf, struct tr_thread *th, struct lk_trace_event *ev,
		      const struct lk__event *e)
{
	ev->depth = (unsigned int)th->open.depth;
	if (grow((void **)&th->seq, &th->seq_cap, th->open.depth + 1, sizeof(*th->seq)) ||
	    grow((void **)&th->ticks, &th->ticks_cap, th->open.depth + 1, sizeof(*th->ticks)) ||
	    lk__pair_open(&tf->pairs, &th->open, e))
		return lk__fail(-ENOMEM, "out of memory pairing spans");
	th->seq[ev->depth] = ev->seq;
	th->ticks[ev->depth] = ev->ticks;
	return 0;
}

static void end_span(struct lk_trace_file *tf, struct tr_thread *th, struct lk_trace_event *ev,
		     const struct lk__event *e)
{
	const struct lk__pair_open *o;
	uint32_t *top;
	size_t k;

	top = lk__pair_match(&tf->pairs, &th->open, e->cls->id, &k);
	if (!top)
		return;
	o = &th->open.v[k];
	ev->paired = true;
	ev->depth = (unsigned int)k;
	ev->begin_class_id = tf->class_of[o->id];
	ev->begin_seq = th->seq[k];
	ev->begin_ns = o->tsc;
	ev->begin_ticks = th->ticks[k];
	ev->begin_cpu_ns = o->cpu;
	ev->duration_ns = ev->ns >= o->tsc ? ev->ns - o->tsc : 0;
	ev->cpu_duration_ns = ev->cpu_ns >= o->cpu ? ev->cpu_ns - o->cpu : 0;
	lk__pair_close(&tf->pairs, &th->open, k, top);
}

static int make_event(struct lk_trace_file *tf, const struct tr_stream *s,
		      struct lk_trace_event *ev)
{
	struct tr_thread *th = &tf->threads[s->thread];
	const struct lk__event *e = &s->e; /* its time in ns where the cursor had the TSC */
	const struct lk__event_class *cls = e->cls;

	/*
	 * Every field set, but the arguments past nargs (the bulk of the event): no memset, which
	 * cost more than the rest of the event.
	 */
	ev->kind = 0;
	ev->depth = 0;
	ev->paired = false;
	ev->begin_class_id = 0;
	ev->begin_seq = ev->begin_ns = ev->begin_ticks = ev->begin_cpu_ns = 0;
	ev->duration_ns = ev->cpu_duration_ns = 0;
	ev->value = 0;
	ev->cpu = 0;
	ev->preempted = false;
	ev->seq = tf->seq++;
	ev->tid = th->tid;
	ev->thread = s->thread;
	ev->thread_name = th->name;
	ev->ns = e->tsc;
	ev->ticks = s->ticks;
	ev->class_id = tf->class_of[cls->id];
	ev->cpu_ns = e->cputime_ns;
	ev->provider = cls->provider;
	ev->name = cls->event;
	/*
	 * Decoded on demand. Every reader checks a record holds its class's arguments, and a class
	 * has LK_PROBE_MAX_ARGS at most.
	 */
	ev->nargs = cls->nargs;
	ev->record.bytes = e->payload;
	ev->record.cls = cls;
	ev->record.len = e->payload_len;
	if (cls->id == LK__EVENT_SCHED_OUT || cls->id == LK__EVENT_SCHED_IN) {
		struct lk__switch sw = lk__event_switch(e);

		ev->type = sw.out ? LK_TRACE_EV_SWITCH_OUT : LK_TRACE_EV_SWITCH_IN;
		ev->cpu = (unsigned int)sw.cpu;
		ev->preempted = sw.preempted;
		return 0;
	}
	ev->type = LK_TRACE_EV_PROBE;
	ev->kind = (enum lk_probe_kind)cls->kind;
	switch (ev->kind) {
	case LK_PROBE_SPAN_BEGIN:
		return begin_span(tf, th, ev, e);
	case LK_PROBE_SPAN_END:
		end_span(tf, th, ev, e);
		return 0;
	case LK_PROBE_COUNTER:
		ev->value = lk__event_counter(e);
		return 0;
	default:
		return 0;
	}
}

/* The error met on a stream, with its message. */
static int give_error(struct lk_trace_file *tf)
{
	char err[512];

	lk__tf_cursor_error(tf->streams[tf->damaged].cur, tf->error, err, sizeof(err));
	return lk__fail(tf->error, "%s", err);
}

/*
 * The stream of the event given last moves on: its next event, or out of the heap. While its next
 * is still earlier than every other stream's, the heap stays as it is: one comparison.
 */
static int move_on(struct lk_trace_file *tf)
{
	size_t i = tf->given;
	struct tr_slot top = tf->heap[0];
	int rc;

	tf->given = NONE;
	rc = advance(tf, &tf->streams[i]);
	if (rc < 0) {
		damaged(tf, i, rc);
		return rc;
	}
	if (rc == 1) {
		top.ns = tf->streams[i].e.tsc;
		if (earlier(&top, &tf->second)) {
			tf->heap[0].ns = top.ns;
			return 0;
		}
	} else {
		top = tf->heap[--tf->nheap];
	}
	if (tf->nheap)
		sift_down(tf, 0, top);
	tf->second = second(tf);
	return 0;
}

int lk_trace_file_next(struct lk_trace_file *tf, struct lk_trace_event *ev)
{
	if (!tf->error && tf->given != NONE)
		move_on(tf);
	if (tf->error)
		return give_error(tf);
	if (!tf->nheap) {
		if (!tf->counted)
			count_from_reading(tf);
		return 0;
	}
	tf->given = (uint32_t)tf->heap[0].order;
	tf->streams[tf->given].events++;
	return make_event(tf, &tf->streams[tf->given], ev) ?: 1;
}

int lk_trace_file_count(struct lk_trace_file *tf)
{
	struct lk__tf_cursor *v;
	char err[512];
	size_t n;
	int rc;

	if (tf->counted)
		return 0;
	rc = lk__tf_cursors_open(&tf->file, &v, &n, err, sizeof(err));
	if (rc)
		return lk__fail(rc, "%s", err);
	rc = count_streams(tf, v, n);
	lk__tf_cursors_close(v, n);
	if (rc)
		return lk__fail(rc, "out of memory counting %s",
				tf->file.r.dir ? tf->file.r.dir : "a trace");
	return 0;
}

/* ---- opening and closing ---- */

int lk_trace_file_open(const char *path, struct lk_trace_file **out)
{
	struct lk_trace_file *tf = calloc(1, sizeof(*tf));
	char err[512];
	int rc;

	if (!tf)
		return lk__fail(-ENOMEM, "out of memory");
	if (!path) {
		free(tf);
		return lk__fail(-EINVAL, "no trace to read: the path is NULL");
	}
	rc = lk__trace_file_open(&tf->file, path, err, sizeof(err));
	if (rc) {
		free(tf);
		return lk__fail(rc, "%s", err);
	}
	rc = open_streams(tf);
	if (!rc)
		rc = init_pairs(tf);
	if (rc) {
		lk_trace_file_close(tf);
		return rc;
	}
	fill_info(tf);
	lk_trace_file_rewind(tf);
	*out = tf;
	return 0;
}

const struct lk_trace_file_info *lk_trace_file_get_info(const struct lk_trace_file *tf)
{
	return &tf->info;
}

int lk_trace_file_thread(const struct lk_trace_file *tf, unsigned int i, struct lk_trace_thread *th)
{
	const struct tr_thread *t;

	if (i >= tf->nthreads)
		return -ERANGE;
	t = &tf->threads[i];
	*th = (struct lk_trace_thread){ t->tid,	 t->name,      t->events,
					t->lost, t->truncated, t->open.depth };
	return 0;
}

int lk_trace_file_class(const struct lk_trace_file *tf, unsigned int id, struct lk_trace_class *cls)
{
	const struct lk__event_class *c;

	if (id >= tf->info.classes)
		return -ERANGE;
	c = tf->file.r.classes[tf->class_first[id]];
	*cls = (struct lk_trace_class){ c->provider, c->event, (enum lk_probe_kind)c->kind };
	return 0;
}

/* The event's record as the internal decoders take it. */
static struct lk__event record_of(const struct lk_trace_event *ev)
{
	return (struct lk__event){ .cls = ev->record.cls,
				   .payload = ev->record.bytes,
				   .payload_len = ev->record.len };
}

int lk_trace_event_arg(const struct lk_trace_event *ev, unsigned int i, struct lk_trace_arg *arg)
{
	struct lk__event e = record_of(ev);
	size_t at = 0;
	uint64_t u64 = 0;
	const char *str;

	if (i >= ev->nargs)
		return -ERANGE;
	for (unsigned int k = 0; k <= i; k++) {
		at = lk__event_arg(&e, at, k, &u64, &str);
		if (!at) /* a record shorter than its class: none that a reader gives */
			return -ERANGE;
	}
	arg->name = e.cls->arg_name[i];
	arg->type = (enum lk_probe_type)lk__arg_type(e.cls->arg_types, i);
	if (arg->type == LK_PROBE_STR)
		arg->v.str = str;
	else
		arg->v.u64 = u64;
	return 0;
}

int lk_trace_event_arg_named(const struct lk_trace_event *ev, const char *name,
			     struct lk_trace_arg *arg)
{
	const struct lk__event_class *cls = ev->record.cls;

	for (unsigned int i = 0; i < ev->nargs; i++)
		if (strcmp(cls->arg_name[i], name) == 0)
			return lk_trace_event_arg(ev, i, arg);
	return -ENOENT;
}

void lk_trace_file_close(struct lk_trace_file *tf)
{
	if (!tf)
		return;
	for (size_t i = 0; i < tf->nthreads; i++) {
		for (size_t k = 0; k < tf->threads[i].nnames; k++)
			free(tf->threads[i].names[k]);
		free(tf->threads[i].names);
		free(tf->threads[i].seq);
		free(tf->threads[i].ticks);
		lk__pair_stack_free(&tf->threads[i].open);
	}
	lk__tf_cursors_close(tf->cursors, tf->nstreams);
	free(tf->threads);
	free(tf->streams);
	free(tf->heap);
	free(tf->class_of);
	free(tf->class_first);
	lk__tf_map_free(&tf->thread_of);
	lk__pair_free(&tf->pairs);
	lk__trace_file_close(&tf->file);
	free(tf);
}
