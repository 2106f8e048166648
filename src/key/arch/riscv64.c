// SPDX-License-Identifier: MIT
/*
 * riscv64 sites: `nop` (addi zero, zero, 0: 00000013) or `j target` (jal zero, +-1 MiB), one
 * 4-byte-aligned word (key.h emits it with norvc and norelax, after .balign 4), rewritten in place
 * while other harts may run it.
 *
 * Why a single store is enough, and the sequence after it (the unprivileged ISA's "Zifencei" and
 * the kernel's user-space cross-modifying-code rules, Documentation/arch/riscv/cmodx.rst): an
 * aligned 32-bit store is single-copy atomic, so a hart that fetches the word sees the old or the
 * new instruction whole; nothing guarantees when another hart sees the new one until it executes
 * FENCE.I. The writer runs FENCE.I for itself; for the other harts of the process, membarrier
 * SYNC_CORE where the kernel implements it for riscv (Linux 6.9 and later), else the
 * riscv_flush_icache system call with no flags (every hart: the kernel sends them FENCE.I, and
 * marks the others to run it before they next return to this process). core/sync.c chooses.
 * The kernel's own jump labels (arch/riscv/kernel/jump_label.c) patch the same NOP <-> JAL word.
 *
 * The rest is word.c's. Validated under emulation only (qemu-user, which neither needs nor
 * checks FENCE.I or the barrier): the sequence above is argued from the specifications, not
 * observed on hardware.
 */
#include "key/arch/word.h"

#define INSN_JAL 0x0000006fu /* rd = zero */
#define JAL_RANGE (1l << 20) /* +-1 MiB */

const uint32_t lk__word_nop = 0x00000013u;

uint32_t lk__word_jump(const uint8_t *code, const uint8_t *target)
{
	uint32_t imm = (uint32_t)(target - code);

	return INSN_JAL | (imm & 0x100000u) << 11 | (imm & 0x7feu) << 20 | (imm & 0x800u) << 9 |
	       (imm & 0xff000u);
}

bool lk__word_jump_reaches(const uint8_t *code, const uint8_t *target)
{
	long offset = (long)(target - code);

	return offset >= -JAL_RANGE && offset < JAL_RANGE && (offset & 1) == 0;
}

long lk__word_jump_offset(uint32_t word)
{
	uint32_t imm = (word >> 11 & 0x100000u) | (word >> 20 & 0x7feu) | (word >> 9 & 0x800u) |
		       (word & 0xff000u);

	return (long)((int32_t)(imm << 11) >> 11);
}

void lk__word_store(uint8_t *p, uint32_t word)
{
	__asm__ __volatile__("sw %1, 0(%0)" : : "r"(p), "r"(word) : "memory");
}

uint8_t lk__word_load_byte(const uint8_t *p)
{
	uint8_t b;

	__asm__ __volatile__("lbu %0, 0(%1)" : "=r"(b) : "r"(p) : "memory");
	return b;
}

/* This hart: FENCE.I. The others: core/sync.c's membarrier or riscv_flush_icache. */
void lk__word_written(const struct lk__patch *p, size_t n)
{
	(void)p;
	(void)n;
	__asm__ __volatile__("fence.i" : : : "memory");
}
