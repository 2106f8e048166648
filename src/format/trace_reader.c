// SPDX-License-Identifier: MIT
/*
 * The public trace reader (lowkey/trace_reader.h): the trace file of any format (trace_file.h)
 * walked once into per-stream arrays, then merged in time order with a binary heap of the
 * streams, spans paired as they come out (spans.h).
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

/* An event kept in memory; its payload at `at` in lk_trace_file.bytes. */
struct tr_record {
	uint64_t ns, ticks, cpu_ns;
	size_t at;
	uint32_t cls, len;
};

struct tr_stream {
	struct tr_record *v;
	size_t n, cap, pos;
	uint32_t thread; /* index in lk_trace_file.threads */
};

struct tr_thread {
	int tid;
	char *name;
	uint64_t events, lost, truncated;
	struct lk__pair_stack open; /* its open spans ... */
	uint64_t *seq;		    /* ... and their begins' seq, by position */
	uint64_t *ticks;	    /* ... and ticks */
	size_t seq_cap, ticks_cap;
};

struct lk_trace_file {
	struct lk__trace_file file;
	struct lk_trace_file_info info;
	struct tr_thread *threads;
	size_t nthreads, capthreads;
	struct lk__tf_map thread_of; /* tid to index in threads */
	struct tr_stream *streams;
	size_t nstreams, capstreams;
	uint8_t *bytes; /* the payloads */
	size_t nbytes, capbytes;
	struct lk__pair_index pairs;
	uint32_t *class_of;    /* by the trace's class id: lk_trace_event.class_id */
	uint32_t *class_first; /* by class_id: the trace's first class id of it */
	size_t *heap;	       /* streams with events left, the earliest first */
	size_t nheap;
	uint64_t seq;
	int walk_rc; /* -ENOMEM while walking, for the message */
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

/* ---- reading the trace into memory ---- */

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
	tf->threads[tf->nthreads++] = (struct tr_thread){ .tid = tid };
	return 0;
}

static int on_stream_begin(const struct lk__stream_info *s, void *arg)
{
	struct lk_trace_file *tf = arg;
	uint32_t i;

	if (thread_index(tf, s->tid, &i) ||
	    grow((void **)&tf->streams, &tf->capstreams, tf->nstreams + 1, sizeof(*tf->streams)))
		return tf->walk_rc = -ENOMEM;
	tf->streams[tf->nstreams++] = (struct tr_stream){ .thread = i };
	return 0;
}

static int set_thread_name(struct lk_trace_file *tf, const struct lk__event *e)
{
	struct tr_thread *th = &tf->threads[tf->streams[tf->nstreams - 1].thread];
	uint64_t unused;
	const char *name = NULL;
	char *copy;

	lk__event_arg(e, 0, 0, &unused, &name);
	copy = strdup(name ? name : "");
	if (!copy)
		return tf->walk_rc = -ENOMEM;
	free(th->name);
	th->name = copy;
	tf->info.thread_names++;
	return 0;
}

static int on_event(const struct lk__event *e, void *arg)
{
	struct lk_trace_file *tf = arg;
	struct tr_stream *s = &tf->streams[tf->nstreams - 1];

	if (e->cls->id == LK__EVENT_THREAD_NAME)
		return set_thread_name(tf, e);
	if (grow((void **)&s->v, &s->cap, s->n + 1, sizeof(*s->v)) ||
	    grow((void **)&tf->bytes, &tf->capbytes, tf->nbytes + e->payload_len, 1))
		return tf->walk_rc = -ENOMEM;
	if (e->payload_len)
		memcpy(tf->bytes + tf->nbytes, e->payload, e->payload_len);
	s->v[s->n++] = (struct tr_record){ lk__reader_ns(&tf->file.r, e->tsc),
					   e->tsc,
					   e->cputime_ns,
					   tf->nbytes,
					   e->cls->id,
					   (uint32_t)e->payload_len };
	tf->nbytes += e->payload_len;
	tf->info.events++;
	tf->threads[s->thread].events++;
	return 0;
}

static int on_stream_end(const struct lk__stream_info *s, void *arg)
{
	struct lk_trace_file *tf = arg;
	struct tr_thread *th = &tf->threads[tf->streams[tf->nstreams - 1].thread];

	if (s->stream_id == 0) {
		tf->info.lost += s->lost;
		th->lost += s->lost;
	}
	th->truncated += s->truncated;
	return 0;
}

static int by_time(const void *a, const void *b)
{
	const struct tr_record *x = a, *y = b;

	if (x->ns != y->ns)
		return x->ns < y->ns ? -1 : 1;
	return x->at < y->at ? -1 : x->at > y->at; /* payloads are stored in recording order */
}

/* A thread's stream in time order; already so unless the trace was damaged. */
static void sort_stream(struct tr_stream *s)
{
	for (size_t i = 1; i < s->n; i++)
		if (s->v[i].ns < s->v[i - 1].ns) {
			qsort(s->v, s->n, sizeof(*s->v), by_time);
			return;
		}
}

static int read_all(struct lk_trace_file *tf)
{
	static const struct lk__reader_ops ops = { on_stream_begin, on_event, on_stream_end };
	char err[512];
	int rc = lk__trace_file_walk(&tf->file, &ops, tf, err, sizeof(err));

	if (rc == 0 || tf->walk_rc)
		rc = tf->walk_rc;
	else if (rc > 0)
		rc = -EINVAL;
	if (rc == -ENOMEM)
		return lk__fail(-ENOMEM, "out of memory reading %s",
				tf->file.r.dir ? tf->file.r.dir : "a trace");
	if (rc)
		return lk__fail(rc, "%s", err);
	for (size_t i = 0; i < tf->nstreams; i++)
		sort_stream(&tf->streams[i]);
	return 0;
}

static void fill_info(struct lk_trace_file *tf)
{
	const struct lk__trace_reader *r = &tf->file.r;
	struct lk_trace_file_info *in = &tf->info;

	in->format = tf->file.format == LK__TF_CTF  ? LK_TRACE_CTF :
		     tf->file.format == LK__TF_JSON ? LK_TRACE_JSON :
						      LK_TRACE_PERFETTO;
	in->format_name = tf->file.format_name;
	in->pid = r->pid;
	in->process_name = r->procname;
	in->threads = (unsigned int)tf->nthreads;
	in->sched_lost = r->sched_lost;
	in->dropped = r->dropped;
	in->truncated_streams = r->truncated_streams;
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

static bool earlier(const struct lk_trace_file *tf, size_t a, size_t b)
{
	const struct tr_stream *x = &tf->streams[a], *y = &tf->streams[b];
	const struct tr_record *p = &x->v[x->pos], *q = &y->v[y->pos];
	int tx = tf->threads[x->thread].tid, ty = tf->threads[y->thread].tid;

	if (p->ns != q->ns)
		return p->ns < q->ns;
	if (tx != ty)
		return tx < ty;
	return a < b; /* a thread's probes before its switches, as the walk gives them */
}

static void sift_down(struct lk_trace_file *tf, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, min = i, tmp;

		if (l < tf->nheap && earlier(tf, tf->heap[l], tf->heap[min]))
			min = l;
		if (r < tf->nheap && earlier(tf, tf->heap[r], tf->heap[min]))
			min = r;
		if (min == i)
			return;
		tmp = tf->heap[i];
		tf->heap[i] = tf->heap[min];
		tf->heap[min] = tmp;
		i = min;
	}
}

static void close_all_spans(struct lk_trace_file *tf)
{
	for (size_t i = 0; i < tf->nthreads; i++)
		lk__pair_close_from(&tf->pairs, &tf->threads[i].open,
				    0); /* shrinks: no allocation */
}

void lk_trace_file_rewind(struct lk_trace_file *tf)
{
	close_all_spans(tf);
	tf->nheap = 0;
	tf->seq = 0;
	for (size_t i = 0; i < tf->nstreams; i++) {
		tf->streams[i].pos = 0;
		if (tf->streams[i].n)
			tf->heap[tf->nheap++] = i;
	}
	for (size_t i = tf->nheap; i-- > 0;)
		sift_down(tf, i);
}

/* ---- one event out ---- */

static void decode_args(struct lk_trace_event *ev, const struct lk__event *e)
{
	size_t at = 0;

	ev->nargs = 0;
	for (unsigned int i = 0; i < e->cls->nargs && i < LK_PROBE_MAX_ARGS; i++) {
		struct lk_trace_arg *a = &ev->args[i];
		const char *str;
		uint64_t raw = 0;

		at = lk__event_arg(e, at, i, &raw, &str);
		if (!at)
			break; /* a payload shorter than its class says: the arguments it has */
		a->name = e->cls->arg_name[i];
		a->type = (enum lk_probe_type)((e->cls->arg_types >> (4 * i)) & 0xf);
		if (a->type == LK_PROBE_STR)
			a->v.str = str;
		else
			a->v.u64 = raw;
		ev->nargs = i + 1;
	}
}

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

static int end_span(struct lk_trace_file *tf, struct tr_thread *th, struct lk_trace_event *ev,
		    const struct lk__event *e)
{
	const struct lk__pair_open *o;
	size_t k;

	if (!lk__pair_match(&tf->pairs, &th->open, e->cls->id, &k))
		return 0;
	o = &th->open.v[k];
	ev->paired = true;
	ev->depth = (unsigned int)k;
	ev->begin_seq = th->seq[k];
	ev->begin_ns = o->tsc;
	ev->begin_ticks = th->ticks[k];
	ev->begin_cpu_ns = o->cpu;
	ev->duration_ns = ev->ns >= o->tsc ? ev->ns - o->tsc : 0;
	ev->cpu_duration_ns = ev->cpu_ns >= o->cpu ? ev->cpu_ns - o->cpu : 0;
	if (lk__pair_close_from(&tf->pairs, &th->open, k))
		return lk__fail(-ENOMEM, "out of memory pairing spans");
	return 0;
}

static int make_event(struct lk_trace_file *tf, const struct tr_stream *s,
		      const struct tr_record *rec, struct lk_trace_event *ev)
{
	struct tr_thread *th = &tf->threads[s->thread];
	const struct lk__event_class *cls = tf->file.r.classes[rec->cls];
	/* for the pairing and the arguments: the time in ns where the walk had the TSC */
	struct lk__event e = { th->tid, rec->ns, rec->cpu_ns, cls, tf->bytes + rec->at, rec->len };

	/* all but the arguments, which decode_args sets as far as nargs: the bulk of the event */
	_Static_assert(offsetof(struct lk_trace_event, depth) ==
			       offsetof(struct lk_trace_event, args) + sizeof(ev->args),
		       "args before depth");
	memset(ev, 0, offsetof(struct lk_trace_event, args));
	memset(&ev->depth, 0, sizeof(*ev) - offsetof(struct lk_trace_event, depth));
	ev->seq = tf->seq++;
	ev->tid = th->tid;
	ev->thread = s->thread;
	ev->thread_name = th->name ? th->name : "";
	ev->ns = rec->ns;
	ev->ticks = rec->ticks;
	ev->class_id = tf->class_of[rec->cls];
	ev->cpu_ns = rec->cpu_ns;
	ev->provider = cls->provider;
	ev->name = cls->event;
	decode_args(ev, &e);
	if (cls->id == LK__EVENT_SCHED_OUT || cls->id == LK__EVENT_SCHED_IN) {
		struct lk__switch sw = lk__event_switch(&e);

		ev->type = sw.out ? LK_TRACE_EV_SWITCH_OUT : LK_TRACE_EV_SWITCH_IN;
		ev->cpu = (unsigned int)sw.cpu;
		ev->preempted = sw.preempted;
		return 0;
	}
	ev->type = LK_TRACE_EV_PROBE;
	ev->kind = (enum lk_probe_kind)cls->kind;
	switch (ev->kind) {
	case LK_PROBE_SPAN_BEGIN:
		return begin_span(tf, th, ev, &e);
	case LK_PROBE_SPAN_END:
		return end_span(tf, th, ev, &e);
	case LK_PROBE_COUNTER:
		ev->value = lk__event_counter(&e);
		return 0;
	default:
		return 0;
	}
}

int lk_trace_file_next(struct lk_trace_file *tf, struct lk_trace_event *ev)
{
	struct tr_stream *s;
	const struct tr_record *rec;

	if (!tf->nheap)
		return 0;
	s = &tf->streams[tf->heap[0]];
	rec = &s->v[s->pos++];
	if (s->pos == s->n)
		tf->heap[0] = tf->heap[--tf->nheap];
	if (tf->nheap)
		sift_down(tf, 0);
	return make_event(tf, s, rec, ev) ?: 1;
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
	rc = read_all(tf);
	if (!rc)
		rc = init_pairs(tf);
	if (!rc && !(tf->heap = malloc((tf->nstreams + 1) * sizeof(*tf->heap))))
		rc = lk__fail(-ENOMEM, "out of memory reading %s", path);
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
	*th = (struct lk_trace_thread){ t->tid,	 t->name ? t->name : "", t->events,
					t->lost, t->truncated,		 t->open.depth };
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

const struct lk_trace_arg *lk_trace_event_arg(const struct lk_trace_event *ev, const char *name)
{
	for (unsigned int i = 0; i < ev->nargs && i < LK_PROBE_MAX_ARGS; i++)
		if (ev->args[i].name && strcmp(ev->args[i].name, name) == 0)
			return &ev->args[i];
	return NULL;
}

void lk_trace_file_close(struct lk_trace_file *tf)
{
	if (!tf)
		return;
	for (size_t i = 0; i < tf->nthreads; i++) {
		free(tf->threads[i].name);
		free(tf->threads[i].seq);
		free(tf->threads[i].ticks);
		lk__pair_stack_free(&tf->threads[i].open);
	}
	for (size_t i = 0; i < tf->nstreams; i++)
		free(tf->streams[i].v);
	free(tf->threads);
	free(tf->streams);
	free(tf->bytes);
	free(tf->heap);
	free(tf->class_of);
	free(tf->class_first);
	lk__tf_map_free(&tf->thread_of);
	lk__pair_free(&tf->pairs);
	lk__trace_file_close(&tf->file);
	free(tf);
}
