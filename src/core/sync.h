/* SPDX-License-Identifier: MIT */
/* Internal: making every thread of the process see freshly written code. */
#ifndef LK_CORE_SYNC_H
#define LK_CORE_SYNC_H

/*
 * lk__sync_cores - return once every thread of this process has executed a core-serializing
 * instruction, so none can still run instructions fetched before the call.
 *
 * Uses membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE), registering for it the first time
 * (and again in a forked child). Without it a single-threaded process needs nothing more and gets
 * 0; a multi-threaded one gets -ENOSYS with a message -- also where the command worked before and
 * is refused now (a seccomp filter installed since): a caller must not assume that a sync that
 * succeeded once will again. Not async-signal-safe.
 */
int lk__sync_cores(void);

/*
 * lk__sync_cores_prepare - register for the membarrier command if needed and say whether
 * lk__sync_cores() will work: 0, or -ENOSYS with a message. Does not synchronize.
 */
int lk__sync_cores_prepare(void);

#endif
