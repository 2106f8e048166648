// SPDX-License-Identifier: MIT
/*
 * A trace of any format written as CTF from its events (ctf.h): the metadata and packets come
 * from the encoder the live writer uses (ctf.c). Each stream's records are gathered into a packet
 * of at most LK__CTF_MAX_PACKET bytes; a packet also ends where a record's time is earlier than
 * the one before it (a thread's name, timeless in JSON and Perfetto, comes at time 1), because a
 * reader extends each record's 48 bits of time forward from the one before.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal/failf.h"
#include "internal/outfile.h"
#include "probe/probe_internal.h"
#include "format/ctf/ctf.h"
#include "internal/trace_file.h"

struct ctf_out {
	const struct lk__trace_reader *r;
	int dir_fd;
	unsigned char uuid[16];
	int fd; /* the stream being written; -1 between streams */
	unsigned int stream_id;
	int tid;
	uint64_t packets; /* written to this stream */
	uint8_t *buf;	  /* the packet's records */
	size_t len, cap;
	uint64_t ts_begin, ts_end; /* of the records in buf; ts_end: of the last record written */
};

static void class_arg_name(unsigned int i, const void *arg, const char **p, size_t *n)
{
	const struct lk__event_class *c = arg;

	*p = c->arg_name[i];
	*n = strlen(c->arg_name[i]);
}

/* The metadata: r's clock and process, its classes (lowkey's own are in the prologue). */
static int put_metadata(struct ctf_out *o, const char *out, char *err, size_t errlen)
{
	const struct lk__trace_reader *r = o->r;
	struct lk__ctf_meta m = {
		.uuid = o->uuid,
		.tsc_hz = r->tsc_hz,
		.tsc0 = r->tsc0,
		.monotonic0_ns = r->monotonic0_ns,
		.realtime0_ns = r->realtime0_ns,
		.sched_lost = r->sched_lost,
		.dropped = r->dropped,
		.cputime = r->cputime,
		.sched = r->sched,
		.overwrite = r->overwrite,
		.vtid = true, /* format 3: what Trace Compass's UST analyses read */
		.pid = r->pid,
		.procname = r->procname,
		.hostname = "",
	};
	int fd = openat(o->dir_fd, "metadata", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			0644),
	    rc = 0;
	FILE *f = fd >= 0 ? lk__out_stream(fd) : NULL;

	if (!f) {
		rc = fd < 0 ? -errno : -ENOMEM;
		if (fd >= 0)
			close(fd);
		return lk__failf(err, errlen, rc, "cannot write %s/metadata: %s", out,
				 strerror(-rc));
	}
	lk__ctf_put_prologue(f, &m);
	for (size_t id = LK__FIRST_SITE_ID; id < r->nclasses; id++) {
		const struct lk__event_class *c = r->classes[id];
		struct lk__ctf_class cc;

		if (!c)
			continue;
		if (strchr(c->provider, ':') || strchr(c->event, ':') || !c->provider[0] ||
		    !c->event[0]) {
			rc = lk__failf(err, errlen, -EINVAL,
				       "cannot write the event \"%s:%s\" as CTF: a provider "
				       "or an event name is empty or holds a ':'",
				       c->provider, c->event);
			break;
		}
		cc = (struct lk__ctf_class){ c->id,	  c->kind,  c->nargs, c->arg_types,
					     c->provider, c->event, c->where, { { 0 } } };
		lk__ctf_field_names(&cc, class_arg_name, c);
		lk__ctf_put_class(f, &cc);
	}
	if ((fflush(f) != 0 || ferror(f)) && !rc)
		rc = lk__failf(err, errlen, -EIO, "cannot write %s/metadata", out);
	if (fclose(f) != 0 && !rc)
		rc = lk__failf(err, errlen, -errno, "cannot write %s/metadata: %s", out,
			       strerror(errno));
	return rc;
}

/* The records gathered so far as a packet; lost: the stream's losses so far (cumulative). */
static int put_packet(struct ctf_out *o, uint64_t lost)
{
	bool lead = o->packets == 0 && lost; /* as the live writer does (ctf.c) */
	int rc = lk__ctf_put_packet(o->fd, o->uuid, o->stream_id, o->tid, o->ts_begin, o->ts_end,
				    o->packets, lost, lead, o->buf, o->len);

	if (rc)
		return rc;
	o->packets += 1 + lead;
	o->len = 0;
	return 0;
}

static int on_stream_begin(const struct lk__stream_info *s, void *arg)
{
	struct ctf_out *o = arg;
	char name[48];

	snprintf(name, sizeof(name), s->stream_id ? "stream-%d-sched" : "stream-%d", s->tid);
	o->fd = openat(o->dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (o->fd < 0)
		return -errno;
	o->stream_id = s->stream_id;
	o->tid = s->tid;
	o->packets = 0;
	o->len = 0;
	o->ts_begin = o->ts_end = 0;
	return 0;
}

static int reserve(struct ctf_out *o, size_t size)
{
	size_t cap = o->cap ? o->cap : LK__CTF_MAX_PACKET;
	uint8_t *grown;

	if (o->cap - o->len >= size)
		return 0;
	while (cap - o->len < size)
		cap *= 2;
	grown = realloc(o->buf, cap);
	if (!grown)
		return -ENOMEM;
	o->buf = grown;
	o->cap = cap;
	return 0;
}

/* A record: header (id, 48 bits of time), [CPU time,] the thread's id, the payload as read. */
static int on_event(const struct lk__event *e, void *arg)
{
	struct ctf_out *o = arg;
	bool cpu = o->stream_id == 0 && o->r->cputime;
	size_t size = LK__PROBE_HEADER + (cpu ? 8 : 0) + sizeof(int32_t) + e->payload_len;
	uint64_t head = lk__probe_header(e->tsc, e->cls->id);
	int32_t vtid = o->tid;
	uint8_t *w;
	int rc;

	if (o->len && (o->len + size > LK__CTF_MAX_PACKET || e->tsc < o->ts_end) &&
	    (rc = put_packet(o, 0)) != 0)
		return rc;
	if (reserve(o, size))
		return -ENOMEM;
	if (!o->len)
		o->ts_begin = e->tsc;
	o->ts_end = e->tsc;
	w = o->buf + o->len;
	memcpy(w, &head, sizeof(head));
	w += sizeof(head);
	if (cpu) {
		memcpy(w, &e->cputime_ns, 8);
		w += 8;
	}
	memcpy(w, &vtid, sizeof(vtid));
	w += sizeof(vtid);
	if (e->payload_len)
		memcpy(w, e->payload, e->payload_len);
	o->len += size;
	return 0;
}

/* The last packet, with the stream's losses; a stream without events still gets one. */
static int on_stream_end(const struct lk__stream_info *s, void *arg)
{
	struct ctf_out *o = arg;
	uint64_t lost = s->stream_id ? 0 : s->lost;
	int rc = 0;

	if (o->len || !o->packets || lost)
		rc = put_packet(o, lost);
	if (close(o->fd) != 0 && !rc)
		rc = -errno;
	o->fd = -1;
	return rc;
}

int lk__ctf_write_trace(struct lk__trace_file *t, int dir_fd, const char *out, char *err,
			size_t errlen)
{
	static const struct lk__reader_ops ops = { on_stream_begin, on_event, on_stream_end };
	struct ctf_out o = { .r = &t->r, .dir_fd = dir_fd, .fd = -1 };
	int rc;

	lk__ctf_uuid(o.uuid);
	rc = put_metadata(&o, out, err, errlen);
	if (rc)
		return rc;
	rc = lk__trace_file_walk(t, &ops, &o, err, errlen);
	if (o.fd >= 0)
		close(o.fd);
	free(o.buf);
	if (rc == -ENOMEM)
		return lk__failf(err, errlen, rc, "out of memory writing %s", out);
	if (rc > 0)
		rc = -EIO;
	if (rc && rc != -EINVAL) /* -EINVAL: the source is damaged, err says where */
		return lk__failf(err, errlen, rc, "cannot write %s: %s", out, strerror(-rc));
	return rc;
}
