// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
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

int lk__proc_ids(pid_t pid, struct lk__proc_ids *ids)
{
	char path[64], line[256];
	unsigned int real, effective;
	struct lk__proc_ids found;
	int seen = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (seen != 3 && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "Uid: %u %u", &real, &effective) == 2) {
			found.ruid = (uid_t)real;
			found.euid = (uid_t)effective;
			seen |= 1;
		} else if (sscanf(line, "Gid: %u %u", &real, &effective) == 2) {
			found.rgid = (gid_t)real;
			found.egid = (gid_t)effective;
			seen |= 2;
		}
	}
	fclose(f);
	if (seen != 3)
		return -ENODATA;
	*ids = found;
	return 0;
}

int lk__read_long_file(const char *path, long *value)
{
	FILE *f = fopen(path, "re");
	long v;
	int ok;

	if (!f)
		return -errno;
	ok = fscanf(f, "%ld", &v) == 1;
	fclose(f);
	if (!ok)
		return -EINVAL;
	*value = v;
	return 0;
}

bool lk__has_cap(int cap)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];

	if (cap < 0 || cap >= 64 || syscall(SYS_capget, &hdr, data) != 0)
		return false;
	return data[cap / 32].effective & (1u << (cap % 32));
}
