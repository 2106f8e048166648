/* SPDX-License-Identifier: MIT */
/* What /proc says of a task, for the library's counters and the CLI. */
#ifndef LK_CORE_PROC_H
#define LK_CORE_PROC_H

#include <stddef.h>
#include <sys/types.h>

/*
 * lk__proc_comm - the name of thread tid of process pid (/proc/PID/task/TID/comm), or of process
 * pid (/proc/PID/comm) when tid is 0, into out: as the kernel has it, without the line end the
 * kernel adds, cut to size - 1 bytes and terminated. The name is the task's to choose: it may hold
 * any byte but NUL, a newline included; escape it before printing it (lk__text_escape).
 * size must be at least 1. Returns the length written, or -errno (-ENOENT: no such task;
 * -ENODATA: nothing read) with out unchanged. One open and read, no allocation.
 */
int lk__proc_comm(pid_t pid, pid_t tid, char *out, size_t size);

#endif
