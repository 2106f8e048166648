// SPDX-License-Identifier: MIT
/*
 * lowkey report --html OUT TRACE: the trace as one page -- latency histograms per span event (wall
 * time, and thread CPU time where recorded), a per-thread timeline of spans, counters as line
 * charts, and the table of events and threads.
 *
 * The trace is walked twice. The first walk gathers the figures and the shape (threads, nesting
 * depth, time range); the second draws the timeline straight into the page and samples the
 * counters, now that the time axis is known. Spans are paired as `lowkey report` pairs them (an
 * end closes the latest open begin of its provider:event). A span narrower than a pixel that
 * touches the previous one on its row is merged with it (the tooltip counts them), so the page's
 * size is bounded by the timeline's pixels, not by the trace's length.
 *
 * A trace with context switches (lowkey trace --sched) has a second stream per thread
 * (stream-TID-sched: lowkey:sched_out, lowkey:sched_in). Its intervals off the CPU are drawn on a
 * strip below the thread's spans, runnable (preempted) apart from blocked, merged the same way.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lowkey/probe.h>

#include "builtin.h"
#include "internal/outfile.h"
#include "html.h"
#include "internal/probe.h"
#include "internal/ctf_reader.h"
#include "internal/trace_file.h"
#include "internal/trace_classes.h"
#include "report_html.h"
#include "internal/trace_spans.h"
#include "samples.h"

#define MAX_ROWS 12	  /* span nesting drawn per thread; deeper spans are counted, not drawn */
#define MAX_LANES 64	  /* threads drawn on the timeline */
#define MAX_HISTOGRAMS 64 /* span events given histograms */
#define EXACT_POINTS \
	2000 /* a counter with more samples is drawn as each pixel column's min and max */
#define COLUMNS 800

struct point {
	double x, y;
};

/* A counter's samples: all of them in time order, or each pixel column's lowest and highest. */
struct counter_series {
	struct point *p;
	size_t n, cap;
	double *lo, *hi; /* COLUMNS each when there are more than EXACT_POINTS samples */
};

struct hclass {
	uint64_t count;
	struct samples wall, cpu;
	struct counter_series series;
	size_t color;
};

/* A rectangle waiting to be written: the spans merged into it so far. */
struct pending {
	double px0, px1;
	uint64_t count;
	uint32_t cls; /* the longest span's */
	bool mixed;   /* spans of several events */
	double wall_ns, cpu_ns, start_s, longest_ns;
};

/* An off-CPU interval waiting to be drawn, or the one open since a sched_out. */
struct pending_off {
	double px0, px1, longest_ns, total_ns;
	uint64_t count;
	bool preempted; /* the longest's state */
};

struct lane {
	int tid;
	char name[64];
	uint64_t events, lost, first_tsc;
	unsigned int rows; /* nesting depth reached, at most MAX_ROWS */
	uint64_t too_deep;
	bool drawn;
	struct lkh_lane lane;
	struct lk__pair_stack open;
	struct pending pend[MAX_ROWS];
	uint64_t switches;
	uint64_t out_tsc; /* the open sched_out's time; 0: on a CPU */
	bool out_preempted;
	struct pending_off off;
	struct lane *next;
};

struct hreport {
	struct lk__trace_reader *r;
	struct lk__trace_file *t; /* CTF, JSON or Perfetto (internal/trace_file.h) */
	struct hclass *classes;	  /* by id: a name's figures are in its first id's */
	uint32_t *first;
	uint32_t *rows; /* class ids by name: the order of charts and tables in every format */
	size_t nrows;
	struct lane *lanes, *current, *last; /* lanes: in the order the walk met them */
	struct lk__tf_map lane_of;	     /* tid to the lane's index in by_index */
	struct lane **by_index;
	size_t caplanes;
	unsigned int nlanes;
	struct lk__pair_index spans;
	uint64_t events, lost, first_tsc, last_tsc, unmatched;
	bool drawing; /* the second walk */
	struct lkh_timeline tl;
	FILE *f;
};

static int grow(void **v, size_t *cap, size_t n, size_t size)
{
	size_t c = *cap ? *cap * 2 : 64;
	void *p;

	if (n < *cap)
		return 0;
	p = realloc(*v, c * size);
	if (!p)
		return -ENOMEM;
	*v = p;
	*cap = c;
	return 0;
}

static double seconds(const struct hreport *h, uint64_t tsc)
{
	return tsc > h->first_tsc ? (double)(tsc - h->first_tsc) / (double)h->r->tsc_hz : 0;
}

/* b - a in ns; the difference taken in integers, where no digit of either is lost. */
static double tsc_ns(const struct hreport *h, uint64_t a, uint64_t b)
{
	double ticks = b >= a ? (double)(b - a) : -(double)(a - b);

	return ticks * 1e9 / (double)h->r->tsc_hz;
}

static const char *class_name(const struct lk__event_class *c, char *buf, size_t len)
{
	snprintf(buf, len, "%s:%s", c->provider, c->event);
	return buf;
}

/* ---- grouping classes by provider:event and kind, as lowkey report does ---- */

static int group_classes(struct hreport *h)
{
	const struct lk__trace_reader *r = h->r;
	size_t colors = 0;
	uint32_t *ids;

	h->first = calloc(r->nclasses + 1, sizeof(*h->first));
	h->classes = calloc(r->nclasses + 1, sizeof(*h->classes));
	ids = h->first && h->classes ? lk__group_classes(r, h->first, &h->nrows) : NULL;
	if (!ids)
		return -ENOMEM;
	for (size_t i = 0; i < h->nrows; i++)
		if (h->first[ids[i]] == ids[i] && r->classes[ids[i]]->kind == LK_PROBE_SPAN_BEGIN)
			h->classes[ids[i]].color = colors++;
	h->rows = ids;
	return lk__pair_init(&h->spans, r, ids, h->nrows);
}

/* ---- the walks ---- */

static struct lane *lane_of(struct hreport *h, int tid)
{
	struct lane *l;
	uint32_t i;

	if (lk__tf_map_get(&h->lane_of, (uint64_t)(uint32_t)tid, &i))
		return h->by_index[i];
	if (grow((void **)&h->by_index, &h->caplanes, h->nlanes, sizeof(*h->by_index)) ||
	    h->nlanes >= UINT32_MAX - 1)
		return NULL;
	l = calloc(1, sizeof(*l));
	if (!l || lk__tf_map_put(&h->lane_of, (uint64_t)(uint32_t)tid, h->nlanes)) {
		free(l);
		return NULL;
	}
	l->tid = tid;
	snprintf(l->name, sizeof(l->name), "?");
	*(h->last ? &h->last->next : &h->lanes) = l;
	h->last = l;
	h->by_index[h->nlanes++] = l;
	return l;
}

static int stream_begin(const struct lk__stream_info *s, void *arg)
{
	struct hreport *h = arg;

	h->current = lane_of(h, s->tid);
	if (!h->current)
		return -ENOMEM;
	if (s->stream_id != 0) { /* a thread's context switches: its probes' state stays */
		h->current->out_tsc = 0;
		return 0;
	}
	return lk__pair_close_from(&h->spans, &h->current->open, 0);
}

static void flush_row(struct hreport *h, struct lane *l, unsigned int row)
{
	struct pending *p = &l->pend[row];
	char name[200], wall[32], cpu[32], tip[320];

	if (!p->count)
		return;
	if (p->count == 1) {
		lkh_fmt_ns(wall, sizeof(wall), p->wall_ns);
		lkh_fmt_ns(cpu, sizeof(cpu), p->cpu_ns);
		snprintf(tip, sizeof(tip), "%s: %s wall%s%s, at %.6f s",
			 class_name(h->r->classes[p->cls], name, sizeof(name)), wall,
			 h->r->cputime ? ", CPU " : "", h->r->cputime ? cpu : "", p->start_s);
	} else {
		lkh_fmt_ns(wall, sizeof(wall), p->wall_ns);
		snprintf(tip, sizeof(tip), "%" PRIu64 " spans %s %s from %.6f s, %s wall in all",
			 p->count, p->mixed ? "drawn as one, the longest of" : "of",
			 class_name(h->r->classes[p->cls], name, sizeof(name)), p->start_s, wall);
	}
	lkh_timeline_span(&h->tl, &l->lane, row, p->px0, p->px1,
			  lkh_color(h->classes[h->first[p->cls]].color), tip);
	p->count = 0;
}

/* A closed span on the timeline: merged with the row's last rectangle when both are thin and touch. */
static void draw_span(struct hreport *h, struct lane *l, unsigned int row, uint32_t cls,
		      uint64_t t0, uint64_t t1, double wall, double cpu)
{
	struct pending *p = &l->pend[row];
	double px0 = lkh_timeline_px(&h->tl, seconds(h, t0)),
	       px1 = lkh_timeline_px(&h->tl, seconds(h, t1));

	/* at most about two rectangles a pixel: a thin span joins a thin rectangle it touches */
	if (p->count && px0 - p->px1 < 1.0 && px1 - px0 < 1.0 && p->px1 - p->px0 < 2.0) {
		p->px1 = fmax(p->px1, px1);
		p->count++;
		p->wall_ns += wall;
		p->cpu_ns += cpu;
		p->mixed |= h->first[p->cls] != h->first[cls];
		if (wall > p->longest_ns) {
			p->longest_ns = wall;
			p->cls = cls;
		}
		return;
	}
	flush_row(h, l, row);
	*p = (struct pending){ px0, px1, 1, cls, false, wall, cpu, seconds(h, t0), wall };
}

/* An end closes the latest open begin of the same provider:name (internal/trace_spans.h). */
static int close_span(struct hreport *h, struct lane *l, const struct lk__event *e)
{
	struct lk__pair_open o;
	struct hclass *c;
	double wall, cpu;
	size_t k;

	if (!lk__pair_match(&h->spans, &l->open, e->cls->id, &k)) {
		h->unmatched += !h->drawing;
		return 0;
	}
	o = l->open.v[k];
	if (lk__pair_close_from(&h->spans, &l->open, k))
		return -ENOMEM;
	wall = tsc_ns(h, o.tsc, e->tsc);
	cpu = (double)e->cputime_ns - (double)o.cpu;
	if (h->drawing) {
		if (k < l->rows && l->drawn)
			draw_span(h, l, (unsigned int)k, o.id, o.tsc, e->tsc, wall, cpu);
		return 0;
	}
	c = &h->classes[h->first[o.id]];
	if (samples_push(&c->wall, wall) || (h->r->cputime && samples_push(&c->cpu, cpu)))
		return -ENOMEM;
	if (k >= MAX_ROWS)
		l->too_deep++;
	else if (k + 1 > l->rows)
		l->rows = (unsigned int)k + 1;
	return 0;
}

static int add_point(struct counter_series *s, double x, double y)
{
	if (grow((void **)&s->p, &s->cap, s->n, sizeof(*s->p)))
		return -ENOMEM;
	s->p[s->n++] = (struct point){ x, y };
	return 0;
}

/* A counter's sample: kept, or folded into its pixel column's lowest and highest value. */
static int sample_counter(struct hreport *h, struct hclass *c, const struct lk__event *e)
{
	struct counter_series *s = &c->series;
	double x = seconds(h, e->tsc), y = lk__event_counter(e), span = seconds(h, h->last_tsc);
	int col;

	if (c->count <= EXACT_POINTS)
		return add_point(s, x, y);
	if (!s->lo) {
		s->lo = malloc(COLUMNS * sizeof(double));
		s->hi = malloc(COLUMNS * sizeof(double));
		if (!s->lo || !s->hi)
			return -ENOMEM;
		for (int k = 0; k < COLUMNS; k++)
			s->lo[k] = s->hi[k] = NAN;
	}
	col = span > 0 ? (int)(x / span * (COLUMNS - 1)) : 0;
	col = col < 0 ? 0 : col >= COLUMNS ? COLUMNS - 1 : col;
	s->lo[col] = isnan(s->lo[col]) ? y : fmin(s->lo[col], y);
	s->hi[col] = isnan(s->hi[col]) ? y : fmax(s->hi[col], y);
	return 0;
}

static int by_x(const void *a, const void *b)
{
	const struct point *p = a, *q = b;

	return (p->x > q->x) - (p->x < q->x);
}

/* The series in time order (threads' samples interleaved), columns as a low-high zigzag. */
static int series_points(struct hreport *h, struct counter_series *s, double **x, double **y,
			 size_t *n)
{
	double span = seconds(h, h->last_tsc);

	if (s->lo)
		for (int k = 0; k < COLUMNS; k++)
			if (!isnan(s->lo[k]) && (add_point(s, span * k / (COLUMNS - 1), s->lo[k]) ||
						 add_point(s, span * k / (COLUMNS - 1), s->hi[k])))
				return -ENOMEM;
	if (s->n)
		qsort(s->p, s->n, sizeof(*s->p), by_x);
	*x = malloc((s->n + 1) * sizeof(double));
	*y = malloc((s->n + 1) * sizeof(double));
	if (!*x || !*y)
		return -ENOMEM;
	for (size_t i = 0; i < s->n; i++) {
		(*x)[i] = s->p[i].x;
		(*y)[i] = s->p[i].y;
	}
	*n = s->n;
	return 0;
}

static void flush_off(struct hreport *h, struct lane *l)
{
	struct pending_off *p = &l->off;
	char total[32], tip[160];

	if (!p->count)
		return;
	lkh_fmt_ns(total, sizeof(total), p->total_ns);
	if (p->count == 1)
		snprintf(tip, sizeof(tip), "off the CPU for %s: %s", total,
			 p->preempted ? "runnable (preempted)" : "blocked (asleep, waiting)");
	else
		snprintf(tip, sizeof(tip),
			 "%" PRIu64 " times off the CPU drawn as one, %s in all, the longest %s",
			 p->count, total, p->preempted ? "runnable (preempted)" : "blocked");
	lkh_timeline_offcpu(&h->tl, &l->lane, p->px0, p->px1,
			    p->preempted ? LKH_RUNNABLE : LKH_BLOCKED, tip);
	p->count = 0;
}

static void draw_off(struct hreport *h, struct lane *l, uint64_t out, uint64_t in, bool preempted)
{
	struct pending_off *p = &l->off;
	double px0 = lkh_timeline_px(&h->tl, seconds(h, out)),
	       px1 = lkh_timeline_px(&h->tl, seconds(h, in));
	double ns = tsc_ns(h, out, in);

	if (p->count && px0 - p->px1 < 1.0 && px1 - px0 < 1.0 && p->px1 - p->px0 < 2.0) {
		p->px1 = fmax(p->px1, px1);
		p->count++;
		p->total_ns += ns;
		if (ns > p->longest_ns) {
			p->longest_ns = ns;
			p->preempted = preempted;
		}
		return;
	}
	flush_off(h, l);
	*p = (struct pending_off){ px0, px1, ns, ns, 1, preempted };
}

/* lowkey:sched_out (u64 cpu, u64 preempted) leaves the CPU, lowkey:sched_in comes back. */
static void on_switch(struct hreport *h, struct lane *l, const struct lk__event *e)
{
	uint64_t cpu = 0, preempted = 0;
	const char *s;
	size_t off = lk__event_arg(e, 0, 0, &cpu, &s);

	if (!h->drawing) {
		l->switches += e->cls->id == LK__EVENT_SCHED_OUT;
		return;
	}
	if (e->cls->id == LK__EVENT_SCHED_OUT) {
		if (off)
			lk__event_arg(e, off, 1, &preempted, &s);
		l->out_tsc = e->tsc;
		l->out_preempted = preempted != 0;
	} else if (l->out_tsc) {
		if (l->drawn)
			draw_off(h, l, l->out_tsc, e->tsc, l->out_preempted);
		l->out_tsc = 0;
	}
}

static int on_event(const struct lk__event *e, void *arg)
{
	struct hreport *h = arg;
	struct lane *l = h->current;
	struct hclass *c = &h->classes[h->first[e->cls->id]];
	uint64_t v = 0;
	const char *s = NULL;

	if (e->cls->id == LK__EVENT_THREAD_NAME) {
		lk__event_arg(e, 0, 0, &v, &s);
		snprintf(l->name, sizeof(l->name), "%s", s ? s : "");
		return 0;
	}
	if (e->cls->id == LK__EVENT_SCHED_OUT || e->cls->id == LK__EVENT_SCHED_IN) {
		on_switch(h, l, e);
		return 0;
	}
	if (e->cls->id < LK__FIRST_SITE_ID) /* lowkey's own records */
		return 0;
	if (!h->drawing) {
		h->events++;
		l->events++;
		c->count++;
		if (!l->first_tsc || e->tsc < l->first_tsc)
			l->first_tsc = e->tsc;
		if (!h->first_tsc || e->tsc < h->first_tsc)
			h->first_tsc = e->tsc;
		if (e->tsc > h->last_tsc)
			h->last_tsc = e->tsc;
	}
	switch (e->cls->kind) {
	case LK_PROBE_SPAN_BEGIN:
		return lk__pair_open(&h->spans, &l->open, e);
	case LK_PROBE_SPAN_END:
		return close_span(h, l, e);
	case LK_PROBE_COUNTER:
		return h->drawing ? sample_counter(h, c, e) : 0;
	default:
		return 0;
	}
}

static int stream_end(const struct lk__stream_info *s, void *arg)
{
	struct hreport *h = arg;

	if (s->stream_id != 0) {
		/* still off the CPU when the trace ended */
		if (h->drawing && h->current->drawn && h->current->out_tsc)
			draw_off(h, h->current, h->current->out_tsc, h->last_tsc,
				 h->current->out_preempted);
		if (h->drawing && h->current->drawn)
			flush_off(h, h->current);
	} else if (!h->drawing) {
		h->current->lost += s->lost;
		h->lost += s->lost;
	} else if (h->current->drawn) {
		for (unsigned int row = 0; row < h->current->rows; row++)
			flush_row(h, h->current, row);
	}
	return 0;
}

/* ---- the page ---- */

static void summary(struct hreport *h, const char *path)
{
	char text[1024];
	double secs = seconds(h, h->last_tsc);

	snprintf(
		text, sizeof(text),
		"Trace %s: %" PRIu64 " events over %.6f s from %u thread%s, %" PRIu64
		" lost to full buffers. %s",
		path, h->events, secs, h->nlanes, h->nlanes == 1 ? "" : "s", h->lost,
		h->r->cputime ?
			"Thread CPU time was recorded (--cputime): spans have CPU-time histograms too." :
			"Thread CPU time was not recorded: record with --cputime for CPU-time histograms.");
	lkh_para(h->f, text);
	if (h->unmatched)
		lkh_paraf(h->f,
			  "%" PRIu64
			  " span ends had no begin (their begin was before the trace started).",
			  h->unmatched);
}

static void histograms(struct hreport *h)
{
	const struct lk__trace_reader *r = h->r;
	unsigned int shown = 0, skipped = 0;
	char name[200], title[260];

	lkh_section(
		h->f, "Span latency",
		"How long each span event took, in log-scale buckets (five per power of ten): wall time on the "
		"left, the thread's CPU time on the right when the trace recorded it. Hover a bar for its "
		"bounds and count.");
	for (size_t k = 0; k < h->nrows; k++) { /* by name: the same order in every format */
		size_t i = h->rows[k];
		struct hclass *c = &h->classes[i];

		if (!r->classes[i] || !c->wall.n)
			continue;
		if (shown++ >= MAX_HISTOGRAMS) {
			skipped++;
			continue;
		}
		class_name(r->classes[i], name, sizeof(name));
		fputs("<div class=\"charts\">\n", h->f);
		snprintf(title, sizeof(title), "%s: wall time (%zu spans)", name, c->wall.n);
		lkh_histogram(h->f, title, c->wall.v, c->wall.n, lkh_color(c->color));
		if (r->cputime) {
			snprintf(title, sizeof(title), "%s: thread CPU time", name);
			lkh_histogram(h->f, title, c->cpu.v, c->cpu.n, lkh_color(c->color));
		}
		fputs("</div>\n", h->f);
	}
	if (!shown)
		lkh_para(h->f, "The trace holds no complete span (LK_SPAN, LK_SPAN_BEGIN/END).");
	if (skipped)
		lkh_paraf(h->f, "... and %u more span events (the table below has their figures).",
			  skipped);
}

static unsigned int timeline_shape(struct hreport *h, unsigned int *lanes, unsigned int *strips)
{
	unsigned int rows = 0;

	*lanes = *strips = 0;
	for (struct lane *l = h->lanes; l; l = l->next) {
		l->drawn = *lanes < MAX_LANES;
		if (!l->drawn)
			continue;
		l->rows = l->rows ? l->rows : 1;
		rows += l->rows;
		(*lanes)++;
		*strips += l->switches > 0;
	}
	return rows;
}

static int timeline(struct hreport *h, const struct lk__reader_ops *ops, char *err, size_t errlen)
{
	unsigned int lanes, strips, rows = timeline_shape(h, &lanes, &strips);
	uint64_t too_deep = 0;
	char label[96];
	int rc;

	lkh_section(
		h->f, "Timeline",
		"Each thread's spans over time, nested spans on the rows below their parent. Spans thinner than a "
		"pixel that touch are drawn as one, in the colour of the longest; hover for what each is.");
	if (h->r->sched)
		lkh_para(
			h->f,
			"Below each thread's spans, its time off the CPU (the trace has its context switches): "
			"hatched orange while it was runnable but preempted, hatched grey while it was blocked (asleep, "
			"waiting for I/O, a lock, a timer).");
	else
		lkh_para(
			h->f,
			"Record with lowkey trace --sched to see each thread's time off the CPU here.");
	lkh_timeline_begin(&h->tl, h->f, "spans by thread", seconds(h, h->last_tsc),
			   lkh_timeline_height(rows, lanes, strips));
	for (struct lane *l = h->lanes; l; l = l->next) {
		too_deep += l->too_deep;
		if (!l->drawn)
			continue;
		snprintf(label, sizeof(label), "%s (%d)", l->name, l->tid);
		lkh_timeline_lane(&h->tl, &l->lane, label, l->rows, l->switches > 0);
	}
	h->drawing = true;
	rc = lk__trace_file_walk(h->t, ops, h, err, errlen);
	lkh_timeline_end(&h->tl);
	if (h->nlanes > MAX_LANES)
		lkh_paraf(h->f, "The first %d of %u threads are drawn.", MAX_LANES, h->nlanes);
	if (too_deep)
		lkh_paraf(h->f, "%" PRIu64 " spans nested deeper than %d levels are not drawn.",
			  too_deep, MAX_ROWS);
	return rc;
}

static int counters(struct hreport *h)
{
	const struct lk__trace_reader *r = h->r;
	char name[200];
	bool any = false;

	lkh_section(h->f, "Counters",
		    "Each counter's values over time, all threads' samples together.");
	for (size_t k = 0; k < h->nrows; k++) { /* by name: the same order in every format */
		size_t i = h->rows[k];
		struct hclass *c = &h->classes[i];
		struct lkh_series s = { name };
		double *x = NULL, *y = NULL;
		int rc;

		if (!r->classes[i] || r->classes[i]->kind != LK_PROBE_COUNTER || !c->count ||
		    h->first[i] != i)
			continue;
		class_name(r->classes[i], name, sizeof(name));
		rc = series_points(h, &c->series, &x, &y, &s.n);
		s.x = x;
		s.y = y;
		if (!rc)
			lkh_line_chart(h->f, name, "value", &s, 1);
		free(x);
		free(y);
		if (rc)
			return rc;
		if (c->series.lo)
			lkh_paraf(h->f,
				  "%" PRIu64
				  " samples, drawn as the lowest and highest value of each of %d "
				  "slices of time.",
				  c->count, COLUMNS);
		any = true;
	}
	if (!any)
		lkh_para(h->f, "The trace holds no counter (LK_COUNTER).");
	return 0;
}

static void percentiles(FILE *f, struct samples *s)
{
	char buf[32];
	double p[3] = { 50, 99, 100 };

	samples_sort(s);
	for (int k = 0; k < 3; k++) {
		lkh_fmt_ns(buf, sizeof(buf), samples_pct(s, p[k]));
		lkh_cell_num(f, buf);
	}
}

static void event_table(struct hreport *h)
{
	static const char *const cols[] = { "event",   "kind",	  "count",  "per second",
					    "spans",   "p50",	  "p99",    "max",
					    "p50 CPU", "p99 CPU", "max CPU" };
	const struct lk__trace_reader *r = h->r;
	double secs = seconds(h, h->last_tsc);
	char name[200];

	lkh_section(h->f, "Events",
		    "Every event of the trace by provider:event and kind; span durations by wall "
		    "time and, where recorded, thread CPU time.");
	lkh_table_begin(h->f, cols, r->cputime ? 11 : 8);
	for (size_t k = 0; k < h->nrows; k++) { /* by name: the same order in every format */
		size_t i = h->rows[k];
		struct hclass *c = &h->classes[i];

		if (!r->classes[i] || !c->count || h->first[i] != i ||
		    r->classes[i]->kind == LK_PROBE_SPAN_END)
			continue;
		lkh_row_begin(h->f);
		lkh_cell(h->f, class_name(r->classes[i], name, sizeof(name)));
		lkh_cell(h->f, lk__probe_kind_name(r->classes[i]->kind));
		lkh_cellf(h->f, "%" PRIu64, c->count);
		lkh_cellf(h->f, "%.1f", secs > 0 ? (double)c->count / secs : 0.0);
		lkh_cellf(h->f, "%zu", c->wall.n);
		percentiles(h->f, &c->wall);
		if (r->cputime)
			percentiles(h->f, &c->cpu);
		lkh_row_end(h->f);
	}
	lkh_table_end(h->f);
}

static void thread_table(struct hreport *h)
{
	static const char *const cols[] = { "tid", "name", "events", "lost" };

	lkh_section(h->f, "Threads", NULL);
	lkh_table_begin(h->f, cols, 4);
	for (struct lane *l = h->lanes; l; l = l->next) {
		lkh_row_begin(h->f);
		lkh_cellf(h->f, "%d", l->tid);
		lkh_cell(h->f, l->name);
		lkh_cellf(h->f, "%" PRIu64, l->events);
		lkh_cellf(h->f, "%" PRIu64, l->lost);
		lkh_row_end(h->f);
	}
	lkh_table_end(h->f);
}

static void free_hreport(struct hreport *h)
{
	for (struct lane *l = h->lanes, *next; l; l = next) {
		next = l->next;
		lk__pair_stack_free(&l->open);
		free(l);
	}
	for (size_t i = 0; h->classes && i <= h->r->nclasses; i++) {
		free(h->classes[i].wall.v);
		free(h->classes[i].cpu.v);
		free(h->classes[i].series.p);
		free(h->classes[i].series.lo);
		free(h->classes[i].series.hi);
	}
	free(h->classes);
	free(h->first);
	free(h->rows);
	free(h->by_index);
	lk__tf_map_free(&h->lane_of);
	lk__pair_free(&h->spans);
}

static int write_page(struct hreport *h, const char *trace_path, const struct lk__reader_ops *ops,
		      char *err, size_t errlen)
{
	char title[200];
	int rc;

	snprintf(title, sizeof(title), "lowkey report: %s (pid %d)", h->r->procname, h->r->pid);
	lkh_page_begin(h->f, title);
	summary(h, trace_path);
	histograms(h);
	rc = timeline(h, ops, err, errlen);
	if (rc)
		return rc;
	rc = counters(h);
	if (rc)
		return rc;
	event_table(h);
	thread_table(h);
	return lkh_page_end(h->f);
}

/* Never through a symbolic link, nor into another user's file in a sticky directory. */
static FILE *open_out(const char *path, char *err, size_t errlen)
{
	return strcmp(path, "-") == 0 ? stdout : lk__out_fopen(path, err, errlen);
}

int report_html(const char *trace_path, const char *out_path)
{
	const struct lk__reader_ops ops = { stream_begin, on_event, stream_end };
	struct lk__trace_file t;
	struct hreport h = { 0 };
	char err[512];
	int rc;

	rc = lk__trace_file_open(&t, trace_path, err, sizeof(err));
	if (rc) {
		cli_error("report", "record a trace with `lowkey trace` (any --format)", "%s", err);
		return CLI_EXIT_FAIL;
	}
	h.r = &t.r;
	h.t = &t;
	rc = group_classes(&h);
	if (!rc)
		rc = lk__trace_file_walk(&t, &ops, &h, err, sizeof(err));
	if (!rc && !(h.f = open_out(out_path, err, sizeof(err)))) {
		cli_error("report", "choose a writable place for the page", "%s", err);
		rc = 1;
	} else if (!rc) {
		rc = write_page(&h, trace_path, &ops, err, sizeof(err));
		if (h.f != stdout && fclose(h.f) != 0 && !rc)
			rc = -errno;
		if (rc == -ENOMEM || rc == -EIO || rc == -ENOSPC || rc == -EDQUOT || rc == -EFBIG)
			snprintf(err, sizeof(err), "writing %s failed: %s", out_path,
				 strerror(-rc));
		if (rc)
			cli_error("report", NULL, "%s", err);
	} else {
		cli_error("report", NULL, "%s", rc == -ENOMEM ? "out of memory" : err);
	}
	free_hreport(&h);
	lk__trace_file_close(&t);
	return rc ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}
