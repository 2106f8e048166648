/* SPDX-License-Identifier: MIT */
/* What every command that takes --pid says of a process it cannot have (builtin.h). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "builtin.h"
#include "internal/proc.h"

/* The effective uid of pid from its status, which anyone may read; false when there is none. */
static bool process_euid(pid_t pid, uid_t *euid)
{
	struct lk__proc_ids ids;

	if (lk__proc_ids(pid, &ids) != 0)
		return false;
	*euid = ids.euid;
	return true;
}

/*
 * Whether this program may look into pid: its open files are behind the kernel's ptrace access
 * check (same user and dumpable, or CAP_SYS_PTRACE), as its memory, maps and counters are.
 */
static bool may_look_into(pid_t pid)
{
	char file[64];
	DIR *d;

	snprintf(file, sizeof(file), "/proc/%d/fd", (int)pid);
	d = opendir(file);
	if (d) {
		closedir(d);
		return true;
	}
	return errno != EACCES && errno != EPERM;
}

int cli_pid_denied(const char *cmd, const char *why)
{
	cli_error(cmd, NULL, "%s: run lowkey as that user or as root", why);
	return CLI_EXIT_FAIL;
}

int cli_check_pid(const char *cmd, pid_t pid, bool look_into)
{
	char why[128];
	uid_t owner;

	if (pid <= 0 || !process_euid(pid, &owner)) {
		cli_error(cmd, NULL, "no process %d: check the pid (ps, pidof)", (int)pid);
		return CLI_EXIT_FAIL;
	}
	if (look_into && owner != geteuid() && !may_look_into(pid)) {
		snprintf(why, sizeof(why), "process %d belongs to uid %u", (int)pid,
			 (unsigned int)owner);
		return cli_pid_denied(cmd, why);
	}
	return 0;
}
