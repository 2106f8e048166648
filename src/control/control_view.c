// SPDX-License-Identifier: MIT
/*
 * A process's own view of its files and ids, for the control client: a process in a container or
 * in a systemd service with PrivateTmp= names its socket from its own root (mount namespace), by
 * its pid in its own pid namespace and by its uid in its own user namespace.
 *
 * Its root is /proc/PID/root, opened once (O_PATH) while the process is pinned, and every path of
 * the process's is resolved under it with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS): a
 * symbolic link inside the container, absolute or "..", stays inside it, so the container's owner
 * cannot send this side (root, often) to a file of the host's. The socket is then connected
 * through /proc/self/fd/N, N an O_PATH descriptor of the socket itself (a symbolic link in its
 * place is not followed): a path short enough for sun_path wherever the socket is. This is done from this process, with no setns: setns(CLONE_NEWNS) is
 * refused to a threaded process, and a forked child that entered the namespace would have to
 * trust the namespace's own paths all the same.
 *
 * The socket's server accepts its own user and root, as its user namespace sees them; root of the
 * host is not mapped into a container's user namespace (it appears there as the overflow uid), so
 * there the socket is connected by a forked child that has taken the process's uid and gid, and
 * the connected descriptor is passed back (SCM_RIGHTS), as jattach does.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "control/control_internal.h"

#ifndef SYS_openat2
#define SYS_openat2 437 /* the same number on every architecture */
#endif

/* The last field of a "Name:" line of /proc/PID/status that has several. */
static bool status_last(pid_t pid, const char *name, long *out)
{
	char file[64], line[512];
	size_t lname = strlen(name);
	bool found = false;
	FILE *f;

	snprintf(file, sizeof(file), "/proc/%d/status", (int)pid);
	f = fopen(file, "re");
	while (f && !found && fgets(line, sizeof(line), f)) {
		char *last;

		if (strncmp(line, name, lname) != 0)
			continue;
		line[strcspn(line, "\n")] = 0;
		last = strrchr(line, '\t');
		last = last ? last + 1 : line + lname;
		found = sscanf(last, "%ld", out) == 1;
	}
	if (f)
		fclose(f);
	return found;
}

/* uid (as this side sees it) as pid's user namespace sees it; uid itself where it cannot be read. */
static uid_t uid_inside(pid_t pid, uid_t uid)
{
	char file[64];
	unsigned long inside, outside, count;
	uid_t found = uid;
	FILE *f;

	snprintf(file, sizeof(file), "/proc/%d/uid_map", (int)pid);
	f = fopen(file, "re");
	while (f && fscanf(f, "%lu %lu %lu", &inside, &outside, &count) == 3) {
		if (uid >= outside && uid - outside < count) {
			found = (uid_t)(inside + (uid - outside));
			break;
		}
	}
	if (f)
		fclose(f);
	return found;
}

/* 1 when pid's namespace of this kind is not this process's, 0 when it is, -errno when unknown. */
static int other_ns(pid_t pid, const char *kind)
{
	char file[64];
	struct stat mine, its;

	snprintf(file, sizeof(file), "/proc/self/ns/%s", kind);
	if (stat(file, &mine) != 0)
		return -errno;
	snprintf(file, sizeof(file), "/proc/%d/ns/%s", (int)pid, kind);
	if (stat(file, &its) != 0)
		return -errno;
	return mine.st_dev != its.st_dev || mine.st_ino != its.st_ino;
}

static int openat2_in(int root, const char *path, int flags)
{
	struct open_how how = {
		.flags = (unsigned long long)(flags | O_PATH | O_CLOEXEC),
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	long fd = syscall(SYS_openat2, root, path, &how, sizeof(how));

	return fd < 0 ? -errno : (int)fd;
}

/* Whether root (an O_PATH directory) is not this process's root. */
static bool other_root(int root)
{
	struct stat mine, its;

	return stat("/", &mine) != 0 || fstat(root, &its) != 0 || mine.st_dev != its.st_dev ||
	       mine.st_ino != its.st_ino;
}

/* Open pid's root for the paths of its files, or say in v->root_err or v->resolve_err why not. */
static void open_root(struct lk__view *v)
{
	char file[64];
	int fd, probe;

	snprintf(file, sizeof(file), "/proc/%d/root", (int)v->pid);
	fd = open(file, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		v->root_err = errno;
		return;
	}
	v->other_mnt = v->other_mnt || other_root(fd);
	probe = openat2_in(fd, "/", O_DIRECTORY);
	if (probe < 0) {
		/* no openat2 (before 5.6), or a seccomp profile refuses it */
		v->resolve_err = -probe;
		close(fd);
		return;
	}
	close(probe);
	v->root = fd;
}

int lk__view_open(struct lk__view *v, pid_t pid, uid_t uid, gid_t gid)
{
	long nspid = pid;

	*v = (struct lk__view){ .pid = pid, .uid = uid, .gid = gid, .root = -1 };
	if (status_last(pid, "NSpid:", &nspid) && nspid > 0 && nspid <= INT_MAX)
		v->nspid = (pid_t)nspid;
	else
		v->nspid = pid;
	v->nsuid = uid_inside(pid, uid);
	v->other_mnt = other_ns(pid, "mnt") == 1;
	v->other_user = other_ns(pid, "user") == 1;
	open_root(v);
	if (v->root < 0 && v->other_mnt)
		return -(v->resolve_err ? v->resolve_err : v->root_err);
	return 0;
}

void lk__view_close(struct lk__view *v)
{
	if (v->root >= 0)
		close(v->root);
	v->root = -1;
}

int lk__view_fd(const struct lk__view *v, const char *path, int flags)
{
	int fd;

	if (v->root >= 0)
		return openat2_in(v->root, path, flags);
	if (v->other_mnt)
		return -(v->resolve_err ? v->resolve_err : v->root_err);
	fd = open(path, flags | O_PATH | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int lk__view_stat(const struct lk__view *v, const char *path, struct stat *st, bool follow)
{
	int fd = lk__view_fd(v, path, follow ? 0 : O_NOFOLLOW);
	int rc = 0;

	if (fd < 0)
		return fd;
	if (fstat(fd, st) != 0)
		rc = -errno;
	close(fd);
	return rc;
}

/* ---- connecting ---- */

static int connect_here(const char *sun_path)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	memcpy(addr.sun_path, sun_path, strlen(sun_path) + 1);
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	return fd;
}

/* In the forked child: take uid and gid, connect, and send the descriptor or the error on out. */
static _Noreturn void connect_as_child(int out, const char *sun_path, uid_t uid, gid_t gid)
{
	int result[2] = { 0, 0 }; /* errno, and whether taking the ids failed */
	int fd = -1;

	if (setgroups(0, NULL) != 0 || setresgid(gid, gid, gid) != 0 ||
	    setresuid(uid, uid, uid) != 0) {
		result[0] = errno;
		result[1] = 1;
	} else {
		fd = connect_here(sun_path);
		result[0] = fd < 0 ? -fd : 0;
	}
	_exit(lk__send_with_fd(out, result, sizeof(result), fd) < 0);
}

/* What the child sent: the connected descriptor, or -errno (*ids: taking the ids failed). */
static int take_from_child(int in, bool *ids)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	int result[2] = { EIO, 0 }, fd = -1;
	struct iovec iov = { result, sizeof(result) };
	struct msghdr msg = { .msg_iov = &iov,
			      .msg_iovlen = 1,
			      .msg_control = cbuf,
			      .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c;
	ssize_t n;

	do
		n = recvmsg(in, &msg, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(result))
		return -EIO;
	c = CMSG_FIRSTHDR(&msg);
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
		memcpy(&fd, CMSG_DATA(c), sizeof(int));
	*ids = result[1] != 0;
	if (fd >= 0 && result[0] == 0)
		return fd;
	if (fd >= 0)
		close(fd);
	return -(result[0] ? result[0] : EIO);
}

static int connect_as(const char *sun_path, uid_t uid, gid_t gid, bool *ids)
{
	int sv[2], rc, status;
	pid_t child;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
		return -errno;
	child = fork();
	if (child == 0) {
		close(sv[0]);
		connect_as_child(sv[1], sun_path, uid, gid);
	}
	close(sv[1]);
	rc = child < 0 ? -errno : take_from_child(sv[0], ids);
	close(sv[0]);
	while (child > 0 && waitpid(child, &status, 0) < 0 && errno == EINTR)
		;
	return rc;
}

/*
 * The socket itself, opened O_PATH under the process's root without following a last symbolic
 * link: connect() through a path would follow one, out of the container. -errno: the lookup's,
 * or -ECONNREFUSED where something else than a socket is there (nothing listens).
 */
static int socket_fd(const struct lk__view *v, const char *path)
{
	struct stat st;
	int fd = lk__view_fd(v, path, O_NOFOLLOW);

	if (fd < 0)
		return fd;
	if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
		close(fd);
		return -ECONNREFUSED;
	}
	return fd;
}

int lk__view_connect(const struct lk__view *v, const char *path, bool *ids)
{
	char sun_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int sock = -1, rc;

	*ids = false;
	if (path[0] != '/')
		return -EINVAL;
	if (v->root >= 0) {
		sock = socket_fd(v, path);
		if (sock < 0)
			return sock;
		rc = snprintf(sun_path, sizeof(sun_path), "/proc/self/fd/%d", sock);
	} else {
		rc = snprintf(sun_path, sizeof(sun_path), "%s", path);
	}
	if (rc < 0 || (size_t)rc >= sizeof(sun_path))
		rc = -ENAMETOOLONG;
	else if (lk__view_as_owner(v))
		rc = connect_as(sun_path, v->uid, v->gid, ids);
	else
		rc = connect_here(sun_path);
	if (sock >= 0)
		close(sock);
	return rc;
}

bool lk__view_as_owner(const struct lk__view *v)
{
	return geteuid() == 0 && v->other_user && v->uid != 0 && v->uid != (uid_t)-1;
}
