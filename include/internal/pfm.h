/* SPDX-License-Identifier: MIT */
/*
 * Internal: libpfm4, behind a neutral interface. libpfm4's <perfmon/perf_event.h> defines its own
 * struct perf_event_attr, which clashes with <linux/perf_event.h>, so only pfm.c includes it.
 */
#ifndef LK_COUNTER_PFM_H
#define LK_COUNTER_PFM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct lk__pfm_event {
	uint32_t type;
	uint64_t config, config1, config2;
	char canonical[256]; /* "perf::PERF_COUNT_HW_CPU_CYCLES", "skl::INST_RETIRED:ANY_P" */
	char pmu[64];	     /* libpfm4's PMU name: "perf", "skl", ... */
};

/*
 * Encode an event name (without perf's modifiers) for perf_event_open. Returns 0, -ENOENT when
 * libpfm4 knows no such event on this machine's PMUs, -EINVAL for a bad unit mask or attribute
 * (the message says which), -EIO when libpfm4 cannot start.
 */
int lk__pfm_encode(const char *name, struct lk__pfm_event *out);

/* Call fn for every event name of the PMUs present (perf's generic names in lower case, as perf
 * writes them). Returns 0, or -EIO when libpfm4 cannot start. */
int lk__pfm_for_each_name(void (*fn)(const char *name, void *arg), void *arg);

#endif
