// SPDX-License-Identifier: MIT
/*
 * lowkey report --html draws a counter several threads set as a line per thread, and stays
 * bounded in size however many samples and threads there are.
 *
 * html_counters.c: 12 threads each count one counter up 3000 times. The page's chart of it must
 * have 10 lines (the first 9 threads' own, the other 3 together on the 10th, named so), each line
 * folded into at most two points per slice of time (800 slices) since each has more than 2000
 * samples, and the first thread's name in its legend.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cli/run.h"
#include "html_counters.h"

#define LINES 10	/* the chart's most lines */
#define MAX_POINTS 1600 /* 800 slices' lowest and highest */

static struct lkt_run out;

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* The points of the polyline whose points="..." starts at p. */
static size_t points(const char *p)
{
	const char *end = strchr(p, '"');
	size_t n = 0;

	assert_non_null(end);
	for (; p < end; p++)
		n += *p == ',';
	return n;
}

/* The chart's lines: how many, each within bounds, the last one's title in *last. */
static size_t chart_lines(const char *chart, char *last, size_t len)
{
	const char *end = strstr(chart, "</svg>"), *p = chart;
	size_t lines = 0;

	assert_non_null(end);
	while ((p = strstr(p, "<polyline class=\"series\"")) && p < end) {
		const char *pts = strstr(p, "points=\"") + strlen("points=\"");
		const char *title = strstr(pts, "<title>") + strlen("<title>");
		size_t n = points(pts);

		assert_true(n >= 2);
		assert_true(n <= MAX_POINTS);
		snprintf(last, len, "%.*s", (int)(strchr(title, '<') - title), title);
		lines++;
		p = title;
	}
	return lines;
}

static void counter_has_a_line_per_thread(void **state)
{
	char dir[] = "/tmp/lkt-html-counters-XXXXXX", last[128], want[64];
	const char *chart;
	char *html;

	(void)state;
	assert_non_null(mkdtemp(dir));
	lkt_sh(&out, "%s trace -q -o %s/t.ctf -- %s", LOWKEY, dir, HTML_COUNTERS);
	lkt_expect(&out, 0, NULL);
	/* every sample recorded, or a thread's line might have too few to be folded */
	lkt_sh(&out, "%s report -q %s/t.ctf | grep -E '^  app:progress +%d '", LOWKEY, dir,
	       THREADS * SAMPLES);
	lkt_expect(&out, 0, "app:progress");
	lkt_sh(&out, "%s report -q --html %s/page.html %s/t.ctf", LOWKEY, dir, dir);
	lkt_expect(&out, 0, NULL);
	snprintf(last, sizeof(last), "%s/page.html", dir);
	html = slurp(last);
	chart = strstr(html, "aria-label=\"app:progress\"");
	assert_non_null(chart);
	assert_int_equal(chart_lines(chart, last, sizeof(last)), LINES);
	snprintf(want, sizeof(want), "%d other threads together", THREADS - (LINES - 1));
	assert_string_equal(last, want);
	assert_non_null(strstr(chart, "counter-0 ("));
	free(html);
	lkt_sh(&out, "rm -rf %s", dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(counter_has_a_line_per_thread),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
