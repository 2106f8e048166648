// SPDX-License-Identifier: MIT
/*
 * The client side of the control socket, for `lowkey` and the tests: finding a process's socket,
 * connecting, and request/reply.
 *
 * The socket's path is found from the process itself: its open sockets (/proc/PID/fd) matched
 * against the bound Unix sockets of its network namespace (/proc/PID/net/unix), so whatever
 * XDG_RUNTIME_DIR the process had, the right socket is found. Where those cannot be read (a
 * non-dumpable process), the places the library uses are tried. Once connected, the peer's
 * credentials must name the process asked for: a socket file left by an earlier process with the
 * same pid is never mistaken for it.
 *
 * The process is pinned from the first look at it (a pidfd and its start time): a process under
 * 1 s old is waited for, and if it exits meanwhile, another user's process may take its pid. What
 * is read from /proc/PID counts only once the pinned process is seen alive after the read; when it
 * has exited, the answer is that it exited, never what the pid's new owner has.
 *
 * The process at the other end may be hostile (another user's, with root as the client): every
 * wait for it is bounded, and so is what it can make this side read.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <linux/capability.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "internal/failf.h"
#include "internal/proc.h"
#include "control/control_internal.h"

/* ---- finding the socket ---- */

#define MAX_SOCKETS 1024

/* The inodes of pid's open sockets; -errno when its fds cannot be read (listed, or followed). */
static int socket_inodes(pid_t pid, unsigned long *inodes, size_t *n)
{
	char dir[64], link[PATH_MAX], target[64];
	struct dirent *e;
	int denied = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	d = opendir(dir);
	if (!d)
		return -errno;
	*n = 0;
	while ((e = readdir(d)) && *n < MAX_SOCKETS) {
		ssize_t len;

		if (e->d_name[0] == '.')
			continue;
		snprintf(link, sizeof(link), "%s/%s", dir, e->d_name);
		len = readlink(link, target, sizeof(target) - 1);
		if (len < 0 && (errno == EACCES || errno == EPERM))
			denied = -errno;
		if (len <= 0)
			continue;
		target[len] = 0;
		if (sscanf(target, "socket:[%lu]", &inodes[*n]) == 1)
			(*n)++;
	}
	closedir(d);
	return *n ? 0 : denied;
}

static bool is_control_path(const char *path, pid_t pid)
{
	char tail[32];
	size_t lp = strlen(path), lt;

	snprintf(tail, sizeof(tail), "/%d.sock", (int)pid);
	lt = strlen(tail);
	return lp > lt && strcmp(path + lp - lt, tail) == 0 && strstr(path, "lowkey");
}

/*
 * A listening SOCK_SEQPACKET socket of pid's named like a control socket: named by nspid, the pid
 * its own pid namespace gave it. The path is the one it bound, in its own mount namespace.
 */
static int socket_from_proc(pid_t pid, pid_t nspid, char *path, size_t len)
{
	unsigned long *inodes = malloc(MAX_SOCKETS * sizeof(*inodes));
	char file[64], line[PATH_MAX + 128], name[PATH_MAX];
	size_t n = 0;
	int rc;
	FILE *f;

	if (!inodes)
		return -ENOMEM;
	rc = socket_inodes(pid, inodes, &n);
	snprintf(file, sizeof(file), "/proc/%d/net/unix", (int)pid);
	f = rc ? NULL : fopen(file, "re");
	if (!rc && !f)
		rc = -errno;
	rc = rc ? rc : -ENOENT;
	while (f && fgets(line, sizeof(line), f)) {
		unsigned int flags, type;
		unsigned long inode;

		if (sscanf(line, "%*s %*s %*s %x %x %*s %lu %4095s", &flags, &type, &inode, name) !=
		    4)
			continue;
		if (type != SOCK_SEQPACKET || !(flags & 0x10000) || !is_control_path(name, nspid))
			continue; /* 0x10000: __SO_ACCEPTCON, listening */
		for (size_t i = 0; i < n; i++) {
			if (inodes[i] == inode && strlen(name) < len) {
				snprintf(path, len, "%s", name);
				rc = 0;
				break;
			}
		}
		if (!rc)
			break;
	}
	if (f)
		fclose(f);
	free(inodes);
	return rc;
}

/* The value of variable name (with its '=') in pid's environment, if readable and set. */
static bool process_env(pid_t pid, const char *name, char *out, size_t len)
{
	char file[64], buf[65536];
	size_t n, lname = strlen(name);
	FILE *f;

	snprintf(file, sizeof(file), "/proc/%d/environ", (int)pid);
	f = fopen(file, "re");
	if (!f)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	for (size_t i = 0; i < n; i += strlen(buf + i) + 1) {
		if (strncmp(buf + i, name, lname) == 0) {
			snprintf(out, len, "%s", buf + i + lname);
			return true;
		}
	}
	return false;
}

/* XDG_RUNTIME_DIR from pid's environment, if readable and absolute. */
static bool process_xdg(pid_t pid, char *out, size_t len)
{
	return process_env(pid, "XDG_RUNTIME_DIR=", out, len) && out[0] == '/';
}

/* The effective uid and gid of pid (its status, which anyone may read); false when there is no such process. */
static bool process_owner(pid_t pid, uid_t *uid, gid_t *gid)
{
	struct lk__proc_ids ids;

	if (lk__proc_ids(pid, &ids) != 0)
		return false;
	*uid = ids.euid;
	*gid = ids.egid;
	return true;
}

/* Where the library would have put the socket, in the process's own view; the first that exists. */
static int socket_from_candidates(const struct lk__view *v, char *path, size_t len)
{
	char cand[4][PATH_MAX], xdg[PATH_MAX];
	const char *mine = getenv("XDG_RUNTIME_DIR");
	unsigned int uid = (unsigned int)v->nsuid;
	int n = 0, denied = 0, pid = (int)v->nspid, rc;
	struct stat st;

	if (process_xdg(v->pid, xdg, sizeof(xdg)))
		snprintf(cand[n++], PATH_MAX, "%.4000s/lowkey/%d.sock", xdg, pid);
	snprintf(cand[n++], PATH_MAX, "/tmp/lowkey-%u/%d.sock", uid, pid);
	snprintf(cand[n++], PATH_MAX, "/run/user/%u/lowkey/%d.sock", uid, pid);
	if (mine && mine[0] == '/' && !v->other_mnt)
		snprintf(cand[n++], PATH_MAX, "%.4000s/lowkey/%d.sock", mine, pid);
	for (int i = 0; i < n; i++) {
		rc = lk__view_stat(v, cand[i], &st, true);
		if (rc == 0 && S_ISSOCK(st.st_mode) && strlen(cand[i]) < len) {
			snprintf(path, len, "%s", cand[i]);
			return 0;
		}
		denied |= rc == -EACCES;
	}
	return denied ? -EACCES : -ENOENT;
}

/*
 * What is wrong with dir (the process's path) as the control directory of the process (see
 * lk__control_dir); NULL: nothing.
 */
static const char *dir_problem(const struct lk__view *v, const char *dir, char *why, size_t len)
{
	const char *where = v->other_mnt ? " (in its mount namespace)" : "";
	uid_t uid = v->uid;
	struct stat st;
	int rc = lk__view_stat(v, dir, &st, false);

	if (rc != 0)
		snprintf(why, len, "%s%s cannot be looked at (%s)", dir, where, strerror(-rc));
	else if (S_ISLNK(st.st_mode))
		snprintf(why, len, "%s%s is a symbolic link: remove it", dir, where);
	else if (!S_ISDIR(st.st_mode))
		snprintf(why, len, "%s%s is not a directory: remove it", dir, where);
	else if (st.st_uid != uid)
		snprintf(
			why, len,
			"%s%s belongs to uid %u, not to the process's uid %u: someone else made it; remove it",
			dir, where, (unsigned int)st.st_uid, (unsigned int)uid);
	else if (st.st_mode & 077)
		snprintf(why, len, "%s%s is open to other users (mode %03o): `chmod 700 %s`", dir,
			 where, (unsigned int)(st.st_mode & 0777), dir);
	else
		return NULL;
	return why;
}

/* The directory the process's library would use for its socket (lk__control_dir, seen from outside). */
static void control_dir(const struct lk__view *v, char *dir, size_t len)
{
	char xdg[PATH_MAX], why[64];

	if (process_xdg(v->pid, xdg, sizeof(xdg)) && !dir_problem(v, xdg, why, sizeof(why)) &&
	    strlen(xdg) + sizeof("/lowkey/4194304.sock") <=
		    sizeof(((struct sockaddr_un *)0)->sun_path) &&
	    snprintf(dir, len, "%s/lowkey", xdg) < (int)len)
		return;
	snprintf(dir, len, "/tmp/lowkey-%u", (unsigned int)v->nsuid);
}

bool lk__ctl_asked(pid_t pid)
{
	char value[64];
	bool asked = false;

	return process_env(pid, "LOWKEY_CONTROL=", value, sizeof(value)) &&
	       lk__parse_bool(value, &asked) == 0 && asked;
}

/* pid has no socket open: -ENOENT, or -ENOTCONN when its environment asked for one, with why not. */
static int no_socket(const struct lk__view *v, char *err, size_t errlen)
{
	char dir[PATH_MAX], why[PATH_MAX + 128];
	pid_t pid = v->pid;

	if (!lk__ctl_asked(pid))
		return lk__failf(err, errlen, -ENOENT,
				 "process %d has no lowkey control socket open", (int)pid);
	control_dir(v, dir, sizeof(dir));
	if (!dir_problem(v, dir, why, sizeof(why)))
		return lk__failf(
			err, errlen, -ENOTCONN,
			"process %d was started with LOWKEY_CONTROL=1 but has no "
			"control socket open: it has closed it (lk_control_close) or could not open it",
			(int)pid);
	return lk__failf(err, errlen, -ENOTCONN,
			 "process %d was started with LOWKEY_CONTROL=1 but has no control "
			 "socket open: %s, and restart the process",
			 (int)pid, why);
}

/* When pid was started: /proc/PID/stat's starttime (field 22), clock ticks after boot. */
static bool process_start(pid_t pid, unsigned long long *start)
{
	char file[64], buf[1024], *p;
	size_t n;
	FILE *f;

	snprintf(file, sizeof(file), "/proc/%d/stat", (int)pid);
	f = fopen(file, "re");
	if (!f)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
	/* after the name: state (field 3) ... starttime (field 22) */
	return p &&
	       sscanf(p + 1,
		      " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
		      start) == 1;
}

/* How long ago the pinned process was started (ms), on the boot clock; -1 if the clock cannot tell. */
static int64_t process_age_ms(const struct lk__ctl_pin *pin)
{
	long ticks = sysconf(_SC_CLK_TCK);
	struct timespec now;

	if (ticks <= 0 || clock_gettime(CLOCK_BOOTTIME, &now) != 0)
		return -1;
	return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000 -
	       (int64_t)(pin->start * 1000 / (unsigned long long)ticks);
}

/* ---- pinning the process ---- */

static int open_pidfd(pid_t pid)
{
#ifdef SYS_pidfd_open
	return (int)syscall(SYS_pidfd_open, pid, 0); /* close-on-exec */
#else
	(void)pid;
	errno = ENOSYS;
	return -1;
#endif
}

int lk__ctl_pin(struct lk__ctl_pin *p, pid_t pid, char *err, size_t errlen)
{
	*p = (struct lk__ctl_pin){ .pid = pid, .pidfd = pid > 0 ? open_pidfd(pid) : -1 };
	/*
	 * Without a pidfd (a kernel before 5.3, a seccomp filter, a thread's id, which pidfd_open
	 * refuses before 6.9) the start time alone tells the process from one that takes its pid
	 * later: two started within the same clock tick are not told apart.
	 */
	if (pid <= 0 || (p->pidfd < 0 && errno == ESRCH) || !process_start(pid, &p->start)) {
		lk__ctl_unpin(p);
		return lk__failf(err, errlen, -ESRCH, "no process %d: check the pid (ps, pidof)",
				 (int)pid);
	}
	if (lk__ctl_pin_check(p) != 0) {
		lk__ctl_unpin(p);
		return lk__failf(err, errlen, -ESRCH, "process %d exited as lowkey looked at it",
				 (int)pid);
	}
	return 0;
}

int lk__ctl_pin_check(const struct lk__ctl_pin *p)
{
	struct pollfd q = { .fd = p->pidfd, .events = POLLIN };
	unsigned long long start;
	int rc = 0;

	if (p->pidfd >= 0) {
		do
			rc = poll(&q, 1, 0); /* readable once it has exited */
		while (rc < 0 && errno == EINTR);
	}
	if (rc != 0 || !process_start(p->pid, &start) || start != p->start)
		return -ESRCH;
	return 0;
}

void lk__ctl_unpin(struct lk__ctl_pin *p)
{
	if (p->pidfd >= 0)
		close(p->pidfd);
	p->pidfd = -1;
	p->pid = 0;
}

/* rc, a finding about the pinned process from /proc, if that process has not exited since. */
static int pinned(const struct lk__ctl_pin *pin, int rc, char *err, size_t errlen)
{
	if (lk__ctl_pin_check(pin) == 0)
		return rc;
	return lk__failf(err, errlen, -ESRCH,
			 "process %d exited while lowkey attached to it; a process that "
			 "has its pid now is left alone",
			 (int)pin->pid);
}

/* Wait 10 ms, or less if the pinned process exits. */
static void pause_on(const struct lk__ctl_pin *pin)
{
	struct timespec ts = { 0, 10 * 1000000L };
	struct pollfd q = { .fd = pin->pidfd, .events = POLLIN };

	if (pin->pidfd >= 0)
		poll(&q, 1, 10);
	else
		nanosleep(&ts, NULL);
}

/*
 * `LOWKEY_CONTROL=1 prog & lowkey trace --pid $!` comes in while the process is starting: the
 * shell's forked child may not have exec'd the program yet (its environment is still the shell's,
 * without LOWKEY_CONTROL), or the loader still maps the program's libraries before liblowkey's
 * constructor opens the socket. A process is waited for until it is LK_CTL_YOUNG_MS old whatever
 * it says, and until it is LK_CTL_STARTUP_MS old if it asked for a socket whose directory can
 * serve.
 */
#define LK_CTL_YOUNG_MS 1000
#define LK_CTL_STARTUP_MS 5000

static bool may_still_open_its_socket(const struct lk__ctl_pin *pin, const struct lk__view *v)
{
	char dir[PATH_MAX], why[PATH_MAX + 128];
	int64_t age = process_age_ms(pin);
	struct stat st;
	int rc;

	if (age >= 0 && age < LK_CTL_YOUNG_MS)
		return true;
	if (age < 0 || age >= LK_CTL_STARTUP_MS || !lk__ctl_asked(pin->pid))
		return false;
	control_dir(v, dir, sizeof(dir));
	rc = lk__view_stat(v, dir, &st, false);
	if (rc != 0)
		return rc == -ENOENT;		       /* a directory it will make */
	return !dir_problem(v, dir, why, sizeof(why)); /* else it never will */
}

/* Whether this process is in the initial user namespace (its uid_map maps every uid to itself). */
static bool in_initial_userns(void)
{
	unsigned long inside, outside, count;
	FILE *f = fopen("/proc/self/uid_map", "re");
	bool initial = f && fscanf(f, "%lu %lu %lu", &inside, &outside, &count) == 3 &&
		       inside == 0 && outside == 0 && count == 4294967295UL;

	if (f)
		fclose(f);
	return initial;
}

/* The process is in another mount namespace whose root cannot be reached from here: why, and what to do. */
static int out_of_reach(const struct lk__view *v, char *err, size_t errlen)
{
	int pid = (int)v->pid;

	if (v->resolve_err)
		return lk__failf(
			err, errlen, -EPERM,
			"process %d is in another mount namespace (a container, or a service with "
			"PrivateTmp=) and its files cannot be reached safely from here: openat2 is "
			"refused (%s: a seccomp profile, or a kernel before 5.6): run lowkey inside "
			"the process's container (`docker exec`, `kubectl debug`) or on the host",
			pid, strerror(v->resolve_err));
	if (geteuid() == 0 && !in_initial_userns())
		return lk__failf(
			err, errlen, -EPERM,
			"process %d is in a user namespace that this root does not own (lowkey runs "
			"in a container or user namespace of its own): run lowkey on the host as "
			"root, or inside the process's container",
			pid);
	return lk__failf(err, errlen, -EPERM,
			 "process %d is in another mount namespace (a container, or a service with "
			 "PrivateTmp=) that this user may not enter: no ptrace access over it (%s; "
			 "CAP_SYS_PTRACE grants it): run lowkey as root, or inside the process's "
			 "namespaces as its user (`nsenter -t %d -a`, `docker exec`)",
			 pid, strerror(v->root_err), pid);
}

/* Where the pinned process's socket is, waiting for it while it may still open it; see find_socket. */
static int find_socket(const struct lk__ctl_pin *pin, const struct lk__view *v, char *path,
		       size_t len, char *err, size_t errlen)
{
	pid_t pid = pin->pid;
	bool wait;
	int rc;

	for (;;) {
		rc = socket_from_proc(pid, v->nspid, path, len);
		wait = rc == -ENOENT && may_still_open_its_socket(pin, v);
		if (lk__ctl_pin_check(pin) != 0 || !wait)
			break;
		pause_on(pin);
	}
	if (rc == 0)
		return 0;
	if (rc == -ENOENT)
		return no_socket(v, err, errlen);
	if (socket_from_candidates(v, path, len) == 0)
		return 0;
	if (v->root < 0 && (v->other_mnt || (geteuid() == 0 && !in_initial_userns())))
		return out_of_reach(v, err, errlen);
	if (v->uid != geteuid() && geteuid() != 0)
		return lk__failf(err, errlen, -EACCES, "process %d belongs to uid %u", (int)pid,
				 (unsigned int)v->uid);
	return lk__failf(
		err, errlen, -EPERM,
		"cannot tell whether process %d has a lowkey control socket open: "
		"its open files (/proc/%d/fd) cannot be read here (%s): it is out of this user's reach (another "
		"namespace, no CAP_SYS_PTRACE over it) or not dumpable",
		(int)pid, (int)pid, strerror(-rc));
}

/* The pinned process's view of its files (see lk__view_open), or why it cannot be had. */
static int open_view(const struct lk__ctl_pin *pin, struct lk__view *v, char *err, size_t errlen)
{
	uid_t uid;
	gid_t gid;

	if (!process_owner(pin->pid, &uid, &gid)) {
		*v = (struct lk__view){ .root = -1 };
		return lk__failf(err, errlen, -ESRCH, "no process %d", (int)pin->pid);
	}
	if (lk__view_open(v, pin->pid, uid, gid) != 0)
		return out_of_reach(v, err, errlen);
	return 0;
}

int lk__ctl_find_socket(const struct lk__ctl_pin *pin, char *path, size_t len, char *err,
			size_t errlen)
{
	struct lk__view v;
	int rc = open_view(pin, &v, err, errlen);

	if (!rc)
		rc = find_socket(pin, &v, path, len, err, errlen);
	lk__view_close(&v);
	return pinned(pin, rc, err, errlen);
}

/* ---- connecting ---- */

static void reset(struct lk__ctl_client *c)
{
	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->pin.pidfd = -1;
	c->uid = (uid_t)-1;
	c->gid = (gid_t)-1;
}

/*
 * The forked child could not take the process's uid and gid (rc): a root without CAP_SETUID or
 * CAP_SETGID (dropped, as a container's root may be), else something that refuses the calls.
 */
static int ids_not_taken(const struct lk__view *v, int rc, char *err, size_t errlen)
{
	const char *why = lk__has_cap(CAP_SETUID) && lk__has_cap(CAP_SETGID) ?
				  "a seccomp profile or a security module refuses it: " :
				  "this root lacks CAP_SETUID or CAP_SETGID: grant them, or ";

	return lk__failf(err, errlen, rc,
			 "cannot take the ids of process %d (uid %u, gid %u) to connect to its "
			 "socket from outside its user namespace: %s: %srun lowkey inside the "
			 "process's namespaces as its user (`nsenter -t %d -a`)",
			 (int)v->pid, (unsigned int)v->uid, (unsigned int)v->gid, strerror(-rc),
			 why, (int)v->pid);
}

/* Connected (fd) to path, or why not (rc, -errno: ids, the process's ids could not be taken). */
static int take_connection(struct lk__ctl_client *c, int rc, bool ids, const struct lk__view *v,
			   const char *path, pid_t expect_pid, char *err, size_t errlen)
{
	struct ucred cred;
	socklen_t credlen = sizeof(cred);

	snprintf(c->path, sizeof(c->path), "%s", path);
	if (rc >= 0)
		c->fd = rc;
	else if (ids)
		return ids_not_taken(v, rc, err, errlen);
	else if (rc == -ECONNREFUSED)
		return lk__failf(err, errlen, rc,
				 "nothing listens on %s (its process has exited or closed it)",
				 path);
	else if (rc == -EACCES || rc == -EPERM)
		return lk__failf(err, errlen, -EACCES,
				 "no permission to connect to %s: it belongs to another user",
				 path);
	else if (rc == -ENAMETOOLONG)
		return lk__failf(err, errlen, rc, "socket path too long: %s", path);
	else
		return lk__failf(err, errlen, rc, "cannot connect to %s: %s", path, strerror(-rc));
	if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cred, &credlen) != 0) {
		rc = -errno;
		lk__ctl_disconnect(c);
		return lk__failf(err, errlen, rc, "cannot read the credentials of %s: %s", path,
				 strerror(-rc));
	}
	/* cred.pid: the thread group of the thread that called listen(), as this side sees it */
	if (expect_pid && cred.pid != expect_pid) {
		lk__ctl_disconnect(c);
		return lk__failf(err, errlen, -ESTALE, "%s is served by process %d, not %d", path,
				 (int)cred.pid, (int)expect_pid);
	}
	c->pid = cred.pid;
	return 0;
}

int lk__ctl_connect_path(struct lk__ctl_client *c, const char *path, pid_t expect_pid, char *err,
			 size_t errlen)
{
	const struct lk__view here = { .root = -1 };
	bool ids = false;
	int rc;

	reset(c);
	if (strlen(path) >= sizeof(c->path))
		return lk__failf(err, errlen, -ENAMETOOLONG, "socket path too long: %s", path);
	rc = lk__view_connect(&here, path, &ids);
	return take_connection(c, rc, ids, &here, path, expect_pid, err, errlen);
}

/* Find the pinned process's socket and connect to it, both in its own view. */
static int connect_pinned(struct lk__ctl_client *c, const struct lk__ctl_pin *pin, char *err,
			  size_t errlen)
{
	char path[sizeof(c->path)];
	struct lk__view v;
	bool ids = false;
	int rc = open_view(pin, &v, err, errlen);

	if (!rc)
		rc = find_socket(pin, &v, path, sizeof(path), err, errlen);
	if (!rc) {
		rc = lk__view_connect(&v, path, &ids);
		rc = take_connection(c, rc, ids, &v, path, pin->pid, err, errlen);
		c->other_mnt = v.other_mnt;
	}
	lk__view_close(&v);
	return rc;
}

int lk__ctl_connect(struct lk__ctl_client *c, pid_t pid, char *err, size_t errlen)
{
	struct lk__ctl_pin pin;
	uid_t uid = (uid_t)-1;
	gid_t gid = (gid_t)-1;
	int rc;

	reset(c);
	rc = lk__ctl_pin(&pin, pid, err, errlen);
	if (rc)
		return rc;
	rc = connect_pinned(c, &pin, err, errlen);
	if (!rc && !process_owner(pid, &uid, &gid))
		rc = lk__failf(err, errlen, -ESRCH, "no process %d", (int)pid);
	/*
	 * The peer's pid is pid and the pinned process still has it: the pinned process is what
	 * listens, and its owner now is the owner of what answers. Whatever went wrong, if it has
	 * exited, that is the news.
	 */
	rc = pinned(&pin, rc, err, errlen);
	if (rc) {
		lk__ctl_disconnect(c);
		lk__ctl_unpin(&pin);
		return rc;
	}
	c->pin = pin;
	c->uid = uid;
	c->gid = gid;
	return 0;
}

int lk__ctl_check(const struct lk__ctl_client *c, char *err, size_t errlen)
{
	if (!c->pin.pid || lk__ctl_pin_check(&c->pin) == 0)
		return 0;
	return lk__failf(err, errlen, -ESRCH, "process %d exited", (int)c->pin.pid);
}

void lk__ctl_disconnect(struct lk__ctl_client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	lk__ctl_unpin(&c->pin);
}

/* ---- messages ---- */

ssize_t lk__send_with_fd(int sock, const void *buf, size_t len, int fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { (void *)buf, len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;

	if (fd >= 0) {
		memset(cbuf, 0, sizeof(cbuf));
		msg.msg_control = cbuf;
		msg.msg_controllen = sizeof(cbuf);
		cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	return sendmsg(sock, &msg, MSG_NOSIGNAL);
}

int lk__ctl_send_fd(struct lk__ctl_client *c, struct lk__ctl_msg *m, int fd)
{
	uint8_t buf[LK_CTL_MAX_MSG];
	int n;

	if ((fd >= 0) != (lk__ctl_request_fds(m) == 1))
		return -EINVAL;
	m->seq = ++c->seq;
	n = lk__ctl_encode(m, buf, sizeof(buf));
	if (n < 0)
		return n;
	if (lk__send_with_fd(c->fd, buf, (size_t)n, fd) != n)
		return errno == EPIPE || errno == ECONNRESET ? -ECONNRESET : -errno;
	return 0;
}

int lk__ctl_send(struct lk__ctl_client *c, struct lk__ctl_msg *m)
{
	return lk__ctl_send_fd(c, m, -1);
}

int lk__ctl_recv(struct lk__ctl_client *c, struct lk__ctl_msg *m, int timeout_ms, char *err,
		 size_t errlen)
{
	struct pollfd p = { .fd = c->fd, .events = POLLIN };
	ssize_t n;
	int rc;

	do
		rc = poll(&p, 1, timeout_ms);
	while (rc < 0 && errno == EINTR);
	if (rc == 0)
		return lk__failf(err, errlen, -ETIMEDOUT, "process %d did not answer", (int)c->pid);
	n = recv(c->fd, c->buf, sizeof(c->buf), MSG_TRUNC | MSG_DONTWAIT);
	/*
	 * A process that closes the connection before reading what this side sent makes the kernel
	 * report ECONNRESET first; what the process sent before closing (why it refused) is still
	 * queued behind the error.
	 */
	if (n < 0 && errno == ECONNRESET) {
		n = recv(c->fd, c->buf, sizeof(c->buf), MSG_TRUNC | MSG_DONTWAIT);
		if (n < 0)
			errno = ECONNRESET;
	}
	if (n == 0 || (n < 0 && (errno == ECONNRESET || errno == EPIPE)))
		return lk__failf(err, errlen, -ECONNRESET, "process %d closed the connection",
				 (int)c->pid);
	if (n < 0)
		return lk__failf(err, errlen, -errno, "receiving from process %d: %s", (int)c->pid,
				 strerror(errno));
	if ((size_t)n > sizeof(c->buf))
		return lk__failf(err, errlen, -EMSGSIZE, "process %d sent a message of %zd bytes",
				 (int)c->pid, n);
	return lk__ctl_decode(c->buf, (size_t)n, m, err, errlen);
}

int64_t lk__ctl_deadline(int timeout_ms)
{
	struct timespec ts;

	if (timeout_ms < 0)
		return -1;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + timeout_ms;
}

int lk__ctl_left_ms(int64_t deadline)
{
	int64_t left = deadline - lk__ctl_deadline(0);

	if (deadline < 0)
		return -1;
	return left < 0 ? 0 : left > INT_MAX ? INT_MAX : (int)left;
}

int lk__ctl_call(struct lk__ctl_client *c, struct lk__ctl_msg *req, uint16_t reply_type,
		 struct lk__ctl_msg *reply, int timeout_ms, char *err, size_t errlen)
{
	return lk__ctl_call_fd(c, req, -1, reply_type, reply, timeout_ms, err, errlen);
}

int lk__ctl_call_fd(struct lk__ctl_client *c, struct lk__ctl_msg *req, int fd, uint16_t reply_type,
		    struct lk__ctl_msg *reply, int timeout_ms, char *err, size_t errlen)
{
	int64_t deadline = lk__ctl_deadline(timeout_ms);
	int rc = lk__ctl_send_fd(c, req, fd);

	/* A process that refused the connection has said why before closing it. */
	if (rc == -ECONNRESET && lk__ctl_recv(c, reply, 0, NULL, 0) == 0 &&
	    reply->type == LK_CTL_RESULT && reply->result.err)
		return lk__failf(err, errlen, reply->result.err, "%s", reply->result.message);
	if (rc)
		return lk__failf(err, errlen, rc, "sending to process %d: %s", (int)c->pid,
				 strerror(-rc));
	for (int stray = 0;; stray++) {
		if (stray > LK_CTL_MAX_STRAY)
			return lk__failf(err, errlen, -EBADMSG,
					 "process %d sent over %d messages that answer nothing: "
					 "it does not speak lowkey's protocol",
					 (int)c->pid, LK_CTL_MAX_STRAY);
		rc = lk__ctl_recv(c, reply, lk__ctl_left_ms(deadline), err, errlen);
		if (rc)
			return rc;
		if (reply->type == LK_CTL_EXIT)
			return lk__failf(err, errlen, -ECONNRESET, "process %d is exiting",
					 (int)c->pid);
		/* seq 0: the process refused the connection before any request */
		if (reply->seq != req->seq && reply->seq != 0)
			continue; /* a late reply to an earlier request */
		if (reply->type == LK_CTL_PROGRESS && reply->seq == req->seq) {
			if (c->on_progress)
				c->on_progress(&reply->progress, c->progress_arg);
			stray--; /* the deadline bounds how many come */
			continue;
		}
		if (reply->type == LK_CTL_RESULT && reply->result.err)
			return lk__failf(err, errlen, reply->result.err, "%s",
					 reply->result.message);
		if (reply->type == reply_type)
			return 0;
		if (reply->seq == 0)
			continue;
		return lk__failf(err, errlen, -EBADMSG,
				 "process %d answered a %s request with a %s message", (int)c->pid,
				 lk__ctl_type_name(req->type), lk__ctl_type_name(reply->type));
	}
}
