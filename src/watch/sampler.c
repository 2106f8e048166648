// SPDX-License-Identifier: MIT
/*
 * Watching another process: perf breakpoint events that sample (no sigtrap, nothing sent to the
 * process), one per thread and CPU, inherited by the threads they create. The kernel only maps
 * a ring buffer for inherited events bound to a CPU, so each CPU gets one buffer and every other
 * event on that CPU writes into it (PERF_EVENT_IOC_SET_OUTPUT), as `perf record` does.
 */
#include <dirent.h>
#include <errno.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/perf.h"
#include "watch/watch_internal.h"
#include "internal/proc.h"

#define MAX_DATA_PAGES 32u
#define SAMPLE_TYPE (PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR)

struct ring {
	int fd; /* the event whose buffer this is; -1 while the CPU has none */
	struct perf_event_mmap_page *page;
	size_t data_size; /* bytes of data after the control page */
};

struct lk_watch_sampler {
	pid_t pid;
	unsigned int access;
	struct lk__watch_bp bp;
	size_t len;
	unsigned int ncpus;
	size_t page_size, data_pages;
	struct ring *rings; /* one per CPU */
	int *fds;	    /* every event */
	size_t nfds, fds_cap;
	int pidfd; /* readable once the process exits; -1 without pidfd_open() */
	bool exited;
	bool value_readable; /* process_vm_readv() worked, or has not been tried */
	uint64_t lost;
	struct lk_watch_sample *batch;
	size_t batch_cap;
};

static size_t pick_data_pages(unsigned int ncpus, size_t page_size)
{
	/* Unprivileged users may lock kernel.perf_event_mlock_kb (516 KiB by default) for all CPUs. */
	long kb = 516;
	size_t pages = MAX_DATA_PAGES;

	if (lk__read_long_file("/proc/sys/kernel/perf_event_mlock_kb", &kb) != 0 || kb < 0)
		kb = 516;
	while (pages > 1 && (pages + 1) * page_size * ncpus > (size_t)kb * 1024)
		pages /= 2;
	return pages;
}

static int map_ring(struct lk_watch_sampler *s, struct ring *r, int fd)
{
	for (size_t pages = s->data_pages; pages >= 1; pages /= 2) {
		void *p = mmap(NULL, (pages + 1) * s->page_size, PROT_READ | PROT_WRITE, MAP_SHARED,
			       fd, 0);

		if (p != MAP_FAILED) {
			r->fd = fd;
			r->page = p;
			r->data_size = pages * s->page_size;
			return 0;
		}
		if (errno != EPERM && errno != ENOMEM)
			break;
	}
	return lk__fail(-errno,
			"cannot map a perf ring buffer (%s): raise kernel.perf_event_mlock_kb "
			"or `ulimit -l`",
			strerror(errno));
}

static int add_fd(struct lk_watch_sampler *s, int fd)
{
	if (s->nfds == s->fds_cap) {
		size_t cap = s->fds_cap ? s->fds_cap * 2 : 64;
		int *p = realloc(s->fds, cap * sizeof(*p));

		if (!p)
			return lk__fail(-ENOMEM, "out of memory");
		s->fds = p;
		s->fds_cap = cap;
	}
	s->fds[s->nfds++] = fd;
	return 0;
}

static int open_one(struct lk_watch_sampler *s, pid_t tid, unsigned int cpu)
{
	struct perf_event_attr attr;
	struct ring *r = &s->rings[cpu];
	char what[96];
	int fd, err;

	memset(&attr, 0, sizeof(attr));
	attr.type = PERF_TYPE_BREAKPOINT;
	attr.bp_type = s->bp.type;
	attr.bp_addr = s->bp.addr;
	attr.bp_len = s->bp.len;
	attr.sample_period = 1;
	attr.sample_type = SAMPLE_TYPE;
	attr.exclude_kernel = 1;
	attr.exclude_hv = 1;
	attr.inherit = 1;
	attr.use_clockid = 1;
	attr.clockid = CLOCK_MONOTONIC;
	attr.wakeup_events = 1;
	snprintf(what, sizeof(what), "watchpoint on %#llx in thread %d",
		 (unsigned long long)s->bp.addr, (int)tid);
	fd = lk__perf_open(&attr, tid, (int)cpu, -1, 0, what);
	if (fd < 0)
		return fd;
	err = add_fd(s, fd);
	if (err) {
		close(fd);
		return err;
	}
	if (r->fd < 0)
		return map_ring(s, r, fd);
	if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, r->fd) != 0)
		return lk__fail(-errno, "PERF_EVENT_IOC_SET_OUTPUT failed: %s", strerror(errno));
	return 0;
}

/* Open the events of one thread on every CPU that is online. */
static int open_thread(struct lk_watch_sampler *s, pid_t tid)
{
	int opened = 0, err = 0;

	for (unsigned int cpu = 0; cpu < s->ncpus; cpu++) {
		err = open_one(s, tid, cpu);
		if (err == -ENODEV || err == -EINVAL) {
			err = 0; /* offline CPU */
			continue;
		}
		if (err)
			return err;
		opened++;
	}
	if (!opened)
		return lk__fail(-EOPNOTSUPP, "no CPU would take a watchpoint on thread %d",
				(int)tid);
	return 0;
}

static bool seen_before(const pid_t *seen, size_t n, pid_t tid)
{
	for (size_t i = 0; i < n; i++)
		if (seen[i] == tid)
			return true;
	return false;
}

/* Every thread of the process, scanning until a scan finds no new one (see watch.c). */
static int open_all_threads(struct lk_watch_sampler *s)
{
	char path[64];
	pid_t *seen = NULL;
	size_t n = 0, cap = 0;
	bool found;
	int err = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)s->pid);
	do {
		DIR *dir = opendir(path);
		struct dirent *de;

		found = false;
		if (!dir) {
			err = errno == ENOENT ?
				      lk__fail(-ESRCH, "no process %d", (int)s->pid) :
				      lk__fail(-errno, "cannot list %s: %s", path, strerror(errno));
			break;
		}
		while (!err && (de = readdir(dir))) {
			pid_t tid = (pid_t)atoi(de->d_name);

			if (tid <= 0 || seen_before(seen, n, tid))
				continue;
			if (n == cap) {
				pid_t *p = realloc(seen, (cap = cap ? cap * 2 : 64) * sizeof(*p));

				if (!p) {
					err = lk__fail(-ENOMEM, "out of memory");
					break;
				}
				seen = p;
			}
			seen[n++] = tid;
			found = true;
			err = open_thread(s, tid);
			if (err == -ESRCH)
				err = 0; /* the thread exited meanwhile */
		}
		closedir(dir);
	} while (!err && found);
	free(seen);
	if (!err && !s->nfds)
		err = lk__fail(-ESRCH, "no process %d (or it has no threads left)", (int)s->pid);
	return err;
}

LK_API int lk_watch_sampler_open(struct lk_watch_sampler **out, pid_t pid, uint64_t addr,
				 size_t len, unsigned int flags)
{
	struct lk_watch_sampler *s;
	unsigned int access = flags & LK__WATCH_ACCESS_MASK;
	int err;

	if (!out || pid <= 0)
		return lk__fail(-EINVAL, "lk_watch_sampler_open(): out is NULL or pid %d invalid",
				(int)pid);
	*out = NULL;
	if ((flags & ~LK__WATCH_ACCESS_MASK) ||
	    (access != LK_WATCH_WRITE && access != LK_WATCH_READWRITE && access != LK_WATCH_EXEC))
		return lk__fail(-EINVAL,
				"lk_watch_sampler_open() takes exactly one of LK_WATCH_WRITE, "
				"LK_WATCH_READWRITE and LK_WATCH_EXEC (got %#x)",
				flags);
	s = calloc(1, sizeof(*s));
	if (!s)
		return lk__fail(-ENOMEM, "out of memory");
	s->pid = pid;
	s->access = access;
	s->len = len;
	s->pidfd = -1;
	s->value_readable = true;
	err = lk__watch_check((uintptr_t)addr, len, access, &s->bp);
	if (err)
		goto fail;
	s->ncpus = (unsigned int)get_nprocs_conf();
	s->page_size = (size_t)sysconf(_SC_PAGESIZE);
	s->data_pages = pick_data_pages(s->ncpus, s->page_size);
	s->rings = calloc(s->ncpus, sizeof(*s->rings));
	if (!s->rings) {
		err = lk__fail(-ENOMEM, "out of memory");
		goto fail;
	}
	for (unsigned int i = 0; i < s->ncpus; i++)
		s->rings[i].fd = -1;
#ifdef SYS_pidfd_open
	s->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
#endif
	err = open_all_threads(s);
	if (err)
		goto fail;
	*out = s;
	return 0;
fail:
	lk_watch_sampler_close(s);
	return err;
}

LK_API void lk_watch_sampler_close(struct lk_watch_sampler *s)
{
	if (!s)
		return;
	for (unsigned int i = 0; s->rings && i < s->ncpus; i++)
		if (s->rings[i].page)
			munmap(s->rings[i].page, s->rings[i].data_size + s->page_size);
	for (size_t i = 0; i < s->nfds; i++)
		close(s->fds[i]);
	if (s->pidfd >= 0)
		close(s->pidfd);
	free(s->rings);
	free(s->fds);
	free(s->batch);
	free(s);
}

LK_API uint64_t lk_watch_sampler_lost(const struct lk_watch_sampler *s)
{
	return s ? s->lost : 0;
}

LK_API int lk_watch_sampler_stop(struct lk_watch_sampler *s)
{
	if (!s)
		return lk__fail(-EINVAL, "lk_watch_sampler_stop(): NULL sampler");
	/*
	 * Disabling an event disables the copies its thread's children inherited, and returns only
	 * once no CPU runs it: a hit being recorded on another CPU has finished.
	 */
	for (size_t i = 0; i < s->nfds; i++)
		if (ioctl(s->fds[i], PERF_EVENT_IOC_DISABLE, 0) != 0)
			return lk__fail(-errno, "PERF_EVENT_IOC_DISABLE failed: %s",
					strerror(errno));
	return 0;
}

LK_API int lk_watch_sampler_counted(const struct lk_watch_sampler *s, uint64_t *count)
{
	uint64_t sum = 0;

	if (!s || !count)
		return lk__fail(-EINVAL, "lk_watch_sampler_counted(): NULL argument");
	for (size_t i = 0; i < s->nfds; i++) {
		int err = lk__perf_add_count(s->fds[i], &sum);

		if (err)
			return err;
	}
	*count = sum;
	return 0;
}

/* Copy len bytes at offset off of r's data area (which wraps) to dst. */
static void ring_copy(const struct ring *r, uint64_t off, void *dst, size_t len)
{
	const char *data = (const char *)r->page + r->page->data_offset;
	size_t at = (size_t)(off % r->data_size), first = r->data_size - at;

	if (first >= len) {
		memcpy(dst, data + at, len);
	} else {
		memcpy(dst, data + at, first);
		memcpy((char *)dst + first, data, len - first);
	}
}

static int batch_push(struct lk_watch_sampler *s, size_t *n, const struct lk_watch_sample *sample)
{
	if (*n == s->batch_cap) {
		size_t cap = s->batch_cap ? s->batch_cap * 2 : 256;
		struct lk_watch_sample *p = realloc(s->batch, cap * sizeof(*p));

		if (!p)
			return lk__fail(-ENOMEM, "out of memory");
		s->batch = p;
		s->batch_cap = cap;
	}
	s->batch[(*n)++] = *sample;
	return 0;
}

/* PERF_RECORD_SAMPLE with SAMPLE_TYPE: ip, pid/tid, time, addr, in that order. */
struct sample_record {
	struct perf_event_header header;
	uint64_t ip;
	uint32_t pid, tid;
	uint64_t time;
	uint64_t addr;
};

static void read_value(struct lk_watch_sampler *s, struct lk_watch_sample *sample)
{
	union {
		uint8_t u8;
		uint16_t u16;
		uint32_t u32;
		uint64_t u64;
	} raw = { .u64 = 0 };
	struct iovec local = { &raw, s->len }, remote = { (void *)(uintptr_t)sample->addr, s->len };

	if (!s->value_readable || s->access == LK_WATCH_EXEC || s->len > sizeof(raw))
		return;
	if (process_vm_readv(s->pid, &local, 1, &remote, 1, 0) != (ssize_t)s->len) {
		if (errno == EPERM || errno == EACCES || errno == ENOSYS)
			s->value_readable = false; /* ptrace rights: do not ask again */
		return;
	}
	switch (s->len) { /* the integer as the CPU loads it, whatever its byte order */
	case 1:
		sample->value = raw.u8;
		break;
	case 2:
		sample->value = raw.u16;
		break;
	case 4:
		sample->value = raw.u32;
		break;
	default:
		sample->value = raw.u64;
		break;
	}
	sample->has_value = true;
}

/* Move every record of ring r into the batch. */
static int drain(struct lk_watch_sampler *s, struct ring *r, size_t *n)
{
	uint64_t head = __atomic_load_n(&r->page->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = r->page->data_tail;
	int err = 0;

	while (!err && tail < head) {
		struct sample_record rec;
		struct perf_event_header h;

		ring_copy(r, tail, &h, sizeof(h));
		if (h.size < sizeof(h))
			break; /* corrupt: drop what is left */
		if (h.type == PERF_RECORD_SAMPLE && h.size >= sizeof(rec)) {
			struct lk_watch_sample sample = { 0 };

			ring_copy(r, tail, &rec, sizeof(rec));
			sample.time_ns = rec.time;
			sample.pid = (pid_t)rec.pid;
			sample.tid = (pid_t)rec.tid;
			sample.ip = rec.ip;
			sample.addr = rec.addr;
			read_value(s, &sample);
			err = batch_push(s, n, &sample);
		} else if (h.type == PERF_RECORD_LOST) {
			struct {
				struct perf_event_header h;
				uint64_t id, lost;
			} lost;

			ring_copy(r, tail, &lost, sizeof(lost));
			s->lost += lost.lost;
		}
		tail += h.size;
	}
	__atomic_store_n(&r->page->data_tail, tail, __ATOMIC_RELEASE);
	return err;
}

static int by_time(const void *a, const void *b)
{
	uint64_t x = ((const struct lk_watch_sample *)a)->time_ns;
	uint64_t y = ((const struct lk_watch_sample *)b)->time_ns;

	return (x > y) - (x < y);
}

static bool process_gone(struct lk_watch_sampler *s)
{
	if (s->exited)
		return true;
	if (s->pidfd < 0 && kill(s->pid, 0) != 0 && errno == ESRCH)
		s->exited = true;
	return s->exited;
}

/* Wait for any ring (or the process's exit). Returns 0, or -EINTR. */
static int wait_ready(struct lk_watch_sampler *s, int timeout_ms)
{
	struct pollfd pfd[s->ncpus + 1];
	nfds_t n = 0;

	for (unsigned int i = 0; i < s->ncpus; i++)
		if (s->rings[i].fd >= 0)
			pfd[n++] = (struct pollfd){ .fd = s->rings[i].fd, .events = POLLIN };
	if (s->pidfd >= 0 && !s->exited)
		pfd[n++] = (struct pollfd){ .fd = s->pidfd, .events = POLLIN };
	if (poll(pfd, n, timeout_ms) < 0)
		return errno == EINTR ? -EINTR : lk__fail(-errno, "poll: %s", strerror(errno));
	if (s->pidfd >= 0 && (pfd[n - 1].revents & POLLIN))
		s->exited = true;
	return 0;
}

LK_API int lk_watch_sampler_read(struct lk_watch_sampler *s, int timeout_ms, lk_watch_sample_fn fn,
				 void *arg)
{
	size_t n = 0;
	int err;

	if (!s || !fn)
		return lk__fail(-EINVAL, "lk_watch_sampler_read(): NULL sampler or callback");
	if (!process_gone(s)) {
		err = wait_ready(s, timeout_ms);
		if (err)
			return err;
	}
	for (unsigned int i = 0; i < s->ncpus; i++) {
		if (s->rings[i].fd < 0)
			continue;
		err = drain(s, &s->rings[i], &n);
		if (err)
			return err;
	}
	if (!n && process_gone(s))
		return lk__fail(-ESRCH, "process %d has exited", (int)s->pid);
	if (n > 1)
		qsort(s->batch, n, sizeof(*s->batch), by_time);
	for (size_t i = 0; i < n; i++)
		fn(&s->batch[i], arg);
	return (int)(n > INT32_MAX ? INT32_MAX : n);
}
