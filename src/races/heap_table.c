// SPDX-License-Identifier: MIT
/*
 * The table of live heap blocks behind `lowkey races --heap` (include/internal/races_heap.h):
 * open addressing by the block's start, lock-free. Many threads allocate and free at once; each
 * slot has at most one writer at a time, the one whose compare-and-swap on its key moved it to
 * LKR_HEAP_BUSY. A slot once used never goes back to LKR_HEAP_EMPTY, so a search may stop at the
 * first empty slot: every block recorded lies before it.
 */
#include "internal/races_heap.h"

#define SMALL_STEP 16u		/* malloc's alignment on x86-64 */
#define SMALL_REACH (1u << 20)	/* below addr, looked at every SMALL_STEP */
#define PAGE 4096u		/* large blocks are mapped: a page, their header, the block */
#define LARGE_REACH (64u << 20) /* below addr, looked at every page */
#define MMAP_HEADER 16u		/* glibc's header in front of a mapped block */

static uint64_t hash_of(const struct lkr_heap_table *t, uint64_t start)
{
	return ((start >> 4) * 0x9e3779b97f4a7c15ull >> 20) & t->mask;
}

static struct lkr_heap_slot *slot_at(const struct lkr_heap_table *t, uint64_t h, unsigned int i)
{
	return &t->slots[(h + i) & t->mask];
}

/*
 * Write b into slot s, which this thread holds (its key LKR_HEAP_BUSY), and publish it. The
 * fields are release stores, not relaxed ones after a fence: a reader that reads one of them
 * reads the odd sequence number after, and ThreadSanitizer, which does not model fences, sees that
 * order too. On x86-64 both are plain moves.
 */
static void fill(struct lkr_heap_slot *s, const struct lkr_heap_block *b)
{
	uint32_t seq = __atomic_load_n(&s->seq, __ATOMIC_RELAXED);

	__atomic_store_n(&s->seq, seq + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&s->size, b->size, __ATOMIC_RELEASE);
	__atomic_store_n(&s->site, b->site, __ATOMIC_RELEASE);
	__atomic_store_n(&s->tid, b->tid, __ATOMIC_RELEASE);
	__atomic_store_n(&s->seq, seq + 2, __ATOMIC_RELEASE);
	__atomic_store_n(&s->key, b->start, __ATOMIC_RELEASE);
}

static bool claim(struct lkr_heap_slot *s, uint64_t expected)
{
	return __atomic_compare_exchange_n(&s->key, &expected, LKR_HEAP_BUSY, false,
					   __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

bool lkr_heap_insert(struct lkr_heap_table *t, const struct lkr_heap_block *b)
{
	uint64_t h = hash_of(t, b->start);

	for (unsigned int i = 0; i < LKR_HEAP_PROBES; i++) {
		struct lkr_heap_slot *s = slot_at(t, h, i);
		uint64_t key = __atomic_load_n(&s->key, __ATOMIC_ACQUIRE);

		if ((key == b->start || key == LKR_HEAP_EMPTY || key == LKR_HEAP_FREED) &&
		    claim(s, key)) {
			fill(s, b);
			return true;
		}
	}
	__atomic_fetch_add(&t->dropped, 1, __ATOMIC_RELAXED);
	return false;
}

/*
 * Slot s's block, if its key is start and it was not rewritten while read. The fields are acquire
 * loads (fill()'s release stores): the sequence number read after them is at least the one their
 * writer stored before them.
 */
static bool read_slot(const struct lkr_heap_slot *s, uint64_t start, struct lkr_heap_block *b)
{
	uint32_t seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);

	if (seq & 1 || __atomic_load_n(&s->key, __ATOMIC_ACQUIRE) != start)
		return false;
	b->start = start;
	b->size = __atomic_load_n(&s->size, __ATOMIC_ACQUIRE);
	b->site = __atomic_load_n(&s->site, __ATOMIC_ACQUIRE);
	b->tid = __atomic_load_n(&s->tid, __ATOMIC_ACQUIRE);
	return __atomic_load_n(&s->seq, __ATOMIC_RELAXED) == seq &&
	       __atomic_load_n(&s->key, __ATOMIC_RELAXED) == start;
}

bool lkr_heap_get(const struct lkr_heap_table *t, uint64_t start, struct lkr_heap_block *b)
{
	uint64_t h = hash_of(t, start);

	for (unsigned int i = 0; i < LKR_HEAP_PROBES; i++) {
		const struct lkr_heap_slot *s = slot_at(t, h, i);
		uint64_t key = __atomic_load_n(&s->key, __ATOMIC_ACQUIRE);

		if (key == LKR_HEAP_EMPTY)
			return false;
		if (key == start && read_slot(s, start, b))
			return true;
	}
	return false;
}

/*
 * The first record of start is forgotten: a search for it stops there too. A block freed where
 * this library does not see it leaves a record that a later one of the same start hides.
 */
bool lkr_heap_remove(struct lkr_heap_table *t, uint64_t start, struct lkr_heap_block *b)
{
	uint64_t h = hash_of(t, start);

	for (unsigned int i = 0; i < LKR_HEAP_PROBES; i++) {
		struct lkr_heap_slot *s = slot_at(t, h, i);
		uint64_t key = __atomic_load_n(&s->key, __ATOMIC_ACQUIRE);

		if (key == LKR_HEAP_EMPTY)
			return false;
		if (key != start)
			continue;
		if (b)
			read_slot(s, start, b); /* its writer is the one freeing it: no other */
		return __atomic_compare_exchange_n(&s->key, &key, LKR_HEAP_FREED, false,
						   __ATOMIC_RELEASE, __ATOMIC_RELAXED);
	}
	return false;
}

uint64_t lkr_heap_count(const struct lkr_heap_table *t)
{
	uint64_t n = 0;

	for (uint64_t i = 0; i <= t->mask; i++)
		n += __atomic_load_n(&t->slots[i].key, __ATOMIC_RELAXED) > LKR_HEAP_BUSY;
	return n;
}

/* The block at start, if it covers addr: 1; a block there that does not: -1; none: 0. */
static int covers(const struct lkr_heap_table *t, uint64_t start, uint64_t addr,
		  struct lkr_heap_block *b)
{
	if (!lkr_heap_get(t, start, b))
		return 0;
	return addr - start < b->size || (addr == start && !b->size) ? 1 : -1;
}

bool lkr_heap_find(const struct lkr_heap_table *t, uint64_t addr, uint64_t lowest,
		   struct lkr_heap_block *b)
{
	uint64_t start = addr & ~(uint64_t)(SMALL_STEP - 1), page;
	int found = 0;

	if (lowest <= LKR_HEAP_BUSY)
		lowest = LKR_HEAP_BUSY + 1;
	for (; !found && addr - start < SMALL_REACH && start >= lowest; start -= SMALL_STEP)
		found = covers(t, start, addr, b);
	page = start & ~(uint64_t)(PAGE - 1);
	for (; !found && addr - page < LARGE_REACH && page + MMAP_HEADER >= lowest; page -= PAGE) {
		found = covers(t, page + MMAP_HEADER, addr, b);
		if (!found)
			found = covers(t, page, addr, b);
	}
	return found > 0;
}
