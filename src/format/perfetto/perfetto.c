// SPDX-License-Identifier: MIT
/*
 * Perfetto's native trace format (a protobuf `Trace`: a stream of `TracePacket`s): from a lowkey
 * CTF trace read back through the reader, the whole trace at once (lk__perfetto_convert) or a
 * stream's packets as a batch (the context switches' streams while recording), or from a thread's
 * ring, the records the consumer drains (lk__pft_records, perfetto.h, perfetto_live.c). Field
 * numbers are those of Perfetto's protos/perfetto/trace/ (trace_packet.proto, track_event/ (every
 * .proto there), clock_snapshot.proto).
 *
 * Layout:
 * - one packet sequence per stream, that is per thread and per thread's context switches
 *   (trusted_packet_sequence_id SEQ_BASE + n, after the process's own, SEQ_BASE), as Perfetto's
 *   SDK writes one per thread; each batch of a stream (the whole stream, when converting a
 *   trace) begins with a packet that clears the sequence's incremental state and sets its
 *   defaults (the thread's track, the incremental clock, the CPU-time track), every later one
 *   uses that state. Event packets do not say so (SEQ_NEEDS_INCREMENTAL_STATE, 2 bytes of about
 *   18): trace_processor reads the flag only to skip packets of a sequence whose state was lost
 *   (a ring that wrapped, a dropped chunk), and no sequence here is cut before its end;
 * - event names, categories (providers) and argument names are interned per batch: the first
 *   packet that uses one carries it in InternedData, the others its iid;
 * - timestamps are deltas on a sequence-scoped incremental clock (LK_CLOCK, ns) that each batch's
 *   first packet ties, in a ClockSnapshot, to CLOCK_MONOTONIC, CLOCK_BOOTTIME and CLOCK_REALTIME
 *   at the clock's value then (see docs/trace.md for why a clock of its own);
 * - a process track, a track per thread (TrackDescriptor), a counter track per LK_COUNTER and,
 *   with CPU time, a thread-time counter track per thread, whose values ride on each slice's
 *   begin and end (extra_counter_values);
 * - spans are TYPE_SLICE_BEGIN/END on their thread's track, events instants with their arguments
 *   as debug annotations, counters TYPE_COUNTER events. An event class this file does not know
 *   (one added to lowkey later) becomes an instant with its fields as annotations;
 * - a thread's context switches (its stream-TID-sched, a sequence of its own) become off-CPU
 *   slices "preempted" or "blocked" on a child track of the thread's, "off-CPU", from a switch out
 *   to the next switch in (docs/trace.md says why a track of their own).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <lowkey/probe.h>

#include "internal/failf.h"
#include "internal/outfile.h"
#include "internal/trace_convert.h"
#include "format/perfetto/perfetto.h"
#include "format/perfetto/perfetto_proto.h"
#include "probe/probe_internal.h"
#include "format/protobuf/protobuf.h"
#include "internal/ctf_reader.h"
#include "internal/trace_file.h"
#include "internal/ticks.h"
#include "format/perfetto/write.h"

/* ---- output ---- */

int lk__pft_flush(struct lk__pft *p)
{
	size_t done = 0;

	if (p->pb.failed)
		return -ENOMEM;
	while (done < p->pb.len) {
		ssize_t n = write(p->fd, p->pb.buf + done, p->pb.len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			p->write_error = n < 0 ? errno : ENOSPC;
			/* what a write cut short left of a packet goes: the file ends with a whole one */
			if (ftruncate(p->fd, (off_t)p->written) == 0)
				lseek(p->fd, (off_t)p->written, SEEK_SET);
			return -p->write_error;
		}
		done += (size_t)n;
	}
	p->written += done;
	p->pb.len = 0;
	return 0;
}

int lk__pft_packet_done(struct lk__pft *p)
{
	lk__pb_end(&p->pb);
	if (p->pb.failed)
		return -ENOMEM;
	return p->pb.len >= FLUSH_AT ? lk__pft_flush(p) : 0;
}

/* A packet of this sequence; timestamped ones take the incremental clock's delta. */
void lk__pft_begin_packet(struct lk__pft *p, unsigned int flags)
{
	lk__pb_begin(&p->pb, TRACE_PACKET);
	lk__pb_uint(&p->pb, PKT_SEQUENCE_ID, p->st->seq);
	if (flags)
		lk__pb_uint(&p->pb, PKT_SEQUENCE_FLAGS, flags);
}

static void put_clock(struct lk__pb *pb, uint32_t id, uint64_t ns, bool incremental)
{
	lk__pb_begin(pb, SNAP_CLOCKS);
	lk__pb_uint(pb, CLOCK_ID, id);
	lk__pb_uint(pb, CLOCK_TIMESTAMP, ns);
	if (incremental)
		lk__pb_uint(pb, CLOCK_INCREMENTAL, 1);
	lk__pb_end(pb);
}

/*
 * A batch's first packet: the sequence's incremental state cleared, its defaults, its clock tied
 * to the system's at the clock's current value (the trace's start for a new sequence). The
 * stream's first batch starts its sequence.
 */
int lk__pft_begin_batch(struct lk__pft *p, struct lk__pft_stream *st)
{
	struct lk__pb *pb = &p->pb;
	uint64_t base;
	bool first = !st->started;
	int tid = st->tid;

	if (first) {
		st->seq = SEQ_BASE + p->nseq++ % SEQ_SPAN;
		st->last_ns = p->r->monotonic0_ns;
		st->started = true;
	}
	base = st->last_ns;
	p->st = st;
	p->gen++;
	p->prefix_len = (uint8_t)(lk__pbw_uint(p->prefix, PKT_SEQUENCE_ID, st->seq) - p->prefix);
	lk__pft_reset_interning(p);
	lk__pft_begin_packet(p, SEQ_INCREMENTAL_STATE_CLEARED);
	if (first)
		lk__pb_uint(pb, PKT_FIRST_ON_SEQUENCE, 1);
	lk__pb_uint(pb, PKT_TIMESTAMP, base);
	lk__pb_uint(pb, PKT_TIMESTAMP_CLOCK_ID, BUILTIN_MONOTONIC);
	lk__pb_begin(pb, PKT_DEFAULTS);
	lk__pb_uint(pb, DEF_TIMESTAMP_CLOCK_ID, LK_CLOCK);
	if (tid) {
		lk__pb_begin(pb, DEF_TRACK_EVENT);
		lk__pb_uint(pb, TED_TRACK_UUID,
			    lk__pft_track_uuid(p, st->sched ? TRACK_OFF_CPU : TRACK_THREAD,
					       (uint64_t)tid));
		if (p->r->cputime && !st->sched)
			lk__pb_uint(pb, TED_EXTRA_COUNTER_TRACKS,
				    lk__pft_track_uuid(p, TRACK_CPUTIME, (uint64_t)tid));
		lk__pb_end(pb);
	}
	lk__pb_end(pb);
	lk__pb_begin(pb, PKT_CLOCK_SNAPSHOT);
	put_clock(pb, LK_CLOCK, base, true);
	put_clock(pb, BUILTIN_MONOTONIC, base, false);
	put_clock(pb, BUILTIN_BOOTTIME, base + p->boot_offset_ns, false);
	put_clock(pb, BUILTIN_REALTIME, p->r->realtime0_ns + (base - p->r->monotonic0_ns), false);
	lk__pb_end(pb);
	return lk__pft_packet_done(p);
}

/* ---- the conversion ---- */

static uint64_t clock_now(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * How far CLOCK_BOOTTIME is ahead of CLOCK_MONOTONIC (the time the machine spent suspended) as
 * it is now, which is as it was during the trace unless the machine suspended since (see
 * docs/trace.md). Read between two MONOTONIC reads: never negative.
 */
static uint64_t boot_offset_ns(void)
{
	uint64_t before = clock_now(CLOCK_MONOTONIC), boot = clock_now(CLOCK_BOOTTIME);
	uint64_t mid = before + (clock_now(CLOCK_MONOTONIC) - before) / 2;

	return boot > mid ? boot - mid : 0;
}

void lk__pft_set_rate(struct lk__pft *p, uint64_t tsc_hz)
{
	/* lk__reader_ns's result by multiplication: a division per event would cost more */
	p->scale = lk__ns_scale(tsc_hz);
}

int lk__pft_set_reader(struct lk__pft *p, struct lk__trace_reader *r)
{
	size_t had = p->r ? p->r->nclasses : 0, n = r->nclasses ? r->nclasses : 1;

	if (r->nclasses > had || !p->classes) {
		struct class_iids *grown = realloc(p->classes, n * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		memset(grown + had, 0, (n - had) * sizeof(*grown));
		p->classes = grown;
	}
	p->r = r;
	return 0;
}

static void pft_free(struct lk__pft *p)
{
	for (int i = 0; i < 4; i++)
		free(p->tables[i].slots);
	free(p->classes);
	free(p->path);
	lk__pb_free(&p->pb);
	free(p);
}

int lk__pft_open(struct lk__pft **out, int fd, const char *path, struct lk__trace_reader *r,
		 char *err, size_t errlen)
{
	struct lk__pft *p = calloc(1, sizeof(*p));
	struct stat st;
	int rc;

	*out = NULL;
	if (!p || !(p->path = strdup(path)) || lk__pft_set_reader(p, r) != 0) {
		if (p)
			pft_free(p);
		return lk__failf(err, errlen, -ENOMEM, "out of memory converting %s", r->dir);
	}
	/*
	 * Emptied only if it is not empty: ext4 flushes a file truncated to nothing when it is closed
	 * (its safeguard for files replaced in place), which made lk_trace_stop wait for the disk
	 * on the file lk_trace_start had just created.
	 */
	p->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (p->fd < 0 || fstat(p->fd, &st) != 0 || (st.st_size && ftruncate(p->fd, 0) != 0) ||
	    lseek(p->fd, 0, SEEK_SET) != 0) {
		rc = lk__failf(err, errlen, -errno, "cannot write %s: %s", path, strerror(errno));
		if (p->fd >= 0)
			close(p->fd);
		pft_free(p);
		return rc;
	}
	p->boot_offset_ns = boot_offset_ns();
	p->ns0 = r->monotonic0_ns;
	lk__pft_set_rate(p, r->tsc_hz);
	p->uuid_seed = lk__pft_mix64(r->realtime0_ns ^ (uint64_t)r->pid << 32);
	rc = lk__pft_begin_batch(p, &p->process);
	if (!rc)
		rc = lk__pft_describe_process(p);
	*out = p;
	return rc ? lk__failf(err, errlen, rc, "out of memory converting %s", r->dir) : 0;
}

int lk__pft_batch(struct lk__pft *p, struct lk__pft_stream *st, const uint8_t *data, size_t len,
		  size_t *consumed)
{
	static const struct lk__reader_ops ops = { lk__pft_on_stream_begin, lk__pft_on_event,
						   lk__pft_on_stream_end };
	struct lk__stream_info s = { .tid = st->tid, .stream_id = st->sched, .file = "" };
	int rc;

	p->st = st;
	rc = lk__reader_walk_bytes(p->r, data, len, &s, &ops, p);
	*consumed = rc ? 0 : len - (size_t)s.truncated;
	return rc ? rc : p->pb.failed ? -ENOMEM : 0;
}

int lk__pft_stream_done(struct lk__pft *p, struct lk__pft_stream *st)
{
	int rc;

	if (!st->out.pending && !st->lost)
		return 0;
	rc = lk__pft_begin_batch(p, st);
	if (!rc && !st->thread_described)
		rc = lk__pft_describe_thread(p,
					     NULL); /* a thread that lost every event it recorded */
	return rc ? rc : lk__pft_finish_stream(p);
}

uint64_t lk__pft_bytes(const struct lk__pft *p)
{
	return p->written + p->pb.len;
}

int lk__pft_close(struct lk__pft *p, char *err, size_t errlen)
{
	int rc = lk__pft_flush(p);

	if (p->write_error)
		rc = lk__failf(err, errlen, -p->write_error, "writing %s failed: %s", p->path,
			       strerror(p->write_error));
	else if (rc)
		rc = lk__failf(err, errlen, rc, "out of memory writing %s", p->path);
	if (close(p->fd) != 0 && !rc)
		rc = lk__failf(err, errlen, -errno, "writing %s failed: %s", p->path,
			       strerror(errno));
	pft_free(p);
	return rc;
}

void lk__pft_discard(struct lk__pft *p)
{
	if (!p)
		return;
	close(p->fd);
	pft_free(p);
}

int lk__perfetto_convert(const char *in, const char *path, char *err, size_t errlen)
{
	int fd = lk__out_open(path, LK__OUT_REPLACE, NULL, err, errlen), rc;

	if (fd < 0)
		return fd;
	rc = lk__perfetto_convert_fd(in, fd, path, err, errlen);
	close(fd);
	return rc;
}

int lk__perfetto_write(struct lk__trace_file *t, int fd, const char *path, char *err, size_t errlen)
{
	static const struct lk__reader_ops ops = { lk__pft_on_stream_begin, lk__pft_on_event,
						   lk__pft_on_stream_end };
	struct lk__pft *p = NULL;
	int rc = lk__pft_open(&p, fd, path, &t->r, err, errlen);

	if (!p)
		return rc;
	p->whole = true;
	if (!rc)
		rc = lk__trace_file_walk(t, &ops, p, err, errlen);
	if (rc == -ENOMEM || p->pb.failed)
		rc = lk__failf(err, errlen, -ENOMEM, "out of memory converting %s", t->r.dir);
	if (rc && rc != -EINVAL) {
		lk__pft_close(p, NULL, 0); /* err says what went wrong */
	} else {
		int closed = lk__pft_close(p, err,
					   errlen); /* after damage too: what came before is good */

		rc = rc ? rc : closed;
	}
	return rc;
}

int lk__perfetto_convert_fd(const char *in, int fd, const char *path, char *err, size_t errlen)
{
	struct lk__trace_file t;
	int rc;

	rc = lk__perfetto_live_finish(in, path, err, errlen);
	if (rc <= 0)
		return rc; /* written while the trace recorded */
	rc = lk__convert_open(&t, in, err, errlen);
	if (rc)
		return rc;
	rc = lk__perfetto_write(&t, fd, path, err, errlen);
	lk__trace_file_close(&t);
	return rc;
}
