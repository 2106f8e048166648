/* SPDX-License-Identifier: MIT */
/*
 * The key module's architecture functions where lowkey has no code patching for the architecture
 * (no src/key/arch/<arch>.c): the library is built with LK_KEYS_PORTABLE, its sites are load +
 * branch and never registered, so none of these runs for them. A program built without
 * LK_KEYS_PORTABLE against such a library has sites this file does not recognize: they are never
 * rewritten, and a flip that would have to fails with -EOPNOTSUPP.
 */
#include <errno.h>
#include <string.h>

#include "key/key_internal.h"

void lk__arch_site_insn(uint8_t insn[LK__SITE_LEN], const uint8_t *code, const uint8_t *target,
			bool jump)
{
	(void)target;
	(void)jump;
	memcpy(insn, code, LK__SITE_LEN);
}

bool lk__arch_site_decode(const uint8_t *code, const uint8_t *target, bool *jumping)
{
	(void)code;
	(void)target;
	*jumping = false;
	return false;
}

uintptr_t lk__arch_resume(const uint8_t *code, const uint8_t insn[LK__SITE_LEN])
{
	(void)insn;
	return (uintptr_t)code;
}

enum lk__rewrite lk__arch_rewrite(const struct lk__patch *patches, size_t n, int *err)
{
	(void)patches;
	(void)n;
	*err = EOPNOTSUPP;
	return LK__REWRITE_UNDONE;
}

void lk__arch_copy_code(void *dst, const void *src, size_t len)
{
	memcpy(dst, src, len);
}

bool lk__arch_trap(siginfo_t *si, ucontext_t *uc)
{
	(void)si;
	(void)uc;
	return false;
}
