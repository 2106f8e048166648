/* SPDX-License-Identifier: MIT */
/* Internal: perf_event_open() with errors that say what to change. */
#ifndef LK_CORE_PERF_H
#define LK_CORE_PERF_H

#include <linux/perf_event.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * lk__perf_open - perf_event_open(attr, pid, cpu, group_fd, flags | PERF_FLAG_FD_CLOEXEC).
 *
 * Returns the fd, or a negative errno with lk_last_error() explaining the failure for this
 * request: which kernel.perf_event_paranoid level or capability it needs, whether a seccomp filter
 * is in the way, whether the event exists on this machine, the fd limit. @what names the event in
 * the message ("task-clock", "watchpoint on 0x...").
 */
int lk__perf_open(struct perf_event_attr *attr, pid_t pid, int cpu, int group_fd,
		  unsigned long flags, const char *what);

/*
 * lk__perf_add_count - add the count of the event fd (read_format 0; an inherited event's count
 * includes its children's, live or exited) to *sum. An event in error state reads as nothing and
 * adds 0. Returns 0, or -errno with lk_last_error() set.
 */
int lk__perf_add_count(int fd, uint64_t *sum);

/* kernel.perf_event_paranoid, or INT_MIN when perf is not in this kernel. */
int lk__perf_paranoid(void);

/* The paranoid level at or below which an unprivileged caller may open this event. */
int lk__perf_paranoid_needed(const struct perf_event_attr *attr, pid_t pid, int cpu);

/* Whether this process runs under a seccomp filter (/proc/self/status "Seccomp: 2"). */
int lk__seccomp_filtered(void);

/* Whether the caller has CAP_PERFMON (or CAP_SYS_ADMIN, which implies it). */
int lk__has_perfmon(void);

#endif
