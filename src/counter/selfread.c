// SPDX-License-Identifier: MIT
/*
 * Self-monitoring without a system call: a thread that counts itself can read a hardware counter
 * with rdpmc, using the perf page the kernel keeps for the event (struct perf_event_mmap_page):
 *
 *	count = page->offset + rdpmc(page->index - 1), sign-extended from page->pmc_width bits
 *
 * read under the page's sequence count (page->lock), which the kernel bumps around every update.
 * The kernel only updates the page on the CPU the thread runs on, so a reader on that thread sees
 * either the old or the new state and retries on a change. index is 0 while the event is not on
 * a counter (software events always, hardware events while multiplexed out): then read().
 *
 * Valid only in the thread that opened the set (another thread's rdpmc would read its own
 * counters) and never in a forked child, where perf's pages are not mapped (VM_DONTCOPY): the fork
 * generation tells.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <lowkey/bits/arch.h>

#include "counter/counter_internal.h"

/* Retries of a page read before giving up for read(); a retry means an interrupt updated it. */
#define PAGE_READ_TRIES 16

unsigned lk__counter_fork_generation;

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void bump_fork_generation(void)
{
	__atomic_add_fetch(&lk__counter_fork_generation, 1, __ATOMIC_RELAXED);
}

static void register_atfork(void)
{
	pthread_atfork(NULL, NULL, bump_fork_generation);
}

void lk__counter_atfork_once(void)
{
	pthread_once(&atfork_once, register_atfork);
}

#if defined(__x86_64__)
#define HAVE_USER_COUNTERS 1

static inline uint64_t read_pmc(uint32_t counter)
{
	uint32_t lo, hi;

	asm volatile("rdpmc" : "=a"(lo), "=d"(hi) : "c"(counter));
	return (uint64_t)hi << 32 | lo;
}
#else
/* arm64 can read PMU counters from EL0 too (perf_user_access); not written yet. */
#define HAVE_USER_COUNTERS 0
#endif

#if HAVE_USER_COUNTERS
#define READ_ONCE(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

/* The kernel's conversion of TSC cycles to perf time (see perf_event_mmap_page's comments). */
static uint64_t cycles_to_time(const volatile struct perf_event_mmap_page *pc, uint64_t cycles,
			       uint64_t time_offset, uint32_t mult, uint16_t shift)
{
	uint64_t quot, rem;

	if (pc->cap_user_time_short)
		cycles = pc->time_cycles + ((cycles - pc->time_cycles) & pc->time_mask);
	quot = cycles >> shift;
	rem = cycles & (((uint64_t)1 << shift) - 1);
	return time_offset + quot * mult + ((rem * mult) >> shift);
}

/* One event's reading from its page; false when the page does not allow it now. */
static bool read_page(struct perf_event_mmap_page *page, struct lk_counter_value *v)
{
	volatile struct perf_event_mmap_page *pc = page;
	uint64_t count, enabled, running, pmc, cycles = 0, time_offset = 0;
	uint32_t seq, index, mult = 0;
	uint16_t width, shift = 0;
	bool user_time;
	int tries = 0;

	do {
		if (++tries > PAGE_READ_TRIES)
			return false;
		seq = __atomic_load_n(&page->lock, __ATOMIC_ACQUIRE);
		enabled = pc->time_enabled;
		running = pc->time_running;
		index = pc->index;
		if (!pc->cap_user_rdpmc || index == 0)
			return false;
		count = pc->offset;
		width = pc->pmc_width;
		pmc = read_pmc(index - 1);
		user_time = pc->cap_user_time;
		if (user_time) {
			cycles = lk__arch_counter();
			time_offset = pc->time_offset;
			mult = pc->time_mult;
			shift = pc->time_shift;
		}
		/*
		 * Keep the compiler from moving the loads above below the second look at the
		 * sequence; x86 does not reorder loads with loads, so the CPU will not either (the
		 * kernel's own recipe for this page uses barrier() alone).
		 */
		asm volatile("" ::: "memory");
	} while (READ_ONCE(page->lock) != seq);

	count += (uint64_t)((int64_t)(pmc << (64 - width)) >> (64 - width));
	if (user_time) {
		uint64_t delta = cycles_to_time(pc, cycles, time_offset, mult, shift);

		/* The event is on a counter now, so both times advanced by delta. */
		enabled += delta;
		running += delta;
	} else if (enabled != running) {
		return false; /* multiplexed, and the page's times are stale: read() scales right */
	}
	v->value = count;
	v->time_enabled = enabled;
	v->time_running = running;
	v->scaled = lk__scale(count, enabled, running);
	return true;
}
#endif

void lk__fastpath_setup(struct lk_counters *c)
{
#if HAVE_USER_COUNTERS
	struct lk__task *t = &c->tasks[0];

	t->pages = calloc(c->nevents, sizeof(*t->pages));
	if (!t->pages)
		return; /* no fast path; read() works */
	c->owner = pthread_self();
	for (unsigned gi = 0; gi < c->ngroups; gi++) {
		struct lk__group *g = &c->groups[gi];
		bool ok = g->nopen > 0 && g->nopen <= LK__GROUP_MAX;
		struct perf_event_mmap_page *first = NULL;

		for (size_t i = g->first; ok && i < g->first + g->n; i++) {
			void *p;

			if (!c->events[i].opened)
				continue;
			if (!c->events[i].hardware) {
				ok = false; /* a software member: its page never has an index */
				break;
			}
			p = mmap(NULL, c->page_size, PROT_READ, MAP_SHARED, t->fds[i], 0);
			if (p == MAP_FAILED) {
				ok = false;
				break;
			}
			t->pages[i] = p;
			if (!first)
				first = p;
		}
		/* cap_user_rdpmc is the same for every event of a PMU: the first one tells. */
		g->fastpath = ok && first && first->cap_user_rdpmc;
		if (!g->fastpath)
			for (size_t i = g->first; i < g->first + g->n; i++)
				if (t->pages[i]) {
					munmap(t->pages[i], c->page_size);
					t->pages[i] = NULL;
				}
	}
#else
	(void)c;
#endif
}

void lk__fastpath_teardown(struct lk_counters *c)
{
	struct lk__task *t;

	if (c->ntasks == 0 || !c->tasks[0].pages)
		return;
	t = &c->tasks[0];
	/* In a forked child the pages were never mapped (VM_DONTCOPY): leave the addresses alone. */
	if (c->fork_generation == __atomic_load_n(&lk__counter_fork_generation, __ATOMIC_RELAXED))
		for (size_t i = 0; i < c->nevents; i++)
			if (t->pages[i])
				munmap(t->pages[i], c->page_size);
	memset(t->pages, 0, c->nevents * sizeof(*t->pages));
}

bool lk__fastpath_read(const struct lk_counters *c, const struct lk__group *g,
		       struct lk_counter_value *values, size_t n)
{
#if HAVE_USER_COUNTERS
	struct lk_counter_value got[LK__GROUP_MAX];
	const struct lk__task *t = &c->tasks[0];
	size_t k = 0;

	if (!pthread_equal(pthread_self(), c->owner) ||
	    c->fork_generation != __atomic_load_n(&lk__counter_fork_generation, __ATOMIC_RELAXED))
		return false;
	/* Read every member first: a failure half-way must not leave values half-added. */
	for (size_t i = g->first; i < g->first + g->n; i++)
		if (c->events[i].opened && !read_page(t->pages[i], &got[k++]))
			return false;
	k = 0;
	for (size_t i = g->first; i < g->first + g->n; i++) {
		if (!c->events[i].opened)
			continue;
		if (i < n) {
			values[i].value += got[k].value;
			values[i].time_enabled += got[k].time_enabled;
			values[i].time_running += got[k].time_running;
			values[i].scaled += got[k].scaled;
		}
		k++;
	}
	return true;
#else
	(void)c;
	(void)g;
	(void)values;
	(void)n;
	return false;
#endif
}
