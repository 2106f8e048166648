// SPDX-License-Identifier: MIT
/*
 * lowkey report --html: the passes over the trace's events (report_html.c says what each does).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lowkey/probe.h>
#include <lowkey/trace_reader.h>

#include "report_html_model.h"

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

double rh_seconds(const struct hreport *h, uint64_t tick)
{
	return tick > h->first_tick ? (double)(tick - h->first_tick) / (double)h->in->tick_hz : 0;
}

/* b - a in ns; the difference taken in ticks, where no digit of either is lost. */
static double tsc_ns(const struct hreport *h, uint64_t a, uint64_t b)
{
	double ticks = b >= a ? (double)(b - a) : -(double)(a - b);

	return ticks * 1e9 / (double)h->in->tick_hz;
}

const char *rh_class_name(const struct hreport *h, uint32_t id, char *buf, size_t len)
{
	snprintf(buf, len, "%s:%s", h->cls[id].provider, h->cls[id].name);
	return buf;
}

/* The classes (a colour for each span's) and the threads, before the events. */
int rh_prepare(struct hreport *h)
{
	unsigned int n = h->in->classes;
	size_t colors = 0;

	h->nlanes = h->in->threads;
	h->lanes = calloc(h->nlanes + 1, sizeof(*h->lanes));
	h->classes = calloc(n + 1, sizeof(*h->classes));
	h->cls = calloc(n + 1, sizeof(*h->cls));
	if (!h->lanes || !h->classes || !h->cls)
		return -ENOMEM;
	if (h->in->sched && span_split_init(&h->split, h->in->tick_hz, h->nlanes, n))
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
void rh_name_lanes(struct hreport *h)
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

int rh_lane_buffers_open(struct lane *l)
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

void rh_lane_buffers_free(struct lane *l)
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
			 rh_class_name(h, p->cls, name, sizeof(name)), wall,
			 h->in->cputime ? ", CPU " : "", h->in->cputime ? cpu : "", p->start_s);
	} else {
		lkh_fmt_ns(wall, sizeof(wall), p->wall_ns);
		snprintf(tip, sizeof(tip), "%" PRIu64 " spans %s %s from %.6f s, %s wall in all",
			 p->count, p->mixed ? "drawn as one, the longest of" : "of",
			 rh_class_name(h, p->cls, name, sizeof(name)), p->start_s, wall);
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
	double px0 = lkh_timeline_px(&h->tl, rh_seconds(h, t0)),
	       px1 = lkh_timeline_px(&h->tl, rh_seconds(h, t1));

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
	*p = (struct pending){ px0, px1, 1, cls, false, wall, cpu, rh_seconds(h, t0), wall };
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
	cls = ev->begin_class_id;
	wall = tsc_ns(h, ev->begin_ticks, ev->ticks);
	cpu = (double)ev->cpu_ns - (double)ev->begin_cpu_ns;
	if (h->drawing) {
		if (k < l->rows && l->drawn)
			draw_span(h, l, (unsigned int)k, cls, ev->begin_ticks, ev->ticks, wall,
				  cpu);
		return 0;
	}
	if (h->in->sched && span_split_event(&h->split, ev))
		return -ENOMEM;
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

/* The first pass: a counter's samples by thread, to give each thread its series. */
static int count_sample(struct hreport *h, const struct lk_trace_event *ev)
{
	struct counter_thread *e = counter_lines_get(&h->lines, ev->class_id, ev->thread);

	if (!e)
		return -ENOMEM;
	e->count++;
	return 0;
}

/*
 * A counter's series: one for each of its n threads (in the trace's order), the last shared once
 * there are more than MAX_SERIES.
 */
static int assign_series(struct hclass *c, struct counter_thread **e, size_t n)
{
	c->nseries = n < MAX_SERIES ? (unsigned int)n : MAX_SERIES;
	c->shared = n > MAX_SERIES ? (unsigned int)(n - (MAX_SERIES - 1)) : 0;
	c->series = calloc(c->nseries + 1, sizeof(*c->series));
	if (!c->series)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		unsigned int k = i < c->nseries ? (unsigned int)i : c->nseries - 1;

		e[i]->line = k;
		c->series[k].count += e[i]->count;
		if (i < c->nseries)
			c->line_thread[k] = e[i]->thread;
	}
	return 0;
}

int rh_first_pass_done(struct hreport *h)
{
	struct counter_thread **e;
	size_t n;
	int rc;

	if (counter_lines_sorted(&h->lines, &e, &n))
		return -ENOMEM;
	rc = 0;
	for (size_t i = 0, j; !rc && i < n; i = j) {
		for (j = i; j < n && e[j]->cls == e[i]->cls;)
			j++;
		rc = assign_series(&h->classes[e[i]->cls], e + i, j - i);
	}
	free(e);
	if (!rc && h->in->sched)
		span_split_compute(&h->split);
	return rc;
}

/* A counter's sample: kept, or folded into its pixel column's lowest and highest value. */
static int sample_counter(struct hreport *h, struct hclass *c, const struct lk_trace_event *ev)
{
	const struct counter_thread *e = counter_lines_find(&h->lines, ev->class_id, ev->thread);
	struct counter_series *s;
	double x = rh_seconds(h, ev->ticks), y = ev->value, span = rh_seconds(h, h->last_tick);
	int col;

	if (!e) /* not in the first pass: the passes read the same events */
		return 0;
	s = &c->series[e->line];

	if (s->count <= EXACT_POINTS)
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

/* The series in time order (several threads' interleaved), columns as a low-high zigzag. */
int rh_series_points(struct hreport *h, struct counter_series *s, double **x, double **y, size_t *n)
{
	double span = rh_seconds(h, h->last_tick);

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
	double px0 = lkh_timeline_px(&h->tl, rh_seconds(h, out)),
	       px1 = lkh_timeline_px(&h->tl, rh_seconds(h, in));
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
static int on_switch(struct hreport *h, struct lane *l, const struct lk_trace_event *ev)
{
	if (!h->drawing) {
		l->switches += ev->type == LK_TRACE_EV_SWITCH_OUT;
		h->switches += ev->type == LK_TRACE_EV_SWITCH_OUT;
		return h->in->sched ? span_split_event(&h->split, ev) : 0;
	}
	if (ev->type == LK_TRACE_EV_SWITCH_OUT) {
		l->out_tick = ev->ticks;
		l->out_preempted = ev->preempted;
	} else if (l->out_tick) {
		if (l->drawn)
			draw_off(h, l, l->out_tick, ev->ticks, l->out_preempted);
		l->out_tick = 0;
	}
	return 0;
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

	if (ev->type != LK_TRACE_EV_PROBE)
		return on_switch(h, l, ev);
	if (!h->drawing)
		first_pass_counts(h, l, c, ev->ticks);
	switch (ev->kind) {
	case LK_PROBE_SPAN_BEGIN:
		return 0; /* its end carries its class */
	case LK_PROBE_SPAN_END:
		return close_span(h, l, ev);
	case LK_PROBE_COUNTER:
		return h->drawing ? sample_counter(h, c, ev) : count_sample(h, ev);
	default:
		return 0;
	}
}

/* One pass over the trace's events, from the first. */
int rh_pass(struct hreport *h)
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
int rh_finish_lanes(struct hreport *h)
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
