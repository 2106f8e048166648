// SPDX-License-Identifier: MIT
/*
 * x86-64 sites: a 5-byte NOP (0f 1f 44 00 00) or a `jmp rel32` (e9 + displacement), rewritten with
 * the kernel's protocol for code other cores may be executing (text_poke_bp):
 *
 *   1. write int3 (cc) over the first byte of every site, then make every core serialize;
 *   2. write the last four bytes of the new instruction, serialize;
 *   3. write the new first byte, serialize.
 *
 * Between 1 and 3 a thread that reaches a site executes the int3 and traps; the SIGTRAP handler
 * sends it where the new instruction would, so every thread goes one way or the other and no core
 * ever decodes a mix of old and new bytes. A thread that blocks SIGTRAP would be killed by that
 * trap instead (the kernel forces it with SIG_DFL), and a thread may start blocking it at any
 * moment: so patch.c runs this only where no other thread can meet a site (a process with one
 * thread) and swaps rewritten copies of the pages in everywhere else (remap.c).
 */
#include <string.h>

#include "core/sync.h"
#include "key/key_internal.h"

#define INSN_INT3 0xcc
#define INSN_JMP32 0xe9

static const uint8_t nop5[LK__SITE_LEN] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };

static int32_t jmp_displacement(const uint8_t *code, const uint8_t *target)
{
	return (int32_t)(target - (code + LK__SITE_LEN));
}

void lk__arch_site_insn(uint8_t insn[LK__SITE_LEN], const uint8_t *code, const uint8_t *target,
			bool jump)
{
	if (jump) {
		int32_t rel = jmp_displacement(code, target);

		insn[0] = INSN_JMP32;
		memcpy(insn + 1, &rel, sizeof(rel));
	} else {
		memcpy(insn, nop5, LK__SITE_LEN);
	}
}

bool lk__arch_site_decode(const uint8_t *code, const uint8_t *target, bool *jumping)
{
	int32_t rel;

	if (memcmp(code, nop5, LK__SITE_LEN) == 0) {
		*jumping = false;
		return true;
	}
	memcpy(&rel, code + 1, sizeof(rel));
	if (code[0] == INSN_JMP32 && rel == jmp_displacement(code, target)) {
		*jumping = true;
		return true;
	}
	return false;
}

uintptr_t lk__arch_resume(const uint8_t *code, const uint8_t insn[LK__SITE_LEN])
{
	int32_t rel;

	if (insn[0] != INSN_JMP32)
		return (uintptr_t)code + LK__SITE_LEN;
	memcpy(&rel, insn + 1, sizeof(rel));
	return (uintptr_t)code + LK__SITE_LEN + rel;
}

/*
 * One byte store the compiler cannot split, merge or drop (a single byte store is atomic on x86;
 * the tail is only written while the int3 guards it). It is an asm so that sanitizers do not
 * instrument it: their shadow of code pages is read-only, and code is not data they could track.
 */
static void write_byte(uint8_t *p, uint8_t v)
{
	asm volatile("movb %1, %0" : "=m"(*p) : "q"(v) : "memory");
}

void lk__arch_copy_code(void *dst, const void *src, size_t len)
{
	asm volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(len) : : "memory");
}

enum head { HEAD_INT3, HEAD_NEW, HEAD_OLD };

static void write_heads(const struct lk__patch *p, size_t n, enum head head)
{
	for (size_t i = 0; i < n; i++) {
		uint8_t b = head == HEAD_NEW ? p[i].insn[0] :
			    head == HEAD_OLD ? p[i].old[0] :
					       INSN_INT3;

		write_byte(p[i].addr, b);
	}
}

static void write_tails(const struct lk__patch *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		for (int b = 1; b < LK__SITE_LEN; b++)
			write_byte(p[i].addr + b, p[i].insn[b]);
}

/*
 * Each step only moves the sites towards their new instructions. A sync that fails (membarrier
 * denied since the process registered for it, by a seccomp filter installed later) leaves cores
 * that may still run code fetched before it. After the first step only first bytes have changed,
 * and putting the old ones back makes every old instruction whole again (a core that still sees
 * the int3 traps and is sent on); after a later step only remapping can undo the change.
 */
enum lk__rewrite lk__arch_rewrite(const struct lk__patch *p, size_t n, int *err)
{
	write_heads(p, n, HEAD_INT3);
	*err = lk__sync_cores();
	if (*err) {
		write_heads(p, n, HEAD_OLD);
		return LK__REWRITE_UNDONE;
	}
	write_tails(p, n);
	*err = lk__sync_cores();
	if (*err)
		return LK__REWRITE_TORN;
	write_heads(p, n, HEAD_NEW);
	*err = lk__sync_cores();
	return *err ? LK__REWRITE_TORN : LK__REWRITE_DONE;
}

/*
 * A thread ran into an int3. If it is one of ours the saved RIP is just past it: continue where
 * the new instruction goes. A trap delivered after its rewrite finished (the thread was delayed
 * between the trap and its handler) finds the complete instruction back in place: run it again.
 */
bool lk__arch_trap(siginfo_t *si, ucontext_t *uc)
{
	uintptr_t site, resume;
	bool ours = false;

	if (si->si_code != SI_KERNEL)
		return false;
	site = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP] - 1;

	lk__patch_trap_enter();
	if (lk__patch_lookup(site, &resume)) {
		uc->uc_mcontext.gregs[REG_RIP] = (greg_t)resume;
		ours = true;
	} else if (*(volatile const uint8_t *)site != INSN_INT3 && lk__patch_known(site)) {
		uc->uc_mcontext.gregs[REG_RIP] = (greg_t)site;
		ours = true;
	}
	lk__patch_trap_exit();
	return ours;
}
