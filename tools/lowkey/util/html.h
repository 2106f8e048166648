/* SPDX-License-Identifier: MIT */
/*
 * Self-contained HTML reports for the command line: a page, tables, and static SVG charts
 * (latency histogram, timeline, line chart, grouped and stacked bar charts), written with stdio.
 *
 * The pages have no script and load nothing: styles are inline and every chart is SVG written
 * here, so a report opens offline, in any browser, years later, and shows the same thing. Tooltips
 * are SVG <title> elements, which browsers show on hover without script.
 *
 * Every string that comes from outside lowkey -- event and thread names from a trace, call sites
 * from a program's symbols, a command line -- is written through lkh_text() (or a function that
 * calls it), never as markup: '&', '<', '>', '"' and '\'' become entities, so the same text is safe
 * in an element and in a quoted attribute; bytes that start no valid UTF-8 sequence and control
 * characters other than tab and newline become U+FFFD. A hostile trace cannot inject markup, and
 * the page is valid UTF-8 whatever bytes it was given.
 *
 * Nothing here allocates more than a chart's own few buffers; write errors are sticky in the
 * FILE and reported by lkh_page_end(). None of it is async-signal-safe.
 */
#ifndef LOWKEY_CLI_HTML_H
#define LOWKEY_CLI_HTML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- text ---- */

/* s as HTML text, escaped and made valid UTF-8 as above; NULL writes nothing. */
void lkh_text(FILE *f, const char *s);
/* The same for the first n bytes of s (NUL bytes among them become U+FFFD). */
void lkh_text_n(FILE *f, const char *s, size_t n);
/* printf, then lkh_text() of the result (cut at 4 KiB). */
void lkh_textf(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* "812 ns", "3.25 us", "1.20 ms", "2.50 s"; "-" for NaN. */
void lkh_fmt_ns(char *buf, size_t len, double ns);

/* ---- the page ---- */

/* <!DOCTYPE html> to <body>, the styles, and an <h1> with title. */
void lkh_page_begin(FILE *f, const char *title);
/* Closes the page and flushes f: 0, or -errno if anything written to f failed. */
int lkh_page_end(FILE *f);
/* An <h2> section heading with an optional paragraph below it (both escaped). */
void lkh_section(FILE *f, const char *heading, const char *note);
/* A paragraph of escaped text; lkh_paraf: printf, then the same (cut at 4 KiB). */
void lkh_para(FILE *f, const char *text);
void lkh_paraf(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- tables ---- */

void lkh_table_begin(FILE *f, const char *const *headers, size_t n);
void lkh_row_begin(FILE *f);
void lkh_cell(FILE *f, const char *text);     /* left-aligned text */
void lkh_cell_num(FILE *f, const char *text); /* right-aligned: figures */
void lkh_cellf(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3))); /* a figure */
void lkh_row_end(FILE *f);
void lkh_table_end(FILE *f);

/* ---- charts ---- */

/* A colour of the categorical palette, for the i-th series or class: "#rrggbb". */
const char *lkh_color(size_t i);

/*
 * A latency histogram of n durations in ns (any order), in log-scale buckets (five per power of
 * ten) from the decade below the shortest to the one above the longest; the bars' heights count
 * the durations in each bucket. Each bar's tooltip gives its bounds and count. Draws an empty
 * chart saying "no data" for n == 0. Costs one pass over v.
 */
void lkh_histogram(FILE *f, const char *title, const double *v, size_t n, const char *color);

/*
 * A line chart: each series' (x, y) points joined in order, x in seconds from the start. Series
 * share the axes and the palette's colours in order; a legend names them.
 */
struct lkh_series {
	const char *name;
	const double *x, *y;
	size_t n;
};
void lkh_line_chart(FILE *f, const char *title, const char *y_label, const struct lkh_series *s,
		    size_t n);

/*
 * A grouped horizontal bar chart: ngroups groups (rows) of nseries bars each, values[g * nseries
 * + s] (NaN: no figure, drawn as a dash). The axis is logarithmic when log is true and the
 * positive values span more than a factor of 100 (a value <= 0 is then drawn at the axis' start),
 * linear from 0 otherwise. fmt writes one value with its unit (NULL: "%.3g").
 */
struct lkh_bars {
	const char *title;
	const char *const *series; /* nseries names, for the legend */
	size_t nseries;
	const char *const *groups; /* ngroups labels, cut to 48 characters on the chart (whole in
					   the tooltip) */
	size_t ngroups;
	const double *values;
	bool log;
	void (*fmt)(char *buf, size_t len, double v);
	const char *const *colors; /* nseries "#rrggbb"; NULL: the palette's */
};
void lkh_bar_chart(FILE *f, const struct lkh_bars *b);

/*
 * The same groups as one horizontal bar each, its nseries parts stacked from the left in series
 * order, on a linear axis from 0 to the largest group's sum (b->log is ignored; a part <= 0 or
 * NaN is not drawn). Each part's tooltip gives its value and share of the group; the group's sum
 * is written at the bar's end.
 */
void lkh_stacked_bar_chart(FILE *f, const struct lkh_bars *b);

/*
 * A timeline: lanes (threads) of rows (span nesting depth 0, 1, ...) over [0, seconds], and below a
 * lane's rows an optional strip of its off-CPU intervals, a separate layer the caller feeds.
 * Times are in seconds from the start; lkh_timeline_px() turns them into pixels, so that the
 * caller can merge rectangles narrower than a pixel. Lanes are laid out first (their labels and
 * backgrounds), then spans and intervals are drawn on any lane in any order:
 *
 *	lkh_timeline_begin(&t, f, title, seconds, lkh_timeline_height(rows, lanes, strips));
 *	lkh_timeline_lane(&t, &lane[i], label, rows, has_strip) for each lane;
 *	lkh_timeline_span(&t, &lane[i], row, px0, px1, colour, tooltip), lkh_timeline_offcpu(...);
 *	lkh_timeline_end(&t);
 */
enum lkh_offcpu {
	LKH_RUNNABLE, /* preempted: waiting for a CPU */
	LKH_BLOCKED,  /* asleep: waiting for something else */
};

struct lkh_timeline {
	FILE *f;
	double seconds;
	int next_y; /* where the next lane goes */
};

struct lkh_lane {
	int y;
	unsigned int rows;
	bool strip;
};

#define LKH_TIMELINE_WIDTH 760 /* pixels of time */

int lkh_timeline_height(unsigned int total_rows, unsigned int lanes, unsigned int strips);
void lkh_timeline_begin(struct lkh_timeline *t, FILE *f, const char *title, double seconds,
			int height);
void lkh_timeline_lane(struct lkh_timeline *t, struct lkh_lane *lane, const char *label,
		       unsigned int rows, bool offcpu_strip);
/* Where second s falls, in pixels from the timeline's left edge (0 .. LKH_TIMELINE_WIDTH). */
double lkh_timeline_px(const struct lkh_timeline *t, double s);
/* A span (or merged spans) on the lane's row (0: outermost) from px0 to px1; rows past the lane's are not drawn. */
void lkh_timeline_span(struct lkh_timeline *t, const struct lkh_lane *lane, unsigned int row,
		       double px0, double px1, const char *color, const char *tooltip);
/* An off-CPU interval on the lane's strip (nothing if the lane has none). */
void lkh_timeline_offcpu(struct lkh_timeline *t, const struct lkh_lane *lane, double px0,
			 double px1, enum lkh_offcpu state, const char *tooltip);
void lkh_timeline_end(struct lkh_timeline *t);

#endif
