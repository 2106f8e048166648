// SPDX-License-Identifier: MIT
/*
 * Slot accounting, as the kernel does it since "perf/hw_breakpoint: Reduce contention with large
 * number of tasks" (kernel/events/hw_breakpoint.c).
 *
 * Each thread has lk__watch_slots() debug registers. A thread-scope watchpoint takes one in
 * its thread; a process-scope one takes one in every thread. So a thread-scope add fits when
 *	its thread's count + the process-scope count < slots
 * and a process-scope add fits when
 *	the largest thread count + the process-scope count < slots.
 *
 * The largest thread count is read from a histogram, "how many threads have k thread-scope
 * watchpoints", kept per CPU like the kernel's tsk_pinned so threads updating it do not share a
 * cache line. Thread-scope adds and removes update their own thread's count (under its lock) and
 * the histogram while holding the process-wide state as readers of a per-CPU reader-writer lock:
 * they never wait for each other. Process-scope adds and removes take it as the writer, which
 * gives them a histogram no one is changing. A histogram line can go negative when a thread
 * migrates between its updates; only sums over all lines are read.
 *
 * Slots are reserved here before the system call and given back if it fails, so a process-scope
 * add racing a thread-scope add is refused by lowkey, with a precise message, not by the kernel.
 */
#include <errno.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <lowkey/lock.h>

#include "core/error.h"
#include "watch/watch_internal.h"

struct hist_line {
	long threads_with[LK__WATCH_MAX_SLOTS + 1]; /* [k]: threads with k thread-scope slots */
} __attribute__((aligned(64)));

static lk_pcpu_rwlock_t slots_lock = LK_PCPU_RWLOCK_INIT;
static unsigned int nr_process; /* process-scope slots: written by writers only */

static struct hist_line *hist;
static unsigned int hist_lines;
static struct hist_line hist_fallback; /* when the per-CPU lines cannot be allocated */
static pthread_once_t hist_once = PTHREAD_ONCE_INIT;

static void hist_alloc(void)
{
	int n = get_nprocs_conf();
	struct hist_line *lines;

	if (n < 1)
		n = 1;
	lines = aligned_alloc(64, (size_t)n * sizeof(*lines));
	if (!lines) {
		hist = &hist_fallback;
		hist_lines = 1;
		return;
	}
	memset(lines, 0, (size_t)n * sizeof(*lines));
	hist_lines = (unsigned int)n;
	hist = lines;
}

static struct hist_line *my_line(void)
{
	int cpu = sched_getcpu(); /* from rseq: no system call */

	return &hist[(unsigned int)(cpu < 0 ? 0 : cpu) % hist_lines];
}

/* A thread's count goes from `from` to `to`. Called with the lock held (either side). */
static void hist_move(unsigned int from, unsigned int to)
{
	struct hist_line *line = my_line();

	if (from)
		__atomic_fetch_sub(&line->threads_with[from], 1, __ATOMIC_RELAXED);
	if (to)
		__atomic_fetch_add(&line->threads_with[to], 1, __ATOMIC_RELAXED);
}

/* The most thread-scope slots any thread uses. Called by a writer. */
static unsigned int max_thread_locked(void)
{
	for (unsigned int k = LK__WATCH_MAX_SLOTS; k > 0; k--) {
		long sum = 0;

		for (unsigned int i = 0; i < hist_lines; i++)
			sum += __atomic_load_n(&hist[i].threads_with[k], __ATOMIC_RELAXED);
		if (sum > 0)
			return k;
	}
	return 0;
}

static unsigned int system_slots;
static pthread_once_t system_slots_once = PTHREAD_ONCE_INIT;

static void count_system_slots(void)
{
	static uint64_t targets[LK__WATCH_MAX_SLOTS + 1];
	unsigned int arch = lk__watch_arch_slots(), n = 0;
	int fds[LK__WATCH_MAX_SLOTS + 1], err = 0;

	system_slots = arch;
	if (arch == 0)
		return;
	while (n <= LK__WATCH_MAX_SLOTS) {
		struct perf_event_attr attr;

		memset(&attr, 0, sizeof(attr));
		attr.size = sizeof(attr);
		attr.type = PERF_TYPE_BREAKPOINT;
		attr.bp_type = HW_BREAKPOINT_W;
		attr.bp_addr = (uint64_t)(uintptr_t)&targets[n];
		attr.bp_len = HW_BREAKPOINT_LEN_8;
		attr.disabled = 1;
		attr.exclude_kernel = 1;
		attr.exclude_hv = 1;
		fds[n] = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
		if (fds[n] < 0) {
			err = errno;
			break;
		}
		n++;
	}
	for (unsigned int i = 0; i < n; i++)
		close(fds[i]);
	/* Only ENOSPC is the kernel's count; anything else (EACCES, ENOSYS, ENODEV) says nothing
	 * about the registers, and lk_watch_add() will explain it when it tries. */
	if (err == ENOSPC && n > 0)
		system_slots = n;
}

unsigned int lk__watch_slots(void)
{
	pthread_once(&system_slots_once, count_system_slots);
	return system_slots;
}

int lk__slots_reserve_thread(struct lk__wthread *t)
{
	unsigned int slots = lk__watch_slots(), process;

	pthread_once(&hist_once, hist_alloc);
	lk_pcpu_read_lock(&slots_lock);
	process = nr_process;
	if (t->nr_thread + process >= slots) {
		lk_pcpu_read_unlock(&slots_lock);
		return lk__fail(
			-ENOSPC,
			"no free debug register in thread %d: all %u are in use, %u by its "
			"thread-scope watchpoints and %u by process-scope watchpoints (which take one "
			"in every thread). Remove one, or re-point one with lk_watch_move()",
			(int)t->tid, slots, t->nr_thread, process);
	}
	hist_move(t->nr_thread, t->nr_thread + 1);
	t->nr_thread++;
	lk_pcpu_read_unlock(&slots_lock);
	return 0;
}

void lk__slots_release_thread(struct lk__wthread *t)
{
	lk_pcpu_read_lock(&slots_lock);
	hist_move(t->nr_thread, t->nr_thread - 1);
	t->nr_thread--;
	lk_pcpu_read_unlock(&slots_lock);
}

void lk__slots_release_thread_all(struct lk__wthread *t)
{
	if (!t->nr_thread)
		return;
	lk_pcpu_read_lock(&slots_lock);
	hist_move(t->nr_thread, 0);
	t->nr_thread = 0;
	lk_pcpu_read_unlock(&slots_lock);
}

int lk__slots_reserve_process(void)
{
	unsigned int slots = lk__watch_slots(), fullest;

	pthread_once(&hist_once, hist_alloc);
	lk_pcpu_write_lock(&slots_lock);
	fullest = max_thread_locked();
	if (fullest + nr_process >= slots) {
		unsigned int process = nr_process;

		lk_pcpu_write_unlock(&slots_lock);
		return lk__fail(
			-ENOSPC,
			"no free debug register for a process-scope watchpoint: it needs one in every "
			"thread, and of the %u each thread has, %u are used by process-scope "
			"watchpoints and the fullest thread uses %u more for its thread-scope ones. "
			"Remove one of them",
			slots, process, fullest);
	}
	nr_process++;
	lk_pcpu_write_unlock(&slots_lock);
	return 0;
}

void lk__slots_release_process(void)
{
	lk_pcpu_write_lock(&slots_lock);
	nr_process--;
	lk_pcpu_write_unlock(&slots_lock);
}

void lk__slots_read(unsigned int *process, unsigned int *max_thread)
{
	pthread_once(&hist_once, hist_alloc);
	lk_pcpu_write_lock(&slots_lock);
	*process = nr_process;
	*max_thread = max_thread_locked();
	lk_pcpu_write_unlock(&slots_lock);
}

void lk__slots_fork_prepare(void)
{
	lk_pcpu_write_lock(&slots_lock);
}

void lk__slots_fork_parent(void)
{
	lk_pcpu_write_unlock(&slots_lock);
}

void lk__slots_fork_child(void)
{
	if (hist)
		memset(hist, 0, hist_lines * sizeof(*hist));
	nr_process = 0;
	lk_pcpu_write_unlock(&slots_lock);
}
