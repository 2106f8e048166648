// SPDX-License-Identifier: MIT
/*
 * The clock module's process-wide state: the one-time init (environment, counter, calibration),
 * the fork cookie, and lk_clock_info().
 *
 * The init runs on the first call of any clock function, possibly inside a signal handler, so it
 * uses only async-signal-safe calls (no stdio, no malloc): the explanations that need more are
 * written later, by lk_clock_info().
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <lowkey/error.h>

#include "clock/clock_internal.h"
#include "core/env.h"
#include "core/error.h"
#include "core/perf.h"

#ifndef MADV_WIPEONFORK
#define MADV_WIPEONFORK 18
#endif

struct lk__clock lk__clock = {
	.forced_cputime = -1,
	.forced_now = -1,
	.cputime_seen = -1,
	.rebase_ns = LK__REBASE_NS_DEFAULT,
};

/*
 * The fork cookie. Each thread's fast path compares its `ready` with the word lk__cookie_ptr
 * points to; that word lives in a MADV_WIPEONFORK page, which the kernel hands to a child of
 * fork(), _Fork() or clone() zeroed, so every inherited thread state fails the test there and is
 * rebuilt. Cookies are multiples of 4, at least 4; `ready` is cookie ^ 1 or cookie ^ 3, so
 * ready ^ 1 and ready ^ 3 are the cookie and a number that is 2 modulo 4, which no cookie and no
 * zeroed word equals; a new thread's 0 ^ 1 or 0 ^ 3 never matches either. A child's cookie is its
 * parent's + 4, so it never equals an inherited one.
 */
static const volatile uint64_t no_cookie;
const volatile uint64_t *lk__cookie_ptr = &no_cookie;
static uint64_t *cookie_word;
static uint64_t cookie_static; /* where MADV_WIPEONFORK is missing: reset by pthread_atfork */
static uint64_t cookie_last;

/* ---- an async-signal-safe string builder ---- */

void lk__str_add(struct lk__str *s, const char *text)
{
	while (text && *text && s->len + 1 < s->cap)
		s->buf[s->len++] = *text++;
	if (s->cap)
		s->buf[s->len] = 0;
}

void lk__str_u64(struct lk__str *s, uint64_t v)
{
	char digits[24];
	int n = 0;

	do
		digits[n++] = (char)('0' + v % 10);
	while ((v /= 10) && n < 23);
	while (n > 0 && s->len + 1 < s->cap)
		s->buf[s->len++] = digits[--n];
	if (s->cap)
		s->buf[s->len] = 0;
}

/* ---- environment ---- */

static void ignored(struct lk__str *note, const char *name, const char *value, const char *expected)
{
	if (note->len)
		lk__str_add(note, "; ");
	lk__str_add(note, name);
	lk__str_add(note, "='");
	lk__str_add(note, value);
	lk__str_add(note, "' ignored (expected ");
	lk__str_add(note, expected);
	lk__str_add(note, ")");
}

static bool parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (!*s)
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10)
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return true;
}

static void parse_env(void)
{
	struct lk__str note = LK__STR(lk__clock.env_note);
	const char *v;
	uint64_t us;

	if ((v = lk__env("LOWKEY_CLOCK"))) {
		if (!strcasecmp(v, "page"))
			lk__clock.forced_cputime = LK_CPUTIME_PAGE;
		else if (!strcasecmp(v, "seq"))
			lk__clock.forced_cputime = LK_CPUTIME_SEQ;
		else if (!strcasecmp(v, "syscall"))
			lk__clock.forced_cputime = LK_CPUTIME_SYSCALL;
		else if (strcasecmp(v, "auto"))
			ignored(&note, "LOWKEY_CLOCK", v, "auto, page, seq or syscall");
	}
	if ((v = lk__env("LOWKEY_CLOCK_NOW"))) {
		if (!strcasecmp(v, "tsc"))
			lk__clock.forced_now = LK_NOW_TSC;
		else if (!strcasecmp(v, "vdso"))
			lk__clock.forced_now = LK_NOW_VDSO;
		else if (strcasecmp(v, "auto"))
			ignored(&note, "LOWKEY_CLOCK_NOW", v, "auto, tsc or vdso");
	}
	if ((v = lk__env("LOWKEY_CLOCK_REBASE_US"))) {
		if (parse_u64(v, &us) && us >= LK__REBASE_US_MIN && us <= LK__REBASE_US_MAX)
			lk__clock.rebase_ns = us * 1000;
		else
			ignored(&note, "LOWKEY_CLOCK_REBASE_US", v,
				"a number of µs from 10 to 1000000");
	}
}

/* ---- fork cookie ---- */

static void cookie_after_fork(void)
{
	__atomic_store_n(cookie_word, 0, __ATOMIC_RELAXED);
}

static void cookie_init(void)
{
	size_t len = (size_t)getpagesize();
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p != MAP_FAILED && madvise(p, len, MADV_WIPEONFORK) == 0) {
		cookie_word = p;
	} else {
		/* Linux < 4.14: fork() still resets the cookie; _Fork() and raw clone() do not. */
		if (p != MAP_FAILED)
			munmap(p, len);
		cookie_word = &cookie_static;
		pthread_atfork(NULL, NULL, cookie_after_fork);
	}
	__atomic_store_n(&cookie_last, 4, __ATOMIC_RELAXED);
	__atomic_store_n(cookie_word, 4, __ATOMIC_RELAXED);
	__atomic_store_n(&lk__cookie_ptr, cookie_word, __ATOMIC_RELEASE);
}

uint64_t lk__clock_cookie(void)
{
	uint64_t c = __atomic_load_n(cookie_word, __ATOMIC_RELAXED), zero = 0, next;

	if (LK__LIKELY(c))
		return c;
	/* The first call in a forked child. */
	next = __atomic_load_n(&cookie_last, __ATOMIC_RELAXED) + 4;
	if (__atomic_compare_exchange_n(cookie_word, &zero, next, false, __ATOMIC_RELAXED,
					__ATOMIC_RELAXED)) {
		__atomic_store_n(&cookie_last, next, __ATOMIC_RELAXED);
		lk__timebase_after_fork();
		return next;
	}
	return __atomic_load_n(cookie_word, __ATOMIC_RELAXED);
}

/* ---- init ---- */

/*
 * At most once per process; false while it runs in another thread (or in the call a signal
 * handler interrupted), and the caller falls back to the system call or the vDSO. A fork() while
 * another thread runs it leaves the child on those fallbacks.
 */
bool lk__clock_init(void)
{
	int state = __atomic_load_n(&lk__clock.init, __ATOMIC_ACQUIRE);
	int none = LK__INIT_NONE;

	if (LK__LIKELY(state == LK__INIT_DONE))
		return true;
	if (state != LK__INIT_NONE ||
	    !__atomic_compare_exchange_n(&lk__clock.init, &none, LK__INIT_RUNNING, false,
					 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return false;
	parse_env();
	lk__counter_probe(&lk__clock.counter);
	cookie_init();
	lk__thread_init();
	lk__timebase_init();
	__atomic_store_n(&lk__clock.init, LK__INIT_DONE, __ATOMIC_RELEASE);
	return true;
}

/* ---- lk_clock_info() ---- */

static void explain_perf_failure(char *out, size_t len, int err)
{
	struct perf_event_attr attr;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.type = PERF_TYPE_SOFTWARE;
	attr.config = PERF_COUNT_SW_TASK_CLOCK;
	attr.exclude_kernel = 1;
	attr.exclude_hv = 1;
	fd = lk__perf_open(&attr, 0, -1, -1, 0, "task-clock");
	if (fd >= 0) {
		close(fd);
		snprintf(out, len,
			 "clock_gettime(CLOCK_THREAD_CPUTIME_ID) on every call: "
			 "perf_event_open(task-clock) failed with %s (%s) at start; it works now, "
			 "restart the program to use the fast path",
			 strerrorname_np(err), strerror(err));
	} else {
		snprintf(out, len, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) on every call: %s",
			 lk_last_error());
	}
}

static void fast_reason(char *out, size_t len, int method)
{
	const char *forced =
		lk__clock.forced_cputime == LK_CPUTIME_SEQ ?
			"LOWKEY_CLOCK=seq: " :
		lk__clock.forced_cputime == LK_CPUTIME_PAGE ?
			"LOWKEY_CLOCK=page asked for page-only, but this kernel leaves "
			"cap_user_time at 0. " :
			"";
	unsigned long long us = (unsigned long long)(lk__clock.rebase_ns / 1000);

	if (method == LK_CPUTIME_PAGE)
		snprintf(out, len,
			 "the task-clock page has cap_user_time: CPU time is the page's task "
			 "clock plus the %s since the thread's last sched-in, tied to "
			 "CLOCK_THREAD_CPUTIME_ID by one clock_gettime() every %llu µs",
			 lk__clock.counter.name, us);
	else
		snprintf(
			out, len,
			"%sthe task-clock page has no cap_user_time (x86 guests: the kernel's "
			"sched_clock is the hypervisor's, not the TSC), so it cannot turn the %s into "
			"task time; its seqcount says when the thread was switched, and a per-thread "
			"base (one clock_gettime() after each switch, or every %llu µs) plus the %s "
			"since gives the CPU time",
			forced, lk__clock.counter.name, us, lk__clock.counter.name);
}

/* The process-wide method; false if it is not settled yet (no thread set up). */
static bool process_method(struct lk_clock_info *info)
{
	int seen = __atomic_load_n(&lk__clock.cputime_seen, __ATOMIC_RELAXED);
	char *r = info->cputime_reason;
	size_t len = sizeof(info->cputime_reason);

	info->cputime = LK_CPUTIME_SYSCALL;
	if (lk__clock.forced_cputime == LK_CPUTIME_SYSCALL) {
		snprintf(r, len,
			 "LOWKEY_CLOCK=syscall: clock_gettime(CLOCK_THREAD_CPUTIME_ID) on every "
			 "call");
	} else if (__atomic_load_n(&lk__clock.perf_denied, __ATOMIC_ACQUIRE)) {
		info->perf_errno = __atomic_load_n(&lk__clock.perf_errno, __ATOMIC_RELAXED);
		explain_perf_failure(r, len, info->perf_errno);
	} else if (!LK_ARCH_HAVE_CYCLE_COUNTER ||
		   __atomic_load_n(&lk__clock.no_counter, __ATOMIC_RELAXED)) {
		snprintf(r, len,
			 "clock_gettime(CLOCK_THREAD_CPUTIME_ID) on every call: the task-clock "
			 "page has no cap_user_time and %s",
			 lk__clock.counter.why_not);
	} else if (seen >= 0) {
		info->cputime = (enum lk_cputime_method)seen;
		fast_reason(r, len, seen);
	} else {
		return false;
	}
	return true;
}

static void thread_method(struct lk_clock_info *info, const struct lk__cputime_thread *t)
{
	char *r = info->thread_reason;
	size_t len = sizeof(info->thread_reason);

	info->thread_cputime = LK_CPUTIME_SYSCALL;
	if (t->state == LK__T_FAST) {
		info->thread_cputime = (enum lk_cputime_method)t->method;
		snprintf(r, len, "this thread reads its own task-clock page (method %s)",
			 lk__cputime_method_name((int)t->method));
	} else if (t->state == LK__T_EXITED) {
		snprintf(r, len, "this thread is exiting: system call");
	} else if (!t->err) {
		snprintf(r, len, "as the process: system call");
	} else if (t->err_mmap) {
		snprintf(
			r, len,
			"this thread could not map its task-clock page (%s): unprivileged "
			"threads share the user's perf budget, kernel.perf_event_mlock_kb plus "
			"RLIMIT_MEMLOCK (one page each); raise them or grant CAP_IPC_LOCK. Tried again "
			"every 100 ms",
			strerrorname_np(t->err));
	} else if (t->err == EMFILE || t->err == ENFILE) {
		snprintf(r, len,
			 "this thread's perf_event_open failed with %s: out of file "
			 "descriptors (raise `ulimit -n`). Tried again every 100 ms",
			 strerrorname_np(t->err));
	} else {
		snprintf(r, len, "this thread's perf_event_open failed with %s (%s)",
			 strerrorname_np(t->err), strerror(t->err));
	}
	if (t->err && !info->perf_errno)
		info->perf_errno = t->err;
}

static void copy_stats(struct lk_clock_info *info)
{
	const struct lk__clock_stats *s = &lk__clock.stats;

	info->threads_set_up = LK__LOAD(&s->threads_set_up);
	info->thread_setup_failures = LK__LOAD(&s->thread_setup_failures);
	info->rebases_switch = LK__LOAD(&s->rebases_switch);
	info->rebases_age = LK__LOAD(&s->rebases_age);
	info->rebase_retries = LK__LOAD(&s->rebase_retries);
	info->syscall_reads = LK__LOAD(&s->syscall_reads);
	info->pages_reopened = LK__LOAD(&s->pages_reopened);
	info->now_resyncs = LK__LOAD(&s->now_resyncs);
	info->now_steps = LK__LOAD(&s->now_steps);
	info->now_last_error_ns = LK__LOAD(&s->now_last_error_ns);
	info->now_max_error_ns = LK__LOAD(&s->now_max_error_ns);
}

static void wait_for_init(void)
{
	struct timespec ms = { 0, 1000000 };

	for (int i = 0; i < 1000 && !lk__clock_init(); i++)
		nanosleep(&ms, NULL);
}

LK_API int lk_clock_info(struct lk_clock_info *info)
{
	const struct lk__cputime_thread *t = &lk__cputime_tls;
	const char *source;

	if (!info)
		return lk__fail(-EINVAL, "lk_clock_info: info is NULL");
	memset(info, 0, sizeof(*info));
	wait_for_init();
	(void)lk_thread_cputime_ns(); /* this thread's set-up, if not done yet */
	(void)lk_now_ns();

	thread_method(info, t);
	if (!process_method(info)) {
		info->cputime = info->thread_cputime;
		snprintf(info->cputime_reason, sizeof(info->cputime_reason),
			 "no thread has set up the fast path yet; this thread: %s",
			 info->thread_reason);
	}
	info->cputime_name = lk__cputime_method_name(info->cputime);
	info->thread_cputime_name = lk__cputime_method_name(info->thread_cputime);
	info->cap_user_time = __atomic_load_n(&lk__clock.cap_user_time, __ATOMIC_RELAXED);

	info->now = lk__clock.now_method;
	info->now_name = info->now == LK_NOW_TSC ? "tsc" : "vdso";
	snprintf(info->now_reason, sizeof(info->now_reason), "%s", lk__clock.now_reason);

	info->counter_usable = lk__clock.counter.usable;
	info->counter_name = lk__clock.counter.name;
	info->tsc_hz = LK__LOAD(&lk__clock.hz);
	source = __atomic_load_n(&lk__clock.hz_source, __ATOMIC_ACQUIRE);
	info->tsc_hz_source = info->tsc_hz && source ? source : "unknown";
	info->rebase_ns = lk__clock.rebase_ns;
	info->resync_ns = LK__RESYNC_NS;
	snprintf(info->env_note, sizeof(info->env_note), "%s", lk__clock.env_note);
	copy_stats(info);
	return 0;
}
