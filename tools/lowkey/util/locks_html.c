// SPDX-License-Identifier: MIT
/*
 * lowkey locks --html OUT: the report as one page -- per process, the most waited-for locks as a
 * bar chart of their wait and hold times, and the table `lowkey locks` prints, call sites included.
 *
 * The page is drawn from the report's JSON (the same figures as --json, by the same code), read
 * back with src/format/chrome_json/json_read.c: call sites hold whatever names a program's symbols have, and are escaped.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "internal/outfile.h"
#include "html.h"
#include "html_report.h"
#include "internal/json_read.h"
#include "locks_html.h"

/* "function (file:line)", "function (module)", "module+0x1a2b" or "?": as lowkey locks prints it */
static void site_string(const struct lk__jr_value *site, char *buf, size_t len)
{
	const char *function = lk__jr_string(site, "function"), *file = lk__jr_string(site, "file");
	const char *module = lk__jr_string(site, "module");

	if (!site || site->type != LK__JR_OBJECT)
		snprintf(buf, len, "?");
	else if (function && file)
		snprintf(buf, len, "%s (%s:%.0f)", function, file, lk__jr_number(site, "line"));
	else if (function)
		snprintf(buf, len, "%s (%s)", function, module ? module : "?");
	else if (module)
		snprintf(buf, len, "%s+0x%llx", module,
			 (unsigned long long)lk__jr_number(site, "offset"));
	else
		snprintf(buf, len, "%s",
			 lk__jr_string(site, "address") ? lk__jr_string(site, "address") : "?");
}

/* The call site a lock is named by: its first contended acquisition's, else its first one's. */
static void lock_site(const struct lk__jr_value *lock, char *buf, size_t len, bool *contended)
{
	const struct lk__jr_value *site = lk__jr_get(lock, "site");

	*contended = site && site->type == LK__JR_OBJECT;
	site_string(*contended ? site : lk__jr_get(lock, "first_site"), buf, len);
}

static void lock_label(const struct lk__jr_value *lock, size_t i, char *buf, size_t len)
{
	char site[600];
	bool contended;

	lock_site(lock, site, sizeof(site), &contended);
	snprintf(buf, len, "#%zu %s, %s", i + 1,
		 lk__jr_string(lock, "kind") ? lk__jr_string(lock, "kind") : "lock", site);
}

/* Bars past this many would be too thin to read: the table lists the rest. */
#define CHART_MAX_LOCKS 30

static void wait_chart(FILE *f, const struct lk__jr_value *top, const char *title)
{
	static const char *const series[] = { "waiting (total)", "held (total)" };
	size_t n = top->n < CHART_MAX_LOCKS ? top->n : CHART_MAX_LOCKS;
	const char **groups = calloc(n + 1, sizeof(*groups));
	char(*labels)[700] = calloc(n + 1, sizeof(*labels));
	double *values = calloc(2 * n + 1, sizeof(*values));

	if (!groups || !labels || !values) {
		lkh_para(f, "(out of memory for the chart)");
	} else {
		for (size_t i = 0; i < n; i++) {
			lock_label(&top->items[i], i, labels[i], sizeof(labels[i]));
			groups[i] = labels[i];
			values[2 * i] = lk__jr_number(&top->items[i], "wait_total_ns");
			values[2 * i + 1] = lk__jr_number(&top->items[i], "hold_total_ns");
		}
		lkh_bar_chart(f, &(struct lkh_bars){ title, series, 2, groups, n, values, true,
						     lkh_fmt_ns });
	}
	free(groups);
	free(labels);
	free(values);
}

static void ns_cell(FILE *f, const struct lk__jr_value *lock, const char *key)
{
	char buf[32];

	lkh_fmt_ns(buf, sizeof(buf), lk__jr_number(lock, key));
	lkh_cell_num(f, buf);
}

static void lock_table(FILE *f, const struct lk__jr_value *top)
{
	static const char *const cols[] = { "#",	 "lock and call site", "acquired",
					    "contended", "wait total",	       "max",
					    "mean",	 "held total",	       "max",
					    "mean",	 "owner changes",      "1/1000 of CPU" };

	lkh_table_begin(f, cols, sizeof(cols) / sizeof(cols[0]));
	for (size_t i = 0; i < top->n; i++) {
		const struct lk__jr_value *lock = &top->items[i];
		char site[600];
		bool contended;

		lock_site(lock, site, sizeof(site), &contended);
		lkh_row_begin(f);
		lkh_cellf(f, "%zu", i + 1);
		fputs("<td>", f);
		lkh_textf(f, "%s %s%s",
			  lk__jr_string(lock, "kind") ? lk__jr_string(lock, "kind") : "?",
			  lk__jr_string(lock, "address") ? lk__jr_string(lock, "address") : "?",
			  lk__jr_get(lock, "destroyed") && lk__jr_get(lock, "destroyed")->boolean ?
				  " (gone)" :
				  "");
		fputs("<br><code>", f);
		lkh_text(f, site);
		fputs("</code>", f);
		if (!contended)
			lkh_text(f, " (never contended: its first acquisition)");
		fputs("</td>", f);
		lkh_cellf(f, "%.0f", lk__jr_number(lock, "acquisitions"));
		lkh_cellf(f, "%.0f (%.1f%%)", lk__jr_number(lock, "contended"),
			  lk__jr_number(lock, "contended_pct"));
		ns_cell(f, lock, "wait_total_ns");
		ns_cell(f, lock, "wait_max_ns");
		ns_cell(f, lock, "wait_mean_ns");
		ns_cell(f, lock, "hold_total_ns");
		ns_cell(f, lock, "hold_max_ns");
		ns_cell(f, lock, "hold_mean_ns");
		lkh_cellf(f, "%.0f", lk__jr_number(lock, "owner_changes"));
		lkh_cellf(f, "%.2f", lk__jr_number(lock, "wait_per_mille_cpu"));
		lkh_row_end(f);
	}
	lkh_table_end(f);
}

/* What the table leaves out, as the text report says it. */
static void left_out_note(FILE *f, const struct lk__jr_value *p)
{
	double left_out = lk__jr_number(p, "left_out"),
	       folded = lk__jr_number(p, "destroyed_uncontended_locks");

	if (left_out > 0)
		lkh_paraf(f,
			  "%.0f more locks not listed, %.0f of them never contended: "
			  "lowkey locks --all lists every lock.",
			  left_out, lk__jr_number(p, "left_out_uncontended"));
	if (folded > 0)
		lkh_paraf(
			f,
			"%.0f destroyed locks never contended were summed, not listed: the table was "
			"half full (raise --max-locks).",
			folded);
}

static void process(FILE *f, const struct lk__jr_value *p, const char *sort)
{
	const struct lk__jr_value *top = lk__jr_get(p, "top"), *exited = lk__jr_get(p, "exited");
	const char *command = lk__jr_string(p, "command");
	char heading[400], wait[32], duration[32], title[500];
	double acq = lk__jr_number(p, "acquisitions"), contended = lk__jr_number(p, "contended");

	snprintf(heading, sizeof(heading), "%s (pid %.0f)", command && *command ? command : "?",
		 lk__jr_number(p, "pid"));
	lkh_fmt_ns(wait, sizeof(wait), lk__jr_number(p, "wait_total_ns"));
	lkh_fmt_ns(duration, sizeof(duration), lk__jr_number(p, "duration_ns"));
	lkh_section(f, heading, NULL);
	lkh_paraf(
		f,
		"%s%s on %.0f CPUs: %.0f locks, %.0f acquisitions, %.0f contended (%.2f%%), %s waiting = "
		"%.1f/1000 of CPU time. Hold times: one hold in %.0f timed.",
		duration, exited && exited->boolean ? "" : " (did not exit: killed or exec'd)",
		lk__jr_number(p, "cpus"), lk__jr_number(p, "locks"), acq, contended,
		acq > 0 ? 100.0 * contended / acq : 0.0, wait,
		lk__jr_number(p, "wait_per_mille_cpu"), lk__jr_number(p, "hold_sampling"));
	if (!top || top->type != LK__JR_ARRAY || !top->n) {
		lkh_para(f, "No lock was taken.");
		return;
	}
	snprintf(title, sizeof(title),
		 "the first %zu locks by %s: time spent waiting for each, and holding it",
		 top->n < CHART_MAX_LOCKS ? top->n : CHART_MAX_LOCKS, sort ? sort : "wait");
	wait_chart(f, top, title);
	lock_table(f, top);
	left_out_note(f, p);
}

static void page(FILE *f, const struct lk__jr_value *root)
{
	const struct lk__jr_value *procs = lk__jr_get(root, "processes");
	char title[300];

	snprintf(title, sizeof(title), "lowkey locks: %s",
		 lk__jr_string(root, "command") ? lk__jr_string(root, "command") : "?");
	lkh_page_begin(f, title);
	if (lk__jr_get(root, "exit_status"))
		lkh_paraf(f, "The command exited with status %.0f.",
			  lk__jr_number(root, "exit_status"));
	else
		lkh_paraf(f, "The command was killed by signal %.0f.",
			  lk__jr_number(root, "signal"));
	lkh_paraf(
		f,
		"Per process, the locks listed greatest first by %s: each is named by its address and the "
		"call site of its first contended acquisition. Hover a bar for its figure.",
		lk__jr_string(root, "sort") ? lk__jr_string(root, "sort") : "wait");
	for (size_t i = 0; procs && procs->type == LK__JR_ARRAY && i < procs->n; i++)
		process(f, &procs->items[i], lk__jr_string(root, "sort"));
}

int locks_html(const char *json, size_t len, const char *out_path)
{
	return html_report_page("locks", json, len, out_path, page);
}
