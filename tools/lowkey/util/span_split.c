// SPDX-License-Identifier: MIT
/* The split of spans' wall time by the context switches (span_split.h). */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lowkey/probe.h>

#include "span_split.h"

/* A closed span, kept to be split once every context switch is read. */
struct span_interval {
	uint32_t cls; /* its begin's class */
	bool outermost;
	uint64_t begin, end; /* ticks */
};

/* The thread off its CPU: from a switch out to the next switch in. */
struct off_interval {
	uint64_t out, in; /* ticks; in = UINT64_MAX: never back before the trace ended */
	bool preempted;
};

struct split_thread {
	struct span_interval *spans;
	size_t nspans, capspans;
	struct off_interval *off;
	size_t noff, capoff;
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

/* b - a in ns; the difference taken in ticks, where no digit of either is lost. */
static double tick_ns(const struct span_split *s, uint64_t a, uint64_t b)
{
	double ticks = b >= a ? (double)(b - a) : -(double)(a - b);

	return ticks * 1e9 / (double)s->tick_hz;
}

int span_split_init(struct span_split *s, uint64_t tick_hz, unsigned int nthreads,
		    unsigned int nclasses)
{
	*s = (struct span_split){ .tick_hz = tick_hz, .nthreads = nthreads, .nclasses = nclasses };
	s->threads = calloc(nthreads + 1, sizeof(*s->threads));
	s->by_class = calloc(nclasses + 1, sizeof(*s->by_class));
	s->by_thread = calloc(nthreads + 1, sizeof(*s->by_thread));
	return s->threads && s->by_class && s->by_thread ? 0 : -ENOMEM;
}

/*
 * A switch out opens an interval off the CPU, a switch in closes it. A switch out that finds the
 * last interval open means the switch in between was lost (the kernel's ring was full; the report
 * says so): when the thread came back is unknown, so that interval counts for nothing rather than
 * for everything up to the end of the trace, and the intervals stay in time order.
 */
static int on_switch(struct split_thread *t, const struct lk_trace_event *ev)
{
	if (ev->type == LK_TRACE_EV_SWITCH_OUT) {
		struct off_interval o = { ev->ticks, UINT64_MAX, ev->preempted };

		if (t->noff && t->off[t->noff - 1].in == UINT64_MAX)
			t->off[t->noff - 1].in = t->off[t->noff - 1].out;
		return push_item((void **)&t->off, &t->noff, &t->capoff, &o, sizeof(o));
	}
	if (t->noff && t->off[t->noff - 1].in == UINT64_MAX)
		t->off[t->noff - 1].in = ev->ticks;
	return 0;
}

int span_split_event(struct span_split *s, const struct lk_trace_event *ev)
{
	struct split_thread *t = &s->threads[ev->thread];
	struct span_interval span;

	if (ev->type != LK_TRACE_EV_PROBE)
		return on_switch(t, ev);
	if (ev->kind != LK_PROBE_SPAN_END || !ev->paired)
		return 0;
	span = (struct span_interval){ ev->begin_class_id, ev->depth == 0, ev->begin_ticks,
				       ev->ticks };
	return push_item((void **)&t->spans, &t->nspans, &t->capspans, &span, sizeof(span));
}

static void add_split(struct split *to, const struct split *x)
{
	to->wall += x->wall;
	to->on_cpu += x->on_cpu;
	to->runnable += x->runnable;
	to->blocked += x->blocked;
}

/* The first of t's intervals off the CPU that ends after tick (they are in time order). */
static size_t first_off_after(const struct split_thread *t, uint64_t tick)
{
	size_t lo = 0, hi = t->noff;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->off[mid].in <= tick)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static struct split split_span(const struct span_split *s, const struct split_thread *t,
			       const struct span_interval *span)
{
	struct split x = { tick_ns(s, span->begin, span->end), 0, 0, 0 };

	for (size_t i = first_off_after(t, span->begin); i < t->noff && t->off[i].out < span->end;
	     i++) {
		uint64_t from = t->off[i].out > span->begin ? t->off[i].out : span->begin;
		uint64_t to = t->off[i].in < span->end ? t->off[i].in : span->end;
		double ns = tick_ns(s, from, to);

		if (t->off[i].preempted)
			x.runnable += ns;
		else
			x.blocked += ns;
	}
	x.on_cpu = x.wall - x.runnable - x.blocked;
	return x;
}

void span_split_compute(struct span_split *s)
{
	for (unsigned int k = s->nthreads; k-- > 0;) {
		const struct split_thread *t = &s->threads[k];

		for (size_t i = 0; i < t->nspans; i++) {
			struct split x = split_span(s, t, &t->spans[i]);

			add_split(&s->by_class[t->spans[i].cls], &x);
			if (t->spans[i].outermost)
				add_split(&s->by_thread[k], &x);
		}
	}
}

void span_split_free(struct span_split *s)
{
	for (unsigned int k = 0; s->threads && k < s->nthreads; k++) {
		free(s->threads[k].spans);
		free(s->threads[k].off);
	}
	free(s->threads);
	free(s->by_class);
	free(s->by_thread);
	*s = (struct span_split){ 0 };
}

void span_split_fmt_ns(char *buf, size_t len, double ns)
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
