/* SPDX-License-Identifier: MIT */
/*
 * lowkey report --html, inside: what the passes over the trace gather and draw
 * (report_html_read.c), which the page's parts (report_html.c) then lay out.
 */
#ifndef LK_CLI_REPORT_HTML_MODEL_H
#define LK_CLI_REPORT_HTML_MODEL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <lowkey/trace_reader.h>

#include "counter_lines.h"
#include "html.h"
#include "samples.h"
#include "span_split.h"

#define MAX_ROWS 12	  /* span nesting drawn per thread; deeper spans are counted, not drawn */
#define MAX_LANES 64	  /* threads drawn on the timeline */
#define MAX_HISTOGRAMS 64 /* span events given histograms */
#define EXACT_POINTS \
	2000 /* a counter with more samples is drawn as each pixel column's min and max */
#define COLUMNS 800
#define MAX_SERIES 10 /* a counter's lines: the palette's colours; further threads share the last */

struct point {
	double x, y;
};

/*
 * A counter's samples from one thread (or from the threads past MAX_SERIES - 1 together): all of
 * them in time order, or each pixel column's lowest and highest.
 */
struct counter_series {
	struct point *p;
	size_t n, cap;
	uint64_t count;	 /* its samples: known after the first pass */
	double *lo, *hi; /* COLUMNS each when there are more than EXACT_POINTS samples */
};

struct hclass {
	uint64_t count;
	struct samples wall, cpu;
	struct counter_series *series; /* counters: one per thread that set it, at most MAX_SERIES */
	unsigned int nseries;
	unsigned int line_thread[MAX_SERIES]; /* each series' thread */
	unsigned int shared; /* threads that share the last series; 0: it is one thread's */
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
	uint64_t switches; /* switches out */
	bool drawing;	   /* the second pass */
	struct lkh_timeline tl;
	struct counter_lines lines; /* each counter's samples by thread, and their series */
	struct span_split split;    /* with context switches (--sched): where spans' time went */
	FILE *f;
};

/* ---- report_html_read.c ---- */

/* Seconds from the trace's first event to tick. */
double rh_seconds(const struct hreport *h, uint64_t tick);
/* "provider:name" of class id, in buf. */
const char *rh_class_name(const struct hreport *h, uint32_t id, char *buf, size_t len);
/* The classes (a colour for each span's) and the threads, before the events. 0 or -ENOMEM. */
int rh_prepare(struct hreport *h);
/* The threads' names and losses: complete once the first pass has read every event. */
void rh_name_lanes(struct hreport *h);
/*
 * After the first pass: each counter's series (a thread's own, in the trace's order of threads, or
 * the last shared by those past MAX_SERIES - 1), and the split of spans by the context switches.
 * 0 or -ENOMEM.
 */
int rh_first_pass_done(struct hreport *h);
/* A lane's rectangles wait in memory buffers (struct lane_buffer). 0 or -ENOMEM. */
int rh_lane_buffers_open(struct lane *l);
void rh_lane_buffers_free(struct lane *l);
/* A counter's points to draw, in *x and *y (*n of them; freed by the caller). 0 or -ENOMEM. */
int rh_series_points(struct hreport *h, struct counter_series *s, double **x, double **y,
		     size_t *n);
/* One pass over the trace's events, from the first: the first gathers, the second draws. */
int rh_pass(struct hreport *h);
/* What is left on each lane drawn when the trace ends, then the lanes into the page. */
int rh_finish_lanes(struct hreport *h);

#endif
