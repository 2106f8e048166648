// SPDX-License-Identifier: MIT
/*
 * CPU feature detection.
 */
#include <pthread.h>
#include <string.h>

#include "core/cpu.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static void cpuid(unsigned int leaf, unsigned int sub, unsigned int r[4])
{
	__cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
}

static void read_tsc_hz(struct lk__cpu *c, unsigned int max_leaf)
{
	unsigned int r[4];

	if (max_leaf >= 0x15) {
		cpuid(0x15, 0, r); /* EAX/EBX = TSC/crystal ratio, ECX = crystal Hz */
		if (r[0] && r[1] && r[2]) {
			c->tsc_hz = (uint64_t)r[2] * r[1] / r[0];
			c->tsc_hz_source = "CPUID leaf 0x15";
			return;
		}
	}
	if (c->hypervisor) {
		cpuid(0x40000000, 0, r);
		if (r[0] >= 0x40000010) {
			cpuid(0x40000010, 0, r); /* EAX = TSC kHz (VMware/KVM timing leaf) */
			if (r[0]) {
				c->tsc_hz = (uint64_t)r[0] * 1000;
				c->tsc_hz_source = "hypervisor CPUID leaf 0x40000010";
			}
		}
	}
}

static void detect(struct lk__cpu *c)
{
	unsigned int r[4], max_leaf, max_ext;

	cpuid(0, 0, r);
	max_leaf = r[0];
	memcpy(c->vendor, &r[1], 4);
	memcpy(c->vendor + 4, &r[3], 4);
	memcpy(c->vendor + 8, &r[2], 4);
	c->vendor[12] = 0;

	cpuid(1, 0, r);
	c->tsc = r[3] & (1u << 4);
	c->hypervisor = r[2] & (1u << 31);

	cpuid(0x80000000, 0, r);
	max_ext = r[0];
	if (max_ext >= 0x80000001) {
		cpuid(0x80000001, 0, r);
		c->rdtscp = r[3] & (1u << 27);
	}
	if (max_ext >= 0x80000007) {
		cpuid(0x80000007, 0, r);
		c->invariant_tsc = r[3] & (1u << 8);
	}
	read_tsc_hz(c, max_leaf);
}
#else
static void detect(struct lk__cpu *c)
{
	(void)c;
}
#endif

static struct lk__cpu cpu_info;
static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;

static void cpu_init(void)
{
	detect(&cpu_info);
}

const struct lk__cpu *lk__cpu(void)
{
	pthread_once(&cpu_once, cpu_init);
	return &cpu_info;
}
