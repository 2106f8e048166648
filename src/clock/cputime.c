// SPDX-License-Identifier: MIT
/*
 * The calling thread's CPU time from the mmap page of its own task-clock perf event.
 *
 * What the kernel does with that page (measured on 6.18, see docs/clock.md): the page is rewritten
 * each time the thread is scheduled in (task_clock_event_add -> perf_event_update_userpage), under
 * its seqcount `lock`, which moves by 2 per update. Nothing else updates it while the thread runs:
 * it moves on every involuntary or voluntary switch, sched_yield() that switches, migration; it does
 * not move on sched_yield() with nothing else to run, on interrupts, or on hypervisor steal. The
 * owner never sees it odd (it is written while the owner is off its CPU).
 *
 * Method seq (no cap_user_time): a base {seq, cycles, cpu ns} is taken with one clock_gettime().
 * A later read takes the counter, *then* the seqcount: if the seqcount still equals the base's,
 * the thread has not been scheduled in since the base was taken, so the counter and the base were
 * read on the same CPU in one stretch of running and CPU time = base + scaled cycles. Interrupts
 * stop instructions at precise boundaries, so a switch between the two reads makes the seqcount
 * read see the new value, whatever order the CPU executed them in. No fence is needed: the only
 * writers that matter are this thread's switches.
 *
 * The base's cycles are the counter read just *before* its clock_gettime(), not the middle of the
 * bracket: the kernel reads the CPU time somewhere inside the system call, and CPU time advances at
 * most as fast as the counter, so base + cycles since is never below the thread's CPU time (but for
 * the frequency's error, LK__RATE_PPM_MAX at most, over one rebase interval): a read is never below
 * a clock_gettime(CLOCK_THREAD_CPUTIME_ID) made before it. The middle of the bracket was right only
 * when the system call took as long after the kernel's reading as before it; an interrupt or a
 * signal handler on the way back (both charged to the thread) made the base lag by half of that,
 * for its whole life, and reads fell microseconds below an earlier clock_gettime() (docs/clock.md,
 * "Error"). The price is a bias: the system call's time up to its reading point (about half the
 * call), by which reads are above the kernel's rather than around it. A rebase returns the new
 * base's value at the end of its bracket, so that it carries the same bias as the reads that follow
 * it.
 *
 * Method page (cap_user_time): the page holds the task clock at the last sched-in and how to turn
 * the counter into ns since then; a base ties it to CLOCK_THREAD_CPUTIME_ID's scale, stamped with
 * the task clock read before its clock_gettime() for the same reason.
 *
 * Both: the base is retaken after LOWKEY_CLOCK_REBASE_US, bounding the error from time the kernel
 * does not count as the thread's (steal, and IRQ time with CONFIG_IRQ_TIME_ACCOUNTING); a rebase
 * whose clock_gettime() was switched out or took too long is tried again, LK__REBASE_TRIES times,
 * then the system call's own value is returned.
 */
#include <errno.h>
#include <time.h>

#include "clock/clock_internal.h"

__thread struct lk__cputime_thread lk__cputime_tls __attribute__((tls_model("initial-exec")));

const char *lk__cputime_method_name(int method)
{
	switch (method) {
	case LK_CPUTIME_PAGE:
		return "page";
	case LK_CPUTIME_SEQ:
		return "seq";
	default:
		return "syscall";
	}
}

uint64_t lk__syscall_cputime(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * LK__NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

/* Keep the thread's clock monotonic: never return less than before. */
static inline uint64_t floor_last(struct lk__cputime_thread *t, uint64_t v)
{
	if (v < t->last)
		v = t->last;
	t->last = v;
	return v;
}

/* ---- the page's task clock (cap_user_time) ---- */

bool lk__page_task_clock(const volatile struct perf_event_mmap_page *page, uint64_t cyc,
			 uint64_t *task_clock)
{
	uint64_t quot, rem, delta, time_offset;
	uint32_t mult;
	uint16_t shift;

	if (!page->cap_user_time || page->index != 0)
		return false;
	mult = page->time_mult;
	shift = page->time_shift;
	time_offset = page->time_offset;
	if (page->cap_user_time_short) {
		uint64_t cycles = page->time_cycles, mask = page->time_mask;

		cyc = cycles + ((cyc - cycles) & mask);
	}
	/* The formula of perf_event.h, split so cyc * mult cannot overflow. */
	quot = shift < 64 ? cyc >> shift : 0;
	rem = shift < 64 ? cyc & ((1ull << shift) - 1) : cyc;
	delta = time_offset + quot * mult + ((rem * mult) >> shift);
	*task_clock = (uint64_t)page->offset + delta;
	return true;
}

/* The task clock now, read consistently (the seqcount moves if the thread is switched meanwhile). */
static inline bool page_task_clock_now(const volatile struct perf_event_mmap_page *page,
				       uint64_t *task_clock)
{
	for (int i = 0; i < 2; i++) {
		uint32_t seq = page->lock;
		uint64_t cyc;
		bool ok;

		lk__barrier();
		cyc = lk__arch_counter();
		ok = lk__page_task_clock(page, cyc, task_clock);
		lk__barrier();
		if (page->lock == seq && !(seq & 1))
			return ok;
	}
	return false;
}

/* ---- fast paths ---- */

/*
 * cyc is the counter, read now or just before by the caller (probes stamp their event with the same
 * read): a base taken after it (a signal handler's rebase) puts cyc below the base, which the age
 * check refuses.
 */
static inline __attribute__((always_inline)) bool read_seq(struct lk__cputime_thread *t,
							   uint64_t cyc, uint64_t *out)
{
	const volatile struct lk__cputime_base *b = &t->base;
	uint64_t tag = b->tag, at = b->at, ns = b->ns, mult = b->mult;
	uint64_t d, v;

	lk__barrier(); /* the seqcount is read after the counter: see the top of the file */
	if (LK__UNLIKELY((uint32_t)tag != t->page->lock || b->tag != tag))
		return false; /* switched since the base, or a signal handler rebased */
	d = cyc - at;
	if (LK__UNLIKELY(d > t->max_age)) /* also catches a counter below the base's */
		return false;
	v = ns + lk__scale(d, mult);
	*out = floor_last(t, v);
	return true;
}

static inline bool read_page(struct lk__cputime_thread *t, uint64_t *out)
{
	const volatile struct lk__cputime_base *b = &t->base;
	uint64_t tag = b->tag, at = b->at, ns = b->ns;
	uint64_t tc, d;

	if (!page_task_clock_now(t->page, &tc))
		return false;
	lk__barrier();
	if ((uint32_t)tag != 0 || b->tag != tag)
		return false;
	d = tc - at;
	if (d > t->max_age)
		return false;
	*out = floor_last(t, ns + d);
	return true;
}

/* The counter is read here unless the caller read it (given): probes stamp their event with it. */
static inline __attribute__((always_inline)) uint64_t thread_cputime(bool given, uint64_t cycles)
{
	struct lk__cputime_thread *t = &lk__cputime_tls;
	const volatile uint64_t *cookie = __atomic_load_n(&lk__cookie_ptr, __ATOMIC_RELAXED);
	uint64_t v;

	/* ready is the process cookie ^ LK__READY_SEQ or ^ LK__READY_PAGE once set up: 0 (a new
	 * thread) and a forked child's zeroed cookie page fail both tests. */
	if (LK__LIKELY((t->ready ^ LK__READY_SEQ) == *cookie)) {
		if (LK__LIKELY(read_seq(t, given ? cycles : lk__arch_counter(), &v)))
			return v;
	} else if ((t->ready ^ LK__READY_PAGE) == *cookie && read_page(t, &v)) {
		return v;
	}
	return lk__cputime_slow(t);
}

LK_API uint64_t lk_thread_cputime_ns(void)
{
	return thread_cputime(false, 0);
}

uint64_t lk__thread_cputime_at(uint64_t cycles)
{
	return thread_cputime(true, cycles);
}

/* For other modules of liblowkey (probes): the same function without the PLT. */
extern __typeof__(lk_thread_cputime_ns) lk__thread_cputime_ns
	__attribute__((alias("lk_thread_cputime_ns"), visibility("hidden")));

/* ---- rebases ---- */

static void publish(struct lk__cputime_thread *t, uint32_t seq, uint64_t at, uint64_t ns,
		    uint64_t mult)
{
	volatile struct lk__cputime_base *b = &t->base;
	uint64_t gen = ++t->gen;

	b->tag = gen << 32 | LK__TAG_INVALID;
	lk__barrier();
	b->at = at;
	b->ns = ns;
	b->mult = mult;
	lk__barrier();
	b->tag = gen << 32 | seq;
	t->based = true;
}

static void count_rebase(struct lk__cputime_thread *t, bool moved)
{
	if (!t->based)
		return; /* the first base of a thread is not a rebase */
	if (moved)
		LK__COUNT(rebases_switch);
	else
		LK__COUNT(rebases_age);
}

static uint64_t rebase_seq(struct lk__cputime_thread *t)
{
	const volatile struct perf_event_mmap_page *page = t->page;
	uint64_t bracket_max = lk__ns_to_cycles(LK__BRACKET_NS_MAX);
	uint64_t mult = LK__LOAD(&lk__clock.cycle_mult);
	uint64_t ns = 0;
	bool moved = page->lock != (uint32_t)t->base.tag;

	for (int i = 0; i < LK__REBASE_TRIES; i++) {
		uint32_t s0, s1;
		uint64_t c0, c1;

		s0 = page->lock;
		lk__barrier();
		c0 = lk__arch_counter_ordered();
		ns = lk__syscall_cputime();
		c1 = lk__arch_counter_ordered();
		lk__barrier();
		s1 = page->lock;
		if (s0 == s1 && !(s0 & 1) && c1 - c0 <= bracket_max) {
			count_rebase(t, moved);
			publish(t, s0, c0, ns, mult); /* c0: never behind, see the top */
			/* What the base gives now, so that reads from it agree with this one. */
			return floor_last(t, ns + lk__scale(c1 - c0, mult));
		}
		LK__COUNT(rebase_retries);
	}
	LK__COUNT(syscall_reads);
	return floor_last(t, ns);
}

static uint64_t rebase_page(struct lk__cputime_thread *t)
{
	const volatile struct perf_event_mmap_page *page = t->page;
	uint64_t ns = 0;

	for (int i = 0; i < LK__REBASE_TRIES; i++) {
		uint64_t tc0 = 0, tc1 = 0;

		if (!page_task_clock_now(page, &tc0))
			goto no_page_time;
		ns = lk__syscall_cputime();
		if (!page_task_clock_now(page, &tc1))
			goto no_page_time;
		if (tc1 >= tc0 && tc1 - tc0 <= LK__BRACKET_NS_MAX) {
			count_rebase(t, false);
			publish(t, 0, tc0, ns, 0); /* tc0: never behind, see the top */
			return floor_last(t, ns + (tc1 - tc0));
		}
		LK__COUNT(rebase_retries);
	}
	LK__COUNT(syscall_reads);
	return floor_last(t, ns);

no_page_time:
	/* The kernel cleared cap_user_time (it marked the TSC unstable): the seqcount still works
	 * where the counter does. */
	t->ready = 0;
	if (!lk__clock.counter.usable) {
		t->state = LK__T_SYSCALL;
		t->retry_at = UINT64_MAX;
		return floor_last(t, lk__syscall_cputime());
	}
	t->method = LK_CPUTIME_SEQ;
	t->max_age = lk__ns_to_cycles(lk__clock.rebase_ns);
	t->base.tag = LK__TAG_INVALID;
	return rebase_seq(t);
}

/* ---- the slow path ---- */

static uint64_t slow_locked(struct lk__cputime_thread *t)
{
	uint64_t v;

	if (!lk__clock_init()) { /* another thread, or a call this handler interrupted, runs it */
		LK__COUNT(syscall_reads);
		return floor_last(t, lk__syscall_cputime());
	}
	if (t->cookie != lk__clock_cookie() && t->state != LK__T_NEW)
		lk__thread_forget_parent(t);
	if (t->state == LK__T_NEW || (t->state == LK__T_SYSCALL && t->retry_at != UINT64_MAX &&
				      lk__vdso_ns(CLOCK_MONOTONIC) >= t->retry_at))
		lk__thread_setup(t);
	if (t->state == LK__T_FAST && t->based &&
	    (t->method == LK_CPUTIME_PAGE || t->page->lock == (uint32_t)t->base.tag) &&
	    !lk__thread_page_follows(t))
		lk__thread_reopen(t);
	if (t->state != LK__T_FAST)
		return floor_last(t, lk__syscall_cputime());

	v = t->method == LK_CPUTIME_SEQ ? rebase_seq(t) : rebase_page(t);
	if (t->state == LK__T_FAST && t->based)
		t->ready = t->cookie ^
			   (t->method == LK_CPUTIME_SEQ ? LK__READY_SEQ : LK__READY_PAGE);
	lk__timebase_tick();
	return v;
}

uint64_t lk__cputime_slow(struct lk__cputime_thread *t)
{
	int saved_errno = errno;
	uint64_t v;

	if (t->busy) {
		/* A signal handler interrupted this thread's slow path: leave its state alone. */
		LK__COUNT(syscall_reads);
		v = floor_last(t, lk__syscall_cputime());
	} else {
		t->busy = 1;
		lk__barrier();
		v = slow_locked(t);
		lk__barrier();
		t->busy = 0;
	}
	errno = saved_errno;
	return v;
}
