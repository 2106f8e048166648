// SPDX-License-Identifier: MIT
/*
 * A Perfetto trace written while it records (perfetto.h). Every trace records CTF: the consumer
 * copies the threads' rings into stream files. For a Perfetto trace a thread of this file,
 * "lowkey-pftrace", follows those files as they grow: as often as the consumer writes (its flush
 * period, within 10 and 100 ms) it reads what each stream gained and writes its whole packets to
 * the .pftrace (a batch per stream per pass, see perfetto.h). When the trace stops, lk__perfetto_convert finds it running and has it write the
 * rest: the user waits for the last pass, not for a conversion of the whole trace.
 *
 * Neither the recording threads nor the consumer do anything more: the hot path and the CTF are
 * what they were, the cost is this thread's CPU time, the same work as converting at stop done
 * earlier (reading the streams back from the page cache, decoding, encoding).
 *
 * - Event classes: the reader knows those of the metadata, which the trace writes at start and
 *   at stop. A site that registers meanwhile (a dlopen) adds a class: before walking bytes read
 *   from a stream this thread checks whether the registry has more sites than the metadata it
 *   read, and if so rewrites the metadata (as lk_trace_start does, under the registry lock) and
 *   reads it again. Checked after the bytes were read, so every event in them has its class: a
 *   site registers before it can record.
 * - Time: the TSC's rate is the one lk_trace_start measured until 200 ms have passed, then the
 *   rate over the trace so far (the rule lk_trace_stop uses for the whole trace), so timestamps
 *   agree with the CTF's to the rate's drift between a pass and the stop.
 * - Many threads: streams are found by name through a hash index, a stream's file is open only
 *   while it is read, and a stream that stopped growing (its thread exited) is looked at less
 *   and less often, down to once a second: a program that ran thousands of threads does not cost
 *   thousands of stat calls a pass. The last pass, at stop, looks at every stream.
 * - Whatever goes wrong here (no memory, a stream it cannot read, an event it cannot decode)
 *   only stops the following: lk__perfetto_live_finish then says so and the trace is converted
 *   whole at stop, as without this file. A write error is the trace's error, as it would be then.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <lowkey/probe.h>

#include "core/dso.h"
#include "probe/perfetto.h"
#include "probe/probe_internal.h"
#include "probe/progress.h"

#define PERIOD_MIN_MS 10		/* a pass every flush period of the consumer's, within these */
#define PERIOD_MAX_MS 100
#define READ_CHUNK (4u << 20)		/* bytes of a stream read at once, to start with ... */
#define READ_MAX (128u << 20)		/* ... and at most: over the reader's largest packet */
#define RATE_AFTER_NS 200000000u	/* trace.c's measure_tsc_rate: before, the start's rate */
#define IDLE_CHECK_MS 1000		/* a stream that stopped growing is looked at this often */

struct followed {
	char *name;
	uint64_t hash;			/* of name */
	uint64_t offset;		/* where its next packet starts */
	unsigned int idle;		/* passes it did not grow, as a back-off ... */
	unsigned int skip;		/* ... and the passes left before it is looked at again */
	struct lk__pft_stream st;
};

static struct live {
	pthread_mutex_t lock;		/* quit, and the wait on cond */
	pthread_cond_t cond;
	pthread_t thread;
	bool quit;
	bool active;			/* a trace is being written: the fields below are set */
	bool failed;			/* the following stopped: convert at stop */
	pid_t tid;			/* lowkey-pftrace's, for sched.c to leave out */
	struct lk__trace *t;
	uint64_t tsc0, monotonic0_ns, tsc_hz;	/* the trace's, at start (lk_trace_stop rewrites tsc_hz) */
	unsigned int period_ms;
	char *ctf_dir, *path;
	int dir_fd;
	struct lk__trace_reader readers[2];	/* the current one and the next, swapped */
	int reader;			/* the current one's index; -1: none */
	size_t nsites;			/* sites the current reader's metadata has */
	struct lk__pft *pft;
	struct followed *streams;
	size_t n, cap;
	size_t *index;			/* streams by name: open addressing, index + 1, 0 free */
	size_t index_mask;
	uint8_t *buf;
	size_t buf_cap;
} live = { .lock = PTHREAD_MUTEX_INITIALIZER, .reader = -1, .dir_fd = -1 };

pid_t lk__perfetto_live_tid(void)
{
	return __atomic_load_n(&live.tid, __ATOMIC_RELAXED);
}

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
		hz = (uint64_t)((double)(tsc - live.tsc0) * 1e9 / (double)(mono - live.monotonic0_ns));
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

/* Sites registered since the metadata was read: write it again (under the lock, as trace.c does). */
static int know_every_site(void)
{
	size_t n;
	int rc = 0;

	lk__registry_lock();
	lk__probe_sites(&n);
	if (n != live.nsites) {
		/* once the trace stops, lk_trace_stop writes it and closes the directory */
		rc = __atomic_load_n(&live.t->stopping, __ATOMIC_ACQUIRE) ? -EAGAIN : lk__ctf_write_metadata(live.t);
	}
	lk__registry_unlock();
	return rc || n == live.nsites ? rc : read_metadata(n);
}

static uint64_t hash_name(const char *s)
{
	uint64_t h = 0xcbf29ce484222325u;	/* FNV-1a */

	while (*s)
		h = (h ^ (unsigned char)*s++) * 0x100000001b3u;
	return h;
}

/* Index stream i by its name's hash; the index is kept at most half full. */
static int index_stream(size_t i)
{
	size_t k;

	if ((live.n + 1) * 2 > (live.index ? live.index_mask + 1 : 0)) {
		size_t n = live.index ? (live.index_mask + 1) * 2 : 64;
		size_t *grown = calloc(n, sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		free(live.index);
		live.index = grown;
		live.index_mask = n - 1;
		for (size_t j = 0; j < live.n; j++)
			if (j != i)
				index_stream(j);
	}
	for (k = live.streams[i].hash & live.index_mask; live.index[k]; k = (k + 1) & live.index_mask)
		;
	live.index[k] = i + 1;
	return 0;
}

/* The stream of that file, followed from its start the first time it is seen. */
static struct followed *follow(const char *name)
{
	uint64_t hash = hash_name(name);
	size_t len = strlen(name);
	struct followed *f;

	for (size_t k = live.index ? hash & live.index_mask : 0; live.index && live.index[k];
	     k = (k + 1) & live.index_mask) {
		f = &live.streams[live.index[k] - 1];
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
	if (!f->name || index_stream(live.n) != 0) {
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
		if ((rc = know_every_site()) != 0)
			return rc;
		if ((rc = lk__pft_batch(live.pft, &f->st, live.buf, (size_t)got, &used)) != 0)
			return rc;
		f->offset += used;
		if (used)
			continue;
		if ((size_t)got < live.buf_cap)
			break;	/* a packet being written: the next pass */
		if (live.buf_cap >= READ_MAX)
			return -EINVAL;	/* a packet larger than any the writer makes */
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
		f->offset = 0;	/* the file started again (a thread id used again: ctf.c) */
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

static void *live_main(void *arg)
{
	struct timespec until;

	(void)arg;
	pthread_setname_np(pthread_self(), "lowkey-pftrace");
	__atomic_store_n(&live.tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELAXED);
	pthread_mutex_lock(&live.lock);
	while (!live.quit) {
		pthread_mutex_unlock(&live.lock);
		if (one_pass(false) != 0) {
			live.failed = true;	/* read by the stop after joining this thread */
			return NULL;
		}
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_nsec += (long)live.period_ms * 1000000L;
		until.tv_sec += until.tv_nsec / 1000000000L;
		until.tv_nsec %= 1000000000L;
		pthread_mutex_lock(&live.lock);
		while (!live.quit && pthread_cond_timedwait(&live.cond, &live.lock, &until) == 0)
			;
	}
	pthread_mutex_unlock(&live.lock);
	return NULL;
}

/* Everything closed and freed, the file as the thread left it. */
static void forget(void)
{
	for (size_t i = 0; i < live.n; i++)
		free(live.streams[i].name);
	free(live.streams);
	free(live.index);
	free(live.buf);
	free(live.ctf_dir);
	free(live.path);
	if (live.pft)
		lk__pft_close(live.pft, NULL, 0);
	if (live.reader >= 0)
		lk__reader_close(&live.readers[live.reader]);
	if (live.dir_fd >= 0)
		close(live.dir_fd);
	if (live.active)
		pthread_cond_destroy(&live.cond);
	live = (struct live){ .lock = PTHREAD_MUTEX_INITIALIZER, .reader = -1, .dir_fd = -1 };
}

static int start_thread(void)
{
	pthread_condattr_t attr;
	sigset_t all, old;
	int err;

	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	err = pthread_cond_init(&live.cond, &attr);
	pthread_condattr_destroy(&attr);
	if (err)
		return -err;
	/* The application's signals are not for this thread (see lk__consumer_start). */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&live.thread, NULL, live_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		pthread_cond_destroy(&live.cond);
	return -err;
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
	live.period_ms = t->config.flush_ms < PERIOD_MIN_MS   ? PERIOD_MIN_MS
			 : t->config.flush_ms > PERIOD_MAX_MS ? PERIOD_MAX_MS
							      : t->config.flush_ms;
	live.ctf_dir = strdup(t->ctf_dir);
	live.path = strdup(t->path);
	live.buf_cap = READ_CHUNK;
	live.buf = malloc(live.buf_cap);
	live.dir_fd = open(t->ctf_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (!live.ctf_dir || !live.path || !live.buf || live.dir_fd < 0) {
		rc = live.dir_fd < 0 && live.buf ? -errno : -ENOMEM;
		goto fail;
	}
	lk__registry_lock();
	lk__probe_sites(&nsites);	/* those of the metadata lk_trace_start wrote */
	lk__registry_unlock();
	if ((rc = read_metadata(nsites)) != 0)
		goto fail;
	rc = lk__pft_open(&live.pft, t->path, &live.readers[live.reader], err, sizeof(err));
	if (rc || (rc = start_thread()) != 0)
		goto fail;
	live.active = true;	/* the thread runs and its condition variable is set up */
	return 0;
fail:
	forget();
	return rc;
}

static void stop_thread(void)
{
	pthread_mutex_lock(&live.lock);
	live.quit = true;
	pthread_cond_signal(&live.cond);
	pthread_mutex_unlock(&live.lock);
	pthread_join(live.thread, NULL);
	__atomic_store_n(&live.tid, 0, __ATOMIC_RELAXED);
}

/* The trace has stopped: its metadata is final and no stream grows any more. */
static int write_the_rest(char *err, size_t errlen)
{
	uint64_t written = 0;
	int rc = read_metadata(live.nsites);

	for (size_t i = 0; i < live.n; i++)
		written += live.streams[i].offset;
	lk__progress_advance(written);	/* a progress shown at stop starts from what is written */

	if (!rc)
		rc = one_pass(true);
	for (size_t i = 0; !rc && i < live.n; i++)
		rc = lk__pft_stream_done(live.pft, &live.streams[i].st);
	if (rc)
		return 1;	/* converted whole instead, which says what is wrong if anything is */
	rc = lk__pft_close(live.pft, err, errlen);
	live.pft = NULL;
	return rc;
}

int lk__perfetto_live_finish(const char *ctf_dir, const char *path, char *err, size_t errlen)
{
	int rc;

	if (!live.active || strcmp(ctf_dir, live.ctf_dir) != 0 || strcmp(path, live.path) != 0)
		return 1;
	stop_thread();
	rc = live.failed ? 1 : write_the_rest(err, errlen);
	forget();
	return rc;
}

void lk__perfetto_live_forget_in_child(void)
{
	if (!live.active)
		return;
	lk__pft_discard(live.pft);	/* the parent's file and its buffered packets are the parent's */
	live.pft = NULL;
	live.active = false;		/* no thread here to join, and its condition variable is the parent's */
	forget();
}

void lk__perfetto_live_cancel(void)
{
	if (!live.active)
		return;
	stop_thread();
	forget();
}
