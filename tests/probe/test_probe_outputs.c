// SPDX-License-Identifier: MIT
/*
 * Outputs in a shared directory (sticky, writable by another user: nobody, through setpriv, as
 * root only) where that user plants a symbolic link to a third user's file, or a file of its own:
 * no snapshot, trace, conversion or CLI output writes through the link or into that user's file
 * (the victim stays as it was), each fails saying why, and a link planted while a snapshot is
 * being written (between its check of the name and its conversion, as a race would) changes
 * nothing. And an output that cannot be created for want of permission says so (EACCES), not
 * that something exists there.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <lowkey/lowkey.h>

#include "cli/run.h"
#include "internal/trace_progress.h"
#include "trace_check.h"

#define NOBODY 65534
#define THIRD 65533 /* the victim's owner */
#define PRECIOUS "the third user's data\n"

extern char **environ;

static char shared[] = "/tmp/lkt-outputs-XXXXXX"; /* sticky, nobody's group may write */
static char victim_dir[] = "/tmp/lkt-victim-XXXXXX";
static char victim[300], victim_sub[300], trace[300];
static struct lkt_run r;

/*
 * Run argv as nobody (posix_spawn: no fork handler runs, so a caller may hold lowkey's locks),
 * its errors silenced when quiet.
 */
static int run_as_nobody(const char *const *cmd, bool quiet)
{
	const char *argv[16] = { "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups" };
	posix_spawn_file_actions_t actions;
	int status, n = 4, rc;
	pid_t pid;

	for (int i = 0; cmd[i] && n < 15; i++)
		argv[n++] = cmd[i];
	argv[n] = NULL;
	posix_spawn_file_actions_init(&actions);
	if (quiet)
		posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
	rc = posix_spawnp(&pid, "setpriv", &actions, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&actions);
	if (rc != 0)
		return -1;
	if (waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int as_nobody(const char *const *cmd)
{
	return run_as_nobody(cmd, false);
}

static void plant_link(const char *target, const char *name)
{
	char at[400];
	const char *cmd[] = { "ln", "-s", target, at, NULL };

	snprintf(at, sizeof(at), "%s/%s", shared, name);
	assert_int_equal(as_nobody(cmd), 0);
}

/* The third user's file holds what it held, and its directory is still empty. */
static bool victim_intact(void)
{
	char text[256] = "";
	FILE *f = fopen(victim, "r");
	size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
	DIR *d = opendir(victim_sub);
	int entries = 0;

	if (f)
		fclose(f);
	text[n] = 0;
	for (struct dirent *e; d && (e = readdir(d));)
		entries += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	if (d)
		closedir(d);
	return strcmp(text, PRECIOUS) == 0 && d && !entries;
}

static int setup(void **state)
{
	FILE *f;

	(void)state;
	if (geteuid() != 0 || system("command -v setpriv >/dev/null") != 0)
		return 0; /* each test skips */
	if (!mkdtemp(shared) || !mkdtemp(victim_dir))
		return -1;
	/* a shared directory like /tmp, for a group: the kernel's protected_* sysctls do not cover it */
	if (chown(shared, 0, NOBODY) != 0 || chmod(shared, 01770) != 0 ||
	    chmod(victim_dir, 0755) != 0)
		return -1;
	snprintf(victim, sizeof(victim), "%s/data", victim_dir);
	snprintf(victim_sub, sizeof(victim_sub), "%s/empty", victim_dir);
	f = fopen(victim, "w");
	if (!f || fputs(PRECIOUS, f) < 0 || fclose(f) != 0 || mkdir(victim_sub, 0755) != 0)
		return -1;
	if (chown(victim, THIRD, THIRD) != 0 || chown(victim_sub, THIRD, THIRD) != 0)
		return -1;
	return 0;
}

static int teardown(void **state)
{
	char cmd[200];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", shared, victim_dir);
	return geteuid() == 0 && shared[strlen(shared) - 1] != 'X' ? system(cmd) : 0;
}

static void need_root(void)
{
	if (geteuid() != 0 || shared[strlen(shared) - 1] == 'X')
		skip(); /* another user's link needs root (setpriv, util-linux) */
}

static void in_shared(char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", shared, name);
}

static void start_recorder(enum lk_trace_format format)
{
	struct lk_trace_config c = { .format = format,
				     .flags = LK_TRACE_OVERWRITE,
				     .path = "/tmp/lkt-outputs-unused" };

	assert_true(lk_probe_enable("out") >= 0);
	assert_int_equal(lk_trace_start(&c), 0);
	for (uint64_t i = 0; i < 1000; i++)
		LK_PROBE(out, tick, i);
}

static void stop_recorder(void)
{
	assert_int_equal(lk_trace_stop(), 0);
	lk_probe_reset_rules();
}

/* ---- a link planted before ---- */

static void a_planted_link_is_not_followed(void **state)
{
	static const enum lk_trace_format formats[] = { LK_TRACE_CTF, LK_TRACE_JSON,
							LK_TRACE_PERFETTO };
	char path[400];

	(void)state;
	need_root();
	for (size_t i = 0; i < 3; i++) {
		const char *name = i == 0 ? "snap.ctf" : i == 1 ? "snap.json" : "snap.pftrace";

		plant_link(i == 0 ? victim_sub : victim, name);
		in_shared(path, sizeof(path), name);
		start_recorder(formats[i]);
		assert_int_equal(lk_trace_snapshot(path), -ELOOP);
		assert_non_null(strstr(lk_last_error(), "is a symbolic link"));
		stop_recorder();
		assert_true(victim_intact());
	}
}

/* A streaming trace's output, created at the start, is no different. */
static void a_trace_does_not_follow_a_planted_link(void **state)
{
	struct lk_trace_config c = { .format = LK_TRACE_JSON };
	char path[400];

	(void)state;
	need_root();
	plant_link(victim, "trace.json");
	in_shared(path, sizeof(path), "trace.json");
	c.path = path;
	assert_int_equal(lk_trace_start(&c), -ELOOP);
	assert_non_null(strstr(lk_last_error(), "is a symbolic link"));
	plant_link(victim_sub, "trace.ctf");
	in_shared(path, sizeof(path), "trace.ctf");
	c.format = LK_TRACE_CTF;
	assert_true(lk_trace_start(&c) < 0);
	assert_non_null(strstr(lk_last_error(), "is a symbolic link"));
	assert_true(victim_intact());
}

/* nobody's own (empty) file in the shared directory is nobody's: not written, even by root. */
static void another_users_file_is_not_written(void **state)
{
	const char *touch[] = { "touch", NULL, NULL };
	char path[400];
	struct stat st;

	(void)state;
	need_root();
	in_shared(path, sizeof(path), "theirs.json");
	touch[1] = path;
	assert_int_equal(as_nobody(touch), 0);
	start_recorder(LK_TRACE_JSON);
	assert_int_equal(lk_trace_snapshot(path), -EACCES);
	assert_non_null(strstr(lk_last_error(), "belongs to another user"));
	stop_recorder();
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 0);
	assert_int_equal(st.st_uid, NOBODY);
}

/* ---- a link planted while the snapshot is written ---- */

static bool planted;

/* Told when the conversion begins: the snapshot's name was checked long before, as a race has it. */
static void plant_now(uint64_t done, uint64_t total, void *arg)
{
	const char *cmd[] = { "ln", "-s", victim, arg, NULL };

	(void)done;
	(void)total;
	if (!planted)
		run_as_nobody(cmd, true); /* fails where the snapshot's file is there already */
	planted = true;
}

static void a_link_planted_during_a_snapshot_changes_nothing(void **state)
{
	static const enum lk_trace_format formats[] = { LK_TRACE_JSON, LK_TRACE_PERFETTO };
	char path[400];

	(void)state;
	need_root();
	for (size_t i = 0; i < 2; i++) {
		const struct lk__progress_sink sink = { plant_now, path };
		struct stat st;

		in_shared(path, sizeof(path), i ? "race.pftrace" : "race.json");
		planted = false;
		start_recorder(formats[i]);
		lk__progress_stop_sink_for_thread(&sink);
		assert_int_equal(lk_trace_snapshot(path), 0);
		lk__progress_stop_sink_for_thread(NULL);
		stop_recorder();
		assert_true(planted);
		assert_true(victim_intact());
		assert_int_equal(lstat(path, &st), 0);
		assert_true(S_ISREG(st.st_mode));
		assert_true(st.st_size > 0);
	}
}

/* ---- the command line ---- */

static void cli_outputs_do_not_follow_a_planted_link(void **state)
{
	struct lk_trace_config c = { .format = LK_TRACE_CTF, .path = trace };
	char path[400];

	(void)state;
	need_root();
	snprintf(trace, sizeof(trace), "%s/in.ctf", victim_dir);
	assert_true(lk_probe_enable("out") >= 0);
	assert_int_equal(lk_trace_start(&c), 0);
	LK_PROBE(out, tick, 1);
	assert_int_equal(lk_trace_stop(), 0);
	lk_probe_reset_rules();

	plant_link(victim, "page.html");
	in_shared(path, sizeof(path), "page.html");
	lkt_sh(&r, "%s report --html '%s' '%s'", LOWKEY, path, trace);
	lkt_expect(&r, 1, "is a symbolic link");
	plant_link(victim, "out.json");
	in_shared(path, sizeof(path), "out.json");
	lkt_sh(&r, "%s convert '%s' -o '%s'", LOWKEY, trace, path);
	lkt_expect(&r, 1, "is a symbolic link");
	plant_link(victim_sub, "out.ctf");
	in_shared(path, sizeof(path), "out.ctf");
	lkt_sh(&r, "%s convert '%s' -o '%s'", LOWKEY, trace, path);
	lkt_expect(&r, 1, "is a symbolic link");
	plant_link(victim, "counts.txt");
	in_shared(path, sizeof(path), "counts.txt");
	lkt_sh(&r, "%s stat -e task-clock -o '%s' -- true", LOWKEY, path);
	lkt_expect(&r, 1, "is a symbolic link");
	assert_true(victim_intact());
}

/*
 * What the user names on the command line is still written where it leads: a device (/dev/null),
 * root's /dev/stdout (a link to /proc/self/fd/1, here a pipe), and a link of the caller's own --
 * while another user's link is not (above).
 */
static void cli_outputs_go_through_the_users_own_links(void **state)
{
	char own_dir[] = "/tmp/lkt-own-XXXXXX", link[300], file[300], text[256] = "";
	FILE *f;
	size_t n;

	(void)state;
	need_root();
	lkt_sh(&r, "%s stat -e task-clock -o /dev/null -- true", LOWKEY);
	lkt_expect(&r, 0, NULL);
	assert_null(strstr(r.out, "task-clock"));
	lkt_sh(&r, "%s stat -e task-clock -o /dev/stdout -- true", LOWKEY);
	lkt_expect(&r, 0, "task-clock");

	assert_non_null(mkdtemp(own_dir));
	snprintf(file, sizeof(file), "%s/counts.txt", own_dir);
	snprintf(link, sizeof(link), "%s/latest.txt", own_dir);
	assert_int_equal(symlink("counts.txt", link), 0);
	lkt_sh(&r, "%s stat -e task-clock -o '%s' -- true", LOWKEY, link);
	lkt_expect(&r, 0, NULL);
	f = fopen(file, "r");
	assert_non_null(f);
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = 0;
	lkt_sh(&r, "rm -rf '%s'", own_dir);
	assert_non_null(strstr(text, "task-clock"));
}

/* ---- the reason given ---- */

/* A place nobody may not enter: EACCES, named as such (not "exists"), from a snapshot. */
static void permission_denied_is_said(void **state)
{
	char closed[] = "/tmp/lkt-closed-XXXXXX", path[300];
	int status;
	pid_t pid;

	(void)state;
	need_root();
#ifdef __SANITIZE_THREAD__
	skip(); /* ThreadSanitizer cannot start threads (the consumer) after a multi-threaded fork */
#endif
	assert_non_null(mkdtemp(closed));
	assert_int_equal(chmod(closed, 0700), 0);
	snprintf(path, sizeof(path), "%s/snap.json", closed);
	pid = fork();
	if (pid == 0) {
		struct lk_trace_config c = { .format = LK_TRACE_JSON,
					     .flags = LK_TRACE_OVERWRITE,
					     .path = "/tmp/x" };
		int rc;

		if (setresgid(NOBODY, NOBODY, NOBODY) != 0 ||
		    setresuid(NOBODY, NOBODY, NOBODY) != 0 || lk_trace_start(&c) != 0)
			_exit(2);
		rc = lk_trace_snapshot(path);
		if (rc != -EACCES || !strstr(lk_last_error(), "Permission denied") ||
		    strstr(lk_last_error(), "exists"))
			fprintf(stderr, "snapshot: %d, %s\n", rc, lk_last_error()), rc = 0;
		lk_trace_stop();
		_exit(rc == -EACCES ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	rmdir(closed);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* After a test that failed half-way: no trace left running for the next. */
static int stop_any(void **state)
{
	(void)state;
	lk__progress_stop_sink_for_thread(NULL);
	lk_trace_stop();
	lk_probe_reset_rules();
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(a_planted_link_is_not_followed, stop_any),
		cmocka_unit_test_teardown(a_trace_does_not_follow_a_planted_link, stop_any),
		cmocka_unit_test_teardown(another_users_file_is_not_written, stop_any),
		cmocka_unit_test_teardown(a_link_planted_during_a_snapshot_changes_nothing,
					  stop_any),
		cmocka_unit_test_teardown(cli_outputs_do_not_follow_a_planted_link, stop_any),
		cmocka_unit_test_teardown(cli_outputs_go_through_the_users_own_links, stop_any),
		cmocka_unit_test_teardown(permission_denied_is_said, stop_any),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
