/* SPDX-License-Identifier: MIT */
/* Internal: sites turned on for tracers outside lowkey (sdt.c). Registry lock held for all. */
#ifndef LK_PROBE_SDT_INTERNAL_H
#define LK_PROBE_SDT_INTERNAL_H

#include <stdbool.h>
#include <sys/types.h>

#include "probe/probe_internal.h"

/*
 * Read every USDT semaphore of every loaded object and note which sites an external tracer is
 * attached to now. Costs a load per copy of a site's code; no system call.
 */
void lk__sdt_scan_locked(void);

/* Whether a semaphore of rt was above zero at the last scan: an outside tracer is attached. */
bool lk__sdt_attached_locked(const struct lk__probe_site_rt *rt);

/* Whether rt stays on for an external tracer: a USDT rule selects it, or a tracer is attached. */
bool lk__sdt_wanted_locked(const struct lk__probe_site_rt *rt);

/* The watcher's interval unless LOWKEY_USDT_WATCH or lk_probe_usdt_watch sets another, and the
 * longest either may set. */
#define LK__USDT_WATCH_DEFAULT_MS 50u
#define LK__USDT_WATCH_MAX_MS (3600u * 1000)

/*
 * An object registered: if it has USDT sites, start the watcher unless it runs, the program
 * chose otherwise (lk_probe_usdt_watch) or LOWKEY_USDT_WATCH=0. Costs a thread creation once.
 */
void lk__sdt_object_loaded_locked(const struct lk__dso_rt *dso);

/*
 * The watcher's thread id, or 0 while none runs: lowkey's own thread, which an off-CPU trace
 * leaves out as it does its consumer. Async-signal-safe (a load).
 */
pid_t lk__sdt_watcher_tid(void);

/*
 * Whether rules apply for a trace now: one runs and is not stopping (site.c). A rule change or a
 * poll while lk_trace_stop turns the sites off must not turn them back on.
 */
bool lk__probe_tracing(void);

#endif
