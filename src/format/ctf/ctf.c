// SPDX-License-Identifier: MIT
/*
 * The CTF 1.8 writer.
 *
 * A trace is a directory: `metadata` (TSDL text describing the layout below) and one stream file
 * per thread (`stream-TID`; with LK_TRACE_SCHED also `stream-TID-sched`, see sched.c). The
 * metadata is all a reader needs, lowkey's own included (reader.c): there is no other file to
 * lose when a trace is copied. It is rewritten (to a temporary file, then renamed) whenever an
 * object with new sites loads during the trace and at the end, when the TSC frequency measured
 * over the whole trace replaces the start-up estimate.
 *
 * Packet: header { u32 magic, u8 uuid[16], u32 stream_id, u64 stream_instance_id (tid) },
 *         context { u64 timestamp_begin, timestamp_end, content_size, packet_size,
 *                   packet_seq_num, events_discarded },
 *         then the thread's records as they are in its ring (format 4): the packet is written
 *         with one writev from the ring, its prefix beside it, and nothing is copied. The
 *         thread's id is the stream's (stream_instance_id, and the file's name); an event does
 *         not carry it. lowkey convert writes format 3, where each event carries it as the
 *         `vtid` context Trace Compass's UST analyses read (write.c).
 *
 * Finding a packet's bounds (where its records end, how many, the last one's time) reads only
 * the records' headers: a run of records of one event, the common case, is stepped over by that
 * event's size, comparing each header's id.
 *
 * A stream's events_discarded is cumulative; readers report the difference between packets. A
 * stream whose first packet would already count losses starts with an empty packet counting none,
 * so that a reader's count (babeltrace2 has none to compare a first packet with) is the whole one.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <lowkey/version.h>

#include "core/error.h"
#include "internal/outfile.h"
#include "probe/probe_internal.h"
#include "format/ctf/ctf.h"

#define CTF_MAGIC 0xc1fc1fc1u
#define MAX_PACKET LK__CTF_MAX_PACKET

struct packet_prefix {
	uint32_t magic;
	uint8_t uuid[16];
	uint32_t stream_id;
	uint64_t stream_instance_id;
	uint64_t timestamp_begin;
	uint64_t timestamp_end;
	uint64_t content_size;
	uint64_t packet_size;
	uint64_t packet_seq_num;
	uint64_t events_discarded;
} __attribute__((packed));

_Static_assert(sizeof(struct packet_prefix) == LK__CTF_PACKET_PREFIX, "reader.c reads this layout");

static void uuid_string(const unsigned char u[16], char out[37])
{
	snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
		 u[13], u[14], u[15]);
}

void lk__ctf_uuid(unsigned char uuid[16])
{
	if (getrandom(uuid, 16, 0) != 16) {
		for (size_t i = 0; i < 16; i++)
			uuid[i] = (unsigned char)(lk__probe_tsc() >> (i % 8 * 8));
	}
	uuid[6] = (uuid[6] & 0x0f) | 0x40; /* a version 4 UUID */
	uuid[8] = (uuid[8] & 0x3f) | 0x80;
}

int lk__ctf_open(struct lk__trace *t)
{
	char msg[512];

	if (t->dir_fd < 0)
		t->dir_fd = lk__out_open(t->ctf_dir, LK__OUT_DIR | LK__OUT_EMPTY, NULL, msg,
					 sizeof(msg));
	if (t->dir_fd < 0)
		return lk__fail(t->dir_fd, "the trace directory: %s", msg);
	lk__ctf_uuid(t->uuid);
	return 0;
}

/* s as a TSDL string's contents: quotes, backslashes and control characters become '_'. */
static const char *tsdl_text(const char *s, char *out, size_t len)
{
	size_t i = 0;

	for (; s[i] && i + 1 < len; i++)
		out[i] = s[i] == '"' || s[i] == '\\' || (unsigned char)s[i] < 0x20 ? '_' : s[i];
	out[i] = 0;
	return out;
}

/* Argument i of a site's arguments as written ("a, b + 1, c"): its text, trimmed. */
static void written_arg(unsigned int i, const void *arg, const char **text, size_t *len)
{
	const char *p = arg;
	size_t n;

	for (unsigned int k = 0; k < i && p; k++) {
		p = strchr(p, ',');
		if (p)
			p++;
	}
	while (p && *p == ' ')
		p++;
	n = p ? strcspn(p, ",") : 0;
	while (n && p[n - 1] == ' ')
		n--;
	*text = p;
	*len = n;
}

/* A field name for argument i: p (n bytes) when it is an identifier, else argI. */
static void field_name(const char *p, size_t n, unsigned int i, char *out, size_t len)
{
	bool ident = p && n > 0 && n < len &&
		     (p[0] == '_' || (p[0] >= 'a' && p[0] <= 'z') || (p[0] >= 'A' && p[0] <= 'Z'));

	for (size_t k = 0; ident && k < n; k++)
		ident = p[k] == '_' || (p[k] >= 'a' && p[k] <= 'z') ||
			(p[k] >= 'A' && p[k] <= 'Z') || (p[k] >= '0' && p[k] <= '9');
	if (ident)
		snprintf(out, len, "%.*s", (int)n, p);
	else
		snprintf(out, len, "arg%u", i);
}

/* A counter's value has a type of its own name: the reader tells counters from events by it. */
static const char *tsdl_type(unsigned int type, bool counter)
{
	switch (type) {
	case LK_PROBE_I64:
		return counter ? "lk_counter_int64_t" : "int64_t";
	case LK_PROBE_U64:
		return counter ? "lk_counter_uint64_t" : "uint64_t";
	case LK_PROBE_F64:
		return counter ? "lk_counter_double_t" : "double_t";
	case LK_PROBE_STR:
		return "string";
	default:
		return "lk_pointer_t";
	}
}

void lk__ctf_field_names(struct lk__ctf_class *c,
			 void (*name)(unsigned int i, const void *arg, const char **p, size_t *n),
			 const void *arg)
{
	for (unsigned int a = 0; a < c->nargs; a++) {
		const char *p = NULL;
		size_t n = 0;

		if (c->kind == LK_PROBE_COUNTER) {
			snprintf(c->names[a], sizeof(c->names[a]), "value");
		} else {
			name(a, arg, &p, &n);
			field_name(p, n, a, c->names[a], sizeof(c->names[a]));
		}
		for (unsigned int b = 0; b < a; b++)
			if (strcmp(c->names[a], c->names[b]) == 0)
				snprintf(c->names[a], sizeof(c->names[a]), "arg%u", a);
	}
}

void lk__ctf_put_class(FILE *f, const struct lk__ctf_class *c)
{
	const char *suffix = c->kind == LK_PROBE_SPAN_BEGIN ? ":begin" :
			     c->kind == LK_PROBE_SPAN_END   ? ":end" :
							      "";
	char where[4096], provider[256], event[256];

	fprintf(f, "event {\n\tname = \"%s:%s%s\";\n\tid = %u;\n\tstream_id = 0;\n",
		tsdl_text(c->provider, provider, sizeof(provider)),
		tsdl_text(c->event, event, sizeof(event)), suffix, c->id);
	if (c->where && c->where[0])
		fprintf(f, "\tmodel.emf.uri = \"%s\";\n",
			tsdl_text(c->where, where, sizeof(where)));
	fprintf(f, "\tfields := struct {\n");
	for (unsigned int a = 0; a < c->nargs; a++)
		fprintf(f, "\t\t%s _%s;\n",
			tsdl_type(lk__arg_type(c->arg_types, a), c->kind == LK_PROBE_COUNTER),
			c->names[a]);
	fprintf(f, "\t};\n};\n\n");
}

static void write_event_class(FILE *f, const struct lk__probe_site_rt *rt)
{
	struct lk__ctf_class c = { .id = rt->id,
				   .kind = rt->kind,
				   .nargs = rt->nargs,
				   .arg_types = rt->arg_types,
				   .provider = rt->provider,
				   .event = rt->event };
	char where[4096];

	snprintf(where, sizeof(where), "%s:%u", rt->file, rt->line);
	c.where = where;
	lk__ctf_field_names(&c, written_arg, rt->arg_names);
	lk__ctf_put_class(f, &c);
}

static void write_types(FILE *f)
{
	fprintf(f, "typealias integer { size = 8; align = 8; signed = false; } := uint8_t;\n");
	fprintf(f, "typealias integer { size = 16; align = 8; signed = false; } := uint16_t;\n");
	fprintf(f, "typealias integer { size = 32; align = 8; signed = false; } := uint32_t;\n");
	fprintf(f, "typealias integer { size = 32; align = 8; signed = true; } := int32_t;\n");
	fprintf(f, "typealias integer { size = 64; align = 8; signed = false; } := uint64_t;\n");
	fprintf(f, "typealias integer { size = 64; align = 8; signed = true; } := int64_t;\n");
	fprintf(f,
		"typealias integer { size = 64; align = 8; signed = false; base = 16; } := lk_pointer_t;\n");
	fprintf(f,
		"typealias floating_point { exp_dig = 11; mant_dig = 53; align = 8; } := double_t;\n");
	fprintf(f,
		"typealias integer { size = 64; align = 8; signed = true; } := lk_counter_int64_t;\n");
	fprintf(f,
		"typealias integer { size = 64; align = 8; signed = false; } := lk_counter_uint64_t;\n");
	fprintf(f,
		"typealias floating_point { exp_dig = 11; mant_dig = 53; align = 8; } := lk_counter_double_t;\n\n");
}

static void put_env(FILE *f, const struct lk__ctf_meta *m)
{
	char host[256], name[256];

	fprintf(f,
		"env {\n\ttracer_name = \"lowkey\";\n\ttracer_major = %d;\n\ttracer_minor = %d;\n"
		"\tdomain = \"ust\";\n\thostname = \"%s\";\n\tvpid = %d;\n\tprocname = \"%s\";\n"
		"\tlowkey_format = %d;\n\tlowkey_cputime = %d;\n\tlowkey_sched = %d;\n\tlowkey_sched_lost = %llu;\n"
		"\tlowkey_tsc_hz = %llu;\n\tlowkey_tsc0 = %llu;\n\tlowkey_monotonic0_ns = %llu;\n"
		"\tlowkey_realtime0_ns = %llu;\n",
		LK_VERSION_MAJOR, LK_VERSION_MINOR, tsdl_text(m->hostname, host, sizeof(host)),
		m->pid, tsdl_text(m->procname, name, sizeof(name)),
		m->vtid ? LK__CTF_FORMAT_VTID : LK__CTF_FORMAT, m->cputime ? 1 : 0,
		m->sched ? 1 : 0, (unsigned long long)m->sched_lost, (unsigned long long)m->tsc_hz,
		(unsigned long long)m->tsc0, (unsigned long long)m->monotonic0_ns,
		(unsigned long long)m->realtime0_ns);
	/*
	 * A flight recorder's snapshot: its streams' discarded events are mostly older ones that the
	 * rings overwrote by design; lowkey_dropped of them the threads dropped (see snapshot.c).
	 */
	if (m->overwrite)
		fprintf(f, "\tlowkey_overwrite = 1;\n\tlowkey_dropped = %llu;\n",
			(unsigned long long)m->dropped);
	fprintf(f, "};\n\n");
}

/*
 * Stream 0: the threads' probes (their thread's id per event with vtid: format 3); stream 1:
 * their context switches (sched.c), which always carry it.
 */
static void write_stream(FILE *f, unsigned int id, bool cputime, bool vtid)
{
	/* A record's 48 low bits of the TSC: readers extend them from the previous timestamp. */
	fprintf(f,
		"stream {\n\tid = %u;\n\tevent.header := struct {\n\t\tuint16_t id;\n\t\tinteger { size = %d; "
		"align = 8; signed = false; map = clock.tsc.value; } timestamp;\n\t};\n",
		id, LK__PROBE_TSC_BITS);
	fprintf(f,
		"\tpacket.context := struct {\n\t\ttsc_t timestamp_begin;\n\t\ttsc_t timestamp_end;\n"
		"\t\tuint64_t content_size;\n\t\tuint64_t packet_size;\n\t\tuint64_t packet_seq_num;\n"
		"\t\tuint64_t events_discarded;\n\t};\n");
	if (cputime || vtid)
		fprintf(f, "\tevent.context := struct {\n%s%s\t};\n",
			cputime ? "\t\tuint64_t cputime_ns;\n" : "",
			vtid ? "\t\tint32_t _vtid;\n" : "");
	fprintf(f, "};\n\n");
}

void lk__ctf_put_prologue(FILE *f, const struct lk__ctf_meta *m)
{
	char uuid[37];
	/*
	 * The real time at which the TSC read zero, so that value v means origin + v / freq (and tsc0
	 * comes out at realtime0). It can be before 1970: a counter that does not start at boot
	 * (qemu-user's arm64 counter runs on the host's real time) reads more than the seconds since
	 * the epoch. offset_s is signed in CTF (babeltrace2 reads it so), offset is not: the
	 * seconds are rounded down and the cycles count forward from them.
	 */
	__int128 since_zero_ns = (__int128)((unsigned __int128)m->tsc0 * 1000000000u / m->tsc_hz);
	__int128 origin_ns = (__int128)m->realtime0_ns - since_zero_ns;
	__int128 offset_s = origin_ns >= 0 ? origin_ns / 1000000000 :
					     -((-origin_ns + 999999999) / 1000000000);
	uint64_t offset = (uint64_t)((origin_ns - offset_s * 1000000000) * m->tsc_hz / 1000000000u);

	uuid_string(m->uuid, uuid);
	fprintf(f, "/* CTF 1.8 */\n\n");
	write_types(f);
	fprintf(f, "trace {\n\tmajor = 1;\n\tminor = 8;\n\tuuid = \"%s\";\n\tbyte_order = le;\n",
		uuid);
	fprintf(f, "\tpacket.header := struct {\n\t\tuint32_t magic;\n\t\tuint8_t uuid[16];\n"
		   "\t\tuint32_t stream_id;\n\t\tuint64_t stream_instance_id;\n\t};\n};\n\n");
	put_env(f, m);
	fprintf(f,
		"clock {\n\tname = \"tsc\";\n\tuuid = \"%s\";\n\tdescription = \"TSC, calibrated against "
		"CLOCK_REALTIME\";\n\tfreq = %llu;\n\tprecision = 1;\n\toffset_s = %lld;\n\toffset = %llu;\n"
		"\tabsolute = TRUE;\n};\n\n",
		uuid, (unsigned long long)m->tsc_hz, (long long)offset_s,
		(unsigned long long)offset);
	fprintf(f,
		"typealias integer { size = 64; align = 8; signed = false; map = clock.tsc.value; } := tsc_t;\n\n");
	write_stream(f, 0, m->cputime, m->vtid);
	if (m->sched)
		write_stream(f, 1, false, true);
	fprintf(f,
		"event {\n\tname = \"lowkey:thread_name\";\n\tid = %d;\n\tstream_id = 0;\n"
		"\tfields := struct {\n\t\tstring _name;\n\t};\n};\n\n",
		LK__EVENT_THREAD_NAME);
	if (m->sched)
		fprintf(f,
			"event {\n\tname = \"lowkey:sched_out\";\n\tid = %d;\n\tstream_id = 1;\n"
			"\tfields := struct {\n\t\tuint64_t _cpu;\n\t\tuint64_t _preempted;\n\t};\n};\n\n"
			"event {\n\tname = \"lowkey:sched_in\";\n\tid = %d;\n\tstream_id = 1;\n"
			"\tfields := struct {\n\t\tuint64_t _cpu;\n\t};\n};\n\n",
			LK__EVENT_SCHED_OUT, LK__EVENT_SCHED_IN);
}

/* The live trace's metadata: this process, this host, the clock as calibrated so far. */
static void write_prologue(FILE *f, const struct lk__trace *t)
{
	char host[256] = "";
	struct lk__ctf_meta m = {
		.uuid = t->uuid,
		.tsc_hz = t->tsc_hz,
		.tsc0 = t->tsc0,
		.monotonic0_ns = t->monotonic0_ns,
		.realtime0_ns = t->realtime0_ns,
		.sched_lost = __atomic_load_n(&t->sched_lost, __ATOMIC_RELAXED),
		.dropped = t->lost,
		.cputime = t->cputime,
		.sched = t->sched,
		.overwrite = t->overwrite,
		.pid = (int)getpid(),
		.procname = program_invocation_short_name,
		.hostname = host,
	};

	gethostname(host, sizeof(host) - 1);
	lk__ctf_put_prologue(f, &m);
}

/* Write name atomically: to name.tmp, then rename. */
static int write_file(struct lk__trace *t, const char *name,
		      void (*fill)(FILE *, const struct lk__trace *),
		      void (*more)(FILE *, const struct lk__trace *))
{
	char tmp[64]; /* NAME.tmp: babeltrace2 skips neither, so it must be gone before a reader looks */
	FILE *f;
	int fd, err = 0;

	snprintf(tmp, sizeof(tmp), "%s.tmp", name);
	fd = openat(t->dir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	f = lk__out_stream(fd); /* a child forked meanwhile never flushes its copy into it */
	if (!f) {
		close(fd);
		return -ENOMEM;
	}
	fill(f, t);
	if (more)
		more(f, t);
	if (fflush(f) != 0 || ferror(f))
		err = errno ? -errno : -EIO;
	if (fclose(f) != 0 && !err)
		err = -errno;
	if (!err && renameat(t->dir_fd, tmp, t->dir_fd, name) != 0)
		err = -errno;
	if (err)
		unlinkat(t->dir_fd, tmp, 0);
	return err;
}

static void write_event_classes(FILE *f, const struct lk__trace *t)
{
	size_t n;
	const struct lk__probe_site_rt *sites = lk__probe_sites(&n);

	(void)t;
	for (size_t i = 0; i < n; i++)
		write_event_class(f, &sites[i]);
}

/* Registry lock held (the site list). */
int lk__ctf_write_metadata(struct lk__trace *t)
{
	int err = write_file(t, "metadata", write_prologue, write_event_classes);

	if (err)
		return lk__fail(err, "cannot write the trace's metadata in %s: %s", t->ctf_dir,
				strerror(-err));
	return 0;
}

int lk__ctf_open_stream(struct lk__trace *t, struct lk__probe_buffer *b)
{
	char name[32];

	snprintf(name, sizeof(name), "stream-%d", (int)b->tid);
	b->fd = openat(t->dir_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
		       0644);
	if (b->fd < 0)
		return -errno;
	__atomic_fetch_add(&t->threads, 1, __ATOMIC_RELAXED);
	return 0;
}

/* Put back what a failed write left of a packet, so the file ends at a packet boundary. */
static void truncate_to(int fd, off_t size)
{
	if (ftruncate(fd, size) == 0)
		lseek(fd, size, SEEK_SET);
}

/*
 * The records of one event from p on, while they are whole before stop (the limit less their
 * size): where they end. Each header's id is compared; nothing else is read.
 */
static const uint8_t *same_event_run(const uint8_t *p, const uint8_t *stop, uint32_t id,
				     size_t size)
{
	while (p <= stop) {
		uint64_t head;

		memcpy(&head, p, sizeof(head));
		if (lk__header_id(head) != id)
			break;
		p += size;
	}
	return p;
}

/*
 * Where the packet of the records at p ends: after as many whole records as fit in MAX_PACKET
 * bytes (a larger first one alone), up to end or the first that is not a record (a pad, or the
 * end of what was committed). *last: its last record; *events: how many. Only headers are read;
 * a record of an event without strings is followed by that event's records in one step each.
 */
static const uint8_t *packet_end(const uint8_t *p, const uint8_t *end, bool cputime,
				 const uint8_t **last, uint64_t *events)
{
	size_t first = lk__record_size(p, (size_t)(end - p), cputime);
	size_t room = first > MAX_PACKET ? first : MAX_PACKET;
	const uint8_t *limit = (size_t)(end - p) > room ? p + room : end;
	uint64_t n = 0;

	while ((size_t)(limit - p) >= LK__PROBE_HEADER) {
		size_t size = lk__record_size(p, (size_t)(limit - p), cputime);
		uint64_t head;
		const uint8_t *run;

		if (!size)
			break;
		memcpy(&head, p, sizeof(head));
		*last = p;
		p += size;
		n++;
		if (lk__record_layouts[lk__header_id(head)].strings || (size_t)(limit - p) < size)
			continue; /* valid: lk__record_size read it */
		run = same_event_run(p, limit - size, lk__header_id(head), size);
		if (run != p) {
			n += (size_t)(run - p) / size;
			*last = run - size;
			p = run;
		}
	}
	*events = n;
	return p;
}

static void fill_prefix(struct packet_prefix *h, const unsigned char uuid[16],
			unsigned int stream_id, pid_t tid, uint64_t ts_begin, uint64_t ts_end,
			size_t total, uint64_t seq, uint64_t discarded)
{
	memset(h, 0, sizeof(*h));
	h->magic = CTF_MAGIC;
	memcpy(h->uuid, uuid, sizeof(h->uuid));
	h->stream_id = stream_id;
	h->stream_instance_id = (uint64_t)tid;
	h->timestamp_begin = ts_begin;
	h->timestamp_end = ts_end;
	h->content_size = h->packet_size = total * 8;
	h->packet_seq_num = seq;
	h->events_discarded = discarded;
}

/*
 * Write [lead,] h and body whole at the end of fd, or nothing: what a failed write left is cut
 * away, so the file always ends at a packet boundary.
 */
static int write_whole(int fd, const struct packet_prefix *lead, const struct packet_prefix *h,
		       const void *body, size_t len)
{
	struct iovec iov[3];
	size_t total = 0;
	int n = 0;
	off_t before;
	ssize_t done;

	if (lead)
		iov[n++] = (struct iovec){ (void *)lead, sizeof(*lead) };
	iov[n++] = (struct iovec){ (void *)h, sizeof(*h) };
	if (len)
		iov[n++] = (struct iovec){ (void *)body, len };
	for (int i = 0; i < n; i++)
		total += iov[i].iov_len;
	before = lseek(fd, 0, SEEK_CUR);
	done = writev(fd, iov, n);
	if (done != (ssize_t)total) {
		int err = done < 0 ? -errno : -ENOSPC;

		truncate_to(fd, before);
		return err;
	}
	return 0;
}

int lk__ctf_put_packet(int fd, const unsigned char uuid[16], unsigned int stream_id, pid_t tid,
		       uint64_t ts_begin, uint64_t ts_end, uint64_t seq, uint64_t discarded,
		       bool lead, const void *records, size_t len)
{
	struct packet_prefix h, first;

	if (lead)
		fill_prefix(&first, uuid, stream_id, tid, ts_begin, ts_begin, sizeof(first), seq++,
			    0);
	fill_prefix(&h, uuid, stream_id, tid, ts_begin, ts_end, sizeof(h) + len, seq, discarded);
	return write_whole(fd, lead ? &first : NULL, &h, records, len);
}

/* Write [lead,] a packet of out_len bytes of records at out, and account for it. */
static int put_packet(struct lk__trace *t, struct lk__probe_buffer *b, const uint8_t *out,
		      size_t out_len, uint64_t ts_begin, uint64_t ts_end)
{
	uint64_t lost = __atomic_load_n(&b->lost, __ATOMIC_RELAXED);
	bool lead_needed = b->packets == 0 && lost; /* see the top of this file */
	uint64_t seq = b->packets;
	int err;

	if (b->fd < 0 && lk__ctf_open_stream(t, b) != 0)
		return -errno;
	err = lk__ctf_put_packet(b->fd, t->uuid, 0, b->tid, ts_begin, ts_end, seq, lost,
				 lead_needed, out, out_len);
	if (err)
		return err;
	b->packets = seq + 1 + lead_needed;
	b->lost_written = lost;
	__atomic_fetch_add(&t->bytes, (1 + lead_needed) * sizeof(struct packet_prefix) + out_len,
			   __ATOMIC_RELAXED);
	return 0;
}

int lk__ctf_write_records(struct lk__trace *t, struct lk__probe_buffer *b, const uint8_t *start,
			  const uint8_t *end, uint64_t now, const uint8_t **next, uint64_t *events)
{
	const uint8_t *last = start;
	uint64_t head, ts_begin, ts_end;

	*next = start;
	*events = 0;
	if (start >= end)
		return put_packet(t, b, NULL, 0, now, now);
	*next = packet_end(start, end, t->cputime, &last, events);
	if (*next == start)
		return 0; /* not a record */
	memcpy(&head, start, sizeof(head));
	ts_begin = lk__tsc_extend(now, lk__header_tsc48(head));
	memcpy(&head, last, sizeof(head));
	ts_end = lk__tsc_extend(now, lk__header_tsc48(head));
	return put_packet(t, b, start, (size_t)(*next - start), ts_begin, ts_end);
}

int lk__ctf_write_sched_packet(struct lk__trace *t, pid_t tid, int *fd, uint64_t *packets,
			       const uint8_t *out, size_t len, uint64_t ts_begin, uint64_t ts_end)
{
	char name[48];
	int err;

	if (*fd < 0) {
		/* a stream goes on where it stopped if its thread id comes back (a new thread) */
		snprintf(name, sizeof(name), "stream-%d-sched", (int)tid);
		*fd = openat(t->dir_fd, name,
			     O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC |
				     (*packets ? O_APPEND : O_TRUNC),
			     0644);
		if (*fd < 0)
			return -errno;
	}
	err = lk__ctf_put_packet(*fd, t->uuid, 1, tid, ts_begin, ts_end, *packets, 0, false, out,
				 len);
	if (err)
		return err;
	++*packets;
	__atomic_fetch_add(&t->bytes, sizeof(struct packet_prefix) + len, __ATOMIC_RELAXED);
	return 0;
}

void lk__ctf_close(struct lk__trace *t)
{
	if (t->dir_fd >= 0)
		close(t->dir_fd);
	t->dir_fd = -1;
}

/* dir itself, not what a link another user put at its name points to. */
static DIR *open_own_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

	if (!d && fd >= 0)
		close(fd);
	return d;
}

void lk__remove_streams(const char *dir)
{
	DIR *d = open_own_dir(dir);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d)))
		if (strncmp(e->d_name, "stream-", 7) == 0)
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
}

void lk__remove_ctf(const char *dir)
{
	static const char *const names[] = { "metadata", ".lowkey-index" };
	DIR *d = open_own_dir(dir);
	struct dirent *e;

	if (!d)
		return;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		unlinkat(dirfd(d), names[i], 0);
	while ((e = readdir(d)))
		if (strncmp(e->d_name, "stream-", 7) == 0)
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
	rmdir(dir); /* only when empty; a link at the name is not removed through */
}
