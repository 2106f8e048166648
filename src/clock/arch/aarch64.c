// SPDX-License-Identifier: MIT
/*
 * The arm64 generic timer's virtual count (CNTVCT_EL0): constant rate by architecture, readable
 * from EL0 on Linux, frequency in CNTFRQ_EL0.
 */
#include <stddef.h>

#include "clock/arch/counter.h"

void lk__counter_probe(struct lk__counter_info *info)
{
	uint64_t hz;

	asm volatile("mrs %0, cntfrq_el0" : "=r"(hz));
	info->name = "CNTVCT";
	info->clocksource = "arch_sys_counter";
	info->hz = hz;
	info->hz_source = hz ? "CNTFRQ_EL0" : NULL;
	info->usable = hz != 0;
	info->why_not = hz ? NULL :
			     "CNTFRQ_EL0 reads 0: the firmware did not program the timer frequency";
}
