// SPDX-License-Identifier: MIT
/*
 * The flight recorder from the command line: `lowkey snapshot --pid` against a process recording
 * in overwrite mode (to a path, to its own next names, as JSON, repeatedly), `lowkey trace
 * --overwrite --snapshot-signal` (a snapshot on the signal, and one at the program's exit),
 * `lowkey trace --pid --overwrite` (started and left running); and what goes wrong: a process
 * whose trace streams, one with no trace, an unwritable path, another user (root only, with
 * setpriv; skipped otherwise).
 */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "cli/run.h"
#include "ctl_test.h"
#include "control/control_internal.h"

static char scratch[] = "/tmp/lkt-snapshot-XXXXXX";
static struct lkt_run r;
static char path[1024];
static pid_t spawned[16];
static int nspawned;

static int setup(void **state)
{
	(void)state;
	if (!mkdtemp(scratch))
		return -1;
	chmod(scratch, 0755);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	for (int i = 0; i < nspawned; i++)
		if (spawned[i] > 0 && kill(spawned[i], SIGKILL) == 0)
			waitpid(spawned[i], NULL, 0);
	return lkt_sh(&r, "rm -rf '%s'", scratch);
}

static const char *in_scratch(const char *name)
{
	snprintf(path, sizeof(path), "%s/%s", scratch, name);
	return path;
}

static void expect(int status, const char *text)
{
	lkt_expect(&r, status, text);
}

/* Run cmd (through sh, exec'ing the program) and return once it printed "ready PID": that pid. */
static pid_t spawn(const char *cmd)
{
	char line[64] = "";
	int p[2];
	pid_t pid;
	FILE *f;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	if (nspawned < 16)
		spawned[nspawned++] = pid;
	f = fdopen(p[0], "r");
	assert_non_null(fgets(line, sizeof(line), f));
	fclose(f);
	assert_int_equal(strncmp(line, "ready ", 6), 0);
	return atoi(line + 6);
}

/* `TARGET serve` recording app:* with env (more LOWKEY_* settings), its control socket open. */
static pid_t spawn_recorder(const char *env)
{
	char cmd[4096];

	snprintf(
		cmd, sizeof(cmd),
		"exec env LOWKEY_CONTROL=1 LOWKEY_TRACE='app:*' LOWKEY_TRACE_BUFFER=64K %s '%s' serve",
		env, TARGET);
	return spawn(cmd);
}

static int end(pid_t pid)
{
	int status = 0;

	kill(pid, SIGTERM);
	waitpid(pid, &status, 0);
	return status;
}

/* Wait until the trace at dir holds at least n app:tick events (its writer may still write it). */
static bool has_ticks(void *arg)
{
	struct stat st;
	char meta[1200];

	snprintf(meta, sizeof(meta), "%s/metadata", (const char *)arg);
	return stat(meta, &st) == 0 && lkt_count(arg, "app:tick").events > 0;
}

static void snapshots_of_a_running_process(void **state)
{
	char out[2048], own[1024], dir[1100];
	pid_t pid;
	struct lkt_count n;

	(void)state;
	snprintf(own, sizeof(own), "%s", in_scratch("own.ctf"));
	snprintf(out, sizeof(out), "LOWKEY_TRACE_MODE=overwrite LOWKEY_TRACE_OUTPUT='%s'", own);
	pid = spawn_recorder(out);
	lkt_sleep_ms(100);

	/* to a path of ours */
	lkt_sh(&r, "%s snapshot --pid %d -o '%s'", LOWKEY, (int)pid, in_scratch("s1.ctf"));
	expect(0, "written to ");
	assert_non_null(strstr(r.out, in_scratch("s1.ctf")));
	n = lkt_count(in_scratch("s1.ctf"), "app:tick");
	assert_true(n.events > 0);
	assert_true(n.arg1_is_twice_arg0);
	assert_int_equal(n.lost, 0); /* 64K holds every tick of 100 ms */

	/* to the process's own names, as JSON on stdout */
	lkt_sh(&r, "%s snapshot --pid %d --json", LOWKEY, (int)pid);
	expect(0, "\"events\": ");
	assert_non_null(strstr(r.out, own));
	assert_true(lkt_count(own, "app:tick").events > 0);
	lkt_sh(&r, "%s snapshot --pid %d", LOWKEY, (int)pid);
	expect(0, ".ctf.1");
	snprintf(dir, sizeof(dir), "%s.1", own);
	assert_true(lkt_count(dir, "app:tick").events >= n.events); /* later, as many or more */

	/* a path in use is refused, and the process goes on */
	lkt_sh(&r, "%s snapshot --pid %d -o '%s'", LOWKEY, (int)pid, in_scratch("s1.ctf"));
	expect(1, "not an empty directory");
	/* at exit, a last one */
	assert_int_equal(WEXITSTATUS(end(pid)), 0);
	snprintf(dir, sizeof(dir), "%s.2", own);
	assert_true(lkt_count(dir, "app:tick").events > 0);
}

static void a_snapshot_on_the_signal_and_at_exit(void **state)
{
	char cmd[2048], out[1024];
	pid_t pid;

	(void)state;
	snprintf(out, sizeof(out), "%s", in_scratch("sig.ctf"));
	snprintf(
		cmd, sizeof(cmd),
		"exec '%s' trace --overwrite --snapshot-signal USR2 -b 64K -e 'app:*' -o '%s' -- '%s' serve",
		LOWKEY, out, TARGET);
	pid = spawn(cmd); /* the target's pid (lowkey runs it) */
	lkt_sleep_ms(50);
	assert_int_equal(kill(pid, SIGUSR2), 0);
	assert_true(lkt_wait_for(has_ticks, out));
	kill(pid, SIGTERM);
	for (int i = 0; i < nspawned; i++) /* lowkey itself: it exits with the program's status */
		if (spawned[i] > 0 && waitpid(spawned[i], NULL, 0) == spawned[i])
			spawned[i] = -1;
	snprintf(cmd, sizeof(cmd), "%s.1", out);
	assert_true(lkt_count(cmd, "app:tick").events > 0); /* the one at exit */

	/* a signal is for a flight recorder */
	lkt_sh(&r, "%s trace --snapshot-signal USR2 -- '%s' emit 10", LOWKEY, TARGET);
	expect(2, "--snapshot-signal is for a flight recorder");
	lkt_sh(&r, "%s trace --overwrite --snapshot-signal NOPE -- '%s' emit 10", LOWKEY, TARGET);
	expect(2, "bad signal 'NOPE'");
}

/*
 * A signal the kernel sends for a fault (or one that cannot be caught) is never the snapshot
 * signal, by name or by number, from the command line or the environment: a handler for SIGSEGV
 * returns to the fault, which sends it again, a snapshot each time.
 */
static void a_synchronous_signal_is_refused(void **state)
{
	static const char *const refused[] = { "SEGV", "11", "SIGBUS", "7", "ILL", "4",
					       "FPE",  "8",  "TRAP",   "5", "SYS", "31",
					       "KILL", "9",  "STOP",   "19" };
	char out[1100];

	(void)state;
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		snprintf(out, sizeof(out), "%s", in_scratch("sync.ctf"));
		lkt_sh(&r, "%s trace --overwrite --snapshot-signal %s -o '%s' -- '%s' emit 10",
		       LOWKEY, refused[i], out, TARGET);
		expect(2, "cannot take snapshots");
		assert_false(lkt_file_exists(out));

		/* from the environment: no trace starts, the program runs untraced */
		lkt_sh(&r,
		       "LOWKEY_TRACE='app:*' LOWKEY_TRACE_MODE=overwrite LOWKEY_TRACE_SNAPSHOT_SIGNAL=%s "
		       "LOWKEY_TRACE_OUTPUT='%s' '%s' emit 10",
		       refused[i], out, TARGET);
		expect(0, "");
		assert_false(lkt_file_exists(out));
	}
	lkt_sh(&r, "%s trace --overwrite --snapshot-signal 11 -- '%s' emit 10", LOWKEY, TARGET);
	expect(2,
	       "SIGSEGV (11) cannot take snapshots: the kernel sends it to a thread that faults");
}

/* A flight recorder's losses are older events it overwrote, and lowkey report says so. */
static void a_report_says_overwritten(void **state)
{
	char out[1100];

	(void)state;
	/* in every format: JSON and Perfetto carry the mark too */
	static const char *const formats[] = { "ctf", "json", "perfetto" };

	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
		snprintf(out, sizeof(out), "%s.%s", in_scratch("lapped"), formats[i]);
		lkt_sh(&r,
		       "%s trace --overwrite --format %s -b 64K -e 'app:*' -o '%s' -- '%s' emit 20000",
		       LOWKEY, formats[i], out, TARGET);
		expect(0, "");
		lkt_sh(&r, "%s report '%s'", LOWKEY, out); /* the snapshot at exit */
		expect(0, " older events overwritten: the flight recorder keeps the newest");
		assert_null(strstr(r.out, "buffer was full"));
		assert_null(strstr(r.out, "dropped"));
	}

	/* a streaming trace that loses events says they were dropped */
	lkt_sh(&r, "%s trace -b 4K -e 'app:*' -o '%s' -- '%s' emit-stalled 20000", LOWKEY,
	       in_scratch("dropped.ctf"), TARGET);
	lkt_sh(&r, "%s report '%s'", LOWKEY, in_scratch("dropped.ctf"));
	expect(0, "events were dropped because a thread's buffer was full");
	assert_null(strstr(r.out, "overwritten"));
}

static void a_recorder_started_from_outside(void **state)
{
	char cmd[2048];
	pid_t pid;

	(void)state;
	snprintf(cmd, sizeof(cmd), "exec env LOWKEY_CONTROL=1 '%s' serve", TARGET);
	pid = spawn(cmd);
	lkt_sh(&r, "%s trace --pid %d --overwrite -b 64K -e 'app:tick' -o '%s'", LOWKEY, (int)pid,
	       in_scratch("att.ctf"));
	expect(0, "flight recorder started");
	lkt_sleep_ms(100); /* it keeps recording after lowkey has left */
	lkt_sh(&r, "%s snapshot --pid %d", LOWKEY, (int)pid);
	expect(0, "att.ctf");
	assert_true(lkt_count(in_scratch("att.ctf"), "app:tick").events > 0);
	end(pid);
}

static void what_cannot_be_snapshotted(void **state)
{
	char env[2048];
	pid_t pid;

	(void)state;
	/* a streaming trace */
	snprintf(env, sizeof(env), "LOWKEY_TRACE_OUTPUT='%s'", in_scratch("stream.ctf"));
	pid = spawn_recorder(env);
	lkt_sh(&r, "%s snapshot --pid %d", LOWKEY, (int)pid);
	expect(1, "runs no flight recorder");
	end(pid);

	/* no trace at all */
	snprintf(env, sizeof(env), "exec env LOWKEY_CONTROL=1 '%s' serve", TARGET);
	pid = spawn(env);
	lkt_sh(&r, "%s snapshot --pid %d", LOWKEY, (int)pid);
	expect(1, "runs no trace");
	end(pid);

	/* an unwritable place; a bad pid; no pid */
	snprintf(env, sizeof(env), "LOWKEY_TRACE_MODE=overwrite LOWKEY_TRACE_OUTPUT='%s'",
		 in_scratch("fr.ctf"));
	pid = spawn_recorder(env);
	lkt_sh(&r, "%s snapshot --pid %d -o /proc/self/nope.ctf", LOWKEY, (int)pid);
	expect(1, "/proc/self/nope.ctf");
	lkt_sh(&r, "%s snapshot --pid %d", LOWKEY, (int)pid); /* and it still works */
	expect(0, "fr.ctf");
	end(pid);
	lkt_sh(&r, "%s snapshot --pid 0", LOWKEY);
	expect(2, "bad pid");
	lkt_sh(&r, "%s snapshot", LOWKEY);
	expect(2, "--pid is required");
}

/* Another user's process: its socket refuses us (the directory, then SO_PEERCRED). */
static void another_users_recorder(void **state)
{
	char cmd[2048];
	pid_t pid;

	(void)state;
	if (geteuid() != 0 || lkt_sh(&r, "command -v setpriv") != 0)
		skip(); /* needs root to run a process as another user, and util-linux's setpriv */
	if (lkt_sh(&r, "setpriv --reuid=65534 --regid=65534 --clear-groups test -x '%s'", LOWKEY) !=
	    0)
		skip(); /* the build tree is not readable by nobody */
	snprintf(cmd, sizeof(cmd),
		 "exec env LOWKEY_CONTROL=1 LOWKEY_TRACE='app:*' LOWKEY_TRACE_MODE=overwrite "
		 "LOWKEY_TRACE_OUTPUT='%s' '%s' serve",
		 in_scratch("root.ctf"), TARGET);
	pid = spawn(cmd);
	lkt_sh(&r,
	       "setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all "
	       "%s snapshot --pid %d -o /tmp/lkt-nobody-snap.ctf",
	       LOWKEY, (int)pid);
	expect(1, "belongs to uid 0");
	assert_false(lkt_file_exists("/tmp/lkt-nobody-snap.ctf"));
	end(pid);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(snapshots_of_a_running_process),
		cmocka_unit_test(a_snapshot_on_the_signal_and_at_exit),
		cmocka_unit_test(a_synchronous_signal_is_refused),
		cmocka_unit_test(a_report_says_overwritten),
		cmocka_unit_test(a_recorder_started_from_outside),
		cmocka_unit_test(what_cannot_be_snapshotted),
		cmocka_unit_test(another_users_recorder),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
