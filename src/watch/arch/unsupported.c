// SPDX-License-Identifier: MIT
/*
 * Architectures whose debug registers lowkey does not describe yet (riscv64).
 * Every watchpoint is refused with -EOPNOTSUPP before any system call.
 */
#include <errno.h>

#include "core/error.h"
#include "watch/watch_internal.h"

unsigned int lk__watch_arch_slots(void)
{
	return 0;
}

static int unsupported(void)
{
	return lk__fail(-EOPNOTSUPP, "lowkey has no watchpoint support for this architecture yet "
				     "(x86-64; arm64 without signals)");
}

int lk__watch_arch_signals(void)
{
	return unsupported();
}

int lk__watch_arch_exec(uintptr_t addr, size_t len, uint64_t *bp_len, uint64_t *insn_len)
{
	(void)addr, (void)len, (void)bp_len, (void)insn_len;
	return unsupported();
}

int lk__watch_arch_data(uintptr_t addr, size_t len)
{
	(void)addr, (void)len;
	return unsupported();
}

int lk__watch_arch_user_range(uintptr_t addr, uint64_t len)
{
	(void)addr, (void)len;
	return unsupported();
}

uintptr_t lk__watch_arch_ip(const ucontext_t *uc)
{
	(void)uc;
	return 0;
}

bool lk__watch_arch_unattributed_trap(const siginfo_t *si, const ucontext_t *uc)
{
	(void)si, (void)uc;
	return false;
}
