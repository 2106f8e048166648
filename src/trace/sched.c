// SPDX-License-Identifier: MIT
/*
 * Off-CPU time on the trace's timeline (LK_TRACE_SCHED): every context switch of the traced
 * process's threads, as lowkey:sched_out { cpu, preempted } and lowkey:sched_in { cpu } events
 * in a stream of their own per thread (stream-TID-sched, stream class 1).
 *
 * The kernel writes them: a software dummy event with attr.context_switch makes it emit a
 * PERF_RECORD_SWITCH each time the thread is switched in or out, preempted or not
 * (PERF_RECORD_MISC_SWITCH_OUT_PREEMPT: still runnable, so waiting for a CPU; otherwise it
 * blocked). Unprivileged users may open it on their own threads at perf_event_paranoid 2.
 *
 * One event per CPU per thread that exists at the start, with attr.inherit (and inherit_thread,
 * Linux >= 5.13): threads created later by a covered thread are covered from their first
 * instruction, and their records go to the rings of the events they inherited. Every event of a
 * CPU writes into one ring (PERF_EVENT_IOC_SET_OUTPUT), so the memory is one ring per CPU,
 * whatever the number of threads.
 *
 * The consumer drains the rings once per pass (lk__sched_drain). A thread's records are spread
 * over the rings of the CPUs it ran on; so that each thread's stream is in time order, a pass
 * takes only records older than a cut a little before the pass began (the kernel writes a
 * record microseconds after taking its time), sorts them, and leaves the rest for the next pass.
 *
 * lowkey's own threads are left out: the consumer, and the USDT watcher (probe/sdt.c), which
 * inherits the events when a covered thread starts it (a dlopen during the trace).
 *
 * A thread's stream is closed when the kernel says it exited (attr.task: PERF_RECORD_EXIT), so
 * that a process that starts many short-lived threads does not run out of file descriptors.
 *
 * In overwrite mode (the flight recorder) nothing is written as it comes: each thread keeps its
 * newest switches in a ring of its own (buffer_size / 8 bytes, 16 a switch, 1024 switches at
 * least), the oldest overwritten, and a snapshot writes them (lk__sched_snapshot) after taking
 * what the kernel has recorded since the consumer's last pass. An exited thread's switches are
 * kept until a snapshot has written them, those of 64 exited threads at most. The consumer and
 * the snapshots take turns under the lock.
 *
 * Time: the records carry CLOCK_MONOTONIC_RAW (attr.use_clockid), the trace's events the TSC.
 * The perf mmap page's TSC conversion (cap_user_time_zero) is missing in most virtual machines,
 * so each pass takes a sync point -- a TSC read between two CLOCK_MONOTONIC_RAW reads, the
 * tightest of a few -- and a record's time is interpolated between the two sync points around
 * it (extrapolated from the last two past the latest). CLOCK_MONOTONIC_RAW is the kernel's
 * clocksource without NTP's slewing; where that clocksource is the TSC the two are linear in
 * each other, and the error is the sync points' (docs/BENCHMARKS.md, "Off-CPU").
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <lowkey/error.h>

#include "core/error.h"
#include "core/perf.h"
#include "probe/probe_internal.h"
#include "probe/sdt_internal.h"

/*
 * 512 KiB a CPU: what perf_event_mlock_kb (516 KiB a CPU by default) lets every user map without
 * touching RLIMIT_MEMLOCK, as `perf record` does; 16,000 switches between two passes of the
 * consumer, which come every 20 ms at most while switches are recorded (trace.c).
 */
#define RING_PAGES 128
#define CUT_NS 2000000 /* records younger than this at a pass wait for the next */
#define MAX_CPUS 4096
#define MAX_PACKET_SWITCHES 8192 /* 224 KiB of CTF at most */
#define MAX_EXITED_KEPT 64 /* overwrite mode: exited threads whose switches wait for a snapshot */

/* PERF_RECORD_SWITCH with sample_id_all and TID | TIME | CPU */
struct switch_record {
	struct perf_event_header header;
	uint32_t pid, tid;
	uint64_t time;
	uint32_t cpu, reserved;
};

struct cpu_ring {
	int fd; /* the event whose ring it is; -1 for a CPU that is not there */
	struct perf_event_mmap_page *page;
	uint8_t *data;
	size_t size;
};

struct sync_point {
	uint64_t tsc, raw_ns;
};

/* PERF_RECORD_EXIT (attr.task) with sample_id_all and TID | TIME | CPU */
struct exit_record {
	struct perf_event_header header;
	uint32_t pid, ppid, tid, ptid;
	uint64_t time;
	uint32_t sample_pid, sample_tid;
	uint64_t sample_time;
	uint32_t cpu, reserved;
};

#define EXITED 0xffff /* pending.misc of a thread's exit */

struct pending {
	pid_t tid;
	uint32_t cpu;
	uint64_t raw_ns;
	uint16_t misc; /* PERF_RECORD_MISC_SWITCH_OUT[_PREEMPT], 0 (in), EXITED */
};

/* Overwrite mode: a switch kept for the snapshots. */
struct kept_switch {
	uint64_t tsc;
	uint32_t cpu;
	uint16_t misc; /* as pending.misc */
};

struct sched_thread {
	pid_t tid;
	int fd; /* stream-TID-sched, opened at its first packet */
	uint64_t packets;
	uint64_t last_tsc;
	/* overwrite mode: the newest n switches, in a ring of cap ending before next */
	struct kept_switch *kept;
	size_t cap, next, n;
	uint64_t exited; /* the thread's exit, counted from 1; 0: alive */
};

struct lk__sched {
	struct cpu_ring *rings;
	int ncpus;
	int *fds; /* events of the threads beyond the first, writing to the rings */
	size_t nfds, capfds;
	pid_t *covered; /* threads given events at the start */
	size_t ncovered, capcovered;
	struct sync_point sync[2]; /* the two latest; sync[1] newest */
	int nsync;
	struct pending *batch;
	size_t nbatch, capbatch;
	struct sched_thread *threads;
	size_t nthreads, capthreads;
	uint8_t *out; /* a packet being built */
	size_t capout;
	pid_t consumer_tid;
	bool filter_pid;      /* no inherit_thread: forked children's records come too */
	pthread_mutex_t lock; /* the consumer's pass, or a snapshot */
	size_t kept_cap;      /* overwrite mode: switches kept per thread; 0: streaming */
	uint64_t exits;	      /* overwrite mode: threads seen exiting */
};

static uint64_t raw_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A TSC read between two clock reads, the tightest of 5: the TSC at the clock's midpoint. */
static struct sync_point take_sync_point(void)
{
	struct sync_point best = { 0, 0 };
	uint64_t best_width = UINT64_MAX;

	for (int i = 0; i < 5; i++) {
		uint64_t a = raw_ns(), tsc = lk__probe_tsc(), b = raw_ns();

		if (b - a < best_width) {
			best_width = b - a;
			best = (struct sync_point){ tsc, a + (b - a) / 2 };
		}
	}
	return best;
}

static void add_sync_point(struct lk__sched *s, struct sync_point p)
{
	if (s->nsync && p.raw_ns <= s->sync[1].raw_ns)
		return;
	s->sync[0] = s->sync[1];
	s->sync[1] = p;
	if (s->nsync < 2)
		s->nsync++;
}

/* The TSC at CLOCK_MONOTONIC_RAW time ns, by the sync points (see the top of this file). */
static uint64_t raw_to_tsc(const struct lk__sched *s, const struct lk__trace *t, uint64_t ns)
{
	const struct sync_point *a = &s->sync[0], *b = &s->sync[1];
	double slope;

	if (s->nsync < 2 || b->raw_ns == a->raw_ns)
		slope = (double)t->tsc_hz / 1e9;
	else
		slope = ((double)b->tsc - (double)a->tsc) / ((double)b->raw_ns - (double)a->raw_ns);
	return (uint64_t)((double)b->tsc + ((double)ns - (double)b->raw_ns) * slope);
}

/* ---- opening ---- */

static int push_fd(struct lk__sched *s, int fd)
{
	if (s->nfds == s->capfds) {
		size_t cap = s->capfds ? s->capfds * 2 : 16;
		int *grown = realloc(s->fds, cap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		s->fds = grown;
		s->capfds = cap;
	}
	s->fds[s->nfds++] = fd;
	return 0;
}

static int open_switch_event(struct lk__sched *s, pid_t tid, int cpu)
{
	struct perf_event_attr a;
	int fd;

	memset(&a, 0, sizeof(a));
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_DUMMY;
	a.context_switch = 1;
	a.task = 1; /* the threads' exits: their streams are closed then */
	a.sample_id_all = 1;
	a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU;
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	a.inherit = 1;
	a.inherit_thread = !s->filter_pid;
	a.use_clockid = 1;
	a.clockid = CLOCK_MONOTONIC_RAW;
	fd = lk__perf_open(&a, tid, cpu, -1, 0, "a context-switch event");
	if (fd == -EINVAL && !s->filter_pid) { /* before Linux 5.13: no inherit_thread */
		s->filter_pid = true;
		return open_switch_event(s, tid, cpu);
	}
	return fd;
}

/* The first thread's events own the rings; a CPU that is not there (offline) has none. */
static int open_rings(struct lk__sched *s, pid_t tid)
{
	long page = sysconf(_SC_PAGESIZE);
	int have = 0, err = 0;

	for (int cpu = 0; cpu < s->ncpus; cpu++) {
		struct cpu_ring *r = &s->rings[cpu];
		void *m;

		r->fd = open_switch_event(s, tid, cpu);
		if (r->fd == -ENODEV || r->fd == -ENXIO || r->fd == -ENOENT) {
			r->fd = -1;
			continue;
		}
		if (r->fd < 0)
			return r->fd;
		r->size = (size_t)RING_PAGES * (size_t)page;
		m = mmap(NULL, r->size + (size_t)page, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd,
			 0);
		if (m == MAP_FAILED)
			return lk__fail(-errno,
					"cannot map a context-switch ring (%zu KiB for CPU %d): %s",
					r->size >> 10, cpu, strerror(errno));
		r->page = m;
		r->data = (uint8_t *)m + page;
		have++;
	}
	if (!have)
		err = lk__fail(-ENODEV, "no CPU could take a context-switch event");
	return err;
}

/* Events for another thread, on every CPU, written to the CPUs' rings. */
static int cover_thread(struct lk__sched *s, pid_t tid)
{
	for (int cpu = 0; cpu < s->ncpus; cpu++) {
		int fd, err;

		if (s->rings[cpu].fd < 0)
			continue;
		fd = open_switch_event(s, tid, cpu);
		if (fd == -ESRCH)
			return 0; /* it exited meanwhile */
		if (fd < 0)
			return fd;
		err = push_fd(s, fd);
		if (err) {
			close(fd);
			return lk__fail(err, "out of memory");
		}
		if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, s->rings[cpu].fd) != 0)
			return lk__fail(
				-errno,
				"cannot send a thread's context switches to CPU %d's ring: %s", cpu,
				strerror(errno));
	}
	return 0;
}

static bool covered(const struct lk__sched *s, pid_t tid)
{
	for (size_t i = 0; i < s->ncovered; i++)
		if (s->covered[i] == tid)
			return true;
	return false;
}

static int mark_covered(struct lk__sched *s, pid_t tid)
{
	if (s->ncovered == s->capcovered) {
		size_t cap = s->capcovered ? s->capcovered * 2 : 16;
		pid_t *grown = realloc(s->covered, cap * sizeof(*grown));

		if (!grown)
			return lk__fail(-ENOMEM, "out of memory");
		s->covered = grown;
		s->capcovered = cap;
	}
	s->covered[s->ncovered++] = tid;
	return 0;
}

/*
 * Every thread of the process, until a pass over /proc/self/task finds none new: a thread that
 * an uncovered thread created meanwhile is found by the next pass. (One that a covered thread
 * created inherited events already and gets a second set: its records come twice, and the drain
 * drops the copies.) Returns how many were new, or -errno.
 */
static int cover_new_threads(struct lk__sched *s)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int added = 0, err = 0;

	if (!d)
		return lk__fail(-errno, "cannot list this process's threads (/proc/self/task): %s",
				strerror(errno));
	while (!err && (e = readdir(d))) {
		pid_t tid = (pid_t)atoi(e->d_name);

		if (tid <= 0 || tid == lk__sdt_watcher_tid() || covered(s, tid))
			continue; /* the USDT watcher: lowkey's, not the program's */
		err = s->ncovered == 0 ? 0 : cover_thread(s, tid);
		if (!err)
			err = mark_covered(s, tid);
		added++;
	}
	closedir(d);
	return err ? err : added;
}

static void sched_free(struct lk__sched *s, bool close_streams)
{
	long page = sysconf(_SC_PAGESIZE);

	for (size_t i = 0; i < s->nfds; i++)
		close(s->fds[i]);
	for (int cpu = 0; s->rings && cpu < s->ncpus; cpu++) {
		if (s->rings[cpu].page)
			munmap(s->rings[cpu].page, s->rings[cpu].size + (size_t)page);
		if (s->rings[cpu].fd >= 0)
			close(s->rings[cpu].fd);
	}
	for (size_t i = 0; close_streams && i < s->nthreads; i++)
		if (s->threads[i].fd >= 0)
			close(s->threads[i].fd);
	for (size_t i = 0; i < s->nthreads; i++)
		free(s->threads[i].kept);
	pthread_mutex_destroy(&s->lock);
	free(s->rings);
	free(s->fds);
	free(s->covered);
	free(s->batch);
	free(s->threads);
	free(s->out);
	free(s);
}

static int start(struct lk__sched *s)
{
	pid_t self = (pid_t)syscall(SYS_gettid);
	int err;

	s->rings = calloc((size_t)s->ncpus, sizeof(*s->rings));
	if (!s->rings)
		return lk__fail(-ENOMEM, "out of memory");
	for (int cpu = 0; cpu < s->ncpus; cpu++)
		s->rings[cpu].fd = -1;
	err = open_rings(s, self);
	if (!err)
		err = mark_covered(s, self);
	while (!err && (err = cover_new_threads(s)) > 0)
		err = 0;
	return err;
}

int lk__sched_start(struct lk__trace *t)
{
	struct lk__sched *s = calloc(1, sizeof(*s));
	long ncpus = sysconf(_SC_NPROCESSORS_CONF);
	char why[512];
	int err;

	if (!s)
		return lk__fail(-ENOMEM, "out of memory");
	s->ncpus = ncpus > 0 && ncpus <= MAX_CPUS ? (int)ncpus : 1;
	pthread_mutex_init(&s->lock, NULL);
	if (t->overwrite)
		s->kept_cap = t->config.buffer_size / 8 / sizeof(struct kept_switch) > 1024 ?
				      t->config.buffer_size / 8 / sizeof(struct kept_switch) :
				      1024;
	err = start(s);
	if (err) {
		snprintf(why, sizeof(why), "%s", lk_last_error());
		sched_free(s, true);
		return lk__fail(
			err,
			"cannot record context switches (LK_TRACE_SCHED, lowkey trace --sched): %s "
			"Without it, the rest of the trace can be recorded.",
			why);
	}
	add_sync_point(s, take_sync_point());
	t->sched_state = s;
	return 0;
}

/* ---- draining ---- */

static int push_pending(struct lk__sched *s, struct pending p)
{
	if (s->nbatch == s->capbatch) {
		size_t cap = s->capbatch ? s->capbatch * 2 : 1024;
		struct pending *grown = realloc(s->batch, cap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		s->batch = grown;
		s->capbatch = cap;
	}
	s->batch[s->nbatch++] = p;
	return 0;
}

/* Copy the record at offset `at` of a ring (it may wrap) into buf, at most len bytes. */
static void ring_copy(const struct cpu_ring *r, uint64_t at, void *buf, size_t len)
{
	size_t off = (size_t)(at % r->size), first = len < r->size - off ? len : r->size - off;

	memcpy(buf, r->data + off, first);
	memcpy((uint8_t *)buf + first, r->data, len - first);
}

/* Take the ring's records older than cut into the batch; the rest stays for the next pass. */
static void drain_ring(struct lk__trace *t, struct lk__sched *s, struct cpu_ring *r, uint64_t cut)
{
	uint64_t head = __atomic_load_n(&r->page->data_head, __ATOMIC_ACQUIRE),
		 tail = r->page->data_tail;
	pid_t pid = getpid();

	while (tail < head) {
		union {
			struct perf_event_header h;
			struct switch_record sw;
			struct exit_record exit;
			struct {
				struct perf_event_header h;
				uint64_t id, lost;
			} lost;
		} rec;
		struct perf_event_header h;

		ring_copy(r, tail, &h, sizeof(h));
		if (h.size < sizeof(h) || h.size > head - tail)
			break; /* cannot happen: the kernel writes whole records */
		memset(&rec, 0, sizeof(rec));
		ring_copy(r, tail, &rec, h.size < sizeof(rec) ? h.size : sizeof(rec));
		if (h.type == PERF_RECORD_SWITCH && h.size >= sizeof(rec.sw)) {
			struct pending p = { (pid_t)rec.sw.tid, rec.sw.cpu, rec.sw.time, h.misc };

			if (rec.sw.time >= cut)
				break;
			if ((!s->filter_pid || (pid_t)rec.sw.pid == pid) &&
			    p.tid != s->consumer_tid && p.tid != lk__sdt_watcher_tid() &&
			    push_pending(s, p) != 0)
				__atomic_fetch_add(&t->sched_lost, 1, __ATOMIC_RELAXED);
		} else if (h.type == PERF_RECORD_EXIT && h.size >= sizeof(rec.exit)) {
			struct pending p = { (pid_t)rec.exit.tid, rec.exit.cpu, rec.exit.time,
					     EXITED };

			if (rec.exit.time >= cut)
				break;
			if ((pid_t)rec.exit.pid == pid && push_pending(s, p) != 0)
				__atomic_fetch_add(&t->sched_lost, 1, __ATOMIC_RELAXED);
		} else if (h.type == PERF_RECORD_LOST && h.size >= sizeof(rec.lost)) {
			__atomic_fetch_add(&t->sched_lost, rec.lost.lost, __ATOMIC_RELAXED);
		}
		tail += h.size;
	}
	__atomic_store_n(&r->page->data_tail, tail, __ATOMIC_RELEASE);
}

static int by_thread_and_time(const void *a, const void *b)
{
	const struct pending *x = a, *y = b;

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->raw_ns != y->raw_ns)
		return x->raw_ns < y->raw_ns ? -1 : 1;
	return (x->misc > y->misc) - (x->misc < y->misc);
}

static struct sched_thread *thread_of(struct lk__sched *s, pid_t tid)
{
	for (size_t i = 0; i < s->nthreads; i++)
		if (s->threads[i].tid == tid)
			return &s->threads[i];
	if (s->nthreads == s->capthreads) {
		size_t cap = s->capthreads ? s->capthreads * 2 : 16;
		struct sched_thread *grown = realloc(s->threads, cap * sizeof(*grown));

		if (!grown)
			return NULL;
		s->threads = grown;
		s->capthreads = cap;
	}
	s->threads[s->nthreads] = (struct sched_thread){ .tid = tid, .fd = -1 };
	return &s->threads[s->nthreads++];
}

static uint8_t *out_room(struct lk__sched *s, size_t need)
{
	if (need > s->capout) {
		size_t cap = need * 2;
		uint8_t *grown = realloc(s->out, cap);

		if (!grown)
			return NULL;
		s->out = grown;
		s->capout = cap;
	}
	return s->out;
}

/* One CTF record: header (id, 48 bits of TSC), vtid, cpu[, preempted]. Its size. */
static size_t put_record(uint8_t *p, const struct pending *e, uint64_t tsc)
{
	bool out = e->misc & PERF_RECORD_MISC_SWITCH_OUT;
	uint64_t head = lk__probe_header(tsc, out ? LK__EVENT_SCHED_OUT : LK__EVENT_SCHED_IN);
	int32_t vtid = (int32_t)e->tid;
	uint64_t cpu = e->cpu, preempted = (e->misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT) ? 1 : 0;

	memcpy(p, &head, 8);
	memcpy(p + 8, &vtid, 4);
	memcpy(p + 12, &cpu, 8);
	if (!out)
		return 20;
	memcpy(p + 20, &preempted, 8);
	return 28;
}

/* Overwrite mode: keep a switch, over the thread's oldest when its ring is full. */
static void keep(struct lk__trace *t, struct lk__sched *s, struct sched_thread *th,
		 const struct pending *e, uint64_t tsc)
{
	if (!th->kept) {
		th->kept = malloc(s->kept_cap * sizeof(*th->kept));
		if (!th->kept) {
			__atomic_fetch_add(&t->sched_lost, 1, __ATOMIC_RELAXED);
			return;
		}
		th->cap = s->kept_cap;
	}
	th->kept[th->next] = (struct kept_switch){ tsc, e->cpu, e->misc };
	th->next = (th->next + 1) % th->cap;
	if (th->n < th->cap)
		th->n++;
}

/* Overwrite mode: an exited thread's switches wait for a snapshot; the oldest exits' beyond 64 go. */
static void kept_exited(struct lk__sched *s, struct sched_thread *th)
{
	th->exited = ++s->exits;
	for (size_t i = 0; i < s->nthreads; i++) {
		struct sched_thread *o = &s->threads[i];

		if (o->exited && o->exited + MAX_EXITED_KEPT <= s->exits && o->kept) {
			free(o->kept);
			o->kept = NULL;
			o->n = o->next = 0;
		}
	}
}

/*
 * The batch's records of one thread, [from, to): as one packet of its stream, or kept for the
 * snapshots in overwrite mode.
 */
static int take_thread(struct lk__trace *t, struct lk__sched *s, size_t from, size_t to)
{
	struct sched_thread *th = thread_of(s, s->batch[from].tid);
	uint64_t first = 0, last = 0, events = 0;
	uint8_t *out = s->kept_cap ? NULL : out_room(s, (to - from) * 28);
	bool exited = false;
	size_t len = 0;
	int err = 0;

	if (!th || (!s->kept_cap && !out))
		return -ENOMEM;
	for (size_t i = from; i < to; i++) {
		uint64_t tsc = raw_to_tsc(s, t, s->batch[i].raw_ns);

		if (i > from && by_thread_and_time(&s->batch[i - 1], &s->batch[i]) == 0)
			continue; /* the same switch from a thread's two sets of events */
		if (s->batch[i].misc == EXITED) {
			exited = true;
			continue;
		}
		if (tsc < th->last_tsc) { /* later than the cut allowed for: out of order */
			__atomic_fetch_add(&t->sched_lost, 1, __ATOMIC_RELAXED);
			continue;
		}
		if (!events++)
			first = tsc;
		last = th->last_tsc = tsc;
		if (s->kept_cap)
			keep(t, s, th, &s->batch[i], tsc);
		else
			len += put_record(out + len, &s->batch[i], tsc);
	}
	if (events && !s->kept_cap)
		err = lk__ctf_write_sched_packet(t, th->tid, &th->fd, &th->packets, out, len, first,
						 last);
	if (exited && s->kept_cap && !th->exited)
		kept_exited(s, th);
	if (exited &&
	    th->fd >= 0) { /* a thread's stream is closed when it exits, as its probes' is */
		close(th->fd);
		th->fd = -1;
	}
	return err;
}

/* Take what the kernel recorded up to cut. Lock held. */
static int take_records(struct lk__trace *t, struct lk__sched *s, uint64_t cut)
{
	int err = 0;

	s->nbatch = 0;
	for (int cpu = 0; cpu < s->ncpus; cpu++)
		if (s->rings[cpu].fd >= 0)
			drain_ring(t, s, &s->rings[cpu], cut);
	if (s->nbatch)
		qsort(s->batch, s->nbatch, sizeof(*s->batch), by_thread_and_time);
	for (size_t from = 0, to; !err && from < s->nbatch; from = to) {
		for (to = from + 1; to < s->nbatch && s->batch[to].tid == s->batch[from].tid; to++)
			;
		err = take_thread(t, s, from, to);
	}
	return err;
}

int lk__sched_drain(struct lk__trace *t, bool final)
{
	struct lk__sched *s = t->sched_state;
	struct sync_point now;
	int err;

	if (!s || t->error)
		return 0;
	pthread_mutex_lock(&s->lock);
	s->consumer_tid = (pid_t)syscall(SYS_gettid);
	now = take_sync_point();
	add_sync_point(s, now);
	err = take_records(t, s, final ? UINT64_MAX : now.raw_ns - CUT_NS);
	pthread_mutex_unlock(&s->lock);
	return err;
}

/* One thread's kept switches, oldest first, as packets of stream-TID-sched in out's directory. */
static int put_kept(struct lk__trace *out, struct lk__sched *s, struct sched_thread *th,
		    uint64_t *switches)
{
	size_t oldest = (th->next + th->cap - th->n) % th->cap;
	uint64_t packets = 0;
	int fd = -1, err = 0;
	uint8_t *buf = out_room(s, MAX_PACKET_SWITCHES * 28);

	if (!buf)
		return -ENOMEM;
	for (size_t done = 0; done < th->n && !err;) {
		size_t len = 0, count = th->n - done < MAX_PACKET_SWITCHES ? th->n - done :
									     MAX_PACKET_SWITCHES;
		uint64_t first = th->kept[(oldest + done) % th->cap].tsc, last = first;

		for (size_t i = 0; i < count; i++) {
			const struct kept_switch *k = &th->kept[(oldest + done + i) % th->cap];
			struct pending e = { th->tid, k->cpu, 0, k->misc };

			len += put_record(buf + len, &e, k->tsc);
			last = k->tsc;
		}
		err = lk__ctf_write_sched_packet(out, th->tid, &fd, &packets, buf, len, first,
						 last);
		done += count;
	}
	if (fd >= 0)
		close(fd);
	*switches += th->n;
	return err;
}

int lk__sched_snapshot(struct lk__trace *t, struct lk__trace *out, uint64_t *switches)
{
	struct lk__sched *s = t->sched_state;
	struct sync_point now;
	bool last;
	int err;

	*switches = 0;
	if (!s)
		return 0;
	pthread_mutex_lock(&s->lock);
	now = take_sync_point();
	add_sync_point(s, now);
	/*
	 * Records younger than the cut may still be written out of order, so a snapshot in the run
	 * leaves them to the next; the one at exit has no next, and a short program's every switch
	 * may be younger than the cut.
	 */
	last = __atomic_load_n(&t->last_snapshot, __ATOMIC_ACQUIRE);
	err = take_records(t, s, last ? UINT64_MAX : now.raw_ns - CUT_NS);
	for (size_t i = 0; i < s->nthreads && !err; i++) {
		struct sched_thread *th = &s->threads[i];

		if (!th->n)
			continue;
		err = put_kept(out, s, th, switches);
		if (!err && th->exited) { /* written: its switches need not wait any longer */
			free(th->kept);
			th->kept = NULL;
			th->n = th->next = 0;
		}
	}
	out->sched_lost = __atomic_load_n(&t->sched_lost, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&s->lock);
	return err;
}

void lk__sched_stop(struct lk__trace *t)
{
	if (t->sched_state)
		sched_free(t->sched_state, true);
	t->sched_state = NULL;
}
