// SPDX-License-Identifier: MIT
/*
 * The RISC-V time CSR (rdtime): the platform timer's count, at a constant rate by the privileged
 * specification, readable from U-mode on Linux. Its rate is the device tree's
 * /cpus/timebase-frequency (a 32- or 64-bit big-endian cell); where there is no device tree (ACPI
 * systems, emulators) the rate is measured against CLOCK_MONOTONIC_RAW, and the perf page's
 * time_mult/time_shift, where the kernel fills them, convert it all the same.
 */
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include "clock/arch/counter.h"

#define TIMEBASE_PATH "/proc/device-tree/cpus/timebase-frequency"

static uint64_t device_tree_timebase(void)
{
	uint8_t cell[8];
	uint64_t hz = 0;
	ssize_t n;
	int fd = open(TIMEBASE_PATH, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	n = read(fd, cell, sizeof(cell));
	close(fd);
	if (n != 4 && n != 8)
		return 0;
	for (ssize_t i = 0; i < n; i++)
		hz = hz << 8 | cell[i];
	return hz;
}

void lk__counter_probe(struct lk__counter_info *info)
{
	uint64_t hz = device_tree_timebase();

	info->name = "time";
	info->clocksource = "riscv_clocksource";
	info->hz = hz;
	info->hz_source = hz ? "the device tree's /cpus/timebase-frequency" : NULL;
	info->usable = true;
	info->why_not = NULL;
}
