// SPDX-License-Identifier: MIT
/*
 * The control socket's file: DIR/PID.sock, DIR a directory only this user can enter
 * (lk__control_dir), bound and listened to; the socket files of processes killed before they
 * could close theirs are removed first.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/env.h"
#include "core/error.h"
#include "control/control_server.h"

/* ---- the directory ---- */

/* Whether path is a directory of this user that no one else may enter. */
static bool private_dir(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
	       (st.st_mode & 077) == 0;
}

/* Create dir (0700) or check the one there: a real directory of ours, closed to others. */
static int make_private_dir(const char *dir)
{
	bool created = mkdir(dir, 0700) == 0;
	struct stat st;
	int fd, err = 0;

	if (!created && errno != EEXIST)
		return lk__fail(-errno, "lk_control_open: cannot create %s: %s", dir,
				strerror(errno));
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ELOOP || errno == ENOTDIR)
			return lk__fail(
				-ENOTDIR,
				"lk_control_open: %s is not a directory (a symbolic link or a file "
				"is there): remove it",
				dir);
		return lk__fail(-errno, "lk_control_open: cannot open %s: %s", dir,
				strerror(errno));
	}
	if (created)
		fchmod(fd, 0700); /* whatever the umask made of it */
	if (fstat(fd, &st) != 0)
		err = lk__fail(-errno, "lk_control_open: cannot inspect %s: %s", dir,
			       strerror(errno));
	else if (st.st_uid != geteuid())
		err = lk__fail(
			-EPERM,
			"lk_control_open: %s belongs to uid %u, not to this process's uid %u: "
			"someone else made it; remove it",
			dir, (unsigned int)st.st_uid, (unsigned int)geteuid());
	else if (st.st_mode & 077)
		err = lk__fail(-EPERM,
			       "lk_control_open: %s is open to other users (mode %03o): "
			       "`chmod 700 %s`",
			       dir, (unsigned int)(st.st_mode & 0777), dir);
	close(fd);
	return err;
}

int lk__control_dir(char *out, size_t len)
{
	const char *xdg = lk__env("XDG_RUNTIME_DIR");
	/* room for "/PID.sock" after the directory */
	size_t room = sizeof(lk__srv.path) - sizeof("/4194304.sock");
	int n = -1;

	if (xdg && xdg[0] == '/' && private_dir(xdg))
		n = snprintf(out, len, "%s/lowkey", xdg);
	if (n < 0 || (size_t)n >= len || (size_t)n >= room)
		n = snprintf(out, len, "/tmp/lowkey-%u", (unsigned int)geteuid());
	if (n < 0 || (size_t)n >= len)
		return lk__fail(-ENAMETOOLONG,
				"lk_control_open: no room for the socket's directory name");
	return make_private_dir(out);
}

/* ---- the socket ---- */

/*
 * Remove the sockets of processes that died without closing theirs (killed): a socket file that
 * refuses connections has no one listening. Files that accept, or cannot be tried, are left: they
 * may belong to a live process, in another pid namespace too. Bounded, and only *.sock files.
 */
static void sweep_stale_sockets(const char *dir)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct dirent *e;
	int tried = 0;
	DIR *d = opendir(dir);

	while (d && (e = readdir(d)) && tried < 256) {
		size_t len = strlen(e->d_name);
		int fd;

		if (len < 6 || strcmp(e->d_name + len - 5, ".sock") != 0 || e->d_type != DT_SOCK)
			continue;
		if ((size_t)snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/%s", dir,
				     e->d_name) >= sizeof(addr.sun_path))
			continue;
		fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			break;
		tried++;
		if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0 &&
		    errno == ECONNREFUSED)
			unlinkat(dirfd(d), e->d_name, 0);
		close(fd);
	}
	if (d)
		closedir(d);
}

int lk__srv_bind(void)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	char dir[sizeof(addr.sun_path)];
	int err = lk__control_dir(dir, sizeof(dir));

	if (err)
		return err;
	sweep_stale_sockets(dir);
	if ((size_t)snprintf(lk__srv.path, sizeof(lk__srv.path), "%s/%d.sock", dir,
			     (int)getpid()) >= sizeof(lk__srv.path))
		return lk__fail(-ENAMETOOLONG, "lk_control_open: the socket path in %s is too long",
				dir);
	memcpy(addr.sun_path, lk__srv.path, sizeof(addr.sun_path));
	lk__srv.listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (lk__srv.listen_fd < 0)
		return lk__fail(-errno, "lk_control_open: socket: %s", strerror(errno));
	unlink(lk__srv.path); /* left by an earlier process with this pid, or this one before exec */
	if (bind(lk__srv.listen_fd, (struct sockaddr *)&addr, sizeof(addr)) != 0)
		return lk__fail(-errno, "lk_control_open: cannot bind %s: %s", lk__srv.path,
				strerror(errno));
	chmod(lk__srv.path, 0600);
	if (listen(lk__srv.listen_fd, LK__SRV_MAX_CLIENTS) != 0) {
		err = -errno;
		unlink(lk__srv.path);
		return lk__fail(err, "lk_control_open: listen: %s", strerror(-err));
	}
	return 0;
}
