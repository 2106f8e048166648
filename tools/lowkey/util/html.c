// SPDX-License-Identifier: MIT
/*
 * Self-contained HTML reports: escaping, the page, tables and static SVG charts (html.h).
 *
 * Coordinates are written with one decimal: enough for a screen, and the pages stay small. Text
 * widths are estimated (about 6.6 px a character at 11 px), which is what the layout needs to
 * keep labels apart; long labels are cut, whole in their tooltip.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "internal/utf8.h"
#include "html.h"

/* ---- text ---- */

/* C0 and C1 controls but tab and newline: HTML calls them parse errors, XML forbids most. */
static bool is_control(const unsigned char *s, size_t len)
{
	if (len == 1)
		return (s[0] < 0x20 && s[0] != '\t' && s[0] != '\n') || s[0] == 0x7f;
	return len == 2 && s[0] == 0xc2 && s[1] < 0xa0;
}

static const char *entity(unsigned char c)
{
	switch (c) {
	case '&':
		return "&amp;";
	case '<':
		return "&lt;";
	case '>':
		return "&gt;";
	case '"':
		return "&quot;";
	case '\'':
		return "&#39;";
	default:
		return NULL;
	}
}

void lkh_text_n(FILE *f, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;

	for (size_t i = 0; i < n;) {
		size_t k = lk__utf8_sequence(p + i, n - i);
		const char *e = k == 1 ? entity(p[i]) : NULL;

		if (e)
			fputs(e, f);
		else if (!k || is_control(p + i, k))
			fputs(LK__UTF8_REPLACEMENT, f);
		else
			fwrite(p + i, 1, k, f);
		i += k ? k : 1;
	}
}

void lkh_text(FILE *f, const char *s)
{
	if (s)
		lkh_text_n(f, s, strlen(s));
}

void lkh_textf(FILE *f, const char *fmt, ...)
{
	char buf[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	lkh_text(f, buf);
}

/* The first max characters of s (an invalid byte counts as one), and an ellipsis if it was cut. */
static void text_cut(FILE *f, const char *s, size_t max)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s), i = 0, chars = 0;

	while (i < n && chars < max) {
		size_t k = lk__utf8_sequence(p + i, n - i);

		i += k ? k : 1;
		chars++;
	}
	lkh_text_n(f, s, i);
	if (i < n)
		fputs("\xe2\x80\xa6", f); /* U+2026 */
}

void lkh_fmt_ns(char *buf, size_t len, double ns)
{
	if (isnan(ns))
		snprintf(buf, len, "-");
	else if (fabs(ns) < 10)
		snprintf(buf, len, "%.2g ns", ns); /* a disabled site: fractions of a nanosecond */
	else if (fabs(ns) < 1e3)
		snprintf(buf, len, "%.0f ns", ns);
	else if (fabs(ns) < 1e6)
		snprintf(buf, len, "%.3g us", ns / 1e3);
	else if (fabs(ns) < 1e9)
		snprintf(buf, len, "%.3g ms", ns / 1e6);
	else
		snprintf(buf, len, "%.3g s", ns / 1e9);
}

static void fmt_plain(char *buf, size_t len, double v)
{
	snprintf(buf, len, "%.3g", v);
}

/* ---- the page ---- */

static const char page_style[] =
	"body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px auto;max-width:1000px;"
	"padding:0 16px;color:#222;background:#fff}\n"
	"h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 6px;border-bottom:1px solid #ddd}\n"
	"p{margin:4px 0 10px}.charts{display:flex;flex-wrap:wrap;gap:8px}\n"
	"svg.chart{display:block;max-width:100%;height:auto;background:#fff}\n"
	"svg text{font:11px system-ui,sans-serif;fill:#333}svg text.t{font-size:13px;font-weight:600}\n"
	"svg .axis{stroke:#888;stroke-width:1}svg .grid{stroke:#eee;stroke-width:1}\n"
	"table{border-collapse:collapse;margin:6px 0 12px;font-size:13px}.wide{overflow-x:auto}\n"
	"th,td{padding:3px 8px;border-bottom:1px solid #e4e4e4;text-align:left;vertical-align:top}\n"
	"th{background:#f4f4f4}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\n"
	"code{font-size:12px}\n";

void lkh_page_begin(FILE *f, const char *title)
{
	fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
	      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>",
	      f);
	lkh_text(f, title);
	fprintf(f, "</title>\n<style>\n%s</style>\n</head>\n<body>\n<h1>", page_style);
	lkh_text(f, title);
	fputs("</h1>\n", f);
}

int lkh_page_end(FILE *f)
{
	fputs("</body>\n</html>\n", f);
	if (fflush(f) != 0 || ferror(f))
		return errno ? -errno : -EIO;
	return 0;
}

void lkh_section(FILE *f, const char *heading, const char *note)
{
	fputs("<h2>", f);
	lkh_text(f, heading);
	fputs("</h2>\n", f);
	if (note)
		lkh_para(f, note);
}

void lkh_para(FILE *f, const char *text)
{
	fputs("<p>", f);
	lkh_text(f, text);
	fputs("</p>\n", f);
}

void lkh_paraf(FILE *f, const char *fmt, ...)
{
	char buf[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	lkh_para(f, buf);
}

/* ---- tables ---- */

void lkh_table_begin(FILE *f, const char *const *headers, size_t n)
{
	fputs("<div class=\"wide\"><table>\n<tr>", f);
	for (size_t i = 0; i < n; i++) {
		fputs("<th>", f);
		lkh_text(f, headers[i]);
		fputs("</th>", f);
	}
	fputs("</tr>\n", f);
}

void lkh_row_begin(FILE *f)
{
	fputs("<tr>", f);
}

void lkh_cell(FILE *f, const char *text)
{
	fputs("<td>", f);
	lkh_text(f, text);
	fputs("</td>", f);
}

void lkh_cell_num(FILE *f, const char *text)
{
	fputs("<td class=\"n\">", f);
	lkh_text(f, text);
	fputs("</td>", f);
}

void lkh_cellf(FILE *f, const char *fmt, ...)
{
	char buf[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	lkh_cell_num(f, buf);
}

void lkh_row_end(FILE *f)
{
	fputs("</tr>\n", f);
}

void lkh_table_end(FILE *f)
{
	fputs("</table></div>\n", f);
}

/* ---- charts: shared parts ---- */

const char *lkh_color(size_t i)
{
	/* Tableau 10: told apart by most people, colour-blind ones included */
	static const char *const palette[] = { "#4e79a7", "#f28e2b", "#59a14f", "#e15759",
					       "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
					       "#9c755f", "#bab0ac" };

	return palette[i % (sizeof(palette) / sizeof(palette[0]))];
}

static void svg_begin(FILE *f, const char *kind, int width, int height, const char *title)
{
	fprintf(f,
		"<svg class=\"chart %s\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		"viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"",
		kind, width, height, width, height);
	lkh_text(f, title);
	fputs("\">\n<text class=\"t\" x=\"8\" y=\"16\">", f);
	text_cut(f, title, (size_t)(width - 16) / 8);
	fputs("</text>\n", f);
}

static void svg_end(FILE *f)
{
	fputs("</svg>\n", f);
}

static void svg_label(FILE *f, double x, double y, const char *anchor, const char *text)
{
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">", x, y, anchor);
	lkh_text(f, text);
	fputs("</text>\n", f);
}

static void svg_line(FILE *f, const char *cls, double x1, double y1, double x2, double y2)
{
	fprintf(f, "<line class=\"%s\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", cls,
		x1, y1, x2, y2);
}

static void svg_no_data(FILE *f, int width, int height)
{
	svg_label(f, width / 2.0, height / 2.0, "middle", "no data");
}

/* A step of 1, 2 or 5 times a power of ten giving about `ticks` ticks over range. */
static double nice_step(double range, int ticks)
{
	double raw = range / ticks, mag, r;

	if (!(raw > 0) || !isfinite(raw))
		return 1;
	mag = pow(10, floor(log10(raw)));
	r = raw / mag;
	return (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10) * mag;
}

/* A linear axis's range: [lo, hi] widened to whole steps. */
struct scale {
	double lo, hi, step;
	double p0, p1; /* pixels of lo and hi */
	bool log;
};

static void scale_linear(struct scale *s, double lo, double hi, double p0, double p1, int ticks)
{
	if (!(hi > lo)) {
		double pad = fabs(lo) > 0 ? fabs(lo) * 0.1 : 1;

		lo -= pad;
		hi += pad;
	}
	s->step = nice_step(hi - lo, ticks);
	s->lo = floor(lo / s->step) * s->step;
	s->hi = ceil(hi / s->step) * s->step;
	s->p0 = p0;
	s->p1 = p1;
	s->log = false;
}

/* A log axis: whole decades around [lo, hi] (both > 0). */
static void scale_log(struct scale *s, double lo, double hi, double p0, double p1)
{
	s->lo = pow(10, floor(log10(lo)));
	s->hi = pow(10, ceil(log10(hi)));
	if (s->hi <= s->lo)
		s->hi = s->lo * 10;
	s->step = 10;
	s->p0 = p0;
	s->p1 = p1;
	s->log = true;
}

static double scale_px(const struct scale *s, double v)
{
	double t = s->log ? (log10(v) - log10(s->lo)) / (log10(s->hi) - log10(s->lo)) :
			    (v - s->lo) / (s->hi - s->lo);

	return s->p0 + t * (s->p1 - s->p0);
}

/* The ticks of s: at each step (linear) or decade (log), at most 40. */
static size_t scale_ticks(const struct scale *s, double *out, size_t max)
{
	size_t n = 0;

	for (double v = s->lo; v <= s->hi * (1 + 1e-9) && n < max;
	     v = s->log ? v * 10 : s->lo + s->step * (double)n)
		out[n++] = fabs(v) < s->step * 1e-9 ? 0 : v;
	return n;
}

/* ---- histogram ---- */

#define HIST_W 470
#define HIST_H 230
#define HIST_LEFT 48
#define HIST_RIGHT 26
#define HIST_TOP 28
#define HIST_BOTTOM 34
#define PER_DECADE 5

static void histogram_axes(FILE *f, int lo_decade, int decades, const struct scale *y)
{
	double ticks[40], plot_w = HIST_W - HIST_LEFT - HIST_RIGHT;
	size_t n = scale_ticks(y, ticks, 40);
	char buf[32];

	for (size_t i = 0; i < n; i++) {
		double py = scale_px(y, ticks[i]);

		svg_line(f, "grid", HIST_LEFT, py, HIST_W - HIST_RIGHT, py);
		snprintf(buf, sizeof(buf), "%.6g", ticks[i]);
		svg_label(f, HIST_LEFT - 4, py + 4, "end", buf);
	}
	svg_line(f, "axis", HIST_LEFT, HIST_H - HIST_BOTTOM, HIST_W - HIST_RIGHT,
		 HIST_H - HIST_BOTTOM);
	for (int d = 0; d <= decades; d++) {
		double px = HIST_LEFT + plot_w * d / decades;

		svg_line(f, "axis", px, HIST_H - HIST_BOTTOM, px, HIST_H - HIST_BOTTOM + 4);
		lkh_fmt_ns(buf, sizeof(buf), pow(10, lo_decade + d));
		svg_label(f, px, HIST_H - HIST_BOTTOM + 16, "middle", buf);
	}
	svg_label(f, HIST_LEFT + plot_w / 2, HIST_H - 4, "middle",
		  "duration (log scale); bars: how many");
}

static int bucket_of(double v, int lo_decade)
{
	return (int)floor((log10(v > 1 ? v : 1) - lo_decade) * PER_DECADE + 1e-9);
}

void lkh_histogram(FILE *f, const char *title, const double *v, size_t n, const char *color)
{
	double lo = INFINITY, hi = 1, plot_w = HIST_W - HIST_LEFT - HIST_RIGHT, bar_w;
	uint64_t *counts, top = 0;
	int lo_decade, decades, nb;
	struct scale y;

	svg_begin(f, "histogram", HIST_W, HIST_H, title);
	for (size_t i = 0; i < n; i++) {
		double d = v[i] > 1 ? v[i] :
				      1; /* under a nanosecond (or none: CPU time) goes in 1 ns */

		lo = d < lo ? d : lo;
		hi = d > hi ? d : hi;
	}
	lo_decade = n ? (int)floor(log10(lo)) : 0;
	decades = n ? (int)floor(log10(hi)) + 1 - lo_decade : 1;
	nb = decades * PER_DECADE;
	counts = n ? calloc((size_t)nb, sizeof(*counts)) : NULL;
	if (!counts) {
		svg_no_data(f, HIST_W, HIST_H);
		svg_end(f);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		int b = bucket_of(v[i], lo_decade);

		counts[b < 0 ? 0 : b >= nb ? nb - 1 : b]++;
	}
	for (int b = 0; b < nb; b++)
		top = counts[b] > top ? counts[b] : top;
	scale_linear(&y, 0, (double)top, HIST_H - HIST_BOTTOM, HIST_TOP, 4);
	histogram_axes(f, lo_decade, decades, &y);
	bar_w = plot_w / nb;
	for (int b = 0; b < nb; b++) {
		double py = scale_px(&y, (double)counts[b]);
		char from[32], to[32];

		if (!counts[b])
			continue;
		lkh_fmt_ns(from, sizeof(from), pow(10, lo_decade + (double)b / PER_DECADE));
		lkh_fmt_ns(to, sizeof(to), pow(10, lo_decade + (double)(b + 1) / PER_DECADE));
		fprintf(f,
			"<rect class=\"bar\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\">"
			"<title>%s to %s: %llu</title></rect>\n",
			HIST_LEFT + b * bar_w + 0.5, py, bar_w - 1, HIST_H - HIST_BOTTOM - py,
			color, from, to, (unsigned long long)counts[b]);
	}
	free(counts);
	svg_end(f);
}

/* ---- line chart ---- */

#define LINE_W 940
#define LINE_H 220
#define LINE_LEFT 70
#define LINE_RIGHT 30
#define LINE_TOP 30
#define LINE_BOTTOM 34
#define LINE_LEGEND_LINE 16

/* The plot's area: below the title and the legend's lines, above the time axis. */
struct line_box {
	double top, bottom;
	int height;
};

static void line_axes(FILE *f, const struct line_box *box, const struct scale *x,
		      const struct scale *y, const char *y_label)
{
	double ticks[40], mid = (box->top + box->bottom) / 2;
	size_t n = scale_ticks(y, ticks, 40);
	char buf[32];

	for (size_t i = 0; i < n; i++) {
		double py = scale_px(y, ticks[i]);

		svg_line(f, "grid", LINE_LEFT, py, LINE_W - LINE_RIGHT, py);
		snprintf(buf, sizeof(buf), "%.6g", ticks[i]);
		svg_label(f, LINE_LEFT - 4, py + 4, "end", buf);
	}
	n = scale_ticks(x, ticks, 40);
	for (size_t i = 0; i < n; i++) {
		double px = scale_px(x, ticks[i]);

		svg_line(f, "axis", px, box->bottom, px, box->bottom + 4);
		snprintf(buf, sizeof(buf), "%.6g s", ticks[i]);
		svg_label(f, px, box->bottom + 16, "middle", buf);
	}
	svg_line(f, "axis", LINE_LEFT, box->bottom, LINE_W - LINE_RIGHT, box->bottom);
	svg_line(f, "axis", LINE_LEFT, box->top, LINE_LEFT, box->bottom);
	svg_label(f, LINE_LEFT + (LINE_W - LINE_LEFT - LINE_RIGHT) / 2.0, box->height - 4, "middle",
		  "time since the trace's first event");
	if (y_label) {
		fprintf(f,
			"<text x=\"12\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 12 %.1f)\">",
			mid, mid);
		lkh_text(f, y_label);
		fputs("</text>\n", f);
	}
}

#define LINE_LEGEND_CHARS 30

static double line_legend_width(const char *name)
{
	size_t len = strlen(name) < LINE_LEGEND_CHARS ? strlen(name) : LINE_LEGEND_CHARS;

	return 22 + 6.6 * (double)len;
}

/*
 * The series' names below the title, wrapped to the plot's width; returns the lines they take
 * (drawn only when draw is true).
 */
static int line_legend(FILE *f, const struct lkh_series *s, size_t n, bool draw)
{
	double x = LINE_LEFT, y = LINE_TOP - 8;
	int lines = 1;

	for (size_t i = 0; i < n; i++) {
		if (x > LINE_LEFT && x + line_legend_width(s[i].name) > LINE_W - LINE_RIGHT) {
			x = LINE_LEFT;
			y += LINE_LEGEND_LINE;
			lines++;
		}
		if (draw) {
			fprintf(f,
				"<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"10\" fill=\"%s\"/>\n",
				x, y, lkh_color(i));
			fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", x + 16, y + 9);
			text_cut(f, s[i].name, LINE_LEGEND_CHARS);
			fputs("</text>\n", f);
		}
		x += line_legend_width(s[i].name);
	}
	return lines;
}

static bool line_range(const struct lkh_series *s, size_t n, double *xlo, double *xhi, double *ylo,
		       double *yhi)
{
	*xlo = *ylo = INFINITY;
	*xhi = *yhi = -INFINITY;
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < s[i].n; k++) {
			if (!isfinite(s[i].x[k]) || !isfinite(s[i].y[k]))
				continue;
			*xlo = fmin(*xlo, s[i].x[k]), *xhi = fmax(*xhi, s[i].x[k]);
			*ylo = fmin(*ylo, s[i].y[k]), *yhi = fmax(*yhi, s[i].y[k]);
		}
	return isfinite(*xlo);
}

void lkh_line_chart(FILE *f, const char *title, const char *y_label, const struct lkh_series *s,
		    size_t n)
{
	double xlo, xhi, ylo, yhi;
	int legend = n ? line_legend(f, s, n, false) * LINE_LEGEND_LINE : 0;
	struct line_box box = { LINE_TOP + legend, LINE_H - LINE_BOTTOM + legend, LINE_H + legend };
	struct scale x, y;

	svg_begin(f, "line", LINE_W, box.height, title);
	if (!line_range(s, n, &xlo, &xhi, &ylo, &yhi)) {
		svg_no_data(f, LINE_W, box.height);
		svg_end(f);
		return;
	}
	scale_linear(&x, xlo, xhi, LINE_LEFT, LINE_W - LINE_RIGHT, 10);
	if (xlo >= 0 && xhi > xlo) { /* time from 0 to the end, as the timeline */
		x.lo = 0;
		x.hi = xhi;
	}
	scale_linear(&y, ylo, yhi, box.bottom, box.top, 4);
	line_axes(f, &box, &x, &y, y_label);
	line_legend(f, s, n, true);
	for (size_t i = 0; i < n; i++) {
		fprintf(f,
			"<polyline class=\"series\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"",
			lkh_color(i));
		for (size_t k = 0; k < s[i].n; k++)
			if (isfinite(s[i].x[k]) && isfinite(s[i].y[k]))
				fprintf(f, "%.1f,%.1f ", scale_px(&x, s[i].x[k]),
					scale_px(&y, s[i].y[k]));
		fputs("\"><title>", f);
		lkh_text(f, s[i].name);
		fputs("</title></polyline>\n", f);
	}
	svg_end(f);
}

/* ---- grouped bar chart ---- */

#define BARS_W 940
#define BARS_LABEL 330 /* the groups' labels, right-aligned before the bars */
#define BARS_RIGHT 80  /* room for the value at a bar's end */
#define LEGEND_TOP 24  /* the legend's first line; the bars start below its last */
#define LEGEND_LINE 16
#define BARS_BOTTOM 30
#define BAR_H 12
#define LABEL_CHARS 48

static bool bars_range(const struct lkh_bars *b, double *lo, double *hi)
{
	*lo = INFINITY;
	*hi = -INFINITY;
	for (size_t i = 0; i < b->ngroups * b->nseries; i++)
		if (isfinite(b->values[i])) {
			*lo = fmin(*lo, b->values[i]);
			*hi = fmax(*hi, b->values[i]);
		}
	return isfinite(*lo);
}

/* The ratio of the largest positive value to the smallest, which it leaves in lo and hi. */
static double positive_span(const struct lkh_bars *b, double *lo, double *hi)
{
	double l = INFINITY, h = 0;

	for (size_t i = 0; i < b->ngroups * b->nseries; i++)
		if (isfinite(b->values[i]) && b->values[i] > 0) {
			l = fmin(l, b->values[i]);
			h = fmax(h, b->values[i]);
		}
	if (!(h > 0))
		return 0;
	*lo = l;
	*hi = h;
	return h / l;
}

static const char *series_color(const struct lkh_bars *b, size_t s)
{
	return b->colors ? b->colors[s] : lkh_color(s);
}

static double legend_width(const char *name)
{
	return 30 + 6.6 * (double)(strlen(name) < 40 ? strlen(name) : 40);
}

/* The legend, wrapped to the chart's width from its label column; returns where the bars start. */
static double bars_legend(FILE *f, const struct lkh_bars *b, bool draw)
{
	double x = BARS_LABEL, y = LEGEND_TOP;

	for (size_t s = 0; s < b->nseries; s++) {
		if (x > BARS_LABEL && x + legend_width(b->series[s]) > BARS_W) {
			x = BARS_LABEL;
			y += LEGEND_LINE;
		}
		if (draw) {
			fprintf(f,
				"<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"10\" fill=\"%s\"/>\n",
				x, y, series_color(b, s));
			fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", x + 16, y + 9);
			text_cut(f, b->series[s], 40);
			fputs("</text>\n", f);
		}
		x += legend_width(b->series[s]);
	}
	return y + LEGEND_LINE + 6;
}

static void bars_axis(FILE *f, const struct scale *x, double top, double bottom,
		      void (*fmt)(char *, size_t, double))
{
	double ticks[40];
	size_t n = scale_ticks(x, ticks, 40);
	char buf[32];

	for (size_t i = 0; i < n; i++) {
		double px = scale_px(x, ticks[i]);

		svg_line(f, "grid", px, top, px, bottom);
		fmt(buf, sizeof(buf), ticks[i]);
		svg_label(f, px, bottom + 14, "middle", buf);
	}
	svg_line(f, "axis", BARS_LABEL, top, BARS_LABEL, bottom);
	if (x->log)
		svg_label(f, BARS_W - BARS_RIGHT, bottom + 28, "end", "log scale");
}

static void bar(FILE *f, const struct lkh_bars *b, const struct scale *x, size_t g, size_t s,
		double y)
{
	double v = b->values[g * b->nseries + s], x0 = BARS_LABEL, x1;
	char buf[48];

	if (!isfinite(v)) { /* a dash where the series has no figure */
		svg_label(f, BARS_LABEL + 6, y + BAR_H - 2, "start", "\xe2\x80\x93");
		return;
	}
	b->fmt(buf, sizeof(buf), v);
	x1 = scale_px(x, x->log ? fmax(v, x->lo) :
				  v); /* on a log scale, 0 is drawn as the axis' start */
	fprintf(f,
		"<rect class=\"bar\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"%s\"><title>",
		x0, y, fmax(x1 - x0, 1), BAR_H, series_color(b, s));
	lkh_text(f, b->groups[g]);
	fputs(", ", f);
	lkh_text(f, b->series[s]);
	fprintf(f, ": %s</title></rect>\n", buf);
	svg_label(f, fmax(x1, x0 + 1) + 4, y + BAR_H - 2, "start", buf);
}

void lkh_bar_chart(FILE *f, const struct lkh_bars *bars)
{
	struct lkh_bars b = *bars;
	double lo, hi, group_h = (double)b.nseries * (BAR_H + 2) + 10,
		       top = bars_legend(f, &b, false);
	double bottom = top + group_h * (double)b.ngroups;
	int height = (int)bottom + BARS_BOTTOM + 12;
	struct scale x;

	if (!b.fmt)
		b.fmt = fmt_plain;
	svg_begin(f, "bars", BARS_W, height, b.title);
	if (!b.ngroups || !b.nseries || !bars_range(&b, &lo, &hi)) {
		svg_no_data(f, BARS_W, height);
		svg_end(f);
		return;
	}
	if (b.log && positive_span(&b, &lo, &hi) > 100)
		scale_log(&x, lo, hi, BARS_LABEL, BARS_W - BARS_RIGHT);
	else
		scale_linear(&x, fmin(lo, 0), fmax(hi, 0), BARS_LABEL, BARS_W - BARS_RIGHT, 6);
	bars_legend(f, &b, true);
	bars_axis(f, &x, top, bottom, b.fmt);
	for (size_t g = 0; g < b.ngroups; g++) {
		double y = top + group_h * (double)g + 5;

		fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\"><title>", BARS_LABEL - 6,
			y + (group_h - 10) / 2 + 4);
		lkh_text(f, b.groups[g]);
		fputs("</title>", f);
		text_cut(f, b.groups[g], LABEL_CHARS);
		fputs("</text>\n", f);
		for (size_t s = 0; s < b.nseries; s++)
			bar(f, &b, &x, g, s, y + (double)s * (BAR_H + 2));
	}
	svg_end(f);
}

/* ---- stacked bar chart ---- */

static double group_sum(const struct lkh_bars *b, size_t g)
{
	double sum = 0;

	for (size_t s = 0; s < b->nseries; s++)
		if (isfinite(b->values[g * b->nseries + s]) && b->values[g * b->nseries + s] > 0)
			sum += b->values[g * b->nseries + s];
	return sum;
}

static void group_label(FILE *f, const char *label, double y)
{
	fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\"><title>", BARS_LABEL - 6, y);
	lkh_text(f, label);
	fputs("</title>", f);
	text_cut(f, label, LABEL_CHARS);
	fputs("</text>\n", f);
}

/* One group's bar: its parts from the left, then its sum at the end. */
static void stacked_bar(FILE *f, const struct lkh_bars *b, const struct scale *x, size_t g,
			double y)
{
	double sum = group_sum(b, g), at = 0;
	char buf[48];

	for (size_t s = 0; s < b->nseries; s++) {
		double v = b->values[g * b->nseries + s];
		double x0 = scale_px(x, at), x1;

		if (!isfinite(v) || v <= 0)
			continue;
		at += v;
		x1 = scale_px(x, at);
		b->fmt(buf, sizeof(buf), v);
		fprintf(f,
			"<rect class=\"part\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"%s\"><title>",
			x0, y, fmax(x1 - x0, 0.5), BAR_H + 4, series_color(b, s));
		lkh_text(f, b->groups[g]);
		fputs(", ", f);
		lkh_text(f, b->series[s]);
		fprintf(f, ": %s (%.1f%%)</title></rect>\n", buf, 100 * v / sum);
	}
	b->fmt(buf, sizeof(buf), sum);
	svg_label(f, scale_px(x, sum) + 4, y + BAR_H, "start", buf);
}

void lkh_stacked_bar_chart(FILE *f, const struct lkh_bars *bars)
{
	struct lkh_bars b = *bars;
	double hi = 0, top = bars_legend(f, &b, false), group_h = BAR_H + 10;
	double bottom = top + group_h * (double)b.ngroups;
	int height = (int)bottom + BARS_BOTTOM + 12;
	struct scale x;

	if (!b.fmt)
		b.fmt = fmt_plain;
	for (size_t g = 0; g < b.ngroups; g++)
		hi = fmax(hi, group_sum(&b, g));
	svg_begin(f, "stacked", BARS_W, height, b.title);
	if (!b.nseries || !(hi > 0)) {
		svg_no_data(f, BARS_W, height);
		svg_end(f);
		return;
	}
	scale_linear(&x, 0, hi, BARS_LABEL, BARS_W - BARS_RIGHT, 6);
	bars_legend(f, &b, true);
	bars_axis(f, &x, top, bottom, b.fmt);
	for (size_t g = 0; g < b.ngroups; g++) {
		double y = top + group_h * (double)g + 3;

		group_label(f, b.groups[g], y + BAR_H);
		stacked_bar(f, &b, &x, g, y);
	}
	svg_end(f);
}

/* ---- timeline ---- */

#define TL_W 960
#define TL_LABEL 170 /* the lanes' labels, left of the time */
#define TL_TOP 50
#define TL_ROW 14
#define TL_STRIP 10
#define TL_GAP 10

int lkh_timeline_height(unsigned int total_rows, unsigned int lanes, unsigned int strips)
{
	return TL_TOP + (int)(total_rows * TL_ROW + strips * (TL_STRIP + 2) + lanes * TL_GAP) + 10;
}

void lkh_timeline_begin(struct lkh_timeline *t, FILE *f, const char *title, double seconds,
			int height)
{
	struct scale x;
	double ticks[40];
	size_t n;
	char buf[32];

	*t = (struct lkh_timeline){ .f = f,
				    .seconds = seconds > 0 ? seconds : 1e-9,
				    .next_y = TL_TOP };
	svg_begin(f, "timeline", TL_W, height, title);
	/* off-CPU strips hatched: the spans' palette has an orange and a grey too */
	fputs("<defs><pattern id=\"lkh-runnable\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
	      "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#f6d5a2\"/>"
	      "<rect width=\"3\" height=\"6\" fill=\"#d9861c\"/></pattern>"
	      "<pattern id=\"lkh-blocked\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
	      "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#d6dbe0\"/>"
	      "<rect width=\"3\" height=\"6\" fill=\"#6e7882\"/></pattern></defs>\n",
	      f);
	scale_linear(&x, 0, t->seconds, TL_LABEL, TL_LABEL + LKH_TIMELINE_WIDTH, 8);
	x.hi = t->seconds; /* the axis ends where the trace does, not at the next whole step */
	n = scale_ticks(&x, ticks, 40);
	for (size_t i = 0; i < n; i++) {
		double px = scale_px(&x, ticks[i]);

		svg_line(f, "grid", px, TL_TOP - 8, px, height - 6);
		snprintf(buf, sizeof(buf), "%.6g s", ticks[i]);
		svg_label(f, px, TL_TOP - 12, "middle", buf);
	}
}

void lkh_timeline_lane(struct lkh_timeline *t, struct lkh_lane *lane, const char *label,
		       unsigned int rows, bool offcpu_strip)
{
	int h = (int)(rows * TL_ROW) + (offcpu_strip ? TL_STRIP + 2 : 0);

	*lane = (struct lkh_lane){ t->next_y, rows, offcpu_strip };
	t->next_y += h + TL_GAP;
	fprintf(t->f,
		"<rect class=\"lane\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#f4f4f4\"/>\n",
		TL_LABEL, lane->y - 1, LKH_TIMELINE_WIDTH, h + 2);
	fprintf(t->f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\"><title>", TL_LABEL - 6,
		lane->y + 11);
	lkh_text(t->f, label);
	fputs("</title>", t->f);
	text_cut(t->f, label, 24);
	fputs("</text>\n", t->f);
}

double lkh_timeline_px(const struct lkh_timeline *t, double s)
{
	double px = s / t->seconds * LKH_TIMELINE_WIDTH;

	return px < 0 ? 0 : px > LKH_TIMELINE_WIDTH ? LKH_TIMELINE_WIDTH : px;
}

void lkh_timeline_span(struct lkh_timeline *t, const struct lkh_lane *lane, unsigned int row,
		       double px0, double px1, const char *color, const char *tooltip)
{
	if (row >= lane->rows)
		return;
	fprintf(t->f,
		"<rect class=\"span\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"><title>",
		TL_LABEL + px0, lane->y + (int)row * TL_ROW, fmax(px1 - px0, 0.5), TL_ROW - 2,
		color);
	lkh_text(t->f, tooltip);
	fputs("</title></rect>\n", t->f);
}

void lkh_timeline_offcpu(struct lkh_timeline *t, const struct lkh_lane *lane, double px0,
			 double px1, enum lkh_offcpu state, const char *tooltip)
{
	if (!lane->strip)
		return;
	fprintf(t->f,
		"<rect class=\"offcpu\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"><title>",
		TL_LABEL + px0, lane->y + (int)lane->rows * TL_ROW + 1, fmax(px1 - px0, 0.5),
		TL_STRIP, state == LKH_RUNNABLE ? "url(#lkh-runnable)" : "url(#lkh-blocked)");
	lkh_text(t->f, tooltip);
	fputs("</title></rect>\n", t->f);
}

void lkh_timeline_end(struct lkh_timeline *t)
{
	svg_end(t->f);
}
