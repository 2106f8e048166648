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
 * Validated under emulation only (qemu-user, which neither needs nor checks the cache maintenance
 * or the barrier): the sequence above is argued from the manual, not observed on hardware.
 */
#include <string.h>

#include "core/sync.h"
#include "key/key_internal.h"

#define INSN_NOP 0xd503201fu
#define INSN_B 0x14000000u
#define B_RANGE (128l << 20)	/* imm26, in words: +-128 MiB */

static uint32_t b_to(const uint8_t *code, const uint8_t *target)
{
	long offset = (long)(target - code);

	return INSN_B | (((uint32_t)(offset >> 2)) & 0x03ffffffu);
}

static bool b_reaches(const uint8_t *code, const uint8_t *target)
{
	long offset = (long)(target - code);

	return offset >= -B_RANGE && offset < B_RANGE && (offset & 3) == 0;
}

void lk__arch_site_insn(uint8_t insn[LK__SITE_LEN], const uint8_t *code, const uint8_t *target, bool jump)
{
	uint32_t word = jump ? b_to(code, target) : INSN_NOP;

	memcpy(insn, &word, sizeof(word));
}

bool lk__arch_site_decode(const uint8_t *code, const uint8_t *target, bool *jumping)
{
	uint32_t word;

	if ((uintptr_t)code & 3 || !b_reaches(code, target))
		return false;
	memcpy(&word, code, sizeof(word));
	*jumping = word != INSN_NOP;
	return word == INSN_NOP || word == b_to(code, target);
}

uintptr_t lk__arch_resume(const uint8_t *code, const uint8_t insn[LK__SITE_LEN])
{
	uint32_t word;

	memcpy(&word, insn, sizeof(word));
	if (word == INSN_NOP)
		return (uintptr_t)code + LK__SITE_LEN;
	return (uintptr_t)code + (uintptr_t)((int64_t)((int32_t)(word << 6) >> 6) * 4);
}

/* One single-copy atomic store, an asm so that sanitizers leave it alone (code is not their data). */
static void write_word(uint8_t *p, const uint8_t insn[LK__SITE_LEN])
{
	uint32_t word;

	memcpy(&word, insn, sizeof(word));
	__asm__ __volatile__("str %w1, [%0]" : : "r"(p), "r"(word) : "memory");
}

void lk__arch_copy_code(void *dst, const void *src, size_t len)
{
	uint8_t *d = dst;
	const uint8_t *s = src;

	for (size_t i = 0; i < len; i++) {
		uint8_t b;

		__asm__ __volatile__("ldrb %w0, [%1]" : "=r"(b) : "r"(s + i) : "memory");
		d[i] = b;
	}
}

static void write_all(const struct lk__patch *p, size_t n, bool old)
{
	for (size_t i = 0; i < n; i++) {
		write_word(p[i].addr, old ? p[i].old : p[i].insn);
		__builtin___clear_cache((char *)p[i].addr, (char *)p[i].addr + LK__SITE_LEN);
	}
}

/*
 * Every site gets its new word, then one sync for all. A sync that fails (membarrier denied since
 * the process registered for it) leaves other threads free to run either word for a while: the
 * old words go back, which is as valid, and the flip is reported undone.
 */
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

/* No site ever traps. */
bool lk__arch_trap(siginfo_t *si, ucontext_t *uc)
{
	(void)si;
	(void)uc;
	return false;
}
