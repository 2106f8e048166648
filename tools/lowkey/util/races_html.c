// SPDX-License-Identifier: MIT
/*
 * lowkey races --html OUT: the report as one page -- a bar chart of how often each race was
 * caught, a table of the races (both accesses and the global), and for each race both threads'
 * stacks side by side.
 *
 * The page is drawn from the report's JSON (the same figures as --json, by the same code), read
 * back with src/format/chrome_json/json_read.c: functions, files and globals hold whatever names
 * a program's files have, and are escaped (html.h).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "html.h"
#include "html_report.h"
#include "internal/json_read.h"
#include "internal/outfile.h"
#include "races.h"

/* Bars past this many would be too thin to read: the table lists the rest. */
#define CHART_MAX_RACES 30

static const char *basename_of(const char *path)
{
	const char *slash = path ? strrchr(path, '/') : NULL;

	return slash ? slash + 1 : path;
}

/*
 * "function+0x12 (file.c:34)", "function (inlined) (file.c:34)", "0x55d0 (module)" or the ip: as
 * the text report writes it.
 */
static void place_string(const struct lk__jr_value *p, char *buf, size_t len)
{
	const char *function = lk__jr_string(p, "function"), *file = lk__jr_string(p, "file");
	const char *ip = lk__jr_string(p, "ip"), *module = lk__jr_string(p, "module");
	const struct lk__jr_value *inlined = lk__jr_get(p, "inlined");
	int n;

	if (function && inlined && inlined->boolean)
		n = snprintf(buf, len, "%s (inlined)", function);
	else if (function)
		n = snprintf(buf, len, "%s+0x%llx", function,
			     (unsigned long long)lk__jr_number(p, "offset"));
	else
		n = snprintf(buf, len, "%s", ip ? ip : "?");
	if (n < 0 || (size_t)n >= len)
		return;
	if (file)
		snprintf(buf + n, len - (size_t)n, " (%s:%.0f)", basename_of(file),
			 lk__jr_number(p, "line"));
	else if (!function && module)
		snprintf(buf + n, len - (size_t)n, " (%s)", basename_of(module));
}

/* "read-write of 4 bytes (atomic) by thread 123 at bump+0x5 (a.c:3)" */
static void side_string(const struct lk__jr_value *side, char *buf, size_t len)
{
	const char *access = lk__jr_string(side, "access");
	const struct lk__jr_value *size = lk__jr_get(side, "size"),
				  *atomic = lk__jr_get(side, "atomic");
	char where[1200], bytes[32] = "";

	place_string(side, where, sizeof(where));
	if (size && size->type == LK__JR_NUMBER)
		snprintf(bytes, sizeof(bytes), " of %.0f byte%s", size->number,
			 size->number == 1 ? "" : "s");
	snprintf(buf, len, "%s%s%s by thread %.0f at %s", access ? access : "access", bytes,
		 atomic && atomic->boolean ? " (atomic)" : "", lk__jr_number(side, "tid"), where);
}

static const struct lk__jr_value *heap_of(const struct lk__jr_value *race)
{
	const struct lk__jr_value *heap = lk__jr_get(race, "heap");

	return heap && heap->type == LK__JR_OBJECT ? heap : NULL;
}

/* "counter, 4 bytes at 0x5560", "heap block of 24 bytes at +8, ..." or "heap or stack, ..." */
static void global_string(const struct lk__jr_value *race, char *buf, size_t len)
{
	const char *symbol = lk__jr_string(race, "symbol"), *addr = lk__jr_string(race, "addr");
	double offset = lk__jr_number(race, "symbol_offset"), size = lk__jr_number(race, "size");
	const struct lk__jr_value *heap = heap_of(race);

	if (heap)
		snprintf(buf, len, "heap block of %.0f byte%s at +%.0f, %.0f byte%s at %s",
			 lk__jr_number(heap, "size"), lk__jr_number(heap, "size") == 1 ? "" : "s",
			 lk__jr_number(heap, "offset"), size, size == 1 ? "" : "s",
			 addr ? addr : "?");
	else if (symbol && offset > 0)
		snprintf(buf, len, "%s+0x%llx, %.0f byte%s at %s", symbol,
			 (unsigned long long)offset, size, size == 1 ? "" : "s", addr ? addr : "?");
	else
		snprintf(buf, len, "%s, %.0f byte%s at %s", symbol ? symbol : "heap or stack", size,
			 size == 1 ? "" : "s", addr ? addr : "?");
}

static bool has_other(const struct lk__jr_value *race)
{
	const struct lk__jr_value *other = lk__jr_get(race, "other");

	return other && other->type == LK__JR_OBJECT;
}

static void hits_chart(FILE *f, const struct lk__jr_value *races)
{
	static const char *const series[] = { "accesses caught", "windows" };
	size_t n = races->n < CHART_MAX_RACES ? races->n : CHART_MAX_RACES;
	const char **groups = calloc(n + 1, sizeof(*groups));
	char(*labels)[700] = calloc(n + 1, sizeof(*labels));
	double *values = calloc(2 * n + 1, sizeof(*values));

	if (!groups || !labels || !values) {
		lkh_para(f, "(out of memory for the chart)");
	} else {
		for (size_t i = 0; i < n; i++) {
			char global[600];

			global_string(&races->items[i], global, sizeof(global));
			snprintf(labels[i], sizeof(labels[i]), "race %zu: %s", i + 1, global);
			groups[i] = labels[i];
			values[2 * i] = lk__jr_number(&races->items[i], "hits");
			values[2 * i + 1] = lk__jr_number(&races->items[i], "windows");
		}
		lkh_bar_chart(f, &(struct lkh_bars){ "how often each race was caught", series, 2,
						     groups, n, values, true, NULL });
	}
	free(groups);
	free(labels);
	free(values);
}

static void text_cell(FILE *f, const char *text)
{
	fputs("<td><code>", f);
	lkh_text(f, text);
	fputs("</code></td>", f);
}

static void races_table(FILE *f, const struct lk__jr_value *races)
{
	static const char *const cols[] = { "#",	 "global", "held access",
					    "meanwhile", "caught", "windows" };

	lkh_table_begin(f, cols, sizeof(cols) / sizeof(cols[0]));
	for (size_t i = 0; i < races->n; i++) {
		const struct lk__jr_value *race = &races->items[i];
		char text[1600];

		lkh_row_begin(f);
		lkh_cellf(f, "%zu", i + 1);
		global_string(race, text, sizeof(text));
		lkh_cell(f, text);
		side_string(lk__jr_get(race, "held"), text, sizeof(text));
		text_cell(f, text);
		if (has_other(race)) {
			side_string(lk__jr_get(race, "other"), text, sizeof(text));
			text_cell(f, text);
		} else {
			lkh_cellf(
				f, "the value changed (%s -> %s), no access caught",
				lk__jr_string(race, "before") ? lk__jr_string(race, "before") : "?",
				lk__jr_string(race, "after") ? lk__jr_string(race, "after") : "?");
		}
		lkh_cellf(f, "%.0f", lk__jr_number(race, "hits"));
		lkh_cellf(f, "%.0f", lk__jr_number(race, "windows"));
		lkh_row_end(f);
	}
	lkh_table_end(f);
}

static const struct lk__jr_value *stack_of(const struct lk__jr_value *side)
{
	const struct lk__jr_value *stack = lk__jr_get(side, "stack");

	return stack && stack->type == LK__JR_ARRAY ? stack : NULL;
}

static void frame_cell(FILE *f, const struct lk__jr_value *stack, size_t i)
{
	char text[1200];

	if (!stack || i >= stack->n) {
		lkh_cell(f, "");
		return;
	}
	place_string(&stack->items[i], text, sizeof(text));
	text_cell(f, text);
}

/* "Allocated by thread 12 at make_counter+0x1d (a.c:30)." */
static void heap_para(FILE *f, const struct lk__jr_value *race)
{
	const struct lk__jr_value *heap = heap_of(race),
				  *site = heap ? lk__jr_get(heap, "site") : NULL;
	char where[1200];

	if (!site || site->type != LK__JR_OBJECT)
		return;
	place_string(site, where, sizeof(where));
	lkh_paraf(f, "The heap block was allocated by thread %.0f at %s.",
		  lk__jr_number(heap, "tid"), where);
}

/* Both threads' stacks, frame by frame, innermost first. */
static void stacks_table(FILE *f, size_t nr, const struct lk__jr_value *race)
{
	const struct lk__jr_value *held = lk__jr_get(race, "held"),
				  *other = lk__jr_get(race, "other");
	const struct lk__jr_value *a = stack_of(held),
				  *b = has_other(race) ? stack_of(other) : NULL;
	size_t depth = (a ? a->n : 0) > (b ? b->n : 0) ? a->n : (b ? b->n : 0);
	char held_col[64], other_col[64], heading[700], global[600];
	const char *cols[] = { "#", held_col, other_col };

	global_string(race, global, sizeof(global));
	snprintf(heading, sizeof(heading), "race %zu: %s", nr, global);
	lkh_section(f, heading, NULL);
	heap_para(f, race);
	if (!depth) {
		lkh_para(f, "No stack was taken (--stack 0, or the unwinder found none).");
		return;
	}
	snprintf(held_col, sizeof(held_col), "held: thread %.0f", lk__jr_number(held, "tid"));
	if (b)
		snprintf(other_col, sizeof(other_col), "meanwhile: thread %.0f",
			 lk__jr_number(other, "tid"));
	else
		snprintf(other_col, sizeof(other_col), "meanwhile: no access caught");
	lkh_table_begin(f, cols, 3);
	for (size_t i = 0; i < depth; i++) {
		lkh_row_begin(f);
		lkh_cellf(f, "%zu", i);
		frame_cell(f, a, i);
		frame_cell(f, b, i);
		lkh_row_end(f);
	}
	lkh_table_end(f);
}

static void summary(FILE *f, const struct lk__jr_value *root, size_t n)
{
	const struct lk__jr_value *status = lk__jr_get(root, "exit_status"),
				  *seed = lk__jr_get(root, "seed"),
				  *heap = lk__jr_get(root, "heap");
	const char *error = lk__jr_string(root, "error");

	lkh_paraf(f,
		  "%zu race%s found: %.0f windows, %.0f instructions armed of the %.0f sampled "
		  "(seed %.*s, %.6g armed a second, windows of %.6g ms).",
		  n, n == 1 ? "" : "s", lk__jr_number(root, "reached"),
		  lk__jr_number(root, "armed"),
		  lk__jr_number(lk__jr_get(root, "instructions"), "sampled"),
		  seed && seed->raw ? (int)seed->raw_len : 1, seed && seed->raw ? seed->raw : "?",
		  lk__jr_number(root, "rate"), lk__jr_number(root, "window_ms"));
	if (status && status->type == LK__JR_NUMBER)
		lkh_paraf(f, "The command exited with status %.0f.", status->number);
	if (lk__jr_number(root, "suppressed") > 0)
		lkh_paraf(f, "%.0f more races matched a suppression and are not listed.",
			  lk__jr_number(root, "suppressed"));
	if (lk__jr_number(root, "dropped") > 0)
		lkh_paraf(f, "%.0f more races had no room to be recorded.",
			  lk__jr_number(root, "dropped"));
	if (heap && heap->type == LK__JR_OBJECT && lk__jr_number(heap, "dropped") > 0)
		lkh_paraf(
			f,
			"%.0f heap blocks had no room in the table: a race on one names no block.",
			lk__jr_number(heap, "dropped"));
	if (error)
		lkh_paraf(f, "The sampler stopped: %s", error);
}

static void page(FILE *f, const struct lk__jr_value *root)
{
	const struct lk__jr_value *races = lk__jr_get(root, "races");
	size_t n = races && races->type == LK__JR_ARRAY ? races->n : 0;
	char title[1200];

	snprintf(title, sizeof(title), "lowkey races: %s",
		 lk__jr_string(root, "command") ? lk__jr_string(root, "command") : "?");
	lkh_page_begin(f, title);
	summary(f, root, n);
	if (!n)
		return;
	lkh_para(
		f,
		"Each race is a pair of instructions: the held thread was stopped before its "
		"access while a watchpoint caught the other thread's. Hover a bar for its figure.");
	hits_chart(f, races);
	races_table(f, races);
	for (size_t i = 0; i < n; i++)
		stacks_table(f, i + 1, &races->items[i]);
}

int races_html(const char *json, size_t len, const char *out_path)
{
	return html_report_page("races", json, len, out_path, page);
}
