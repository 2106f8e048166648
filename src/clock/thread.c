// SPDX-License-Identifier: MIT
/*
 * A thread's task-clock page: set-up on the first call, tear-down at thread exit, a forked child's
 * inherited state, and the check that the page still follows the thread.
 *
 * Set-up uses only async-signal-safe calls (perf_event_open, mmap, close, getrusage) and glibc's
 * pthread_setspecific, so a thread's first call may be in a signal handler. The fd is closed as
 * soon as the page is mapped: the mapping keeps the event alive, and a process with many threads
 * does not run out of fds because of lowkey. perf mappings are VM_DONTCOPY, so a forked child has
 * no page at that address, and must not use the state it inherited (clock.c: the fork cookie).
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clock/clock_internal.h"
#include "internal/clock.h"

int lk__task_clock_open(void)
{
	struct perf_event_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_SOFTWARE;
	attr.config = PERF_COUNT_SW_TASK_CLOCK;
	attr.exclude_kernel = 1; /* allowed at perf_event_paranoid 2; a clock counts time anyway */
	attr.exclude_hv = 1;
	return (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

static pthread_key_t exit_key;
static bool exit_key_ok;

/* ---- is the page still following the thread? ---- */

/* The page's seqcount and the thread's voluntary + involuntary switches, with no sched-in between
 * the two reads; false if that could not be had. */
static bool switch_snapshot(const volatile struct perf_event_mmap_page *page, uint32_t *lock,
			    uint64_t *switches)
{
	struct rusage ru;

	for (int i = 0; i < 2; i++) {
		uint32_t before = page->lock;

		lk__barrier();
		if (getrusage(RUSAGE_THREAD, &ru) != 0)
			return false;
		lk__barrier();
		*lock = page->lock;
		if (*lock == before) {
			*switches = (uint64_t)ru.ru_nvcsw + (uint64_t)ru.ru_nivcsw;
			return true;
		}
	}
	return false;
}

/*
 * The seqcount moves by 2 per switch of the thread, as long as the event is enabled (test_seqcount.c
 * holds the kernel to it). prctl(PR_TASK_PERF_EVENTS_DISABLE) in the thread disables every event
 * it opened, ours included; from then on the seqcount stands still and the base would be
 * extrapolated across the thread's time off its CPU (up to the rebase interval). So when a base
 * ages out without a switch, check the count against the kernel's switch count: one getrusage()
 * per rebase interval at most.
 */
bool lk__thread_page_follows(const struct lk__cputime_thread *t)
{
	uint32_t lock;
	uint64_t switches;

	if (!t->switch_check || !switch_snapshot(t->page, &lock, &switches))
		return true; /* cannot tell */
	return (uint32_t)(lock - t->lock0) == (uint32_t)(2 * (switches - t->switches0));
}

/* ---- set-up and tear-down ---- */

/* perf_event_open() errors that another thread would get too. */
static bool perf_error_is_permanent(int err)
{
	switch (err) {
	case EMFILE:
	case ENFILE:
	case ENOMEM:
	case EAGAIN:
	case EBUSY:
	case EINTR:
		return false;
	default:
		return true;
	}
}

/* Open this thread's task clock and map its page; the fd is closed at once (the mapping keeps
 * the event). Only async-signal-safe calls. Returns NULL with *err set on failure. */
static const volatile struct perf_event_mmap_page *map_task_clock(size_t len, int *err,
								  bool *at_open)
{
	void *page;
	int fd = lk__task_clock_open();

	*at_open = fd < 0;
	if (fd < 0) {
		*err = errno;
		return NULL;
	}
	page = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	*err = errno;
	close(fd);
	return page == MAP_FAILED ? NULL : page;
}

static void setup_failed(struct lk__cputime_thread *t, int err, bool at_open)
{
	t->state = LK__T_SYSCALL;
	t->err = err;
	t->err_mmap = !at_open;
	LK__COUNT(thread_setup_failures);
	if (at_open && perf_error_is_permanent(err)) {
		__atomic_store_n(&lk__clock.perf_errno, err, __ATOMIC_RELAXED);
		__atomic_store_n(&lk__clock.perf_denied, true, __ATOMIC_RELEASE);
		t->retry_at = UINT64_MAX;
	} else {
		/* Out of fds, or the per-user perf mlock budget used up by other threads' pages:
		 * both may pass. */
		t->retry_at = lk__vdso_ns(CLOCK_MONOTONIC) + LK__SETUP_RETRY_NS;
	}
}

void lk__thread_setup(struct lk__cputime_thread *t)
{
	const volatile struct perf_event_mmap_page *page;
	int forced = lk__clock.forced_cputime;
	size_t len = (size_t)getpagesize();
	bool at_open, page_time;
	int err;

	t->state = LK__T_SYSCALL;
	t->retry_at = UINT64_MAX;
	t->err = 0;
	t->err_mmap = false;
	t->cookie = lk__clock_cookie();
	if (forced == LK_CPUTIME_SYSCALL || !LK_ARCH_HAVE_CYCLE_COUNTER ||
	    __atomic_load_n(&lk__clock.perf_denied, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(&lk__clock.no_counter, __ATOMIC_RELAXED))
		return;
	page = map_task_clock(len, &err, &at_open);
	if (!page) {
		setup_failed(t, err, at_open);
		return;
	}
	page_time = page->cap_user_time && LK_ARCH_HAVE_CYCLE_COUNTER;
	__atomic_store_n(&lk__clock.cap_user_time, page_time, __ATOMIC_RELAXED);
	if (!page_time && !lk__clock.counter.usable) {
		/* Neither the kernel nor the CPU gives a constant-rate counter: no thread will. */
		__atomic_store_n(&lk__clock.no_counter, true, __ATOMIC_RELAXED);
		munmap((void *)page, len);
		return;
	}
	if (exit_key_ok)
		pthread_setspecific(exit_key, t);
	t->page = page;
	t->page_len = len;
	t->switch_check = switch_snapshot(page, &t->lock0, &t->switches0);
	t->gen = 0;
	t->based = false;
	t->base.tag = LK__TAG_INVALID;
	if (page_time && forced != LK_CPUTIME_SEQ) {
		t->method = LK_CPUTIME_PAGE;
		t->max_age = lk__clock.rebase_ns;
	} else {
		t->method = LK_CPUTIME_SEQ;
		t->max_age = lk__ns_to_cycles(lk__clock.rebase_ns);
	}
	t->state = LK__T_FAST;
	__atomic_store_n(&lk__clock.cputime_seen, (int)t->method, __ATOMIC_RELAXED);
	LK__COUNT(threads_set_up);
}

/* A thread inherited from the parent by fork(): its page is not mapped here (perf mappings are
 * VM_DONTCOPY) and its CPU time starts again from zero. Forget everything; map nothing. */
void lk__thread_forget_parent(struct lk__cputime_thread *t)
{
	uint64_t now_last = t->now_last;

	memset(t, 0, sizeof(*t));
	t->now_last = now_last;
	t->busy = 1;
}

/* Thread exit (pthread key destructor): unmap the page. Later calls in this thread, from other
 * destructors, use the system call and set nothing up again. */
static void thread_exit(void *arg)
{
	struct lk__cputime_thread *t = arg;

	t->busy = 1;
	lk__barrier();
	t->ready = 0;
	if (t->page && t->cookie == lk__clock_cookie())
		munmap((void *)t->page, t->page_len);
	t->page = NULL;
	t->state = LK__T_EXITED;
	lk__barrier();
	t->busy = 0;
}

void lk__thread_init(void)
{
	exit_key_ok = pthread_key_create(&exit_key, thread_exit) == 0;
}

/* The thread's event was disabled behind our back: map a new one. */
void lk__thread_reopen(struct lk__cputime_thread *t)
{
	munmap((void *)t->page, t->page_len);
	t->page = NULL;
	t->ready = 0;
	LK__COUNT(pages_reopened);
	lk__thread_setup(t);
}
