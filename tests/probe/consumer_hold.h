/* SPDX-License-Identifier: MIT */
/*
 * For tests: stop the running trace's consumer from draining, as a descheduled one would not,
 * so that a fixed ring overflows or a growing one grows whatever the machine's speed.
 */
#ifndef LKT_CONSUMER_HOLD_H
#define LKT_CONSUMER_HOLD_H

#include <stdbool.h>
#include <unistd.h>

#include "probe/probe_internal.h"

/* Returns once the consumer has seen the change (a trace must be running). */
static inline void lkt_hold_consumer(bool hold)
{
	__atomic_store_n(&lk__consumer_hold, hold, __ATOMIC_SEQ_CST);
	lk__consumer_wake();
	while (__atomic_load_n(&lk__consumer_held, __ATOMIC_SEQ_CST) != hold)
		usleep(100);
}

#endif
