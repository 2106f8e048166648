// SPDX-License-Identifier: MIT
/*
 * From a SIGTRAP to a callback.
 *
 * The kernel sends a watchpoint's SIGTRAP with si_code TRAP_PERF and the event's sig_data in
 * si_perf_data; lowkey's events carry a token there (table.c), so the handler can tell its own
 * traps from everyone else's (static keys' int3, the application's breakpoints and perf events)
 * and hand those on to core's dispatcher untouched.
 *
 * Removal races: a hit can be on its way while its watchpoint is removed. The handler announces
 * itself in the entry's inflight count before it looks at `live`; lk_watch_remove() clears `live`
 * before it waits for inflight to drain. With both sides sequentially consistent, either the
 * handler sees the watchpoint gone, or the remover waits for the handler: a callback never runs
 * after lk_watch_remove() returned.
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/sigtrap.h"
#include "watch/watch_internal.h"

#ifndef TRAP_PERF
#define TRAP_PERF 6
#endif
#ifndef TRAP_PERF_FLAG_ASYNC
#define TRAP_PERF_FLAG_ASYNC (1u << 0)
#endif

#define TLS_IE __attribute__((tls_model("initial-exec")))

uint64_t lk__watch_total_hits, lk__watch_total_delivered, lk__watch_total_dropped,
	lk__watch_total_ignored, lk__watch_total_unattributed;
bool lk__watch_armed;

/* Callbacks this thread is running in the signal handler (nested hits are ignored). */
static __thread unsigned int callback_depth TLS_IE;

static bool handler_registered;

/*
 * si_perf_data, si_perf_type and si_perf_flags follow si_addr in the kernel's siginfo (the _perf
 * member of the union after _addr); glibc before 2.37 has no names for them.
 */
#define SI_PERF_OFFSET (offsetof(siginfo_t, si_addr) + sizeof(void *))

uint64_t lk__si_perf_data(const siginfo_t *si)
{
	unsigned long data;

	memcpy(&data, (const char *)si + SI_PERF_OFFSET, sizeof(data));
	return data;
}

uint32_t lk__si_perf_type(const siginfo_t *si)
{
	uint32_t type;

	memcpy(&type, (const char *)si + SI_PERF_OFFSET + sizeof(unsigned long), sizeof(type));
	return type;
}

uint32_t lk__si_perf_flags(const siginfo_t *si)
{
	uint32_t flags;

	memcpy(&flags, (const char *)si + SI_PERF_OFFSET + sizeof(unsigned long) + sizeof(uint32_t),
	       sizeof(flags));
	return flags;
}

bool lk__watch_in_callback(void)
{
	return callback_depth != 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts); /* vDSO, async-signal-safe */
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The watched bytes as the CPU loads them; the range is aligned to its length (arch check). */
static uint64_t read_value(uintptr_t addr, size_t len)
{
	switch (len) {
	case 1:
		return *(const volatile uint8_t *)addr;
	case 2:
		return *(const volatile uint16_t *)addr;
	case 4:
		return *(const volatile uint32_t *)addr;
	default:
		return *(const volatile uint64_t *)addr;
	}
}

static void count(uint64_t *mine, uint64_t *total)
{
	__atomic_fetch_add(mine, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(total, 1, __ATOMIC_RELAXED);
}

static void fill_hit(struct lk_watch_hit *hit, struct lk_watch *w, const siginfo_t *si,
		     ucontext_t *uc)
{
	unsigned int access = w->flags & LK__WATCH_ACCESS_MASK;

	memset(hit, 0, sizeof(*hit));
	hit->watch = w;
	/* The kernel reports the address the breakpoint had when it fired (it may just have moved). */
	hit->addr = si->si_addr ? si->si_addr :
				  (const void *)__atomic_load_n(&w->addr, __ATOMIC_RELAXED);
	hit->len = __atomic_load_n(&w->len, __ATOMIC_RELAXED);
	hit->ip = (const void *)lk__watch_arch_ip(uc);
	hit->tid = lk__watch_gettid();
	hit->access = access;
	hit->late = lk__si_perf_flags(si) & TRAP_PERF_FLAG_ASYNC;
	/* A write-only watchpoint does not fire on this load; a read-write one would, so no value. */
	if (access == LK_WATCH_WRITE && hit->len <= sizeof(uint64_t)) {
		hit->value = read_value((uintptr_t)hit->addr, hit->len);
		hit->has_value = true;
	}
	hit->time_ns = now_ns();
	hit->context = uc;
}

static void defer(struct lk_watch *w, uint16_t gen, const struct lk_watch_hit *hit)
{
	struct lk__watch_item item = {
		.index = w->index,
		.gen = gen,
		.late = hit->late,
		.has_value = hit->has_value,
		.tid = hit->tid,
		.ip = (uintptr_t)hit->ip,
		.addr = (uintptr_t)hit->addr,
		.len = hit->len,
		.value = hit->value,
		.time_ns = hit->time_ns,
	};

	if (!lk__watch_enqueue(&item))
		count(&w->dropped, &lk__watch_total_dropped);
}

/*
 * Whether SIGTRAP is blocked here, in the handler. lowkey's dispatcher leaves it open
 * (SA_NODEFER), but a wrapper between the kernel and the dispatcher may block every signal while
 * a handler runs (ThreadSanitizer does). That is a property of the process's SIGTRAP handler, so
 * the system call is made once, on the first hit, not on every hit.
 */
enum { TRAP_MASK_UNKNOWN, TRAP_MASK_OPEN, TRAP_MASK_BLOCKED };
static int trap_mask_in_handler;

static bool trap_blocked(void)
{
	int known = __atomic_load_n(&trap_mask_in_handler, __ATOMIC_RELAXED);
	unsigned long mask;

	if (known == TRAP_MASK_UNKNOWN) {
		if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &mask, sizeof(mask)) != 0)
			return false;
		known = (mask & (1ul << (SIGTRAP - 1))) ? TRAP_MASK_BLOCKED : TRAP_MASK_OPEN;
		__atomic_store_n(&trap_mask_in_handler, known, __ATOMIC_RELAXED);
	}
	return known == TRAP_MASK_BLOCKED;
}

/*
 * With SIGTRAP blocked, an access the callback made to watched memory did not come back to us
 * nested (where it is ignored): it waits, and would run the callback again the moment the handler
 * returns -- which may access it again, forever. Take such traps now and count them as ignored.
 * A pending SIGTRAP that is not lowkey's is queued again for the application.
 */
static void take_nested_traps(void)
{
	unsigned long set = 1ul << (SIGTRAP - 1);
	struct timespec zero = { 0, 0 };
	siginfo_t info, others[4];
	unsigned int nothers = 0;

	while (syscall(SYS_rt_sigtimedwait, &set, &info, &zero, sizeof(set)) == SIGTRAP) {
		struct lk_watch *w;
		uint32_t index;
		uint16_t gen;

		if (info.si_code == TRAP_PERF && lk__si_perf_type(&info) == PERF_TYPE_BREAKPOINT &&
		    lk__watch_token_decode(lk__si_perf_data(&info), &index, &gen)) {
			w = lk__watch_entry_lookup(index);
			if (w)
				count(&w->ignored, &lk__watch_total_ignored);
		} else if (nothers < sizeof(others) / sizeof(others[0])) {
			others[nothers++] = info;
		}
	}
	for (unsigned int i = 0; i < nothers; i++)
		syscall(SYS_rt_tgsigqueueinfo, getpid(), lk__watch_gettid(), SIGTRAP, &others[i]);
}

static void on_hit(struct lk_watch *w, uint16_t gen, const siginfo_t *si, ucontext_t *uc)
{
	struct lk_watch_hit hit;

	__atomic_fetch_add(&w->inflight, 1, __ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&w->live, __ATOMIC_SEQ_CST) ||
	    __atomic_load_n(&w->gen, __ATOMIC_ACQUIRE) != gen)
		goto out; /* removed (or removed and reused) while the signal was on its way */
	if (callback_depth || lk__watch_on_delivery_thread()) {
		count(&w->ignored, &lk__watch_total_ignored);
		goto out;
	}
	count(&w->hits, &lk__watch_total_hits);
	if (!w->fn) {
		count(&w->delivered, &lk__watch_total_delivered);
		goto out;
	}
	fill_hit(&hit, w, si, uc);
	if (w->flags & LK_WATCH_DEFERRED) {
		defer(w, gen, &hit);
	} else {
		count(&w->delivered, &lk__watch_total_delivered);
		callback_depth++;
		w->fn(&hit, w->arg);
		if (trap_blocked())
			take_nested_traps();
		callback_depth--;
	}
out:
	__atomic_fetch_sub(&w->inflight, 1, __ATOMIC_RELEASE);
}

static bool watch_trap(siginfo_t *si, ucontext_t *uc)
{
	struct lk_watch *w;
	uint32_t index;
	uint16_t gen;

	if (si->si_code != TRAP_PERF) {
		if (!__atomic_load_n(&lk__watch_armed, __ATOMIC_RELAXED) ||
		    !lk__watch_arch_unattributed_trap(si, uc))
			return false;
		__atomic_fetch_add(&lk__watch_total_unattributed, 1, __ATOMIC_RELAXED);
		return true;
	}
	if (lk__si_perf_type(si) != PERF_TYPE_BREAKPOINT)
		return false;
	if (!lk__watch_token_decode(lk__si_perf_data(si), &index, &gen))
		return false; /* the application's own perf event */
	w = lk__watch_entry_lookup(index);
	if (w)
		on_hit(w, gen, si, uc);
	return true;
}

int lk__watch_trap_ensure(void)
{
	int err;

	if (!__atomic_load_n(&handler_registered, __ATOMIC_ACQUIRE)) {
		err = lk__sigtrap_add(watch_trap); /* idempotent; installs the dispatcher */
		if (err)
			return err;
		__atomic_store_n(&handler_registered, true, __ATOMIC_RELEASE);
		return 0;
	}
	return lk__sigtrap_ensure();
}

void lk__watch_quiesce(struct lk_watch *w)
{
	unsigned long own = lk__watch_delivering() == w ? 1 : 0;

	for (unsigned int spins = 0; __atomic_load_n(&w->inflight, __ATOMIC_SEQ_CST) > own;
	     spins++) {
		if (spins < 100) {
			sched_yield();
		} else {
			struct timespec pause = { 0, 50000 };

			nanosleep(&pause, NULL);
		}
	}
}
