// SPDX-License-Identifier: MIT
/*
 * Every command that takes --pid says, in the same words, that a process is not there, or that
 * it is another user's and lowkey has no permission over it: never that the process should have
 * been started otherwise (LOWKEY_CONTROL=1).
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "run.h"

static struct lkt_run r;

/* Each command with --pid, as a format for the pid; those this build has (list: libelf; watch: libdw). */
static const char *const commands[] = {
	"enable --pid %d 'x:*'",
	"disable --pid %d 'x:*'",
	"list --pid %d",
	"snapshot --pid %d",
	"stat -p %d --duration 1",
	"trace --pid %d --duration 1",
	"watch --pid %d --addr 0x1000 --duration 1",
};

static bool built(const char *lowkey, const char *command)
{
	char name[32];

	sscanf(command, "%31s", name);
	return lkt_sh(&r, "%s %s --help", lowkey, name) == 0;
}

/* Run lowkey (through runner, "" for none) with command for pid; assert it says want and no more. */
static void says(const char *runner, const char *lowkey, const char *command, pid_t pid,
		 const char *want)
{
	char line[256], name[64];

	snprintf(line, sizeof(line), command, (int)pid);
	sscanf(command, "%31s", name + snprintf(name, sizeof(name), "lowkey "));
	strcat(name, ":");
	lkt_sh(&r, "%s %s %s", runner, lowkey, line);
	if (r.status != 1 || !strstr(r.out, want) || strstr(r.out, "LOWKEY_CONTROL") ||
	    !strstr(r.out, name))
		print_error("lowkey %s: exit %d, said:\n%s(wanted: %s)\n", line, r.status, r.out,
			    want);
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.out, want));
	assert_non_null(strstr(r.out, name));
	assert_null(strstr(r.out, "LOWKEY_CONTROL"));
}

/* The pid of a child that has exited and been reaped: no process has it (a new one could take it). */
static pid_t gone_pid(void)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0)
		_exit(0);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	return pid;
}

static void no_such_process(void **state)
{
	char want[128];

	(void)state;
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		pid_t pid = gone_pid();

		if (!built(LOWKEY, commands[i]))
			continue;
		snprintf(want, sizeof(want), "no process %d: check the pid (ps, pidof)", (int)pid);
		says("", LOWKEY, commands[i], pid, want);
	}
}

/* A process of root's, and lowkey run as nobody: as root, a sleeping child; else pid 1 if root's. */
static pid_t roots_process(void)
{
	pid_t pid;

	if (geteuid() != 0) {
		lkt_sh(&r, "stat -c %%u /proc/1");
		return r.status == 0 && atoi(r.out) == 0 ? 1 : -1;
	}
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		execlp("sleep", "sleep", "300", (char *)NULL);
		_exit(127);
	}
	return pid;
}

static void another_users_process(void **state)
{
	char dir[] = "/tmp/lowkey-pid-errors-XXXXXX", lowkey[4096], want[160];
	const char *runner = "";
	pid_t pid = roots_process();

	(void)state;
	if (pid < 0)
		skip(); /* pid 1 is this user's (a container): no other user's process at hand */
	strcpy(lowkey, LOWKEY);
	if (geteuid() == 0) {
		/* as nobody, from a directory nobody can read: the build tree may be private */
		if (lkt_sh(&r, "command -v setpriv") != 0 || !mkdtemp(dir) ||
		    lkt_sh(&r, "cp '%s' '%s/' && chmod -R a+rX '%s'", LOWKEY, dir, dir) != 0) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			skip();
		}
		snprintf(lowkey, sizeof(lowkey), "%s/lowkey", dir);
		runner = "setpriv --reuid=65534 --regid=65534 --clear-groups";
	}
	snprintf(want, sizeof(want),
		 "process %d belongs to uid 0: run lowkey as that user or as root", (int)pid);
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (built(LOWKEY, commands[i]))
			says(runner, lowkey, commands[i], pid, want);
	if (pid != 1) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		lkt_sh(&r, "rm -rf '%s'", dir);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(no_such_process),
		cmocka_unit_test(another_users_process),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
