// SPDX-License-Identifier: MIT
/*
 * Reading lowkey's CTF traces back (see ctf_reader.h for what is trusted: nothing): the trace's
 * directory and its files, the clock, an event's arguments, and the walk of every stream with the
 * cursor (cursor.c). The description of the trace is read by metadata.c.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lowkey/probe.h>

#include "internal/failf.h"
#include "probe/probe_internal.h"
#include "internal/ctf_reader.h"
#include "format/ctf/read.h"

int lk__ctf_open_regular(const struct lk__trace_reader *r, const char *name, struct stat *st,
			 char *err, size_t errlen)
{
	int fd = openat(r->dir_fd, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC),
	    rc;

	if (fd < 0 && errno == ELOOP)
		return lk__failf(
			err, errlen, -ELOOP,
			"%s/%s is a symbolic link: a trace's files are never read through one",
			r->dir, name);
	if (fd < 0)
		return lk__failf(err, errlen, -errno, "cannot open %s/%s: %s", r->dir, name,
				 strerror(errno));
	if (fstat(fd, st) != 0)
		rc = lk__failf(err, errlen, -errno, "cannot inspect %s/%s: %s", r->dir, name,
			       strerror(errno));
	else if (!S_ISREG(st->st_mode))
		rc = lk__failf(err, errlen, -EINVAL,
			       "%s/%s is not a regular file (a FIFO, a device or a directory): "
			       "not part of a lowkey trace",
			       r->dir, name);
	else
		return fd;
	close(fd);
	return rc;
}

/* Read up to len bytes at off: fewer only at the end of the file. -errno on error. */
ssize_t lk__ctf_read_at(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (uint8_t *)buf + done, len - done, (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

/* Read and parse file (the index or the metadata); -ENOENT with nothing said if it is not there. */
static int read_description(struct lk__trace_reader *r, const char *file, char *err, size_t errlen)
{
	struct stat st;
	char *text;
	ssize_t n;
	int rc, fd = lk__ctf_open_regular(r, file, &st, err, errlen);

	if (fd < 0)
		return fd;
	if (st.st_size > MAX_INDEX) {
		close(fd);
		return lk__failf(err, errlen, -EFBIG,
				 "%s: its %s is %lld bytes, more than any lowkey trace's "
				 "(%u MiB)",
				 r->dir, file, (long long)st.st_size, MAX_INDEX >> 20);
	}
	text = malloc((size_t)st.st_size + 1);
	n = text ? lk__ctf_read_at(fd, text, (size_t)st.st_size, 0) : -ENOMEM;
	close(fd);
	if (n < 0)
		rc = lk__failf(err, errlen, (int)n, "cannot read %s/%s: %s", r->dir, file,
			       strerror((int)-n));
	else if (strcmp(file, INDEX_NAME) == 0)
		rc = lk__ctf_parse_index(r, text, (size_t)n, err, errlen);
	else
		rc = lk__ctf_parse_metadata(r, text, (size_t)n, err, errlen);
	free(text);
	return rc;
}

/*
 * A trace of lowkey before format 3 has its classes in the index, which says more than its
 * metadata did (the TSC at the start); a newer one has no index, and a copy of an older one may
 * have lost it: the metadata then.
 */
static int read_index(struct lk__trace_reader *r, char *err, size_t errlen)
{
	int rc = read_description(r, INDEX_NAME, err, errlen);

	if (rc == -ENOENT)
		rc = read_description(r, METADATA_NAME, err, errlen);
	if (rc == -ENOENT)
		return lk__failf(err, errlen, rc, "%s is not a lowkey trace (no %s/%s)", r->dir,
				 r->dir, METADATA_NAME);
	return rc;
}

int lk__reader_openat(struct lk__trace_reader *r, int dir_fd, const char *name, char *err,
		      size_t errlen)
{
	int rc;

	memset(r, 0, sizeof(*r));
	r->dir_fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	r->dir = strdup(name);
	if (r->dir_fd < 0)
		rc = lk__failf(err, errlen, -errno, "cannot open %s: %s", name, strerror(errno));
	else if (!r->dir)
		rc = lk__failf(err, errlen, -ENOMEM, "out of memory");
	else
		rc = read_index(r, err, errlen);
	if (rc)
		lk__reader_close(r);
	return rc;
}

int lk__reader_open(struct lk__trace_reader *r, const char *dir, char *err, size_t errlen)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc;

	if (fd < 0) {
		rc = lk__failf(err, errlen, -errno, "cannot open %s: %s", dir, strerror(errno));
		memset(r, 0, sizeof(*r));
		r->dir_fd = -1;
		return rc;
	}
	rc = lk__reader_openat(r, fd, dir, err, errlen);
	close(fd);
	return rc;
}

void lk__reader_close(struct lk__trace_reader *r)
{
	for (size_t i = 0; i < r->nclasses; i++)
		lk__ctf_free_class(r->classes[i]);
	free(r->classes);
	free(r->dir);
	if (r->dir_fd >= 0)
		close(r->dir_fd);
	memset(r, 0, sizeof(*r));
	r->dir_fd = -1;
}

void lk__reader_set_clock(struct lk__trace_reader *r)
{
	r->clock = r->tsc_hz ? lk__ns_scale(r->tsc_hz) : (struct lk__ns_scale){ 0 };
}

/* lk__reader_ns by division: a clock without its scale, before tsc0, or far from it. */
uint64_t lk__reader_ns_divided(const struct lk__trace_reader *r, uint64_t tsc)
{
	uint64_t ns;

	if (!r->tsc_hz)
		return 0;
	if (tsc >= r->tsc0) {
		ns = lk__ticks_ns(tsc - r->tsc0, r->tsc_hz);
		return ns < UINT64_MAX - r->monotonic0_ns ? r->monotonic0_ns + ns : UINT64_MAX;
	}
	/* a damaged trace may time an event before the clock's start: rounded down still */
	ns = lk__ticks_ns_up(r->tsc0 - tsc, r->tsc_hz);
	return ns < r->monotonic0_ns ? r->monotonic0_ns - ns : 0;
}

double lk__event_counter(const struct lk__event *e)
{
	uint64_t v = 0;
	const char *s;
	double d;

	if (!e->cls->nargs || !lk__event_arg(e, 0, 0, &v, &s))
		return 0;
	switch (lk__arg_type(e->cls->arg_types, 0)) {
	case LK_PROBE_F64:
		memcpy(&d, &v, 8);
		return d;
	case LK_PROBE_I64:
		return (double)(int64_t)v;
	default:
		return (double)v;
	}
}

struct lk__switch lk__event_switch(const struct lk__event *e)
{
	struct lk__switch sw = { e->cls->id == LK__EVENT_SCHED_OUT, false, 0 };
	uint64_t preempted = 0;
	const char *s;
	size_t at = lk__event_arg(e, 0, 0, &sw.cpu, &s);

	if (sw.out && at)
		lk__event_arg(e, at, 1, &preempted, &s);
	sw.preempted = preempted != 0;
	return sw;
}

size_t lk__event_arg(const struct lk__event *e, size_t offset, unsigned int i, uint64_t *value,
		     const char **str)
{
	unsigned int type = lk__arg_type(e->cls->arg_types, i);

	*str = NULL;
	if (type == LK_PROBE_STR) {
		const void *nul = offset < e->payload_len ?
					  memchr(e->payload + offset, 0, e->payload_len - offset) :
					  NULL;

		if (!nul)
			return 0;
		*str = (const char *)e->payload + offset;
		return (size_t)((const uint8_t *)nul - e->payload) + 1;
	}
	if (offset > e->payload_len || e->payload_len - offset < 8)
		return 0;
	memcpy(value, e->payload + offset, 8);
	return offset + 8;
}

/* ---- the walk: every stream, with the cursor ---- */

/* Walk the stream under c between its callbacks; messages are the caller's. */
static int walk_cursor(struct lk__trace_reader *r, struct lk__ctf_cursor *c,
		       const struct lk__reader_ops *ops, void *arg)
{
	int rc = ops->stream_begin ? ops->stream_begin(&c->s, arg) : 0;

	if (!rc)
		rc = lk__ctf_cursor_walk(c, ops->event, arg);
	if (!rc && c->s.truncated)
		r->truncated_streams++;
	if (!rc && ops->stream_end)
		rc = ops->stream_end(&c->s, arg);
	return rc;
}

int lk__reader_walk_bytes(struct lk__trace_reader *r, const uint8_t *data, size_t len,
			  struct lk__stream_info *s, const struct lk__reader_ops *ops, void *arg)
{
	struct lk__ctf_cursor c;
	int rc;

	lk__ctf_cursor_bytes(&c, r, data, len, s->tid, s->stream_id);
	c.s.file = s->file;
	rc = walk_cursor(r, &c, ops, arg);
	s->packets = c.s.packets;
	s->events = c.s.events;
	s->lost = c.s.lost;
	s->truncated = c.s.truncated;
	lk__ctf_cursor_close(&c);
	return rc;
}

static int walk_stream(struct lk__trace_reader *r, const char *name,
		       const struct lk__reader_ops *ops, void *arg, char *err, size_t errlen)
{
	struct lk__ctf_cursor c;
	int rc = lk__ctf_cursor_open(&c, r, name, false, err, errlen);

	if (rc)
		return rc;
	rc = walk_cursor(r, &c, ops, arg);
	if (rc == -EINVAL || (rc && (rc == c.read_error || rc == -ENOMEM)))
		lk__ctf_cursor_error(&c, rc, err, errlen);
	lk__ctf_cursor_close(&c);
	return rc;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int lk__reader_streams(struct lk__trace_reader *r, char ***out)
{
	int fd = openat(r->dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), n = 0, cap = 0, rc = 0;
	char **names = NULL;
	struct dirent *e;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

	if (!d) {
		rc = -errno;
		if (fd >= 0)
			close(fd);
		return rc;
	}
	while (!rc && (e = readdir(d))) {
		if (strncmp(e->d_name, "stream-", 7) != 0)
			continue;
		if (n == cap) {
			char **grown =
				realloc(names, (size_t)(cap = cap ? cap * 2 : 16) * sizeof(*names));

			if (!grown) {
				rc = -ENOMEM;
				break;
			}
			names = grown;
		}
		names[n] = strdup(e->d_name);
		rc = names[n] ? 0 : -ENOMEM;
		n += !rc;
	}
	closedir(d);
	if (n)
		qsort(names, (size_t)n, sizeof(*names), by_name);
	*out = names;
	if (rc) {
		while (n)
			free(names[--n]);
		free(names);
		*out = NULL;
	}
	return rc ? rc : n;
}

int lk__reader_walk(struct lk__trace_reader *r, const struct lk__reader_ops *ops, void *arg,
		    char *err, size_t errlen)
{
	char **names = NULL;
	int n, rc = 0;

	r->truncated_streams = 0;
	if (r->dir_fd < 0)
		return lk__failf(err, errlen, -EBADF, "no trace directory to walk");
	n = lk__reader_streams(r, &names);
	if (n < 0)
		return lk__failf(err, errlen, n, "cannot list %s: %s", r->dir, strerror(-n));
	for (int i = 0; i < n; i++) {
		if (!rc)
			rc = walk_stream(r, names[i], ops, arg, err, errlen);
		free(names[i]);
	}
	free(names);
	return rc;
}
