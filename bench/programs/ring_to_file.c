// SPDX-License-Identifier: MIT
/*
 * ring_to_file: what it costs to get a thread's records into a trace file, three ways, each
 * thread's CPU time an event.
 *
 *   writev     the producer writes into a 2 MiB anonymous ring; the consumer writes what was
 *              committed into the file, one writev of at most 256 KiB at a time (the kernel copies
 *              the bytes into the file's pages; lowkey's consumer does this)
 *   in-place   the ring is the file's own pages: the producer writes into 2 MiB windows of the file
 *              mapped shared; the consumer extends the file and maps windows ahead of it, and
 *              unmaps those behind (no copy; each page is allocated by the producer's first write)
 *   populated  in-place, but the consumer also populates each window as it maps it
 *              (MADV_POPULATE_WRITE): the pages are allocated by the consumer, not the producer
 *   io_uring   as writev, but the consumer hands each wake-up's writes to the kernel as one
 *              io_uring batch (one system call), where built with liburing
 *
 * One producer thread writes BURSTS bursts of N 24-byte records (a u64 header and two u64
 * arguments, published with a release store as lowkey's inline path does), PAUSE_US apart; the
 * consumer wakes every 10 ms. The modes alternate, ROUNDS rounds; each run's file is removed
 * after it. The producer's CPU time is its thread's (CLOCK_THREAD_CPUTIME_ID); the consumer's is
 * the process's less the producer's, so that it includes any thread the kernel runs for it
 * (io_uring's workers are threads of the process).
 *
 *   ring_to_file DIR [ROUNDS [BURSTS [N [PAUSE_US [REST_S]]]]]     defaults: 3 100 50000 20000 0
 *
 * REST_S: seconds to sleep before each run (a guest that hands free memory back to its host pays
 * for it again on the next first touch).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#ifdef HAVE_LIBURING
#include <liburing.h>
#endif

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

#define RECORD 24
#define RING (2u << 20)
#define WRITE_MAX (256u << 10)
#define WINDOW (2u << 20)
#define WINDOWS_AHEAD 4
#define WINDOW_SLOTS 16
#define CONSUMER_PERIOD_US 10000
#define MAX_ROUNDS 64

enum mode { WRITEV, IN_PLACE, POPULATED, IO_URING, MODES };
static const char *const mode_name[MODES] = { "writev", "in-place", "populated", "io_uring" };
#ifdef HAVE_LIBURING
#define BUILT_MODES MODES
#else
#define BUILT_MODES IO_URING
#endif
#define URING_ENTRIES 64

struct run {
	enum mode mode;
	int fd;
	long bursts, n, pause_us;
	uint8_t *ring;
	_Atomic uint64_t committed; /* bytes of the stream the producer has published */
	_Atomic uint64_t rp;	    /* writev: bytes the consumer has written */
	_Atomic int producer_done;
	/* in-place: window w is mapped at slot[w % WINDOW_SLOTS] once mapped > w */
	uint8_t *_Atomic slot[WINDOW_SLOTS];
	_Atomic uint64_t mapped;
	uint64_t unmapped;
	uint64_t producer_waits; /* times the producer found its next window not yet mapped */
	double producer_ns;
#ifdef HAVE_LIBURING
	struct io_uring uring;
	uint64_t file_off;
#endif
};

static double cpu_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static double thread_cpu_ns(void)
{
	return cpu_ns(CLOCK_THREAD_CPUTIME_ID);
}

static void __attribute__((noreturn)) die(const char *what)
{
	perror(what);
	exit(1);
}

/* writev: the next record's place in the ring; waits while the ring is full (counted) */
static uint8_t *ring_place(struct run *r, uint64_t *pos)
{
	size_t off = *pos % RING;

	if (off + RECORD > RING) { /* the consumer writes up to the end, then from the start */
		*pos += RING - off;
		off = 0;
	}
	while (*pos + RECORD - atomic_load_explicit(&r->rp, memory_order_acquire) > RING)
		r->producer_waits++;
	return r->ring + off;
}

/* in-place: the next record's place in the file's windows; a record never straddles two */
static uint8_t *window_place(struct run *r, uint64_t *pos, uint64_t *win_no, uint8_t **win)
{
	uint64_t w = *pos / WINDOW;

	if (*pos % WINDOW + RECORD > WINDOW)
		*pos = ++w * WINDOW;
	if (w != *win_no) {
		while (atomic_load_explicit(&r->mapped, memory_order_acquire) <= w)
			r->producer_waits++;
		*win = atomic_load_explicit(&r->slot[w % WINDOW_SLOTS], memory_order_relaxed);
		*win_no = w;
	}
	return *win + *pos % WINDOW;
}

static void *producer(void *arg)
{
	struct run *r = arg;
	uint64_t pos = 0, i = 0, win_no = UINT64_MAX;
	uint8_t *win = NULL;
	double t0 = thread_cpu_ns();

	for (long b = 0; b < r->bursts; b++) {
		for (long k = 0; k < r->n; k++, i++) {
			bool in_ring = r->mode == WRITEV || r->mode == IO_URING;
			uint8_t *dst = in_ring ? ring_place(r, &pos) :
						 window_place(r, &pos, &win_no, &win);
			uint64_t rec[3] = { i << 16 | 7, i, (uint64_t)r->n };

			memcpy(dst, rec, RECORD);
			pos += RECORD;
			atomic_store_explicit(&r->committed, pos, memory_order_release);
		}
		usleep((useconds_t)r->pause_us);
	}
	r->producer_ns = thread_cpu_ns() - t0;
	atomic_store(&r->producer_done, 1);
	return NULL;
}

static void drain_writev(struct run *r)
{
	uint64_t end = atomic_load_explicit(&r->committed, memory_order_acquire);
	uint64_t at = atomic_load_explicit(&r->rp, memory_order_relaxed);

	while (at < end) {
		size_t off = at % RING, len = end - at;
		struct iovec iov;

		if (len > RING - off)
			len = RING - off;
		if (len > WRITE_MAX)
			len = WRITE_MAX;
		iov = (struct iovec){ r->ring + off, len };
		if (writev(r->fd, &iov, 1) != (ssize_t)len)
			die("writev");
		at += len;
		atomic_store_explicit(&r->rp, at, memory_order_release);
	}
}

#ifdef HAVE_LIBURING
/* As drain_writev, the writes of one wake-up submitted together and waited for together. */
static void drain_uring(struct run *r)
{
	uint64_t end = atomic_load_explicit(&r->committed, memory_order_acquire);
	uint64_t at = atomic_load_explicit(&r->rp, memory_order_relaxed);

	while (at < end) {
		unsigned int n = 0;

		for (; at < end && n < URING_ENTRIES; n++) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&r->uring);
			size_t off = at % RING, len = end - at;

			if (len > RING - off)
				len = RING - off;
			if (len > WRITE_MAX)
				len = WRITE_MAX;
			io_uring_prep_write(sqe, r->fd, r->ring + off, (unsigned int)len,
					    r->file_off);
			sqe->user_data = len;
			r->file_off += len;
			at += len;
		}
		if (io_uring_submit_and_wait(&r->uring, n) < 0)
			die("io_uring_submit_and_wait");
		for (unsigned int i = 0; i < n; i++) {
			struct io_uring_cqe *cqe = NULL;

			if (io_uring_wait_cqe(&r->uring, &cqe) || cqe->res != (int)cqe->user_data) {
				fprintf(stderr, "io_uring write: %s\n",
					cqe && cqe->res < 0 ? strerror(-cqe->res) : "short");
				exit(1);
			}
			io_uring_cqe_seen(&r->uring, cqe);
		}
		atomic_store_explicit(&r->rp, at, memory_order_release);
	}
}
#endif

static void map_ahead(struct run *r, uint64_t upto)
{
	for (uint64_t m; (m = atomic_load(&r->mapped)) < upto && m < r->unmapped + WINDOW_SLOTS;) {
		uint8_t *p;

		if (ftruncate(r->fd, (off_t)((m + 1) * WINDOW)))
			die("ftruncate");
		p = mmap(NULL, WINDOW, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd,
			 (off_t)(m * WINDOW));
		if (p == MAP_FAILED)
			die("mmap");
		if (r->mode == POPULATED && madvise(p, WINDOW, MADV_POPULATE_WRITE))
			die("madvise(MADV_POPULATE_WRITE)");
		atomic_store_explicit(&r->slot[m % WINDOW_SLOTS], p, memory_order_relaxed);
		atomic_store_explicit(&r->mapped, m + 1, memory_order_release);
	}
}

static void drain_in_place(struct run *r)
{
	uint64_t w = atomic_load_explicit(&r->committed, memory_order_acquire) / WINDOW;

	map_ahead(r, w + WINDOWS_AHEAD);
	for (; r->unmapped < w; r->unmapped++) /* the file holds them: nothing to write */
		munmap(r->slot[r->unmapped % WINDOW_SLOTS], WINDOW);
}

static void *consumer(void *arg)
{
	struct run *r = arg;

	for (;;) {
		int last = atomic_load(&r->producer_done);

		if (r->mode == WRITEV)
			drain_writev(r);
#ifdef HAVE_LIBURING
		else if (r->mode == IO_URING)
			drain_uring(r);
#endif
		else
			drain_in_place(r);
		if (last)
			break;
		usleep(CONSUMER_PERIOD_US);
	}
	if (r->mode == IN_PLACE || r->mode == POPULATED) { /* the file ends where the records do */
		for (uint64_t w = r->unmapped; w < atomic_load(&r->mapped); w++)
			munmap(r->slot[w % WINDOW_SLOTS], WINDOW);
		if (ftruncate(r->fd, (off_t)atomic_load(&r->committed)))
			die("ftruncate");
	}
	return NULL;
}

/* The run; the consumer's side's CPU time, ns: every thread of the process but the producer. */
static double run_once(struct run *r, const char *dir)
{
	char path[4096];
	pthread_t p, c;
	double t0;

	snprintf(path, sizeof(path), "%s/ring_to_file-%d", dir, (int)getpid());
	r->fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (r->fd < 0)
		die(path);
#ifdef HAVE_LIBURING
	if (r->mode == IO_URING && io_uring_queue_init(URING_ENTRIES, &r->uring, 0))
		die("io_uring_queue_init");
#endif
	t0 = cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
	if (r->mode == IN_PLACE || r->mode == POPULATED)
		map_ahead(r, WINDOWS_AHEAD); /* the producer's first windows */
	if (pthread_create(&c, NULL, consumer, r) || pthread_create(&p, NULL, producer, r))
		die("pthread_create");
	pthread_join(p, NULL);
	pthread_join(c, NULL);
	t0 = cpu_ns(CLOCK_PROCESS_CPUTIME_ID) - t0 - r->producer_ns;
#ifdef HAVE_LIBURING
	if (r->mode == IO_URING)
		io_uring_queue_exit(&r->uring);
#endif
	close(r->fd);
	unlink(path);
	return t0;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), by_value);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	int rounds = argc > 2 ? atoi(argv[2]) : 3;
	long bursts = argc > 3 ? atol(argv[3]) : 100, n = argc > 4 ? atol(argv[4]) : 50000;
	long pause_us = argc > 5 ? atol(argv[5]) : 20000;
	unsigned int rest_s = argc > 6 ? (unsigned int)atoi(argv[6]) : 0;
	double prod[MODES][MAX_ROUNDS], cons[MODES][MAX_ROUNDS], events;
	uint8_t *ring;

	if (argc < 2 || rounds < 1 || rounds > MAX_ROUNDS || bursts < 1 || n < 1 || pause_us < 0) {
		fprintf(stderr, "usage: %s DIR [ROUNDS (1-%d) [BURSTS [N [PAUSE_US [REST_S]]]]]\n",
			argv[0], MAX_ROUNDS);
		return 2;
	}
	ring = mmap(NULL, RING, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
		    -1, 0);
	if (ring == MAP_FAILED)
		die("mmap");
	setvbuf(stdout, NULL, _IOLBF, 0); /* each round as it ends */
	events = (double)bursts * (double)n;
	printf("%ld bursts of %ld %d-byte records, %ld us apart, into %s; CPU ns an event: the "
	       "producer's thread, the rest of the process (the consumer)\n",
	       bursts, n, RECORD, pause_us, argv[1]);
	for (int i = 0; i < rounds; i++) {
		for (int m = 0; m < BUILT_MODES; m++) {
			struct run *r = calloc(1, sizeof(*r));

			if (!r)
				die("calloc");
			*r = (struct run){ .mode = m,
					   .bursts = bursts,
					   .n = n,
					   .pause_us = pause_us,
					   .ring = ring };
			sleep(rest_s);
			cons[m][i] = run_once(r, argv[1]) / events;
			prod[m][i] = r->producer_ns / events;
			printf("round %d %-10s producer %7.2f  consumer %7.2f  (producer waited %llu "
			       "times)\n",
			       i + 1, mode_name[m], prod[m][i], cons[m][i],
			       (unsigned long long)r->producer_waits);
			free(r);
		}
	}
	printf("median of %d    producer  consumer  both   (consumer / writev's)\n", rounds);
	double writev_cons = median(cons[WRITEV], rounds);
	for (int m = 0; m < BUILT_MODES; m++) {
		double p = median(prod[m], rounds), c = median(cons[m], rounds);

		printf("%-14s %8.2f  %8.2f  %6.2f   (%.2f)\n", mode_name[m], p, c, p + c,
		       c / writev_cons);
	}
	return 0;
}
