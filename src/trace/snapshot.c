// SPDX-License-Identifier: MIT
/*
 * The flight recorder's reader: snapshots of the rings of an overwrite-mode trace.
 *
 * A snapshot writes each thread's sub-buffers, oldest first, as the packets of its stream in a
 * new CTF trace, while the threads go on recording (buffer.c gives the protocol: the reader holds
 * one area at a time, and the producer never starts a held area anew). It starts at the
 * sub-buffer the producer is in (the newest) less LK__SLOTS - 1 and ends with that one, read up to
 * what the producer had committed when the snapshot got to it. A sub-buffer the producer started
 * anew before the snapshot got to it is not written: its events are counted, with the
 * overwritten ones before the first sub-buffer, in the next packet's events_discarded, which is
 * cumulative per stream: a packet of sub-buffer s says "first[s] - (events written before it)"
 * plus the events the thread dropped (a signal handler's over an event in progress, a record
 * larger than a sub-buffer), so readers report exactly what is missing and where.
 *
 * A thread's name is written first, as a lowkey:thread_name event at the time of its first
 * written event: the ring does not keep it.
 *
 * One reader at a time (the snapshot lock): a snapshot, or the consumer counting closed
 * sub-buffers ahead of the producer so that the producer does not have to.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <lowkey/error.h>

#include "core/error.h"
#include "internal/outfile.h"
#include "internal/trace_convert.h"
#include "probe/probe_internal.h"
#include "internal/trace_progress.h"

#define MAX_NAME_TRIES 10000

static pthread_mutex_t snapshot_lock = PTHREAD_MUTEX_INITIALIZER;

/* Nothing: test_probe_overwrite_window widens the race in hold() with a sleep (tests/probe). */
#ifdef LK__SNAPSHOT_HOLD_WINDOW_US
#define hold_window() usleep(LK__SNAPSHOT_HOLD_WINDOW_US)
#else
#define hold_window() ((void)0)
#endif

/* ---- records ---- */

size_t lk__record_size(const uint8_t *p, size_t avail, bool cputime)
{
	size_t fixed = LK__PROBE_HEADER + (cputime ? 8 : 0), args;
	const struct lk__record_layout *l;
	uint64_t head;
	bool ok = true;

	if (avail < fixed)
		return 0;
	memcpy(&head, p, sizeof(head));
	if (lk__header_id(head) > LK__MAX_EVENT_ID)
		return 0; /* a pad (LK__PAD_ID), which the table has no room for */
	l = &lk__record_layouts[lk__header_id(head)];
	if (!__atomic_load_n(&l->valid, __ATOMIC_ACQUIRE))
		return 0;
	args = l->strings ?
		       lk__payload_size(l->arg_types, l->nargs, p + fixed, avail - fixed, &ok) :
		       8u * l->nargs;
	return ok && fixed + args <= avail ? fixed + args : 0;
}

/*
 * Record sizes along a run: a record of the same event as the one before, without strings, has
 * its size, so the walk (a chain of dependent loads) skips the layout table for most records.
 */
struct walker {
	uint32_t id; /* the last event's, UINT32_MAX when it has strings */
	size_t size;
	bool cputime;
};

static inline size_t walk(struct walker *w, const uint8_t *p, size_t avail)
{
	uint64_t head;
	uint32_t id;

	memcpy(&head, p, sizeof(head));
	id = lk__header_id(head);
	if (id == w->id && w->size <= avail)
		return w->size;
	w->size = lk__record_size(p, avail, w->cputime);
	w->id = w->size && !lk__record_layouts[id].strings ? id :
							     UINT32_MAX; /* valid: read above */
	return w->size;
}

const uint8_t *lk__walk_records(const uint8_t *p, const uint8_t *end, bool cputime, uint64_t *n)
{
	struct walker w = { UINT32_MAX, 0, cputime };

	*n = 0;
	while (p < end) {
		size_t size = walk(&w, p, (size_t)(end - p));

		if (!size)
			break;
		p += size;
		++*n;
	}
	return p;
}

uint64_t lk__count_records(const uint8_t *p, const uint8_t *end, bool cputime)
{
	uint64_t n;

	lk__walk_records(p, end, cputime, &n);
	return n;
}

static uint64_t tsc48_at(const uint8_t *p)
{
	uint64_t head;

	memcpy(&head, p, sizeof(head));
	return lk__header_tsc48(head);
}

/* ---- holding an area ---- */

struct held {
	unsigned int area;
	const uint8_t *start;
	size_t len;
	bool closed; /* the producer has left it: len is all of it */
};

static uint8_t *area_base(const struct lk__probe_buffer *b, unsigned int a)
{
	return b->data + (size_t)a * b->area_size;
}

static void let_go(struct lk__probe_buffer *b, unsigned int a)
{
	__atomic_fetch_and(&b->areas[a].state, ~LK__AREA_READING, __ATOMIC_RELEASE);
}

/*
 * Hold the area of sub-buffer s and find its records. false (and nothing held) when the slot
 * holds another sub-buffer now, or s has no committed record yet.
 */
static bool hold(struct lk__probe_buffer *b, uint64_t s, struct held *h)
{
	unsigned int a = __atomic_load_n(&b->slot_area[s % LK__SLOTS], __ATOMIC_ACQUIRE);
	struct lk__area *ar = &b->areas[a];
	unsigned int state = __atomic_fetch_or(&ar->state, LK__AREA_READING, __ATOMIC_ACQ_REL);
	uintptr_t base = (uintptr_t)area_base(b, a), committed;

	h->area = a;
	h->start = (const uint8_t *)base;
	h->closed = !(state & LK__AREA_WRITING);
	if (!h->closed) {
		hold_window();
		committed =
			lk__buffer_committed(b); /* acquire: the records below it, and ar->seq */
		/*
		 * The producer clears WRITING before it commits in another area: if the area is
		 * still WRITING now, committed is in it or has not got to it. Its range alone does
		 * not say, as the end of this area is the start of the next (the producer's new
		 * area, empty): read as this one's, that took in the stale bytes past its used.
		 */
		if (!(__atomic_load_n(&ar->state, __ATOMIC_ACQUIRE) & LK__AREA_WRITING)) {
			h->closed = true; /* closed meanwhile: used is all of it */
		} else if (committed > base && committed <= base + b->area_size) {
			h->len = committed - base;
		} else {
			let_go(b, a); /* started, nothing committed in it yet */
			return false;
		}
	}
	if (h->closed)
		h->len = __atomic_load_n(&ar->used, __ATOMIC_RELAXED);
	if (__atomic_load_n(&ar->seq, __ATOMIC_RELAXED) != s) {
		let_go(b, a);
		return false;
	}
	return true;
}

/* ---- writing ---- */

struct snapshot {
	struct lk__trace out; /* the snapshot's CTF trace: clocks, directory, uuid, bytes */
	uint64_t now;	      /* a TSC read at the start, to extend records' timestamps from */
	struct lk__snapshot_result *r;
};

/* One thread's stream: what its packets need to say. */
struct stream {
	struct lk__probe_buffer file; /* tid, fd, packets, lost: what lk__ctf_write_packet reads */
	const struct lk__probe_buffer *b;
	uint64_t dropped; /* the thread's dropped events, read once */
	uint64_t before;  /* events the thread recorded before the next one to write */
	uint64_t written;
	bool named;
};

/* The thread's name, as the event the streaming trace starts with, at tsc48's time. */
static int put_name(struct snapshot *sn, struct stream *st, uint64_t tsc48)
{
	uint8_t rec[LK__PROBE_HEADER + 8 + sizeof(st->b->name) + 1] = { 0 };
	uint64_t head = lk__probe_header(tsc48, LK__EVENT_THREAD_NAME), n;
	size_t at = LK__PROBE_HEADER + (sn->out.cputime ? 8 : 0);
	size_t len = strnlen(st->b->name, sizeof(st->b->name) - 1);
	const uint8_t *next;

	memcpy(rec, &head, sizeof(head));
	memcpy(rec + at, st->b->name, len);
	st->named = true;
	st->file.lost = 0;
	return lk__ctf_write_records(&sn->out, &st->file, rec, rec + at + len + 1, sn->now, &next,
				     &n);
}

/* The records of one held sub-buffer, in packets of at most 256 KiB. */
static int put_area(struct snapshot *sn, struct stream *st, const struct held *h, uint64_t *events)
{
	const uint8_t *p = h->start, *end = h->start + h->len, *next;
	int err = 0;

	*events = 0;
	if (p < end && !st->named)
		err = put_name(sn, st, tsc48_at(p));
	st->file.lost =
		st->dropped + (st->before - st->written); /* the packets' events_discarded */
	while (p < end && !err) {
		uint64_t n;

		err = lk__ctf_write_records(&sn->out, &st->file, p, end, sn->now, &next, &n);
		if (next == p)
			return err ? err : -EIO; /* cannot happen: the producer wrote them whole */
		*events += n;
		p = next;
	}
	return err;
}

/* Sub-buffers newest - LK__SLOTS + 1 .. newest of a thread, oldest first, those still there. */
static int put_sub_buffers(struct snapshot *sn, struct lk__probe_buffer *b, struct stream *st,
			   uint64_t newest)
{
	int err = 0;

	for (uint64_t s = newest >= LK__SLOTS - 1 ? newest - (LK__SLOTS - 1) : 0;
	     s <= newest && !err; s++) {
		struct held h;
		uint64_t n = 0;

		if (!hold(b, s, &h)) {
			st->before = LK__NONE; /* a gap: the next one says what came before it */
			continue;
		}
		if (st->before == LK__NONE) {
			st->before = __atomic_load_n(&b->areas[h.area].first, __ATOMIC_ACQUIRE);
			if (st->before == LK__NONE)
				st->before =
					st->written; /* cannot happen (see buffer.c): claim no loss */
		}
		err = put_area(sn, st, &h, &n);
		if (h.closed) {
			uint64_t none = LK__NONE;

			__atomic_compare_exchange_n(&b->areas[h.area].count, &none, n, false,
						    __ATOMIC_RELAXED, __ATOMIC_RELAXED);
		}
		let_go(b, h.area);
		st->written += n;
		st->before += n;
	}
	return err;
}

/*
 * A thread's sub-buffers, oldest first. A thread that went round its whole ring while the
 * snapshot was getting to it (a small ring, a snapshot preempted) left none of those it had:
 * then the snapshot takes its newest ones again, a few times.
 */
#define CHASES 4

static int put_thread(struct snapshot *sn, struct lk__probe_buffer *b)
{
	bool dead = __atomic_load_n(&b->dead, __ATOMIC_ACQUIRE);
	struct stream st = { .b = b, .before = LK__NONE };
	int err = 0;

	if (__atomic_load_n(&b->seq, __ATOMIC_ACQUIRE) == LK__NONE)
		return 0; /* nothing recorded yet */
	st.file.tid = b->tid;
	st.file.fd = -1;
	st.dropped = __atomic_load_n(&b->lost, __ATOMIC_RELAXED);
	for (int chase = 0; chase < CHASES && !err && !st.written; chase++) {
		st.before = LK__NONE;
		err = put_sub_buffers(sn, b, &st, __atomic_load_n(&b->seq, __ATOMIC_ACQUIRE));
	}
	if (st.file.fd >= 0) {
		close(st.file.fd);
		sn->r->threads++;
		sn->r->events += st.written;
		sn->r->discarded +=
			st.dropped + (st.before == LK__NONE ? 0 : st.before - st.written);
		sn->out.lost += st.dropped; /* the metadata's lowkey_dropped */
	}
	if (dead)
		__atomic_store_n(&b->snapshotted, true,
				 __ATOMIC_RELEASE); /* the consumer may free it */
	return err;
}

/* ---- the output ---- */

/* The TSC rate over the trace so far, when long enough to beat the calibration at start. */
static uint64_t tsc_rate(const struct lk__trace *t)
{
	struct timespec ts;
	uint64_t mono, tsc;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	tsc = lk__probe_tsc();
	mono = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	if (mono - t->monotonic0_ns > 200000000u && tsc > t->tsc0)
		return (uint64_t)((double)(tsc - t->tsc0) * 1e9 /
				  (double)(mono - t->monotonic0_ns));
	return t->tsc_hz;
}

/*
 * A snapshot goes to a new path or an empty directory, for CTF; to a new path or an empty regular
 * file, for JSON and Perfetto: created or opened at once, never through a symbolic link nor into
 * another user's file in a sticky directory (internal/outfile.h). Its descriptor, or -errno.
 */
static int open_output(const char *path, bool file, bool skip)
{
	unsigned int flags = (file ? 0 : LK__OUT_DIR) | LK__OUT_EMPTY | (skip ? LK__OUT_SKIP : 0);
	char msg[PATH_MAX + 200];
	int fd = lk__out_open(path, flags, NULL, msg, sizeof(msg));

	return fd >= 0 || (skip && fd == -EEXIST) ? fd : lk__fail(fd, "lk_trace_snapshot: %s", msg);
}

/* The trace's path, then PATH.1, PATH.2, ...: the first one free, open. Snapshot lock held. */
static int next_path(char *out, size_t len, bool file)
{
	struct lk__trace *t = &lk__trace;

	for (int tries = 0; tries < MAX_NAME_TRIES; tries++, t->snapshots++) {
		int n = t->snapshots ? snprintf(out, len, "%s.%u", t->path, t->snapshots) :
				       snprintf(out, len, "%s", t->path);
		int fd;

		if (n < 0 || (size_t)n >= len)
			return lk__fail(-ENAMETOOLONG,
					"lk_trace_snapshot: the snapshot's name is too long");
		fd = open_output(out, file, true);
		if (fd != -EEXIST) {
			t->snapshots += fd >= 0;
			return fd;
		}
	}
	return lk__fail(
		-EEXIST,
		"lk_trace_snapshot: %s and its next %d numbered names are in use: give a path",
		t->path, MAX_NAME_TRIES);
}

static int absolute_path(const char *path, char *out, size_t len)
{
	char cwd[PATH_MAX];
	int n;

	if (path[0] == '/')
		n = snprintf(out, len, "%s", path);
	else if (!getcwd(cwd, sizeof(cwd)))
		return lk__fail(-errno, "lk_trace_snapshot: cannot resolve %s: %s", path,
				strerror(errno));
	else
		n = snprintf(out, len, "%s/%s", cwd, path);
	if (n < 0 || (size_t)n >= len)
		return lk__fail(-ENAMETOOLONG, "lk_trace_snapshot: the path %s is too long", path);
	return 0;
}

/* The caller's directory dir_fd, named path in messages; closed if the name does not fit. */
static int name_given(const char *path, int dir_fd, char *out, size_t len)
{
	if (snprintf(out, len, "%s", path) < (int)len)
		return dir_fd;
	close(dir_fd);
	return lk__fail(-ENAMETOOLONG, "lk_trace_snapshot: the path %s is too long", path);
}

/*
 * Every thread of the running trace, into the CTF directory out.ctf_dir, and their context
 * switches; then the metadata, which describes every site registered by then (all those whose
 * records were written) and counts what the threads dropped.
 */
static int put_threads(struct snapshot *sn)
{
	struct lk__trace *t = &lk__trace;
	unsigned int gen = __atomic_load_n(&t->gen, __ATOMIC_ACQUIRE);
	int err = 0;

	/* Only the consumer frees buffers, and it does so holding this lock. */
	pthread_mutex_lock(&lk__probe_buffers_lock);
	for (struct lk__probe_buffer *b = __atomic_load_n(&lk__probe_buffers, __ATOMIC_ACQUIRE);
	     b && !err; b = b->next)
		if (__atomic_load_n(&b->trace_gen, __ATOMIC_ACQUIRE) == gen && b->overwrite)
			err = put_thread(sn, b);
	pthread_mutex_unlock(&lk__probe_buffers_lock);
	if (!err && t->sched) {
		uint64_t switches;

		err = lk__sched_snapshot(t, &sn->out,
					 &switches); /* the switches kept, LK_TRACE_SCHED */
	}
	if (!err) {
		lk__registry_lock();
		err = lk__ctf_write_metadata(&sn->out);
		lk__registry_unlock();
	}
	if (err)
		return lk__fail(err, "writing the snapshot to %s failed: %s", sn->out.ctf_dir,
				strerror(-err));
	return 0;
}

/*
 * The snapshot into fd, path's (which this closes): as CTF, the directory itself; else as CTF in
 * a directory beside path, converted into the file in the trace's format.
 */
static int take(const char *path, int fd, enum lk_trace_format format,
		struct lk__snapshot_result *r)
{
	struct lk__trace *t = &lk__trace;
	struct snapshot sn = { .r = r };
	bool convert = format != LK_TRACE_CTF;
	char ctf[PATH_MAX], msg[PATH_MAX + 200];
	int err;

	memset(r, 0, sizeof(*r));
	if (convert && (snprintf(ctf, sizeof(ctf), "%s.ctf-XXXXXX", path) >= (int)sizeof(ctf) ||
			!mkdtemp(ctf))) {
		err = lk__fail(-errno, "cannot create a directory beside %s: %s", path,
			       strerror(errno));
		close(fd);
		return err;
	}
	if (!convert)
		snprintf(ctf, sizeof(ctf), "%s", path);
	sn.out.dir_fd = convert ? -1 : fd; /* closed by lk__ctf_close */
	sn.out.out_fd = -1;
	sn.out.ctf_dir = ctf;
	sn.out.path = ctf;
	sn.out.cputime = t->cputime;
	sn.out.sched = t->sched;
	sn.out.overwrite = true;
	sn.out.tsc0 = t->tsc0;
	sn.out.realtime0_ns = t->realtime0_ns;
	sn.out.monotonic0_ns = t->monotonic0_ns;
	sn.out.tsc_hz = tsc_rate(t);
	sn.now = lk__probe_tsc();
	err = lk__ctf_open(&sn.out);
	if (!err)
		err = put_threads(&sn);
	lk__ctf_close(&sn.out);
	r->bytes = sn.out.bytes;
	if (!err && convert) {
		err = lk__trace_convert_fd(ctf, fd, path, format, lk__progress_thread_sink(), msg,
					   sizeof(msg));
		if (err)
			lk__fail(err, "%s", msg);
	}
	if (convert) {
		lk__remove_ctf(ctf);
		close(fd);
	}
	return err;
}

int lk__snapshot(const char *path, struct lk__snapshot_result *r, char *written, size_t len)
{
	return lk__snapshot_in(path, -1, r, written, len);
}

int lk__snapshot_in(const char *path, int dir_fd, struct lk__snapshot_result *r, char *written,
		    size_t len)
{
	struct lk__trace *t = &lk__trace;
	/* into the caller's directory: CTF, since converting needs files beside it */
	enum lk_trace_format format = dir_fd >= 0 ? LK_TRACE_CTF : t->config.format;
	bool file = format != LK_TRACE_CTF;
	char out[PATH_MAX - 32] = ""; /* room for the CTF beside a JSON or Perfetto snapshot */
	int err, fd;

	pthread_mutex_lock(&snapshot_lock);
	if (dir_fd >= 0)
		fd = name_given(path, dir_fd, out, sizeof(out));
	else if (path)
		fd = (err = absolute_path(path, out, sizeof(out))) ? err :
								     open_output(out, file, false);
	else
		fd = next_path(out, sizeof(out), file);
	err = fd < 0 ? fd : take(out, fd, format, r);
	pthread_mutex_unlock(&snapshot_lock);
	if (written)
		snprintf(written, len, "%s", out);
	if (!err) {
		__atomic_fetch_add(&t->events, r->events, __ATOMIC_RELAXED);
		__atomic_fetch_add(&t->bytes, r->bytes, __ATOMIC_RELAXED);
		if (r->threads > __atomic_load_n(&t->threads, __ATOMIC_RELAXED))
			__atomic_store_n(&t->threads, r->threads, __ATOMIC_RELAXED);
	}
	return err;
}

/* In a forked child: the consumer that held the lock at the fork is not there. */
void lk__snapshot_forget(void)
{
	pthread_mutex_init(&snapshot_lock, NULL);
}

/* ---- counting ahead ---- */

/* Count area a's records if it is closed and no one has: the producer then need not. */
static void count_area(struct lk__probe_buffer *b, unsigned int a)
{
	struct lk__area *ar = &b->areas[a];
	unsigned int state;

	if (__atomic_load_n(&ar->count, __ATOMIC_RELAXED) != LK__NONE)
		return;
	state = __atomic_fetch_or(&ar->state, LK__AREA_READING, __ATOMIC_ACQ_REL);
	if (!(state & LK__AREA_WRITING)) {
		const uint8_t *start = area_base(b, a);
		uint64_t n = lk__count_records(start,
					       start + __atomic_load_n(&ar->used, __ATOMIC_RELAXED),
					       lk__trace.cputime),
			 none = LK__NONE;

		__atomic_compare_exchange_n(&ar->count, &none, n, false, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED);
	}
	let_go(b, a);
}

void lk__snapshot_count_ahead(void)
{
	unsigned int gen = __atomic_load_n(&lk__trace.gen, __ATOMIC_ACQUIRE);

	if (pthread_mutex_trylock(&snapshot_lock) != 0)
		return; /* a snapshot counts what it writes */
	for (struct lk__probe_buffer *b = __atomic_load_n(&lk__probe_buffers, __ATOMIC_ACQUIRE); b;
	     b = b->next)
		if (__atomic_load_n(&b->trace_gen, __ATOMIC_ACQUIRE) == gen && b->overwrite &&
		    __atomic_load_n(&b->seq, __ATOMIC_ACQUIRE) != LK__NONE)
			for (unsigned int a = 0; a <= LK__SLOTS; a++)
				count_area(b, a);
	pthread_mutex_unlock(&snapshot_lock);
}
