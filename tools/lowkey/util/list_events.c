// SPDX-License-Identifier: MIT
/*
 * lowkey list (no argument): the counter events lowkey can open here, as perf list shows them.
 *
 * The names come from where lk_counters_open() finds them: the kernel's software events, libpfm4
 * (perf's generic hardware and cache names and the CPU's own events) and the kernel PMUs' sysfs
 * events. Each is tried with lk_counters_open() on this thread, so what is marked countable is
 * what `lowkey stat -e NAME` would count, and an event that is not comes with the library's own
 * reason. Tracepoints (thousands) are summarized by subsystem.
 */
#include <dirent.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lowkey/counter.h>
#include <lowkey/error.h>

#include "builtin.h"
#include "internal/json.h"
#include "internal/pfm.h"
#include "list_events.h"

#define PMU_DIR "/sys/bus/event_source/devices"

/*
 * The kernel's software events by perf's names: resolved without libpfm4, so listed even where
 * it cannot start.
 */
static const char *const software_names[] = {
	"cpu-clock",	"task-clock",	"page-faults",	    "context-switches", "cpu-migrations",
	"minor-faults", "major-faults", "alignment-faults", "emulation-faults", "dummy",
};

enum section { SOFTWARE, HARDWARE, HW_CACHE, CPU_PMU, KERNEL_PMU, NSECTIONS };

static const char *const section_key[NSECTIONS] = { "software", "hardware", "hw-cache", "cpu-pmu",
						    "kernel-pmu" };
static const char *const section_title[NSECTIONS] = {
	"Software events",
	"Hardware events",
	"Hardware cache events",
	"CPU events (libpfm4)",
	"Kernel PMU events (" PMU_DIR ")",
};

struct event {
	char *name, *pmu, *why; /* why: "" when it can be counted */
	enum section section;
	bool user_only; /* counts user space only: perf_event_paranoid forbids the kernel */
};

struct events {
	struct event *v;
	size_t n, cap;
	int pfm_err; /* libpfm4's error (no CPU event names), 0 when it started */
	char pfm_why[512];
};

static bool listed(const struct events *e, const char *name)
{
	for (size_t i = 0; i < e->n; i++)
		if (strcmp(e->v[i].name, name) == 0)
			return true;
	return false;
}

/* Try name on this thread: its reason ("" when countable) and whether it counts user space only. */
static char *try_open(const char *name, bool *user_only)
{
	struct lk_counters *c;
	struct lk_counter_info info;
	char *why;
	int err =
		lk_counters_open(&c, name, 0, LK_COUNTERS_SKIP_UNSUPPORTED | LK_COUNTERS_DISABLED);

	*user_only = false;
	if (err)
		return strdup(lk_last_error());
	err = lk_counters_describe(c, 0, &info);
	why = strdup(err ? lk_strerror(err) : info.error ? info.why : "");
	*user_only = !err && !info.error && info.user_only_fallback;
	lk_counters_close(c);
	return why;
}

static int add_event(struct events *e, const char *name, const char *pmu, enum section section)
{
	struct event *ev;

	if (listed(e, name))
		return 0;
	if (e->n == e->cap) {
		size_t cap = e->cap ? e->cap * 2 : 128;
		struct event *grown = realloc(e->v, cap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		e->v = grown;
		e->cap = cap;
	}
	ev = &e->v[e->n];
	ev->section = section;
	ev->name = strdup(name);
	ev->pmu = strdup(pmu);
	ev->why = try_open(name, &ev->user_only);
	if (!ev->name || !ev->pmu || !ev->why) {
		free(ev->name), free(ev->pmu), free(ev->why);
		return -ENOMEM;
	}
	e->n++;
	return 0;
}

static void free_events(struct events *e)
{
	for (size_t i = 0; i < e->n; i++)
		free(e->v[i].name), free(e->v[i].pmu), free(e->v[i].why);
	free(e->v);
}

/* ---- libpfm4's names ---- */

struct pfm_walk {
	struct events *e;
	int err;
};

static enum section pfm_section(const struct lk__pfm_event *pe)
{
	if (strcmp(pe->pmu, "perf") != 0)
		return CPU_PMU;
	if (pe->type == PERF_TYPE_SOFTWARE)
		return SOFTWARE;
	return pe->type == PERF_TYPE_HW_CACHE ? HW_CACHE : HARDWARE;
}

/* perf's spelling of the cache events libpfm4 gives in lower case: L1-dcache-loads, dTLB-loads. */
static void perf_spelling(const char *name, char *out, size_t size)
{
	static const char *const prefixes[][2] = {
		{ "l1-", "L1-" }, { "llc-", "LLC-" }, { "dtlb-", "dTLB-" }, { "itlb-", "iTLB-" }
	};

	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		if (strncmp(name, prefixes[i][0], strlen(prefixes[i][0])) == 0) {
			snprintf(out, size, "%s%s", prefixes[i][1], name + strlen(prefixes[i][0]));
			return;
		}
	}
	snprintf(out, size, "%s", name);
}

static void add_pfm_name(const char *pfm_name, void *arg)
{
	struct pfm_walk *w = arg;
	struct lk__pfm_event pe;
	char name[256];

	perf_spelling(pfm_name, name, sizeof(name));
	if (w->err || listed(w->e, name))
		return;
	/* An event libpfm4 cannot encode alone (it needs a unit mask) is listed under its PMU. */
	if (lk__pfm_encode(name, &pe) != 0) {
		memset(&pe, 0, sizeof(pe));
		snprintf(pe.pmu, sizeof(pe.pmu), "cpu");
		pe.type = PERF_TYPE_RAW;
	}
	w->err = add_event(w->e, name, pe.pmu, pfm_section(&pe));
}

/*
 * libpfm4 walks its tables under its own lock, and lk_counters_open() takes that lock too: collect
 * the names first, then try each.
 */
struct names {
	char **v;
	size_t n, cap;
	bool failed;
};

static void collect_name(const char *name, void *arg)
{
	struct names *names = arg;

	if (names->failed)
		return;
	if (names->n == names->cap) {
		size_t cap = names->cap ? names->cap * 2 : 256;
		char **grown = realloc(names->v, cap * sizeof(*grown));

		if (!grown) {
			names->failed = true;
			return;
		}
		names->v = grown;
		names->cap = cap;
	}
	names->v[names->n] = strdup(name);
	if (!names->v[names->n])
		names->failed = true;
	else
		names->n++;
}

static int add_pfm_events(struct events *e)
{
	struct names names = { 0 };
	struct pfm_walk w = { e, 0 };
	int err = lk__pfm_for_each_name(collect_name, &names);

	if (err) {
		e->pfm_err = err;
		snprintf(e->pfm_why, sizeof(e->pfm_why), "%s", lk_last_error());
	}
	if (names.failed)
		w.err = -ENOMEM;
	for (size_t i = 0; i < names.n; i++) {
		add_pfm_name(names.v[i], &w);
		free(names.v[i]);
	}
	free(names.v);
	return w.err;
}

/* ---- the kernel PMUs' sysfs events ---- */

static int add_pmu_events(struct events *e, const char *pmu)
{
	char path[512], name[600];
	struct dirent **ents;
	int n, err = 0;

	snprintf(path, sizeof(path), PMU_DIR "/%s/events", pmu);
	n = scandir(path, &ents, NULL, alphasort);
	if (n < 0)
		return 0; /* a PMU with no named events (breakpoint, software, uprobe) */
	for (int i = 0; i < n; i++) {
		/* PMU/events/NAME.unit, .scale, .snapshot describe NAME. */
		if (!err && ents[i]->d_name[0] != '.' && !strchr(ents[i]->d_name, '.')) {
			snprintf(name, sizeof(name), "%s/%s/", pmu, ents[i]->d_name);
			err = add_event(e, name, pmu, KERNEL_PMU);
		}
		free(ents[i]);
	}
	free(ents);
	return err;
}

static int add_sysfs_events(struct events *e)
{
	struct dirent **pmus;
	int n = scandir(PMU_DIR, &pmus, NULL, alphasort), err = 0;

	if (n < 0)
		return 0; /* no sysfs: the events above are all there is */
	for (int i = 0; i < n; i++) {
		if (!err && pmus[i]->d_name[0] != '.')
			err = add_pmu_events(e, pmus[i]->d_name);
		free(pmus[i]);
	}
	free(pmus);
	return err;
}

/* ---- tracepoints ---- */

struct tracepoints {
	char root[64]; /* the events directory found, "" when none */
	char **subsystems;
	size_t nsub;
	size_t count;
	char why[1024]; /* "" when they can be counted */
};

static size_t count_events(const char *root, const char *subsystem, char *first, size_t size)
{
	char path[512];
	struct dirent *ent;
	size_t n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "%s/%s", root, subsystem);
	d = opendir(path);
	if (!d)
		return 0;
	while ((ent = readdir(d)))
		if (ent->d_type == DT_DIR && ent->d_name[0] != '.') {
			if (!n && !*first &&
			    snprintf(first, size, "%s:%s", subsystem, ent->d_name) >= (int)size)
				*first = '\0'; /* too long to stand for the others */
			n++;
		}
	closedir(d);
	return n;
}

static void find_tracepoints(struct tracepoints *tp)
{
	static const char *const roots[] = { "/sys/kernel/tracing/events",
					     "/sys/kernel/debug/tracing/events" };
	char first[256] = "";
	struct dirent **ents = NULL;
	int n = -1, denied = 0;
	bool user_only;

	for (size_t r = 0; r < 2 && n < 0; r++) {
		n = scandir(roots[r], &ents, NULL, alphasort);
		if (n >= 0)
			snprintf(tp->root, sizeof(tp->root), "%s", roots[r]);
		else if (errno == EACCES || errno == EPERM)
			denied = 1;
	}
	for (int i = 0; i < n; i++) {
		size_t events =
			ents[i]->d_type == DT_DIR && ents[i]->d_name[0] != '.' ?
				count_events(tp->root, ents[i]->d_name, first, sizeof(first)) :
				0;
		char **grown = events ? realloc(tp->subsystems, (tp->nsub + 1) * sizeof(char *)) :
					NULL;

		if (grown) {
			tp->subsystems = grown;
			tp->subsystems[tp->nsub] = strdup(ents[i]->d_name);
			if (tp->subsystems[tp->nsub]) {
				tp->nsub++;
				tp->count += events;
			}
		}
		free(ents[i]);
	}
	free(ents);
	if (denied && !tp->count)
		snprintf(
			tp->why, sizeof(tp->why),
			"tracefs is readable by root only here (/sys/kernel/tracing "
			"is root-only by default): run as root, or remount it with `mount -o remount,mode=755 "
			"/sys/kernel/tracing`");
	else if (!tp->count)
		snprintf(tp->why, sizeof(tp->why),
			 "no tracepoints found: tracefs is not mounted (`mount -t "
			 "tracefs nodev /sys/kernel/tracing` as root), or the kernel has none");
	else {
		char *why = try_open(first, &user_only); /* one of them stands for all */

		snprintf(tp->why, sizeof(tp->why), "%s", why ? why : "out of memory");
		free(why);
	}
}

static void free_tracepoints(struct tracepoints *tp)
{
	for (size_t i = 0; i < tp->nsub; i++)
		free(tp->subsystems[i]);
	free(tp->subsystems);
}

/* ---- output ---- */

/* After "BEFORE" NAME "AFTER" at the start of s, or s. */
static const char *skip_named(const char *s, const char *before, const char *name,
			      const char *after)
{
	size_t lb = strlen(before), ln = strlen(name), la = strlen(after);

	if (strncmp(s, before, lb) == 0 && strncmp(s + lb, name, ln) == 0 &&
	    strncmp(s + lb + ln, after, la) == 0)
		return s + lb + ln + la;
	return s;
}

/*
 * The reason without "perf_event_open(NAME): " or "event 'NAME': ", which name one event where
 * many share the reason.
 */
static const char *shared_reason(const struct event *ev)
{
	const char *why = skip_named(ev->why, "perf_event_open(", ev->name, "): ");

	return skip_named(why, "event '", ev->name, "': ");
}

/* The footnote number of ev's reason, adding it to reasons[] when new. */
static size_t footnote(const char **reasons, size_t *n, const struct event *ev)
{
	const char *why = shared_reason(ev);

	for (size_t i = 0; i < *n; i++)
		if (strcmp(reasons[i], why) == 0)
			return i + 1;
	reasons[(*n)++] = why;
	return *n;
}

static void print_section(const struct events *e, enum section s, const char **reasons,
			  size_t *nreasons)
{
	bool any = false;

	for (size_t i = 0; i < e->n; i++) {
		const struct event *ev = &e->v[i];

		if (ev->section != s)
			continue;
		if (!any)
			printf("%s%s:\n", s == SOFTWARE ? "" : "\n", section_title[s]);
		any = true;
		if (*ev->why)
			printf("  %-40s <not supported> [%zu]\n", ev->name,
			       footnote(reasons, nreasons, ev));
		else if (ev->user_only)
			printf("  %-40s user space only\n", ev->name);
		else
			printf("  %s\n", ev->name);
	}
}

static void print_text(const struct events *e, const struct tracepoints *tp)
{
	const char **reasons = calloc(e->n + 1, sizeof(*reasons));
	size_t nreasons = 0;
	bool user_only = false;

	if (!reasons)
		return;
	for (int s = 0; s < NSECTIONS; s++)
		print_section(e, (enum section)s, reasons, &nreasons);
	for (size_t i = 0; i < e->n; i++)
		user_only |= e->v[i].user_only;
	if (e->pfm_err)
		printf("\nNo CPU event names: %s\n", e->pfm_why);
	printf("\nTracepoints (written subsystem:name, as sched:sched_switch): ");
	if (!tp->count) {
		printf("<not supported>: %s\n", tp->why);
	} else {
		printf("%zu in %zu subsystems (%s)%s%s\n ", tp->count, tp->nsub, tp->root,
		       *tp->why ? ", <not supported>: " : "", tp->why);
		for (size_t i = 0, col = 1; i < tp->nsub; i++) {
			size_t len = strlen(tp->subsystems[i]) + 2;

			if (col + len > 96) {
				printf("\n ");
				col = 1;
			}
			printf(" %s%s", tp->subsystems[i], i + 1 < tp->nsub ? "," : "\n");
			col += len;
		}
	}
	printf("\nAlso: raw events rNNN (hex), and PMU terms as pmu/event=0x3c,umask=0x0/.\n");
	if (user_only)
		printf("user space only: kernel.perf_event_paranoid forbids counting the kernel; events are "
		       "opened with :u, as perf does.\n");
	for (size_t i = 0; i < nreasons; i++)
		printf("%s[%zu] %s\n", i ? "" : "\n", i + 1, reasons[i]);
	free(reasons);
}

static void print_json(const struct events *e, const struct tracepoints *tp)
{
	struct lk__json j;

	lk__json_begin(&j, stdout, false);
	lk__json_array(&j, "events");
	for (size_t i = 0; i < e->n; i++) {
		const struct event *ev = &e->v[i];

		lk__json_object_line(&j, NULL);
		lk__json_str_or_null(&j, "name", ev->name);
		lk__json_str(&j, "section", section_key[ev->section]);
		lk__json_str_or_null(&j, "pmu", ev->pmu);
		lk__json_bool(&j, "supported", !*ev->why);
		lk__json_bool(&j, "user_only", ev->user_only);
		lk__json_str_or_null(&j, "why", ev->why);
		lk__json_close(&j);
	}
	lk__json_close(&j);
	lk__json_str_or_null(&j, "libpfm4", e->pfm_err ? e->pfm_why : "");
	lk__json_object_line(&j, "tracepoints");
	lk__json_bool(&j, "supported", !*tp->why);
	lk__json_uint(&j, "count", tp->count);
	lk__json_str_or_null(&j, "root", tp->root);
	lk__json_str_or_null(&j, "why", tp->why);
	lk__json_array(&j, "subsystems");
	for (size_t i = 0; i < tp->nsub; i++)
		lk__json_str_or_null(&j, NULL, tp->subsystems[i]);
	lk__json_close(&j);
	lk__json_close(&j);
	lk__json_end(&j);
}

int cli_list_events(bool json)
{
	struct events e = { 0 };
	struct tracepoints tp = { 0 };
	int err = 0;

	for (size_t i = 0; i < sizeof(software_names) / sizeof(software_names[0]) && !err; i++)
		err = add_event(&e, software_names[i], "software", SOFTWARE);
	if (!err)
		err = add_pfm_events(&e);
	if (!err)
		err = add_sysfs_events(&e);
	if (err) {
		cli_error("list", NULL, "cannot list the events: %s", strerror(-err));
		free_events(&e);
		return CLI_EXIT_FAIL;
	}
	find_tracepoints(&tp);
	if (json)
		print_json(&e, &tp);
	else
		print_text(&e, &tp);
	free_tracepoints(&tp);
	free_events(&e);
	return CLI_EXIT_OK;
}
