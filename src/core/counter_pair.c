// SPDX-License-Identifier: MIT
/* A cycle-counter value and a clock reading taken at one instant (counter_pair.h). */
#include <time.h>

#include <lowkey/bits/arch.h>

#include "core/counter_pair.h"

static uint64_t clock_ns(int clock)
{
	struct timespec ts;

	if (clock_gettime(clock, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t lk__counter_pair(int clock, uint64_t *at, uint64_t *ns, int tries)
{
	uint64_t best = UINT64_MAX;

	*at = *ns = 0;
	for (int i = 0; i < tries; i++) {
		uint64_t c0 = lk__arch_counter();
		uint64_t v = clock_ns(clock);
		uint64_t c1 = lk__arch_counter();

		if (c1 - c0 < best) {
			best = c1 - c0;
			*at = c0 + (c1 - c0) / 2;
			*ns = v;
		}
	}
	return best;
}
