// SPDX-License-Identifier: MIT
/*
 * A Perfetto trace written while it records (perfetto.h): the consumer encodes each thread's
 * records straight from its ring into the .pftrace, as a batch per thread per drain (a packet
 * sequence per thread, see perfetto.c), instead of copying them into CTF stream files. No CTF
 * stream of the threads is written, nothing is read back: encoding costs the consumer about what
 * copying the records into CTF did (docs/BENCHMARKS.md, trace formats).
 *
 * - Event classes: the writer knows those of the CTF metadata, which the trace still writes (in
 *   its directory beside the .pftrace, removed at stop) at start, whenever an object with sites
 *   loads (site.c, before the sites can record) and at stop. A record of a class the writer does
 *   not know makes it read the metadata again.
 * - Context switches (--sched): sched.c writes them as CTF streams (stream-TID-sched) in that
 *   directory, as for any trace; after each drain the consumer encodes what those gained, reading
 *   them as the reader reads any CTF (followed by name, looked at less often once they stop
 *   growing, down to once a second).
 * - Time: the TSC's rate is the one lk_trace_start measured until 200 ms have passed, then the
 *   rate over the trace so far (the rule lk_trace_stop uses for a CTF trace), so timestamps
 *   agree with a CTF's to the rate's drift between a drain and the stop.
 * - The file holds whole packets after every drain (the consumer writes its buffer out then): a
 *   program that dies leaves a valid trace of what was drained before.
 * - Whatever goes wrong while writing (no memory, a disk full, a record it cannot decode) is the
 *   trace's error: tracing stops there, what was written stays.
 * - If the writer cannot be set up at start (no memory), the trace records CTF and is converted
 *   at stop (lk__perfetto_convert), as a JSON trace is.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <lowkey/probe.h>

#include "internal/failf.h"
#include "format/perfetto/perfetto.h"
#include "probe/probe_internal.h"
#include "internal/trace_progress.h"

#define PERIOD_MIN_MS 10 /* the consumer's flush period, within these: a drain's period, */
			 /* which the switch streams' back-off counts in */
#define PERIOD_MAX_MS 100
#define READ_CHUNK (4u << 20)	 /* bytes of a stream read at once, to start with ... */
#define READ_MAX (128u << 20)	 /* ... and at most: over the reader's largest packet */
#define RATE_AFTER_NS 200000000u /* trace.c's measure_tsc_rate: before, the start's rate */
#define IDLE_CHECK_MS 1000	 /* a stream that stopped growing is looked at this often */

struct followed {
	char *name;
	uint64_t hash;	   /* of name */
	uint64_t offset;   /* where its next packet starts */
	unsigned int idle; /* passes it did not grow, as a back-off ... */
	unsigned int skip; /* ... and the passes left before it is looked at again */
	struct lk__pft_stream st;
};

/* A thread's ring being written: its stream, by its buffer. */
struct direct {
	const struct lk__probe_buffer *b;
	bool retired; /* done: a buffer at the same address later is another thread's */
	struct lk__pft_stream st;
};

/* Items by a hash: open addressing of an item's index + 1 (0: a free slot), at most half full. */
struct hash_index {
	size_t *slot;
	size_t mask;
};

static struct live {
	bool active; /* a trace is being written: the fields below are set */
	struct lk__trace *t;
	uint64_t tsc0, monotonic0_ns,
		tsc_hz; /* the trace's, at start (lk_trace_stop rewrites tsc_hz) */
	unsigned int period_ms;
	char *ctf_dir, *path;
	int dir_fd;
	struct lk__trace_reader readers[2]; /* the current one and the next, swapped */
	int reader;			    /* the current one's index; -1: none */
	size_t nsites;			    /* sites the current reader's metadata has */
	struct lk__pft *pft;
	struct followed *streams; /* the context switches' CTF streams */
	size_t n, cap;
	struct hash_index index; /* streams by name */
	uint8_t *buf;
	size_t buf_cap;
	struct direct *rings; /* the threads' rings */
	size_t nrings, rings_cap;
	struct hash_index rings_index; /* rings by buffer address */
} live = { .reader = -1, .dir_fd = -1 };

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The TSC's rate to write timestamps with: lk_trace_stop's rule, applied now. */
static void update_rate(void)
{
	uint64_t mono = now_ns(), tsc = lk__probe_tsc(), hz = live.tsc_hz;

	if (mono - live.monotonic0_ns > RATE_AFTER_NS && tsc > live.tsc0)
		hz = (uint64_t)((double)(tsc - live.tsc0) * 1e9 /
				(double)(mono - live.monotonic0_ns));
	if (hz)
		lk__pft_set_rate(live.pft, hz);
}

/* Read the trace's metadata (again) into the reader not in use, and make it the current one. */
static int read_metadata(size_t nsites)
{
	int next = live.reader == 0 ? 1 : 0, rc;
	char err[256];

	rc = lk__reader_open(&live.readers[next], live.ctf_dir, err, sizeof(err));
	if (rc)
		return rc;
	if (live.pft && (rc = lk__pft_set_reader(live.pft, &live.readers[next])) != 0) {
		lk__reader_close(&live.readers[next]);
		return rc;
	}
	if (live.reader >= 0)
		lk__reader_close(&live.readers[live.reader]);
	live.reader = next;
	live.nsites = nsites;
	return 0;
}

/* FNV-1a of n bytes */
static uint64_t hash_bytes(const void *p, size_t n)
{
	const unsigned char *c = p;
	uint64_t h = 0xcbf29ce484222325u;

	while (n--)
		h = (h ^ *c++) * 0x100000001b3u;
	return h;
}

#define hash_name_bytes(pointer) hash_bytes((pointer), sizeof(void *))

static uint64_t hash_name(const char *s)
{
	uint64_t h = 0xcbf29ce484222325u; /* FNV-1a */

	while (*s)
		h = (h ^ (unsigned char)*s++) * 0x100000001b3u;
	return h;
}

/*
 * Put item i, the last of count + 1 items, in ix at hash_of(i), growing ix first if that would
 * make it more than half full (and putting the others back).
 */
static int hash_index_add(struct hash_index *ix, size_t count, size_t i,
			  uint64_t (*hash_of)(size_t))
{
	size_t k;

	if ((count + 1) * 2 > (ix->slot ? ix->mask + 1 : 0)) {
		size_t n = ix->slot ? (ix->mask + 1) * 2 : 64;
		size_t *grown = calloc(n, sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		free(ix->slot);
		ix->slot = grown;
		ix->mask = n - 1;
		for (size_t j = 0; j < count; j++)
			if (j != i)
				hash_index_add(ix, count, j, hash_of);
	}
	for (k = hash_of(i) & ix->mask; ix->slot[k]; k = (k + 1) & ix->mask)
		;
	ix->slot[k] = i + 1;
	return 0;
}

/* The items whose hash may be hash: call with k = hash_index_first(ix, hash) until it says none. */
static bool hash_index_next(const struct hash_index *ix, size_t *k, size_t *item)
{
	if (!ix->slot || !ix->slot[*k])
		return false;
	*item = ix->slot[*k] - 1;
	*k = (*k + 1) & ix->mask;
	return true;
}

static size_t hash_index_first(const struct hash_index *ix, uint64_t hash)
{
	return ix->slot ? hash & ix->mask : 0;
}

static uint64_t stream_hash(size_t i)
{
	return live.streams[i].hash;
}

/* The stream of that file, followed from its start the first time it is seen. */
static struct followed *follow(const char *name)
{
	uint64_t hash = hash_name(name);
	size_t len = strlen(name);
	struct followed *f;

	for (size_t k = hash_index_first(&live.index, hash), i;
	     hash_index_next(&live.index, &k, &i);) {
		f = &live.streams[i];
		if (f->hash == hash && strcmp(f->name, name) == 0)
			return f;
	}
	if (live.n == live.cap) {
		size_t cap = live.cap ? live.cap * 2 : 16;
		struct followed *grown = realloc(live.streams, cap * sizeof(*grown));

		if (!grown)
			return NULL;
		live.streams = grown;
		live.cap = cap;
	}
	f = &live.streams[live.n];
	*f = (struct followed){ .name = strdup(name), .hash = hash };
	if (!f->name || hash_index_add(&live.index, live.n, live.n, stream_hash) != 0) {
		free(f->name);
		return NULL;
	}
	/* stream-TID, or stream-TID-sched: the thread's context switches */
	f->st.tid = atoi(name + 7);
	f->st.sched = len > 6 && strcmp(name + len - 6, "-sched") == 0;
	live.n++;
	return f;
}

/* Streams that appeared since the last pass. */
static int find_streams(void)
{
	int fd = openat(live.dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;

	if (!d) {
		rc = -errno;
		if (fd >= 0)
			close(fd);
		return rc;
	}
	while (!rc && (e = readdir(d)))
		if (strncmp(e->d_name, "stream-", 7) == 0 && !follow(e->d_name))
			rc = errno ? -errno : -ENOMEM;
	closedir(d);
	return rc;
}

/* Write the whole packets of f's bytes from its offset up to size. */
static int read_packets(struct followed *f, int fd, uint64_t size)
{
	while (f->offset < size) {
		uint64_t left = size - f->offset;
		size_t want = left < live.buf_cap ? (size_t)left : live.buf_cap, used;
		ssize_t got = pread(fd, live.buf, want, (off_t)f->offset);
		uint8_t *grown;
		int rc;

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return got < 0 ? -errno : 0;
		if ((rc = lk__pft_batch(live.pft, &f->st, live.buf, (size_t)got, &used)) != 0)
			return rc;
		f->offset += used;
		if (used)
			continue;
		if ((size_t)got < live.buf_cap)
			break; /* a packet being written: the next pass */
		if (live.buf_cap >= READ_MAX)
			return -EINVAL; /* a packet larger than any the writer makes */
		grown = realloc(live.buf, live.buf_cap * 2);
		if (!grown)
			return -ENOMEM;
		live.buf = grown;
		live.buf_cap *= 2;
	}
	return 0;
}

/*
 * What a stream gained since it was last looked at, its whole packets written. A stream that does
 * not grow is looked at less and less often, down to every IDLE_CHECK_MS (every time when all):
 * the threads that exited stop costing a stat each pass. Its file is open only meanwhile.
 */
static int catch_up(struct followed *f, bool all)
{
	unsigned int most = IDLE_CHECK_MS / live.period_ms;
	struct stat st;
	int fd, rc;

	if (!all && f->skip) {
		f->skip--;
		return 0;
	}
	if (fstatat(live.dir_fd, f->name, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return -errno;
	if ((uint64_t)st.st_size < f->offset)
		f->offset = 0; /* the file started again (a thread id used again: ctf.c) */
	if ((uint64_t)st.st_size == f->offset) {
		f->idle = f->idle * 2 + 1 < most ? f->idle * 2 + 1 : most;
		f->skip = f->idle;
		return 0;
	}
	f->idle = f->skip = 0;
	fd = openat(live.dir_fd, f->name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	rc = read_packets(f, fd, (uint64_t)st.st_size);
	close(fd);
	return rc;
}

/* A pass over the streams: those that are growing, or all of them. */
static int one_pass(bool all)
{
	int rc = find_streams();

	update_rate();
	for (size_t i = 0; !rc && i < live.n; i++)
		rc = catch_up(&live.streams[i], all);
	return rc;
}

/* Everything closed and freed, the file as the writer left it (whole packets). */
static void forget(void)
{
	for (size_t i = 0; i < live.n; i++)
		free(live.streams[i].name);
	free(live.streams);
	free(live.index.slot);
	free(live.rings);
	free(live.rings_index.slot);
	free(live.buf);
	free(live.ctf_dir);
	free(live.path);
	if (live.pft)
		lk__pft_close(live.pft, NULL, 0);
	if (live.reader >= 0)
		lk__reader_close(&live.readers[live.reader]);
	if (live.dir_fd >= 0)
		close(live.dir_fd);
	live = (struct live){ .reader = -1, .dir_fd = -1 };
}

int lk__perfetto_live_start(struct lk__trace *t)
{
	char err[256];
	size_t nsites;
	int rc;

	live.t = t;
	live.tsc0 = t->tsc0;
	live.monotonic0_ns = t->monotonic0_ns;
	live.tsc_hz = t->tsc_hz;
	live.period_ms = t->config.flush_ms < PERIOD_MIN_MS ? PERIOD_MIN_MS :
			 t->config.flush_ms > PERIOD_MAX_MS ? PERIOD_MAX_MS :
							      t->config.flush_ms;
	live.ctf_dir = strdup(t->ctf_dir);
	live.path = strdup(t->path);
	live.buf_cap = READ_CHUNK;
	live.buf = malloc(live.buf_cap);
	live.dir_fd = fcntl(t->dir_fd, F_DUPFD_CLOEXEC, 0);
	if (!live.ctf_dir || !live.path || !live.buf || live.dir_fd < 0) {
		rc = live.dir_fd < 0 && live.buf ? -errno : -ENOMEM;
		goto fail;
	}
	lk__registry_lock();
	lk__probe_sites(&nsites); /* those of the metadata lk_trace_start wrote */
	lk__registry_unlock();
	if ((rc = read_metadata(nsites)) != 0)
		goto fail;
	rc = lk__pft_open(&live.pft, t->out_fd, t->path, &live.readers[live.reader], err,
			  sizeof(err));
	if (rc)
		goto fail;
	live.active = true; /* before the consumer starts: it reads this */
	return 0;
fail:
	forget();
	return rc;
}

bool lk__perfetto_direct(void)
{
	return live.active;
}

static uint64_t ring_hash(size_t i)
{
	return hash_name_bytes(&live.rings[i].b);
}

/*
 * b's stream: a new one for a buffer not seen, or retired (another thread's at the same address),
 * unless !create. NULL: none, or no memory.
 */
static struct direct *ring_stream(const struct lk__probe_buffer *b, bool create)
{
	struct direct *d;

	for (size_t k = hash_index_first(&live.rings_index, hash_name_bytes(&b)), i;
	     hash_index_next(&live.rings_index, &k, &i);) {
		d = &live.rings[i];
		if (d->b != b)
			continue;
		if (d->retired && !create)
			return NULL;
		if (d->retired) {
			*d = (struct direct){ .b = b, .st.tid = b->tid };
			__atomic_fetch_add(&live.t->threads, 1, __ATOMIC_RELAXED);
		}
		return d;
	}
	if (!create)
		return NULL;
	if (live.nrings == live.rings_cap) {
		size_t cap = live.rings_cap ? live.rings_cap * 2 : 16;
		struct direct *grown = realloc(live.rings, cap * sizeof(*grown));

		if (!grown)
			return NULL;
		live.rings = grown;
		live.rings_cap = cap;
	}
	d = &live.rings[live.nrings];
	*d = (struct direct){ .b = b, .st.tid = b->tid };
	if (hash_index_add(&live.rings_index, live.nrings, live.nrings, ring_hash) != 0)
		return NULL;
	live.nrings++;
	__atomic_fetch_add(&live.t->threads, 1, __ATOMIC_RELAXED);
	return d;
}

int lk__perfetto_direct_records(struct lk__probe_buffer *b, const uint8_t *start,
				const uint8_t *end, uint64_t now, const uint8_t **next,
				uint64_t *events)
{
	struct direct *d = ring_stream(b, true);
	uint64_t more;
	int rc;

	*next = start;
	*events = 0;
	if (!d)
		return -ENOMEM;
	rc = lk__pft_records(live.pft, &d->st, start, end, now, next, events);
	if (rc != -ENOENT)
		return rc;
	/* a site that registered since: site.c wrote the metadata before it could record */
	start = *next;
	if ((rc = read_metadata(live.nsites)) != 0)
		return rc;
	rc = lk__pft_records(live.pft, &d->st, start, end, now, next, &more);
	*events += more;
	return rc == -ENOENT ? -EINVAL : rc;
}

int lk__perfetto_direct_retire(struct lk__probe_buffer *b, uint64_t lost)
{
	struct direct *d;
	int rc;

	if (!(d = ring_stream(b, lost != 0)))
		return lost ? -ENOMEM : 0; /* none: it wrote nothing and lost nothing */
	d->st.lost = lost;
	rc = lk__pft_stream_done(live.pft, &d->st);
	d->retired = true;
	return rc;
}

int lk__perfetto_direct_drained(void)
{
	int rc = live.t->sched ? one_pass(false) : 0;

	update_rate();
	if (!rc)
		rc = lk__pft_flush(live.pft);
	__atomic_store_n(&live.t->bytes, lk__pft_bytes(live.pft), __ATOMIC_RELAXED);
	return rc;
}

/* The trace has stopped: its metadata is final, no ring and no stream grows any more. */
static int write_the_rest(char *err, size_t errlen)
{
	uint64_t written = 0;
	int rc;

	for (size_t i = 0; i < live.n; i++)
		written += live.streams[i].offset;
	lk__progress_advance(written); /* a progress shown at stop starts from what is written */

	/* the rings are written; the switches' streams need no class the reader lacks */
	rc = live.t->sched ? one_pass(true) : 0;
	for (size_t i = 0; !rc && i < live.n; i++)
		rc = lk__pft_stream_done(live.pft, &live.streams[i].st);
	for (size_t i = 0; !rc && i < live.nrings; i++)
		if (!live.rings[i].retired)
			rc = lk__pft_stream_done(live.pft, &live.rings[i].st);
	if (rc)
		return lk__failf(err, errlen, rc, "writing %s failed: %s", live.path,
				 strerror(-rc));
	rc = lk__pft_close(live.pft, err, errlen);
	live.pft = NULL;
	return rc;
}

int lk__perfetto_live_finish(const char *ctf_dir, const char *path, char *err, size_t errlen)
{
	int rc;

	if (!live.active || strcmp(ctf_dir, live.ctf_dir) != 0 || strcmp(path, live.path) != 0)
		return 1;
	rc = write_the_rest(err, errlen);
	forget();
	return rc;
}

void lk__perfetto_live_forget_in_child(void)
{
	if (!live.active)
		return;
	lk__pft_discard(live.pft); /* the parent's file and its buffered packets are the parent's */
	live.pft = NULL;
	forget();
}

void lk__perfetto_live_cancel(void)
{
	if (!live.active)
		return;
	/* The directory holds no thread's events (the .pftrace does): its metadata and switches go. */
	lk__remove_streams(live.ctf_dir);
	unlinkat(live.dir_fd, "metadata", 0);
	rmdir(live.ctf_dir);
	forget(); /* what was written stays: whole packets */
}
