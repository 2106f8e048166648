// SPDX-License-Identifier: MIT
/*
 * Reading lowkey's CTF traces back (see reader.h for what is trusted: nothing). Every length read
 * from a file is checked against the file: a damaged stream ends its walk with an error, it is
 * never read past. Files are read with pread, not mapped: a file its owner truncates meanwhile
 * reads short instead of raising SIGBUS.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lowkey/probe.h>

#include "core/failf.h"
#include "probe/probe_internal.h"
#include "probe/reader.h"

#define PACKET_PREFIX 88
#define CTF_MAGIC 0xc1fc1fc1u
#define INDEX_NAME ".lowkey-index"
#define MAX_INDEX (64u << 20)	/* a line per event class: 65535 classes need far less */
#define MAX_PACKET (64u << 20)	/* lowkey writes packets of 256 KiB and a record at most */

static void field_names(struct lk__event_class *c)
{
	const char *p = c->arg_names;

	for (unsigned int i = 0; i < c->nargs; i++) {
		size_t n;
		bool ident;

		while (p && *p == ' ')
			p++;
		n = p ? strcspn(p, ",") : 0;
		while (n && p[n - 1] == ' ')
			n--;
		ident = n > 0 && n < sizeof(c->arg_name[i]) &&
			(p[0] == '_' || (p[0] >= 'a' && p[0] <= 'z') || (p[0] >= 'A' && p[0] <= 'Z'));
		for (size_t k = 0; ident && k < n; k++)
			ident = p[k] == '_' || (p[k] >= 'a' && p[k] <= 'z') || (p[k] >= 'A' && p[k] <= 'Z') ||
				(p[k] >= '0' && p[k] <= '9');
		if (ident)
			snprintf(c->arg_name[i], sizeof(c->arg_name[i]), "%.*s", (int)n, p);
		else
			snprintf(c->arg_name[i], sizeof(c->arg_name[i]), "arg%u", i);
		p = p ? strchr(p, ',') : NULL;
		if (p)
			p++;
	}
}

static int add_class(struct lk__trace_reader *r, struct lk__event_class *c)
{
	if (c->id >= r->nclasses) {
		size_t n = r->nclasses * 2 > c->id + 1u ? r->nclasses * 2 : c->id + 64u;
		struct lk__event_class **grown;

		if (n > LK__MAX_EVENT_ID + 1u)
			n = LK__MAX_EVENT_ID + 1u;
		grown = realloc(r->classes, n * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		memset(grown + r->nclasses, 0, (n - r->nclasses) * sizeof(*grown));
		r->classes = grown;
		r->nclasses = n;
	}
	r->classes[c->id] = c;
	return 0;
}

static void free_class(struct lk__event_class *c)
{
	if (c)
		free(c->provider), free(c->event), free(c->where), free(c->arg_names);
	free(c);
}

/* s, all of it, as a number of base at most max: no sign, no blanks, nothing after. */
static bool parse_uint(const char *s, int base, unsigned long max, unsigned long *out)
{
	unsigned long v;
	char *end;

	if (!(base == 16 ? isxdigit((unsigned char)s[0]) : isdigit((unsigned char)s[0])))
		return false;
	errno = 0;
	v = strtoul(s, &end, base);
	if (errno || *end || v > max)
		return false;
	*out = v;
	return true;
}

/* A type of 1 .. LK_PROBE_PTR for each of the first nargs arguments, none after. */
static bool valid_types(uint32_t types, unsigned int nargs)
{
	for (unsigned int i = 0; i < 8; i++) {
		unsigned int t = lk__arg_type(types, i);

		if (i < nargs ? t < LK_PROBE_I64 || t > LK_PROBE_PTR : t != 0)
			return false;
	}
	return true;
}

/* event TAB id TAB kind TAB nargs TAB types TAB provider TAB event TAB where TAB argnames */
static int parse_event_line(struct lk__trace_reader *r, char *line, const char **why)
{
	unsigned long id, kind, nargs, types;
	struct lk__event_class *c;
	char *f[9], *p = line;
	int n = 0;

	while (n < 8 && p)
		f[n++] = strsep(&p, "\t");
	f[8] = p ? p : "";	/* the arguments as written: the rest of the line */
	*why = "fewer than 8 fields";
	if (n < 8)
		return -EINVAL;
	*why = "a number out of range";
	if (!parse_uint(f[1], 10, LK__MAX_EVENT_ID, &id) || id < LK__FIRST_SITE_ID ||
	    !parse_uint(f[2], 10, LK_PROBE_COUNTER, &kind) || kind < LK_PROBE_EVENT ||
	    !parse_uint(f[3], 10, LK_PROBE_MAX_ARGS, &nargs) || !parse_uint(f[4], 16, UINT32_MAX, &types) ||
	    !valid_types((uint32_t)types, (unsigned int)nargs))
		return -EINVAL;
	*why = "a second event class with the same id";
	if (id < r->nclasses && r->classes[id])
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	*c = (struct lk__event_class){ (uint32_t)id, (uint8_t)kind, (uint8_t)nargs, (uint32_t)types,
				       strdup(f[5]), strdup(f[6]), strdup(f[7]), strdup(f[8]) };
	if (!c->provider || !c->event || !c->where || !c->arg_names) {
		free_class(c);
		return -ENOMEM;
	}
	if (c->kind == LK_PROBE_COUNTER)
		strcpy(c->arg_name[0], "value");
	else
		field_names(c);
	for (unsigned int a = 0; a < c->nargs; a++)	/* as the writer: a repeated name is argI */
		for (unsigned int b = 0; b < a; b++)
			if (strcmp(c->arg_name[a], c->arg_name[b]) == 0)
				snprintf(c->arg_name[a], sizeof(c->arg_name[a]), "arg%u", a);
	if (add_class(r, c) != 0) {
		free_class(c);
		return -ENOMEM;
	}
	return 0;
}

static int add_builtin_classes(struct lk__trace_reader *r)
{
	struct lk__event_class *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->id = LK__EVENT_THREAD_NAME;
	c->nargs = 1;
	c->arg_types = LK_PROBE_STR;
	c->provider = strdup("lowkey");
	c->event = strdup("thread_name");
	c->where = strdup("");
	c->arg_names = strdup("name");
	strcpy(c->arg_name[0], "name");
	if (!c->provider || !c->event || !c->where || !c->arg_names || add_class(r, c) != 0) {
		free_class(c);
		return -ENOMEM;
	}
	return 0;
}

static int parse_line(struct lk__trace_reader *r, char *line, const char **why)
{
	unsigned long long v;

	*why = "out of memory";
	if (sscanf(line, "tsc_hz %llu", &v) == 1)
		r->tsc_hz = v;
	else if (sscanf(line, "tsc0 %llu", &v) == 1)
		r->tsc0 = v;
	else if (sscanf(line, "monotonic0_ns %llu", &v) == 1)
		r->monotonic0_ns = v;
	else if (sscanf(line, "realtime0_ns %llu", &v) == 1)
		r->realtime0_ns = v;
	else if (sscanf(line, "cputime %llu", &v) == 1)
		r->cputime = v;
	else if (sscanf(line, "pid %llu", &v) == 1)
		r->pid = (int)v;
	else if (strncmp(line, "procname ", 9) == 0)
		snprintf(r->procname, sizeof(r->procname), "%s", line + 9);
	else if (strncmp(line, "event\t", 6) == 0)
		return parse_event_line(r, line, why);
	return 0;
}

/* The next line of text (its newline replaced by a NUL), or NULL at end. */
static char *next_line(char **p, char *end)
{
	char *line = *p, *nl;

	if (line >= end)
		return NULL;
	nl = memchr(line, '\n', (size_t)(end - line));
	*p = nl ? nl + 1 : end;
	if (nl)
		*nl = 0;
	return line;
}

static int parse_index(struct lk__trace_reader *r, char *text, size_t len, char *err, size_t errlen)
{
	const char *name = r->dir ? r->dir : "the trace", *why = "";
	char *p = text, *end = text + len, *line;
	unsigned int lineno = 1;
	int rc, format;

	text[len] = 0;
	line = next_line(&p, end);
	if (!line || sscanf(line, "lowkey-trace %d", &format) != 1)
		return lk__failf(err, errlen, -EINVAL, "%s: %s is not a lowkey trace index", name, INDEX_NAME);
	if (format != 2)
		return lk__failf(err, errlen, -EINVAL, "%s: written by another version of lowkey (record format %s); "
			     "babeltrace2 reads it", name, format == 1 ? "1" : "unknown");
	rc = add_builtin_classes(r);
	while (!rc && (line = next_line(&p, end))) {
		lineno++;
		rc = parse_line(r, line, &why);
	}
	if (rc)
		return lk__failf(err, errlen, rc, "%s: line %u of the trace index %s is damaged: %s", name, lineno,
			     INDEX_NAME, why);
	if (!r->tsc_hz)
		return lk__failf(err, errlen, -EINVAL, "%s: the trace index %s is damaged: no tsc_hz", name, INDEX_NAME);
	return 0;
}

int lk__reader_parse_index(struct lk__trace_reader *r, char *text, size_t len, char *err, size_t errlen)
{
	int rc;

	memset(r, 0, sizeof(*r));
	r->dir_fd = -1;
	rc = parse_index(r, text, len, err, errlen);
	if (rc)
		lk__reader_close(r);
	return rc;
}

/* ---- files ---- */

/* Open name in the trace's directory if it is a regular file: never a FIFO or a device, never a link. */
static int open_regular(const struct lk__trace_reader *r, const char *name, struct stat *st, char *err, size_t errlen)
{
	int fd = openat(r->dir_fd, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC), rc;

	if (fd < 0 && errno == ELOOP)
		return lk__failf(err, errlen, -ELOOP, "%s/%s is a symbolic link: a trace's files are never read through one",
			     r->dir, name);
	if (fd < 0)
		return lk__failf(err, errlen, -errno, "cannot open %s/%s: %s", r->dir, name, strerror(errno));
	if (fstat(fd, st) != 0)
		rc = lk__failf(err, errlen, -errno, "cannot inspect %s/%s: %s", r->dir, name, strerror(errno));
	else if (!S_ISREG(st->st_mode))
		rc = lk__failf(err, errlen, -EINVAL, "%s/%s is not a regular file (a FIFO, a device or a directory): "
			       "not part of a lowkey trace", r->dir, name);
	else
		return fd;
	close(fd);
	return rc;
}

/* Read up to len bytes at off: fewer only at the end of the file. -errno on error. */
static ssize_t read_at(int fd, void *buf, size_t len, uint64_t off)
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

static int read_index(struct lk__trace_reader *r, char *err, size_t errlen)
{
	struct stat st;
	char *text;
	ssize_t n;
	int rc, fd = open_regular(r, INDEX_NAME, &st, err, errlen);

	if (fd == -ENOENT)
		return lk__failf(err, errlen, fd, "%s is not a lowkey trace (no %s/%s)", r->dir, r->dir, INDEX_NAME);
	if (fd < 0)
		return fd;
	if (st.st_size > MAX_INDEX) {
		close(fd);
		return lk__failf(err, errlen, -EFBIG, "%s: its %s is %lld bytes, more than any lowkey trace's index "
			     "(%u MiB)", r->dir, INDEX_NAME, (long long)st.st_size, MAX_INDEX >> 20);
	}
	text = malloc((size_t)st.st_size + 1);
	n = text ? read_at(fd, text, (size_t)st.st_size, 0) : -ENOMEM;
	close(fd);
	if (n < 0)
		rc = lk__failf(err, errlen, (int)n, "cannot read %s/%s: %s", r->dir, INDEX_NAME, strerror((int)-n));
	else
		rc = parse_index(r, text, (size_t)n, err, errlen);
	free(text);
	return rc;
}

int lk__reader_openat(struct lk__trace_reader *r, int dir_fd, const char *name, char *err, size_t errlen)
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
		memset(r, 0, sizeof(*r));
		r->dir_fd = -1;
		return lk__failf(err, errlen, -errno, "%s is not a lowkey trace (%s)", dir, strerror(errno));
	}
	rc = lk__reader_openat(r, fd, dir, err, errlen);
	close(fd);
	return rc;
}

void lk__reader_close(struct lk__trace_reader *r)
{
	for (size_t i = 0; i < r->nclasses; i++)
		free_class(r->classes[i]);
	free(r->classes);
	free(r->dir);
	if (r->dir_fd >= 0)
		close(r->dir_fd);
	memset(r, 0, sizeof(*r));
	r->dir_fd = -1;
}

uint64_t lk__reader_ns(const struct lk__trace_reader *r, uint64_t tsc)
{
	double ns = (double)r->monotonic0_ns + ((double)tsc - (double)r->tsc0) * 1e9 / (double)r->tsc_hz;

	/* a damaged trace may time an event before the clock's start, or past its range */
	if (!(ns > 0))
		return 0;
	return ns < 0x1p64 ? (uint64_t)ns : UINT64_MAX;
}

size_t lk__event_arg(const struct lk__event *e, size_t offset, unsigned int i, uint64_t *value, const char **str)
{
	unsigned int type = lk__arg_type(e->cls->arg_types, i);

	*str = NULL;
	if (type == LK_PROBE_STR) {
		const void *nul = offset < e->payload_len ? memchr(e->payload + offset, 0, e->payload_len - offset) : NULL;

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

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

/*
 * Decode the record at p (at most avail bytes) into e; its size, or 0 if it is damaged. The
 * header's 48 TSC bits are extended from *tsc, the previous timestamp; the size follows from the
 * event's arguments.
 */
static size_t decode_record(const struct lk__trace_reader *r, const uint8_t *p, size_t avail, uint64_t *tsc,
			    struct lk__event *e)
{
	size_t ctx = r->cputime ? 8 : 0, head = LK__PROBE_HEADER, size;
	uint64_t id;
	bool ok = true;

	if (avail < head + ctx)
		return 0;
	id = lk__header_id(get64(p));
	e->tsc = lk__tsc_advance(*tsc, lk__header_tsc48(get64(p)));
	e->cls = id < r->nclasses ? r->classes[id] : NULL;
	if (!e->cls)
		return 0;
	size = head + ctx + lk__payload_size(e->cls->arg_types, e->cls->nargs, p + head + ctx, avail - head - ctx, &ok);
	if (!ok)
		return 0;
	*tsc = e->tsc;
	e->cputime_ns = ctx ? get64(p + head) : 0;
	e->payload = p + head + ctx;
	e->payload_len = size - head - ctx;
	return size;
}

/* Walk the records of one packet's content; tsc: the packet's timestamp_begin. */
static int walk_records(struct lk__trace_reader *r, struct lk__stream_info *s, const uint8_t *p,
			const uint8_t *end, uint64_t tsc, const struct lk__reader_ops *ops, void *arg)
{
	while (p < end) {
		struct lk__event e;
		size_t size = decode_record(r, p, (size_t)(end - p), &tsc, &e);

		if (!size)
			return -EINVAL;
		e.tid = s->tid;
		s->events++;
		if (ops->event) {
			int rc = ops->event(&e, arg);

			if (rc)
				return rc;
		}
		p += size;
	}
	return 0;
}

/* Where a stream's bytes come from: its file, or memory (the fuzzer). */
struct source {
	int fd;			/* -1: bytes */
	const uint8_t *bytes;
	uint64_t size;
};

static ssize_t source_read(const struct source *src, void *buf, size_t len, uint64_t off)
{
	if (src->fd >= 0)
		return read_at(src->fd, buf, len, off);
	if (off >= src->size)
		return 0;
	if (len > src->size - off)
		len = (size_t)(src->size - off);
	memcpy(buf, src->bytes + off, len);
	return (ssize_t)len;
}

struct walk {
	uint8_t *buf;		/* one packet, grown to the largest met (at most MAX_PACKET) */
	size_t cap;
	uint64_t at;		/* where the packet being read starts */
	int read_error;		/* -errno from reading, 0 */
};

/* Read the whole packet of bytes at w->at into w->buf: its length read (less: the stream ends). */
static ssize_t read_packet(const struct source *src, struct walk *w, size_t bytes)
{
	ssize_t n;

	if (bytes > w->cap) {
		uint8_t *grown = realloc(w->buf, bytes);

		if (!grown)
			return -ENOMEM;
		w->buf = grown;
		w->cap = bytes;
	}
	n = source_read(src, w->buf, bytes, w->at);
	if (n < 0)
		w->read_error = (int)n;
	return n;
}

/*
 * One stream's packets. Returns 0, -EINVAL (damaged at w->at), an error from reading
 * (w->read_error), -ENOMEM, or a callback's value. A tail shorter than the packet it starts, or
 * than a packet's prefix, is not damage but a writer stopped mid-packet: s->truncated.
 */
static int walk_packets(struct lk__trace_reader *r, const struct source *src, struct lk__stream_info *s,
			struct walk *w, const struct lk__reader_ops *ops, void *arg)
{
	int rc = 0;

	for (w->at = 0; !rc && w->at < src->size;) {
		uint64_t avail = src->size - w->at, bytes;
		ssize_t n = read_packet(src, w, avail < PACKET_PREFIX ? (size_t)avail : PACKET_PREFIX);

		if (n < 0)
			return (int)n;
		if (n >= 4 && get32(w->buf) != CTF_MAGIC)
			return -EINVAL;
		if (n < PACKET_PREFIX) {
			s->truncated = (uint64_t)n;
			break;
		}
		bytes = get64(w->buf + 56) / 8;	/* packet_size */
		if (bytes < PACKET_PREFIX || bytes > MAX_PACKET)
			return -EINVAL;
		if (bytes > avail) {
			s->truncated = avail;
			break;
		}
		n = read_packet(src, w, (size_t)bytes);
		if (n < 0)
			return (int)n;
		if ((uint64_t)n < bytes) {	/* the file shrank meanwhile */
			s->truncated = (uint64_t)n;
			break;
		}
		s->packets++;
		s->lost = get64(w->buf + 72);	/* events_discarded, cumulative */
		rc = walk_records(r, s, w->buf + PACKET_PREFIX, w->buf + bytes, get64(w->buf + 32), ops, arg);
		if (!rc)
			w->at += bytes;
	}
	return rc;
}

/* Walk a stream from src between its callbacks; messages are the caller's. */
static int walk_source(struct lk__trace_reader *r, const struct source *src, struct lk__stream_info *s,
		       struct walk *w, const struct lk__reader_ops *ops, void *arg)
{
	int rc = ops->stream_begin ? ops->stream_begin(s, arg) : 0;

	if (!rc)
		rc = walk_packets(r, src, s, w, ops, arg);
	if (!rc && s->truncated)
		r->truncated_streams++;
	if (!rc && ops->stream_end)
		rc = ops->stream_end(s, arg);
	return rc;
}

int lk__reader_walk_bytes(struct lk__trace_reader *r, const uint8_t *data, size_t len, struct lk__stream_info *s,
			  const struct lk__reader_ops *ops, void *arg)
{
	struct source src = { -1, data, len };
	struct walk w = { 0 };
	int rc;

	s->packets = s->events = s->lost = s->truncated = 0;
	rc = walk_source(r, &src, s, &w, ops, arg);
	free(w.buf);
	return rc;
}

static int walk_stream(struct lk__trace_reader *r, const char *name, const struct lk__reader_ops *ops,
		       void *arg, char *err, size_t errlen)
{
	struct lk__stream_info s = { .tid = atoi(name + 7), .file = name };
	struct walk w = { 0 };
	struct stat st;
	int rc, fd = open_regular(r, name, &st, err, errlen);

	if (fd < 0)
		return fd;
	rc = walk_source(r, &(struct source){ fd, NULL, (uint64_t)st.st_size }, &s, &w, ops, arg);
	close(fd);
	free(w.buf);
	if (rc == -EINVAL)
		return lk__failf(err, errlen, rc, "%s/%s is damaged at byte %llu (a packet or record runs past its "
			     "bounds)", r->dir, name, (unsigned long long)w.at);
	if (rc && rc == w.read_error)
		return lk__failf(err, errlen, rc, "cannot read %s/%s: %s", r->dir, name, strerror(-rc));
	return rc;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names of the trace's stream files, sorted; how many, or -errno. */
static int list_streams(struct lk__trace_reader *r, char ***out)
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
			char **grown = realloc(names, (size_t)(cap = cap ? cap * 2 : 16) * sizeof(*names));

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

int lk__reader_walk(struct lk__trace_reader *r, const struct lk__reader_ops *ops, void *arg, char *err,
		    size_t errlen)
{
	char **names = NULL;
	int n, rc = 0;

	r->truncated_streams = 0;
	if (r->dir_fd < 0)
		return lk__failf(err, errlen, -EBADF, "no trace directory to walk");
	n = list_streams(r, &names);
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
