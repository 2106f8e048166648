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
 * Validated under emulation only (qemu-user, which neither needs nor checks FENCE.I): the sequence
 * above is argued from the specifications, not observed on hardware.
 */
#include <string.h>

#include "core/sync.h"
#include "key/key_internal.h"

#define INSN_NOP 0x00000013u
#define INSN_JAL 0x0000006fu	/* rd = zero */
#define JAL_RANGE (1l << 20)	/* +-1 MiB */

static uint32_t j_to(const uint8_t *code, const uint8_t *target)
{
	uint32_t imm = (uint32_t)(target - code);

	return INSN_JAL | (imm & 0x100000u) << 11 | (imm & 0x7feu) << 20 | (imm & 0x800u) << 9 |
	       (imm & 0xff000u);
}

static bool j_reaches(const uint8_t *code, const uint8_t *target)
{
	long offset = (long)(target - code);

	return offset >= -JAL_RANGE && offset < JAL_RANGE && (offset & 1) == 0;
}

static long j_offset(uint32_t word)
{
	uint32_t imm = (word >> 11 & 0x100000u) | (word >> 20 & 0x7feu) | (word >> 9 & 0x800u) | (word & 0xff000u);

	return (long)((int32_t)(imm << 11) >> 11);
}

void lk__arch_site_insn(uint8_t insn[LK__SITE_LEN], const uint8_t *code, const uint8_t *target, bool jump)
{
	uint32_t word = jump ? j_to(code, target) : INSN_NOP;

	memcpy(insn, &word, sizeof(word));
}

bool lk__arch_site_decode(const uint8_t *code, const uint8_t *target, bool *jumping)
{
	uint32_t word;

	if ((uintptr_t)code & 3 || !j_reaches(code, target))
		return false;
	memcpy(&word, code, sizeof(word));
	*jumping = word != INSN_NOP;
	return word == INSN_NOP || word == j_to(code, target);
}

uintptr_t lk__arch_resume(const uint8_t *code, const uint8_t insn[LK__SITE_LEN])
{
	uint32_t word;

	memcpy(&word, insn, sizeof(word));
	if (word == INSN_NOP)
		return (uintptr_t)code + LK__SITE_LEN;
	return (uintptr_t)code + (uintptr_t)j_offset(word);
}

/* One single-copy atomic store, an asm so that sanitizers leave it alone (code is not their data). */
static void write_word(uint8_t *p, const uint8_t insn[LK__SITE_LEN])
{
	uint32_t word;

	memcpy(&word, insn, sizeof(word));
	__asm__ __volatile__("sw %1, 0(%0)" : : "r"(p), "r"(word) : "memory");
}

void lk__arch_copy_code(void *dst, const void *src, size_t len)
{
	uint8_t *d = dst;
	const uint8_t *s = src;

	for (size_t i = 0; i < len; i++) {
		uint8_t b;

		__asm__ __volatile__("lbu %0, 0(%1)" : "=r"(b) : "r"(s + i) : "memory");
		d[i] = b;
	}
}

static void write_all(const struct lk__patch *p, size_t n, bool old)
{
	for (size_t i = 0; i < n; i++)
		write_word(p[i].addr, old ? p[i].old : p[i].insn);
	__asm__ __volatile__("fence.i" : : : "memory");
}

/* As on aarch64: every word, one sync; a failed sync puts the old words back. */
enum lk__rewrite lk__arch_rewrite(const struct lk__patch *p, size_t n, unsigned int flags, int *err)
{
	(void)flags;
	write_all(p, n, false);
	*err = lk__sync_cores();
	if (*err) {
		write_all(p, n, true);
		return LK__REWRITE_UNDONE;
	}
	return LK__REWRITE_DONE;
}

bool lk__arch_trap(siginfo_t *si, ucontext_t *uc)
{
	(void)si;
	(void)uc;
	return false;
}
