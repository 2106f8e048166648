// SPDX-License-Identifier: MIT
/*
 * "Did you mean ...?" for an unknown event: the closest names among libpfm4's events for this
 * machine, the software events it does not list, and the kernel PMUs' sysfs events.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/edit_distance.h"
#include "core/error.h"
#include "counter/counter_internal.h"
#include "internal/pfm.h"

#define PMU_DIR "/sys/bus/event_source/devices"
#define MAX_SUGGESTIONS 3

struct pick {
	char name[128];
	size_t distance;
};

struct best {
	const char *wanted;
	size_t limit;
	size_t n;
	struct pick pick[MAX_SUGGESTIONS];
};

static bool has_prefix_ci(const char *s, const char *prefix)
{
	return strncasecmp(s, prefix, strlen(prefix)) == 0;
}

static void consider(const char *name, void *arg)
{
	struct best *b = arg;
	size_t d = lk__edit_distance(b->wanted, name, true), slot;

	/* A name the user started to type counts as close. */
	if (d > b->limit && strlen(b->wanted) >= 3 && has_prefix_ci(name, b->wanted))
		d = b->limit;
	if (d > b->limit)
		return;
	for (size_t i = 0; i < b->n; i++)
		if (strcasecmp(b->pick[i].name, name) == 0)
			return;
	if (b->n < MAX_SUGGESTIONS) {
		slot = b->n++;
	} else {
		slot = 0;
		for (size_t i = 1; i < b->n; i++)
			if (b->pick[i].distance > b->pick[slot].distance)
				slot = i;
		if (b->pick[slot].distance <= d)
			return;
	}
	snprintf(b->pick[slot].name, sizeof(b->pick[slot].name), "%s", name);
	b->pick[slot].distance = d;
}

static void consider_sysfs_events(struct best *b)
{
	DIR *pmus = opendir(PMU_DIR);
	struct dirent *p;

	if (!pmus)
		return;
	while ((p = readdir(pmus))) {
		char path[512], name[600];
		struct dirent *e;
		DIR *events;

		if (p->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), PMU_DIR "/%s/events", p->d_name);
		events = opendir(path);
		if (!events)
			continue;
		while ((e = readdir(events))) {
			if (e->d_name[0] == '.' || strchr(e->d_name, '.'))
				continue;	/* .unit, .scale, .snapshot */
			consider(e->d_name, b); /* "tsc" may be what "msr/tcs/" meant */
			snprintf(name, sizeof(name), "%s/%s/", p->d_name, e->d_name);
			consider(name, b);
		}
		closedir(events);
	}
	closedir(pmus);
}

static int by_distance(const void *x, const void *y)
{
	size_t a = ((const struct pick *)x)->distance, b = ((const struct pick *)y)->distance;

	return (a > b) - (a < b);
}

void lk__suggest_events(const char *name)
{
	static const char *const software[] = { "alignment-faults", "emulation-faults", "dummy" };
	struct best b = { .wanted = name };
	size_t len = strlen(name);

	b.limit = len / 3 > 2 ? len / 3 : 2;
	if (lk__pfm_for_each_name(consider, &b) != 0)
		lk__fail_append(" (libpfm4 could not start, so hardware event names are unknown)");
	for (size_t i = 0; i < sizeof(software) / sizeof(software[0]); i++)
		consider(software[i], &b);
	consider_sysfs_events(&b);
	if (b.n == 0) {
		lk__fail_append(". `perf list` shows the events this machine has; raw codes are "
				"written rNNN, kernel PMU events pmu/event=0x../");
		return;
	}
	qsort(b.pick, b.n, sizeof(b.pick[0]), by_distance);
	lk__fail_append(". Did you mean ");
	for (size_t i = 0; i < b.n; i++)
		lk__fail_append("%s'%s'",
				i == 0	     ? "" :
				i + 1 == b.n ? " or " :
					       ", ",
				b.pick[i].name);
	lk__fail_append("?");
}
