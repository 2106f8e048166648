// SPDX-License-Identifier: MIT
/*
 * What a watchpoint may cover, checked before any system call: the lengths, alignments and
 * instruction sizes are the architecture's (arch/), the order of the checks and the breakpoint
 * they fill are the same everywhere.
 */
#include <linux/hw_breakpoint.h>

#include <lowkey/watch.h>

#include "watch/watch_internal.h"

int lk__watch_check(uintptr_t addr, size_t len, unsigned int access, struct lk__watch_bp *bp)
{
	uint64_t bp_len = len, span = len;
	int err;

	if (access == LK_WATCH_EXEC)
		err = lk__watch_arch_exec(addr, len, &bp_len, &span);
	else
		err = lk__watch_arch_data(addr, len);
	if (!err)
		err = lk__watch_arch_user_range(addr, span);
	if (err)
		return err;
	bp->type = access == LK_WATCH_EXEC  ? HW_BREAKPOINT_X :
		   access == LK_WATCH_WRITE ? HW_BREAKPOINT_W :
					      HW_BREAKPOINT_RW;
	bp->addr = addr;
	bp->len = bp_len;
	return 0;
}
