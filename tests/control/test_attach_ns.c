// SPDX-License-Identifier: MIT
/*
 * `lowkey trace|enable|snapshot|list --pid` against a process in namespaces of its own, made here
 * with unshare(2) (tests/cli/namespaces.h): a private /tmp (systemd's PrivateTmp=), pid + mount
 * namespaces (the process is pid 1 there), pid + mount + user namespaces whose uid 0 is a
 * non-root uid of the host's (root of the host is not mapped there), and a root of its own
 * holding copies of the program and of lowkey. Each is attached to from the host as root, and
 * from inside its namespaces as its own user (nsenter), with the events counted exactly; and each
 * refusal says what is true. Root only; each case skips, saying why, where the
 * namespaces cannot be made here.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "cli/namespaces.h"
#include "cli/run.h"
#include "ctl_test.h"
#include "control/control_internal.h"

#define EVENTS 100     /* app:tick events the program emits per line it reads */
#define OTHER_UID 4242 /* the host uid of the user namespace's uid 0: not root, no one's */

static char scratch[] = SCRATCH_PARENT "/lkt-ns-XXXXXX";
/* the host's /tmp, which a process with a /tmp of its own does not see: outputs made from the host */
static char host_tmp[] = "/tmp/lkt-ns-out-XXXXXX";
static char host_path[1024];
static struct lkt_run r;
static char path[1024], err[1024];
static struct lkt_ns ns;

static int kinds_now;	     /* the case's namespaces: its files are named after them */
static const char *root_now; /* LKT_NS_ROOT: the root made for the process */

static const char *in_scratch(const char *name)
{
	snprintf(path, sizeof(path), "%s/%d-%s", scratch, kinds_now, name);
	return path;
}

/* name in the host's /tmp, where the process cannot see it */
static const char *on_host(const char *name)
{
	snprintf(host_path, sizeof(host_path), "%s/%d-%s", host_tmp, kinds_now, name);
	return host_path;
}

/* Whether the process sees anything at the path (under its own root). */
static bool seen_inside(const char *file)
{
	char inside[1400];
	struct stat st;

	snprintf(inside, sizeof(inside), "/proc/%d/root%s", (int)ns.pid, file);
	return lstat(inside, &st) == 0;
}

static int setup(void **state)
{
	(void)state;
	unsetenv("XDG_RUNTIME_DIR"); /* the socket goes to the process's own /tmp */
	if (!mkdtemp(scratch) || !mkdtemp(host_tmp))
		return -1;
	/* the user namespace's process writes its traces there; its user converts them here */
	return chmod(scratch, 0777) || chmod(host_tmp, 0777);
}

static int teardown(void **state)
{
	(void)state;
	lkt_ns_end(&ns);
	return lkt_sh(&r, "rm -rf '%s' '%s'", scratch, host_tmp);
}

/* Root, and the programs and the scratch directory outside /tmp, which the process does not see. */
static void need_root_outside_tmp(void)
{
	if (geteuid() != 0) {
		print_message("skipped: making namespaces and mapping users needs root\n");
		skip();
	}
	if (strncmp(scratch, "/tmp/", 5) == 0 || strncmp(LOWKEY, "/tmp/", 5) == 0 ||
	    strncmp(TARGET, "/tmp/", 5) == 0) {
		print_message("skipped: the build tree is under /tmp, which the process's own /tmp "
			      "hides\n");
		skip();
	}
}

/* Start argv in namespaces of kinds; skip, saying why, where they cannot be made here. */
static void start_in(int kinds, char *const argv[])
{
	char why[512], line[64];

	need_root_outside_tmp();
	kinds_now = kinds;
	ns = (struct lkt_ns){ .host_uid = (kinds & LKT_NS_USER) ? OTHER_UID : 0, .root = root_now };
	if (lkt_ns_spawn(&ns, kinds, argv, why, sizeof(why)) != 0) {
		print_message("skipped: %s\n", why);
		skip();
	}
	assert_non_null(fgets(line, sizeof(line), ns.out));
	assert_int_equal(strncmp(line, "ready ", 6), 0);
}

static void start_target(int kinds)
{
	start_in(kinds, (char *const[]){ TARGET, "on-input", "100", NULL });
}

/* The program emits EVENTS app:tick; returns once it has. */
static void poke(void)
{
	char line[64];

	assert_true(fputs("go\n", ns.in) >= 0 && fflush(ns.in) == 0);
	assert_non_null(fgets(line, sizeof(line), ns.out));
	assert_string_equal(line, "emitted\n");
}

/* The process's status, asked from here (root of the host): false when it cannot be asked. */
static bool status_of(struct lk__ctl_status *st)
{
	struct lk__ctl_msg req = { .type = LK_CTL_STATUS }, reply;
	struct lk__ctl_client c;
	bool ok;

	if (lk__ctl_connect(&c, ns.pid, err, sizeof(err)) != 0)
		return false;
	ok = lk__ctl_call(&c, &req, LK_CTL_STATUS_REPLY, &reply, 30000, err, sizeof(err)) == 0;
	lk__ctl_disconnect(&c);
	*st = reply.status; /* numbers only: the strings went with the client */
	return ok;
}

static bool tracing(void *arg)
{
	struct lk__ctl_status st;

	(void)arg;
	return status_of(&st) && st.running;
}

/* Its events have reached the trace on disk: the tracer is past its start, Ctrl-C is handled. */
static bool written(void *arg)
{
	struct lk__ctl_status st;

	(void)arg;
	return status_of(&st) && st.events >= EVENTS;
}

/* Run argv (lowkey, or nsenter with it) in the background, its output into log. */
static pid_t spawn(const char *log, char *const argv[])
{
	pid_t pid = fork();

	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(fd, 1);
		dup2(fd, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

static void wait_logged(pid_t pid, const char *log)
{
	int status = 0;
	FILE *f;
	size_t n;

	waitpid(pid, &status, 0);
	f = fopen(log, "r");
	n = f ? fread(r.out, 1, sizeof(r.out) - 1, f) : 0;
	r.out[n] = 0;
	if (f)
		fclose(f);
	r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/*
 * lowkey as the command line runs it: from the host, or inside the process's namespaces
 * ("nsenter -t PID -m [-p] [-U] --"); in a root of its own, the copy of lowkey that root holds,
 * with its libraries.
 */
static const char *lowkey_in(int kinds, bool inside)
{
	static char cmd[1200];
	bool own_root = kinds & LKT_NS_ROOT;

	if (!inside)
		return LOWKEY;
	snprintf(cmd, sizeof(cmd), "%snsenter -t %d -m %s %s -- %s",
		 own_root ? "env LD_LIBRARY_PATH=/ctr-lib " : "", (int)ns.pid,
		 (kinds & LKT_NS_PID) ? "-p" : "", (kinds & LKT_NS_USER) ? "-U" : "",
		 own_root ? "/ctr-bin/lowkey" : LOWKEY);
	return cmd;
}

/*
 * An output made from inside, named as lowkey there names it: the scratch directory, or in a root
 * of its own, which does not hold it, that root's /tmp.
 */
static const char *made_inside(int kinds, const char *name)
{
	static char inside[1200];

	if (kinds & LKT_NS_ROOT)
		snprintf(inside, sizeof(inside), "/tmp/%s", name);
	else
		snprintf(inside, sizeof(inside), "%s", in_scratch(name));
	return inside;
}

/* The same output, as this side reads it. */
static const char *read_here(int kinds, const char *inside)
{
	static char here[1300];

	if (kinds & LKT_NS_ROOT)
		snprintf(here, sizeof(here), "/proc/%d/root%s", (int)ns.pid, inside);
	else
		snprintf(here, sizeof(here), "%s", inside);
	return here;
}

/* The pid lowkey is given: the host's, or the one the process's own pid namespace gave it. */
static int pid_seen(int kinds, bool inside)
{
	return inside && (kinds & LKT_NS_PID) ? 1 : (int)ns.pid;
}

/* The child of nsenter (with -p it forks): lowkey, run inside; pid itself if none. */
static pid_t child_of(pid_t pid)
{
	char file[64];
	int child = 0;
	FILE *f;

	snprintf(file, sizeof(file), "/proc/%d/task/%d/children", (int)pid, (int)pid);
	f = fopen(file, "r");
	if (f && fscanf(f, "%d", &child) != 1)
		child = 0;
	if (f)
		fclose(f);
	return child > 0 ? child : pid;
}

/* How many app:tick events the JSON trace at file holds; -1 if it cannot be read. */
static int json_ticks(const char *file)
{
	char cmd[1400];
	int n = -1;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "grep -o '\"name\":\"tick\",\"cat\":\"app\"' '%s' | wc -l",
		 file);
	f = popen(cmd, "r");
	if (f && fscanf(f, "%d", &n) != 1)
		n = -1;
	if (f)
		pclose(f);
	return n;
}

/*
 * trace --pid until Ctrl-C: exactly the events emitted meanwhile, in the output at the path
 * the caller gave, on the caller's side: from the host, in the host's /tmp, which the process
 * does not see (nothing appears in its own); from inside, inside.
 */
static void trace_counts(int kinds, bool inside, const char *name, const char *format)
{
	char out[1300], log[1100], cmd[3000], pid[16];
	pid_t lk;

	snprintf(out, sizeof(out), "%s", inside ? made_inside(kinds, name) : on_host(name));
	snprintf(log, sizeof(log), "%s.log", in_scratch(name));
	snprintf(pid, sizeof(pid), "%d", pid_seen(kinds, inside));
	snprintf(cmd, sizeof(cmd), "exec %s trace --pid %s -e app:tick --format %s -o '%s'",
		 lowkey_in(kinds, inside), pid, format, out);
	lk = spawn(log, (char *const[]){ "/bin/sh", "-c", cmd, NULL });
	assert_true(lkt_wait_for(tracing, NULL));
	poke();
	assert_true(lkt_wait_for(written, NULL));
	kill(inside ? child_of(lk) : lk, SIGINT); /* nsenter does not pass Ctrl-C on */
	wait_logged(lk, log);
	lkt_expect(&r, 0, "events (0 lost)");
	assert_null(strstr(r.out, "in its own mount namespace"));
	if (inside)
		snprintf(out, sizeof(out), "%s", read_here(kinds, made_inside(kinds, name)));
	if (strcmp(format, "ctf") == 0)
		assert_int_equal(lkt_count(out, "app:tick").events, EVENTS);
	else
		assert_int_equal(json_ticks(out), EVENTS);
	if (!inside) {
		assert_false(seen_inside(out));
		assert_false(seen_inside(host_tmp));
	}
}

/* enable, list (app:tick on), disable, list (off). */
static void enable_and_list(int kinds, bool inside)
{
	const char *lowkey = lowkey_in(kinds, inside);
	int pid = pid_seen(kinds, inside);

	lkt_sh(&r, "%s enable --pid %d app:tick", lowkey, pid);
	lkt_expect(&r, 0, "app:tick: 2 sites on");
	lkt_sh(&r, "%s list --pid %d | grep -E '^ *app:tick +event +on '", lowkey, pid);
	lkt_expect(&r, 0, "app:tick");
	lkt_sh(&r, "%s disable --pid %d app:tick", lowkey, pid);
	lkt_expect(&r, 0, NULL);
	lkt_sh(&r, "%s list --pid %d | grep -E '^ *app:tick +event +off '", lowkey, pid);
	lkt_expect(&r, 0, "app:tick");
}

/*
 * A flight recorder started from the host, a snapshot taken from the host: EVENTS, made on the
 * host's side, where the process does not see it.
 */
static void snapshot_from_host(void)
{
	lkt_sh(&r, "%s trace --pid %d --overwrite -e app:tick -o '%s'", LOWKEY, (int)ns.pid,
	       in_scratch("fr.ctf"));
	lkt_expect(&r, 0, "flight recorder started");
	poke();
	lkt_sh(&r, "%s snapshot --pid %d -o '%s'", LOWKEY, (int)ns.pid, on_host("snap.ctf"));
	lkt_expect(&r, 0, on_host("snap.ctf"));
	assert_int_equal(lkt_count(on_host("snap.ctf"), "app:tick").events, EVENTS);
	assert_false(seen_inside(on_host("snap.ctf")));
	assert_false(seen_inside(host_tmp));
}

/* And one from inside, as its user, made where it sees its files: the same events again. */
static void snapshot_from_inside(int kinds)
{
	const char *out = made_inside(kinds, "snap-inside.ctf");

	lkt_sh(&r, "%s snapshot --pid %d -o '%s'", lowkey_in(kinds, true), pid_seen(kinds, true),
	       out);
	lkt_expect(&r, 0, NULL);
	assert_int_equal(lkt_count(read_here(kinds, out), "app:tick").events, EVENTS);
}

static void attach_both_sides(int kinds)
{
	start_target(kinds);
	enable_and_list(kinds, false);
	trace_counts(kinds, false, "host.ctf", "ctf");
	trace_counts(kinds, false, "host.json", "json");
	enable_and_list(kinds, true);
	trace_counts(kinds, true, "inside.ctf", "ctf");
	snapshot_from_host();
	snapshot_from_inside(kinds);
	lkt_ns_end(&ns);
}

static void private_tmp(void **state)
{
	(void)state;
	attach_both_sides(LKT_NS_TMP);
}

static void pid_and_mount_namespaces(void **state)
{
	(void)state;
	attach_both_sides(LKT_NS_TMP | LKT_NS_PID);
}

static void user_pid_and_mount_namespaces(void **state)
{
	(void)state;
	attach_both_sides(LKT_NS_TMP | LKT_NS_PID | LKT_NS_USER);
}

/*
 * A root of its own, as a container image gives: a copy of the program and of lowkey in /ctr-bin
 * and of their libraries in /ctr-lib, paths the host does not have, and ld.so where it was.
 */
static void build_root(const char *root)
{
	lkt_sh(&r,
	       "set -e; R='%s'; mkdir -p \"$R/ctr-bin\" \"$R/ctr-lib\" \"$R/tmp\" \"$R/proc\" "
	       "\"$R/.old\"; cp '%s' \"$R/ctr-bin/target\"; cp '%s' \"$R/ctr-bin/lowkey\";"
	       "for p in '%s' '%s'; do "
	       "  ldd \"$p\" | awk '/=> \\// { print $3 }' | while read -r lib; do "
	       "    cp -L \"$lib\" \"$R/ctr-lib/\"; done;"
	       "  interp=$(ldd \"$p\" | awk '$1 ~ /^\\// { print $1 }');"
	       "  [ -z \"$interp\" ] || { mkdir -p \"$R$(dirname \"$interp\")\";"
	       "    cp -L \"$interp\" \"$R$interp\"; };"
	       "done; chmod -R a+rX \"$R\"",
	       root, TARGET, LOWKEY, TARGET, LOWKEY);
	lkt_expect(&r, 0, NULL);
}

/*
 * trace, enable, list and snapshot --pid on a process in its own root: from the host as root, and
 * from inside its namespaces with the lowkey its root holds, outputs made inside.
 */
static void a_root_of_its_own(void **state)
{
	const int kinds = LKT_NS_TMP | LKT_NS_PID | LKT_NS_ROOT;
	char root[1024];

	(void)state;
	need_root_outside_tmp();
	kinds_now = kinds;
	snprintf(root, sizeof(root), "%s", in_scratch("root"));
	build_root(root);
	root_now = root;
	setenv("LD_LIBRARY_PATH", "/ctr-lib", 1); /* for the program, in its root */
	start_in(kinds, (char *const[]){ "/ctr-bin/target", "on-input", "100", NULL });
	unsetenv("LD_LIBRARY_PATH");
	root_now = NULL;
	assert_false(lkt_file_exists("/ctr-bin/target")); /* only its root has it */
	enable_and_list(kinds, false);
	trace_counts(kinds, false, "host.ctf", "ctf");
	trace_counts(kinds, false, "host.json", "json");
	enable_and_list(kinds, true);
	trace_counts(kinds, true, "inside.ctf", "ctf");
	snapshot_from_host();
	snapshot_from_inside(kinds);
	lkt_ns_end(&ns);
}

/* ---- refusals ---- */

/* Its control directory, in its own /tmp, is a symbolic link: said so, with where it is. */
static void a_bad_directory_inside_is_named(void **state)
{
	char cmd[1024];

	(void)state;
	snprintf(cmd, sizeof(cmd), "ln -s /nowhere /tmp/lowkey-0 && exec %s on-input 100", TARGET);
	start_in(LKT_NS_TMP | LKT_NS_PID, (char *const[]){ "/bin/sh", "-c", cmd, NULL });
	lkt_sh(&r, "%s trace --pid %d -e 'app:*' --duration 1", LOWKEY, (int)ns.pid);
	lkt_expect(&r, 1,
		   "was started with LOWKEY_CONTROL=1 but has no control socket open: "
		   "/tmp/lowkey-0 (in its mount namespace) is a symbolic link");
	assert_null(strstr(r.out, "start it with"));
	lkt_sh(&r, "%s enable --pid %d 'app:*'", LOWKEY, (int)ns.pid);
	lkt_expect(&r, 1, "is a symbolic link");
	assert_null(strstr(r.out, "start the program with"));
	lkt_ns_end(&ns);
}

/* lowkey under a seccomp filter that refuses openat2 (as a container's profile may). */
static _Noreturn void exec_without_openat2(char *const argv[])
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat2, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
		_exit(77);
	execv(argv[0], argv);
	_exit(127);
}

static void a_seccomp_profile_is_named(void **state)
{
	char pid[16], log[1024];
	pid_t lk;

	(void)state;
	start_target(LKT_NS_TMP);
	snprintf(pid, sizeof(pid), "%d", (int)ns.pid);
	snprintf(log, sizeof(log), "%s", in_scratch("seccomp.log"));
	lk = fork();
	if (lk == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(fd, 1);
		dup2(fd, 2);
		exec_without_openat2(
			(char *const[]){ LOWKEY, "enable", "--pid", pid, "app:tick", NULL });
	}
	wait_logged(lk, log);
	if (r.status == 77) {
		print_message("skipped: no seccomp filter can be set here\n");
		lkt_ns_end(&ns);
		skip();
	}
	lkt_expect(&r, 1, "openat2 is refused");
	assert_non_null(strstr(r.out, "a seccomp profile"));
	lkt_ns_end(&ns);
}

/* Root of a user namespace of its own (lowkey in a container) and a process outside it. */
static void a_user_namespace_not_owned_is_named(void **state)
{
	(void)state;
	start_target(LKT_NS_TMP);
	if (lkt_sh(&r, "setpriv --reuid=65534 --regid=65534 --clear-groups unshare -U -r true") !=
	    0) {
		print_message("skipped: nobody may not make a user namespace here (%s)\n", r.out);
		lkt_ns_end(&ns);
		skip();
	}
	lkt_sh(&r,
	       "setpriv --reuid=65534 --regid=65534 --clear-groups unshare -U -r %s enable --pid %d app:tick",
	       LOWKEY, (int)ns.pid);
	lkt_expect(&r, 1, "is in a user namespace that this root does not own");
	lkt_ns_end(&ns);
}

/*
 * Root with CAP_SETUID and CAP_SETGID dropped (as a container's root may be), and a process in a
 * user namespace that does not map root: the forked child that takes the process's uid and gid to
 * connect cannot take them.
 */
static void ids_that_cannot_be_taken_are_named(void **state)
{
	const char *drop = "setpriv --inh-caps=-all --ambient-caps=-all "
			   "--bounding-set=-setuid,-setgid";
	char want[512];

	(void)state;
	start_target(LKT_NS_TMP | LKT_NS_PID | LKT_NS_USER);
	if (lkt_sh(&r, "%s %s --version", drop, LOWKEY) != 0) {
		print_message("skipped: setpriv cannot drop capabilities here (%s)\n", r.out);
		lkt_ns_end(&ns);
		skip();
	}
	lkt_sh(&r, "%s %s enable --pid %d app:tick", drop, LOWKEY, (int)ns.pid);
	snprintf(want, sizeof(want),
		 "cannot take the ids of process %d (uid %d, gid %d) to connect to its socket "
		 "from outside its user namespace: %s: this root lacks CAP_SETUID or CAP_SETGID: "
		 "grant them, or run lowkey inside the process's namespaces as its user "
		 "(`nsenter -t %d -a`)",
		 (int)ns.pid, OTHER_UID, OTHER_UID, strerror(EPERM), (int)ns.pid);
	lkt_expect(&r, 1, want);
	lkt_ns_end(&ns);
}

/*
 * Its socket file replaced by a symbolic link to a socket of the host's at the same path: root
 * does not follow it out of the container (nothing listens), and the host's socket is never
 * connected to.
 */
static void a_link_in_the_sockets_place_is_not_followed(void **state)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	char inside[256];
	int decoy, fd;

	(void)state;
	start_target(LKT_NS_TMP | LKT_NS_PID);
	assert_true(strlen(in_scratch("decoy.sock")) < sizeof(addr.sun_path));
	memcpy(addr.sun_path, path, strlen(path) + 1);
	decoy = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0);
	assert_int_equal(bind(decoy, (struct sockaddr *)&addr, sizeof(addr)), 0);
	assert_int_equal(listen(decoy, 4), 0);
	snprintf(inside, sizeof(inside), "/proc/%d/root/tmp/lowkey-0/1.sock", (int)ns.pid);
	assert_int_equal(unlink(inside), 0);
	assert_int_equal(symlink(addr.sun_path, inside), 0);
	lkt_sh(&r, "%s enable --pid %d app:tick", LOWKEY, (int)ns.pid);
	lkt_expect(&r, 1, "nothing listens on /tmp/lowkey-0/1.sock");
	fd = accept(decoy, NULL, NULL);
	assert_int_equal(fd, -1); /* no one came */
	assert_int_equal(errno, EAGAIN);
	close(decoy);
	lkt_ns_end(&ns);
}

/* Another user's process: whose it is, and who may attach. */
static void another_users_process_is_named(void **state)
{
	(void)state;
	start_target(LKT_NS_TMP | LKT_NS_PID);
	if (lkt_sh(&r, "setpriv --reuid=65534 --regid=65534 --clear-groups %s --version", LOWKEY) !=
	    0) {
		print_message("skipped: nobody cannot run lowkey here (%s)\n", r.out);
		lkt_ns_end(&ns);
		skip();
	}
	lkt_sh(&r, "setpriv --reuid=65534 --regid=65534 --clear-groups %s enable --pid %d app:tick",
	       LOWKEY, (int)ns.pid);
	lkt_expect(&r, 1, "belongs to uid 0: run lowkey as that user or as root");
	assert_null(strstr(r.out, "LOWKEY_CONTROL=1"));
	lkt_ns_end(&ns);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(private_tmp),
		cmocka_unit_test(pid_and_mount_namespaces),
		cmocka_unit_test(user_pid_and_mount_namespaces),
		cmocka_unit_test(a_root_of_its_own),
		cmocka_unit_test(a_bad_directory_inside_is_named),
		cmocka_unit_test(a_seccomp_profile_is_named),
		cmocka_unit_test(a_user_namespace_not_owned_is_named),
		cmocka_unit_test(another_users_process_is_named),
		cmocka_unit_test(ids_that_cannot_be_taken_are_named),
		cmocka_unit_test(a_link_in_the_sockets_place_is_not_followed),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
