/* SPDX-License-Identifier: MIT */
/*
 * Judging a run of a site against its key while other threads flip it. The flipper makes a
 * generation odd while a flip is under way and even once it has returned; a run between two reads
 * of the same even generation came after that flip returned and must go the key's way.
 *
 * Except under qemu-user, where a thread may run a translation of the old code once more after a
 * flip has returned: QEMU drops the translations of a page when it is written, but a thread that
 * was already inside one, or had just looked one up or chained to it, finishes it, and membarrier,
 * passed to the host kernel, does not reach QEMU's translations. Measured: 4-27 stale runs in
 * 100,000 flips under qemu-aarch64 and qemu-x86_64 (the x86-64 build, strict and clean natively,
 * shows them too), and about one in 10^7 runs under qemu-riscv64 7.2. A program without lowkey
 * shows it under qemu-riscv64 too: one word flipped between a NOP and a jump with a plain store,
 * FENCE.I and membarrier SYNC_CORE, as the ISA's rules for cross-modifying code ask, was run the
 * old way 1 to 3 times in 10^9 runs (flipped between two `addi`s, never). There, a run that went
 * the key's previous way is counted as stale, not wrong; anything else stays wrong.
 */
#ifndef LKT_SETTLED_H
#define LKT_SETTLED_H

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

/* qemu-user is told by its missing rseq (ENOSYS; kernels have it since 4.18, and membarrier
 * SYNC_CORE, which flips need, since 4.16). */
static inline bool lkt_under_emulator(void)
{
	return syscall(SYS_rseq, NULL, 0, 0, 0) < 0 && errno == ENOSYS;
}

enum lkt_run { LKT_RUN_UNSETTLED, LKT_RUN_RIGHT, LKT_RUN_STALE, LKT_RUN_WRONG };

/*
 * A run of a site that returned got, 1 when it went the key's way for "on", 0 for "off", between
 * reads of the generation before and after; emulated: lkt_under_emulator().
 */
static inline enum lkt_run lkt_judge_run(unsigned long before, int got, unsigned long after,
					 bool emulated)
{
	int want = (int)((before / 2) & 1);

	if (got != 0 && got != 1)
		return LKT_RUN_WRONG;
	if (before != after || (before & 1))
		return LKT_RUN_UNSETTLED;
	if (got == want)
		return LKT_RUN_RIGHT;
	return emulated ? LKT_RUN_STALE : LKT_RUN_WRONG;
}

/* Say how many of runs were stale and how many wrong, if any; printed at once (a child's exit). */
static inline void lkt_print_runs(unsigned long runs, unsigned long stale, unsigned long wrong)
{
	if (stale != 0)
		printf("under an emulator: %lu of %lu runs went the previous way (an old translation)\n",
		       stale, runs);
	if (wrong != 0)
		printf("%lu of %lu runs of the sites went the wrong way\n", wrong, runs);
	fflush(stdout);
}

#endif
