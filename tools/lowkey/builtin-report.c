// SPDX-License-Identifier: MIT
/*
 * lowkey report TRACE: what a lowkey trace holds, summarized, from any of its formats: a CTF
 * directory, lowkey's Chrome JSON or its Perfetto protobuf (internal/trace_file.h reads them alike).
 *
 * Events by name with counts and rates; spans paired per thread (nested spans with a stack; an
 * end closes the latest open begin of its name) with their durations by wall time and, where the
 * trace recorded it, by thread CPU time; counter tracks; threads; lost events. With the threads'
 * context switches in the trace (lowkey trace --sched), each span's wall time split into on-CPU,
 * runnable (preempted, waiting for a CPU) and blocked (sleeping, waiting for I/O or a lock).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lowkey/lowkey.h>

#include "builtin.h"
#include "internal/json.h"
#include "internal/utf8.h"
#include "internal/probe.h"
#include "internal/ctf_reader.h"
#include "internal/trace_classes.h"
#include "util/report_html.h"
#include "internal/trace_spans.h"
#include "internal/trace_file.h"
#include "util/samples.h"
#include "util/status.h"

/* Time split by the context switches: on a CPU, runnable (preempted), blocked; ns. */
struct split {
	double wall, on_cpu, runnable, blocked;
};

struct per_class {
	uint64_t count;
	struct samples wall, cpu; /* span classes: durations in ns */
	struct split split;	  /* span classes, from the context switches */
	double min, max, last;	  /* counter classes */
	uint64_t first_tsc, last_tsc;
};

/* A closed span, kept to be split by the context switches once they are all read. */
struct span_interval {
	uint32_t first; /* its class's row */
	bool outermost;
	uint64_t begin, end; /* TSC */
};

/* The thread off its CPU: from a switch out to the next switch in. */
struct off_interval {
	uint64_t out, in; /* TSC; in = UINT64_MAX: never back before the trace ended */
	bool preempted;
};

struct per_thread {
	int tid;
	char name[64];
	uint64_t events, lost, first_tsc, last_tsc;
	uint64_t truncated;		  /* bytes after the stream's last whole packet */
	double span_wall_ns, span_cpu_ns; /* time in outermost spans */
	struct lk__pair_stack open;
	struct span_interval *spans; /* with context switches only */
	size_t nspans, capspans;
	struct off_interval *off;
	size_t noff, capoff;
	uint64_t switches;  /* switches out */
	struct split split; /* of the outermost spans */
	struct per_thread *next;
};

struct report {
	struct lk__trace_reader *r;
	const struct lk__trace_file *t;
	struct per_class *classes; /* by id: a name's figures are in its first id's */
	uint32_t *first;	   /* by id: the first id of the same provider:event and kind */
	uint32_t *rows; /* class ids by provider, event and kind: the order rows print in */
	size_t nrows;
	struct per_thread *threads, *current; /* threads: the latest first */
	struct per_thread **by_index;	      /* by_index[of_tid[tid]] */
	struct lk__tf_map of_tid;
	size_t nthreads, capthreads;
	struct lk__pair_index spans;
	uint64_t events, lost, first_tsc, last_tsc, unmatched_ends, open_at_end;
	uint64_t switches;
	uint64_t thread_names, switch_records; /* records of the trace not counted as events */
};

/* Append *item to the array *v of *n items (capacity *cap); -ENOMEM. */
static int push_item(void **v, size_t *n, size_t *cap, const void *item, size_t size)
{
	if (*n == *cap) {
		size_t grown_cap = *cap ? *cap * 2 : 64;
		void *grown = realloc(*v, grown_cap * size);

		if (!grown)
			return -ENOMEM;
		*v = grown;
		*cap = grown_cap;
	}
	memcpy((char *)*v + *n * size, item, size);
	(*n)++;
	return 0;
}

/* b - a in ns; the difference taken in integers, where no digit of either is lost. */
static double tsc_ns(const struct report *rep, uint64_t a, uint64_t b)
{
	double ticks = b >= a ? (double)(b - a) : -(double)(a - b);

	return ticks * 1e9 / (double)rep->r->tsc_hz;
}

/* A thread's streams: its probes (stream-TID), its context switches (stream-TID-sched). */
static int stream_begin(const struct lk__stream_info *s, void *arg)
{
	struct report *rep = arg;
	struct per_thread *t;
	uint32_t i;

	if (lk__tf_map_get(&rep->of_tid, (uint64_t)(uint32_t)s->tid, &i)) {
		rep->current = rep->by_index[i];
		return 0;
	}
	if (rep->nthreads >= UINT32_MAX - 1 ||
	    push_item((void **)&rep->by_index, &rep->nthreads, &rep->capthreads,
		      &(struct per_thread *){ NULL }, sizeof(t)))
		return -ENOMEM;
	t = calloc(1, sizeof(*t));
	if (!t ||
	    lk__tf_map_put(&rep->of_tid, (uint64_t)(uint32_t)s->tid, (uint32_t)rep->nthreads - 1)) {
		free(t);
		rep->nthreads--;
		return -ENOMEM;
	}
	rep->by_index[rep->nthreads - 1] = t;
	t->tid = s->tid;
	snprintf(t->name, sizeof(t->name), "?");
	t->next = rep->threads;
	rep->threads = rep->current = t;
	return 0;
}

/* An end closes the latest open begin of the same provider:name (internal/trace_spans.h). */
static int close_span(struct report *rep, struct per_thread *t, const struct lk__event *e)
{
	const struct lk__pair_open *o;
	struct per_class *c;
	double wall, cpu;
	size_t k;

	if (!lk__pair_match(&rep->spans, &t->open, e->cls->id, &k)) {
		rep->unmatched_ends++;
		return 0;
	}
	o = &t->open.v[k];
	c = &rep->classes[rep->first[o->id]];
	wall = tsc_ns(rep, o->tsc, e->tsc);
	cpu = (double)e->cputime_ns - (double)o->cpu;
	if (samples_push(&c->wall, wall) || (rep->r->cputime && samples_push(&c->cpu, cpu)))
		return -ENOMEM;
	if (k == 0) {
		t->span_wall_ns += wall;
		t->span_cpu_ns += cpu;
	}
	if (rep->r->sched) {
		struct span_interval s = { rep->first[o->id], k == 0, o->tsc, e->tsc };

		if (push_item((void **)&t->spans, &t->nspans, &t->capspans, &s, sizeof(s)))
			return -ENOMEM;
	}
	return lk__pair_close_from(&rep->spans, &t->open, k);
}

/* lowkey:sched_out opens an interval off the CPU, lowkey:sched_in closes it. */
static int on_switch(struct report *rep, struct per_thread *t, const struct lk__event *e)
{
	struct lk__switch sw = lk__event_switch(e);

	if (sw.out) {
		struct off_interval o = { e->tsc, UINT64_MAX, sw.preempted };

		t->switches++;
		rep->switches++;
		return push_item((void **)&t->off, &t->noff, &t->capoff, &o, sizeof(o));
	}
	if (t->noff && t->off[t->noff - 1].in == UINT64_MAX)
		t->off[t->noff - 1].in = e->tsc;
	return 0;
}

static int on_event(const struct lk__event *e, void *arg)
{
	struct report *rep = arg;
	struct per_thread *t = rep->current;
	struct per_class *c = &rep->classes[rep->first[e->cls->id]];
	uint64_t v = 0;
	const char *s;
	double d;

	if (e->cls->id == LK__EVENT_THREAD_NAME) {
		lk__event_arg(e, 0, 0, &v, &s);
		snprintf(t->name, sizeof(t->name), "%s", s ? s : "");
		rep->thread_names++;
		return 0;
	}
	if (e->cls->id == LK__EVENT_SCHED_OUT || e->cls->id == LK__EVENT_SCHED_IN) {
		rep->switch_records++;
		return on_switch(rep, t, e);
	}
	rep->events++;
	t->events++;
	if (!t->first_tsc || e->tsc < t->first_tsc)
		t->first_tsc = e->tsc;
	if (e->tsc > t->last_tsc)
		t->last_tsc = e->tsc;
	if (!c->count)
		c->first_tsc = e->tsc;
	c->count++;
	c->last_tsc = e->tsc;
	switch (e->cls->kind) {
	case LK_PROBE_SPAN_BEGIN:
		return lk__pair_open(&rep->spans, &t->open, e);
	case LK_PROBE_SPAN_END:
		return close_span(rep, t, e);
	case LK_PROBE_COUNTER:
		d = lk__event_counter(e);
		if (c->count == 1 || d < c->min)
			c->min = d;
		if (c->count == 1 || d > c->max)
			c->max = d;
		c->last = d;
		return 0;
	default:
		return 0;
	}
}

/* rep->first: each class's first id of the same name and kind; rep->rows: the rows in order. */
static int group_classes(struct report *rep)
{
	rep->first = calloc(rep->r->nclasses + 1, sizeof(*rep->first));
	rep->rows = rep->first ? lk__group_classes(rep->r, rep->first, &rep->nrows) : NULL;
	return rep->rows ? lk__pair_init(&rep->spans, rep->r, rep->rows, rep->nrows) : -ENOMEM;
}

static int stream_end(const struct lk__stream_info *s, void *arg)
{
	struct report *rep = arg;

	if (s->stream_id != 0)
		return 0; /* a thread's context switches: counted in on_switch */
	rep->current->lost = s->lost;
	rep->current->truncated = s->truncated;
	rep->lost += s->lost;
	rep->open_at_end += rep->current->open.depth;
	if (rep->current->first_tsc &&
	    (!rep->first_tsc || rep->current->first_tsc < rep->first_tsc))
		rep->first_tsc = rep->current->first_tsc;
	if (rep->current->last_tsc > rep->last_tsc)
		rep->last_tsc = rep->current->last_tsc;
	return 0;
}

/* ---- the split of spans by the context switches ---- */

static void add_split(struct split *to, const struct split *x)
{
	to->wall += x->wall;
	to->on_cpu += x->on_cpu;
	to->runnable += x->runnable;
	to->blocked += x->blocked;
}

/* The first of t's intervals off the CPU that ends after tsc (they are in time order). */
static size_t first_off_after(const struct per_thread *t, uint64_t tsc)
{
	size_t lo = 0, hi = t->noff;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->off[mid].in <= tsc)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static struct split split_span(const struct report *rep, const struct per_thread *t,
			       const struct span_interval *s)
{
	struct split x = { tsc_ns(rep, s->begin, s->end), 0, 0, 0 };

	for (size_t i = first_off_after(t, s->begin); i < t->noff && t->off[i].out < s->end; i++) {
		uint64_t from = t->off[i].out > s->begin ? t->off[i].out : s->begin;
		uint64_t to = t->off[i].in < s->end ? t->off[i].in : s->end;
		double ns = tsc_ns(rep, from, to);

		if (t->off[i].preempted)
			x.runnable += ns;
		else
			x.blocked += ns;
	}
	x.on_cpu = x.wall - x.runnable - x.blocked;
	return x;
}

static void split_spans(struct report *rep)
{
	for (struct per_thread *t = rep->threads; t; t = t->next)
		for (size_t i = 0; i < t->nspans; i++) {
			struct split x = split_span(rep, t, &t->spans[i]);

			add_split(&rep->classes[t->spans[i].first].split, &x);
			if (t->spans[i].outermost)
				add_split(&t->split, &x);
		}
}

/* ---- printing ---- */

static void fmt_ns(char *buf, size_t len, double ns)
{
	if (isnan(ns))
		snprintf(buf, len, "-");
	else if (ns < 1e3)
		snprintf(buf, len, "%.0f ns", ns);
	else if (ns < 1e6)
		snprintf(buf, len, "%.2f us", ns / 1e3);
	else if (ns < 1e9)
		snprintf(buf, len, "%.2f ms", ns / 1e6);
	else
		snprintf(buf, len, "%.2f s", ns / 1e9);
}

/* provider:event, fit for a terminal: the trace's text, escaped (lk__text_escape). */
static const char *class_name(const struct lk__event_class *c, char *buf, size_t len)
{
	char raw[512];

	snprintf(raw, sizeof(raw), "%s:%s", c->provider, c->event);
	return lk__text_escape(raw, buf, len);
}

/* Where the spans' wall time went, by the context switches (lowkey trace --sched). */
static void print_split(const struct report *rep)
{
	const struct lk__trace_reader *r = rep->r;
	char name[200], a[32], b[32], c[32], d[32];

	printf("\n%-32s %8s %12s %12s %12s %12s\n", "spans (time, --sched)", "count", "wall",
	       "on-CPU", "runnable", "blocked");
	for (size_t k = 0; k < rep->nrows; k++) { /* by name: the same order in every format */
		size_t i = rep->rows[k];
		const struct per_class *pc = &rep->classes[i];

		if (!r->classes[i] || !pc->wall.n)
			continue;
		fmt_ns(a, sizeof(a), pc->split.wall);
		fmt_ns(b, sizeof(b), pc->split.on_cpu);
		fmt_ns(c, sizeof(c), pc->split.runnable);
		fmt_ns(d, sizeof(d), pc->split.blocked);
		printf("  %-30s %8zu %12s %12s %12s %12s\n",
		       class_name(r->classes[i], name, sizeof(name)), pc->wall.n, a, b, c, d);
	}
	printf("  (%" PRIu64
	       " context switches; runnable: preempted, waiting for a CPU; blocked: sleeping or "
	       "waiting)\n",
	       rep->switches);
	if (r->sched_lost)
		printf("  %" PRIu64
		       " context switches were lost (the kernel's ring was full): the split is "
		       "approximate\n",
		       r->sched_lost);
}

/* Whole nanoseconds, not lk__json_num's 6 digits: the parts add up to the wall time. */
static void json_split(struct lk__json *j, const char *key, const struct split *x)
{
	lk__json_object(j, key);
	lk__json_fixed(j, "wall_ns", x->wall, 0);
	lk__json_fixed(j, "on_cpu_ns", x->on_cpu, 0);
	lk__json_fixed(j, "runnable_ns", x->runnable, 0);
	lk__json_fixed(j, "blocked_ns", x->blocked, 0);
	lk__json_close(j);
}

/* What a JSON or Perfetto trace cannot say that its CTF could. */
static void print_format_notes(const struct report *rep)
{
	const struct lk__trace_file *t = rep->t;

	printf("  read from lowkey's %s output, which carries no count of bytes left out of streams cut short%s\n",
	       t->format_name, rep->r->sched ? " nor of context switches the kernel lost" : "");
	if (t->format == LK__TF_JSON && rep->r->sched)
		printf("  JSON has the intervals off the CPU, not the switches: a switch out with no switch in after "
		       "it (the trace or the thread ended) is not in it\n");
	if (t->nonfinite_counters)
		printf("  %" PRIu64 " counter values were NaN or infinite and are not in the JSON "
		       "(otherData.nonfinite_counter_values)\n",
		       t->nonfinite_counters);
}

static void print_text(struct report *rep, const char *path)
{
	struct lk__trace_reader *r = rep->r;
	double seconds = rep->last_tsc > rep->first_tsc ?
				 tsc_ns(rep, rep->first_tsc, rep->last_tsc) / 1e9 :
				 0;
	char name[200], a[32], b[32], c[32], d[32], e[32], f[32], shown[256];

	printf("trace %s: %s (pid %d), %" PRIu64 " events over %.3f s, %zu threads, %" PRIu64
	       " lost\n",
	       path, lk__text_escape(r->procname, shown, sizeof(shown)), r->pid, rep->events,
	       seconds, rep->nthreads, rep->lost);
	if (rep->thread_names || rep->switch_records)
		printf("  not counted as events: %" PRIu64 " thread-name records, %" PRIu64
		       " context-switch "
		       "records (a CTF reader such as babeltrace2 counts them as events)\n",
		       rep->thread_names, rep->switch_records);
	if (rep->t->format != LK__TF_CTF)
		print_format_notes(rep);
	if (rep->lost && r->overwrite) {
		uint64_t dropped = r->dropped < rep->lost ? r->dropped : rep->lost;

		if (rep->lost > dropped)
			printf("  %" PRIu64
			       " older events overwritten: the flight recorder keeps the newest\n",
			       rep->lost - dropped);
		if (dropped)
			printf("  %" PRIu64
			       " events were dropped besides those (a signal handler's over an event in "
			       "progress, an event larger than --buffer / 8)\n",
			       dropped);
	} else if (rep->lost) {
		printf("  %" PRIu64
		       " events were dropped because a thread's buffer was full: see --buffer\n",
		       rep->lost);
	}
	for (struct per_thread *t = rep->threads; t; t = t->next)
		if (t->truncated)
			printf("  thread %d's stream ends inside a packet (%" PRIu64
			       " bytes, left out): its program "
			       "stopped mid-write; the events before are all here\n",
			       t->tid, t->truncated);

	printf("\n%-40s %12s %12s\n", "events", "count", "per second");
	for (size_t k = 0; k < rep->nrows; k++) { /* by name: the same order in every format */
		size_t i = rep->rows[k];
		struct per_class *pc = &rep->classes[i];

		if (!r->classes[i] || !pc->count || r->classes[i]->kind == LK_PROBE_SPAN_END)
			continue;
		printf("  %-38s %12" PRIu64 " %12.1f\n",
		       class_name(r->classes[i], name, sizeof(name)), pc->count,
		       seconds > 0 ? (double)pc->count / seconds : 0.0);
	}

	printf("\n%-32s %8s %10s %10s %10s", "spans (wall)", "count", "p50", "p99", "max");
	if (r->cputime)
		printf("   %10s %10s %10s", "p50 cpu", "p99 cpu", "max cpu");
	putchar('\n');
	for (size_t k = 0; k < rep->nrows; k++) { /* by name: the same order in every format */
		size_t i = rep->rows[k];
		struct per_class *pc = &rep->classes[i];

		if (!r->classes[i] || !pc->wall.n)
			continue;
		samples_sort(&pc->wall);
		samples_sort(&pc->cpu);
		fmt_ns(a, sizeof(a), samples_pct(&pc->wall, 50));
		fmt_ns(b, sizeof(b), samples_pct(&pc->wall, 99));
		fmt_ns(c, sizeof(c), samples_pct(&pc->wall, 100));
		printf("  %-30s %8zu %10s %10s %10s", class_name(r->classes[i], name, sizeof(name)),
		       pc->wall.n, a, b, c);
		if (r->cputime) {
			fmt_ns(d, sizeof(d), samples_pct(&pc->cpu, 50));
			fmt_ns(e, sizeof(e), samples_pct(&pc->cpu, 99));
			fmt_ns(f, sizeof(f), samples_pct(&pc->cpu, 100));
			printf("   %10s %10s %10s", d, e, f);
		}
		putchar('\n');
	}
	if (rep->open_at_end || rep->unmatched_ends)
		printf("  (%" PRIu64 " spans still open at the end of the trace, %" PRIu64
		       " ends without a begin)\n",
		       rep->open_at_end, rep->unmatched_ends);
	if (r->sched)
		print_split(rep);

	printf("\n%-32s %8s %14s %14s %14s\n", "counters", "count", "min", "max", "last");
	for (size_t k = 0; k < rep->nrows; k++) { /* by name: the same order in every format */
		size_t i = rep->rows[k];
		struct per_class *pc = &rep->classes[i];

		if (!r->classes[i] || !pc->count || r->classes[i]->kind != LK_PROBE_COUNTER)
			continue;
		printf("  %-30s %8" PRIu64 " %14.6g %14.6g %14.6g\n",
		       class_name(r->classes[i], name, sizeof(name)), pc->count, pc->min, pc->max,
		       pc->last);
	}

	printf("\n%-10s %-16s %10s %10s %12s", "threads", "name", "events", "lost", "in spans");
	if (r->cputime)
		printf(" %12s", "spans cpu");
	putchar('\n');
	for (struct per_thread *t = rep->threads; t; t = t->next) {
		fmt_ns(a, sizeof(a), t->span_wall_ns);
		printf("  %-8d %-16s %10" PRIu64 " %10" PRIu64 " %12s", t->tid,
		       lk__text_escape(t->name, shown, sizeof(shown)), t->events, t->lost, a);
		if (r->cputime) {
			fmt_ns(b, sizeof(b), t->span_cpu_ns);
			printf(" %12s", b);
		}
		putchar('\n');
	}
}

/* null: the format does not carry it */
static void json_count(struct lk__json *j, const char *key, bool known, uint64_t n)
{
	if (known)
		lk__json_uint(j, key, n);
	else
		lk__json_null(j, key);
}

static void json_percentiles(struct lk__json *j, const char *key, const struct samples *s)
{
	lk__json_object(j, key);
	lk__json_num(j, "p50", samples_pct(s, 50));
	lk__json_num(j, "p99", samples_pct(s, 99));
	lk__json_num(j, "max", samples_pct(s, 100));
	lk__json_close(j);
}

static void class_json(struct lk__json *j, const struct report *rep, size_t i)
{
	const struct lk__event_class *c = rep->r->classes[i];
	struct per_class *pc = &rep->classes[i];

	samples_sort(&pc->wall);
	samples_sort(&pc->cpu);
	lk__json_object_line(j, NULL);
	lk__json_str_or_null(j, "provider", c->provider);
	lk__json_str_or_null(j, "event", c->event);
	lk__json_str(j, "kind", lk__probe_kind_name(c->kind));
	lk__json_uint(j, "count", pc->count);
	if (pc->wall.n) {
		lk__json_uint(j, "spans", pc->wall.n);
		json_percentiles(j, "wall_ns", &pc->wall);
		if (rep->r->cputime)
			json_percentiles(j, "cpu_ns", &pc->cpu);
		if (rep->r->sched)
			json_split(j, "split", &pc->split);
	}
	if (c->kind == LK_PROBE_COUNTER) {
		lk__json_num(j, "min", pc->min);
		lk__json_num(j, "max", pc->max);
		lk__json_num(j, "last", pc->last);
	}
	lk__json_close(j);
}

static void thread_json(struct lk__json *j, const struct report *rep, const struct per_thread *t)
{
	lk__json_object_line(j, NULL);
	lk__json_int(j, "tid", t->tid);
	lk__json_str_or_null(j, "name", t->name);
	lk__json_uint(j, "events", t->events);
	lk__json_uint(j, "lost", t->lost);
	json_count(j, "truncated_bytes", rep->t->format == LK__TF_CTF, t->truncated);
	lk__json_num(j, "span_wall_ns", t->span_wall_ns);
	if (rep->r->cputime)
		lk__json_num(j, "span_cpu_ns", t->span_cpu_ns);
	if (rep->r->sched) {
		lk__json_uint(j, "switches", t->switches);
		json_split(j, "span_split", &t->split);
	}
	lk__json_close(j);
}

static void print_json(struct report *rep, const char *path)
{
	struct lk__trace_reader *r = rep->r;
	bool ctf = rep->t->format == LK__TF_CTF;
	struct lk__json j;

	lk__json_begin(&j, stdout, false);
	lk__json_str_or_null(&j, "trace", path);
	lk__json_str_or_null(&j, "procname", r->procname);
	lk__json_str(&j, "format",
		     ctf			   ? "ctf" :
		     rep->t->format == LK__TF_JSON ? "json" :
						     "perfetto");
	lk__json_int(&j, "pid", r->pid);
	lk__json_uint(&j, "events", rep->events);
	lk__json_uint(&j, "lost", rep->lost);
	json_count(&j, "truncated_streams", ctf, r->truncated_streams);
	lk__json_bool(&j, "cputime", r->cputime);
	lk__json_bool(&j, "sched", r->sched);
	if (r->sched) {
		lk__json_uint(&j, "switches", rep->switches);
		json_count(&j, "switches_lost", ctf, r->sched_lost);
	}
	lk__json_array(&j, "classes");
	for (size_t k = 0; k < rep->nrows; k++) { /* by name: the same order in every format */
		size_t i = rep->rows[k];

		if (r->classes[i] && rep->classes[i].count)
			class_json(&j, rep, i);
	}
	lk__json_close(&j);
	lk__json_array(&j, "threads");
	for (struct per_thread *t = rep->threads; t; t = t->next)
		thread_json(&j, rep, t);
	lk__json_close(&j);
	lk__json_end(&j);
}

static void free_report(struct report *rep)
{
	for (struct per_thread *t = rep->threads, *next; t; t = next) {
		next = t->next;
		lk__pair_stack_free(&t->open);
		free(t->spans);
		free(t->off);
		free(t);
	}
	for (size_t i = 0; rep->classes && i < rep->r->nclasses; i++) {
		free(rep->classes[i].wall.v);
		free(rep->classes[i].cpu.v);
	}
	free(rep->classes);
	free(rep->first);
	free(rep->rows);
	free(rep->by_index);
	lk__tf_map_free(&rep->of_tid);
	lk__pair_free(&rep->spans);
}

static const char report_usage[] =
	"usage: lowkey report [-j|--json | --html OUT] [-q|--quiet] TRACE\n"
	"\n"
	"Summarize a lowkey trace: events by name (count, rate), spans (durations p50/p99/max by wall\n"
	"time and, when the trace recorded it with --cputime, by thread CPU time), counter tracks,\n"
	"threads, and events lost to full buffers. When it recorded context switches (--sched), each\n"
	"span name's wall time split into on-CPU, runnable (preempted) and blocked. TRACE is a CTF\n"
	"directory, or a JSON or Perfetto file lowkey wrote (--format json|perfetto), told by content.\n"
	"\n"
	"  -j, --json  print the summary as JSON\n"
	"  --html OUT  write one self-contained HTML page to OUT ('-': standard output): latency\n"
	"              histograms, a per-thread timeline of spans, counters as line charts, the tables\n"
	"  -q, --quiet no status line while the trace is read (shown on a terminal only)\n";

static int report_run(int argc, char **argv)
{
	static const struct option opts[] = { { "json", no_argument, NULL, 'j' },
					      { "html", required_argument, NULL, 'H' },
					      { "quiet", no_argument, NULL, 'q' },
					      { NULL, 0, NULL, 0 } };
	const struct lk__reader_ops ops = { stream_begin, on_event, stream_end };
	struct lk__trace_file t;
	struct report rep = { 0 };
	bool json = false, quiet = false;
	const char *html = NULL;
	char err[512];
	int c, rc;

	optind = 1;
	while ((c = getopt_long(argc, argv, "jq", opts, NULL)) != -1) {
		if (c != 'j' && c != 'H' && c != 'q') {
			fputs(report_usage, stderr);
			return CLI_EXIT_USAGE;
		}
		json |= c == 'j';
		quiet |= c == 'q';
		html = c == 'H' ? optarg : html;
	}
	if (optind != argc - 1 || (json && html)) {
		fputs(report_usage, stderr);
		return CLI_EXIT_USAGE;
	}
	status_begin("report", !json && !quiet);
	if (html) {
		status_reading_begin(argv[optind], 2); /* the page walks the trace twice */
		rc = report_html(argv[optind], html);
		status_reading_end();
		return rc;
	}
	status_reading_begin(argv[optind], 1);
	rc = lk__trace_file_open(&t, argv[optind], err, sizeof(err));
	if (rc) {
		status_reading_end();
		cli_error("report", "record a trace with `lowkey trace` (any --format)", "%s", err);
		return CLI_EXIT_FAIL;
	}
	rep.r = &t.r;
	rep.t = &t;
	rep.classes = calloc(t.r.nclasses + 1, sizeof(*rep.classes));
	rc = rep.classes ? group_classes(&rep) : -ENOMEM;
	if (!rc)
		rc = lk__trace_file_walk(&t, &ops, &rep, err, sizeof(err));
	if (rc == 0)
		split_spans(&rep);
	status_reading_end();
	if (rc == 0) {
		if (json)
			print_json(&rep, argv[optind]);
		else
			print_text(&rep, argv[optind]);
	} else {
		cli_error("report", NULL, "%s", rc == -ENOMEM ? "out of memory" : err);
	}
	free_report(&rep);
	lk__trace_file_close(&t);
	return rc ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

const struct cli_command cmd_report = {
	.name = "report",
	.summary = "summarize a trace: events, spans, counters, threads, losses",
	.usage = report_usage,
	.run = report_run,
};
