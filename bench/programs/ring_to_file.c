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
 *
 * One producer thread writes BURSTS bursts of N 24-byte records (a u64 header and two u64
 * arguments, published with a release store as lowkey's inline path does), PAUSE_US apart; the
 * consumer wakes every 10 ms. The modes alternate, ROUNDS rounds; each run's file is removed
 * after it. The CPU times are the threads' own (CLOCK_THREAD_CPUTIME_ID).
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
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

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

enum mode { WRITEV, IN_PLACE, POPULATED, MODES };
static const char *const mode_name[MODES] = { "writev", "in-place", "populated" };

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
	double producer_ns, consumer_ns;
};

static double thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void die(const char *what)
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
			uint8_t *dst = r->mode == WRITEV ? ring_place(r, &pos) :
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
	double t0 = thread_cpu_ns();

	for (;;) {
		int last = atomic_load(&r->producer_done);

		if (r->mode == WRITEV)
			drain_writev(r);
		else
			drain_in_place(r);
		if (last)
			break;
		usleep(CONSUMER_PERIOD_US);
	}
	if (r->mode != WRITEV) { /* the file ends where the records do */
		for (uint64_t w = r->unmapped; w < atomic_load(&r->mapped); w++)
			munmap(r->slot[w % WINDOW_SLOTS], WINDOW);
		if (ftruncate(r->fd, (off_t)atomic_load(&r->committed)))
			die("ftruncate");
	}
	r->consumer_ns = thread_cpu_ns() - t0;
	return NULL;
}

static void run_once(struct run *r, const char *dir)
{
	char path[4096];
	pthread_t p, c;

	snprintf(path, sizeof(path), "%s/ring_to_file-%d", dir, (int)getpid());
	r->fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (r->fd < 0)
		die(path);
	if (r->mode != WRITEV)
		map_ahead(r, WINDOWS_AHEAD); /* the producer's first windows */
	if (pthread_create(&c, NULL, consumer, r) || pthread_create(&p, NULL, producer, r))
		die("pthread_create");
	pthread_join(p, NULL);
	pthread_join(c, NULL);
	close(r->fd);
	unlink(path);
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
	events = (double)bursts * (double)n;
	printf("%ld bursts of %ld %d-byte records, %ld us apart, into %s; ns of each thread's CPU an "
	       "event\n",
	       bursts, n, RECORD, pause_us, argv[1]);
	for (int i = 0; i < rounds; i++) {
		for (int m = 0; m < MODES; m++) {
			struct run *r = calloc(1, sizeof(*r));

			if (!r)
				die("calloc");
			*r = (struct run){ .mode = m,
					   .bursts = bursts,
					   .n = n,
					   .pause_us = pause_us,
					   .ring = ring };
			sleep(rest_s);
			run_once(r, argv[1]);
			prod[m][i] = r->producer_ns / events;
			cons[m][i] = r->consumer_ns / events;
			printf("round %d %-10s producer %7.2f  consumer %7.2f  (producer waited %llu "
			       "times)\n",
			       i + 1, mode_name[m], prod[m][i], cons[m][i],
			       (unsigned long long)r->producer_waits);
			free(r);
		}
	}
	printf("median of %d    producer  consumer  both   (consumer / writev's)\n", rounds);
	double writev_cons = median(cons[WRITEV], rounds);
	for (int m = 0; m < MODES; m++) {
		double p = median(prod[m], rounds), c = median(cons[m], rounds);

		printf("%-14s %8.2f  %8.2f  %6.2f   (%.2f)\n", mode_name[m], p, c, p + c,
		       c / writev_cons);
	}
	return 0;
}
