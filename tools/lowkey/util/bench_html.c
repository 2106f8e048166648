// SPDX-License-Identifier: MIT
/*
 * lowkey bench NAME --html OUT: a bench's figures as one page.
 *
 * The bench runs as always with --json, its standard output going to a temporary file, and the
 * page is drawn from that JSON (src/format/chrome_json/json_read.c): the same figures by the same code, and no bench
 * needs a second way of reporting. Every table of the JSON is shown. Where the kernel work a bench
 * re-runs published figures for the same experiment, they are drawn beside this machine's as
 * grouped bars; what is compared with what is each bench's (the comparisons below), because each
 * was measured in its own units on its own machine: the RISC-V jump_label article gave seconds for
 * its own loop count, so its rows are compared as ratios to its NOP row, as ours are.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_html.h"
#include "builtin.h"
#include "internal/outfile.h"
#include "html.h"
#include "internal/json_read.h"

bool bench_html_option(int *argc, char **argv, const char **out)
{
	int w = 1;

	*out = NULL;
	for (int i = 1; i < *argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			while (i < *argc)
				argv[w++] = argv[i++];
			break;
		}
		if (strncmp(argv[i], "--html=", 7) == 0) {
			*out = argv[i] + 7;
		} else if (strcmp(argv[i], "--html") == 0) {
			if (i + 1 >= *argc) {
				cli_error("bench", "lowkey bench NAME --html report.html",
					  "--html needs a file");
				return false;
			}
			*out = argv[++i];
		} else {
			argv[w++] = argv[i];
		}
	}
	argv[w] = NULL;
	*argc = w;
	return true;
}

/* ---- running the bench into a file ---- */

static char *read_all(FILE *f, size_t *len)
{
	char *buf = NULL;
	size_t cap = 0, n = 0, got;

	rewind(f);
	do {
		if (n + 65536 > cap) {
			char *grown = realloc(buf, cap = n + 65536 + cap);

			if (!grown) {
				free(buf);
				return NULL;
			}
			buf = grown;
		}
		got = fread(buf + n, 1, cap - n - 1, f);
		n += got;
	} while (got > 0);
	buf[n] = 0;
	*len = n;
	return buf;
}

static int run_json(const struct lk_bench *b, int argc, char **argv, bool quiet, char **json,
		    size_t *len)
{
	char **args = calloc((size_t)argc + 2, sizeof(*args));
	FILE *tmp = tmpfile();
	int saved = -1, rc;

	if (!args || !tmp || fflush(stdout) != 0 || (saved = dup(STDOUT_FILENO)) < 0 ||
	    dup2(fileno(tmp), STDOUT_FILENO) < 0) {
		cli_error("bench", "set TMPDIR to a writable directory",
			  "cannot keep the bench's figures: %s", strerror(errno));
		if (saved >= 0)
			close(saved);
		if (tmp)
			fclose(tmp);
		free(args);
		return -1;
	}
	memcpy(args, argv, (size_t)argc * sizeof(*args));
	args[argc] = "--json";
	lkb_progress_start(b->name, quiet);
	rc = b->run(argc + 1, args);
	lkb_progress_stop();
	fflush(stdout);
	dup2(saved, STDOUT_FILENO);
	close(saved);
	free(args);
	*json = read_all(tmp, len);
	fclose(tmp);
	if (!*json) {
		cli_error("bench", NULL, "out of memory");
		return -1;
	}
	return rc;
}

/* ---- every table of the JSON ---- */

static void value_text(const struct lk__jr_value *v, char *buf, size_t len)
{
	size_t n = 0;

	switch (v->type) {
	case LK__JR_NULL:
		snprintf(buf, len, "-");
		break;
	case LK__JR_BOOL:
		snprintf(buf, len, "%s", v->boolean ? "yes" : "no");
		break;
	case LK__JR_NUMBER:
		snprintf(buf, len, "%.6g", v->number);
		break;
	case LK__JR_STRING:
		snprintf(buf, len, "%s", v->string);
		break;
	case LK__JR_ARRAY: /* of scalars: joined */
		buf[0] = 0;
		for (size_t i = 0; i < v->n && n + 1 < len; i++) {
			char item[64];

			value_text(&v->items[i], item, sizeof(item));
			n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? ", " : "", item);
		}
		break;
	case LK__JR_OBJECT:
		snprintf(buf, len, "{...}");
		break;
	}
}

static bool is_object_array(const struct lk__jr_value *v)
{
	return v->type == LK__JR_ARRAY && v->n && v->items[0].type == LK__JR_OBJECT;
}

typedef void (*leaf_fn)(const char *key, const struct lk__jr_value *v, void *arg);

/* The scalars (and arrays of scalars) of obj, nested objects' as "outer.inner"; not arrays of objects. */
static void leaves(const struct lk__jr_value *obj, const char *prefix, leaf_fn fn, void *arg)
{
	for (size_t i = 0; i < obj->n; i++) {
		const struct lk__jr_value *m = &obj->items[i];
		char key[200];

		snprintf(key, sizeof(key), "%s%s%s", prefix, *prefix ? "." : "", m->key);
		if (m->type == LK__JR_OBJECT)
			leaves(m, key, fn, arg);
		else if (!is_object_array(m))
			fn(key, m, arg);
	}
}

static void leaf_row(const char *key, const struct lk__jr_value *v, void *arg)
{
	FILE *f = arg;
	char text[2048];

	value_text(v, text, sizeof(text));
	lkh_row_begin(f);
	lkh_cell(f, key);
	lkh_cell(f, text);
	lkh_row_end(f);
}

#define MAX_COLUMNS 24

struct columns {
	char name[MAX_COLUMNS][200];
	size_t n;
	const struct lk__jr_value *row; /* while a row is written: its values, looked up by name */
	FILE *f;
};

static void add_column(const char *key, const struct lk__jr_value *v, void *arg)
{
	struct columns *c = arg;

	(void)v;
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->name[i], key) == 0)
			return;
	if (c->n < MAX_COLUMNS)
		snprintf(c->name[c->n++], sizeof(c->name[0]), "%s", key);
}

/* The value at a dotted path of obj, or NULL. */
static const struct lk__jr_value *at_path(const struct lk__jr_value *obj, const char *path)
{
	char part[200];
	const char *dot;

	while ((dot = strchr(path, '.')) && obj) {
		snprintf(part, sizeof(part), "%.*s", (int)(dot - path), path);
		obj = lk__jr_get(obj, part);
		path = dot + 1;
	}
	return lk__jr_get(obj, path);
}

static void array_table(FILE *f, const char *title, const struct lk__jr_value *arr)
{
	struct columns c = { .f = f };
	const char *heads[MAX_COLUMNS];

	for (size_t i = 0; i < arr->n; i++)
		if (arr->items[i].type == LK__JR_OBJECT)
			leaves(&arr->items[i], "", add_column, &c);
	for (size_t i = 0; i < c.n; i++)
		heads[i] = c.name[i];
	fputs("<h3>", f);
	lkh_text(f, title);
	fputs("</h3>\n", f);
	lkh_table_begin(f, heads, c.n);
	for (size_t i = 0; i < arr->n; i++) {
		lkh_row_begin(f);
		for (size_t k = 0; k < c.n; k++) {
			const struct lk__jr_value *v = at_path(&arr->items[i], c.name[k]);
			char text[512];

			if (v)
				value_text(v, text, sizeof(text));
			if (v && v->type == LK__JR_NUMBER)
				lkh_cell_num(f, text);
			else
				lkh_cell(f, v ? text : "");
		}
		lkh_row_end(f);
	}
	lkh_table_end(f);
}

/* Every array of objects in obj (through nested objects), each as a table. */
static void array_tables(FILE *f, const struct lk__jr_value *obj, const char *prefix)
{
	for (size_t i = 0; i < obj->n; i++) {
		const struct lk__jr_value *m = &obj->items[i];
		char key[200];

		snprintf(key, sizeof(key), "%s%s%s", prefix, *prefix ? "." : "", m->key);
		if (is_object_array(m))
			array_table(f, key, m);
		else if (m->type == LK__JR_OBJECT)
			array_tables(f, m, key);
	}
}

static void all_tables(FILE *f, const struct lk__jr_value *root)
{
	static const char *const heads[] = { "figure", "value" };

	lkh_section(f, "The figures", "Everything the bench printed with --json, table by table.");
	lkh_table_begin(f, heads, 2);
	leaves(root, "", leaf_row, f);
	lkh_table_end(f);
	array_tables(f, root, "");
}

/* ---- the published figures beside ours ---- */

#define MAX_GROUPS 32
#define MAX_SERIES 6

struct comparison {
	const char *title, *note;
	const char *series[MAX_SERIES];
	size_t nseries, ngroups;
	char group[MAX_GROUPS][160];
	double values[MAX_GROUPS * MAX_SERIES];
	bool log;
	void (*fmt)(char *buf, size_t len, double v);
};

static void add_group(struct comparison *c, const char *label, const double *values)
{
	if (c->ngroups == MAX_GROUPS)
		return;
	snprintf(c->group[c->ngroups], sizeof(c->group[0]), "%s", label);
	for (size_t s = 0; s < c->nseries; s++)
		c->values[c->ngroups * c->nseries + s] =
			values[s] >= 0 ? values[s] : NAN; /* -1: not measured */
	c->ngroups++;
}

static void draw(FILE *f, const struct comparison *c)
{
	const char *groups[MAX_GROUPS];

	for (size_t g = 0; g < c->ngroups; g++)
		groups[g] = c->group[g];
	lkh_bar_chart(f, &(struct lkh_bars){ c->title, c->series, c->nseries, groups, c->ngroups,
					     c->values, c->log, c->fmt });
	if (c->note)
		lkh_para(f, c->note);
}

static void fmt_seconds(char *buf, size_t len, double v)
{
	if (v == 0)
		snprintf(buf, len, "0 s");
	else
		lkh_fmt_ns(buf, len, v * 1e9);
}

static void fmt_us(char *buf, size_t len, double v)
{
	lkh_fmt_ns(buf, len, v * 1e3);
}

static void fmt_ratio(char *buf, size_t len, double v)
{
	snprintf(buf, len, "%.2fx", v);
}

static void fmt_rate(char *buf, size_t len, double v)
{
	snprintf(buf, len,
		 v >= 1e6 ? "%.3gM/s" :
		 v >= 1e3 ? "%.3gk/s" :
			    "%.3g/s",
		 v >= 1e6 ? v / 1e6 :
		 v >= 1e3 ? v / 1e3 :
			    v);
}

static const struct lk__jr_value *row_named(const struct lk__jr_value *arr, const char *key,
					    const char *name)
{
	for (size_t i = 0; arr && arr->type == LK__JR_ARRAY && i < arr->n; i++) {
		const char *s = lk__jr_string(&arr->items[i], key);

		if (s && strcmp(s, name) == 0)
			return &arr->items[i];
	}
	return NULL;
}

/* The thread CPU time vDSO patch: 100M calls of the thread CPU clock, by system call and by its vDSO */
static void cputime(FILE *f, const struct lk__jr_value *root)
{
	struct comparison c = {
		.title = "vDSO thread CPU time patch: 100M reads of the thread's CPU time",
		.series = { "here", "the patch" },
		.nseries = 2,
		.log = true,
		.fmt = fmt_seconds
	};
	const struct lk__jr_value *cost = lk__jr_get(root, "cost"),
				  *seed = lk__jr_get(root, "published_s_per_100M_calls");

	add_group(&c, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)",
		  (double[]){ lk__jr_number(row_named(cost, "row", "clock_gettime_thread"),
					    "s_per_100M_calls"),
			      lk__jr_number(seed, "syscall") });
	add_group(&c, "lk_thread_cputime_ns (the patch: its vDSO)",
		  (double[]){ lk__jr_number(row_named(cost, "row", "lk_thread_cputime_ns"),
					    "s_per_100M_calls"),
			      lk__jr_number(seed, "vdso_patch") });
	draw(f, &c);
}

/* The jump_label article: each loop relative to the NOP loop, on three architectures; ours here */
static void branch(FILE *f, const struct lk__jr_value *root)
{
	static const char *const arch[] = { "mips64", "aarch64", "riscv" };
	struct comparison c = {
		.title = "RISC-V jump_label article: each loop's time relative to the NOP loop",
		.series = { "here", "article, MIPS64", "article, AArch64", "article, RISC-V" },
		.nseries = 4,
		.fmt = fmt_ratio,
		.note = "The article published seconds for its own loop count on three architectures, "
			"this bench nanoseconds per iteration here: both as ratios to their own NOP loop."
	};
	const struct lk__jr_value *loop = lk__jr_get(root, "loop"),
				  *nop = row_named(loop, "row", "nop (5-byte)");

	for (size_t i = 0; loop && loop->type == LK__JR_ARRAY && i < loop->n; i++) {
		const struct lk__jr_value *r = &loop->items[i],
					  *seed = lk__jr_get(r, "published_s");
		double v[4] = { lk__jr_number(r, "x_nop") };
		bool published = false;

		for (int a = 0; a < 3; a++) {
			v[a + 1] = lk__jr_number(seed, arch[a]) /
				   lk__jr_number(lk__jr_get(nop, "published_s"), arch[a]);
			published |= isfinite(v[a + 1]);
		}
		if (published && lk__jr_string(r, "row"))
			add_group(&c, lk__jr_string(r, "row"), v);
	}
	draw(f, &c);
}

/* Kernel commit 0912037fec: perf bench breakpoint thread, microseconds per operation */
static void breakpoint(FILE *f, const struct lk__jr_value *root)
{
	struct comparison c = {
		.title = "kernel commit 0912037fec: breakpoint thread, time per operation",
		.series = { "here", "commit 0912037fec" },
		.nseries = 2,
		.fmt = fmt_us,
		.log = true,
		.note = "The commit ran perf bench -r 30 breakpoint thread -b 4 -p 64 -t 64 on 256 CPUs; "
			"the figures above it were measured here with the parameters in the table."
	};
	const struct lk__jr_value *rows = lk__jr_get(root, "rows"),
				  *seed = lk__jr_get(root, "published");

	for (size_t i = 0; rows && rows->type == LK__JR_ARRAY && i < rows->n; i++)
		if (lk__jr_string(&rows->items[i], "row"))
			add_group(&c, lk__jr_string(&rows->items[i], "row"),
				  (double[]){ lk__jr_number(&rows->items[i], "usecs_per_op"),
					      NAN });
	for (size_t i = 0; seed && seed->type == LK__JR_ARRAY && i < seed->n; i++)
		if (lk__jr_string(&seed->items[i], "row"))
			add_group(&c, lk__jr_string(&seed->items[i], "row"),
				  (double[]){ NAN,
					      lk__jr_number(&seed->items[i], "usecs_per_op") });
	draw(f, &c);
}

/* The perf_counter context-swap patch: lmbench lat_ctx with and without counters, per ring size */
static void ctx(FILE *f, const struct lk__jr_value *root)
{
	static const char *const configs[3][5] = {
		{ "no counters", "none", "", "unmodified_none", "patched_none" },
		{ "2 counters", "two_inherited", "two_separate", "unmodified_2hw", "patched_2hw" },
		{ "8 counters (the patch: 4 hardware, 4 software)", "eight_inherited",
		  "eight_separate", "unmodified_4h4s", "patched_4h4s" },
	};
	struct comparison c = {
		.title = "perf_counter context-swap patch: lat_ctx, time per context switch",
		.series = { "here, one inherited set", "here, a set per process",
			    "kernel before the patch", "kernel with the patch" },
		.nseries = 4,
		.fmt = fmt_us,
		.note = "Without counters there is one figure here: it is drawn as the first."
	};
	const struct lk__jr_value *lat = lk__jr_get(root, "lat_ctx_us");

	for (size_t i = 0; lat && lat->type == LK__JR_ARRAY && i < lat->n; i++) {
		const struct lk__jr_value *r = &lat->items[i], *seed = lk__jr_get(r, "published");

		for (int k = 0; k < 3; k++) {
			char label[160];

			snprintf(label, sizeof(label), "%.0f processes, %s",
				 lk__jr_number(r, "processes"), configs[k][0]);
			add_group(&c, label,
				  (double[]){ lk__jr_number(lk__jr_get(r, configs[k][1]), "mean"),
					      lk__jr_number(lk__jr_get(r, configs[k][2]), "mean"),
					      lk__jr_number(seed, configs[k][3]),
					      lk__jr_number(seed, configs[k][4]) });
		}
	}
	draw(f, &c);
}

/* The ipc/sem.c contention RFC: sembench, worker burns per second */
static void sem(FILE *f, const struct lk__jr_value *root)
{
	struct comparison c = {
		.title = "ipc/sem.c contention RFC: sembench, worker burns per second",
		.series = { "here", "the RFC" },
		.nseries = 2,
		.fmt = fmt_rate,
		.note = "The RFC ran ./sembench -t 250 -w 64 -o 0 -r 30 on a 4-core AMD Phenom, before "
			"and after its series; the modes above it ran here with the parameters in the table."
	};
	const struct lk__jr_value *runs = lk__jr_get(root, "sembench"),
				  *seed = lk__jr_get(root, "published");
	char label[160];

	for (size_t i = 0; runs && runs->type == LK__JR_ARRAY && i < runs->n; i++) {
		snprintf(label, sizeof(label), "here: %s",
			 lk__jr_string(&runs->items[i], "mode") ?
				 lk__jr_string(&runs->items[i], "mode") :
				 "?");
		add_group(&c, label,
			  (double[]){ lk__jr_number(&runs->items[i], "worker_burns_per_s"), NAN });
	}
	for (size_t i = 0; seed && seed->type == LK__JR_ARRAY && i < seed->n; i++) {
		snprintf(label, sizeof(label), "the RFC: %s",
			 lk__jr_string(&seed->items[i], "when") ?
				 lk__jr_string(&seed->items[i], "when") :
				 "?");
		add_group(&c, label,
			  (double[]){ NAN, lk__jr_number(&seed->items[i], "worker_burns_per_s") });
	}
	draw(f, &c);
}

/* no published figure: lowkey's probe beside LTTng-UST's tracepoint, measured together here */
static void probe(FILE *f, const struct lk__jr_value *root)
{
	struct comparison c = {
		.title = "cost per event: lowkey beside LTTng-UST, both here",
		.series = { "lowkey", "LTTng-UST" },
		.nseries = 2,
		.fmt = lkh_fmt_ns,
		.note = "No kernel work published a figure for this; LTTng-UST is the tool it is compared with "
			"(none where it is not installed)."
	};
	const struct lk__jr_value *ns = lk__jr_get(root, "ns_per_event");

	add_group(&c, "disabled",
		  (double[]){ lk__jr_number(ns, "disabled"), lk__jr_number(ns, "lttng_disabled") });
	add_group(&c, "enabled",
		  (double[]){ lk__jr_number(ns, "enabled_two_ints"),
			      lk__jr_number(ns, "lttng_enabled") });
	draw(f, &c);
}

static const struct {
	const char *bench; /* the JSON's "bench" */
	void (*draw)(FILE *f, const struct lk__jr_value *root);
} comparisons[] = {
	{ "cputime", cputime }, { "branch", branch }, { "breakpoint thread", breakpoint },
	{ "ctx", ctx },		{ "sem", sem },	      { "probe", probe },
};

static void page(FILE *f, const struct lk_bench *b, int argc, char **argv,
		 const struct lk__jr_value *root)
{
	const char *bench = lk__jr_string(root, "bench");
	char title[200], cmd[1024] = "lowkey bench";
	size_t n = strlen(cmd);
	bool compared = false;

	for (int i = 0; i < argc && n + 1 < sizeof(cmd); i++)
		n += (size_t)snprintf(cmd + n, sizeof(cmd) - n, " %s", argv[i]);
	snprintf(title, sizeof(title), "lowkey bench %s", bench ? bench : b->name);
	lkh_page_begin(f, title);
	lkh_paraf(f, "%s. Measured on %s by `%s`.", b->summary,
		  lk__jr_string(root, "machine") ? lk__jr_string(root, "machine") : "?", cmd);
	for (size_t i = 0; bench && i < sizeof(comparisons) / sizeof(comparisons[0]); i++)
		if (strcmp(bench, comparisons[i].bench) == 0) {
			lkh_section(f, "Beside the published figures", NULL);
			comparisons[i].draw(f, root);
			compared = true;
		}
	if (!compared)
		lkh_para(f, "This bench has no published figure to draw beside its own.");
	all_tables(f, root);
}

int bench_html(const struct lk_bench *b, int argc, char **argv, const char *out_path, bool quiet)
{
	struct lk__jr_value *root;
	char *json = NULL, err[256];
	size_t len = 0;
	FILE *f;
	int rc = run_json(b, argc, argv, quiet, &json, &len);

	if (rc < 0)
		return CLI_EXIT_FAIL;
	if (rc != 0) { /* the bench said why */
		free(json);
		return rc;
	}
	root = lk__jr_parse(json, len, err, sizeof(err));
	free(json);
	if (!root) {
		cli_error("bench", NULL, "cannot read back the figures of %s for the page: %s",
			  b->name, err);
		return CLI_EXIT_FAIL;
	}
	f = strcmp(out_path, "-") == 0 ? stdout : lk__out_fopen(out_path, err, sizeof(err));
	if (!f) {
		cli_error("bench", "choose a writable place with --html", "%s", err);
		lk__jr_free(root);
		return CLI_EXIT_FAIL;
	}
	page(f, b, argc, argv, root);
	rc = lkh_page_end(f);
	if (f != stdout && fclose(f) != 0 && !rc)
		rc = -errno;
	if (rc)
		cli_error("bench", NULL, "writing %s failed: %s", out_path, strerror(-rc));
	lk__jr_free(root);
	return rc ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}
