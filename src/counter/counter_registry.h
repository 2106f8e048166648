/* SPDX-License-Identifier: MIT */
/*
 * Internal: the counter sets this process has open, for the control socket's server, which
 * answers a tracer's request for their readings (lowkey agent's perf counter metrics). The
 * registry is a list under one mutex, taken when a set is opened or closed and by
 * lk__counters_foreach: never by a read.
 */
#ifndef LK_COUNTER_REGISTRY_H
#define LK_COUNTER_REGISTRY_H

#include <stdint.h>

struct lk_counters;

/* Put c on the registry with the next set number (1, 2, ...); lk_counters_open* call it. */
void lk__counters_register(struct lk_counters *c);

/* Take c off the registry; lk_counters_close calls it first, so no reader sees it freed. */
void lk__counters_unregister(struct lk_counters *c);

/*
 * lk__counters_foreach - call fn for every set this process opened and has not closed, in the
 * order they were opened, with the set's number. The registry's mutex is held throughout: fn may
 * read the set (lk_counters_read, _count, _describe) but not open or close one, and each open and
 * close in the process waits for it. Sets a forked child inherited are not this process's and are
 * left out. fn returns 0 to go on, anything else to stop; that value is returned, else 0.
 * Not async-signal-safe.
 */
int lk__counters_foreach(int (*fn)(struct lk_counters *c, uint32_t set, void *arg), void *arg);

#endif
