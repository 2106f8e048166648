// SPDX-License-Identifier: MIT
/*
 * Who may talk to a process's control socket: its own user and root, no one else. The directory
 * keeps others away; where it is opened up anyway, SO_PEERCRED still refuses them, and the refusal
 * is counted. Runs the server as root and the client as nobody (65534), and the server as nobody
 * with root and uid 65533 as clients; and an unprivileged user tracing their own programs, from the
 * start and attached; and a process of the same user that is not dumpable, whose sockets cannot be
 * looked at: lowkey says it cannot tell, not that the process is another user's. Needs root and
 * util-linux's setpriv; skipped otherwise.
 */
#include <fcntl.h>
#include <grp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "cli/run.h"
#include "ctl_test.h"
#include "control/control_internal.h"

#define AS(uid)                                  \
	"setpriv --reuid=" #uid " --regid=" #uid \
	" --clear-groups --inh-caps=-all --bounding-set=-all "

static char scratch[] = "/tmp/lkt-peers-XXXXXX";
static struct lkt_run r;
static char path[1024], err[1024];
static pid_t server = -1, helper = -1;

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
	if (server > 0 && kill(server, SIGKILL) == 0)
		waitpid(server, NULL, 0);
	if (helper > 0 && kill(helper, SIGKILL) == 0)
		waitpid(helper, NULL, 0);
	return lkt_sh(&r, "rm -rf '%s'", scratch);
}

static void need_root_and_setpriv(void)
{
	if (geteuid() != 0)
		skip(); /* switching users needs root */
	if (lkt_sh(&r, "command -v setpriv") != 0)
		skip(); /* util-linux's setpriv is missing */
	if (lkt_sh(&r, AS(65534) "test -x '%s' -a -x '%s'", TARGET, LOWKEY) != 0)
		skip(); /* the build tree is not readable by nobody */
}

static void end_server(void);

/* Start `[setpriv ...] env XDG_RUNTIME_DIR=xdg LOWKEY_CONTROL=1 TARGET serve`; wait until ready. */
static pid_t spawn_server(const char *as_uid, const char *xdg)
{
	char line[64] = "", cmd[2048];
	int p[2];
	pid_t pid;
	FILE *f;

	if (server > 0)
		end_server(); /* a failed test's */
	snprintf(cmd, sizeof(cmd), "exec %s env XDG_RUNTIME_DIR='%s' LOWKEY_CONTROL=1 '%s' serve",
		 as_uid, xdg, TARGET);
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
	assert_int_equal(atoi(line + 6), pid); /* setpriv and env exec: the pid is the program's */
	server = pid;
	return pid;
}

static void end_server(void)
{
	kill(server, SIGTERM);
	waitpid(server, NULL, 0);
	server = -1;
}

static struct lk__ctl_status status_as_root(pid_t pid)
{
	struct lk__ctl_msg req = { .type = LK_CTL_STATUS }, reply;
	struct lk__ctl_client c;

	assert_int_equal(lk__ctl_connect(&c, pid, err, sizeof(err)), 0);
	assert_int_equal(
		lk__ctl_call(&c, &req, LK_CTL_STATUS_REPLY, &reply, 30000, err, sizeof(err)), 0);
	lk__ctl_disconnect(&c);
	return reply.status;
}

static void make_dir(const char *dir, unsigned int mode, uid_t owner)
{
	assert_int_equal(mkdir(dir, mode), 0);
	assert_int_equal(chmod(dir, mode), 0);
	assert_int_equal(chown(dir, owner, owner), 0);
}

static void a_root_process_refuses_nobody(void **state)
{
	char xdg[1024], sock[1200];
	struct lk__ctl_status st;
	pid_t pid;

	(void)state;
	need_root_and_setpriv();
	snprintf(xdg, sizeof(xdg), "%s", in_scratch("root-xdg"));
	make_dir(xdg, 0700, 0);
	make_dir(in_scratch("out"), 0777, 0);
	pid = spawn_server("", xdg);

	/* The directory keeps nobody out: lowkey says whose process it is. */
	lkt_sh(&r, AS(65534) "%s trace --pid %d --duration 0.2 -o '%s'", LOWKEY, (int)pid,
	       in_scratch("out/a.ctf"));
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.out, "belongs to uid 0: run lowkey as that user or as root"));
	assert_int_equal(status_as_root(pid).refused_peers, 0); /* it never got that far */

	/* Opened up by mistake: the process itself refuses nobody, and counts it. */
	snprintf(sock, sizeof(sock), "%s/lowkey/%d.sock", xdg, (int)pid);
	assert_int_equal(chmod(xdg, 0755), 0);
	assert_int_equal(lkt_sh(&r, "chmod 777 '%s/lowkey' && chmod 666 '%s'", xdg, sock), 0);
	lkt_sh(&r,
	       AS(65534) "env XDG_RUNTIME_DIR='%s' %s trace --pid %d -e 'app:*' --duration 0.2 -o '%s'",
	       xdg, LOWKEY, (int)pid, in_scratch("out/b.ctf"));
	assert_int_equal(r.status, 1);
	if (!strstr(r.out, "uid 65534 may not control process"))
		print_error("%s\n", r.out);
	assert_non_null(strstr(r.out, "uid 65534 may not control process"));
	st = status_as_root(pid);
	assert_int_equal(st.refused_peers, 1);
	assert_int_equal(st.running, 0);
	assert_int_equal(st.sites_enabled, 0);
	assert_false(lkt_file_exists(in_scratch("out/b.ctf/metadata")));
	end_server();
}

static void a_nobody_process_serves_root_and_refuses_others(void **state)
{
	char xdg[1024], sock[1200];
	struct stat st;
	pid_t pid;

	(void)state;
	need_root_and_setpriv();
	snprintf(xdg, sizeof(xdg), "%s", in_scratch("nobody-xdg"));
	make_dir(xdg, 0700, 65534);
	make_dir(in_scratch("out2"), 0755, 0);
	pid = spawn_server(AS(65534), xdg);

	/* root may: the trace is written by the process, into an output handed to its user */
	lkt_sh(&r, "%s trace --pid %d -e app:tick --duration 2 -o '%s'", LOWKEY, (int)pid,
	       in_scratch("out2/root.ctf"));
	if (r.status != 0)
		print_error("%s\n", r.out);
	assert_int_equal(r.status, 0);
	assert_true(lkt_count(in_scratch("out2/root.ctf"), "app:tick").events > 0);
	assert_int_equal(stat(in_scratch("out2/root.ctf/metadata"), &st), 0);
	assert_int_equal(st.st_uid, 65534);

	/* another user may not: first the directory stops it, then the process */
	lkt_sh(&r, AS(65533) "%s trace --pid %d --duration 0.2 -o /tmp/never.ctf", LOWKEY,
	       (int)pid);
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.out, "belongs to uid 65534"));
	snprintf(sock, sizeof(sock), "%s/lowkey/%d.sock", xdg, (int)pid);
	assert_int_equal(lkt_sh(&r, "chmod 755 '%s' && chmod 777 '%s/lowkey' && chmod 666 '%s'",
				xdg, xdg, sock),
			 0);
	lkt_sh(&r,
	       AS(65533) "env XDG_RUNTIME_DIR='%s' %s trace --pid %d --duration 0.2 -o /tmp/never.ctf",
	       xdg, LOWKEY, (int)pid);
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.out, "uid 65533 may not control process"));
	assert_int_equal(status_as_root(pid).refused_peers, 1);
	assert_false(lkt_file_exists("/tmp/never.ctf/metadata"));
	end_server();
}

static void a_user_traces_their_own_programs(void **state)
{
	char xdg[1024], dir[1024];
	pid_t pid;

	(void)state;
	need_root_and_setpriv();
	snprintf(xdg, sizeof(xdg), "%s", in_scratch("user-xdg"));
	make_dir(xdg, 0700, 65534);
	snprintf(dir, sizeof(dir), "%s", in_scratch("user-out"));
	make_dir(dir, 0755, 65534);

	/* from the start */
	lkt_sh(&r, "cd '%s' && " AS(65534) "%s trace -e app:tick -o run.ctf -- %s emit 100", dir,
	       LOWKEY, TARGET);
	if (r.status != 0)
		print_error("%s\n", r.out);
	assert_int_equal(r.status, 0);
	assert_int_equal(lkt_count(in_scratch("user-out/run.ctf"), "app:tick").events, 100);

	/* attached, same user */
	pid = spawn_server(AS(65534), xdg);
	lkt_sh(&r,
	       "cd '%s' && " AS(
		       65534) "env XDG_RUNTIME_DIR='%s' %s trace --pid %d -e app:tick --duration 2 -o att.ctf",
	       dir, xdg, LOWKEY, (int)pid);
	if (r.status != 0)
		print_error("%s\n", r.out);
	assert_int_equal(r.status, 0);
	assert_true(lkt_count(in_scratch("user-out/att.ctf"), "app:tick").events > 0);
	lkt_sh(&r, AS(65534) "%s list --pid %d", LOWKEY, (int)pid);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "app:tick      event       off"));
	end_server();
}

/* A child of nobody's that is not dumpable: its /proc/PID/fd is root's. */
static pid_t spawn_undumpable_nobody(void)
{
	char byte;
	int p[2];
	pid_t pid;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		if (setgroups(0, NULL) != 0 || setresgid(65534, 65534, 65534) != 0 ||
		    setresuid(65534, 65534, 65534) != 0 || prctl(PR_SET_DUMPABLE, 0) != 0)
			_exit(2);
		if (write(p[1], "r", 1) != 1)
			_exit(2);
		pause();
		_exit(0);
	}
	close(p[1]);
	assert_int_equal(read(p[0], &byte, 1), 1);
	close(p[0]);
	return pid;
}

static void a_process_whose_sockets_cannot_be_seen_is_said_so(void **state)
{
	char want[128];
	pid_t pid;

	(void)state;
	need_root_and_setpriv();
	helper = pid = spawn_undumpable_nobody();
	snprintf(want, sizeof(want),
		 "cannot tell whether process %d has a lowkey control socket open", (int)pid);
	lkt_sh(&r, AS(65534) "%s trace --pid %d -o /tmp/never.ctf", LOWKEY, (int)pid);
	if (r.status != 1 || !strstr(r.out, want))
		print_error("%s\n", r.out);
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.out, want)); /* it used to say the process was root's */
	lkt_sh(&r, AS(65534) "%s list --pid %d", LOWKEY, (int)pid);
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.out, want));
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	helper = -1;
}

/*
 * Root attaching to another user's process never acts with root's rights on paths that process
 * controls. The process writes its trace into an output lowkey handed to it; if it vanishes,
 * lowkey recovers what it left, and a process that swapped its output for a symlink to a file of
 * root's, or its CTF directory for a symlink to a directory of root's, then killed itself, gets
 * neither root's file overwritten nor root's files removed.
 */
static pid_t polled;

static bool trace_written(void *arg)
{
	struct lk__ctl_msg req = { .type = LK_CTL_STATUS }, reply;
	struct lk__ctl_client c;

	(void)arg;
	if (lk__ctl_connect(&c, polled, err, sizeof(err)) != 0)
		return false;
	if (lk__ctl_call(&c, &req, LK_CTL_STATUS_REPLY, &reply, 30000, err, sizeof(err)) != 0)
		reply.status.events = 0;
	lk__ctl_disconnect(&c);
	return reply.status.events > 0;
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
		execl(LOWKEY, "lowkey", "trace", "--pid", pidarg, "--format", "json", "-e",
		      "app:tick", "-o", out, (char *)NULL);
		_exit(127);
	}
	return pid;
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
	pid_t pid = spawn_server(AS(65534), xdg);

	*lk = spawn_lowkey(pid, out, log);
	polled = pid;
	assert_true(lkt_wait_for(trace_written, NULL));
	return pid;
}

static void vanish(pid_t pid, pid_t lk)
{
	int status;

	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	server = -1;
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
	make_dir(pub, 01777, 0); /* like /tmp */
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
	assert_int_equal(r.status, 1); /* the recovery, as nobody, could not write there */
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
	assert_int_equal(lkt_sh(&r,
				"cp -r '%s' '%s' && chown -R 0:0 '%s' && chmod 700 '%s' && "
				"mv '%s' '%s.gone' && ln -s '%s' '%s'",
				ctf, rootdir, rootdir, rootdir, ctf, ctf, rootdir, ctf),
			 0);
	vanish(pid, lk);
	assert_true(lkt_file_exists(file));
	assert_true(file_says(out, "")); /* nothing of root's was converted into the output */
	assert_int_equal(r.status, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_root_process_refuses_nobody),
		cmocka_unit_test(a_nobody_process_serves_root_and_refuses_others),
		cmocka_unit_test(a_user_traces_their_own_programs),
		cmocka_unit_test(a_process_whose_sockets_cannot_be_seen_is_said_so),
		cmocka_unit_test(a_swapped_output_does_not_overwrite_roots_file),
		cmocka_unit_test(a_swapped_ctf_directory_does_not_lose_roots_files),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, setup, teardown);
}
