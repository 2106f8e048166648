// SPDX-License-Identifier: MIT
/*
 * What core's perf_event_open() explanations cannot know: whether the machine has a CPU PMU at
 * all, what an EINVAL means for an event, and that counting another user's process is a ptrace
 * permission, not a perf one.
 */
#include <dirent.h>
#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/error.h"
#include "counter/counter_internal.h"
#include "internal/proc.h"

#define PMU_DIR "/sys/bus/event_source/devices"

bool lk__have_cpu_pmu(void)
{
	DIR *d = opendir(PMU_DIR);
	struct dirent *e;
	bool found = false;

	if (!d)
		return false;
	/* The CPU's PMU is the one that takes PERF_TYPE_RAW: "cpu" on x86 (or "cpu_core" and
	 * "cpu_atom"), armv8_pmuv3_0 and friends on arm64. */
	while (!found && (e = readdir(d))) {
		char path[512];
		FILE *f;
		unsigned type;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), PMU_DIR "/%s/type", e->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		found = fscanf(f, "%u", &type) == 1 && type == PERF_TYPE_RAW;
		fclose(f);
	}
	closedir(d);
	return found;
}

bool lk__unsupported_error(int err)
{
	return err == -EOPNOTSUPP || err == -EINVAL;
}

static unsigned status_uid(pid_t pid)
{
	struct lk__proc_ids ids;

	return lk__proc_ids(pid, &ids) == 0 ? (unsigned)ids.ruid : (unsigned)-1;
}

/* Counting another process needs ptrace-read access to it, whatever perf_event_paranoid says. */
static bool explain_ptrace(int err, const struct lk__event *ev, pid_t pid)
{
	unsigned target = status_uid(pid);

	if (pid <= 0 || pid == getpid() || lk__has_cap(CAP_SYS_PTRACE))
		return false;
	if (target == (unsigned)-1 || target == (unsigned)geteuid())
		return false;
	lk__fail(
		err,
		"perf_event_open(%s) on process %d denied: it belongs to uid %u and this "
		"program runs as uid %u. Counting another user's process needs CAP_SYS_PTRACE (run as "
		"root, or `setcap cap_sys_ptrace,cap_perfmon+ep PROGRAM`).",
		ev->spec.text, (int)pid, target, (unsigned)geteuid());
	return true;
}

static void explain_no_pmu(const struct lk__event *ev)
{
	if (!ev->hardware)
		return;
	if (!lk__have_cpu_pmu()) {
		lk__fail_append(
			" Here the kernel registered no CPU PMU at all (nothing in " PMU_DIR
			" takes hardware events): this is a virtual machine without a virtual PMU, "
			"or the PMU is disabled. With QEMU/KVM use `-cpu host,pmu=on`, with libvirt "
			"<pmu state='on'/>; in a cloud, an instance type that exposes a PMU. Software "
			"events (task-clock, page-faults, context-switches) work without one.");
	} else {
		lk__fail_append(
			" This CPU's PMU does not offer it (or the hypervisor hides it): `perf "
			"list` shows the events it has.");
	}
}

int lk__explain_open_failure(int err, const struct lk__event *ev, pid_t pid)
{
	switch (-err) {
	case ENOENT:
	case ENODEV:
	case EOPNOTSUPP:
		explain_no_pmu(ev);
		return -EOPNOTSUPP;
	case EINVAL:
		lk__fail_append(
			" The kernel refused the event's settings (%s): the PMU may not take the "
			"modifiers written (many kernel PMUs count all levels only: drop :u/:k), "
			"the config may be invalid for it, or a group may not fit on it at once.",
			ev->canonical ? ev->canonical : ev->spec.text);
		return err;
	case EACCES:
	case EPERM:
		explain_ptrace(err, ev, pid);
		return err;
	default:
		return err;
	}
}
