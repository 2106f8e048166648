// SPDX-License-Identifier: MIT
/*
 * lowkey report --html OUT TRACE: the trace as one page -- latency histograms per span event (wall
 * time, and thread CPU time where recorded), a per-thread timeline of spans, counters as line
 * charts, and the table of events and threads.
 *
 * The trace is read once (lowkey/trace_reader.h: spans paired, counters decoded by the library)
 * and its events gone through twice. The first pass gathers the figures and the shape (threads,
 * nesting depth, time range); the second draws the timeline and samples the counters, now that
 * the time axis is known. A span narrower than a pixel that touches the previous one on its row
 * is merged with it (the tooltip counts them), so the page's size is bounded by the timeline's
 * pixels, not by the trace's length.
 *
 * With the threads' context switches in the trace (lowkey trace --sched), each thread's time off
 * the CPU is drawn on a strip below its spans, runnable (preempted) apart from blocked, merged
 * the same way.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lowkey/probe.h>
#include <lowkey/trace_reader.h>

#include "builtin.h"
#include "internal/outfile.h"
#include "html.h"
#include "internal/probe.h"
#include "report_html.h"
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
	uint32_t cls; /* the longest span's begin's class */
	bool mixed;   /* spans of several events */
	double wall_ns, cpu_ns, start_s, longest_ns;
};

/* An off-CPU interval waiting to be drawn, or the one open since a sched_out. */
struct pending_off {
	double px0, px1, longest_ns, total_ns;
	uint64_t count;
	bool preempted; /* the longest's state */
};

/*
 * A lane's rectangles wait in memory until every event is read, to go into the page one lane
 * after the other, its spans before its time off the CPU: the events come in time order, all
 * threads together.
 */
struct lane_buffer {
	FILE *f;
	char *text;
	size_t len;
};

struct lane {
	int tid;
	char name[64];
	uint64_t events, lost;
	unsigned int rows; /* nesting depth reached, at most MAX_ROWS */
	uint64_t too_deep;
	bool drawn;
	struct lkh_lane lane;
	uint32_t *open_cls; /* the class of each open span's begin, by depth */
	size_t capopen;
	struct pending pend[MAX_ROWS];
	uint64_t switches;
	uint64_t out_tick; /* the open switch out's time; 0: on a CPU */
	bool out_preempted;
	struct pending_off off;
	struct lane_buffer spans_out, off_out;
};

struct hreport {
	struct lk_trace_file *tf;
	const struct lk_trace_file_info *in;
	struct hclass *classes; /* by class id: the order of charts and tables in every format */
	struct lk_trace_class *cls; /* by class id */
	struct lane *lanes;	    /* in the trace's order of threads */
	unsigned int nlanes;
	uint64_t events, lost, first_tick, last_tick, unmatched;
	bool drawing; /* the second pass */
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

static double seconds(const struct hreport *h, uint64_t tick)
{
	return tick > h->first_tick ? (double)(tick - h->first_tick) / (double)h->in->tick_hz : 0;
}

/* b - a in ns; the difference taken in ticks, where no digit of either is lost. */
static double tsc_ns(const struct hreport *h, uint64_t a, uint64_t b)
{
	double ticks = b >= a ? (double)(b - a) : -(double)(a - b);

	return ticks * 1e9 / (double)h->in->tick_hz;
}

static const char *class_name(const struct hreport *h, uint32_t id, char *buf, size_t len)
{
	snprintf(buf, len, "%s:%s", h->cls[id].provider, h->cls[id].name);
	return buf;
}

/* The classes (a colour for each span's) and the threads, before the events. */
static int prepare(struct hreport *h)
{
	unsigned int n = h->in->classes;
	size_t colors = 0;

	h->nlanes = h->in->threads;
	h->lanes = calloc(h->nlanes + 1, sizeof(*h->lanes));
	h->classes = calloc(n + 1, sizeof(*h->classes));
	h->cls = calloc(n + 1, sizeof(*h->cls));
	if (!h->lanes || !h->classes || !h->cls)
		return -ENOMEM;
	for (unsigned int i = 0; i < n; i++) {
		lk_trace_file_class(h->tf, i, &h->cls[i]);
		if (h->cls[i].kind == LK_PROBE_SPAN_BEGIN)
			h->classes[i].color = colors++;
	}
	for (unsigned int i = 0; i < h->nlanes; i++) {
		struct lane *l = &h->lanes[i];
		struct lk_trace_thread th;

		lk_trace_file_thread(h->tf, i, &th);
		l->tid = th.tid;
	}
	return 0;
}

/* The threads' names and losses: complete once the first pass has read every event. */
static void name_lanes(struct hreport *h)
{
	for (unsigned int i = 0; i < h->nlanes; i++) {
		struct lane *l = &h->lanes[i];
		struct lk_trace_thread th;

		lk_trace_file_thread(h->tf, i, &th);
		snprintf(l->name, sizeof(l->name), "%s", th.name[0] ? th.name : "?");
		l->lost = th.lost;
		h->lost += th.lost;
	}
}

static int lane_buffers_open(struct lane *l)
{
	l->spans_out.f = open_memstream(&l->spans_out.text, &l->spans_out.len);
	l->off_out.f = open_memstream(&l->off_out.text, &l->off_out.len);
	return l->spans_out.f && l->off_out.f ? 0 : -ENOMEM;
}

/* The lane's rectangles into the page; -ENOMEM if a buffer could not hold them. */
static int lane_buffers_write(FILE *page, struct lane *l)
{
	int rc = 0;

	for (struct lane_buffer *b = &l->spans_out; b <= &l->off_out; b++) {
		if (b->f && fclose(b->f) != 0)
			rc = -ENOMEM;
		b->f = NULL;
		if (!rc && b->len)
			fwrite(b->text, 1, b->len, page);
	}
	return rc;
}

static void lane_buffers_free(struct lane *l)
{
	for (struct lane_buffer *b = &l->spans_out; b <= &l->off_out; b++) {
		if (b->f)
			fclose(b->f);
		free(b->text);
	}
}

/* ---- the passes ---- */

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
			 class_name(h, p->cls, name, sizeof(name)), wall,
			 h->in->cputime ? ", CPU " : "", h->in->cputime ? cpu : "", p->start_s);
	} else {
		lkh_fmt_ns(wall, sizeof(wall), p->wall_ns);
		snprintf(tip, sizeof(tip), "%" PRIu64 " spans %s %s from %.6f s, %s wall in all",
			 p->count, p->mixed ? "drawn as one, the longest of" : "of",
			 class_name(h, p->cls, name, sizeof(name)), p->start_s, wall);
	}
	h->tl.f = l->spans_out.f;
	lkh_timeline_span(&h->tl, &l->lane, row, p->px0, p->px1,
			  lkh_color(h->classes[p->cls].color), tip);
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
		p->mixed |= p->cls != cls;
		if (wall > p->longest_ns) {
			p->longest_ns = wall;
			p->cls = cls;
		}
		return;
	}
	flush_row(h, l, row);
	*p = (struct pending){ px0, px1, 1, cls, false, wall, cpu, seconds(h, t0), wall };
}

/* A begin: remember its class at its depth, for the end that closes it. */
static int open_span(struct lane *l, const struct lk_trace_event *ev)
{
	if (ev->depth >= l->capopen) {
		size_t cap = l->capopen ? l->capopen * 2 : 16;
		uint32_t *grown;

		while (cap <= ev->depth)
			cap *= 2;
		grown = realloc(l->open_cls, cap * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		l->open_cls = grown;
		l->capopen = cap;
	}
	l->open_cls[ev->depth] = ev->class_id;
	return 0;
}

/* An end the reader paired with its begin (lowkey/trace_reader.h): the span's figures, drawn. */
static int close_span(struct hreport *h, struct lane *l, const struct lk_trace_event *ev)
{
	struct hclass *c;
	double wall, cpu;
	size_t k = ev->depth;
	uint32_t cls;

	if (!ev->paired) {
		h->unmatched += !h->drawing;
		return 0;
	}
	cls = l->open_cls[k];
	wall = tsc_ns(h, ev->begin_ticks, ev->ticks);
	cpu = (double)ev->cpu_ns - (double)ev->begin_cpu_ns;
	if (h->drawing) {
		if (k < l->rows && l->drawn)
			draw_span(h, l, (unsigned int)k, cls, ev->begin_ticks, ev->ticks, wall,
				  cpu);
		return 0;
	}
	c = &h->classes[cls];
	if (samples_push(&c->wall, wall) || (h->in->cputime && samples_push(&c->cpu, cpu)))
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
static int sample_counter(struct hreport *h, struct hclass *c, const struct lk_trace_event *ev)
{
	struct counter_series *s = &c->series;
	double x = seconds(h, ev->ticks), y = ev->value, span = seconds(h, h->last_tick);
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
	double span = seconds(h, h->last_tick);

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
	h->tl.f = l->off_out.f;
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

/* A switch out leaves the CPU, a switch in comes back. */
static void on_switch(struct hreport *h, struct lane *l, const struct lk_trace_event *ev)
{
	if (!h->drawing) {
		l->switches += ev->type == LK_TRACE_EV_SWITCH_OUT;
		return;
	}
	if (ev->type == LK_TRACE_EV_SWITCH_OUT) {
		l->out_tick = ev->ticks;
		l->out_preempted = ev->preempted;
	} else if (l->out_tick) {
		if (l->drawn)
			draw_off(h, l, l->out_tick, ev->ticks, l->out_preempted);
		l->out_tick = 0;
	}
}

static void first_pass_counts(struct hreport *h, struct lane *l, struct hclass *c, uint64_t tick)
{
	h->events++;
	l->events++;
	c->count++;
	if (!h->first_tick || tick < h->first_tick)
		h->first_tick = tick;
	if (tick > h->last_tick)
		h->last_tick = tick;
}

static int on_event(struct hreport *h, const struct lk_trace_event *ev)
{
	struct lane *l = &h->lanes[ev->thread];
	struct hclass *c = &h->classes[ev->class_id];

	if (ev->type != LK_TRACE_EV_PROBE) {
		on_switch(h, l, ev);
		return 0;
	}
	if (!h->drawing)
		first_pass_counts(h, l, c, ev->ticks);
	switch (ev->kind) {
	case LK_PROBE_SPAN_BEGIN:
		return open_span(l, ev);
	case LK_PROBE_SPAN_END:
		return close_span(h, l, ev);
	case LK_PROBE_COUNTER:
		return h->drawing ? sample_counter(h, c, ev) : 0;
	default:
		return 0;
	}
}

/* One pass over the trace's events, from the first. */
static int pass(struct hreport *h)
{
	struct lk_trace_event ev;
	int rc;

	lk_trace_file_rewind(h->tf);
	while ((rc = lk_trace_file_next(h->tf, &ev)) == 1) {
		rc = on_event(h, &ev);
		if (rc)
			return rc;
	}
	return rc;
}

/* What is left on each lane drawn when the trace ends, then the lanes into the page. */
static int finish_lanes(struct hreport *h)
{
	int rc = 0;

	for (unsigned int i = 0; i < h->nlanes; i++) {
		struct lane *l = &h->lanes[i];

		if (!l->drawn)
			continue;
		for (unsigned int row = 0; row < l->rows; row++)
			flush_row(h, l, row);
		if (l->out_tick) /* still off the CPU when the trace ended */
			draw_off(h, l, l->out_tick, h->last_tick, l->out_preempted);
		flush_off(h, l);
		if (!rc)
			rc = lane_buffers_write(h->f, l);
	}
	h->tl.f = h->f;
	return rc;
}

/* ---- the page ---- */

static void summary(struct hreport *h, const char *path)
{
	char text[1024];
	double secs = seconds(h, h->last_tick);

	snprintf(
		text, sizeof(text),
		"Trace %s: %" PRIu64 " events over %.6f s from %u thread%s, %" PRIu64
		" lost to full buffers. %s",
		path, h->events, secs, h->nlanes, h->nlanes == 1 ? "" : "s", h->lost,
		h->in->cputime ?
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
	const struct lk_trace_file_info *r = h->in;
	unsigned int shown = 0, skipped = 0;
	char name[200], title[260];

	lkh_section(
		h->f, "Span latency",
		"How long each span event took, in log-scale buckets (five per power of ten): wall time on the "
		"left, the thread's CPU time on the right when the trace recorded it. Hover a bar for its "
		"bounds and count.");
	for (unsigned int i = 0; i < r->classes;
	     i++) { /* by name: the same order in every format */
		struct hclass *c = &h->classes[i];

		if (!c->wall.n)
			continue;
		if (shown++ >= MAX_HISTOGRAMS) {
			skipped++;
			continue;
		}
		class_name(h, i, name, sizeof(name));
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
	for (unsigned int i = 0; i < h->nlanes; i++) {
		struct lane *l = &h->lanes[i];

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

static int timeline(struct hreport *h)
{
	unsigned int lanes, strips, rows = timeline_shape(h, &lanes, &strips);
	uint64_t too_deep = 0;
	char label[96];
	int rc;

	lkh_section(
		h->f, "Timeline",
		"Each thread's spans over time, nested spans on the rows below their parent. Spans thinner than a "
		"pixel that touch are drawn as one, in the colour of the longest; hover for what each is.");
	if (h->in->sched)
		lkh_para(
			h->f,
			"Below each thread's spans, its time off the CPU (the trace has its context switches): "
			"hatched orange while it was runnable but preempted, hatched grey while it was blocked (asleep, "
			"waiting for I/O, a lock, a timer).");
	else
		lkh_para(
			h->f,
			"Record with lowkey trace --sched to see each thread's time off the CPU here.");
	lkh_timeline_begin(&h->tl, h->f, "spans by thread", seconds(h, h->last_tick),
			   lkh_timeline_height(rows, lanes, strips));
	rc = 0;
	for (unsigned int i = 0; i < h->nlanes; i++) {
		struct lane *l = &h->lanes[i];

		too_deep += l->too_deep;
		if (!l->drawn)
			continue;
		snprintf(label, sizeof(label), "%s (%d)", l->name, l->tid);
		lkh_timeline_lane(&h->tl, &l->lane, label, l->rows, l->switches > 0);
		if (!rc)
			rc = lane_buffers_open(l);
	}
	h->drawing = true;
	if (!rc)
		rc = pass(h);
	if (!rc)
		rc = finish_lanes(h);
	h->tl.f = h->f;
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
	const struct lk_trace_file_info *r = h->in;
	char name[200];
	bool any = false;

	lkh_section(h->f, "Counters",
		    "Each counter's values over time, all threads' samples together.");
	for (unsigned int i = 0; i < r->classes;
	     i++) { /* by name: the same order in every format */
		struct hclass *c = &h->classes[i];
		struct lkh_series s = { name };
		double *x = NULL, *y = NULL;
		int rc;

		if (h->cls[i].kind != LK_PROBE_COUNTER || !c->count)
			continue;
		class_name(h, i, name, sizeof(name));
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
	const struct lk_trace_file_info *r = h->in;
	double secs = seconds(h, h->last_tick);
	char name[200];

	lkh_section(h->f, "Events",
		    "Every event of the trace by provider:event and kind; span durations by wall "
		    "time and, where recorded, thread CPU time.");
	lkh_table_begin(h->f, cols, r->cputime ? 11 : 8);
	for (unsigned int i = 0; i < r->classes;
	     i++) { /* by name: the same order in every format */
		struct hclass *c = &h->classes[i];

		if (!c->count || h->cls[i].kind == LK_PROBE_SPAN_END)
			continue;
		lkh_row_begin(h->f);
		lkh_cell(h->f, class_name(h, i, name, sizeof(name)));
		lkh_cell(h->f, lk__probe_kind_name(h->cls[i].kind));
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
	for (unsigned int i = 0; i < h->nlanes; i++) {
		const struct lane *l = &h->lanes[i];

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
	for (unsigned int i = 0; h->lanes && i < h->nlanes; i++) {
		free(h->lanes[i].open_cls);
		lane_buffers_free(&h->lanes[i]);
	}
	for (unsigned int i = 0; h->classes && i < h->in->classes; i++) {
		free(h->classes[i].wall.v);
		free(h->classes[i].cpu.v);
		free(h->classes[i].series.p);
		free(h->classes[i].series.lo);
		free(h->classes[i].series.hi);
	}
	free(h->lanes);
	free(h->classes);
	free(h->cls);
	lk_trace_file_close(h->tf);
}

static int write_page(struct hreport *h, const char *trace_path)
{
	char title[200];
	int rc;

	snprintf(title, sizeof(title), "lowkey report: %s (pid %d)", h->in->process_name,
		 h->in->pid);
	lkh_page_begin(h->f, title);
	summary(h, trace_path);
	histograms(h);
	rc = timeline(h);
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
	struct hreport h = { 0 };
	char err[512];
	int rc;

	rc = lk_trace_file_open(trace_path, &h.tf);
	if (rc) {
		cli_error("report", "record a trace with `lowkey trace` (any --format)", "%s",
			  lk_last_error());
		return CLI_EXIT_FAIL;
	}
	h.in = lk_trace_file_get_info(h.tf);
	rc = prepare(&h);
	if (!rc)
		rc = pass(&h);
	if (!rc)
		name_lanes(&h);
	snprintf(err, sizeof(err), "%s", rc == -ENOMEM ? "out of memory" : lk_last_error());
	if (!rc && !(h.f = open_out(out_path, err, sizeof(err)))) {
		cli_error("report", "choose a writable place for the page", "%s", err);
		rc = 1;
	} else if (!rc) {
		rc = write_page(&h, trace_path);
		if (h.f != stdout && fclose(h.f) != 0 && !rc)
			rc = -errno;
		if (rc == -ENOMEM || rc == -EIO || rc == -ENOSPC || rc == -EDQUOT || rc == -EFBIG)
			snprintf(err, sizeof(err), "writing %s failed: %s", out_path,
				 strerror(-rc));
		else if (rc)
			snprintf(err, sizeof(err), "%s", lk_last_error());
		if (rc)
			cli_error("report", NULL, "%s", err);
	} else {
		cli_error("report", NULL, "%s", err);
	}
	free_hreport(&h);
	return rc ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}
