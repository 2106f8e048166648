// SPDX-License-Identifier: MIT
/*
 * LK_COUNTERS_PER_THREAD: each thread's own counts in a set that its threads and children inherit.
 *
 * Inherited counters add up in the kernel; what is left of each thread is a report the kernel
 * writes as the thread exits when the counters have inherit_stat: a PERF_RECORD_READ with its pid,
 * tid and counts, written into the ring buffer of the counters it inherited from. The kernel only
 * lets per-CPU counters of a task have a ring buffer when they are inherited, so the set is opened
 * once per CPU (pid, cpu) and each CPU's counters report into that CPU's ring. The first counter of
 * each CPU also tracks tasks (PERF_RECORD_FORK, _EXIT, _COMM) so that threads have names.
 *
 * One thread never reports: at a context switch between two threads with equivalent inherited
 * contexts the kernel swaps the contexts ("perf_counter: optimize context switch between
 * identical inherited contexts"), and with inherit_stat it swaps their counts too, so the
 * original counters end up with whichever thread holds them, and only copies report.
 * Its counts are the totals minus the reports. When every other known thread has exited, it is the
 * one known thread without a report; otherwise "the rest" is the threads still running.
 *
 * Per-CPU counters of a task show time_enabled advancing while the task runs anywhere and
 * time_running only while it runs on that CPU: summed over CPUs, running adds up and enabled is the
 * same on each (the maximum), which keeps the multiplexing estimate right.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/error.h"
#include "internal/proc.h"
#include "counter/counter_internal.h"

/* Ring data pages per CPU, tried in order: 64 pages hold about 1,300 thread exits of 4 events. */
static const size_t ring_pages[] = { 64, 16, 4, 1 };

int lk__online_cpus(int **cpus)
{
	FILE *f = fopen("/sys/devices/system/cpu/online", "re");
	int n = 0, cap = 64, lo, hi;
	char sep;

	*cpus = malloc((size_t)cap * sizeof(int));
	if (!*cpus)
		return lk__fail(-ENOMEM, "out of memory");
	if (!f) {
		/* No sysfs: assume CPUs 0..n-1. */
		long conf = sysconf(_SC_NPROCESSORS_CONF);

		for (lo = 0; lo < conf && lo < cap; lo++)
			(*cpus)[n++] = lo;
		return n;
	}
	/* "0-3,8-11" */
	while (fscanf(f, "%d", &lo) == 1) {
		hi = lo;
		sep = (char)fgetc(f);
		if (sep == '-') {
			if (fscanf(f, "%d", &hi) != 1)
				break;
			sep = (char)fgetc(f);
		}
		for (int cpu = lo; cpu <= hi; cpu++) {
			if (n == cap) {
				int *grown = realloc(*cpus, (size_t)(cap *= 2) * sizeof(int));

				if (!grown) {
					fclose(f);
					return lk__fail(-ENOMEM, "out of memory");
				}
				*cpus = grown;
			}
			(*cpus)[n++] = cpu;
		}
		if (sep != ',')
			break;
	}
	fclose(f);
	return n > 0 ? n : lk__fail(-EIO, "cannot tell which CPUs are online");
}

/* ---- the thread table ---- */

static size_t hash_slot(const struct lk__thread_table *tt, pid_t tid)
{
	return ((size_t)tid * 2654435761u) & (tt->hash_size - 1);
}

static struct lk__thread *find_thread(struct lk__thread_table *tt, pid_t tid)
{
	if (!tt->hash_size)
		return NULL;
	for (size_t s = hash_slot(tt, tid);; s = (s + 1) & (tt->hash_size - 1)) {
		if (tt->hash[s] == 0)
			return NULL;
		if (tt->v[tt->hash[s] - 1].tid == tid)
			return &tt->v[tt->hash[s] - 1];
	}
}

static void hash_insert(struct lk__thread_table *tt, size_t index)
{
	size_t s = hash_slot(tt, tt->v[index].tid);

	while (tt->hash[s] && tt->v[tt->hash[s] - 1].tid != tt->v[index].tid)
		s = (s + 1) & (tt->hash_size - 1);
	tt->hash[s] = index + 1;
}

static int rehash(struct lk__thread_table *tt, size_t size)
{
	size_t *hash = calloc(size, sizeof(*hash));

	if (!hash)
		return -ENOMEM;
	free(tt->hash);
	tt->hash = hash;
	tt->hash_size = size;
	for (size_t i = 0; i < tt->n; i++)
		hash_insert(tt, i);
	return 0;
}

static struct lk__thread *add_thread(struct lk_counters *c, pid_t pid, pid_t tid)
{
	struct lk__thread_table *tt = &c->threads;
	struct lk__thread *th;

	if (tt->n == tt->cap) {
		size_t cap = tt->cap ? 2 * tt->cap : 16;
		struct lk__thread *v = realloc(tt->v, cap * sizeof(*v));
		size_t *order;

		if (!v)
			return NULL;
		tt->v = v;
		order = realloc(tt->order, cap * sizeof(*order));
		if (!order)
			return NULL;
		tt->order = order;
		tt->cap = cap;
	}
	th = &tt->v[tt->n];
	memset(th, 0, sizeof(*th));
	th->pid = pid;
	th->tid = tid;
	th->value = calloc(3 * c->nevents, sizeof(uint64_t));
	if (!th->value)
		return NULL;
	th->enabled = th->value + c->nevents;
	th->running = th->enabled + c->nevents;
	/* Keep the hash at most half full. */
	if ((tt->n + 1) * 2 > tt->hash_size && rehash(tt, tt->hash_size ? 2 * tt->hash_size : 64)) {
		free(th->value);
		return NULL;
	}
	hash_insert(tt, tt->n++);
	return th;
}

static struct lk__thread *thread_for(struct lk_counters *c, pid_t pid, pid_t tid)
{
	struct lk__thread *th = find_thread(&c->threads, tid);

	return th ? th : add_thread(c, pid, tid);
}

int lk__threads_seed(struct lk_counters *c, pid_t pid)
{
	struct lk__thread *th;

	if (pid == 0)
		pid = getpid(); /* the calling thread of a set opened with pid 0 */
	th = add_thread(c, pid, pid);
	if (!th)
		return lk__fail(-ENOMEM, "out of memory");
	lk__proc_comm(pid, pid, th->comm, sizeof(th->comm));
	return 0;
}

/* ---- per-CPU counters and their rings ---- */

int lk__threads_setup_task(struct lk_counters *c, struct lk__task *t)
{
	int err = 0;

	t->ids = calloc(c->nevents, sizeof(*t->ids));
	if (!t->ids)
		return lk__fail(-ENOMEM, "out of memory");
	for (size_t i = 0; i < c->nevents; i++)
		if (t->fds[i] >= 0 && ioctl(t->fds[i], PERF_EVENT_IOC_ID, &t->ids[i]) != 0)
			return lk__fail(-errno, "cannot learn a counter's id: %s", strerror(errno));
	if (t->ring_fd < 0)
		return 0; /* nothing opened on this CPU */
	for (size_t k = 0; k < sizeof(ring_pages) / sizeof(ring_pages[0]); k++) {
		size_t size = (1 + ring_pages[k]) * c->page_size;
		void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, t->ring_fd, 0);

		if (p != MAP_FAILED) {
			t->ring = p;
			t->ring_size = size;
			break;
		}
		err = -errno;
	}
	if (!t->ring)
		return lk__fail(err,
				"cannot map the per-thread report buffer of CPU %d (%s): the "
				"locked-memory allowance for perf is used up; raise "
				"kernel.perf_event_mlock_kb or `ulimit -l`",
				t->cpu, strerror(-err));
	for (size_t i = 0; i < c->nevents; i++)
		if (t->fds[i] >= 0 && t->fds[i] != t->ring_fd &&
		    ioctl(t->fds[i], PERF_EVENT_IOC_SET_OUTPUT, t->ring_fd) != 0)
			return lk__fail(-errno, "cannot share the report buffer of CPU %d: %s",
					t->cpu, strerror(errno));
	return 0;
}

void lk__threads_teardown(struct lk_counters *c)
{
	for (size_t i = 0; i < c->threads.n; i++)
		free(c->threads.v[i].value);
	free(c->threads.v);
	free(c->threads.order);
	free(c->threads.hash);
	memset(&c->threads, 0, sizeof(c->threads));
}

/* ---- reports ---- */

struct record_ids {
	uint32_t pid, tid;
};

static int event_of(const struct lk_counters *c, const struct lk__task *t, uint64_t id)
{
	for (size_t i = 0; i < c->nevents; i++)
		if (t->fds[i] >= 0 && t->ids[i] == id)
			return (int)i;
	return -1;
}

/* PERF_RECORD_READ: { pid, tid, value, time_enabled, time_running, id } */
static void on_read(struct lk_counters *c, const struct lk__task *t, const char *body, size_t len)
{
	struct record_ids who;
	struct lk__thread *th;
	uint64_t v[4];
	int i;

	if (len < sizeof(who) + sizeof(v))
		return;
	memcpy(&who, body, sizeof(who));
	memcpy(v, body + sizeof(who), sizeof(v));
	i = event_of(c, t, v[3]);
	th = thread_for(c, (pid_t)who.pid, (pid_t)who.tid);
	if (i < 0 || !th)
		return;
	th->value[i] += v[0];
	th->enabled[i] = v[1] > th->enabled[i] ? v[1] : th->enabled[i];
	th->running[i] += v[2];
	if (!th->reported) {
		th->reported = true;
		th->exited = true;
		c->threads.order[c->threads.nreported++] = (size_t)(th - c->threads.v);
	}
}

/* PERF_RECORD_FORK / _EXIT: { pid, ppid, tid, ptid, time } */
static void on_task(struct lk_counters *c, bool fork, const char *body, size_t len)
{
	uint32_t f[4];
	struct lk__thread *th, *parent;

	if (len < sizeof(f))
		return;
	memcpy(f, body, sizeof(f));
	if (fork) {
		/*
		 * The rings are drained one CPU after the other, so a thread's report may come
		 * before its birth. (A tid the kernel reuses within one count merges with the old
		 * thread; with pid_max at 4 million that takes a very busy machine.)
		 */
		th = thread_for(c, (pid_t)f[0], (pid_t)f[2]);
		if (th)
			th->ptid = (pid_t)f[3];
		parent = find_thread(&c->threads, (pid_t)f[3]);
		if (th && parent && !th->comm[0])
			memcpy(th->comm, parent->comm, sizeof(th->comm));
	} else if ((th = find_thread(&c->threads, (pid_t)f[2]))) {
		th->exited = true;
	}
}

/* PERF_RECORD_COMM: { pid, tid, comm[] } */
static void on_comm(struct lk_counters *c, const char *body, size_t len)
{
	struct record_ids who;
	struct lk__thread *th;

	if (len <= sizeof(who))
		return;
	memcpy(&who, body, sizeof(who));
	th = thread_for(c, (pid_t)who.pid, (pid_t)who.tid);
	if (th)
		snprintf(th->comm, sizeof(th->comm), "%.*s", (int)(len - sizeof(who)),
			 body + sizeof(who));
}

static void on_record(struct lk_counters *c, const struct lk__task *t, const char *rec, size_t size)
{
	struct perf_event_header h;
	const char *body = rec + sizeof(h);
	size_t len = size - sizeof(h);

	memcpy(&h, rec, sizeof(h));
	switch (h.type) {
	case PERF_RECORD_READ:
		on_read(c, t, body, len);
		break;
	case PERF_RECORD_FORK:
	case PERF_RECORD_EXIT:
		on_task(c, h.type == PERF_RECORD_FORK, body, len);
		break;
	case PERF_RECORD_COMM:
		on_comm(c, body, len);
		break;
	case PERF_RECORD_LOST:
		if (len >= 16) {
			uint64_t lost;

			memcpy(&lost, body + 8, sizeof(lost));
			c->threads.lost += lost;
		}
		break;
	}
}

/*
 * A thread created without an exec keeps its creator's name, but its FORK record may be read
 * before the creator's COMM record (another CPU's ring): once every ring is drained, name it
 * after its creator, walking up as far as a name is known.
 */
static void inherit_names(struct lk_counters *c)
{
	for (size_t i = 0; i < c->threads.n; i++) {
		struct lk__thread *th = &c->threads.v[i];
		const struct lk__thread *up = th;

		for (int depth = 0; !th->comm[0] && up && up->ptid && depth < 64; depth++) {
			up = find_thread(&c->threads, up->ptid);
			if (up && up->comm[0])
				memcpy(th->comm, up->comm, sizeof(th->comm));
		}
	}
}

static void drain(struct lk_counters *c, const struct lk__task *t)
{
	struct perf_event_mmap_page *pc = t->ring;
	const char *data = (const char *)pc + c->page_size;
	size_t size = t->ring_size - c->page_size;
	/* data_head is written by the kernel: read it before the data (acquire). */
	uint64_t head = __atomic_load_n(&pc->data_head, __ATOMIC_ACQUIRE), tail = pc->data_tail;
	char rec[1024];

	while (tail < head) {
		struct perf_event_header h;
		size_t at = (size_t)(tail & (size - 1)), first;

		memcpy(&h, data + at, sizeof(h)); /* 8-byte records never split a header */
		if (h.size < sizeof(h) || h.size > head - tail)
			break; /* cannot happen unless the kernel and we disagree: stop reading */
		if (h.size <= sizeof(rec)) {
			first = size - at < h.size ? size - at : h.size;
			memcpy(rec, data + at, first);
			memcpy(rec + first, data, h.size - first);
			on_record(c, t, rec, h.size);
		}
		tail += h.size;
	}
	/* Hand the space back only after the records are copied (release). */
	__atomic_store_n(&pc->data_tail, tail, __ATOMIC_RELEASE);
}

LK_API int lk_counters_poll(struct lk_counters *c)
{
	if (!c)
		return -EINVAL;
	if (!c->per_cpu)
		return 0;
	/* The rings are not mapped in a forked child (perf's mappings are VM_DONTCOPY). */
	if (c->fork_generation != __atomic_load_n(&lk__counter_fork_generation, __ATOMIC_RELAXED))
		return -ECHILD;
	for (size_t t = 0; t < c->ntasks; t++)
		if (c->tasks[t].ring)
			drain(c, &c->tasks[t]);
	inherit_names(c);
	return c->threads.lost > INT32_MAX ? INT32_MAX : (int)c->threads.lost;
}

LK_API size_t lk_counters_poll_fds(const struct lk_counters *c, int *fds, size_t n)
{
	size_t k = 0;

	if (!c || !c->per_cpu)
		return 0;
	for (size_t t = 0; t < c->ntasks && k < n; t++)
		if (c->tasks[t].ring)
			fds[k++] = c->tasks[t].ring_fd;
	return k;
}

/* ---- reading ---- */

int lk__read_per_cpu(struct lk_counters *c, struct lk_counter_value *values, size_t m)
{
	for (size_t t = 0; t < c->ntasks; t++) {
		for (size_t i = 0; i < m; i++) {
			uint64_t buf[4]; /* value, enabled, running, id */
			ssize_t got;

			if (c->tasks[t].fds[i] < 0)
				continue;
			do
				got = read(c->tasks[t].fds[i], buf, sizeof(buf));
			while (got < 0 && errno == EINTR);
			if (got != (ssize_t)sizeof(buf))
				return lk__fail(-EIO, "reading the counters of CPU %d failed: %s",
						c->tasks[t].cpu,
						got < 0 ? strerror(errno) : "short read");
			values[i].value += buf[0];
			if (buf[1] > values[i].time_enabled)
				values[i].time_enabled = buf[1];
			values[i].time_running += buf[2];
		}
	}
	for (size_t i = 0; i < m; i++)
		values[i].scaled =
			lk__scale(values[i].value, values[i].time_enabled, values[i].time_running);
	return 0;
}

/* Entry 0's owner: the one known thread without a report, if only one is left. */
static const struct lk__thread *the_rest(const struct lk_counters *c)
{
	const struct lk__thread *one = NULL;

	for (size_t i = 0; i < c->threads.n; i++) {
		if (c->threads.v[i].reported)
			continue;
		if (one)
			return NULL;
		one = &c->threads.v[i];
	}
	return one;
}

static void describe(const struct lk__thread *th, struct lk_counter_thread *who)
{
	memset(who, 0, sizeof(*who));
	if (!th)
		return;
	who->pid = th->pid;
	who->tid = th->tid;
	who->exited = th->exited;
	memcpy(who->comm, th->comm, sizeof(who->comm));
	who->comm[sizeof(who->comm) - 1] = '\0';
	if (!th->exited)
		lk__proc_comm(th->pid, th->tid, who->comm, sizeof(who->comm));
}

int lk__read_thread_per_cpu(struct lk_counters *c, size_t t, struct lk_counter_thread *who,
			    struct lk_counter_value *values, size_t n)
{
	size_t m = n < c->nevents ? n : c->nevents;
	const struct lk__thread *th;
	int err;

	if (t > c->threads.nreported)
		return -ERANGE;
	if (m)
		memset(values, 0, m * sizeof(*values));
	if (t > 0) {
		th = &c->threads.v[c->threads.order[t - 1]];
		for (size_t i = 0; i < m; i++) {
			values[i].value = th->value[i];
			values[i].time_enabled = th->enabled[i];
			values[i].time_running = th->running[i];
			values[i].scaled = lk__scale(th->value[i], th->enabled[i], th->running[i]);
		}
		if (who)
			describe(th, who);
		return (int)c->nevents;
	}
	/* The rest: the totals less every report. */
	err = lk__read_per_cpu(c, values, m);
	if (err)
		return err;
	for (size_t r = 0; r < c->threads.nreported; r++) {
		th = &c->threads.v[c->threads.order[r]];
		for (size_t i = 0; i < m; i++) {
			values[i].value -= th->value[i] < values[i].value ? th->value[i] :
									    values[i].value;
			values[i].time_enabled -= th->enabled[i] < values[i].time_enabled ?
							  th->enabled[i] :
							  values[i].time_enabled;
			values[i].time_running -= th->running[i] < values[i].time_running ?
							  th->running[i] :
							  values[i].time_running;
		}
	}
	for (size_t i = 0; i < m; i++)
		values[i].scaled =
			lk__scale(values[i].value, values[i].time_enabled, values[i].time_running);
	if (who)
		describe(the_rest(c), who);
	return (int)c->nevents;
}
