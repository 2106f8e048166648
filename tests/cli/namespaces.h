/* SPDX-License-Identifier: MIT */
/*
 * For tests: a program started in namespaces of its own, made with unshare(2) in the test itself
 * (no container runtime): a private /tmp (what systemd's PrivateTmp= and a container give), a pid
 * namespace (the program is its init, pid 1), a user namespace (its uid 0 there is a non-root uid
 * of the host's, so root of the host is not mapped into it), a root of its own (a directory the
 * test filled, made the root with pivot_root, as container runtimes do). Root only: the test
 * skips, saying why, where the kernel or the machine refuses.
 *
 * The process tree: the test, a keeper (which unshared; it stays in the test's pid namespace and
 * waits for the program), and the program. The program's stdin and stdout are pipes of the test's.
 */
#ifndef LKT_NAMESPACES_H
#define LKT_NAMESPACES_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

enum {
	LKT_NS_TMP = 1, /* a mount namespace with a tmpfs of its own on /tmp */
	LKT_NS_PID = 2, /* and a pid namespace: the program is its pid 1, /proc remounted */
	LKT_NS_USER =
		4, /* and a user namespace: uid and gid 0 inside are lkt_ns.host_uid outside */
	LKT_NS_ROOT = 8, /* and lkt_ns.root as its root (it holds /tmp and /proc to mount on) */
};

struct lkt_ns {
	pid_t pid;	  /* the program, as the test sees it */
	pid_t keeper;	  /* its parent, in the test's pid namespace */
	uid_t host_uid;	  /* LKT_NS_USER: whom the program's uid 0 is outside (not root) */
	const char *root; /* LKT_NS_ROOT: the directory made its root (argv[0] a path in it) */
	FILE *in, *out;	  /* the program's stdin and stdout */
};

/* What the keeper tells the test on the report pipe: a tag byte, then what it carries. */
enum { LKT_NS_MAPS = 1 /* write my maps */, LKT_NS_PID_IS = 2 /* pid_t follows */, LKT_NS_ERR = 3 };

/* Say on fd what failed and errno (LKT_NS_ERR, text until the pipe closes), and end. */
static inline _Noreturn void lkt_ns_fail(int fd, const char *what)
{
	char line[256];
	int n = snprintf(line, sizeof(line), "%c%s: %s", LKT_NS_ERR, what, strerror(errno));

	if (write(fd, line, (size_t)n) < 0)
		_exit(1);
	_exit(1);
}

static inline bool lkt_ns_write(pid_t pid, const char *file, const char *text)
{
	char path[64];
	int fd;
	bool ok;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
	close(fd);
	return ok;
}

/*
 * lkt_ns_pivot - in a private mount namespace, make root (a directory holding a /.old) this
 * process's root, the old one detached: what a container runtime does. 0, or -1 with errno.
 */
static inline int lkt_ns_pivot(const char *root)
{
	if (mount(root, root, NULL, MS_BIND | MS_REC, NULL) != 0 || chdir(root) != 0 ||
	    syscall(SYS_pivot_root, ".", ".old") != 0 || chdir("/") != 0 ||
	    umount2("/.old", MNT_DETACH) != 0)
		return -1;
	return 0;
}

/* In the program, before exec: its own /proc in a pid namespace; then argv with LOWKEY_CONTROL=1. */
static inline _Noreturn void lkt_ns_exec(int report, int kinds, char *const argv[])
{
	/* in a root of its own, /proc is not a mount point yet: nothing to make private */
	if ((kinds & LKT_NS_PID) &&
	    ((!(kinds & LKT_NS_ROOT) &&
	      mount(NULL, "/proc", NULL, MS_REC | MS_PRIVATE, NULL) != 0) ||
	     mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0))
		lkt_ns_fail(report, "mount /proc in the pid namespace");
	setenv("LOWKEY_CONTROL", "1", 1);
	execv(argv[0], argv); /* report is close-on-exec: the test reads its end */
	lkt_ns_fail(report, "exec");
}

/*
 * The keeper: unshare, wait for the maps, take its root, make /tmp private, start the program,
 * wait for it.
 */
static inline _Noreturn void lkt_ns_keeper(int report, int go, int kinds, const char *root,
					   char *const argv[])
{
	int flags = CLONE_NEWNS | ((kinds & LKT_NS_PID) ? CLONE_NEWPID : 0) |
		    ((kinds & LKT_NS_USER) ? CLONE_NEWUSER : 0);
	char msg[1 + sizeof(pid_t)] = { LKT_NS_MAPS }, c;
	int status = 0;
	pid_t pid;

	if (unshare(flags) != 0)
		lkt_ns_fail(report, "unshare");
	if (kinds & LKT_NS_USER) {
		if (write(report, msg, 1) != 1 || read(go, &c, 1) != 1)
			_exit(1);
		if (setresgid(0, 0, 0) != 0 || setresuid(0, 0, 0) != 0)
			lkt_ns_fail(report, "setresuid in the user namespace");
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		lkt_ns_fail(report, "make the mounts private");
	if ((kinds & LKT_NS_ROOT) && lkt_ns_pivot(root) != 0)
		lkt_ns_fail(report, "pivot_root into the root made for it");
	if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0)
		lkt_ns_fail(report, "mount a tmpfs on /tmp");
	pid = fork();
	if (pid < 0)
		lkt_ns_fail(report, "fork");
	if (pid == 0)
		lkt_ns_exec(report, kinds, argv);
	msg[0] = LKT_NS_PID_IS;
	memcpy(msg + 1, &pid, sizeof(pid));
	if (write(report, msg, sizeof(msg)) != (ssize_t)sizeof(msg))
		_exit(1);
	close(report);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

/* Read the keeper's report to its end: 0 and ns->pid, or -1 and why. */
static inline int lkt_ns_report(struct lkt_ns *ns, int kinds, int report, int go, char *why,
				size_t whylen)
{
	char buf[512], map[64];
	size_t n = 0;
	ssize_t got;

	while ((got = read(report, buf + n, sizeof(buf) - 1 - n)) > 0 ||
	       (got < 0 && errno == EINTR)) {
		n += got > 0 ? (size_t)got : 0;
		if (n == 1 && buf[0] == LKT_NS_MAPS && (kinds & LKT_NS_USER)) {
			snprintf(map, sizeof(map), "0 %u 1\n", (unsigned int)ns->host_uid);
			if (!lkt_ns_write(ns->keeper, "setgroups", "deny\n") ||
			    !lkt_ns_write(ns->keeper, "uid_map", map) ||
			    !lkt_ns_write(ns->keeper, "gid_map", map))
				return snprintf(why, whylen, "writing the uid and gid maps: %s",
						strerror(errno)),
				       -1;
			if (write(go, "g", 1) != 1)
				return snprintf(why, whylen, "the keeper went"), -1;
			n = 0;
		}
	}
	buf[n] = 0;
	if (n == 1 + sizeof(pid_t) && buf[0] == LKT_NS_PID_IS) {
		memcpy(&ns->pid, buf + 1, sizeof(pid_t));
		return 0;
	}
	if (n > 1 + sizeof(pid_t) && buf[0] == LKT_NS_PID_IS) /* the program's exec failed */
		snprintf(why, whylen, "%s", buf + 2 + sizeof(pid_t));
	else
		snprintf(why, whylen, "%s", n > 1 ? buf + 1 : "the keeper ended");
	return -1;
}

/*
 * lkt_ns_spawn - start argv (argv[0] a path) in new namespaces of kinds (LKT_NS_*, ored), with
 * LOWKEY_CONTROL=1. For LKT_NS_USER, set ns->host_uid first (the gid is the same number); for
 * LKT_NS_ROOT, ns->root (argv[0] is then a path under it, as the program sees it). Returns
 * 0 with ns->pid, in and out; or -1 with why (the step refused: the test skips saying it).
 */
static inline int lkt_ns_spawn(struct lkt_ns *ns, int kinds, char *const argv[], char *why,
			       size_t whylen)
{
	int report[2], go[2], in[2], out[2], rc;

	if (pipe2(report, O_CLOEXEC) || pipe2(go, O_CLOEXEC) || pipe(in) || pipe(out))
		return snprintf(why, whylen, "pipe: %s", strerror(errno)), -1;
	ns->keeper = fork();
	if (ns->keeper == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[0]), close(in[1]), close(out[0]), close(out[1]);
		close(report[0]), close(go[1]);
		lkt_ns_keeper(report[1], go[0], kinds, ns->root, argv);
	}
	close(report[1]), close(go[0]), close(in[0]), close(out[1]);
	rc = lkt_ns_report(ns, kinds, report[0], go[1], why, whylen);
	close(report[0]), close(go[1]);
	if (rc) {
		kill(ns->keeper, SIGKILL);
		waitpid(ns->keeper, NULL, 0);
		close(in[1]), close(out[0]);
		return -1;
	}
	ns->in = fdopen(in[1], "w");
	ns->out = fdopen(out[0], "r");
	return 0;
}

/* End the program (SIGKILL reaches even a pid namespace's init from outside) and its keeper. */
static inline void lkt_ns_end(struct lkt_ns *ns)
{
	if (ns->pid > 0)
		kill(ns->pid, SIGKILL);
	if (ns->keeper > 0)
		waitpid(ns->keeper, NULL, 0);
	if (ns->in)
		fclose(ns->in);
	if (ns->out)
		fclose(ns->out);
	*ns = (struct lkt_ns){ 0 };
}

#endif
