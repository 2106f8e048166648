/* SPDX-License-Identifier: MIT */
/* Internal API: what `lowkey` needs of the probe module beyond <lowkey/probe.h>. */
#ifndef LK_INTERNAL_PROBE_H
#define LK_INTERNAL_PROBE_H

#include <stdbool.h>
#include <stdint.h>

/* Reserved event ids (sites get ids from LK__FIRST_SITE_ID). */
#define LK__EVENT_THREAD_NAME 1 /* one string: the thread's name */
#define LK__EVENT_SCHED_OUT \
	2 /* src/trace/sched.c: the thread left its CPU (u64 cpu, u64 preempted) */
#define LK__EVENT_SCHED_IN 3 /* src/trace/sched.c: the thread got a CPU (u64 cpu) */
#define LK__FIRST_SITE_ID 16

/* "event", "span-begin", "span-end", "counter" for an enum lk_probe_kind (0 is an event); "unknown". */
const char *lk__probe_kind_name(unsigned int kind);

/* Whether glob selects provider:event, as a rule would. Any lock. */
bool lk__probe_glob_matches(const char *glob, const char *provider, const char *event);

/* The TSC rate (Hz) a trace starts with: the clock module's calibration. */
uint64_t lk__probe_tsc_hz(void);

#endif
