// SPDX-License-Identifier: MIT
/*
 * arm64 debug registers: 2 to 16 watchpoint registers (WVR/WCR pairs) and, separately, 2 to 16
 * breakpoint registers; the CPU says how many (ID_AA64DFR0_EL1) and slots.c asks the kernel.
 * A watchpoint register holds a doubleword-aligned address and a byte-address-select mask: any
 * contiguous 1 to 8 bytes inside one aligned doubleword (Arm ARM D2.10; the kernel's perf
 * breakpoint layer takes bp_len 1..8 and shifts the mask by the address's low three bits). The
 * MASK field's larger ranges are not reachable through perf. An instruction breakpoint covers one
 * 4-byte instruction at a 4-byte-aligned address.
 *
 * Unlike x86, a watchpoint exception is taken before the access takes effect: the saved PC is the
 * accessing instruction, and a store has not reached memory yet. The kernel steps over it by
 * disabling the watchpoint and single-stepping the instruction when the perf event has the default
 * overflow handler. A sampler (perf records, no signal) therefore works as on x86, except that its
 * ip is the accessing instruction, not the one after it.
 *
 * A watchpoint that signals the thread (perf's sigtrap) does not: the SIGTRAP is delivered at the
 * return to user space, before the step, so the step lands on the handler's first instruction,
 * the watchpoint is re-armed there, and after sigreturn the same access traps again, for ever. The
 * arm64 maintainers describe this on LKML ("Test 73 Sig_trap fails on arm64", February 2022), and
 * perf's own signal tests are disabled on arm64 for it. So lk_watch_add() is refused here with
 * that reason; lk_watch_sampler_open() is supported.
 *
 * None of this could run here: QEMU's user mode has no perf_event_open(). The lengths and the
 * refusal are tested under qemu-aarch64; the sampler has not met an arm64 CPU yet.
 */
#include <errno.h>
#include <linux/hw_breakpoint.h>
#include <stdbool.h>

#include "core/error.h"
#include "watch/watch_internal.h"

/* The architecture guarantees at least two of each kind; slots.c asks the kernel for the count. */
#define ARM64_MIN_WATCHPOINTS 2
/* The largest user address space arm64 Linux gives a process (52-bit VA with LVA). */
#define ARM64_USER_SPACE_END (1ull << 52)
#define DOUBLEWORD 8u
#define INSN_BYTES 4u

unsigned int lk__watch_arch_slots(void)
{
	return ARM64_MIN_WATCHPOINTS;
}

int lk__watch_arch_signals(void)
{
	return lk__fail(
		-EOPNOTSUPP,
		"watchpoints that signal the thread are not supported on arm64: "
		"the kernel delivers the SIGTRAP before stepping over the access, which then "
		"traps again for ever (perf's own signal tests are disabled on arm64 for this). "
		"lk_watch_sampler_open() and `lowkey watch` work: they record accesses without "
		"a signal");
}

int lk__watch_arch_user_range(uintptr_t addr, uint64_t len)
{
	if (addr >= ARM64_USER_SPACE_END || len > ARM64_USER_SPACE_END - addr)
		return lk__fail(-EINVAL, "cannot watch %#lx..%#lx: not a user-space address",
				(unsigned long)addr, (unsigned long)(addr + len - 1));
	return 0;
}

int lk__watch_arch_data(uintptr_t addr, size_t len)
{
	size_t offset = addr & (DOUBLEWORD - 1);

	if (len < 1 || len > DOUBLEWORD)
		return lk__fail(-EINVAL,
				"cannot watch %zu bytes: arm64 watchpoints cover 1 to 8 bytes "
				"inside one 8-byte-aligned doubleword",
				len);
	if (offset + len > DOUBLEWORD)
		return lk__fail(
			-EINVAL,
			"cannot watch %zu bytes at %#lx: they cross an 8-byte boundary, "
			"and an arm64 watchpoint covers bytes of one aligned doubleword only: watch "
			"the two pieces (%zu and %zu bytes) with two watchpoints",
			len, (unsigned long)addr, DOUBLEWORD - offset, offset + len - DOUBLEWORD);
	return 0;
}

int lk__watch_arch_exec(uintptr_t addr, size_t len, uint64_t *bp_len, uint64_t *insn_len)
{
	if (len != 1)
		return lk__fail(-EINVAL,
				"an execute watchpoint takes len 1 (the address of the "
				"instruction), not %zu",
				len);
	if (addr & (INSN_BYTES - 1))
		return lk__fail(-EINVAL,
				"cannot watch execution at %#lx: arm64 instructions are "
				"4-byte aligned",
				(unsigned long)addr);
	*bp_len = HW_BREAKPOINT_LEN_4;
	*insn_len = INSN_BYTES;
	return 0;
}

uintptr_t lk__watch_arch_ip(const ucontext_t *uc)
{
	return (uintptr_t)uc->uc_mcontext.pc;
}

bool lk__watch_arch_unattributed_trap(const siginfo_t *si, const ucontext_t *uc)
{
	(void)si, (void)uc;
	return false;
}
