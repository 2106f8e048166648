// SPDX-License-Identifier: MIT
/*
 * Architectures whose debug registers lowkey does not describe yet (their slot counts and
 * accepted lengths differ: arm64 has 2-16 watchpoints of up to 8 bytes, or masked ranges).
 * Every watchpoint is refused with -EOPNOTSUPP before any system call.
 */
#include <errno.h>

#include "core/error.h"
#include "watch/watch_internal.h"

unsigned int lk__watch_arch_slots(void)
{
	return 0;
}

int lk__watch_arch_check(uintptr_t addr, size_t len, unsigned int access, struct lk__watch_bp *bp)
{
	(void)addr, (void)len, (void)access, (void)bp;
	return lk__fail(-EOPNOTSUPP, "lowkey has no watchpoint support for this architecture yet "
			"(x86-64 only)");
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
