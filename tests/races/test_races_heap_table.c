// SPDX-License-Identifier: MIT
/*
 * The table of heap blocks behind `lowkey races --heap` alone (src/races/heap_table.c,
 * include/internal/races_heap.h): a block is found by its start and by any byte inside it, not
 * after it is freed; the same start recorded again names the new allocation; a full table counts
 * what it could not record; threads inserting and removing at once lose nothing, while another
 * reads their blocks and never gets the fields of two records mixed. Nothing is preloaded: it runs
 * in every build, ThreadSanitizer's included, which checks that the threads' accesses to the
 * shared slots are all atomic.
 */
#include <pthread.h>
#include <stdbool.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <cmocka.h>

#include "internal/races_heap.h"

#define SLOTS 4096u
#define THREADS 4
#define ROUNDS 20000
#define LIVE 64 /* blocks each thread keeps at once */

static struct lkr_heap_table *new_table(uint64_t slots)
{
	struct lkr_heap_table *t = calloc(1, sizeof(*t));

	assert_non_null(t);
	t->slots = mmap(NULL, lkr_heap_table_bytes(slots), PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(t->slots != MAP_FAILED);
	t->mask = slots - 1;
	return t;
}

static void free_table(struct lkr_heap_table *t)
{
	munmap(t->slots, lkr_heap_table_bytes(t->mask + 1));
	free(t);
}

static void insert(struct lkr_heap_table *t, uint64_t start, uint64_t size, uint64_t site)
{
	assert_true(lkr_heap_insert(t, &(struct lkr_heap_block){ start, size, site, 7 }));
}

static void found_inside_not_after(void **state)
{
	struct lkr_heap_table *t = new_table(SLOTS);
	struct lkr_heap_block b;

	(void)state;
	insert(t, 0x10000, 24, 0x401000);
	insert(t, 0x10020, 40, 0x402000);
	assert_true(lkr_heap_get(t, 0x10000, &b));
	assert_int_equal(b.size, 24);
	assert_int_equal(b.site, 0x401000);
	assert_int_equal(b.tid, 7);
	assert_true(lkr_heap_find(t, 0x10008, 0, &b)); /* inside the first */
	assert_int_equal(b.start, 0x10000);
	assert_true(lkr_heap_find(t, 0x10047, 0, &b)); /* the last byte of the second */
	assert_int_equal(b.start, 0x10020);
	assert_false(lkr_heap_find(t, 0x10018, 0, &b));	      /* between them: in neither */
	assert_false(lkr_heap_find(t, 0x10048, 0, &b));	      /* after the second */
	assert_false(lkr_heap_find(t, 0x10028, 0x10030, &b)); /* its start below the mapping's */
	assert_int_equal(lkr_heap_count(t), 2);
	free_table(t);
}

/* A large block mapped by the allocator: a page, its header, the block; found far inside it. */
static void large_block_found(void **state)
{
	struct lkr_heap_table *t = new_table(SLOTS);
	struct lkr_heap_block b;
	uint64_t start = 0x7f0000000010ull, size = 8ull << 20;

	(void)state;
	insert(t, start, size, 0x401000);
	assert_true(lkr_heap_find(t, start + size - 8, 0, &b));
	assert_int_equal(b.start, start);
	assert_int_equal(b.size, size);
	assert_false(lkr_heap_find(t, start + size, 0, &b));
	free_table(t);
}

static void freed_is_forgotten_and_reallocated_renamed(void **state)
{
	struct lkr_heap_table *t = new_table(SLOTS);
	struct lkr_heap_block b;

	(void)state;
	insert(t, 0x20000, 24, 0x401000);
	assert_true(lkr_heap_remove(t, 0x20000, &b));
	assert_int_equal(b.site, 0x401000);
	assert_false(lkr_heap_find(t, 0x20008, 0, &b));
	assert_false(lkr_heap_remove(t, 0x20000, NULL));
	/* the same start again, from another site, then once more without a free in between */
	insert(t, 0x20000, 32, 0x403000);
	assert_true(lkr_heap_find(t, 0x20008, 0, &b));
	assert_int_equal(b.site, 0x403000);
	assert_int_equal(b.size, 32);
	insert(t, 0x20000, 16, 0x404000);
	assert_true(lkr_heap_find(t, 0x20008, 0, &b));
	assert_int_equal(b.site, 0x404000);
	assert_int_equal(lkr_heap_count(t), 1);
	free_table(t);
}

/* LKR_HEAP_PROBES slots: every one reachable from any hash, and one block more is dropped. */
static void full_table_counts_what_it_drops(void **state)
{
	struct lkr_heap_table *t = new_table(LKR_HEAP_PROBES);
	struct lkr_heap_block b;

	(void)state;
	for (uint64_t i = 0; i < LKR_HEAP_PROBES; i++)
		insert(t, 0x100000 + i * 64, 32, 0x401000);
	assert_false(lkr_heap_insert(t, &(struct lkr_heap_block){ 0x200000, 32, 0x401000, 7 }));
	assert_int_equal(t->dropped, 1);
	assert_false(lkr_heap_get(t, 0x200000, &b));
	assert_true(lkr_heap_remove(t, 0x100000, NULL)); /* a freed slot is used again */
	insert(t, 0x200000, 32, 0x402000);
	assert_true(lkr_heap_get(t, 0x200000, &b));
	assert_int_equal(t->dropped, 1);
	free_table(t);
}

struct churn {
	struct lkr_heap_table *t;
	unsigned int id;
	unsigned int lost; /* blocks not found while live */
};

static uint64_t base_of(unsigned int id)
{
	return 0x10000000ull * (id + 1);
}

/* The size of the block of round r: records of one start differ from the one before. */
static uint64_t size_of_round(uint64_t r)
{
	return 40 + 8 * (r / LIVE % 2);
}

/* Each thread's own addresses, recorded and freed in turn, found while live. */
static void *churn_main(void *arg)
{
	struct churn *c = arg;
	struct lkr_heap_block b;

	for (unsigned int r = 0; r < ROUNDS; r++) {
		uint64_t start = base_of(c->id) + (uint64_t)(r % LIVE) * 48;

		if (r >= LIVE && !lkr_heap_remove(c->t, start, NULL))
			c->lost++;
		lkr_heap_insert(c->t,
				&(struct lkr_heap_block){ start, size_of_round(r), r, c->id });
		if (!lkr_heap_find(c->t, start + 39, 0, &b) || b.site != r || b.tid != c->id ||
		    b.size != size_of_round(r))
			c->lost++;
	}
	return NULL;
}

struct watcher {
	struct lkr_heap_table *t;
	bool stop;
	unsigned int found, torn; /* torn: fields of two records, or of another block */
};

/* One look at every address the churning threads use, as the sampler looks for a race's block. */
static void watch_once(struct watcher *w)
{
	struct lkr_heap_block b;

	for (unsigned int id = 0; id < THREADS; id++) {
		for (unsigned int k = 0; k < LIVE; k++) {
			uint64_t start = base_of(id) + (uint64_t)k * 48;

			if (!lkr_heap_find(w->t, start + 39, 0, &b))
				continue;
			w->found++;
			if (b.start != start || b.tid != id || b.site % LIVE != k ||
			    b.size != size_of_round(b.site))
				w->torn++;
		}
	}
}

/* Another thread reading the blocks while they are written, then once after. */
static void *watcher_main(void *arg)
{
	struct watcher *w = arg;

	while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE))
		watch_once(w);
	watch_once(w);
	return NULL;
}

static void threads_at_once_lose_nothing(void **state)
{
	struct lkr_heap_table *t = new_table(SLOTS);
	struct watcher w = { t, false, 0, 0 };
	struct churn c[THREADS];
	pthread_t th[THREADS], watcher;

	(void)state;
	assert_int_equal(pthread_create(&watcher, NULL, watcher_main, &w), 0);
	for (unsigned int i = 0; i < THREADS; i++) {
		c[i] = (struct churn){ t, i, 0 };
		assert_int_equal(pthread_create(&th[i], NULL, churn_main, &c[i]), 0);
	}
	for (unsigned int i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(c[i].lost, 0);
	}
	__atomic_store_n(&w.stop, true, __ATOMIC_RELEASE);
	pthread_join(watcher, NULL);
	assert_int_equal(w.torn, 0);
	assert_true(w.found >= THREADS * LIVE); /* the last look finds every live block */
	assert_int_equal(lkr_heap_count(t), THREADS * LIVE);
	assert_int_equal(t->dropped, 0);
	free_table(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(found_inside_not_after),
		cmocka_unit_test(large_block_found),
		cmocka_unit_test(freed_is_forgotten_and_reallocated_renamed),
		cmocka_unit_test(full_table_counts_what_it_drops),
		cmocka_unit_test(threads_at_once_lose_nothing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
