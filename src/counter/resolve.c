// SPDX-License-Identifier: MIT
/*
 * From an event's text to a perf_event_attr. In order:
 *   pmu/terms/     a kernel PMU, its terms read from /sys/bus/event_source/devices/PMU/format
 *   rNNN           a raw hardware event
 *   NAME           libpfm4 (perf's generic names and the CPU's own events), then the three
 *                  software events libpfm4 does not list
 *   sys:name       a tracepoint, its id read from tracefs
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "counter/counter_internal.h"
#include "internal/pfm.h"

#define PMU_DIR "/sys/bus/event_source/devices"

void lk__modifiers_apply(const struct lk__modifiers *mods, bool has_ukh,
			 struct perf_event_attr *attr)
{
	/* perf's rules: naming any of u/k/h counts only the levels named. */
	if (has_ukh) {
		attr->exclude_user = !mods->user;
		attr->exclude_kernel = !mods->kernel;
		attr->exclude_hv = !mods->hv;
	}
	if (mods->guest || mods->host) {
		attr->exclude_guest = !mods->guest;
		attr->exclude_host = !mods->host;
	}
	attr->exclude_idle = mods->exclude_idle;
	attr->pinned = mods->pinned;
	attr->exclusive = mods->exclusive;
	attr->precise_ip = (unsigned)mods->precise;
}

static int set_string(char **dst, const char *src)
{
	free(*dst);
	*dst = strdup(src);
	return *dst ? 0 : lk__fail(-ENOMEM, "out of memory");
}

/* ---- rNNN ---- */

static bool parse_raw(const char *name, __u64 *config)
{
	char *end;

	if (name[0] != 'r' || !isxdigit((unsigned char)name[1]))
		return false;
	for (const char *p = name + 1; *p; p++)
		if (!isxdigit((unsigned char)*p))
			return false;
	errno = 0;
	*config = strtoull(name + 1, &end, 16);
	return errno == 0 && *end == '\0';
}

/* ---- the kernel's software events, by perf's names ---- */

/*
 * Resolved here, without libpfm4: starting libpfm4 costs milliseconds (it probes every PMU it
 * knows), which `lowkey stat -e task-clock` should not pay. The canonical names are the ones
 * libpfm4 gives, so output does not depend on which path named the event; the last three are
 * events libpfm4 does not list at all.
 */
static const struct {
	const char *name;
	uint64_t config;
	const char *canonical;
} software_events[] = {
	{ "cpu-clock", PERF_COUNT_SW_CPU_CLOCK, "perf::PERF_COUNT_SW_CPU_CLOCK" },
	{ "task-clock", PERF_COUNT_SW_TASK_CLOCK, "perf::PERF_COUNT_SW_TASK_CLOCK" },
	{ "page-faults", PERF_COUNT_SW_PAGE_FAULTS, "perf::PERF_COUNT_SW_PAGE_FAULTS" },
	{ "faults", PERF_COUNT_SW_PAGE_FAULTS, "perf::PERF_COUNT_SW_PAGE_FAULTS" },
	{ "context-switches", PERF_COUNT_SW_CONTEXT_SWITCHES,
	  "perf::PERF_COUNT_SW_CONTEXT_SWITCHES" },
	{ "cs", PERF_COUNT_SW_CONTEXT_SWITCHES, "perf::PERF_COUNT_SW_CONTEXT_SWITCHES" },
	{ "cpu-migrations", PERF_COUNT_SW_CPU_MIGRATIONS, "perf::PERF_COUNT_SW_CPU_MIGRATIONS" },
	{ "migrations", PERF_COUNT_SW_CPU_MIGRATIONS, "perf::PERF_COUNT_SW_CPU_MIGRATIONS" },
	{ "minor-faults", PERF_COUNT_SW_PAGE_FAULTS_MIN, "perf::PERF_COUNT_SW_PAGE_FAULTS_MIN" },
	{ "major-faults", PERF_COUNT_SW_PAGE_FAULTS_MAJ, "perf::PERF_COUNT_SW_PAGE_FAULTS_MAJ" },
	{ "alignment-faults", PERF_COUNT_SW_ALIGNMENT_FAULTS, "alignment-faults" },
	{ "emulation-faults", PERF_COUNT_SW_EMULATION_FAULTS, "emulation-faults" },
	{ "dummy", PERF_COUNT_SW_DUMMY, "dummy" },
};

static const char *find_software(const char *name, __u64 *config)
{
	for (size_t i = 0; i < sizeof(software_events) / sizeof(software_events[0]); i++) {
		if (strcasecmp(name, software_events[i].name) == 0) {
			*config = software_events[i].config;
			return software_events[i].canonical;
		}
	}
	return NULL;
}

/* ---- small sysfs helpers ---- */

static int read_small_file(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "re");
	size_t len;

	if (!f)
		return -errno;
	len = fread(buf, 1, size - 1, f);
	fclose(f);
	buf[len] = '\0';
	while (len && isspace((unsigned char)buf[len - 1]))
		buf[--len] = '\0';
	return 0;
}

/* ---- sys:name tracepoints ---- */

static int resolve_tracepoint(struct lk__event *ev)
{
	static const char *const roots[] = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" };
	const char *colon = strchr(ev->spec.base, ':');
	char path[512], buf[32];
	int denied = 0;

	if (!colon || colon == ev->spec.base || strchr(colon + 1, ':') ||
	    strchr(ev->spec.base, '/') || !colon[1])
		return -ENOENT;
	for (size_t i = 0; i < 2; i++) {
		int err;

		snprintf(path, sizeof(path), "%s/events/%.*s/%s/id", roots[i],
			 (int)(colon - ev->spec.base), ev->spec.base, colon + 1);
		err = read_small_file(path, buf, sizeof(buf));
		if (err == 0) {
			ev->attr.type = PERF_TYPE_TRACEPOINT;
			ev->attr.config = strtoull(buf, NULL, 10);
			snprintf(path, sizeof(path), "tracepoint %s", ev->spec.base);
			return set_string(&ev->canonical, path);
		}
		if (err == -EACCES || err == -EPERM)
			denied = err;
	}
	if (denied)
		return lk__fail(
			denied,
			"event '%s': tracepoint ids are in tracefs, which this user "
			"cannot read (/sys/kernel/tracing is root-only by default): run as root, or "
			"remount tracefs with `mount -o remount,mode=755 /sys/kernel/tracing`",
			ev->spec.text);
	return -ENOENT;
}

/* ---- pmu/terms/ ---- */

/*
 * A sysfs format spec, "config:0-7,32-35" or "config1:12": put value's bits, low first, into the
 * named config word at those bit positions. Returns 0, or -EINVAL when the value has more bits
 * than the field.
 */
static int pack_format(const char *spec, uint64_t value, struct perf_event_attr *attr)
{
	const char *colon = strchr(spec, ':'), *p;
	__u64 *word;

	if (!colon)
		return -EINVAL;
	if (strncmp(spec, "config:", 7) == 0)
		word = &attr->config;
	else if (strncmp(spec, "config1:", 8) == 0)
		word = &attr->config1;
	else if (strncmp(spec, "config2:", 8) == 0)
		word = &attr->config2;
	else
		return -EINVAL;
	for (p = colon + 1; *p;) {
		char *end;
		unsigned long lo = strtoul(p, &end, 10), hi = lo;

		if (end == p)
			return -EINVAL;
		if (*end == '-')
			hi = strtoul(end + 1, &end, 10);
		if (hi > 63 || lo > hi)
			return -EINVAL;
		for (unsigned long bit = lo; bit <= hi; bit++) {
			*word = (*word & ~(1ull << bit)) | ((value & 1) << bit);
			value >>= 1;
		}
		p = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			return -EINVAL;
	}
	return value ? -ERANGE : 0;
}

static int apply_terms(struct lk__event *ev, const char *pmu, const char *terms, int depth);

/* An event alias from PMU/events/NAME: its terms, and its unit and scale if it has them. */
static int apply_alias(struct lk__event *ev, const char *pmu, const char *alias, int depth)
{
	char path[512], buf[512];
	int err;

	snprintf(path, sizeof(path), PMU_DIR "/%s/events/%s", pmu, alias);
	if (read_small_file(path, buf, sizeof(buf)) != 0)
		return -ENOENT;
	if (depth > 2 || strchr(buf, '?'))
		return lk__fail(-EINVAL,
				"event '%s': the alias %s/%s/ needs parameters (%s), which "
				"lowkey does not fill in; write the terms yourself",
				ev->spec.text, pmu, alias, buf);
	err = apply_terms(ev, pmu, buf, depth + 1);
	if (err)
		return err;
	snprintf(path, sizeof(path), PMU_DIR "/%s/events/%s.unit", pmu, alias);
	if (read_small_file(path, buf, sizeof(buf)) == 0 && (err = set_string(&ev->unit, buf)))
		return err;
	snprintf(path, sizeof(path), PMU_DIR "/%s/events/%s.scale", pmu, alias);
	if (read_small_file(path, buf, sizeof(buf)) == 0)
		ev->scale = strtod(buf, NULL);
	return 0;
}

static int apply_term(struct lk__event *ev, const char *pmu, char *term, int depth)
{
	char *eq = strchr(term, '='), path[512], spec[128], *end;
	uint64_t value = 1;
	int err;

	if (eq) {
		*eq = '\0';
		errno = 0;
		value = strtoull(eq + 1, &end, 0);
		if (errno || end == eq + 1 || *end)
			return lk__fail(-EINVAL, "event '%s': '%s' is not a number for term '%s'",
					ev->spec.text, eq + 1, term);
	}
	if (strcmp(term, "config") == 0 && eq) {
		ev->attr.config = value;
		return 0;
	}
	if (strcmp(term, "config1") == 0 && eq) {
		ev->attr.config1 = value;
		return 0;
	}
	if (strcmp(term, "config2") == 0 && eq) {
		ev->attr.config2 = value;
		return 0;
	}
	if (strcmp(term, "name") == 0 || strcmp(term, "period") == 0 || strcmp(term, "freq") == 0)
		return 0; /* perf's naming and sampling terms: nothing to count differently */
	snprintf(path, sizeof(path), PMU_DIR "/%s/format/%s", pmu, term);
	if (read_small_file(path, spec, sizeof(spec)) == 0) {
		err = pack_format(spec, value, &ev->attr);
		if (err == -ERANGE)
			return lk__fail(-EINVAL, "event '%s': %s=0x%llx does not fit in %s",
					ev->spec.text, term, (unsigned long long)value, spec);
		if (err)
			return lk__fail(-EINVAL, "event '%s': cannot use the format '%s' of %s/%s",
					ev->spec.text, spec, pmu, term);
		return 0;
	}
	if (!eq) {
		err = apply_alias(ev, pmu, term, depth);
		if (err != -ENOENT)
			return err;
	}
	lk__fail(-ENOENT, "event '%s': the %s PMU has no term or event named '%s'", ev->spec.text,
		 pmu, term);
	lk__suggest_events(term);
	return -ENOENT;
}

static int apply_terms(struct lk__event *ev, const char *pmu, const char *terms, int depth)
{
	char *copy = strdup(terms), *save = NULL, *term;
	int err = 0;

	if (!copy)
		return lk__fail(-ENOMEM, "out of memory");
	for (term = strtok_r(copy, ",", &save); term && !err; term = strtok_r(NULL, ",", &save)) {
		while (isspace((unsigned char)*term))
			term++;
		if (*term)
			err = apply_term(ev, pmu, term, depth);
	}
	free(copy);
	return err;
}

/* "breakpoint, msr, power, ..." for a message. */
static void pmu_list(char *buf, size_t size)
{
	DIR *d = opendir(PMU_DIR);
	struct dirent *e;
	size_t used = 0;

	buf[0] = '\0';
	if (!d)
		return;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || used >= size)
			continue;
		used += (size_t)snprintf(buf + used, size - used, "%s%s", used ? ", " : "",
					 e->d_name);
	}
	closedir(d);
}

static int resolve_pmu(struct lk__event *ev)
{
	const char *base = ev->spec.base, *slash = strchr(base, '/');
	char pmu[128], path[512], buf[64], *terms;
	size_t len;
	int err;

	len = (size_t)(slash - base);
	if (len == 0 || len >= sizeof(pmu))
		return lk__fail(-EINVAL, "event '%s': no PMU name before '/'", ev->spec.text);
	memcpy(pmu, base, len);
	pmu[len] = '\0';
	snprintf(path, sizeof(path), PMU_DIR "/%s/type", pmu);
	if (read_small_file(path, buf, sizeof(buf)) != 0) {
		char list[1024];

		pmu_list(list, sizeof(list));
		return lk__fail(-ENOENT,
				"event '%s': this kernel has no PMU named '%s' (PMUs here: %s)",
				ev->spec.text, pmu, list[0] ? list : "none");
	}
	ev->attr.type = (uint32_t)strtoul(buf, NULL, 10);
	terms = strndup(slash + 1, strlen(slash + 1) - 1); /* drop the closing '/' */
	if (!terms)
		return lk__fail(-ENOMEM, "out of memory");
	err = terms[0] ?
		      apply_terms(ev, pmu, terms, 0) :
		      lk__fail(-EINVAL, "event '%s': no terms between the slashes", ev->spec.text);
	free(terms);
	if (err)
		return err;
	snprintf(path, sizeof(path), "%s/config=0x%llx", pmu, (unsigned long long)ev->attr.config);
	if (ev->attr.config1)
		snprintf(path + strlen(path), sizeof(path) - strlen(path), ",config1=0x%llx",
			 (unsigned long long)ev->attr.config1);
	if (ev->attr.config2)
		snprintf(path + strlen(path), sizeof(path) - strlen(path), ",config2=0x%llx",
			 (unsigned long long)ev->attr.config2);
	strncat(path, "/", sizeof(path) - strlen(path) - 1);
	/* Kernel software PMUs; everything else is a hardware PMU of some kind. */
	ev->hardware = strcmp(pmu, "msr") != 0 && strcmp(pmu, "software") != 0 &&
		       strcmp(pmu, "tracepoint") != 0 && strcmp(pmu, "breakpoint") != 0 &&
		       strcmp(pmu, "kprobe") != 0 && strcmp(pmu, "uprobe") != 0;
	return set_string(&ev->canonical, path);
}

/* ---- names ---- */

static bool is_clock(const struct perf_event_attr *attr)
{
	return attr->type == PERF_TYPE_SOFTWARE && (attr->config == PERF_COUNT_SW_TASK_CLOCK ||
						    attr->config == PERF_COUNT_SW_CPU_CLOCK);
}

static int resolve_name(struct lk__event *ev)
{
	struct lk__pfm_event pe;
	const char *software;
	char canonical[64];
	int err;

	if (parse_raw(ev->spec.base, &ev->attr.config)) {
		ev->attr.type = PERF_TYPE_RAW;
		ev->hardware = true;
		snprintf(canonical, sizeof(canonical), "raw %#llx",
			 (unsigned long long)ev->attr.config);
		return set_string(&ev->canonical, canonical);
	}
	software = find_software(ev->spec.base, &ev->attr.config);
	if (software) {
		ev->attr.type = PERF_TYPE_SOFTWARE;
		return set_string(&ev->canonical, software);
	}
	err = lk__pfm_encode(ev->spec.base, &pe);
	if (err == 0) {
		ev->attr.type = pe.type;
		ev->attr.config = pe.config;
		ev->attr.config1 = pe.config1;
		ev->attr.config2 = pe.config2;
		ev->hardware = pe.type != PERF_TYPE_SOFTWARE && pe.type != PERF_TYPE_TRACEPOINT &&
			       pe.type != PERF_TYPE_BREAKPOINT;
		return set_string(&ev->canonical, pe.canonical);
	}
	if (err == -EINVAL && strchr(ev->spec.base, ':'))
		lk__fail_append(" (perf's modifiers after ':' are u k h G H I D e p)");
	if (err != -ENOENT && err != -EIO)
		return err;
	err = resolve_tracepoint(ev);
	if (err != -ENOENT)
		return err;
	lk__fail(-ENOENT, "unknown event '%s'", ev->spec.text);
	lk__suggest_events(ev->spec.base);
	return -ENOENT;
}

int lk__event_resolve(struct lk__event *ev)
{
	int err;

	memset(&ev->attr, 0, sizeof(ev->attr));
	ev->scale = 1.0;
	ev->hardware = false;
	err = strchr(ev->spec.base, '/') ? resolve_pmu(ev) : resolve_name(ev);
	if (err)
		return err;
	lk__modifiers_apply(&ev->spec.mods, ev->spec.has_mods, &ev->attr);
	if (!ev->unit && (err = set_string(&ev->unit, is_clock(&ev->attr) ? "ns" : "")))
		return err;
	return 0;
}
