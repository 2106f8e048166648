// SPDX-License-Identifier: MIT
/*
 * `lowkey bench branch`: static key off against the NOP, in machine code. The two loops run the
 * same instructions when their bodies are the same bytes and the key's site is the same NOP; the
 * bench checks that at run time, reading its own code and its site table as the library does.
 */
#include <string.h>

#include <lowkey/lowkey.h>

#include "branch_bench.h"
#include "internal/key.h"

/* The entry of __lk_key_sites for key's site in this executable, or NULL. */
static const uint8_t *key_site_code(const struct lk_key *key)
{
	const struct lk__key_site *e = (const struct lk__key_site *)__start___lk_key_sites;
	const struct lk__key_site *end = (const struct lk__key_site *)__stop___lk_key_sites;

	for (; e && e < end; e++) {
		int64_t offset = e->ref & ~(int64_t)LK__SITE_FLAGS;

		if (*(struct lk_key *const *)((const char *)&e->ref + offset) == key)
			return (const uint8_t *)&e->code + e->code;
	}
	return NULL;
}

/*
 * The loop of a loop function: its first backward conditional branch in the first 256 bytes,
 * which goes to the loop head; the body is from the head to just past that branch. False when the
 * code has another shape. (GCC puts the ret right after the loop; Clang may put the key's
 * out-of-line block between them.)
 */
#define LOOP_SEARCH_BYTES 256

/* A backward branch at fn + at, len bytes long, to fn + target: the loop, if target is in fn. */
struct loop {
	long head;   /* where the backward branch goes */
	long branch; /* the backward branch */
	long end;    /* just past it */
};

static bool loop_found(long at, long len, long displacement, struct loop *l)
{
	if (displacement >= 0 || at + displacement < 0)
		return false;
	l->head = at + displacement;
	l->branch = at;
	l->end = at + len;
	return true;
}

/* Whether the loop bodies differ only by what the architecture puts before a site to align it. */
static bool same_but_alignment(const uint8_t *nop, const uint8_t *key, const struct loop *n,
			       const struct loop *k, long site_offset);

#if defined(__x86_64__)
/* jne rel8 or jne rel32, the displacement from the next instruction. */
static bool find_loop(const uint8_t *fn, struct loop *l)
{
	for (long i = 0; i + 6 <= LOOP_SEARCH_BYTES; i++) {
		if (fn[i] == 0x75 && loop_found(i, 2, 2 + (int8_t)fn[i + 1], l))
			return true;
		if (fn[i] == 0x0f && fn[i + 1] == 0x85) {
			int32_t d;

			memcpy(&d, fn + i + 2, sizeof(d));
			if (loop_found(i, 6, 6 + (long)d, l))
				return true;
		}
	}
	return false;
}
#elif defined(__aarch64__)
static long sign_extend(uint32_t v, unsigned int bits)
{
	return (long)((int64_t)((uint64_t)v << (64 - bits)) >> (64 - bits));
}

/* b.cond, cbz/cbnz (imm19) or tbz/tbnz (imm14), in words from the branch itself. */
static bool find_loop(const uint8_t *fn, struct loop *l)
{
	for (long i = 0; i + 4 <= LOOP_SEARCH_BYTES; i += 4) {
		uint32_t w;
		long words;

		memcpy(&w, fn + i, sizeof(w));
		if ((w & 0xff000010u) == 0x54000000u || (w & 0x7e000000u) == 0x34000000u)
			words = sign_extend((w >> 5) & 0x7ffffu, 19);
		else if ((w & 0x7e000000u) == 0x36000000u)
			words = sign_extend((w >> 5) & 0x3fffu, 14);
		else
			continue;
		if (loop_found(i, 4, words * 4, l))
			return true;
	}
	return false;
}
#elif defined(__riscv)
static long sign_extend(uint32_t v, unsigned int bits)
{
	return (long)((int64_t)((uint64_t)v << (64 - bits)) >> (64 - bits));
}

/* B-type branches (4 bytes) and c.beqz/c.bnez (2 bytes), walking instruction by instruction. */
static bool find_loop(const uint8_t *fn, struct loop *l)
{
	for (long i = 0; i + 4 <= LOOP_SEARCH_BYTES;) {
		uint16_t h;
		uint32_t w;

		memcpy(&h, fn + i, sizeof(h));
		if ((h & 3) != 3) {
			if ((h & 0xc003u) == 0xc001u) { /* c.beqz, c.bnez */
				uint32_t imm = ((h >> 12) & 1u) << 8 | ((h >> 10) & 3u) << 3 |
					       ((h >> 5) & 3u) << 6 | ((h >> 3) & 3u) << 1 |
					       ((h >> 2) & 1u) << 5;

				if (loop_found(i, 2, sign_extend(imm, 9), l))
					return true;
			}
			i += 2;
			continue;
		}
		memcpy(&w, fn + i, sizeof(w));
		if ((w & 0x7fu) == 0x63u) {
			uint32_t imm = (w >> 31) << 12 | ((w >> 7) & 1u) << 11 |
				       ((w >> 25) & 0x3fu) << 5 | ((w >> 8) & 0xfu) << 1;

			if (loop_found(i, 4, sign_extend(imm, 13), l))
				return true;
		}
		i += 4;
	}
	return false;
}
#endif

#if defined(__riscv)
/*
 * A riscv64 site is aligned to 4 bytes (.balign 4, as the kernel's riscv jump labels are); with the
 * C extension the code before it may end 2 bytes off, and the assembler pads with a c.nop that
 * runs every pass. The bodies then match around it, all but the backward branch, whose
 * displacement is 2 bytes longer.
 */
#define ALIGN_PAD "\x01\x00" /* c.nop */
#define ALIGN_PAD_LEN 2

static bool same_but_alignment(const uint8_t *nop, const uint8_t *key, const struct loop *n,
			       const struct loop *k, long site_offset)
{
	long pad = site_offset - ALIGN_PAD_LEN;

	return k->head == n->head && k->branch == n->branch + ALIGN_PAD_LEN &&
	       k->end - k->branch == n->end - n->branch && pad >= n->head &&
	       site_offset < k->branch && memcmp(key + pad, ALIGN_PAD, ALIGN_PAD_LEN) == 0 &&
	       memcmp(nop + n->head, key + n->head, (size_t)(pad - n->head)) == 0 &&
	       memcmp(nop + pad, key + site_offset, (size_t)(n->branch - pad)) == 0;
}
#else
static bool same_but_alignment(const uint8_t *nop, const uint8_t *key, const struct loop *n,
			       const struct loop *k, long site_offset)
{
	(void)nop, (void)key, (void)n, (void)k, (void)site_offset;
	return false;
}
#endif

/*
 * Compare the machine code of loop_nop and loop_key_off where it runs every iteration: the loop
 * body, from the head the backward branch goes to through that branch. The key's site, found in
 * the site table as the library finds it, must be in that body and be the same 5-byte NOP. (The
 * bytes before the head run once per call; they differ where a jump displacement steps over the
 * key's out-of-line block.)
 */
void branch_compare_code(struct key_vs_nop *k, const uint8_t *nop, const uint8_t *key,
			 const struct lk_key *site_key)
{
	const uint8_t *site = key_site_code(site_key);
	struct loop n, kl;

	k->site_offset = -1;
	k->head = -1;
	if (!find_loop(nop, &n)) {
		k->why =
			"loop_nop does not end in a backward branch (this compiler laid it out otherwise)";
		return;
	}
	k->head = n.head;
	k->bytes = (size_t)(n.end - n.head);
	k->prologue_diff = 0;
	for (long i = 0; i < n.head; i++)
		k->prologue_diff += nop[i] != key[i];
	k->head_line[0] = (unsigned int)((uintptr_t)(nop + n.head) & 63);
	if (!site) {
		k->why =
			"the key's site is not in the site table (a portable build: load + branch)";
		return;
	}
	k->site_offset = (long)(site - key);
	memcpy(k->site, site, sizeof(k->site));
	if (!find_loop(key, &kl))
		k->why = "loop_key_off does not end in a backward branch";
	else if (memcmp(site, SITE_NOP, SITE_LEN) != 0)
		k->why = "the key's site is not " SITE_NOP_NAME;
	else if (same_but_alignment(nop, key, &n, &kl, k->site_offset))
		k->aligned = true;
	else if (kl.head != n.head || kl.end != n.end)
		k->why = "the two loops are at different offsets from their entries";
	else if (k->site_offset < n.head || k->site_offset + (long)SITE_LEN > n.end)
		k->why = "the key's site is not in loop_key_off's loop body";
	else if (memcmp(nop + n.head, key + n.head, k->bytes) != 0)
		k->why = "the two loop bodies' bytes differ";
	else
		k->identical = true;
	k->head_line[1] = (unsigned int)((uintptr_t)(key + kl.head) & 63);
}
