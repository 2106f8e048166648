// SPDX-License-Identifier: MIT
/*
 * The x86 time-stamp counter. Usable when it is invariant (CPUID 0x80000007 EDX[8]: constant rate
 * in every P-, C- and T-state). Its frequency is in CPUID leaf 0x15 on recent Intel parts and in
 * the hypervisor timing leaf 0x40000010 under VMware and some KVM set-ups; elsewhere it is
 * measured (timebase.c).
 */
#include <stddef.h>

#include "clock/arch/counter.h"
#include "core/cpu.h"

void lk__counter_probe(struct lk__counter_info *info)
{
	const struct lk__cpu *cpu = lk__cpu();

	info->name = "TSC";
	info->clocksource = "tsc";
	info->hz = cpu->tsc_hz;
	info->hz_source = cpu->tsc_hz_source;
	if (!cpu->tsc) {
		info->usable = false;
		info->why_not = "this CPU has no time-stamp counter";
	} else if (!cpu->invariant_tsc) {
		info->usable = false;
		info->why_not =
			"the TSC is not invariant (CPUID 0x80000007 EDX bit 8 is clear): its rate "
			"changes with the CPU's frequency, so cycles cannot be turned into time "
			"(a hypervisor may hide the bit: KVM/QEMU -cpu host,+invtsc)";
	} else {
		info->usable = true;
		info->why_not = NULL;
	}
}
