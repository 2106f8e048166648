// SPDX-License-Identifier: MIT
/* Output files (outfile.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal/failf.h"
#include "internal/outfile.h"

/* ---- creating ---- */

/* The directory path is in, opened as named (its links followed), and path's last name in base. */
static int open_parent(const char *path, unsigned int flags, char *base, size_t len, char *err,
		       size_t errlen)
{
	const char *what = flags & LK__OUT_DIR ? "cannot create the directory" : "cannot write";
	char dir[PATH_MAX];
	size_t n = strlen(path);
	const char *parent = ".";
	char *name, *slash;
	int fd;

	while (n > 1 && path[n - 1] == '/')
		n--; /* "out.ctf/" names out.ctf */
	if (n >= sizeof(dir))
		return lk__failf(err, errlen, -ENAMETOOLONG, "%s %s: %s", what, path,
				 strerror(ENAMETOOLONG));
	memcpy(dir, path, n);
	dir[n] = 0;
	slash = strrchr(dir, '/');
	name = slash ? slash + 1 : dir;
	if (!*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || strlen(name) >= len)
		return lk__failf(err, errlen, -EINVAL,
				 "%s %s: give the name of a file or directory to make", what, path);
	snprintf(base, len, "%s", name);
	if (slash == dir)
		parent = "/";
	else if (slash)
		*slash = 0, parent = dir;
	fd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return lk__failf(err, errlen, -errno, "%s %s: %s", what, path, strerror(errno));
	return fd;
}

/* What is at the name is not to be used: rc, or -EEXIST for a caller that tries another name. */
static int refuse(unsigned int flags, int rc, char *err, size_t errlen, const char *fmt,
		  const char *path)
{
	rc = flags & LK__OUT_SKIP ? -EEXIST : rc;
	return lk__failf(err, errlen, rc, fmt, path);
}

/* Another user's, in a sticky directory that user does not own: not ours to write. */
static bool foreign(int dir_fd, const struct stat *st)
{
	struct stat d;

	if (st->st_uid == geteuid())
		return false;
	return fstat(dir_fd, &d) != 0 || ((d.st_mode & S_ISVTX) && d.st_uid != st->st_uid);
}

static int refuse_foreign(unsigned int flags, const struct stat *st, const char *path, char *err,
			  size_t errlen)
{
	char fmt[256];

	snprintf(fmt, sizeof(fmt),
		 "%%s belongs to another user (uid %u) in a shared (sticky) directory: not "
		 "written; remove it or choose another path",
		 (unsigned int)st->st_uid);
	return refuse(flags, -EACCES, err, errlen, fmt, path);
}

/* Why what is at the name could not be opened (errno e). */
static int unusable(int dir_fd, const char *base, const char *path, int e, unsigned int flags,
		    char *err, size_t errlen)
{
	struct stat st;

	if (e == ELOOP ||
	    ((e == ENOTDIR || e == ENXIO) && fstatat(dir_fd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	     S_ISLNK(st.st_mode)))
		return refuse(flags, -ELOOP, err, errlen,
			      "%s is a symbolic link: an output is never written through "
			      "one; remove it or choose another path",
			      path);
	if (e == ENOTDIR)
		return refuse(flags, -EEXIST, err, errlen,
			      "%s exists and is not a directory: remove it or choose "
			      "another path",
			      path);
	if (e == ENXIO || e == EISDIR)
		return refuse(flags, -EEXIST, err, errlen,
			      "%s exists and is not a regular file: remove it or choose "
			      "another path",
			      path);
	return lk__failf(err, errlen, -e, "cannot open %s: %s", path,
			 strerror(e)); /* the system's refusal */
}

/*
 * A symbolic link at the name that a -o FILE the user typed may go through: the caller's own
 * (/proc/self/fd/N) or root's in a directory of root's (/dev/stdout, /dev/fd). Another user's
 * link, or one in a directory another user owns, could point anywhere: never followed.
 */
static bool trusted_link(int dir_fd, const char *base)
{
	struct stat link, dir;

	if (fstatat(dir_fd, base, &link, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISLNK(link.st_mode) ||
	    fstat(dir_fd, &dir) != 0)
		return false;
	return link.st_uid == geteuid() || (link.st_uid == 0 && dir.st_uid == 0);
}

/* What a file output may be: a regular file; for a -o FILE also a device or a pipe (/dev/null). */
static bool usable_kind(const struct stat *st, unsigned int flags)
{
	return S_ISREG(st->st_mode) ||
	       ((flags & LK__OUT_REPLACE) && (S_ISCHR(st->st_mode) || S_ISFIFO(st->st_mode)));
}

/*
 * The file at the name, opened without following a link (or through a trusted one, for a -o FILE,
 * which is opened as open(2) would, creating what it points to), checked on the descriptor.
 * O_NONBLOCK: a FIFO without a reader is refused, not waited on.
 */
static int open_file(int dir_fd, const char *base, const char *path, unsigned int flags, char *err,
		     size_t errlen)
{
	int fd = openat(dir_fd, base, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY),
	    rc;
	bool through_link = false;
	struct stat st;

	if (fd < 0 && (errno == ELOOP || errno == ENOTDIR) && (flags & LK__OUT_REPLACE) &&
	    trusted_link(dir_fd, base)) {
		fd = openat(dir_fd, base, O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC | O_NOCTTY,
			    0644);
		through_link = true;
	}
	if (fd < 0)
		return unusable(dir_fd, base, path, errno, flags, err, errlen);
	if (fstat(fd, &st) != 0)
		rc = lk__failf(err, errlen, -errno, "cannot open %s: %s", path, strerror(errno));
	else if (!usable_kind(&st, flags))
		rc = refuse(flags, -EEXIST, err, errlen,
			    "%s exists and is not a regular file: remove it or choose "
			    "another path",
			    path);
	else if (!through_link && foreign(dir_fd, &st))
		rc = refuse_foreign(flags, &st, path, err, errlen);
	else if (S_ISREG(st.st_mode) && st.st_size && !(flags & LK__OUT_REPLACE))
		rc = refuse(flags, -EEXIST, err, errlen,
			    "%s exists and is not empty: remove it or choose another "
			    "path",
			    path);
	else if (S_ISREG(st.st_mode) && st.st_size && ftruncate(fd, 0) != 0)
		rc = lk__failf(err, errlen, -errno, "cannot empty %s: %s", path, strerror(errno));
	else if (fcntl(fd, F_SETFL, 0) != 0)
		rc = lk__failf(err, errlen, -errno, "cannot open %s: %s", path, strerror(errno));
	else
		return fd;
	close(fd);
	return rc;
}

static int make_file(int dir_fd, const char *base, const char *path, unsigned int flags,
		     bool *created, char *err, size_t errlen)
{
	int fd = openat(dir_fd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);

	if (fd >= 0) {
		*created = true;
		return fd;
	}
	if (errno != EEXIST)
		return lk__failf(err, errlen, -errno, "cannot write %s: %s", path, strerror(errno));
	if (!(flags & (LK__OUT_EMPTY | LK__OUT_REPLACE)))
		return refuse(flags, -EEXIST, err, errlen,
			      "%s exists: remove it or choose another path", path);
	return open_file(dir_fd, base, path, flags, err, errlen);
}

bool lk__out_dir_empty(int fd)
{
	int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	DIR *d = copy >= 0 ? fdopendir(copy) : NULL;
	struct dirent *e;
	bool empty = true;

	if (!d) {
		if (copy >= 0)
			close(copy);
		return false;
	}
	while (empty && (e = readdir(d)))
		empty = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0;
	rewinddir(d); /* the offset is fd's too */
	closedir(d);
	return empty;
}

static int make_dir(int dir_fd, const char *base, const char *path, unsigned int flags,
		    bool *created, char *err, size_t errlen)
{
	bool made = mkdirat(dir_fd, base, 0755) == 0;
	struct stat st;
	int fd, rc;

	if (!made && errno != EEXIST)
		return lk__failf(err, errlen, -errno, "cannot create the directory %s: %s", path,
				 strerror(errno));
	if (!made && !(flags & LK__OUT_EMPTY))
		return refuse(flags, -EEXIST, err, errlen,
			      "%s exists: remove it or choose another path", path);
	fd = openat(dir_fd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return unusable(dir_fd, base, path, errno, flags, err, errlen);
	if (fstat(fd, &st) != 0)
		rc = lk__failf(err, errlen, -errno, "cannot open %s: %s", path, strerror(errno));
	else if (foreign(dir_fd, &st) || (made && st.st_uid != geteuid()))
		rc = refuse_foreign(flags, &st, path, err,
				    errlen); /* the latter: swapped since mkdir */
	else if (!lk__out_dir_empty(fd))
		rc = refuse(flags, -EEXIST, err, errlen,
			    "%s exists and is not an empty directory: remove it or "
			    "choose another path",
			    path);
	else {
		*created = made;
		return fd;
	}
	close(fd);
	return rc;
}

int lk__out_open(const char *path, unsigned int flags, bool *created, char *err, size_t errlen)
{
	char base[NAME_MAX + 1];
	bool made = false;
	int dir_fd = open_parent(path, flags, base, sizeof(base), err, errlen), fd;

	if (dir_fd < 0)
		return dir_fd;
	if (flags & LK__OUT_DIR)
		fd = make_dir(dir_fd, base, path, flags, &made, err, errlen);
	else
		fd = make_file(dir_fd, base, path, flags, &made, err, errlen);
	close(dir_fd);
	if (created)
		*created = made;
	return fd;
}

FILE *lk__out_fopen(const char *path, char *err, size_t errlen)
{
	int fd = lk__out_open(path, LK__OUT_REPLACE, NULL, err, errlen);
	FILE *f;

	if (fd < 0)
		return NULL;
	f = lk__out_stream(fd);
	if (!f) {
		lk__failf(err, errlen, -ENOMEM, "cannot write %s: out of memory", path);
		close(fd);
	}
	return f;
}

/* ---- writing ---- */

struct out_stream {
	int fd;
	pid_t owner; /* the process that opened it: the only one that writes */
};

static ssize_t stream_write(void *cookie, const char *buf, size_t len)
{
	struct out_stream *s = cookie;
	size_t done = 0;

	if (getpid() != s->owner)
		return (ssize_t)len; /* a forked child's copy of the parent's buffer: dropped */
	while (done < len) {
		ssize_t n = write(s->fd, buf + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = EIO;
			return (ssize_t)done; /* stdio takes a short count as the error */
		}
		done += (size_t)n;
	}
	return (ssize_t)done;
}

static int stream_close(void *cookie)
{
	struct out_stream *s = cookie;
	int rc = close(s->fd);

	free(s);
	return rc;
}

FILE *lk__out_stream(int fd)
{
	static const cookie_io_functions_t io = { .write = stream_write, .close = stream_close };
	struct out_stream *s = malloc(sizeof(*s));
	FILE *f;

	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	s->fd = fd;
	s->owner = getpid();
	f = fopencookie(s, "w", io);
	if (!f)
		free(s);
	return f;
}
