// SPDX-License-Identifier: MIT
/*
 * Architectures without a cycle counter lowkey knows how to read: every clock uses the system
 * call or the vDSO.
 */
#include <stddef.h>

#include "clock/arch/counter.h"

void lk__counter_probe(struct lk__counter_info *info)
{
	info->name = "none";
	info->clocksource = "";
	info->hz = 0;
	info->hz_source = NULL;
	info->usable = false;
	info->why_not = "lowkey cannot read a cycle counter on this architecture yet";
}
