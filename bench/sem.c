// SPDX-License-Identifier: MIT
/*
 * lowkey bench sem: the experiment of Manfred Spraul's RFC series "ipc/sem.c: Optimization for
 * reducing spinlock contention", on this machine.
 *
 * 1. sembench (Chris Mason's, which Manfred Spraul ran for the series as `-t 250 -w 64 -o 0 -r 30`),
 *    re-done: THREADS workers each sleep on a semaphore of their own; a main thread finds up to
 *    WAKE of them asleep and wakes them with one call (one semop with WAKE operations). Workers
 *    count their wake-ups ("burns"); the main thread counts the rounds in which it found nobody
 *    to wake ("main thread burns"). The same run is made with the kernel's System V semaphores
 *    (ipc), with lk_semset (lowkey), and on request with bare futexes (futex) and with polling
 *    workers (nanosleep). Beside each: the series' contention figures -- free, contended, wait,
 *    avg, 1/1000 of CPU time -- for lk_semset from lk_semset_stats(), and for the kernel's locks
 *    from the lock:contention_begin/end tracepoints (root or CAP_PERFMON; every kernel lock the
 *    benchmark's threads waited for, which under ipc is mostly the semaphore array's).
 * 2. The cost of an uncontended lock + unlock: pthread_mutex, lk_mutex, and pthread_mutex in a
 *    program run under `lowkey locks` (liblowkey-locks.so preloaded).
 * 3. A lock-heavy program, bare and under `lowkey locks`: the slowdown the profiler costs.
 *
 * Modes run interleaved, --runs times; figures are medians.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <linux/futex.h>
#include <math.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/sem.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <lowkey/lowkey.h>

#include "bench.h"
#include "lowkey-locks-paths.h"

/* ======================================================================================== */
/* 1. sembench                                                                               */
/* ======================================================================================== */

enum mode { MODE_IPC, MODE_LOWKEY, MODE_FUTEX, MODE_NANOSLEEP, NMODES };

static const char *const mode_names[NMODES] = { "ipc", "lowkey", "futex", "nanosleep" };
static const char *const mode_titles[NMODES] = { "SysV semop (ipc)", "lk_semset (lowkey)", "futex", "nanosleep poll" };

struct worker {
	struct sembench *b;
	int id;
	int waiting;		/* set by the worker before it sleeps; cleared by the main thread as it wakes it */
	uint32_t word;		/* futex and nanosleep modes */
	uint64_t burns;
	pthread_t thread;
} __attribute__((aligned(64)));

struct sembench {
	enum mode mode;
	int nthreads, wake;
	bool bind;
	int ncpus;
	struct worker *workers;
	int semid;
	struct lk_semset *set;
	int stop;
};

/* Figures of one run. */
struct kernel_locks {
	bool ok;
	bool overflow;		/* a ring buffer filled up: the figures are lower bounds */
	char why[160];
	uint64_t contended, wait_ns, lost;
};

struct run_result {
	double seconds;
	uint64_t burns, min_burns, max_burns, main_burns;
	struct lk_semset_stats lk;
	struct kernel_locks kernel;
};

static void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static void futex_wait(uint32_t *word, uint32_t expected)
{
	syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake(uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void worker_wait(struct sembench *b, struct worker *w)
{
	struct lk_sembuf down = { (unsigned short)w->id, -1, 0 };
	struct timespec nap = { 0, 50 * 1000 };

	switch (b->mode) {
	case MODE_IPC:
		while (semop(b->semid, (struct sembuf *)&down, 1) != 0 && errno == EINTR)
			;
		break;
	case MODE_LOWKEY:
		while (lk_semop(b->set, &down, 1, NULL) == -EINTR)
			;
		break;
	case MODE_FUTEX:
		while (!__atomic_exchange_n(&w->word, 0, __ATOMIC_ACQUIRE))
			futex_wait(&w->word, 0);
		break;
	default:
		while (!__atomic_exchange_n(&w->word, 0, __ATOMIC_ACQUIRE))
			nanosleep(&nap, NULL);
		break;
	}
}

/* Wake the workers in batch[0..n): one call for the semaphores, one futex wake each for futex. */
static void wake_batch(struct sembench *b, const int *batch, int n)
{
	struct lk_sembuf ups[512];

	switch (b->mode) {
	case MODE_IPC:
	case MODE_LOWKEY:
		for (int i = 0; i < n; i++)
			ups[i] = (struct lk_sembuf){ (unsigned short)batch[i], 1, 0 };
		if (b->mode == MODE_IPC)
			semop(b->semid, (struct sembuf *)ups, (size_t)n);
		else
			lk_semop(b->set, ups, (size_t)n, NULL);
		break;
	case MODE_FUTEX:
		for (int i = 0; i < n; i++) {
			__atomic_store_n(&b->workers[batch[i]].word, 1, __ATOMIC_RELEASE);
			futex_wake(&b->workers[batch[i]].word);
		}
		break;
	default:
		for (int i = 0; i < n; i++)
			__atomic_store_n(&b->workers[batch[i]].word, 1, __ATOMIC_RELEASE);
		break;
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct sembench *b = w->b;

	if (b->bind)
		lkb_pin(b->ncpus > 1 ? 1 + w->id % (b->ncpus - 1) : 0);
	for (;;) {
		__atomic_store_n(&w->waiting, 1, __ATOMIC_RELEASE);
		worker_wait(b, w);
		if (__atomic_load_n(&b->stop, __ATOMIC_ACQUIRE))
			return NULL;
		w->burns++;
	}
}

static uint64_t now_ns(void)
{
	return lkb_now_ns();
}

/* The main thread: find sleepers round-robin, wake up to WAKE at a time. */
static uint64_t main_loop(struct sembench *b, uint64_t duration_ns)
{
	uint64_t end = now_ns() + duration_ns, burns = 0;
	int batch[512], cursor = 0;

	for (unsigned long round = 0;; round++) {
		int k = 0, n;

		if ((round & 63) == 0 && now_ns() >= end)
			break;
		for (n = 0; n < b->nthreads && k < b->wake; n++) {
			struct worker *w = &b->workers[(cursor + n) % b->nthreads];
			int one = 1;

			if (__atomic_load_n(&w->waiting, __ATOMIC_ACQUIRE) &&
			    __atomic_compare_exchange_n(&w->waiting, &one, 0, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
				batch[k++] = w->id;
		}
		cursor = (cursor + n) % b->nthreads;
		if (!k) {
			burns++;
			relax();
			continue;
		}
		wake_batch(b, batch, k);
	}
	return burns;
}

/* Let every worker out: stop, then one up for each (more than WAKE at a time is fine here). */
static void release_all(struct sembench *b)
{
	int batch[128];

	__atomic_store_n(&b->stop, 1, __ATOMIC_RELEASE);
	for (int base = 0; base < b->nthreads; base += 128) {
		int n = b->nthreads - base < 128 ? b->nthreads - base : 128;

		for (int i = 0; i < n; i++)
			batch[i] = base + i;
		wake_batch(b, batch, n);
	}
}

/* ---- the kernel's lock contention, from lock:contention_begin/end ---- */

#define TRACE_PAGES 4096	/* 16 MiB per CPU and event */
#define MAX_TRACE_CPUS 64

struct ktrace {
	int ncpus;
	int fd[2][MAX_TRACE_CPUS];
	void *ring[2][MAX_TRACE_CPUS];
	size_t ring_size;
};

/* The tracepoint's id, or -errno of the first tracefs that has it (-ENOENT: none has it). */
static long tracepoint_id(const char *event)
{
	const char *roots[] = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" };
	char path[256], buf[32];
	long err = -ENOENT;

	for (size_t i = 0; i < 2; i++) {
		FILE *f;

		snprintf(path, sizeof(path), "%s/events/lock/%s/id", roots[i], event);
		f = fopen(path, "re");
		if (!f) {
			if (errno != ENOENT && err == -ENOENT)
				err = -errno;
			continue;
		}
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = 0;
		fclose(f);
		return strtol(buf, NULL, 10);
	}
	return err;
}

static void ktrace_close(struct ktrace *t)
{
	for (int e = 0; e < 2; e++)
		for (int c = 0; c < t->ncpus; c++) {
			if (t->ring[e][c] && t->ring[e][c] != MAP_FAILED)
				munmap(t->ring[e][c], t->ring_size);
			if (t->fd[e][c] >= 0)
				close(t->fd[e][c]);
		}
	memset(t, 0, sizeof(*t));
}

/* Open both tracepoints on every CPU for this thread and the threads it will create. */
static int ktrace_open(struct ktrace *t, struct kernel_locks *k)
{
	const char *events[2] = { "contention_begin", "contention_end" };
	long page = sysconf(_SC_PAGESIZE);

	memset(t, 0, sizeof(*t));
	t->ncpus = (int)sysconf(_SC_NPROCESSORS_CONF);
	if (t->ncpus > MAX_TRACE_CPUS)
		t->ncpus = MAX_TRACE_CPUS;
	t->ring_size = (size_t)(TRACE_PAGES + 1) * (size_t)page;
	for (int e = 0; e < 2; e++)
		for (int c = 0; c < t->ncpus; c++)
			t->fd[e][c] = -1;
	for (int e = 0; e < 2; e++) {
		long id = tracepoint_id(events[e]);

		if (id == -ENOENT) {
			snprintf(k->why, sizeof(k->why), "no lock:%s tracepoint (tracefs not mounted, or kernel < 5.19)",
				 events[e]);
			return -ENOENT;
		}
		if (id < 0) {
			snprintf(k->why, sizeof(k->why), "cannot read tracefs: %s (run as root or with CAP_PERFMON and "
				 "a readable tracefs)", strerror((int)-id));
			return (int)id;
		}
		for (int c = 0; c < t->ncpus; c++) {
			struct perf_event_attr a = {
				.type = PERF_TYPE_TRACEPOINT,
				.size = sizeof(a),
				.config = (uint64_t)id,
				.sample_period = 1,
				.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME,
				.disabled = 1,
				.inherit = 1,
				.use_clockid = 1,
				.clockid = CLOCK_MONOTONIC,
			};

			t->fd[e][c] = (int)syscall(SYS_perf_event_open, &a, 0, c, -1, PERF_FLAG_FD_CLOEXEC);
			if (t->fd[e][c] < 0) {
				int err = errno;

				if (err == ENODEV || err == EINVAL)
					continue;	/* an offline CPU */
				snprintf(k->why, sizeof(k->why),
					 "tracepoint lock:%s: %s (needs root or CAP_PERFMON, and perf_event_paranoid <= 1 "
					 "for kernel events)", events[e], strerror(err));
				ktrace_close(t);
				return -err;
			}
			t->ring[e][c] = mmap(NULL, t->ring_size, PROT_READ | PROT_WRITE, MAP_SHARED, t->fd[e][c], 0);
			if (t->ring[e][c] == MAP_FAILED) {
				snprintf(k->why, sizeof(k->why), "cannot map a perf ring buffer: %s (ulimit -l, "
					 "perf_event_mlock_kb)", strerror(errno));
				ktrace_close(t);
				return -ENOMEM;
			}
		}
	}
	return 0;
}

static void ktrace_enable(struct ktrace *t, bool on)
{
	for (int e = 0; e < 2; e++)
		for (int c = 0; c < t->ncpus; c++)
			if (t->fd[e][c] >= 0)
				ioctl(t->fd[e][c], on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, 0);
}

struct tp_sample {
	uint64_t time;
	uint32_t tid;
	uint32_t end;	/* 0 begin, 1 end */
};

static int by_time(const void *a, const void *b)
{
	const struct tp_sample *x = a, *y = b;

	return x->time < y->time ? -1 : x->time > y->time;
}

/* Append the samples of one ring buffer. */
static void drain(void *ring, size_t ring_size, uint32_t end, struct tp_sample **v, size_t *n, size_t *cap,
		  struct kernel_locks *k)
{
	struct perf_event_mmap_page *meta = ring;
	char *data = (char *)ring + meta->data_offset;
	uint64_t size = meta->data_size ? meta->data_size : ring_size - (size_t)sysconf(_SC_PAGESIZE);
	uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE), tail = meta->data_tail;

	/* the buffer is not read during the run: a full one dropped samples without a LOST record */
	if (head - tail + 64 >= size)
		k->overflow = true;

	while (tail < head) {
		struct perf_event_header h;
		char rec[64];

		for (size_t i = 0; i < sizeof(h); i++)
			((char *)&h)[i] = data[(tail + i) % size];
		if (h.size < sizeof(h) || h.size > sizeof(rec))
			break;
		for (size_t i = 0; i < h.size; i++)
			rec[i] = data[(tail + i) % size];
		if (h.type == PERF_RECORD_SAMPLE) {
			struct {
				uint32_t pid, tid;
				uint64_t time;
			} s;

			memcpy(&s, rec + sizeof(h), sizeof(s));
			if (*n == *cap) {
				size_t grow = *cap ? *cap * 2 : 65536;
				struct tp_sample *bigger = realloc(*v, grow * sizeof(**v));

				if (!bigger)
					break;
				*v = bigger;
				*cap = grow;
			}
			(*v)[(*n)++] = (struct tp_sample){ s.time, s.tid, end };
		} else if (h.type == PERF_RECORD_LOST) {
			uint64_t l[2];

			memcpy(l, rec + sizeof(h), sizeof(l));
			k->lost += l[1];
		}
		tail += h.size;
	}
	__atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
}

/* Pair each thread's begin with its next end: the waits. */
static void ktrace_figures(struct ktrace *t, struct kernel_locks *k)
{
	struct tp_sample *v = NULL;
	size_t n = 0, cap = 0;
	struct {
		uint32_t tid;
		uint64_t begin;
	} *open_waits;
	size_t slots = 1 << 16;

	k->ok = true;
	for (int e = 0; e < 2; e++)
		for (int c = 0; c < t->ncpus; c++)
			if (t->ring[e][c])
				drain(t->ring[e][c], t->ring_size, (uint32_t)e, &v, &n, &cap, k);
	if (n)
		qsort(v, n, sizeof(*v), by_time);
	open_waits = calloc(slots, sizeof(*open_waits));
	for (size_t i = 0; i < n && open_waits; i++) {
		size_t slot = (v[i].tid * 2654435761u) & (slots - 1);

		while (open_waits[slot].tid && open_waits[slot].tid != v[i].tid)
			slot = (slot + 1) & (slots - 1);
		if (!v[i].end) {
			k->contended++;
			open_waits[slot].tid = v[i].tid;
			open_waits[slot].begin = v[i].time;
		} else if (open_waits[slot].tid == v[i].tid && open_waits[slot].begin) {
			k->wait_ns += v[i].time - open_waits[slot].begin;
			open_waits[slot].begin = 0;
		}
	}
	free(open_waits);
	free(v);
}

/* ---- one run ---- */

/* The measured loop's share of a set's figures: after - before, over `seconds`. */
static void stats_delta(struct lk_semset_stats *after, const struct lk_semset_stats *before, double seconds)
{
	int cpus = lkb_ncpus();

	after->free -= before->free;
	after->contended -= before->contended;
	after->wait_ns -= before->wait_ns;
	after->simple_ops -= before->simple_ops;
	after->global_ops -= before->global_ops;
	after->global_mode_entries -= before->global_mode_entries;
	after->sleeps -= before->sleeps;
	after->wakeups -= before->wakeups;
	after->wait_avg_ns = after->contended ? after->wait_ns / after->contended : 0;
	after->lifetime_ns = (uint64_t)(seconds * 1e9);
	after->wait_per_mille = seconds > 0 ? (double)after->wait_ns / (seconds * 1e9 * (cpus > 0 ? cpus : 1)) * 1000 : 0;
}

static int setup_mode(struct sembench *b)
{
	int err;

	switch (b->mode) {
	case MODE_IPC:
		b->semid = semget(IPC_PRIVATE, b->nthreads, IPC_CREAT | 0600);
		if (b->semid < 0) {
			fprintf(stderr, "lowkey bench sem: semget of %d semaphores: %s\nhint: see kernel.sem (SEMMSL) in "
					"/proc/sys/kernel/sem\n", b->nthreads, strerror(errno));
			return -errno;
		}
		return 0;
	case MODE_LOWKEY:
		err = lk_semset_create(&b->set, NULL, (unsigned int)b->nthreads, 0);
		if (err)
			fprintf(stderr, "lowkey bench sem: lk_semset_create: %s\n", lk_last_error());
		return err;
	default:
		return 0;
	}
}

static void teardown_mode(struct sembench *b)
{
	if (b->mode == MODE_IPC)
		semctl(b->semid, 0, IPC_RMID);
	if (b->mode == MODE_LOWKEY)
		lk_semset_close(b->set);
}

static int one_run(enum mode mode, int nthreads, int wake, bool bind, double seconds, struct run_result *r)
{
	struct sembench b = { .mode = mode, .nthreads = nthreads, .wake = wake, .bind = bind, .ncpus = lkb_ncpus() };
	struct lk_semset_stats before;
	struct ktrace trace;
	uint64_t t0;
	int err;

	memset(r, 0, sizeof(*r));
	b.workers = aligned_alloc(64, sizeof(*b.workers) * (size_t)nthreads);
	if (!b.workers)
		return -ENOMEM;
	memset(b.workers, 0, sizeof(*b.workers) * (size_t)nthreads);
	err = setup_mode(&b);
	if (err) {
		free(b.workers);
		return err;
	}
	if (bind)
		lkb_pin(0);
	/* opened (disabled) before the threads exist so that they inherit it; enabling it reaches
	 * the inherited copies too, so only the measured loop is traced */
	if (ktrace_open(&trace, &r->kernel) != 0)
		trace.ncpus = 0;
	for (int i = 0; i < nthreads; i++) {
		b.workers[i].b = &b;
		b.workers[i].id = i;
		if (pthread_create(&b.workers[i].thread, NULL, worker_main, &b.workers[i]) != 0) {
			nthreads = i;
			b.nthreads = i;
			break;
		}
	}
	if (mode == MODE_LOWKEY)
		lk_semset_stats(b.set, &before);
	if (trace.ncpus)
		ktrace_enable(&trace, true);
	t0 = now_ns();
	r->main_burns = main_loop(&b, (uint64_t)(seconds * 1e9));
	r->seconds = (double)(now_ns() - t0) / 1e9;
	if (trace.ncpus)
		ktrace_enable(&trace, false);
	if (mode == MODE_LOWKEY) {
		lk_semset_stats(b.set, &r->lk);
		stats_delta(&r->lk, &before, r->seconds);
	}
	release_all(&b);
	for (int i = 0; i < nthreads; i++)
		pthread_join(b.workers[i].thread, NULL);
	if (trace.ncpus) {
		ktrace_figures(&trace, &r->kernel);
		ktrace_close(&trace);
	}
	r->min_burns = UINT64_MAX;
	for (int i = 0; i < nthreads; i++) {
		uint64_t n = b.workers[i].burns;

		r->burns += n;
		r->min_burns = n < r->min_burns ? n : r->min_burns;
		r->max_burns = n > r->max_burns ? n : r->max_burns;
	}
	teardown_mode(&b);
	free(b.workers);
	return nthreads > 0 ? 0 : -EAGAIN;
}

/* ======================================================================================== */
/* 2 and 3. lock + unlock, and a lock-heavy program, bare and under `lowkey locks`           */
/* ======================================================================================== */

/*
 * These run in child processes -- this same program, re-executed with `--child WHAT` -- so that
 * the bare run and the run with liblowkey-locks.so preloaded start alike. A child prints its
 * figures on one line.
 */

#define LOCK_LOOPS 5000000
#define LOCK_ROUNDS 9

static void *idle_thread(void *arg)
{
	pause();
	return arg;
}

/* Median ns per lock + unlock, for pthread_mutex and lk_mutex, measured interleaved. */
static int child_locks(void)
{
	static pthread_mutex_t pm = PTHREAD_MUTEX_INITIALIZER;
	static lk_mutex_t lm = LK_MUTEX_INIT("bench");
	double p[LOCK_ROUNDS], l[LOCK_ROUNDS];
	pthread_t idle;

	/* a second thread: glibc then uses atomic instructions, as in any threaded program */
	pthread_create(&idle, NULL, idle_thread, NULL);
	for (int r = 0; r < LOCK_ROUNDS; r++) {
		uint64_t t0 = lkb_now_ns();

		for (int i = 0; i < LOCK_LOOPS; i++) {
			pthread_mutex_lock(&pm);
			pthread_mutex_unlock(&pm);
		}
		p[r] = (double)(lkb_now_ns() - t0) / LOCK_LOOPS;
		t0 = lkb_now_ns();
		for (int i = 0; i < LOCK_LOOPS; i++) {
			lk_mutex_lock(&lm);
			lk_mutex_unlock(&lm);
		}
		l[r] = (double)(lkb_now_ns() - t0) / LOCK_LOOPS;
	}
	printf("%.3f %.3f\n", lkb_median(p, LOCK_ROUNDS), lkb_median(l, LOCK_ROUNDS));
	return 0;
}

#define HEAVY_LOCKS 64
#define HEAVY_OPS 2000000
#define INSIDE 40	/* dependent multiply-adds in the critical section (~50 ns) */
#define OUTSIDE 80	/* and between two (~100 ns) */

struct heavy_slot {
	pthread_mutex_t lock;
	uint64_t counters[4];
} __attribute__((aligned(64)));

struct heavy {
	struct heavy_slot slots[HEAVY_LOCKS];
	bool empty;
	uint64_t sink;
};

static uint64_t spin(uint64_t x, int n)
{
	for (int i = 0; i < n; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	return x;
}

static void *heavy_thread(void *arg)
{
	struct heavy *h = arg;
	uint64_t x = (uint64_t)pthread_self() | 1;
	int ops = h->empty ? HEAVY_OPS / 2 : HEAVY_OPS;

	for (int i = 0; i < ops; i++) {
		struct heavy_slot *s;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		s = &h->slots[x % HEAVY_LOCKS];
		pthread_mutex_lock(&s->lock);
		if (!h->empty) {
			for (int j = 0; j < 4; j++)
				s->counters[j] += x >> j;
			x = spin(x, INSIDE);
		}
		pthread_mutex_unlock(&s->lock);
		if (!h->empty)
			x = spin(x, OUTSIDE);
	}
	__atomic_fetch_add(&h->sink, x, __ATOMIC_RELAXED);
	return NULL;
}

/* Seconds for the lock-heavy program: 2 threads per CPU (at most 8) sharing 64 mutexes. */
static int child_heavy(bool empty)
{
	static struct heavy h;
	int nthreads = 2 * lkb_ncpus();
	pthread_t t[8];
	uint64_t t0;

	if (nthreads > 8)
		nthreads = 8;
	h.empty = empty;
	for (int i = 0; i < HEAVY_LOCKS; i++)
		pthread_mutex_init(&h.slots[i].lock, NULL);
	t0 = lkb_now_ns();
	for (int i = 0; i < nthreads; i++)
		pthread_create(&t[i], NULL, heavy_thread, &h);
	for (int i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	printf("%.6f %d\n", (double)(lkb_now_ns() - t0) / 1e9, nthreads);
	return 0;
}

static const char *find_preload(void)
{
	const char *env = getenv("LOWKEY_LOCKS_LIB");
	static char buf[4096];
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (env)
		return access(env, R_OK) == 0 ? env : NULL;
	if (n > 0) {
		char *slash;

		exe[n] = 0;
		slash = strrchr(exe, '/');
		if (slash) {
			*slash = 0;
			if (snprintf(buf, sizeof(buf), "%s/../%s/liblowkey-locks.so", exe, LK_LOCKS_LIBDIR) < (int)sizeof(buf) &&
			    access(buf, R_OK) == 0)
				return buf;
		}
	}
	if (access(LK_LOCKS_PRELOAD_BUILD, R_OK) == 0)
		return LK_LOCKS_PRELOAD_BUILD;
	if (access(LK_LOCKS_PRELOAD_INSTALL, R_OK) == 0)
		return LK_LOCKS_PRELOAD_INSTALL;
	return NULL;
}

static void remove_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	while (d && (de = readdir(d))) {
		char path[4096];

		if (de->d_name[0] != '.' && snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) < (int)sizeof(path))
			unlink(path);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

/* Run `lowkey bench sem --child what`, bare or under the preload; its figures in v[0..n). */
static int run_child(const char *what, const char *preload, double *v, int n)
{
	char dir[] = "/tmp/lowkey-bench-sem.XXXXXX", line[256];
	int fd[2], status, got = 0;
	ssize_t len;
	pid_t pid;

	if (preload && !mkdtemp(dir))
		return -errno;
	if (pipe(fd) != 0)
		return -errno;
	pid = fork();
	if (pid == 0) {
		dup2(fd[1], 1);
		close(fd[0]);
		close(fd[1]);
		if (preload) {
			setenv("LD_PRELOAD", preload, 1);
			setenv("LOWKEY_LOCKS_DIR", dir, 1);
		}
		execl("/proc/self/exe", "lowkey", "bench", "sem", "--child", what, (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	len = pid > 0 ? read(fd[0], line, sizeof(line) - 1) : -1;
	close(fd[0]);
	if (pid > 0)
		waitpid(pid, &status, 0);
	if (preload)
		remove_dir(dir);
	if (len <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return -ECHILD;
	line[len] = 0;
	for (char *p = line, *end; got < n; p = end, got++) {
		v[got] = strtod(p, &end);
		if (end == p)
			return -EINVAL;
	}
	return 0;
}

struct lock_costs {
	bool have_preload;
	double pthread_ns, lk_ns, preload_ns;
	double heavy_bare_s, heavy_preload_s, empty_bare_s, empty_preload_s;
	int heavy_threads;
};

static int measure_lock_costs(int runs, struct lock_costs *c)
{
	const char *preload = find_preload();
	double p[16], l[16], q[16], hb[16], hp[16], eb[16], ep[16], v[2];
	int err = 0;

	memset(c, 0, sizeof(*c));
	c->have_preload = preload != NULL;
	for (int r = 0; r < runs && !err; r++) {
		err = run_child("locks", NULL, v, 2);
		p[r] = v[0];
		l[r] = v[1];
		err = err ?: run_child("heavy", NULL, v, 2);
		hb[r] = v[0];
		c->heavy_threads = (int)v[1];
		err = err ?: run_child("empty", NULL, v, 2);
		eb[r] = v[0];
		if (preload && !err) {
			err = run_child("locks", preload, v, 2);
			q[r] = v[0];
			err = err ?: run_child("heavy", preload, v, 2);
			hp[r] = v[0];
			err = err ?: run_child("empty", preload, v, 2);
			ep[r] = v[0];
		}
	}
	if (err)
		return err;
	c->pthread_ns = lkb_median(p, (size_t)runs);
	c->lk_ns = lkb_median(l, (size_t)runs);
	c->heavy_bare_s = lkb_median(hb, (size_t)runs);
	c->empty_bare_s = lkb_median(eb, (size_t)runs);
	if (preload) {
		c->preload_ns = lkb_median(q, (size_t)runs);
		c->heavy_preload_s = lkb_median(hp, (size_t)runs);
		c->empty_preload_s = lkb_median(ep, (size_t)runs);
	}
	return 0;
}

/* ======================================================================================== */
/* Reporting                                                                                 */
/* ======================================================================================== */

/* The series' figures: ./sembench -t 250 -w 64 -o 0 -r 30 on a 4-core AMD Phenom, before and after. */
static const struct seed_figures {
	const char *when;
	double burns_per_s, main_burns, free, contended, wait_cycles, avg_cycles, per_mille;
} seed[2] = {
	{ "before", 211756, 2194274, 745344, 7801967, 110278262115.0, 14134, 470 },
	{ "after", 236144, 112890, 6704845, 490448, 2625106215.0, 5352, 11 },
};

struct mode_result {
	bool ran;
	struct run_result median;	/* the run with the median burns per second */
	double burns_per_s;
};

static int by_rate(const void *a, const void *b)
{
	const struct run_result *x = a, *y = b;
	double rx = (double)x->burns / x->seconds, ry = (double)y->burns / y->seconds;

	return (rx > ry) - (rx < ry);
}

static void pick_median(struct run_result *runs, int n, struct mode_result *m)
{
	qsort(runs, (size_t)n, sizeof(*runs), by_rate);
	m->ran = true;
	m->median = runs[n / 2];
	m->burns_per_s = (double)m->median.burns / m->median.seconds;
}

static double kernel_per_mille(const struct run_result *r)
{
	return r->seconds > 0 ? (double)r->kernel.wait_ns / (r->seconds * 1e9 * lkb_ncpus()) * 1000 : 0;
}

static void print_kernel(const struct run_result *r)
{
	const struct kernel_locks *k = &r->kernel;

	if (!k->ok) {
		printf("      kernel locks: n/a (%s)\n", k->why);
		return;
	}
	printf("      kernel locks:   free n/a  contended %lu  wait %lu ns  avg %lu ns  1/1000 cpu time %.1f%s\n",
	       (unsigned long)k->contended, (unsigned long)k->wait_ns,
	       (unsigned long)(k->contended ? k->wait_ns / k->contended : 0), kernel_per_mille(r),
	       k->lost || k->overflow ? "  (events lost: figures are lower bounds)" : "");
}

/* The text a part at a time, each as soon as it is measured: the modes' runs, then the lock costs. */
static void print_header(int nthreads, int wake, double seconds, int runs, bool bind)
{
	printf("lowkey bench sem: sembench, %d threads waking %d at a time, %.0f s x %d runs, %s\n", nthreads, wake, seconds,
	       runs, bind ? "bound to CPUs" : "not bound");
	printf("machine: %s\n\n", lkb_machine());
	fflush(stdout);
}

static void print_modes(int nthreads, const struct mode_result *m)
{
	for (int i = 0; i < NMODES; i++) {
		const struct run_result *r = &m[i].median;

		if (!m[i].ran)
			continue;
		printf("  %-20s %10.0f worker burns/s   main thread burns %lu\n", mode_titles[i], m[i].burns_per_s,
		       (unsigned long)r->main_burns);
		printf("      worker burn count total %lu min %lu max %lu avg %lu, run time %.2f s\n",
		       (unsigned long)r->burns, (unsigned long)r->min_burns, (unsigned long)r->max_burns,
		       (unsigned long)(r->burns / (uint64_t)nthreads), r->seconds);
		if (i == MODE_LOWKEY)
			printf("      lk_semset locks: free %lu  contended %lu  wait %lu ns  avg %lu ns  1/1000 cpu time %.1f"
			       "  (set-lock calls %lu, switches to set-lock mode %lu)\n",
			       (unsigned long)r->lk.free, (unsigned long)r->lk.contended, (unsigned long)r->lk.wait_ns,
			       (unsigned long)r->lk.wait_avg_ns, r->lk.wait_per_mille, (unsigned long)r->lk.global_ops,
			       (unsigned long)r->lk.global_mode_entries);
		print_kernel(r);
	}
	if (m[MODE_IPC].ran && m[MODE_LOWKEY].ran)
		printf("\n  lk_semset / SysV worker burns per second: %.2fx (target: >= 2x at -t 250 -w 64)\n",
		       m[MODE_LOWKEY].burns_per_s / m[MODE_IPC].burns_per_s);
	printf("\n  \"ipc/sem.c: Optimization for reducing spinlock contention\"\n"
	       "  (ipc, -t 250 -w 64 -r 30, 4-core AMD Phenom; wait and avg in TSC cycles):\n");
	for (int i = 0; i < 2; i++)
		printf("    %-6s %8.0f worker burns/s  main burns %.0f  free %.0f contended %.0f wait %.0f avg %.0f "
		       "1/1000 cpu time %.0f\n",
		       seed[i].when, seed[i].burns_per_s, seed[i].main_burns, seed[i].free, seed[i].contended,
		       seed[i].wait_cycles, seed[i].avg_cycles, seed[i].per_mille);
	fflush(stdout);
}

static void print_lock_costs(int runs, const struct lock_costs *c)
{
	printf("\n  lock + unlock, uncontended, ns (median of %d processes):\n", runs);
	printf("    pthread_mutex                     %6.2f\n", c->pthread_ns);
	printf("    lk_mutex                          %6.2f   (%+.2f ns; target: within 5 ns)\n", c->lk_ns,
	       c->lk_ns - c->pthread_ns);
	if (c->have_preload)
		printf("    pthread_mutex under lowkey locks  %6.2f   (%+.2f ns)\n", c->preload_ns, c->preload_ns - c->pthread_ns);
	else
		printf("    pthread_mutex under lowkey locks  n/a (liblowkey-locks.so not found; set LOWKEY_LOCKS_LIB)\n");
	printf("\n  lock-heavy program: %d threads, %d mutexes, %d lock/unlock each (seconds, median of %d):\n",
	       c->heavy_threads, HEAVY_LOCKS, HEAVY_OPS, runs);
	if (c->have_preload) {
		printf("    ~50 ns critical sections          bare %.3f   under lowkey locks %.3f   %.2fx (target: <= 1.5x)\n",
		       c->heavy_bare_s, c->heavy_preload_s, c->heavy_preload_s / c->heavy_bare_s);
		printf("    empty critical sections (worst)   bare %.3f   under lowkey locks %.3f   %.2fx\n", c->empty_bare_s,
		       c->empty_preload_s, c->empty_preload_s / c->empty_bare_s);
	}
}

static void json_kernel(struct lk__json *j, const struct run_result *r)
{
	lk__json_object(j, "kernel_locks");
	if (r->kernel.ok) {
		lk__json_null(j, "free");
		lk__json_int(j, "contended", (long long)r->kernel.contended);
		lk__json_int(j, "wait_ns", (long long)r->kernel.wait_ns);
		lk__json_int(j, "avg_ns", (long long)(r->kernel.contended ? r->kernel.wait_ns / r->kernel.contended : 0));
		lk__json_num(j, "per_mille_cpu", kernel_per_mille(r));
		lk__json_int(j, "lost_events", (long long)r->kernel.lost);
		lk__json_bool(j, "lower_bounds", r->kernel.lost || r->kernel.overflow);
	} else {
		lk__json_str(j, "unavailable", r->kernel.why);
	}
	lk__json_close(j);
}

static void print_json(int nthreads, int wake, double seconds, int runs, bool bind, const struct mode_result *m,
		       const struct lock_costs *c)
{
	struct lk__json j;

	lk__json_begin(&j, stdout, false);
	lk__json_str(&j, "bench", "sem");
	lk__json_str(&j, "machine", lkb_machine());
	lk__json_int(&j, "threads", nthreads);
	lk__json_int(&j, "wake", wake);
	lk__json_num(&j, "seconds", seconds);
	lk__json_int(&j, "runs", runs);
	lk__json_bool(&j, "bind", bind);
	lk__json_array(&j, "sembench");
	for (int i = 0; i < NMODES; i++) {
		const struct run_result *r = &m[i].median;

		if (!m[i].ran)
			continue;
		lk__json_object(&j, NULL);
		lk__json_str(&j, "mode", mode_names[i]);
		lk__json_num(&j, "worker_burns_per_s", m[i].burns_per_s);
		lk__json_int(&j, "worker_burns", (long long)r->burns);
		lk__json_int(&j, "worker_burns_min", (long long)r->min_burns);
		lk__json_int(&j, "worker_burns_max", (long long)r->max_burns);
		lk__json_int(&j, "main_burns", (long long)r->main_burns);
		lk__json_num(&j, "run_s", r->seconds);
		if (i == MODE_LOWKEY) {
			lk__json_object(&j, "lk_semset_locks");
			lk__json_int(&j, "free", (long long)r->lk.free);
			lk__json_int(&j, "contended", (long long)r->lk.contended);
			lk__json_int(&j, "wait_ns", (long long)r->lk.wait_ns);
			lk__json_int(&j, "avg_ns", (long long)r->lk.wait_avg_ns);
			lk__json_num(&j, "per_mille_cpu", r->lk.wait_per_mille);
			lk__json_int(&j, "set_lock_calls", (long long)r->lk.global_ops);
			lk__json_int(&j, "set_lock_mode_switches", (long long)r->lk.global_mode_entries);
			lk__json_close(&j);
		}
		json_kernel(&j, r);
		lk__json_close(&j);
	}
	lk__json_close(&j);
	if (m[MODE_IPC].ran && m[MODE_LOWKEY].ran)
		lk__json_num(&j, "lowkey_over_ipc", m[MODE_LOWKEY].burns_per_s / m[MODE_IPC].burns_per_s);
	lk__json_array(&j, "published");
	for (int i = 0; i < 2; i++) {
		lk__json_object(&j, NULL);
		lk__json_str(&j, "when", seed[i].when);
		lk__json_num(&j, "worker_burns_per_s", seed[i].burns_per_s);
		lk__json_num(&j, "main_burns", seed[i].main_burns);
		lk__json_num(&j, "free", seed[i].free);
		lk__json_num(&j, "contended", seed[i].contended);
		lk__json_num(&j, "wait_cycles", seed[i].wait_cycles);
		lk__json_num(&j, "avg_cycles", seed[i].avg_cycles);
		lk__json_num(&j, "per_mille_cpu", seed[i].per_mille);
		lk__json_close(&j);
	}
	lk__json_close(&j);
	if (c) {
		lk__json_object(&j, "lock_unlock_ns");
		lk__json_num(&j, "pthread_mutex", c->pthread_ns);
		lk__json_num(&j, "lk_mutex", c->lk_ns);
		if (c->have_preload)
			lk__json_num(&j, "pthread_mutex_lowkey_locks", c->preload_ns);
		else
			lk__json_null(&j, "pthread_mutex_lowkey_locks");
		lk__json_close(&j);
		lk__json_object(&j, "lock_heavy_s");
		lk__json_int(&j, "threads", c->heavy_threads);
		lk__json_num(&j, "bare", c->heavy_bare_s);
		lk__json_num(&j, "lowkey_locks", c->have_preload ? c->heavy_preload_s : NAN);
		lk__json_num(&j, "empty_bare", c->empty_bare_s);
		lk__json_num(&j, "empty_lowkey_locks", c->have_preload ? c->empty_preload_s : NAN);
		lk__json_close(&j);
	}
	lk__json_end(&j);
}

/* ======================================================================================== */

static const char sem_usage[] =
	"usage: lowkey bench sem [-t THREADS] [-w WAKE] [-r SECONDS] [-o ipc|lowkey|futex|nanosleep|all]\n"
	"                        [--bind] [--runs N] [--no-locks] [-j|--json]\n"
	"\n"
	"The experiment of Manfred Spraul's RFC series \"ipc/sem.c: Optimization for reducing spinlock\n"
	"contention\". sembench: THREADS workers (default 250) each sleep on their own semaphore;\n"
	"a main thread wakes WAKE (default 64, at most 128) of them at a time, for SECONDS (default 10) per\n"
	"run. Prints worker burns (wake-ups) per second, main thread burns (rounds that found nobody to\n"
	"wake), and the lock contention figures of the series -- free, contended, wait, avg, 1/1000 of CPU\n"
	"time -- for lk_semset (its own counters) and for the kernel's locks (lock:contention_begin/end\n"
	"tracepoints; needs root or CAP_PERFMON). -o picks one implementation; the default runs the\n"
	"kernel's SysV semaphores (ipc) and lk_semset (lowkey) interleaved; all adds futex and nanosleep.\n"
	"--bind pins the main thread to CPU 0 and the workers to the others, as the series' runs did.\n"
	"\n"
	"Then (unless --no-locks) the cost of an uncontended lock + unlock of pthread_mutex, lk_mutex,\n"
	"and pthread_mutex under `lowkey locks`, and a lock-heavy program bare and under `lowkey locks`.\n"
	"Each figure is the median of --runs runs (default 3). Run it alone on the machine.\n";

static bool parse_int(const char *s, int min, int max, int *out)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*s == 0 || *end || v < min || v > max)
		return false;
	*out = (int)v;
	return true;
}

static int sem_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "bind", no_argument, NULL, 'b' },
		{ "runs", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ "no-locks", no_argument, NULL, 'L' },
		{ "child", required_argument, NULL, 'C' },
		{ NULL, 0, NULL, 0 },
	};
	int nthreads = 250, wake = 64, runs = 3, c, seconds_i = 10;
	bool bind = false, json = false, locks = true, want[NMODES] = { true, true, false, false };
	struct mode_result results[NMODES] = { 0 };
	struct lock_costs costs;
	struct run_result *runs_of[NMODES] = { 0 };

	optind = 1;
	while ((c = getopt_long(argc, argv, "t:w:r:o:j", opts, NULL)) != -1) {
		switch (c) {
		case 'C':
			if (strcmp(optarg, "locks") == 0)
				return child_locks();
			if (strcmp(optarg, "heavy") == 0 || strcmp(optarg, "empty") == 0)
				return child_heavy(strcmp(optarg, "empty") == 0);
			return 2;
		case 't':
			if (!parse_int(optarg, 1, 32000, &nthreads))
				goto usage;
			break;
		case 'w':
			if (!parse_int(optarg, 1, LK_SEMOPM, &wake))
				goto usage;
			break;
		case 'r':
			if (!parse_int(optarg, 1, 3600, &seconds_i))
				goto usage;
			break;
		case 'o':
			memset(want, 0, sizeof(want));
			if (strcmp(optarg, "all") == 0) {
				for (int i = 0; i < NMODES; i++)
					want[i] = true;
				break;
			}
			for (int i = 0; i < NMODES; i++)
				want[i] = strcmp(optarg, mode_names[i]) == 0 || (i == 0 && strcmp(optarg, "0") == 0);
			if (!want[0] && !want[1] && !want[2] && !want[3])
				goto usage;
			break;
		case 'b':
			bind = true;
			break;
		case 'n':
			if (!parse_int(optarg, 1, 15, &runs))
				goto usage;
			break;
		case 'j':
			json = true;
			break;
		case 'L':
			locks = false;
			break;
		default:
			goto usage;
		}
	}
	if (optind != argc)
		goto usage;

	for (int i = 0; i < NMODES; i++) {
		runs_of[i] = calloc((size_t)runs, sizeof(struct run_result));
		if (!runs_of[i])
			return 1;
	}
	if (!json)
		print_header(nthreads, wake, seconds_i, runs, bind);
	/* interleaved, so that drift on a shared machine hits every implementation alike */
	for (int r = 0; r < runs; r++) {
		for (int i = 0; i < NMODES; i++) {
			if (!want[i])
				continue;
			lkb_progress("run %d of %d: %s", r + 1, runs, mode_names[i]);
			if (one_run((enum mode)i, nthreads, wake, bind, seconds_i, &runs_of[i][r]) != 0) {
				fprintf(stderr, "lowkey bench sem: the %s run failed\n", mode_names[i]);
				return 1;
			}
		}
	}
	for (int i = 0; i < NMODES; i++) {
		if (want[i])
			pick_median(runs_of[i], runs, &results[i]);
		free(runs_of[i]);
	}
	if (!json)
		print_modes(nthreads, results);
	lkb_progress("lock costs, %d runs", runs);
	if (locks && measure_lock_costs(runs, &costs) != 0) {
		fprintf(stderr, "lowkey bench sem: the lock-cost children failed\n");
		return 1;
	}
	if (json)
		print_json(nthreads, wake, seconds_i, runs, bind, results, locks ? &costs : NULL);
	else if (locks)
		print_lock_costs(runs, &costs);
	return 0;
usage:
	fputs(sem_usage, stderr);
	return 2;
}

LK_BENCH(sem_bench, "sem", "ipc/sem.c contention RFC: sembench, SysV vs lk_semset, with lock figures; lock costs",
	 sem_usage, sem_run);
