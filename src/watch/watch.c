// SPDX-License-Identifier: MIT
/*
 * The public functions: a watchpoint is a perf breakpoint event with sigtrap, per thread or
 * inherited by every thread of the process.
 */
#include <dirent.h>
#include <errno.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "core/error.h"
#include "core/perf.h"
#include "watch/watch_internal.h"

#define SIGTRAP_MAJOR 5
#define SIGTRAP_MINOR 13

static const char *access_name(unsigned int access)
{
	switch (access) {
	case LK_WATCH_WRITE:
		return "write";
	case LK_WATCH_READWRITE:
		return "read/write";
	default:
		return "execute";
	}
}

static void fill_attr(struct perf_event_attr *attr, const struct lk_watch *w,
		      const struct lk__watch_bp *bp, bool inherit, bool disabled)
{
	memset(attr, 0, sizeof(*attr));
	attr->size = sizeof(*attr);
	attr->type = PERF_TYPE_BREAKPOINT;
	attr->bp_type = bp->type;
	attr->bp_addr = bp->addr;
	attr->bp_len = bp->len;
	attr->sample_period = 1;
	attr->exclude_kernel = 1;
	attr->exclude_hv = 1;
	attr->disabled = disabled;
	attr->sigtrap = 1;
	attr->remove_on_exec = 1; /* the kernel requires it with sigtrap */
	attr->sig_data = lk__watch_token(w);
	if (inherit) {
		attr->inherit = 1;
		attr->inherit_thread = 1; /* threads, not fork()ed processes */
	}
}

static bool kernel_older_than(unsigned int major, unsigned int minor)
{
	struct utsname u;
	unsigned int ma, mi;

	if (uname(&u) != 0 || sscanf(u.release, "%u.%u", &ma, &mi) != 2)
		return false;
	return ma < major || (ma == major && mi < minor);
}

/*
 * The kernel said EINVAL to an attr lowkey already checked. Kernels before 5.13 do that for the
 * sigtrap bits they do not know: ask again without them to tell which.
 */
static int explain_einval(struct perf_event_attr *attr, pid_t pid, const char *what)
{
	struct perf_event_attr plain = *attr;
	struct utsname u;
	int fd;

	plain.sigtrap = 0;
	plain.remove_on_exec = 0;
	plain.inherit_thread = 0;
	plain.sig_data = 0;
	fd = lk__perf_open(&plain, pid, -1, -1, 0, what);
	if (fd >= 0)
		close(fd);
	if (fd >= 0 || kernel_older_than(SIGTRAP_MAJOR, SIGTRAP_MINOR)) {
		uname(&u);
		return lk__fail(
			-EOPNOTSUPP,
			"this kernel (%s) cannot send SIGTRAP on perf events: watchpoints with a "
			"callback need Linux %d.%d or later (perf_event_attr.sigtrap). `lowkey watch "
			"-p PID` (sampling, no callback) works on older kernels",
			u.release, SIGTRAP_MAJOR, SIGTRAP_MINOR);
	}
	return lk__fail(-EINVAL,
			"perf_event_open(%s) refused the breakpoint (EINVAL): the address "
			"is probably outside this process's user space",
			what);
}

static void describe(const struct lk_watch *w, char *buf, size_t len)
{
	snprintf(buf, len, "%s watchpoint on %#lx, %zu bytes",
		 access_name(w->flags & LK__WATCH_ACCESS_MASK), (unsigned long)w->addr, w->len);
}

/* Open w's event in thread pid (0: the caller), explaining failures. */
static int open_event(struct lk_watch *w, pid_t pid, bool inherit)
{
	struct perf_event_attr attr;
	char what[96];
	int fd;

	fill_attr(&attr, w, &w->bp, inherit, w->disabled);
	fd = (int)syscall(SYS_perf_event_open, &attr, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd >= 0)
		return fd;
	/* The slow path: ask again through core, which explains the failure. */
	describe(w, what, sizeof(what));
	fd = lk__perf_open(&attr, pid, -1, -1, 0, what);
	if (fd >= 0)
		return fd; /* it worked the second time (a transient EMFILE or EAGAIN) */
	switch (-fd) {
	case EINVAL:
		return explain_einval(&attr, pid, what);
	case ENOSPC:
		return lk__fail(
			-ENOSPC,
			"perf_event_open(%s): the kernel has no free debug register in thread %d "
			"although lowkey's count left one of its %u free: a debugger (gdb), a ptrace "
			"user or perf holds some",
			what, pid ? (int)pid : (int)lk__watch_gettid(), lk__watch_slots());
	case ENOENT:
	case ENODEV:
		lk__fail_append(" (no hardware breakpoints offered to this kernel)");
		return -EOPNOTSUPP;
	default:
		return fd;
	}
}

/* ---- thread scope ---- */

static int add_thread(struct lk_watch *w, struct lk__wthread *t)
{
	int fd, err;

	pthread_mutex_lock(&t->lock);
	err = lk__slots_reserve_thread(t);
	if (err)
		goto out;
	__atomic_store_n(&w->live, 1, __ATOMIC_RELEASE);
	fd = open_event(w, 0, false);
	if (fd < 0) {
		__atomic_store_n(&w->live, 0, __ATOMIC_RELEASE);
		lk__slots_release_thread(t);
		err = fd;
		goto out;
	}
	w->fd = fd;
	w->owner = t;
	w->thread_next = t->watches;
	t->watches = w;
out:
	pthread_mutex_unlock(&t->lock);
	return err;
}

static void unlink_thread_watch(struct lk__wthread *t, struct lk_watch *w)
{
	for (struct lk_watch **p = &t->watches; *p; p = &(*p)->thread_next) {
		if (*p == w) {
			*p = w->thread_next;
			return;
		}
	}
}

static void remove_thread(struct lk_watch *w)
{
	struct lk__wthread *t = w->owner;

	pthread_mutex_lock(&t->lock);
	if (!w->ended) {
		close(w->fd);
		w->fd = -1;
		lk__slots_release_thread(t);
	}
	unlink_thread_watch(t, w);
	lk__wthread_unlock(t); /* frees t if its thread exited and this was its last */
}

/* ---- process scope ---- */

struct tid_set {
	pid_t *tids;
	size_t n, cap;
};

static bool tid_set_has(const struct tid_set *s, pid_t tid)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->tids[i] == tid)
			return true;
	return false;
}

static int grow(void **array, size_t *cap, size_t need, size_t size)
{
	size_t cap2 = *cap ? *cap : 16;
	void *p;

	if (need <= *cap)
		return 0;
	while (cap2 < need)
		cap2 *= 2;
	p = realloc(*array, cap2 * size);
	if (!p)
		return lk__fail(-ENOMEM, "out of memory for a process-scope watchpoint");
	*array = p;
	*cap = cap2;
	return 0;
}

/* The threads of this process that are not in seen yet. */
static int scan_new_threads(const struct tid_set *seen, struct tid_set *fresh)
{
	DIR *dir = opendir("/proc/self/task");
	struct dirent *de;
	int err = 0;

	fresh->n = 0;
	if (!dir)
		return lk__fail(-errno,
				"cannot list this process's threads (/proc/self/task): %s; a "
				"process-scope watchpoint needs /proc",
				strerror(errno));
	while (!err && (de = readdir(dir))) {
		pid_t tid = (pid_t)atoi(de->d_name);

		if (tid <= 0 || tid_set_has(seen, tid))
			continue;
		err = grow((void **)&fresh->tids, &fresh->cap, fresh->n + 1, sizeof(pid_t));
		if (!err)
			fresh->tids[fresh->n++] = tid;
	}
	closedir(dir);
	return err;
}

/*
 * Open w in every thread, inherited by the threads each creates. A thread created while this
 * runs either inherits from its creator or shows up in the next scan; scans go on until one
 * finds no new thread. (One created by a thread whose event was being installed at that very
 * moment may get both: it then holds two registers for w until w is removed, and its SIGTRAPs
 * merge into one, since the kernel does not queue a second SIGTRAP while one is pending.)
 */
static int open_in_every_thread(struct lk_watch *w)
{
	struct tid_set seen = { 0 }, fresh = { 0 };
	size_t cap = 0;
	int err;

	do {
		err = scan_new_threads(&seen, &fresh);
		for (size_t i = 0; !err && i < fresh.n; i++) {
			int fd = open_event(w, fresh.tids[i], true);

			if (fd == -ESRCH)
				continue; /* it exited meanwhile */
			if (fd < 0) {
				err = fd;
				break;
			}
			err = grow((void **)&w->fds, &cap, w->nfds + 1, sizeof(int));
			if (err) {
				close(fd);
				break;
			}
			w->fds[w->nfds++] = fd;
		}
		for (size_t i = 0; !err && i < fresh.n; i++) {
			err = grow((void **)&seen.tids, &seen.cap, seen.n + 1, sizeof(pid_t));
			if (!err)
				seen.tids[seen.n++] = fresh.tids[i];
		}
	} while (!err && fresh.n);
	free(seen.tids);
	free(fresh.tids);
	return err;
}

static void close_process_fds(struct lk_watch *w)
{
	for (unsigned int i = 0; i < w->nfds; i++)
		close(w->fds[i]);
	free(w->fds);
	w->fds = NULL;
	w->nfds = 0;
}

static int add_process(struct lk_watch *w)
{
	int err = lk__slots_reserve_process();

	if (err)
		return err;
	__atomic_store_n(&w->live, 1, __ATOMIC_RELEASE);
	err = open_in_every_thread(w);
	if (err) {
		__atomic_store_n(&w->live, 0, __ATOMIC_SEQ_CST);
		close_process_fds(w);
		lk__watch_quiesce(w);
		lk__slots_release_process();
	}
	return err;
}

/* ---- the API ---- */

static int check_flags(unsigned int flags)
{
	unsigned int access = flags & LK__WATCH_ACCESS_MASK;

	if (flags & ~LK__WATCH_FLAGS_MASK)
		return lk__fail(-EINVAL, "unknown lk_watch_add() flags %#x",
				flags & ~LK__WATCH_FLAGS_MASK);
	if (access != LK_WATCH_WRITE && access != LK_WATCH_READWRITE && access != LK_WATCH_EXEC)
		return lk__fail(-EINVAL,
				"lk_watch_add() needs exactly one of LK_WATCH_WRITE, "
				"LK_WATCH_READWRITE and LK_WATCH_EXEC in flags (got %#x)",
				flags);
	return 0;
}

static int prepare(unsigned int flags, lk_watch_fn fn)
{
	int err;

	if (lk__watch_in_callback())
		return lk__fail(-EDEADLK,
				"lowkey watchpoint functions cannot be called from a callback "
				"running in the signal handler (use LK_WATCH_DEFERRED)");
	lk__watch_fork_init();
	err = lk__watch_trap_ensure();
	if (!err && (flags & LK_WATCH_DEFERRED) && fn)
		err = lk__watch_deliver_start();
	return err;
}

LK_API int lk_watch_add(struct lk_watch **out, const void *addr, size_t len, unsigned int flags,
			lk_watch_fn fn, void *arg)
{
	struct lk__watch_bp bp;
	struct lk__wthread *t;
	struct lk_watch *w;
	int err;

	if (!out)
		return lk__fail(-EINVAL, "lk_watch_add(): out is NULL");
	*out = NULL;
	err = check_flags(flags);
	if (!err)
		err = lk__watch_arch_signals();
	if (!err)
		err = lk__watch_check((uintptr_t)addr, len, flags & LK__WATCH_ACCESS_MASK, &bp);
	if (!err)
		err = prepare(flags, fn);
	if (err)
		return err;
	t = lk__wthread_self();
	w = t ? lk__watch_entry_alloc() : NULL;
	if (!w)
		return lk__fail(-ENOMEM, "out of memory for a watchpoint");
	w->flags = flags;
	__atomic_store_n(&w->addr, (uintptr_t)addr, __ATOMIC_RELAXED);
	__atomic_store_n(&w->len, len, __ATOMIC_RELAXED);
	w->fn = fn;
	w->arg = arg;
	w->bp = bp;
	w->disabled = flags & LK_WATCH_DISABLED;
	__atomic_store_n(&lk__watch_armed, true, __ATOMIC_RELAXED);
	w->fork_gen = __atomic_load_n(&lk__watch_fork_gen, __ATOMIC_RELAXED);
	err = (flags & LK_WATCH_PROCESS) ? add_process(w) : add_thread(w, t);
	if (err) {
		lk__watch_entry_free(w);
		return err;
	}
	*out = w;
	return 0;
}

static bool forked_copy(const struct lk_watch *w)
{
	return w->fork_gen != __atomic_load_n(&lk__watch_fork_gen, __ATOMIC_RELAXED);
}

LK_API int lk_watch_remove(struct lk_watch *w)
{
	if (!w)
		return lk__fail(-EINVAL, "lk_watch_remove(NULL)");
	if (lk__watch_in_callback())
		return lk__fail(
			-EDEADLK,
			"lk_watch_remove() cannot be called from a callback running "
			"in the signal handler: it waits for callbacks (use LK_WATCH_DEFERRED)");
	__atomic_store_n(&w->live, 0, __ATOMIC_SEQ_CST);
	if (forked_copy(w)) {
		/* A fork()ed child's copy: its fds are copies, its owner a thread that is not here. */
		if (w->flags & LK_WATCH_PROCESS)
			close_process_fds(w);
		else if (w->fd >= 0)
			close(w->fd);
	} else if (w->flags & LK_WATCH_PROCESS) {
		close_process_fds(w);
		lk__slots_release_process();
	} else {
		remove_thread(w);
	}
	lk__watch_quiesce(w);
	lk__watch_entry_free(w);
	return 0;
}

/* Apply one ioctl to every fd of w. */
static int for_each_fd(struct lk_watch *w, unsigned long request, void *argp, const char *what)
{
	int err = 0;

	if (forked_copy(w))
		return lk__fail(-ESRCH,
				"%s: this watchpoint belongs to the parent process (this is a "
				"fork()ed child, which has no watchpoints)",
				what);
	if (w->flags & LK_WATCH_PROCESS) {
		for (unsigned int i = 0; i < w->nfds && !err; i++)
			if (ioctl(w->fds[i], request, argp) != 0 && errno != ESRCH)
				err = -errno;
	} else {
		struct lk__wthread *t = w->owner;

		pthread_mutex_lock(&t->lock);
		if (w->ended)
			err = lk__fail(-ESRCH, "%s: the watchpoint's thread %d has exited", what,
				       (int)t->tid);
		else if (ioctl(w->fd, request, argp) != 0)
			err = -errno;
		pthread_mutex_unlock(&t->lock);
	}
	if (err == -ENOTTY)
		return lk__fail(-EOPNOTSUPP,
				"%s: this kernel cannot change a breakpoint in place "
				"(PERF_EVENT_IOC_MODIFY_ATTRIBUTES needs Linux 4.17)",
				what);
	if (err && err != -ESRCH)
		return lk__fail(err, "%s failed: %s", what, strerror(-err));
	return err;
}

LK_API int lk_watch_move(struct lk_watch *w, const void *addr, size_t len)
{
	struct perf_event_attr attr;
	struct lk__watch_bp bp;
	int err;

	if (!w)
		return lk__fail(-EINVAL, "lk_watch_move(NULL)");
	err = lk__watch_check((uintptr_t)addr, len, w->flags & LK__WATCH_ACCESS_MASK, &bp);
	if (err)
		return err;
	/* The kernel compares every other field with the open event's: same token, same state. */
	fill_attr(&attr, w, &bp, w->flags & LK_WATCH_PROCESS, w->disabled);
	err = for_each_fd(w, PERF_EVENT_IOC_MODIFY_ATTRIBUTES, &attr, "lk_watch_move()");
	if (err)
		return err;
	w->bp = bp;
	__atomic_store_n(&w->addr, (uintptr_t)addr, __ATOMIC_RELAXED);
	__atomic_store_n(&w->len, len, __ATOMIC_RELAXED);
	return 0;
}

static int set_enabled(struct lk_watch *w, bool enable)
{
	int err;

	if (!w)
		return lk__fail(-EINVAL, "lk_watch_%s(NULL)", enable ? "enable" : "disable");
	err = for_each_fd(w, enable ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, NULL,
			  enable ? "lk_watch_enable()" : "lk_watch_disable()");
	if (err)
		return err;
	w->disabled = !enable; /* lk_watch_move()'s attr must say the event's present state */
	return 0;
}

LK_API int lk_watch_enable(struct lk_watch *w)
{
	return set_enabled(w, true);
}

LK_API int lk_watch_disable(struct lk_watch *w)
{
	return set_enabled(w, false);
}

LK_API int lk_watch_counted(struct lk_watch *w, uint64_t *count)
{
	uint64_t sum = 0;
	int err = 0;

	if (!w || !count)
		return lk__fail(-EINVAL, "lk_watch_counted(): NULL argument");
	if (forked_copy(w))
		return lk__fail(
			-ESRCH,
			"lk_watch_counted(): this watchpoint belongs to the parent process");
	if (w->flags & LK_WATCH_PROCESS) {
		/* An exited thread's event keeps its final count. */
		for (unsigned int i = 0; i < w->nfds && !err; i++)
			err = lk__perf_add_count(w->fds[i], &sum);
	} else {
		struct lk__wthread *t = w->owner;

		pthread_mutex_lock(&t->lock);
		if (w->ended)
			err = lk__fail(-ESRCH,
				       "lk_watch_counted(): the watchpoint's thread %d has exited",
				       (int)t->tid);
		else
			err = lk__perf_add_count(w->fd, &sum);
		pthread_mutex_unlock(&t->lock);
	}
	if (!err)
		*count = sum;
	return err;
}

LK_API int lk_watch_stats(const struct lk_watch *w, struct lk_watch_stats *out)
{
	if (!out)
		return -EINVAL;
	if (w) {
		out->hits = __atomic_load_n(&w->hits, __ATOMIC_RELAXED);
		out->delivered = __atomic_load_n(&w->delivered, __ATOMIC_RELAXED);
		out->dropped = __atomic_load_n(&w->dropped, __ATOMIC_RELAXED);
		out->ignored = __atomic_load_n(&w->ignored, __ATOMIC_RELAXED);
		out->unattributed = 0;
	} else {
		out->hits = __atomic_load_n(&lk__watch_total_hits, __ATOMIC_RELAXED);
		out->delivered = __atomic_load_n(&lk__watch_total_delivered, __ATOMIC_RELAXED);
		out->dropped = __atomic_load_n(&lk__watch_total_dropped, __ATOMIC_RELAXED);
		out->ignored = __atomic_load_n(&lk__watch_total_ignored, __ATOMIC_RELAXED);
		out->unattributed =
			__atomic_load_n(&lk__watch_total_unattributed, __ATOMIC_RELAXED);
	}
	return 0;
}

LK_API int lk_watch_slots(struct lk_watch_slots *out)
{
	struct lk__wthread *t = lk__wthread_peek();

	if (!out)
		return lk__fail(-EINVAL, "lk_watch_slots(NULL)");
	out->total = lk__watch_slots();
	out->thread = 0;
	if (t) {
		pthread_mutex_lock(&t->lock);
		out->thread = t->nr_thread;
		pthread_mutex_unlock(&t->lock);
	}
	lk__slots_read(&out->process, &out->max_thread);
	return 0;
}
