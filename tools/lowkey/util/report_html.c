// SPDX-License-Identifier: MIT
/*
 * lowkey report --html OUT TRACE: the trace as one page -- latency histograms per span event (wall
 * time, and thread CPU time where recorded), a per-thread timeline of spans, counters as line
 * charts (a line per thread), and the table of events and threads.
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
 * the same way; and the spans' time on the CPU, runnable and blocked is drawn by thread and
 * printed by thread and span event, from the text report's computation (span_split.h).
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
#include "internal/probe.h"
#include "report_html.h"
#include "report_html_model.h"

/* ---- the page ---- */

static void summary(struct hreport *h, const char *path)
{
	char text[1024];
	double secs = rh_seconds(h, h->last_tick);

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
		rh_class_name(h, i, name, sizeof(name));
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
			"waiting for I/O, a lock, a timer). The time between strips is wall time between the "
			"thread's switch records, not its CPU time (the cputime columns): the kernel charges a "
			"thread for the scheduler's switch into it and not for time its virtual CPU was "
			"stolen (docs/trace.md, \"Two CPU times\").");
	else
		lkh_para(
			h->f,
			"Record with lowkey trace --sched to see each thread's time off the CPU here.");
	lkh_timeline_begin(&h->tl, h->f, "spans by thread", rh_seconds(h, h->last_tick),
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
			rc = rh_lane_buffers_open(l);
	}
	h->drawing = true;
	if (!rc)
		rc = rh_pass(h);
	if (!rc)
		rc = rh_finish_lanes(h);
	h->tl.f = h->f;
	lkh_timeline_end(&h->tl);
	if (h->nlanes > MAX_LANES)
		lkh_paraf(h->f, "The first %d of %u threads are drawn.", MAX_LANES, h->nlanes);
	if (too_deep)
		lkh_paraf(h->f, "%" PRIu64 " spans nested deeper than %d levels are not drawn.",
			  too_deep, MAX_ROWS);
	return rc;
}

/* A counter's series' names: the thread's, or how many threads share the last. */
static void series_names(struct hreport *h, const struct hclass *c, char (*names)[96])
{
	for (unsigned int k = 0; k < c->nseries; k++) {
		const struct lane *l = &h->lanes[c->line_thread[k]];

		if (c->shared && k == c->nseries - 1)
			snprintf(names[k], sizeof(names[0]), "%u other threads together",
				 c->shared);
		else
			snprintf(names[k], sizeof(names[0]), "%s (%d)", l->name, l->tid);
	}
}

/* A counter's chart: one line per thread that set it. */
static int counter_chart(struct hreport *h, struct hclass *c, const char *name)
{
	struct lkh_series s[MAX_SERIES] = { 0 };
	double *x[MAX_SERIES] = { 0 }, *y[MAX_SERIES] = { 0 };
	char names[MAX_SERIES][96];
	bool folded = false;
	int rc = 0;

	series_names(h, c, names);
	for (unsigned int k = 0; k < c->nseries && !rc; k++) {
		size_t n = 0;

		rc = rh_series_points(h, &c->series[k], &x[k], &y[k], &n);
		s[k] = (struct lkh_series){ names[k], x[k], y[k], n };
		folded |= c->series[k].lo != NULL;
	}
	if (!rc)
		lkh_line_chart(h->f, name, "value", s, c->nseries);
	for (unsigned int k = 0; k < c->nseries; k++) {
		free(x[k]);
		free(y[k]);
	}
	if (!rc && folded)
		lkh_paraf(h->f,
			  "%" PRIu64 " samples; a line of more than %d is drawn as the lowest and "
			  "highest value of each of %d slices of time.",
			  c->count, EXACT_POINTS, COLUMNS);
	return rc;
}

static int counters(struct hreport *h)
{
	const struct lk_trace_file_info *r = h->in;
	char name[200];
	bool any = false;

	lkh_section(h->f, "Counters", NULL);
	lkh_paraf(
		h->f,
		"Each counter's values over time, one line per thread that set it (when more than "
		"%d did, the first %d in the trace's order have a line each and the others share "
		"the last).",
		MAX_SERIES, MAX_SERIES - 1);
	for (unsigned int i = 0; i < r->classes;
	     i++) { /* by name: the same order in every format */
		struct hclass *c = &h->classes[i];
		int rc;

		if (h->cls[i].kind != LK_PROBE_COUNTER || !c->count || !c->nseries)
			continue;
		rh_class_name(h, i, name, sizeof(name));
		rc = counter_chart(h, c, name);
		if (rc)
			return rc;
		any = true;
	}
	if (!any)
		lkh_para(h->f, "The trace holds no counter (LK_COUNTER).");
	return 0;
}

/* ---- where the spans' time went, by the context switches (--sched) ---- */

static void split_cells(FILE *f, const struct split *x)
{
	const double v[4] = { x->wall, x->on_cpu, x->runnable, x->blocked };
	char buf[32];

	for (int k = 0; k < 4; k++) {
		span_split_fmt_ns(buf, sizeof(buf), v[k]);
		lkh_cell_num(f, buf);
	}
}

/* The text report's threads' split, in its order (the latest thread first) and its units. */
static void split_thread_table(struct hreport *h)
{
	static const char *const cols[] = { "tid",	"name",	  "in spans", "on-CPU (switches)",
					    "runnable", "blocked" };

	lkh_table_begin(h->f, cols, 6);
	for (unsigned int k = h->nlanes; k-- > 0;) {
		lkh_row_begin(h->f);
		lkh_cellf(h->f, "%d", h->lanes[k].tid);
		lkh_cell(h->f, h->lanes[k].name);
		split_cells(h->f, &h->split.by_thread[k]);
		lkh_row_end(h->f);
	}
	lkh_table_end(h->f);
}

static void split_event_table(struct hreport *h)
{
	static const char *const cols[] = { "span event",	 "spans",    "wall",
					    "on-CPU (switches)", "runnable", "blocked" };
	char name[200];

	lkh_table_begin(h->f, cols, 6);
	for (unsigned int i = 0; i < h->in->classes;
	     i++) { /* by name: the same order in every format */
		if (!h->classes[i].wall.n)
			continue;
		lkh_row_begin(h->f);
		lkh_cell(h->f, rh_class_name(h, i, name, sizeof(name)));
		lkh_cellf(h->f, "%zu", h->classes[i].wall.n);
		split_cells(h->f, &h->split.by_class[i]);
		lkh_row_end(h->f);
	}
	lkh_table_end(h->f);
}

/* Each thread with spans as a bar: its outermost spans' on-CPU, runnable and blocked time. */
static int split_chart(struct hreport *h)
{
	static const char *const parts[] = { "on-CPU (between switches)", "runnable (preempted)",
					     "blocked (asleep, waiting)" };
	static const char *const colors[] = { "#4e79a7", "#d9861c", "#6e7882" };
	char(*labels)[96] = calloc(MAX_LANES, sizeof(*labels));
	const char *groups[MAX_LANES];
	double values[MAX_LANES * 3];
	size_t n = 0;

	if (!labels)
		return -ENOMEM;
	for (unsigned int k = 0; k < h->nlanes && n < MAX_LANES; k++) {
		const struct split *x = &h->split.by_thread[k];

		if (!(x->wall > 0))
			continue;
		snprintf(labels[n], sizeof(labels[n]), "%s (%d)", h->lanes[k].name,
			 h->lanes[k].tid);
		groups[n] = labels[n];
		values[n * 3] = x->on_cpu;
		values[n * 3 + 1] = x->runnable;
		values[n * 3 + 2] = x->blocked;
		n++;
	}
	lkh_stacked_bar_chart(h->f, &(struct lkh_bars){ .title = "outermost spans' time by thread",
							.series = parts,
							.nseries = 3,
							.groups = groups,
							.ngroups = n,
							.values = values,
							.fmt = lkh_fmt_ns,
							.colors = colors });
	free(labels);
	return 0;
}

static int sched_split(struct hreport *h)
{
	int rc;

	lkh_section(
		h->f, "Time on and off the CPU",
		"Where the spans' wall time went, split by the threads' context switches: on a CPU, "
		"runnable (preempted, waiting for a CPU), or blocked (asleep, waiting for I/O, a lock, "
		"a timer). For each thread, its outermost spans (nested spans are inside them); for "
		"each span event, all its spans. The figures are lowkey report's. On-CPU is wall time "
		"between the thread's switch records, not its CPU time (the cputime columns; "
		"docs/trace.md, \"Two CPU times\").");
	rc = split_chart(h);
	if (rc)
		return rc;
	split_thread_table(h);
	split_event_table(h);
	lkh_paraf(h->f, "%" PRIu64 " context switches.", h->switches);
	if (h->in->sched_lost)
		lkh_paraf(h->f,
			  "%" PRIu64
			  " context switches were lost (the kernel's ring was full): the "
			  "split is approximate.",
			  h->in->sched_lost);
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
	static const char *const cols[] = { "event",	   "kind",	 "count",
					    "per second",  "spans",	 "p50",
					    "p99",	   "max",	 "p50 cputime",
					    "p99 cputime", "max cputime" };
	const struct lk_trace_file_info *r = h->in;
	double secs = rh_seconds(h, h->last_tick);
	char name[200];

	lkh_section(h->f, "Events",
		    "Every event of the trace by provider:event and kind; span durations by wall "
		    "time and, where recorded, the kernel's thread CPU time (cputime).");
	lkh_table_begin(h->f, cols, r->cputime ? 11 : 8);
	for (unsigned int i = 0; i < r->classes;
	     i++) { /* by name: the same order in every format */
		struct hclass *c = &h->classes[i];

		if (!c->count || h->cls[i].kind == LK_PROBE_SPAN_END)
			continue;
		lkh_row_begin(h->f);
		lkh_cell(h->f, rh_class_name(h, i, name, sizeof(name)));
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
	for (unsigned int i = 0; h->lanes && i < h->nlanes; i++)
		rh_lane_buffers_free(&h->lanes[i]);
	for (unsigned int i = 0; h->classes && i < h->in->classes; i++) {
		free(h->classes[i].wall.v);
		free(h->classes[i].cpu.v);
		for (unsigned int k = 0; h->classes[i].series && k < h->classes[i].nseries; k++) {
			free(h->classes[i].series[k].p);
			free(h->classes[i].series[k].lo);
			free(h->classes[i].series[k].hi);
		}
		free(h->classes[i].series);
	}
	counter_lines_free(&h->lines);
	span_split_free(&h->split);
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
	if (!rc && h->in->sched)
		rc = sched_split(h);
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
	rc = rh_prepare(&h);
	if (!rc)
		rc = rh_pass(&h);
	if (!rc) {
		rh_name_lanes(&h);
		rc = rh_first_pass_done(&h);
	}
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
