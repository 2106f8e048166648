// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "internal/proc.h"

int lk__proc_comm(pid_t pid, pid_t tid, char *out, size_t size)
{
	char path[64], name[128]; /* a kernel thread's name may exceed TASK_COMM_LEN (kworkers) */
	ssize_t n;
	int fd, err;

	if (tid)
		snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid, (int)tid);
	else
		snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, name, sizeof(name)); /* the kernel writes the whole line at once */
	err = errno;
	close(fd);
	if (n <= 0)
		return n < 0 ? -err : -ENODATA;
	n -= name[n - 1] == '\n';
	if ((size_t)n >= size)
		n = (ssize_t)size - 1;
	memcpy(out, name, (size_t)n);
	out[n] = 0;
	return (int)n;
}
