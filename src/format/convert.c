// SPDX-License-Identifier: MIT
/*
 * Trace formats by name, and a trace of any format into any of them (see convert.h). A CTF copy
 * is read through the reader first, so that what is copied is a lowkey trace, whole packets only.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal/failf.h"
#include "internal/outfile.h"
#include "internal/trace_convert.h"
#include "internal/trace_progress.h"
#include "format/perfetto/perfetto.h"
#include "format/ctf/ctf.h"
#include "internal/ctf_reader.h"
#include "internal/trace_file.h"
#include "probe/probe_internal.h"

static const struct {
	const char *name, *extension;
} formats[] = {
	[LK_TRACE_CTF] = { "ctf", "ctf" },
	[LK_TRACE_JSON] = { "json", "json" },
	[LK_TRACE_PERFETTO] = { "perfetto", "pftrace" },
};

const char *lk__trace_format_name(enum lk_trace_format format)
{
	return (unsigned int)format < sizeof(formats) / sizeof(formats[0]) ? formats[format].name :
									     NULL;
}

const char *lk__trace_format_extension(enum lk_trace_format format)
{
	return (unsigned int)format < sizeof(formats) / sizeof(formats[0]) ?
		       formats[format].extension :
		       NULL;
}

int lk__trace_format_parse(const char *name)
{
	for (unsigned int i = 0; i < sizeof(formats) / sizeof(formats[0]); i++)
		if (strcasecmp(name, formats[i].name) == 0)
			return (int)i;
	if (strcasecmp(name, "pftrace") == 0 || strcasecmp(name, "proto") == 0)
		return LK_TRACE_PERFETTO;
	return -1;
}

/* ---- CTF to CTF: a copy of what the reader accepts ---- */

struct copy_list {
	char **names;
	uint64_t *lengths; /* bytes to copy: the whole packets */
	size_t n, cap;
};

static int note_stream(const struct lk__stream_info *s, void *arg)
{
	struct copy_list *l = arg;

	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		char **names = realloc(l->names, cap * sizeof(*names));
		uint64_t *lengths = names ? realloc(l->lengths, cap * sizeof(*lengths)) : NULL;

		if (names)
			l->names = names;
		if (!lengths)
			return -ENOMEM;
		l->lengths = lengths;
		l->cap = cap;
	}
	l->names[l->n] = strdup(s->file);
	if (!l->names[l->n])
		return -ENOMEM;
	l->lengths[l->n++] = s->truncated; /* made a length in copy_file() */
	return 0;
}

/* Copy name from one trace directory to the other: all of it, or less the last `cut` bytes. */
static int copy_file(int from_dir, int to_dir, const char *name, uint64_t cut)
{
	int in = openat(from_dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC), out = -1,
	    rc = 0;
	static char buf[1 << 16];
	uint64_t left;
	struct stat st;

	if (in < 0 || fstat(in, &st) != 0) {
		rc = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = -EINVAL; /* a FIFO or a device named like a trace's file */
		goto out;
	}
	out = openat(to_dir, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (out < 0) {
		rc = -errno;
		goto out;
	}
	left = (uint64_t)st.st_size > cut ? (uint64_t)st.st_size - cut : 0;
	while (left && !rc) {
		ssize_t n = read(in, buf, left < sizeof(buf) ? (size_t)left : sizeof(buf)), w = 0;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : 0;
			break;
		}
		while (w < n && !rc) {
			ssize_t k = write(out, buf + w, (size_t)(n - w));

			if (k < 0 && errno != EINTR)
				rc = -errno;
			w += k > 0 ? k : 0;
		}
		left -= (uint64_t)n;
	}
	if (close(out) != 0 && !rc)
		rc = -errno;
	out = -1;
out:
	if (in >= 0)
		close(in);
	return rc;
}

/* The trace r reads into the directory to (open, empty), named out. */
static int copy_ctf(struct lk__trace_reader *r, int to, const char *out, char *err, size_t errlen)
{
	const struct lk__reader_ops ops = { .stream_end = note_stream };
	static const char *const described_by[] = { "metadata",
						    ".lowkey-index" }; /* the latter optional */
	struct copy_list l = { 0 };
	int rc;

	rc = lk__reader_walk(r, &ops, &l, err, errlen);
	if (rc == -ENOMEM)
		lk__failf(err, errlen, rc, "out of memory copying %s", r->dir);
	if (rc)
		goto out;
	for (size_t i = 0; i < 2 && !rc; i++) {
		rc = copy_file(r->dir_fd, to, described_by[i], 0);
		if (rc == -ENOENT && i > 0)
			rc = 0; /* the index of older traces: newer ones have the metadata alone */
		else if (rc)
			lk__failf(err, errlen, rc, "cannot copy %s/%s to %s: %s", r->dir,
				  described_by[i], out, strerror(-rc));
	}
	for (size_t i = 0; i < l.n && !rc; i++)
		if ((rc = copy_file(r->dir_fd, to, l.names[i], l.lengths[i])) != 0)
			lk__failf(err, errlen, rc, "cannot copy %s/%s to %s: %s", r->dir,
				  l.names[i], out, strerror(-rc));
out:
	for (size_t i = 0; i < l.n; i++)
		free(l.names[i]);
	free(l.names);
	free(l.lengths);
	return rc;
}

int lk__convert_open(struct lk__trace_file *t, const char *in, char *err, size_t errlen)
{
	int rc = lk__trace_file_open(t, in, err, errlen);

	/* the walk's time is ns - base_ns + 1 with tsc0 = monotonic0_ns = 0: real time from there */
	if (!rc && t->format == LK__TF_JSON && t->have_base)
		t->r.realtime0_ns = t->base_ns - 1;
	return rc;
}

static int write_trace(struct lk__trace_file *t, int fd, const char *out,
		       enum lk_trace_format format, char *err, size_t errlen)
{
	switch (format) {
	case LK_TRACE_JSON:
		return lk__json_write(t, fd, out, err, errlen);
	case LK_TRACE_PERFETTO:
		return lk__perfetto_write(t, fd, out, err, errlen);
	case LK_TRACE_CTF:
		/*
		 * A recording (format 4) is written again with each event's thread id, which
		 * Trace Compass's UST analyses read (format 3); an older trace already has it.
		 */
		if (t->format == LK__TF_CTF && t->r.format != LK__CTF_FORMAT)
			return copy_ctf(&t->r, fd, out, err, errlen);
		return lk__ctf_write_trace(t, fd, out, err, errlen);
	}
	return lk__failf(err, errlen, -EINVAL, "unknown trace format %d", (int)format);
}

static int convert_fd(const char *in, int fd, const char *out, enum lk_trace_format format,
		      char *err, size_t errlen)
{
	struct lk__trace_file t;
	int rc;

	if (!lk__trace_format_name(format))
		return lk__failf(err, errlen, -EINVAL, "unknown trace format %d", (int)format);
	if (format == LK_TRACE_PERFETTO) {
		rc = lk__perfetto_live_finish(in, out, err, errlen);
		if (rc <= 0)
			return rc; /* written while the trace recorded */
	}
	rc = lk__convert_open(&t, in, err, errlen);
	if (rc)
		return rc;
	rc = write_trace(&t, fd, out, format, err, errlen);
	lk__trace_file_close(&t);
	return rc;
}

/* What the conversion tells the progress hook: a directory's streams, a file read then parsed. */
static uint64_t input_bytes(const char *in)
{
	struct stat st;

	if (stat(in, &st) == 0 && S_ISREG(st.st_mode))
		return 2 * (uint64_t)st.st_size;
	return lk__progress_ctf_bytes(in);
}

int lk__trace_convert_fd(const char *in, int fd, const char *out, enum lk_trace_format format,
			 const struct lk__progress_sink *sink, char *err, size_t errlen)
{
	int rc;

	lk__progress_begin(sink, sink ? input_bytes(in) : 0);
	rc = convert_fd(in, fd, out, format, err, errlen);
	lk__progress_end();
	return rc;
}

/* A file converted into itself would be emptied before it is read. */
static bool same_file(const char *in, const char *out)
{
	struct stat a, b;

	return stat(in, &a) == 0 && stat(out, &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

int lk__trace_convert_progress(const char *in, const char *out, enum lk_trace_format format,
			       const struct lk__progress_sink *sink, char *err, size_t errlen)
{
	unsigned int flags = format == LK_TRACE_CTF ? LK__OUT_DIR | LK__OUT_EMPTY : LK__OUT_REPLACE;
	int fd, rc;

	if (!lk__trace_format_name(format))
		return lk__failf(err, errlen, -EINVAL, "unknown trace format %d", (int)format);
	if (same_file(in, out))
		return lk__failf(err, errlen, -EINVAL,
				 "%s would be written over the trace it is converted from: "
				 "name another output",
				 out);
	fd = lk__out_open(out, flags, NULL, err, errlen);
	if (fd < 0)
		return fd;
	rc = lk__trace_convert_fd(in, fd, out, format, sink, err, errlen);
	close(fd);
	return rc;
}

int lk__trace_convert(const char *in, const char *out, enum lk_trace_format format, char *err,
		      size_t errlen)
{
	return lk__trace_convert_progress(in, out, format, NULL, err, errlen);
}
