// SPDX-License-Identifier: MIT
/*
 * Root attaching to another user's process never acts with root's rights on paths that process
 * controls. The process writes its trace into an output lowkey handed to it; if it vanishes,
 * lowkey recovers what it left, and a process that swapped its output for a symlink to a file of
 * root's, or its CTF directory for a symlink to a directory of root's, then killed itself, gets
 * neither root's file overwritten nor root's files removed. Needs root and util-linux's setpriv;
 * skipped otherwise.
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
#include "probe/control_internal.h"

#define AS(uid) "setpriv --reuid=" #uid " --regid=" #uid " --clear-groups --inh-caps=-all --bounding-set=-all "

static char scratch[] = "/tmp/lkt-hostile-XXXXXX";
static struct lkt_run r;
static char path[1024], err[1024];

static const char *in_scratch(const char *name)
{
	snprintf(path, sizeof(path), "%s/%s", scratch, name);
	return path;
}

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
	return lkt_sh(&r, "rm -rf '%s'", scratch);
}

static void need_root_and_setpriv(void)
{
	if (geteuid() != 0)
		skip();	/* switching users needs root */
	if (lkt_sh(&r, "command -v setpriv") != 0)
		skip();	/* util-linux's setpriv is missing */
	if (lkt_sh(&r, AS(65534) "test -x '%s' -a -x '%s'", TARGET, LOWKEY) != 0)
		skip();	/* the build tree is not readable by nobody */
}

/* `TARGET serve` as nobody with its control socket open; returns once it is ready. */
static pid_t spawn_nobody_target(const char *xdg)
{
	char line[64] = "", cmd[2048];
	int p[2];
	pid_t pid;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "exec " AS(65534) "env XDG_RUNTIME_DIR='%s' LOWKEY_CONTROL=1 '%s' serve", xdg,
		 TARGET);
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
	f = fdopen(p[0], "r");
	assert_non_null(fgets(line, sizeof(line), f));
	fclose(f);
	assert_int_equal(strncmp(line, "ready ", 6), 0);
	return pid;
}

static pid_t polled;

static bool written(void *arg)
{
	struct lk__ctl_msg req = { .type = LK_CTL_STATUS }, reply;
	struct lk__ctl_client c;

	(void)arg;
	if (lk__ctl_connect(&c, polled, err, sizeof(err)) != 0)
		return false;
	if (lk__ctl_call(&c, &req, LK_CTL_STATUS_REPLY, &reply, 30000, err, sizeof(err)) != 0)
		reply.status.events = 0;
	lk__ctl_disconnect(&c);
	return reply.status.events > 1;	/* more than the thread's name */
}

/* root's `lowkey trace --pid` in the background, its output in log */
static pid_t spawn_lowkey(pid_t target, const char *out, const char *log)
{
	char pidarg[16];
	pid_t pid;

	snprintf(pidarg, sizeof(pidarg), "%d", (int)target);
	pid = fork();
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(fd, 1);
		dup2(fd, 2);
		execl(LOWKEY, "lowkey", "trace", "--pid", pidarg, "--format", "json", "-e", "app:tick", "-o", out,
		      (char *)NULL);
		_exit(127);
	}
	return pid;
}

static void make_dir(const char *dir, unsigned int mode, uid_t owner)
{
	assert_int_equal(mkdir(dir, mode), 0);
	assert_int_equal(chmod(dir, mode), 0);
	assert_int_equal(chown(dir, owner, owner), 0);
}

static void write_file(const char *file, const char *text, unsigned int mode)
{
	FILE *f = fopen(file, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(chmod(file, mode), 0);
}

static bool file_says(const char *file, const char *text)
{
	char buf[256] = "";
	FILE *f = fopen(file, "r");
	size_t n;

	if (!f)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = 0;
	fclose(f);
	return strcmp(buf, text) == 0;
}

/* The target's CTF directory beside out: out.ctf-XXXXXX. */
static void ctf_beside(const char *out, char *dir, size_t len)
{
	assert_int_equal(lkt_sh(&r, "ls -d '%s'.ctf-* | head -1", out), 0);
	r.out[strcspn(r.out, "\n")] = 0;
	assert_true(strlen(r.out) < len);
	memcpy(dir, r.out, strlen(r.out) + 1);
}

/* Start the target and root's trace of it; return once events are on disk. */
static pid_t traced_target(const char *xdg, const char *out, const char *log, pid_t *lk)
{
	pid_t pid = spawn_nobody_target(xdg);

	*lk = spawn_lowkey(pid, out, log);
	polled = pid;
	assert_true(lkt_wait_for(written, NULL));
	return pid;
}

static void vanish(pid_t pid, pid_t lk)
{
	int status;

	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	waitpid(lk, &status, 0);
	assert_true(WIFEXITED(status));
	r.status = WEXITSTATUS(status);
}

static void a_swapped_output_does_not_overwrite_roots_file(void **state)
{
	char xdg[1024], pub[1024], out[1100], log[1100], victim[1100], moved[1100];
	pid_t pid, lk;

	(void)state;
	need_root_and_setpriv();
	snprintf(xdg, sizeof(xdg), "%s", in_scratch("xdg1"));
	make_dir(xdg, 0700, 65534);
	snprintf(pub, sizeof(pub), "%s", in_scratch("pub1"));
	make_dir(pub, 01777, 0);	/* like /tmp */
	snprintf(out, sizeof(out), "%s/out.json", pub);
	snprintf(moved, sizeof(moved), "%s/moved.json", pub);
	snprintf(log, sizeof(log), "%s", in_scratch("lowkey1.log"));
	snprintf(victim, sizeof(victim), "%s", in_scratch("victim"));
	write_file(victim, "root's secret\n", 0600);

	pid = traced_target(xdg, out, log, &lk);
	/* what the process (it owns out.json) could do: swap it for a symlink to root's file */
	assert_int_equal(rename(out, moved), 0);
	assert_int_equal(symlink(victim, out), 0);
	vanish(pid, lk);
	assert_true(file_says(victim, "root's secret\n"));
	assert_int_equal(r.status, 1);	/* the recovery, as nobody, could not write there */
}

static void a_swapped_ctf_directory_does_not_lose_roots_files(void **state)
{
	char xdg[1024], pub[1024], out[1100], log[1100], ctf[1200], rootdir[1100], file[1300];
	pid_t pid, lk;

	(void)state;
	need_root_and_setpriv();
	snprintf(xdg, sizeof(xdg), "%s", in_scratch("xdg2"));
	make_dir(xdg, 0700, 65534);
	snprintf(pub, sizeof(pub), "%s", in_scratch("pub2"));
	make_dir(pub, 01777, 0);
	snprintf(out, sizeof(out), "%s/out.json", pub);
	snprintf(log, sizeof(log), "%s", in_scratch("lowkey2.log"));
	snprintf(rootdir, sizeof(rootdir), "%s", in_scratch("rootdir"));
	snprintf(file, sizeof(file), "%s/metadata", rootdir);

	pid = traced_target(xdg, out, log, &lk);
	ctf_beside(out, ctf, sizeof(ctf));
	/*
	 * The process owns its CTF directory: it can put a symlink to a directory of root's there;
	 * root's holds a trace of root's own (a copy), which a recovery as root would convert into
	 * the process's output and then remove.
	 */
	assert_int_equal(lkt_sh(&r, "cp -r '%s' '%s' && chown -R 0:0 '%s' && chmod 700 '%s' && "
				"mv '%s' '%s.gone' && ln -s '%s' '%s'",
				ctf, rootdir, rootdir, rootdir, ctf, ctf, rootdir, ctf), 0);
	vanish(pid, lk);
	assert_true(lkt_file_exists(file));
	assert_true(file_says(out, ""));	/* nothing of root's was converted into the output */
	assert_int_equal(r.status, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_swapped_output_does_not_overwrite_roots_file),
		cmocka_unit_test(a_swapped_ctf_directory_does_not_lose_roots_files),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
