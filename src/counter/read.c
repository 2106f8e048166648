// SPDX-License-Identifier: MIT
/*
 * Reading a set: one read() per group and thread (PERF_FORMAT_GROUP), or rdpmc where the fast path
 * allows, and the multiplexing estimate. Nothing here locks or allocates: the read buffer is on the
 * stack, bounded by LK__GROUP_MAX.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/error.h"
#include "internal/proc.h"
#include "counter/counter_internal.h"

LK_API uint64_t lk_counter_scale(uint64_t value, uint64_t enabled, uint64_t running)
{
	return lk__scale(value, enabled, running);
}

int lk__group_accumulate(const struct lk_counters *c, const struct lk__group *g,
			 const uint64_t *buf, size_t words, struct lk_counter_value *values,
			 size_t n)
{
	uint64_t nr, enabled, running;
	size_t k = 0;

	/* { nr, time_enabled, time_running, value[nr] } */
	if (words < 3)
		return -EIO;
	nr = buf[0];
	enabled = buf[1];
	running = buf[2];
	if (nr != g->nopen || words < 3 + nr)
		return -EIO;
	for (size_t i = g->first; i < g->first + g->n; i++) {
		uint64_t value;

		if (!c->events[i].opened)
			continue;
		value = buf[3 + k++];
		if (i >= n)
			continue;
		values[i].value += value;
		values[i].time_enabled += enabled;
		values[i].time_running += running;
		values[i].scaled += lk__scale(value, enabled, running);
	}
	return 0;
}

static int read_group(const struct lk_counters *c, const struct lk__task *t,
		      const struct lk__group *g, struct lk_counter_value *values, size_t n)
{
	uint64_t buf[3 + LK__GROUP_MAX];
	int fd = -1;
	ssize_t got;

	for (size_t i = g->first; i < g->first + g->n && fd < 0; i++)
		fd = t->fds[i];
	if (fd < 0)
		return 0;
	do
		got = read(fd, buf, (3 + g->nopen) * sizeof(uint64_t));
	while (got < 0 && errno == EINTR);
	if (got < 0)
		return lk__fail(-EIO, "reading counters of thread %d failed: %s", (int)t->tid,
				strerror(errno));
	if (lk__group_accumulate(c, g, buf, (size_t)got / sizeof(uint64_t), values, n) != 0)
		return lk__fail(-EIO,
				"reading counters of thread %d: the kernel returned %zd bytes for "
				"a group of %zu",
				(int)t->tid, got, g->nopen);
	return 0;
}

/* Add thread t's readings to values[0..m). */
static int read_task_add(struct lk_counters *c, const struct lk__task *t, bool fast,
			 struct lk_counter_value *values, size_t m)
{
	for (unsigned gi = 0; gi < c->ngroups; gi++) {
		const struct lk__group *g = &c->groups[gi];
		int err;

		if (g->nopen == 0)
			continue;
		if (fast && g->fastpath && lk__fastpath_read(c, g, values, m))
			continue;
		err = read_group(c, t, g, values, m);
		if (err)
			return err;
	}
	return 0;
}

LK_API int lk_counters_read(struct lk_counters *c, struct lk_counter_value *values, size_t n)
{
	size_t m;

	if (!c || (!values && n))
		return -EINVAL;
	m = n < c->nevents ? n : c->nevents;
	if (m)
		memset(values, 0, m * sizeof(*values));
	if (c->per_cpu) {
		int err = lk__read_per_cpu(c, values, m);

		return err ? err : (int)c->nevents;
	}
	/* Several threads (LK_COUNTERS_PROCESS): the sum of their readings. */
	for (size_t t = 0; t < c->ntasks; t++) {
		int err = read_task_add(c, &c->tasks[t], c->self, values, m);

		if (err)
			return err;
	}
	return (int)c->nevents;
}

LK_API int lk_counters_read_thread(struct lk_counters *c, size_t t, struct lk_counter_thread *who,
				   struct lk_counter_value *values, size_t n)
{
	const struct lk__task *task;
	size_t m;
	int err;

	if (!c || (!values && n))
		return -EINVAL;
	if (c->per_cpu)
		return lk__read_thread_per_cpu(c, t, who, values, n);
	if (t >= lk_counters_nthreads(c))
		return -ERANGE;
	task = &c->tasks[t];
	if (who) {
		/* The thread's process: for a tid other than a process's main thread, /proc/TID
		 * still answers (hidden entries), which is all lk__proc_comm() needs. */
		memset(who, 0, sizeof(*who));
		who->tid = task->tid ? task->tid : (pid_t)syscall(SYS_gettid);
		who->pid = c->flags & LK_COUNTERS_PROCESS ? (c->pid ? c->pid : getpid()) : who->tid;
		lk__proc_comm(who->pid, who->tid, who->comm, sizeof(who->comm));
		who->exited = who->comm[0] == '\0';
	}
	if (!(c->flags & LK_COUNTERS_PROCESS))
		return lk_counters_read(c, values, n); /* the set itself */
	m = n < c->nevents ? n : c->nevents;
	if (m)
		memset(values, 0, m * sizeof(*values));
	err = read_task_add(c, task, false, values, m);
	return err ? err : (int)c->nevents;
}
