/* SPDX-License-Identifier: MIT */
/* Internal: sites turned on for tracers outside lowkey (sdt.c). Registry lock held for all. */
#ifndef LK_PROBE_SDT_INTERNAL_H
#define LK_PROBE_SDT_INTERNAL_H

#include <stdbool.h>

#include "probe/probe_internal.h"

/*
 * Read every USDT semaphore of every loaded object and note which sites an external tracer is
 * attached to now. Costs a load per copy of a site's code; no system call.
 */
void lk__sdt_scan_locked(void);

/* Whether rt stays on for an external tracer: a USDT rule selects it, or a tracer is attached. */
bool lk__sdt_wanted_locked(const struct lk__probe_site_rt *rt);

/*
 * Whether rules apply for a trace now: one runs and is not stopping (site.c). A rule change or a
 * poll while lk_trace_stop turns the sites off must not turn them back on.
 */
bool lk__probe_tracing(void);

#endif
