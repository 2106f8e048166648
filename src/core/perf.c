// SPDX-License-Identifier: MIT
/*
 * perf_event_open() and the explanations of its failures.
 */
#include <limits.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/error.h"
#include "core/perf.h"
#include "internal/proc.h"

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif

int lk__perf_paranoid(void)
{
	long level;

	if (lk__read_long_file("/proc/sys/kernel/perf_event_paranoid", &level) != 0 ||
	    level < INT_MIN + 1 || level > INT_MAX)
		return INT_MIN;
	return (int)level;
}

int lk__seccomp_filtered(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	int mode = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Seccomp: %d", &mode) == 1)
			break;
	fclose(f);
	return mode == 2;
}

int lk__has_perfmon(void)
{
	return lk__has_cap(CAP_PERFMON) || lk__has_cap(CAP_SYS_ADMIN);
}

int lk__perf_paranoid_needed(const struct perf_event_attr *attr, pid_t pid, int cpu)
{
	if (attr->type == PERF_TYPE_TRACEPOINT && (attr->sample_type & PERF_SAMPLE_RAW))
		return -1;
	if (pid == -1 && cpu >= 0)
		return 0;
	if (!attr->exclude_kernel)
		return 1;
	return 2;
}

static const char *perf_type_name(unsigned int type)
{
	switch (type) {
	case PERF_TYPE_HARDWARE:
		return "hardware";
	case PERF_TYPE_SOFTWARE:
		return "software";
	case PERF_TYPE_TRACEPOINT:
		return "tracepoint";
	case PERF_TYPE_HW_CACHE:
		return "hardware cache";
	case PERF_TYPE_RAW:
		return "raw hardware";
	case PERF_TYPE_BREAKPOINT:
		return "breakpoint";
	default:
		return "PMU";
	}
}

static int explain_denied(int err, const struct perf_event_attr *attr, pid_t pid, int cpu,
			  const char *what)
{
	int level = lk__perf_paranoid();
	int needed = lk__perf_paranoid_needed(attr, pid, cpu);

	if (level != INT_MIN && level > needed && !lk__has_perfmon()) {
		lk__fail(
			err,
			"perf_event_open(%s) denied: kernel.perf_event_paranoid is %d and this event "
			"needs %d or lower. Run `sysctl -w kernel.perf_event_paranoid=%d` as root, or give "
			"the program CAP_PERFMON (`setcap cap_perfmon+ep PROGRAM`, Linux >= 5.8).",
			what, level, needed, needed);
		if (level >= 3)
			lk__fail_append(" Levels 3 and 4 are distribution patches that deny every "
					"unprivileged use.");
		return err;
	}
	if (lk__seccomp_filtered())
		return lk__fail(
			err,
			"perf_event_open(%s) denied by this process's seccomp filter (kernel.perf_event_paranoid "
			"is %d, which would allow it). In a container allow the perf_event_open system call "
			"(Docker: --security-opt seccomp=PROFILE with it allowed, or --cap-add PERFMON).",
			what, level);
	return lk__fail(
		err,
		"perf_event_open(%s) denied (%s) although kernel.perf_event_paranoid is %d: a Linux "
		"security module (SELinux, AppArmor) or a lockdown policy refuses it.",
		what, strerror(-err), level);
}

static int explain(int err, const struct perf_event_attr *attr, pid_t pid, int cpu,
		   const char *what)
{
	struct rlimit rl;

	switch (-err) {
	case EACCES:
	case EPERM:
		return explain_denied(err, attr, pid, cpu, what);
	case ENOSYS:
		if (lk__perf_paranoid() == INT_MIN)
			return lk__fail(err,
					"perf_event_open(%s): this kernel has no perf events "
					"(CONFIG_PERF_EVENTS is off).",
					what);
		if (!lk__seccomp_filtered())
			return lk__fail(
				err,
				"perf_event_open(%s) answered ENOSYS although the kernel has "
				"perf events and this process has no seccomp filter: an emulator runs "
				"this program without the system call (qemu-user has none), or a "
				"sandbox outside the process refuses it.",
				what);
		return lk__fail(
			err,
			"perf_event_open(%s) is blocked by a seccomp filter that answers ENOSYS "
			"(containers often do): allow the perf_event_open system call.",
			what);
	case ENOENT:
	case EOPNOTSUPP:
	case ENODEV:
		return lk__fail(
			err,
			"perf_event_open(%s): this %s event is not supported on this machine "
			"(%s). Virtual machines often expose no hardware PMU; software events still work.",
			what, perf_type_name(attr->type), strerror(-err));
	case EMFILE:
		getrlimit(RLIMIT_NOFILE, &rl);
		return lk__fail(err,
				"perf_event_open(%s): out of file descriptors (the limit is %llu; "
				"raise it with `ulimit -n`).",
				what, (unsigned long long)rl.rlim_cur);
	case ESRCH:
		return lk__fail(err, "perf_event_open(%s): no process or thread %d.", what,
				(int)pid);
	case EBUSY:
		return lk__fail(
			err,
			"perf_event_open(%s): the hardware is in use exclusively by another "
			"event or tool.",
			what);
	case ENOSPC:
		return lk__fail(err,
				"perf_event_open(%s): no free hardware slot (all debug or counter "
				"registers are taken).",
				what);
	default:
		return lk__fail(err, "perf_event_open(%s) failed: %s.", what, strerror(-err));
	}
}

int lk__perf_open(struct perf_event_attr *attr, pid_t pid, int cpu, int group_fd,
		  unsigned long flags, const char *what)
{
	long fd;

	attr->size = sizeof(*attr);
	fd = syscall(SYS_perf_event_open, attr, pid, cpu, group_fd, flags | PERF_FLAG_FD_CLOEXEC);
	if (fd >= 0)
		return (int)fd;
	return explain(-errno, attr, pid, cpu, what ? what : "event");
}

int lk__perf_add_count(int fd, uint64_t *sum)
{
	uint64_t n = 0;

	if (read(fd, &n, sizeof(n)) < 0)
		return lk__fail(-errno, "reading a perf event's count failed: %s", strerror(errno));
	*sum += n;
	return 0;
}
