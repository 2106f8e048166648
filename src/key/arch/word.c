// SPDX-License-Identifier: MIT
/*
 * What the 4-byte-word architectures share (word.h): a site holds the NOP or the jump to its
 * target; a batch stores every new word, makes this thread see them, then syncs every other
 * thread once (core/sync.c). A sync that fails (membarrier denied since the process registered
 * for it) leaves the other threads free to run either word for a while: the old words go back,
 * which is as valid, and the flip is reported undone. No thread ever traps.
 */
#include <string.h>

#include "core/sync.h"
#include "key/arch/word.h"

static uint32_t word_of(const uint8_t insn[LK__SITE_LEN])
{
	uint32_t word;

	memcpy(&word, insn, sizeof(word));
	return word;
}

void lk__arch_site_insn(uint8_t insn[LK__SITE_LEN], const uint8_t *code, const uint8_t *target,
			bool jump)
{
	uint32_t word = jump ? lk__word_jump(code, target) : lk__word_nop;

	memcpy(insn, &word, sizeof(word));
}

bool lk__arch_site_decode(const uint8_t *code, const uint8_t *target, bool *jumping)
{
	uint32_t word;

	if ((uintptr_t)code & 3 || !lk__word_jump_reaches(code, target))
		return false;
	memcpy(&word, code, sizeof(word));
	*jumping = word != lk__word_nop;
	return word == lk__word_nop || word == lk__word_jump(code, target);
}

uintptr_t lk__arch_resume(const uint8_t *code, const uint8_t insn[LK__SITE_LEN])
{
	uint32_t word = word_of(insn);

	if (word == lk__word_nop)
		return (uintptr_t)code + LK__SITE_LEN;
	return (uintptr_t)code + (uintptr_t)lk__word_jump_offset(word);
}

void lk__arch_copy_code(void *dst, const void *src, size_t len)
{
	uint8_t *d = dst;

	for (size_t i = 0; i < len; i++)
		d[i] = lk__word_load_byte((const uint8_t *)src + i);
}

static void write_all(const struct lk__patch *p, size_t n, bool old)
{
	for (size_t i = 0; i < n; i++)
		lk__word_store(p[i].addr, word_of(old ? p[i].old : p[i].insn));
	lk__word_written(p, n);
}

enum lk__rewrite lk__arch_rewrite(const struct lk__patch *p, size_t n, int *err)
{
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
