/* SPDX-License-Identifier: MIT */
/*
 * For tests: look at the machine code of this object's static-key sites.
 *
 * lkt_check_sites(key) walks the lk_key_sites table of the object that includes this header and
 * checks that every site of key (of every key, for NULL) holds exactly the instruction for the
 * key's present direction:
 * the 5-byte NOP 0f 1f 44 00 00, or a jmp rel32 to the site's target. It returns the number of
 * sites checked, or -1 at the first site holding anything else. In a portable build there are no
 * sites and it returns 0.
 */
#ifndef LKT_SITES_H
#define LKT_SITES_H

#include <stdint.h>
#include <string.h>

#include <lowkey/key.h>

static inline int lkt_check_sites(const void *key_ptr)
{
#if defined(LK_KEYS_PORTABLE) || !defined(__x86_64__)
	(void)key_ptr;
	return 0;
#else
	static const uint8_t nop5[5] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };
	const struct lk__key_site *b = (const struct lk__key_site *)(const void *)__start___lk_key_sites;
	const struct lk__key_site *e = (const struct lk__key_site *)(const void *)__stop___lk_key_sites;
	const struct lk_key *key = key_ptr;
	int n = 0;

	for (; b && b < e; b++) {
		const char *slot = (const char *)&b->ref + (b->ref & ~(int64_t)LK__SITE_FLAGS);
		const struct lk_key *site_key = *(struct lk_key *const *)slot;
		const uint8_t *code = (const uint8_t *)&b->code + b->code;
		const uint8_t *target = (const uint8_t *)&b->target + b->target;
		bool want_jmp = (lk_key_enabled)(site_key) == (bool)(b->ref & LK__SITE_JUMP_WHEN_ON);
		int32_t rel;

		if (key && site_key != key)
			continue;
		memcpy(&rel, code + 1, sizeof(rel));
		if (want_jmp && !(code[0] == 0xe9 && code + 5 + rel == target))
			return -1;
		if (!want_jmp && memcmp(code, nop5, sizeof(nop5)) != 0)
			return -1;
		n++;
	}
	return n;
#endif
}

/* The code of the first site of key in this object, or NULL. */
static inline const volatile uint8_t *lkt_first_site(const void *key_ptr)
{
#if defined(LK_KEYS_PORTABLE) || !defined(__x86_64__)
	(void)key_ptr;
	return NULL;
#else
	const struct lk__key_site *b = (const struct lk__key_site *)(const void *)__start___lk_key_sites;
	const struct lk__key_site *e = (const struct lk__key_site *)(const void *)__stop___lk_key_sites;

	for (; b && b < e; b++) {
		const char *slot = (const char *)&b->ref + (b->ref & ~(int64_t)LK__SITE_FLAGS);

		if (*(struct lk_key *const *)slot == key_ptr)
			return (const uint8_t *)&b->code + b->code;
	}
	return NULL;
#endif
}

/* Whether this file's sites are patched code (key.h: not in portable builds, nor in C at -O0). */
#if !defined(LK__PATCHED_SITES)
#define LKT_PATCHING 0
#else
#define LKT_PATCHING 1
#endif

#endif
