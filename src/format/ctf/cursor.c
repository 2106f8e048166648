// SPDX-License-Identifier: MIT
/*
 * A CTF stream read one event at a time (ctf_reader.h): a packet in memory, the next read with
 * pread when its records are done. Every length read from a file is checked against the file: a
 * damaged stream ends with an error, it is never read past. Files are read, not mapped: a file
 * its owner truncates meanwhile reads short instead of raising SIGBUS.
 */
#include <errno.h>
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

#define FORMAT2_PACKET_PREFIX 88 /* format 2's packet context ended with u32 tid, u32 spare */
#define CTF_MAGIC 0xc1fc1fc1u
#define MAX_PACKET (64u << 20) /* lowkey writes packets of 256 KiB and a record at most */

__thread void (*lk__reader_packet_hook)(uint64_t bytes);

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

/* Whether an argument is a string: a nibble of LK_PROBE_STR (those past the arguments are 0). */
static inline bool has_string(uint32_t types)
{
	uint32_t x = types ^ 0x11111111u * LK_PROBE_STR; /* a string's nibble is now 0 */

	return ((x - 0x11111111u) & ~x & 0x88888888u) != 0;
}

/*
 * The size of the record at p (at most avail bytes) of c's stream, of class *cls; 0 if it is
 * damaged.
 */
static inline size_t record_size(const struct lk__ctf_cursor *c, const uint8_t *p, size_t avail,
				 const struct lk__event_class **cls)
{
	const struct lk__trace_reader *r = c->r;
	size_t size;
	bool ok = true;
	uint64_t id;

	if (avail < c->head)
		return 0;
	id = lk__header_id(get64(p));
	*cls = id < r->nclasses ? r->classes[id] : NULL;
	/* switches (LK__EVENT_SCHED_OUT, _IN) in a switches' stream, and only there */
	if (!*cls || (id - LK__EVENT_SCHED_OUT <= LK__EVENT_SCHED_IN - LK__EVENT_SCHED_OUT) !=
			     (c->s.stream_id == 1))
		return 0;
	if (!has_string((*cls)->arg_types)) {
		size = c->head + 8u * (*cls)->nargs; /* numbers only: 8 bytes each */
		return size <= avail ? size : 0;
	}
	size = lk__payload_size((*cls)->arg_types, (*cls)->nargs, p + c->head, avail - c->head,
				&ok);
	return ok ? c->head + size : 0;
}

/*
 * Decode the record at p (at most avail bytes) into e; its size, or 0 if it is damaged. The
 * header's 48 TSC bits are extended from the previous timestamp; the size follows from the
 * event's arguments.
 */
static inline size_t decode_record(struct lk__ctf_cursor *c, const uint8_t *p, size_t avail,
				   struct lk__event *e)
{
	size_t size = record_size(c, p, avail, &e->cls);

	if (!size)
		return 0;
	e->tsc = c->tsc = lk__tsc_advance(c->tsc, lk__header_tsc48(get64(p)));
	e->cputime_ns = c->cpu ? get64(p + LK__PROBE_HEADER) : 0;
	e->payload = p + c->head;
	e->payload_len = size - c->head;
	return size;
}

/* Whether the records of a stream carry their thread's id after the header (and CPU time). */
static bool record_vtid(unsigned int format, unsigned int stream_id)
{
	return format == LK__CTF_FORMAT_VTID || (format == LK__CTF_FORMAT && stream_id == 1);
}

void lk__ctf_cursor_bytes(struct lk__ctf_cursor *c, const struct lk__trace_reader *r,
			  const uint8_t *data, size_t len, int tid, unsigned int stream_id)
{
	memset(c, 0, sizeof(*c));
	c->r = r;
	c->s = (struct lk__stream_info){ .tid = tid, .stream_id = stream_id, .file = "" };
	c->fd = -1;
	c->bytes = data;
	c->size = len;
	/* the event context: [cputime_ns (stream 0)], vtid (format 3; format 4: stream 1 only) */
	c->cpu = stream_id == 0 && r->cputime;
	c->head = LK__PROBE_HEADER + (c->cpu ? 8 : 0) + (record_vtid(r->format, stream_id) ? 4 : 0);
}

int lk__ctf_cursor_open(struct lk__ctf_cursor *c, const struct lk__trace_reader *r,
			const char *name, bool transient, char *err, size_t errlen)
{
	size_t len = strlen(name);
	struct stat st;
	int fd;

	/* stream-TID, or stream-TID-sched: the thread's context switches (stream class 1) */
	lk__ctf_cursor_bytes(c, r, NULL, 0, atoi(name + 7),
			     len > 6 && strcmp(name + len - 6, "-sched") == 0);
	c->name = strdup(name);
	if (!c->name)
		return lk__failf(err, errlen, -ENOMEM, "out of memory");
	c->s.file = c->name;
	fd = lk__ctf_open_regular(r, name, &st, err, errlen);
	if (fd < 0) {
		lk__ctf_cursor_close(c);
		return fd;
	}
	c->size = (uint64_t)st.st_size;
	c->transient = transient;
	if (transient)
		close(fd);
	else
		c->fd = fd;
	return 0;
}

void lk__ctf_cursor_close(struct lk__ctf_cursor *c)
{
	if (c->name && c->fd >= 0)
		close(c->fd);
	free(c->name);
	free(c->buf);
	c->name = NULL;
	c->buf = NULL;
	c->fd = -1;
}

void lk__ctf_cursor_rewind(struct lk__ctf_cursor *c)
{
	c->s.packets = c->s.events = c->s.lost = c->s.truncated = 0;
	c->at = c->len = 0;
	c->p = c->end = NULL;
	c->done = false;
	c->read_error = 0;
}

/* Read up to len bytes at off of the stream into the packet buffer: the bytes read, or -errno. */
static ssize_t read_stream(struct lk__ctf_cursor *c, size_t len, uint64_t off)
{
	ssize_t n;

	if (len > c->cap) {
		uint8_t *grown = realloc(c->buf, len);

		if (!grown)
			return -ENOMEM;
		c->buf = grown;
		c->cap = len;
	}
	if (!c->name) {
		n = off >= c->size ? 0 : (ssize_t)(len < c->size - off ? len : c->size - off);
		memcpy(c->buf, c->bytes + off, (size_t)n);
		return n;
	}
	if (c->fd < 0) {
		struct stat st;
		char err[8];

		c->fd = lk__ctf_open_regular(c->r, c->name, &st, err, sizeof(err));
		if (c->fd < 0)
			return c->read_error = c->fd;
	}
	n = lk__ctf_read_at(c->fd, c->buf, len, off);
	if (n < 0)
		c->read_error = (int)n;
	return n;
}

/* The stream ends here with n bytes that are not a whole packet (0: none). */
static int stream_end(struct lk__ctf_cursor *c, uint64_t n)
{
	c->s.truncated = n;
	c->done = true;
	if (c->name && c->fd >= 0) {
		close(c->fd);
		c->fd = -1;
	}
	return 0;
}

/*
 * Read the packet at c->at into memory: 1; 0 at the end of the stream; -EINVAL (damaged at
 * c->at), an error from reading, -ENOMEM. A tail shorter than the packet it starts, or than a
 * packet's prefix, is not damage but a writer stopped mid-packet: s.truncated.
 */
static int read_packet(struct lk__ctf_cursor *c)
{
	size_t prefix = c->r->format == 2 ? FORMAT2_PACKET_PREFIX : LK__CTF_PACKET_PREFIX;
	uint64_t avail = c->size - c->at, bytes;
	ssize_t n;

	if (c->at >= c->size)
		return stream_end(c, 0);
	n = read_stream(c, avail < prefix ? (size_t)avail : prefix, c->at);
	if (n < 0)
		return (int)n;
	if (n >= 4 && get32(c->buf) != CTF_MAGIC)
		return -EINVAL;
	if ((size_t)n < prefix)
		return stream_end(c, (uint64_t)n);
	bytes = get64(c->buf + 56) / 8; /* packet_size */
	if (bytes < prefix || bytes > MAX_PACKET || get32(c->buf + 20) != c->s.stream_id)
		return -EINVAL;
	if (bytes > avail)
		return stream_end(c, avail);
	n = read_stream(c, (size_t)bytes, c->at);
	if (n < 0)
		return (int)n;
	if ((uint64_t)n < bytes) /* the file shrank meanwhile */
		return stream_end(c, (uint64_t)n);
	if (c->transient) {
		close(c->fd);
		c->fd = -1;
	}
	c->s.packets++;
	c->s.lost = get64(c->buf + 72); /* events_discarded, cumulative */
	c->len = bytes;
	c->p = c->buf + prefix;
	c->end = c->buf + bytes;
	c->tsc = get64(c->buf + 32); /* timestamp_begin */
	return 1;
}

/* The packet read is done: told to the hook, and the cursor on the next. */
static void packet_done(struct lk__ctf_cursor *c)
{
	if (lk__reader_packet_hook)
		lk__reader_packet_hook(c->len);
	c->at += c->len;
	c->len = 0;
}

/* The next event from the packets after the one read: out of line, once a packet. */
static int next_in_new_packet(struct lk__ctf_cursor *c, struct lk__event *e);

/* The one decoding of a stream's records: the next event into e, 1; 0 at the end; an error. */
static inline int cursor_next(struct lk__ctf_cursor *c, struct lk__event *e)
{
	size_t size;

	if (__builtin_expect(c->p >= c->end, 0))
		return next_in_new_packet(c, e);
	size = decode_record(c, c->p, (size_t)(c->end - c->p), e);
	if (!size)
		return -EINVAL;
	c->p += size;
	e->tid = c->s.tid;
	c->s.events++;
	return 1;
}

/* The stream's next packet in memory: 1, 0 at its end, or -errno. */
static int next_packet(struct lk__ctf_cursor *c)
{
	if (c->done)
		return 0;
	if (c->len)
		packet_done(c);
	return read_packet(c);
}

static int next_in_new_packet(struct lk__ctf_cursor *c, struct lk__event *e)
{
	while (c->p >= c->end) {
		int rc = next_packet(c);

		if (rc <= 0)
			return rc;
	}
	return cursor_next(c, e);
}

int lk__ctf_cursor_next(struct lk__ctf_cursor *c, struct lk__event *e)
{
	return cursor_next(c, e);
}

int lk__ctf_cursor_walk(struct lk__ctf_cursor *c, int (*event)(const struct lk__event *, void *),
			void *arg)
{
	struct lk__event e;
	int rc;

	while ((rc = cursor_next(c, &e)) == 1)
		if (event && (rc = event(&e, arg)) != 0)
			return rc;
	return rc;
}

int lk__ctf_cursor_count(struct lk__ctf_cursor *c, uint64_t *events, struct lk__event *e)
{
	for (;;) {
		int rc;

		while (c->p < c->end) {
			const struct lk__event_class *cls;
			size_t size = record_size(c, c->p, (size_t)(c->end - c->p), &cls);

			if (!size)
				return -EINVAL;
			if (cls->id == LK__EVENT_THREAD_NAME)
				return lk__ctf_cursor_next(c, e);
			c->p += size;
			c->s.events++;
			(*events)++;
		}
		rc = next_packet(c);
		if (rc <= 0)
			return rc;
	}
}

void lk__ctf_cursor_follow(struct lk__ctf_cursor *c, uint64_t size)
{
	if (size <= c->size)
		return;
	c->size = size;
	if (c->done && !c->len) { /* at the end: read_packet starts again at c->at */
		c->done = false;
		c->s.truncated = 0;
	}
}

int lk__ctf_cursor_error(const struct lk__ctf_cursor *c, int rc, char *err, size_t errlen)
{
	const char *dir = c->r->dir ? c->r->dir : "the trace";

	if (rc == -EINVAL)
		return lk__failf(err, errlen, rc,
				 "%s/%s is damaged at byte %llu (a packet or record runs past its "
				 "bounds)",
				 dir, c->s.file, (unsigned long long)c->at);
	if (rc == -ENOMEM)
		return lk__failf(err, errlen, rc, "out of memory reading %s/%s", dir, c->s.file);
	return lk__failf(err, errlen, rc, "cannot read %s/%s: %s", dir, c->s.file, strerror(-rc));
}
