/* SPDX-License-Identifier: MIT */
/*
 * Internal: the clock module's parts that the benches use beyond <lowkey/clock.h>.
 */
#ifndef LK_INTERNAL_CLOCK_H
#define LK_INTERNAL_CLOCK_H

/*
 * Open the calling thread's task clock (perf's PERF_COUNT_SW_TASK_CLOCK), user time only, which
 * perf_event_paranoid 2 allows: the descriptor (close-on-exec), or -1 with errno as
 * perf_event_open(2) sets it (EACCES, EPERM where denied, ENOSYS under a seccomp filter). One
 * system call; async-signal-safe.
 */
int lk__task_clock_open(void);

#endif
