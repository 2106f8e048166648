/* SPDX-License-Identifier: MIT */
/* What /proc says of a task, for the library's counters and the CLI. */
#ifndef LK_CORE_PROC_H
#define LK_CORE_PROC_H

#include <stdbool.h>
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

/* A process's owners, as the Uid: and Gid: lines of /proc/PID/status give them. */
struct lk__proc_ids {
	uid_t ruid, euid;
	gid_t rgid, egid;
};

/*
 * lk__proc_ids - the real and effective uid and gid of process pid (/proc/PID/status, which anyone
 * may read), as this process's user namespace sees them. Returns 0, or -errno (-ENOENT: no such
 * process; -ENODATA: no Uid: and Gid: lines) with ids unchanged. One open and a few reads.
 */
int lk__proc_ids(pid_t pid, struct lk__proc_ids *ids);

/*
 * lk__read_long_file - the integer a file begins with (a sysctl: "/proc/sys/kernel/..."), into
 * *value. Returns 0, or -errno (-ENOENT: no such file, as where a module such as Yama is not built
 * in; -EINVAL: it does not begin with an integer) with *value unchanged.
 */
int lk__read_long_file(const char *path, long *value);

/*
 * lk__has_cap - whether the calling thread has capability cap (CAP_*) in its effective set. One
 * capget() system call; false where it fails.
 */
bool lk__has_cap(int cap);

#endif
