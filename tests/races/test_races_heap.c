// SPDX-License-Identifier: MIT
/*
 * The heap blocks of `lowkey races --heap` (include/internal/races_heap.h). First the table alone
 * (src/races/heap_table.c): a block is found by its start and by any byte inside it, not after it
 * is freed; the same start recorded again names the new allocation; a full table counts what it
 * could not record; threads inserting and removing at once lose nothing. Then
 * liblowkey-races-heap.so preloaded into this program (it runs itself again so): malloc, calloc,
 * realloc (moving a block, and of NULL), reallocarray, posix_memalign, aligned_alloc, memalign,
 * valloc and pvalloc each record their block with its size, this thread and a site in the
 * function that called them; free, and the realloc that moves a block, forget it; a global and
 * the stack are in no block; the program's malloc is the library's.
 */
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
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

/* Each thread's own addresses, recorded and freed in turn, found while live. */
static void *churn_main(void *arg)
{
	struct churn *c = arg;
	uint64_t base = 0x10000000ull * (c->id + 1);
	struct lkr_heap_block b;

	for (unsigned int r = 0; r < ROUNDS; r++) {
		uint64_t start = base + (uint64_t)(r % LIVE) * 48;

		if (r >= LIVE && !lkr_heap_remove(c->t, start, NULL))
			c->lost++;
		lkr_heap_insert(c->t, &(struct lkr_heap_block){ start, 48, r, c->id });
		if (!lkr_heap_find(c->t, start + 40, 0, &b) || b.site != r || b.tid != c->id)
			c->lost++;
	}
	return NULL;
}

static void threads_at_once_lose_nothing(void **state)
{
	struct lkr_heap_table *t = new_table(SLOTS);
	struct churn c[THREADS];
	pthread_t th[THREADS];

	(void)state;
	for (unsigned int i = 0; i < THREADS; i++) {
		c[i] = (struct churn){ t, i, 0 };
		assert_int_equal(pthread_create(&th[i], NULL, churn_main, &c[i]), 0);
	}
	for (unsigned int i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(c[i].lost, 0);
	}
	assert_int_equal(lkr_heap_count(t), THREADS * LIVE);
	assert_int_equal(t->dropped, 0);
	free_table(t);
}

/* ---- the library preloaded ---- */

static lkr_heap_find_fn find;

/* The block at p as the library recorded it: size, this thread, a site in the function at fn. */
static void recorded(void *p, uint64_t size, void (*fn)(void **))
{
	struct lkr_heap_block b;

	assert_non_null(p);
	assert_true(find((uintptr_t)p + (size ? size - 1 : 0), &b));
	assert_int_equal(b.start, (uintptr_t)p);
	assert_int_equal(b.size, size);
	assert_int_equal(b.tid, (uint32_t)syscall(SYS_gettid));
	/* a return address inside fn: after its start, within the few KiB a test function is */
	assert_true(b.site > (uintptr_t)fn && b.site < (uintptr_t)fn + 4096);
}

/* No block recorded at start (an address kept as a number: the block is freed). */
static void gone(uintptr_t start)
{
	struct lkr_heap_block b;

	assert_false(find(start, &b) && b.start == start);
}

static void the_programs_malloc_is_the_librarys(void **state)
{
	Dl_info info;

	(void)state;
	assert_true(dladdr(dlsym(RTLD_DEFAULT, "malloc"), &info));
	assert_non_null(strstr(info.dli_fname, "liblowkey-races-heap.so"));
	assert_non_null(find);
}

static void malloc_calloc_free(void **state)
{
	void *a = malloc(24), *b = calloc(3, 40);
	uintptr_t at = (uintptr_t)a, bt = (uintptr_t)b;

	(void)state;
	recorded(a, 24, malloc_calloc_free);
	recorded(b, 120, malloc_calloc_free);
	free(a);
	gone(at);
	free(b);
	gone(bt);
}

static void realloc_moves_and_renames(void **state)
{
	void *a = realloc(NULL, 32), *b;
	uintptr_t old = (uintptr_t)a;

	(void)state;
	recorded(a, 32, realloc_moves_and_renames);
	b = realloc(a, 1 << 20); /* too large to stay, as a rule: mapped anew */
	if ((uintptr_t)b != old)
		gone(old);
	recorded(b, 1 << 20, realloc_moves_and_renames);
	old = (uintptr_t)b;
	a = reallocarray(b, 100, 48);
	if ((uintptr_t)a != old)
		gone(old);
	recorded(a, 4800, realloc_moves_and_renames);
	old = (uintptr_t)a;
	free(a);
	gone(old);
}

static int a_global;

/* Not on the heap: a global (a file's mapping) and this thread's stack. */
static void not_heap_blocks(void **state)
{
	struct lkr_heap_block b;
	int local = 0;

	(void)state;
	assert_false(find((uintptr_t)&a_global, &b));
	assert_false(find((uintptr_t)&local, &b));
}

static void aligned_variants(void **state)
{
	void *p = NULL;
	uintptr_t start;

	(void)state;
	assert_int_equal(posix_memalign(&p, 256, 100), 0);
	recorded(p, 100, aligned_variants);
	free(p);
	p = aligned_alloc(64, 128);
	recorded(p, 128, aligned_variants);
	free(p);
	p = memalign(4096, 10);
	recorded(p, 10, aligned_variants);
	free(p);
	p = valloc(100);
	recorded(p, 100, aligned_variants);
	free(p);
	p = pvalloc(100);
	recorded(p, 100, aligned_variants);
	start = (uintptr_t)p;
	free(p);
	gone(start);
}

static int run_table_tests(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(found_inside_not_after),
		cmocka_unit_test(large_block_found),
		cmocka_unit_test(freed_is_forgotten_and_reallocated_renamed),
		cmocka_unit_test(full_table_counts_what_it_drops),
		cmocka_unit_test(threads_at_once_lose_nothing),
	};

	return cmocka_run_group_tests_name("table", tests, NULL, NULL);
}

static int run_preloaded_tests(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(the_programs_malloc_is_the_librarys),
		cmocka_unit_test(malloc_calloc_free),
		cmocka_unit_test(realloc_moves_and_renames),
		cmocka_unit_test(aligned_variants),
		cmocka_unit_test(not_heap_blocks),
	};

	find = (lkr_heap_find_fn)dlsym(RTLD_DEFAULT, LKR_HEAP_FIND_SYMBOL);
	return cmocka_run_group_tests_name("preloaded", tests, NULL, NULL);
}

int main(int argc, char **argv)
{
	(void)argc;
	if (!getenv("LKT_HEAP_PRELOADED")) {
		int failed = run_table_tests();

		if (failed)
			return failed;
		setenv("LKT_HEAP_PRELOADED", "1", 1);
		setenv("LD_PRELOAD", HEAP_LIB, 1);
		execv("/proc/self/exe", argv);
		perror("execv");
		return 1;
	}
	return run_preloaded_tests();
}
