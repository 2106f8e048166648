// SPDX-License-Identifier: MIT
/*
 * aarch64 sites: `nop` (d503201f) or `b target`, one aligned 32-bit word, rewritten in place while
 * other threads may run it.
 *
 * Why a single store is enough, and the sequence after it (ARM ARM, "Concurrent modification and
 * execution of instructions", B2.2.5 in DDI 0487): B, BL, NOP, BRK, SVC, HVC, SMC and ISB are the
 * instructions that may be replaced by one another while another PE executes them, provided the
 * write is single-copy atomic -- an aligned 32-bit store is -- and each executing PE then sees
 * either the old or the new instruction, never a mix. For the new one to be fetched, the writer
 * cleans the data cache line to the point of unification and invalidates the instruction cache
 * line there (DC CVAU, DSB ISH, IC IVAU, DSB ISH: __builtin___clear_cache, broadcast to the inner
 * shareable domain), and every other PE must pass a context synchronization event before it is
 * guaranteed not to run an instruction it fetched before: membarrier SYNC_CORE makes each thread
 * of the process pass one (an exception return) before the call returns, once per batch. The
 * kernel's own jump labels on arm64 rely on the same rule (aarch64_insn_patch_text_nosync: a
 * write and a cache flush, no stop_machine, for B <-> NOP).
 *
 * The rest is word.c's. Validated under emulation only (qemu-user, which neither needs nor
 * checks the cache maintenance or the barrier): the sequence above is argued from the manual,
 * not observed on hardware.
 */
#include "key/arch/word.h"

#define INSN_B 0x14000000u
#define B_RANGE (128l << 20) /* imm26, in words: +-128 MiB */

const uint32_t lk__word_nop = 0xd503201fu;

uint32_t lk__word_jump(const uint8_t *code, const uint8_t *target)
{
	long offset = (long)(target - code);

	return INSN_B | (((uint32_t)(offset >> 2)) & 0x03ffffffu);
}

bool lk__word_jump_reaches(const uint8_t *code, const uint8_t *target)
{
	long offset = (long)(target - code);

	return offset >= -B_RANGE && offset < B_RANGE && (offset & 3) == 0;
}

long lk__word_jump_offset(uint32_t word)
{
	return (long)((int32_t)(word << 6) >> 6) * 4;
}

void lk__word_store(uint8_t *p, uint32_t word)
{
	__asm__ __volatile__("str %w1, [%0]" : : "r"(p), "r"(word) : "memory");
}

uint8_t lk__word_load_byte(const uint8_t *p)
{
	uint8_t b;

	__asm__ __volatile__("ldrb %w0, [%1]" : "=r"(b) : "r"(p) : "memory");
	return b;
}

/* DC CVAU, DSB ISH, IC IVAU, DSB ISH over each site (broadcast to the inner shareable domain). */
void lk__word_written(const struct lk__patch *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		__builtin___clear_cache((char *)p[i].addr, (char *)p[i].addr + LK__SITE_LEN);
}
