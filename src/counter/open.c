// SPDX-License-Identifier: MIT
/*
 * Opening and closing a set: resolve every event, then open the kernel counters of each thread
 * the set counts, group by group.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <lowkey/error.h>

#include "core/error.h"
#include "core/perf.h"
#include "counter/counter_internal.h"
#include "counter/counter_registry.h"

#define ALL_FLAGS                                                                        \
	(LK_COUNTERS_INHERIT | LK_COUNTERS_PROCESS | LK_COUNTERS_DISABLED |              \
	 LK_COUNTERS_ENABLE_ON_EXEC | LK_COUNTERS_GROUP | LK_COUNTERS_SKIP_UNSUPPORTED | \
	 LK_COUNTERS_NO_FASTPATH | LK_COUNTERS_PER_THREAD)

/* How often to re-list a process's threads while new ones keep appearing. */
#define THREAD_SCAN_PASSES 64

static void free_event(struct lk__event *ev)
{
	free(ev->spec.text);
	free(ev->spec.base);
	free(ev->canonical);
	free(ev->unit);
	free(ev->why);
}

/* Whether this is the process that opened the set (perf's mappings are not inherited by fork). */
static bool same_process(const struct lk_counters *c)
{
	return c->fork_generation ==
	       __atomic_load_n(&lk__counter_fork_generation, __ATOMIC_RELAXED);
}

static void close_task(struct lk_counters *c, struct lk__task *t)
{
	/* In a forked child the ring was never mapped: another mapping may sit at its address. */
	if (t->ring && same_process(c))
		munmap(t->ring, t->ring_size);
	for (size_t i = 0; t->fds && i < c->nevents; i++)
		if (t->fds[i] >= 0)
			close(t->fds[i]);
	free(t->fds);
	free(t->pages);
	free(t->ids);
	t->fds = NULL;
	t->pages = NULL;
	t->ids = NULL;
	t->ring = NULL;
}

LK_API void lk_counters_close(struct lk_counters *c)
{
	if (!c)
		return;
	lk__counters_unregister(c); /* the control server reads it no more */
	lk__fastpath_teardown(c);
	lk__threads_teardown(c);
	for (size_t t = 0; t < c->ntasks; t++)
		close_task(c, &c->tasks[t]);
	for (size_t i = 0; i < c->nevents; i++)
		free_event(&c->events[i]);
	free(c->tasks);
	free(c->events);
	free(c->groups);
	free(c);
}

/* ---- building the set ---- */

static int build_events(struct lk_counters *c, struct lk__event_list *list)
{
	c->events = calloc(list->n, sizeof(*c->events));
	c->groups = calloc(list->ngroups, sizeof(*c->groups));
	if (!c->events || !c->groups)
		return lk__fail(-ENOMEM, "out of memory for %zu events", list->n);
	/* The set takes the specs' strings over. */
	for (size_t i = 0; i < list->n; i++) {
		c->events[i].spec = list->specs[i];
		list->specs[i].text = list->specs[i].base = NULL;
	}
	c->nevents = list->n;
	c->ngroups = list->ngroups;
	for (size_t i = 0; i < c->nevents; i++) {
		struct lk__group *g = &c->groups[c->events[i].spec.group];

		if (g->n == 0)
			g->first = i;
		g->n++;
	}
	for (size_t i = 0; i < c->nevents; i++) {
		int err = lk__event_resolve(&c->events[i]);

		if (err)
			return err;
	}
	return 0;
}

/* ---- opening one thread's counters ---- */

static bool may_fall_back_to_user(const struct lk__event *ev, const struct perf_event_attr *attr)
{
	return !ev->spec.has_mods && !attr->exclude_kernel && lk__perf_paranoid() > 1 &&
	       !lk__has_perfmon();
}

static int open_event(struct lk_counters *c, struct lk__event *ev, struct lk__task *t, int group_fd)
{
	struct perf_event_attr attr = ev->attr;
	bool leader = group_fd < 0;
	pid_t tid = t->tid;
	int fd;

	attr.read_format = PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED |
			   PERF_FORMAT_TOTAL_TIME_RUNNING;
	attr.inherit = !!(c->flags & LK_COUNTERS_INHERIT);
	if (c->per_cpu) {
		/* Each exiting thread reports its counts (see threads.c): read one by one. */
		attr.inherit_stat = 1;
		attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING |
				   PERF_FORMAT_ID;
		/* The CPU's first counter owns the ring and tracks the tasks. */
		attr.task = attr.comm = attr.comm_exec = t->ring_fd < 0;
	}
	attr.disabled = leader && (c->flags & (LK_COUNTERS_DISABLED | LK_COUNTERS_ENABLE_ON_EXEC));
	attr.enable_on_exec = leader && (c->flags & LK_COUNTERS_ENABLE_ON_EXEC);
	if (c->user_fallback && !ev->spec.has_mods)
		attr.exclude_kernel = attr.exclude_hv = 1;

	fd = lk__perf_open(&attr, tid, t->cpu, group_fd, 0, ev->spec.text);
	/* As perf does: without the privilege to count the kernel, count user space only. */
	if ((fd == -EACCES || fd == -EPERM) && may_fall_back_to_user(ev, &attr)) {
		attr.exclude_kernel = attr.exclude_hv = 1;
		fd = lk__perf_open(&attr, tid, t->cpu, group_fd, 0, ev->spec.text);
		if (fd >= 0)
			c->user_fallback = true;
	}
	if (fd < 0)
		return lk__explain_open_failure(fd, ev, tid);
	if (attr.exclude_kernel && !ev->attr.exclude_kernel) {
		ev->attr.exclude_kernel = ev->attr.exclude_hv = 1;
		ev->user_only_fallback = true;
	}
	if (attr.task)
		t->ring_fd = fd;
	return fd;
}

static int mark_unsupported(struct lk__event *ev, int err)
{
	const char *msg = lk_last_error();

	ev->opened = false;
	ev->error = err;
	free(ev->why);
	ev->why = strdup(msg);
	return ev->why ? 0 : lk__fail(-ENOMEM, "out of memory");
}

/*
 * Which kernel PMU counts an event. task-clock and cpu-clock are PMUs of their own, apart from the
 * other software events.
 */
static uint64_t pmu_of(const struct lk__event *ev)
{
	const struct perf_event_attr *a = &ev->attr;

	if (a->type == PERF_TYPE_SOFTWARE)
		return (uint64_t)1 << 32 | (a->config == PERF_COUNT_SW_TASK_CLOCK ? 1u :
					    a->config == PERF_COUNT_SW_CPU_CLOCK  ? 2u :
										    3u);
	if (a->type == PERF_TYPE_HARDWARE || a->type == PERF_TYPE_HW_CACHE)
		return PERF_TYPE_RAW; /* the CPU's PMU */
	return a->type;
}

/*
 * The kernel lets software events join a hardware leader's group (it moves them onto the hardware
 * PMU's context). Software events of another PMU in a group a software event leads are accepted by
 * perf_event_open() but are seldom or never scheduled in (Linux 6.18: {task-clock,page-faults}
 * reads 0 page faults), and a group read reports the leader's times for them, so nothing would
 * tell. Refuse.
 */
static int check_group_pmus(const struct lk_counters *c, const struct lk__group *g, size_t leader)
{
	const struct lk__event *lead = &c->events[leader];

	if (lead->hardware)
		return 0;
	for (size_t i = leader + 1; i < g->first + g->n; i++) {
		const struct lk__event *ev = &c->events[i];

		if (ev->opened && pmu_of(ev) != pmu_of(lead))
			return lk__fail(
				-EINVAL,
				"events '%s' and '%s' cannot share a group: they are "
				"counted by different kernel PMUs and the kernel does not reliably "
				"count such a member under a software leader. Put them in separate "
				"groups (or lead the group with a hardware event).",
				lead->spec.text, ev->spec.text);
	}
	return 0;
}

/*
 * Open every event of the set for thread tid into t->fds. The first thread decides which events
 * this machine supports (c->decided); later threads open exactly those.
 */
static int open_task(struct lk_counters *c, struct lk__task *t)
{
	t->fds = malloc(c->nevents * sizeof(*t->fds));
	if (!t->fds)
		return lk__fail(-ENOMEM, "out of memory");
	for (size_t i = 0; i < c->nevents; i++)
		t->fds[i] = -1;
	for (unsigned gi = 0; gi < c->ngroups; gi++) {
		struct lk__group *g = &c->groups[gi];
		size_t leader_index = 0;
		int leader = -1;

		for (size_t i = g->first; i < g->first + g->n; i++) {
			struct lk__event *ev = &c->events[i];
			int fd;

			if (c->decided && !ev->opened)
				continue;
			fd = open_event(c, ev, t, leader);
			if (fd < 0 && !c->decided && (c->flags & LK_COUNTERS_SKIP_UNSUPPORTED) &&
			    lk__unsupported_error(fd)) {
				int err = mark_unsupported(ev, fd);

				if (err)
					return err;
				continue;
			}
			if (fd < 0)
				return fd;
			if (!c->decided)
				ev->opened = true;
			t->fds[i] = fd;
			if (leader < 0) {
				leader = fd;
				leader_index = i;
			}
		}
		if (!c->decided && leader >= 0) {
			int err = check_group_pmus(c, g, leader_index);

			if (err)
				return err;
		}
	}
	return c->per_cpu ? lk__threads_setup_task(c, t) : 0;
}

static void forget_support(struct lk_counters *c)
{
	for (size_t i = 0; i < c->nevents; i++) {
		c->events[i].opened = false;
		c->events[i].error = 0;
		free(c->events[i].why);
		c->events[i].why = NULL;
	}
}

/* Open the set for one more thread (on one CPU, or any: -1). -ESRCH: the thread is gone
 * (nothing is left open). */
static int add_task(struct lk_counters *c, pid_t tid, int cpu)
{
	struct lk__task *t;
	int err;

	if (c->ntasks == c->cap_tasks) {
		size_t cap = c->cap_tasks ? 2 * c->cap_tasks : 4;
		struct lk__task *grown = realloc(c->tasks, cap * sizeof(*grown));

		if (!grown)
			return lk__fail(-ENOMEM, "out of memory");
		c->tasks = grown;
		c->cap_tasks = cap;
	}
	t = &c->tasks[c->ntasks];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	t->cpu = cpu;
	t->ring_fd = -1;
	err = open_task(c, t);
	if (err) {
		close_task(c, t);
		if (!c->decided)
			forget_support(c);
		return err;
	}
	c->ntasks++;
	c->decided = true;
	return 0;
}

static bool have_task(const struct lk_counters *c, pid_t tid)
{
	for (size_t i = 0; i < c->ntasks; i++)
		if (c->tasks[i].tid == tid)
			return true;
	return false;
}

/* Open the set on every thread of process pid, re-listing until no new thread shows up (threads
 * created meanwhile by a counted thread are inherited with LK_COUNTERS_INHERIT anyway). */
static int open_process(struct lk_counters *c, pid_t pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	for (int pass = 0; pass < THREAD_SCAN_PASSES; pass++) {
		DIR *d = opendir(path);
		struct dirent *e;
		bool added = false;
		int err = 0;

		if (!d)
			return lk__fail(errno == ENOENT ? -ESRCH : -errno, "no process %d (%s: %s)",
					(int)pid, path, strerror(errno));
		while (!err && (e = readdir(d))) {
			pid_t tid = (pid_t)strtol(e->d_name, NULL, 10);

			if (tid <= 0 || have_task(c, tid))
				continue;
			err = add_task(c, tid, -1);
			if (err == -ESRCH)
				err = 0; /* it exited between the listing and the open */
			else if (!err)
				added = true;
		}
		closedir(d);
		if (err)
			return err;
		if (!added)
			break;
	}
	if (c->ntasks == 0)
		return lk__fail(-ESRCH, "process %d has no threads left to count", (int)pid);
	return 0;
}

/* LK_COUNTERS_PER_THREAD: the set once per CPU, each CPU's counters reporting into its ring. */
static int open_per_cpu(struct lk_counters *c, pid_t pid)
{
	int *cpus, n = lk__online_cpus(&cpus), err = n < 0 ? n : 0;

	c->per_cpu = true;
	for (int i = 0; i < n && !err; i++)
		err = add_task(c, pid, cpus[i]);
	free(cpus);
	return err ? err : lk__threads_seed(c, pid);
}

static void finish_canonical_names(struct lk_counters *c)
{
	for (size_t i = 0; i < c->nevents; i++) {
		struct lk__event *ev = &c->events[i];
		const struct perf_event_attr *a = &ev->attr;
		char *named;

		if (!ev->canonical || !(a->exclude_user || a->exclude_kernel || a->exclude_hv))
			continue;
		if (asprintf(&named, "%s:%s%s%s", ev->canonical, a->exclude_user ? "" : "u",
			     a->exclude_kernel ? "" : "k", a->exclude_hv ? "" : "h") < 0)
			continue;
		free(ev->canonical);
		ev->canonical = named;
	}
}

static int count_open_members(struct lk_counters *c)
{
	for (unsigned gi = 0; gi < c->ngroups; gi++) {
		struct lk__group *g = &c->groups[gi];

		g->nopen = 0;
		for (size_t i = g->first; i < g->first + g->n; i++)
			g->nopen += c->events[i].opened;
	}
	return 0;
}

/* A set with its events resolved and nothing opened yet. */
static int new_set(struct lk_counters **out, const char *events, pid_t pid, unsigned flags)
{
	struct lk__event_list list;
	struct lk_counters *c;
	int err;

	err = lk__events_parse(events && *events ? events : "task-clock", flags & LK_COUNTERS_GROUP,
			       &list);
	if (err)
		return err;
	c = calloc(1, sizeof(*c));
	if (!c) {
		lk__events_free(&list);
		return lk__fail(-ENOMEM, "out of memory");
	}
	c->flags = flags;
	c->pid = pid;
	c->page_size = (size_t)sysconf(_SC_PAGESIZE);
	lk__counter_atfork_once();
	c->fork_generation = __atomic_load_n(&lk__counter_fork_generation, __ATOMIC_RELAXED);
	err = build_events(c, &list);
	lk__events_free(&list);
	if (err) {
		lk_counters_close(c);
		return err;
	}
	*out = c;
	return 0;
}

LK_API int lk_counters_open(struct lk_counters **out, const char *events, pid_t pid, unsigned flags)
{
	struct lk_counters *c;
	int err;

	if (!out)
		return lk__fail(-EINVAL, "lk_counters_open: out is NULL");
	*out = NULL;
	if (flags & ~ALL_FLAGS)
		return lk__fail(-EINVAL, "lk_counters_open: unknown flags %#x", flags & ~ALL_FLAGS);
	if (pid < 0)
		return lk__fail(-EINVAL,
				"lk_counters_open: pid %d: give 0 (this thread) or a thread or "
				"process id",
				(int)pid);
	if ((flags & LK_COUNTERS_PER_THREAD) &&
	    ((flags & LK_COUNTERS_PROCESS) || !(flags & LK_COUNTERS_INHERIT)))
		return lk__fail(-EINVAL,
				"lk_counters_open: LK_COUNTERS_PER_THREAD goes with "
				"LK_COUNTERS_INHERIT (LK_COUNTERS_PROCESS is per thread already)");
	err = new_set(&c, events, pid, flags);
	if (err)
		return err;

	if (flags & LK_COUNTERS_PROCESS) {
		err = open_process(c, pid ? pid : getpid());
	} else if (flags & LK_COUNTERS_PER_THREAD) {
		err = open_per_cpu(c, pid);
	} else {
		err = add_task(c, pid, -1);
		c->self = !(flags & LK_COUNTERS_INHERIT) &&
			  (pid == 0 || pid == (pid_t)syscall(SYS_gettid));
	}
	if (err)
		goto fail;
	count_open_members(c);
	finish_canonical_names(c);
	if (c->self && !(flags & LK_COUNTERS_NO_FASTPATH))
		lk__fastpath_setup(c);
	lk__counters_register(c);
	*out = c;
	return 0;
fail:
	lk_counters_close(c);
	return err;
}

/* Whether every CPU of cpus[0..n) is in the online list; says which is not. */
static int check_online(const int *cpus, size_t n, const int *online, int nonline)
{
	for (size_t i = 0; i < n; i++) {
		bool found = false;

		for (int k = 0; k < nonline && !found; k++)
			found = online[k] == cpus[i];
		if (!found)
			return lk__fail(-EINVAL,
					"lk_counters_open_cpus: CPU %d is not online "
					"(/sys/devices/system/cpu/online lists the CPUs to give)",
					cpus[i]);
	}
	return 0;
}

#define CPU_FLAGS (LK_COUNTERS_DISABLED | LK_COUNTERS_GROUP | LK_COUNTERS_SKIP_UNSUPPORTED)

LK_API int lk_counters_open_cpus(struct lk_counters **out, const char *events, const int *cpus,
				 size_t ncpus, unsigned flags)
{
	struct lk_counters *c;
	int *online, nonline, err;

	if (!out)
		return lk__fail(-EINVAL, "lk_counters_open_cpus: out is NULL");
	*out = NULL;
	if (flags & ~CPU_FLAGS)
		return lk__fail(-EINVAL,
				"lk_counters_open_cpus: flags %#x do not apply to CPUs (only "
				"DISABLED, GROUP and SKIP_UNSUPPORTED do)",
				flags & ~CPU_FLAGS);
	if (ncpus && !cpus)
		return lk__fail(-EINVAL, "lk_counters_open_cpus: cpus is NULL but ncpus is %zu",
				ncpus);
	nonline = lk__online_cpus(&online);
	if (nonline < 0)
		return nonline;
	err = check_online(cpus, ncpus, online, nonline);
	if (!err)
		err = new_set(&c, events, -1, flags);
	if (err) {
		free(online);
		return err;
	}
	if (!ncpus) {
		cpus = online;
		ncpus = (size_t)nonline;
	}
	for (size_t i = 0; i < ncpus && !err; i++)
		err = add_task(c, -1, cpus[i]);
	free(online);
	if (err) {
		lk_counters_close(c);
		return err;
	}
	count_open_members(c);
	finish_canonical_names(c);
	lk__counters_register(c);
	*out = c;
	return 0;
}

/* ---- control ---- */

static int leader_fd(const struct lk__task *t, const struct lk__group *g)
{
	for (size_t i = g->first; i < g->first + g->n; i++)
		if (t->fds[i] >= 0)
			return t->fds[i];
	return -1;
}

static int control(struct lk_counters *c, unsigned long request, const char *what)
{
	if (!c)
		return -EINVAL;
	for (size_t t = 0; t < c->ntasks; t++) {
		for (unsigned gi = 0; gi < c->ngroups; gi++) {
			int fd = leader_fd(&c->tasks[t], &c->groups[gi]);

			if (fd >= 0 && ioctl(fd, request, PERF_IOC_FLAG_GROUP) != 0)
				return lk__fail(-EIO, "lk_counters_%s: the kernel refused (%s)",
						what, strerror(errno));
		}
	}
	return 0;
}

LK_API int lk_counters_enable(struct lk_counters *c)
{
	return control(c, PERF_EVENT_IOC_ENABLE, "enable");
}

LK_API int lk_counters_disable(struct lk_counters *c)
{
	return control(c, PERF_EVENT_IOC_DISABLE, "disable");
}

LK_API int lk_counters_reset(struct lk_counters *c)
{
	return control(c, PERF_EVENT_IOC_RESET, "reset");
}

/* ---- description ---- */

LK_API size_t lk_counters_count(const struct lk_counters *c)
{
	return c ? c->nevents : 0;
}

LK_API int lk_counters_describe(const struct lk_counters *c, size_t i, struct lk_counter_info *info)
{
	const struct lk__event *ev;

	if (!c || !info)
		return -EINVAL;
	if (i >= c->nevents)
		return -ERANGE;
	ev = &c->events[i];
	memset(info, 0, sizeof(*info));
	info->name = ev->spec.text;
	info->event = ev->canonical ? ev->canonical : ev->spec.text;
	info->unit = ev->unit ? ev->unit : "";
	info->scale = ev->scale;
	info->type = ev->attr.type;
	info->config = ev->attr.config;
	info->group = ev->spec.group;
	info->hardware = ev->hardware;
	info->user_only = ev->attr.exclude_kernel && !ev->attr.exclude_user;
	info->user_only_fallback = ev->user_only_fallback;
	info->error = ev->error;
	info->why = ev->why ? ev->why : "";
	return 0;
}

LK_API size_t lk_counters_nthreads(const struct lk_counters *c)
{
	if (!c)
		return 0;
	if (c->per_cpu)
		return 1 + c->threads.nreported;
	return c->flags & LK_COUNTERS_PROCESS ? c->ntasks : 1;
}
