/* SPDX-License-Identifier: MIT */
/*
 * For tests: look at the machine code of this object's static-key sites.
 *
 * lkt_check_sites(key) walks the lk_key_sites table of the object that includes this header and
 * checks that every site of key (of every key, for NULL) holds exactly the instruction for the
 * key's present direction (x86-64 below; aarch64: nop or b; riscv64: nop or jal zero):
 * the 5-byte NOP 0f 1f 44 00 00, or a jmp rel32 to the site's target. It returns the number of
 * sites checked, or -1 at the first site holding anything else. In a portable build there are no
 * sites and it returns 0.
 */
#ifndef LKT_SITES_H
#define LKT_SITES_H

#include <stdint.h>
#include <string.h>

#include <lowkey/key.h>

/* A site's two instructions on this architecture: the NOP, and the jump from code to target. */
static inline bool lkt_site_is_nop(const uint8_t *code)
{
#if defined(__x86_64__)
	static const uint8_t nop5[5] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };

	return memcmp(code, nop5, sizeof(nop5)) == 0;
#else
	uint32_t word;

	memcpy(&word, code, sizeof(word));
#if defined(__aarch64__)
	return word == 0xd503201fu;
#else
	return word == 0x00000013u;
#endif
#endif
}

static inline bool lkt_site_jumps_to(const uint8_t *code, const uint8_t *target)
{
#if defined(__x86_64__)
	int32_t rel;

	memcpy(&rel, code + 1, sizeof(rel));
	return code[0] == 0xe9 && code + 5 + rel == target;
#else
	uint32_t word, imm = (uint32_t)(target - code);

	memcpy(&word, code, sizeof(word));
#if defined(__aarch64__)
	return word == (0x14000000u | ((imm >> 2) & 0x03ffffffu)); /* b */
#else
	return word == (0x6fu | (imm & 0x100000u) << 11 | (imm & 0x7feu) << 20 |
			(imm & 0x800u) << 9 | (imm & 0xff000u)); /* jal zero */
#endif
#endif
}

static inline int lkt_check_sites(const void *key_ptr)
{
#if !defined(LK__PATCHED_SITES)
	(void)key_ptr;
	return 0;
#else
	const struct lk__key_site *b =
		(const struct lk__key_site *)(const void *)__start___lk_key_sites;
	const struct lk__key_site *e =
		(const struct lk__key_site *)(const void *)__stop___lk_key_sites;
	const struct lk_key *key = (const struct lk_key *)key_ptr;
	int n = 0;

	for (; b && b < e; b++) {
		const char *slot = (const char *)&b->ref + (b->ref & ~(int64_t)LK__SITE_FLAGS);
		const struct lk_key *site_key = *(struct lk_key *const *)(const void *)slot;
		const uint8_t *code = (const uint8_t *)&b->code + b->code;
		const uint8_t *target = (const uint8_t *)&b->target + b->target;
		bool want_jmp = (lk_key_enabled)(site_key) ==
				(bool)(b->ref & LK__SITE_JUMP_WHEN_ON);

		if (key && site_key != key)
			continue;
		if (want_jmp ? !lkt_site_jumps_to(code, target) : !lkt_site_is_nop(code))
			return -1;
		n++;
	}
	return n;
#endif
}

/* The code of the first site of key in this object, or NULL. */
static inline const volatile uint8_t *lkt_first_site(const void *key_ptr)
{
#if !defined(LK__PATCHED_SITES)
	(void)key_ptr;
	return NULL;
#else
	const struct lk__key_site *b =
		(const struct lk__key_site *)(const void *)__start___lk_key_sites;
	const struct lk__key_site *e =
		(const struct lk__key_site *)(const void *)__stop___lk_key_sites;

	for (; b && b < e; b++) {
		const char *slot = (const char *)&b->ref + (b->ref & ~(int64_t)LK__SITE_FLAGS);

		if (*(struct lk_key *const *)slot == key_ptr)
			return (const uint8_t *)&b->code + b->code;
	}
	return NULL;
#endif
}

/* Under ThreadSanitizer, whose runtime's thread blocks SIGTRAP: no flip there ever traps. */
#ifndef __has_feature
#define __has_feature(x) 0
#endif
#if defined(__SANITIZE_THREAD__) || __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#else
#define UNDER_TSAN 0
#endif

/* Whether rewriting a site in place goes through an int3 (x86-64, and only where the flipping
 * thread is the only one; aarch64 and riscv64 rewrite a site with one store). */
#if defined(__x86_64__)
#define LKT_TRAP_PROTOCOL 1
#else
#define LKT_TRAP_PROTOCOL 0
#endif

/* Whether this file's sites are patched code (key.h: not in portable builds, nor in C at -O0). */
#if !defined(LK__PATCHED_SITES)
#define LKT_PATCHING 0
#else
#define LKT_PATCHING 1
#endif

#endif
