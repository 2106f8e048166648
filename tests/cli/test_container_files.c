// SPDX-License-Identifier: MIT
/*
 * A process in a container is read from its own files, never the host's file of the same name.
 *
 * The container is built here, as container runtimes build one: a directory holding a copy of
 * ns_prog (stripped, its debug information beside it in .debug/, or under /usr/lib/debug by its
 * build-id, as distributions ship it) and
 * its libraries, under paths other than the host's (the libraries in /ctr-lib), made the root of
 * a private mount namespace with pivot_root. The program's path in that root is the path of
 * another build of it on the host (ns_prog built with LKT_DECOY: other probe sites, its counter
 * at another offset, its debug information beside it). From the host, as root and as the
 * program's user (who may not follow /proc/PID/map_files), `lowkey list --pid` lists the
 * container's sites and `lowkey watch -p` finds its counter and names the line that writes it.
 * And a file put at the program's name in the container since it started -- another build, or a
 * symbolic link to a host file -- is not read in its place.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "cli/namespaces.h"
#include "cli/run.h"

#define NOBODY 65534

static char dir[64] = "/tmp/lkt-nsfiles.XXXXXX";
static char app[128];	 /* where the program is, in the container and (the decoy) on the host */
static char root[128];	 /* the container's root, on the host */
static char lowkey[128]; /* a copy of lowkey another user may run */
static const char *why_skip;
static struct lkt_run r;

/* ---- the container ---- */

/* Copy the program and its libraries into root; the libraries in /ctr-lib, ld.so where it was. */
static int build_root(void)
{
	return lkt_sh(
		&r,
		"set -e; cd '%s'; mkdir -p root/ctr-lib root/proc 'root%s/.debug' root/.old host/other "
		"'%s';"
		/* the decoy: unstripped, and its debug information beside it */
		"cp '%s' '%s/prog'; %s --only-keep-debug '%s/prog' '%s/prog.debug';"
		"cp '%s' host/other/prog;"
		/* the container's: stripped, its debug file found by its .gnu_debuglink */
		"%s --only-keep-debug '%s' 'root%s/.debug/prog.debug';"
		"(cd 'root%s/.debug' && %s --strip-all --add-gnu-debuglink=prog.debug '%s' "
		"../prog);"
		"ldd '%s' | awk '/=> \\// { print $3 }' | while read -r lib; do "
		"  cp -L \"$lib\" root/ctr-lib/; done;"
		"interp=$(ldd '%s' | awk '$1 ~ /^\\// { print $1 }');"
		"mkdir -p \"root$(dirname \"$interp\")\"; cp -L \"$interp\" \"root$interp\";"
		/* what will cover the program's name: another build, a link to the host */
		"mkdir -p root/other root/linkdir; cp host/other/prog root/other/prog;"
		"ln -s '%s/host/other/prog' root/linkdir/prog;"
		"cp '%s' '%s'; chmod -R a+rX .",
		dir, app, app, NS_DECOY, app, OBJCOPY, app, app, NS_DECOY, OBJCOPY, NS_PROG, app,
		app, OBJCOPY, NS_PROG, NS_PROG, NS_PROG, dir, LOWKEY, lowkey);
}

static int setup(void **state)
{
	(void)state;
	if (geteuid() != 0) {
		why_skip = "a container needs root (unshare, pivot_root)";
		return 0;
	}
	if (lkt_sh(&r, "unshare -m true") != 0) {
		why_skip = "unshare -m is refused here (a container without CAP_SYS_ADMIN?)";
		return 0;
	}
	if (!mkdtemp(dir) || chmod(dir, 0755) != 0)
		return -1;
	snprintf(app, sizeof(app), "%s/host/app", dir);
	snprintf(root, sizeof(root), "%s/root", dir);
	snprintf(lowkey, sizeof(lowkey), "%s/lowkey", dir);
	if (build_root() != 0) {
		print_error("cannot build the container:\n%s\n", r.out);
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	if (strstr(dir, "XXXXXX") == NULL) /* mkdtemp() made it */
		lkt_sh(&r, "rm -rf '%s'", dir);
	return 0;
}

/*
 * In the child: make root the root of a new mount namespace, with a /proc as containers have
 * (a sanitizer's runtime reads it), as uid, and run the program.
 */
static void enter_and_exec(uid_t uid)
{
	char prog[160];

	snprintf(prog, sizeof(prog), "%s/prog", app);
	if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
	    lkt_ns_pivot(root) != 0 ||
	    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0) {
		printf("cannot make the container: %s\n", strerror(errno));
		_exit(126);
	}
	if (uid && (setgroups(0, NULL) != 0 || setresgid(uid, uid, uid) != 0 ||
		    setresuid(uid, uid, uid) != 0)) {
		printf("cannot become uid %u: %s\n", (unsigned int)uid, strerror(errno));
		_exit(126);
	}
	setenv("LD_LIBRARY_PATH", "/ctr-lib", 1);
	execl(prog, prog, (char *)NULL);
	printf("cannot run %s in the container: %s\n", prog, strerror(errno));
	_exit(127);
}

struct target {
	pid_t pid;
	int in, out;
	unsigned long addr;
	int line;
	char said[4096];
};

static size_t read_until(int fd, char *buf, size_t cap, size_t have, const char *needle)
{
	while (have + 1 < cap) {
		struct pollfd pfd = { fd, POLLIN, 0 };
		ssize_t n;

		buf[have] = 0;
		if (needle && strstr(buf, needle))
			break;
		if (poll(&pfd, 1, 30000) <= 0)
			break;
		n = read(fd, buf + have, cap - 1 - have);
		if (n <= 0)
			break;
		have += (size_t)n;
	}
	buf[have] = 0;
	return have;
}

/* The program, started in the container as uid, has said where its counter is. */
static void start(struct target *t, uid_t uid)
{
	int in[2], out[2], pid;
	const char *line;

	if (why_skip) {
		print_message("skipped: %s\n", why_skip);
		skip();
	}
	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	t->pid = fork();
	assert_true(t->pid >= 0);
	if (t->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		dup2(out[1], 2);
		enter_and_exec(uid);
	}
	close(in[0]);
	close(out[1]);
	t->in = in[1];
	t->out = out[0];
	/* Its line, after whatever a sanitizer's runtime warned of first (the root has no /proc). */
	read_until(t->out, t->said, sizeof(t->said), 0, "line ");
	read_until(t->out, t->said, sizeof(t->said), strlen(t->said), "\n");
	line = strstr(t->said, "pid ");
	if (!line || sscanf(line, "pid %d addr %lx line %d", &pid, &t->addr, &t->line) != 3) {
		print_message("skipped: %s\n", t->said);
		kill(t->pid, SIGKILL);
		waitpid(t->pid, NULL, 0);
		close(t->in);
		close(t->out);
		skip();
	}
	assert_int_equal(pid, t->pid);
}

static void stop(struct target *t)
{
	int status;

	close(t->in);
	assert_int_equal(waitpid(t->pid, &status, 0), t->pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		read_until(t->out, t->said, sizeof(t->said), 0, NULL);
		print_message("the program ended with status %#x: %s\n", status, t->said);
	}
	close(t->out);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* lowkey args, as root or (uid) as the program's user; its output and status in r. */
static void run_lowkey(uid_t uid, const char *args)
{
	if (uid)
		lkt_sh(&r, "setpriv --reuid=%u --regid=%u --clear-groups '%s' %s",
		       (unsigned int)uid, (unsigned int)uid, lowkey, args);
	else
		lkt_sh(&r, "'%s' %s", lowkey, args);
}

/* ---- list ---- */

static void lists_the_containers_sites(uid_t uid)
{
	struct target t;
	char args[64];

	start(&t, uid);
	snprintf(args, sizeof(args), "list --pid %d", (int)t.pid);
	run_lowkey(uid, args);
	if (!strstr(r.out, "nsprog:in_root") || strstr(r.out, "host_only"))
		print_error("lowkey list --pid (exit %d):\n%s\n", r.status, r.out);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "nsprog:in_root"));
	assert_null(strstr(r.out, "host_only"));
	stop(&t);
}

static void list_as_root(void **state)
{
	(void)state;
	lists_the_containers_sites(0);
}

static void list_as_its_user(void **state)
{
	(void)state;
	lists_the_containers_sites(NOBODY);
}

/* ---- watch ---- */

/*
 * lowkey watch -p finds the counter in the container's program (its symbol is in the debug file
 * in the container only) and names the line that writes it, not the decoy's.
 */
static void watches_the_containers_counter(uid_t uid)
{
	char cmd[256], out[16384], want[64];
	struct target t;
	size_t have;
	FILE *w;

	start(&t, uid);
	if (uid)
		snprintf(cmd, sizeof(cmd),
			 "setpriv --reuid=%u --regid=%u --clear-groups '%s' watch -p %d "
			 "--symbol lkt_ns_counter 2>&1",
			 (unsigned int)uid, (unsigned int)uid, lowkey, (int)t.pid);
	else
		snprintf(cmd, sizeof(cmd), "'%s' watch -p %d --symbol lkt_ns_counter 2>&1", lowkey,
			 (int)t.pid);
	w = popen(cmd, "r");
	assert_non_null(w);
	have = read_until(fileno(w), out, sizeof(out), 0, "in process");
	if (strstr(out, "cannot") && !strstr(out, "watching")) {
		/* no watchpoint here (a machine without debug registers): the lookup is done */
		print_message("lowkey watch could not watch: %s\n", out);
		assert_null(strstr(out, "no symbol"));
		stop(&t);
		pclose(w);
		skip();
	}
	snprintf(want, sizeof(want), "watching 8 bytes at %#lx ", t.addr);
	if (!strstr(out, want))
		print_error("wanted \"%s\"; lowkey watch said:\n%s\n", want, out);
	assert_non_null(strstr(out, want));
	assert_int_equal(write(t.in, "go\n", 3), 3);
	read_until(t.out, t.said, sizeof(t.said), strlen(t.said), "done");
	stop(&t); /* the program exits: lowkey says what it saw and exits too */
	read_until(fileno(w), out, sizeof(out), have, NULL);
	pclose(w);
	snprintf(want, sizeof(want), "ns_prog.c:%d", t.line);
	if (!strstr(out, want))
		print_error("wanted %s; lowkey watch said:\n%s\n", want, out);
	assert_non_null(strstr(out, want));
}

static void watch_as_root(void **state)
{
	(void)state;
	watches_the_containers_counter(0);
}

static void watch_as_its_user(void **state)
{
	(void)state;
	watches_the_containers_counter(NOBODY);
}

/*
 * The debug file where a distribution's debug package puts it: under /usr/lib/debug/.build-id in
 * the container's root, found by the program's build-id (moved back after).
 */
static void debug_file_by_build_id(bool there)
{
	assert_int_equal(lkt_sh(&r,
				"set -e; cd '%s'; id=$(%s -n '%s' | awk '/Build ID/ { print $3 }');"
				"d=usr/lib/debug/.build-id/$(echo $id | cut -c1-2); mkdir -p $d;"
				"f=$d/$(echo $id | cut -c3-).debug;"
				"if [ %d = 1 ]; then mv '.%s/.debug/prog.debug' $f;"
				"else mv $f '.%s/.debug/prog.debug'; fi",
				root, READELF, NS_PROG, there, app, app),
			 0);
}

static void watch_as_root_debug_by_build_id(void **state)
{
	(void)state;
	if (why_skip) {
		print_message("skipped: %s\n", why_skip);
		skip();
	}
	debug_file_by_build_id(true);
	watches_the_containers_counter(0);
	debug_file_by_build_id(false);
}

/* ---- what is at the program's name now ---- */

/*
 * Bind src over dst in process pid's mount namespace (both named as it names them). The child
 * takes a file system context of its own first: setns() into a mount namespace is refused while
 * another thread shares it, and a sanitizer's runtime may run a thread in a forked child.
 */
static void mount_in(pid_t pid, const char *src, const char *dst)
{
	char ns[64];
	int status;
	pid_t child = fork();

	assert_true(child >= 0);
	if (child == 0) {
		snprintf(ns, sizeof(ns), "/proc/%d/ns/mnt", (int)pid);
		int fd = open(ns, O_RDONLY | O_CLOEXEC);

		_exit(fd < 0 || unshare(CLONE_FS) != 0 || setns(fd, CLONE_NEWNS) != 0 ||
		      mount(src, dst, NULL, MS_BIND, NULL) != 0);
	}
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/*
 * As the program's user (who reads by name, map_files being root's), with something mounted over
 * the program's name (or its directory) in the container since it started: /proc/PID/maps still
 * names the file mapped, a lookup of that name finds the other. list --pid lists no site of it.
 */
static void covered_program(const char *src, const char *dst, const char *said)
{
	struct target t;
	char args[64];

	start(&t, NOBODY);
	mount_in(t.pid, src, dst);
	snprintf(args, sizeof(args), "list --pid %d", (int)t.pid);
	run_lowkey(NOBODY, args);
	if (strstr(r.out, "host_only") || (said && !strstr(r.out, said)))
		print_error("lowkey list --pid (exit %d):\n%s\n", r.status, r.out);
	assert_null(strstr(r.out, "host_only"));
	if (said)
		assert_non_null(strstr(r.out, said));
	stop(&t);
}

/* Another build at the name: its build-id is not the one in memory. */
static void another_build_is_not_read(void **state)
{
	char prog[160];
	FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
	int scope = 0;

	(void)state;
	if (f && fscanf(f, "%d", &scope) != 1)
		scope = 0;
	if (f)
		fclose(f);
	if (scope >= 2) {
		/* the program's user may not read its memory: nothing to compare the file with */
		print_message("skipped: Yama's ptrace_scope is %d (admin only)\n", scope);
		skip();
	}
	snprintf(prog, sizeof(prog), "%s/prog", app);
	covered_program("/other/prog", prog, "another build-id than the file it mapped");
}

/* A link to a host file at the name: it is resolved in the container's root, where none is. */
static void link_to_a_host_file_is_not_followed(void **state)
{
	(void)state;
	covered_program("/linkdir", app, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(list_as_root),
		cmocka_unit_test(list_as_its_user),
		cmocka_unit_test(watch_as_root),
		cmocka_unit_test(watch_as_its_user),
		cmocka_unit_test(watch_as_root_debug_by_build_id),
		cmocka_unit_test(another_build_is_not_read),
		cmocka_unit_test(link_to_a_host_file_is_not_followed),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
