// SPDX-License-Identifier: MIT
/*
 * `lowkey bench sem`: the kernel's lock contention while sembench runs, the figures Manfred
 * Spraul's series gives for the semaphore array's spinlock, from the lock:contention_begin/end
 * tracepoints (root or CAP_PERFMON). Every kernel lock the benchmark's threads waited for counts,
 * which under ipc is mostly the semaphore array's.
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "sem_bench.h"

#define TRACE_PAGES 4096 /* 16 MiB per CPU and event */

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

void ktrace_close(struct ktrace *t)
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

/* The tracepoint's id, or -errno with k->why saying what is missing. */
static long tracepoint_id_or_why(const char *event, struct kernel_locks *k)
{
	long id = tracepoint_id(event);

	if (id == -ENOENT)
		snprintf(k->why, sizeof(k->why),
			 "no lock:%s tracepoint (tracefs not mounted, or kernel < 5.19)", event);
	else if (id < 0)
		snprintf(k->why, sizeof(k->why),
			 "cannot read tracefs: %s (run as root or with CAP_PERFMON and a readable "
			 "tracefs)",
			 strerror((int)-id));
	return id;
}

/* Tracepoint id as event e on one CPU, with its ring; an offline CPU is left out. 0 or -errno. */
static int open_on_cpu(struct ktrace *t, int e, int cpu, long id, const char *event,
		       struct kernel_locks *k)
{
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

	t->fd[e][cpu] = (int)syscall(SYS_perf_event_open, &a, 0, cpu, -1, PERF_FLAG_FD_CLOEXEC);
	if (t->fd[e][cpu] < 0) {
		int err = errno;

		if (err == ENODEV || err == EINVAL)
			return 0; /* an offline CPU */
		snprintf(k->why, sizeof(k->why),
			 "tracepoint lock:%s: %s (needs root or CAP_PERFMON, and "
			 "perf_event_paranoid <= 1 for kernel events)",
			 event, strerror(err));
		return -err;
	}
	t->ring[e][cpu] =
		mmap(NULL, t->ring_size, PROT_READ | PROT_WRITE, MAP_SHARED, t->fd[e][cpu], 0);
	if (t->ring[e][cpu] == MAP_FAILED) {
		snprintf(k->why, sizeof(k->why),
			 "cannot map a perf ring buffer: %s (ulimit -l, "
			 "perf_event_mlock_kb)",
			 strerror(errno));
		return -ENOMEM;
	}
	return 0;
}

int ktrace_open(struct ktrace *t, struct kernel_locks *k)
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
		long id = tracepoint_id_or_why(events[e], k);

		if (id < 0)
			return (int)id;
		for (int c = 0; c < t->ncpus; c++) {
			int err = open_on_cpu(t, e, c, id, events[e], k);

			if (err) {
				ktrace_close(t);
				return err;
			}
		}
	}
	return 0;
}

void ktrace_enable(struct ktrace *t, bool on)
{
	for (int e = 0; e < 2; e++)
		for (int c = 0; c < t->ncpus; c++)
			if (t->fd[e][c] >= 0)
				ioctl(t->fd[e][c],
				      on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, 0);
}

struct tp_sample {
	uint64_t time;
	uint32_t tid;
	uint32_t end; /* 0 begin, 1 end */
};

static int by_time(const void *a, const void *b)
{
	const struct tp_sample *x = a, *y = b;

	return x->time < y->time ? -1 : x->time > y->time;
}

/* Append the samples of one ring buffer. */
static void drain(void *ring, size_t ring_size, uint32_t end, struct tp_sample **v, size_t *n,
		  size_t *cap, struct kernel_locks *k)
{
	struct perf_event_mmap_page *meta = ring;
	char *data = (char *)ring + meta->data_offset;
	uint64_t size = meta->data_size ? meta->data_size :
					  ring_size - (size_t)sysconf(_SC_PAGESIZE);
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
void ktrace_figures(struct ktrace *t, struct kernel_locks *k)
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
