// SPDX-License-Identifier: MIT
/*
 * liblowkey-races-heap.so preloaded into this program (it runs itself again so), behind
 * `lowkey races --heap` (include/internal/races_heap.h; the table alone: test_races_heap_table.c):
 * malloc, calloc, realloc (moving a block, and of NULL), reallocarray, posix_memalign,
 * aligned_alloc, memalign, valloc and pvalloc each record their block with its size, this thread
 * and a site in the function that called them; free, and the realloc that moves a block, forget
 * it; a global and the stack are in no block; the program's malloc is the library's. So is C++'s
 * operator new, called from a C++ library this C program opened RTLD_LOCAL (races_new_plugin.cpp):
 * each of its eight forms records the size asked for and a site in its caller, not in the C++
 * library's operator new, and operator delete forgets the block.
 */
#include <dlfcn.h>
#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cmocka.h>

#include "internal/races_heap.h"

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
	assert_true(dladdr(dlsym(RTLD_DEFAULT, "_Znwm"), &info)); /* operator new(unsigned long) */
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

/* races_new_plugin.cpp, a C++ library opened RTLD_LOCAL: operator new and delete, by form. */
static void *(*plugin_new)(int form, size_t size, size_t align);
static void (*plugin_delete)(int form, void *p, size_t align);

#define FORMS 8 /* plain, nothrow, aligned, aligned nothrow; odd: new[] */

/* The block at p as the library recorded it, with a site in the plugin's function. */
static void recorded_by_plugin(void *p, uint64_t size)
{
	struct lkr_heap_block b;

	assert_non_null(p);
	assert_true(find((uintptr_t)p, &b));
	assert_int_equal(b.start, (uintptr_t)p);
	assert_int_equal(b.size, size);
	assert_int_equal(b.tid, (uint32_t)syscall(SYS_gettid));
	assert_true(b.site > (uintptr_t)plugin_new && b.site < (uintptr_t)plugin_new + 4096);
}

/*
 * Each form of operator new, called first from a C++ library this C program opened RTLD_LOCAL
 * (its C++ library out of reach of RTLD_NEXT): the size asked for (an aligned one asks
 * aligned_alloc for a multiple of its alignment; operator new(0) for 1 byte) and a site in the
 * function that called it, not in the C++ library; operator delete (free()) forgets it.
 */
static void operator_new_names_its_caller(void **state)
{
	static const size_t sizes[FORMS] = { 0, 40, 24, 56, 100, 200, 10, 30 };
	static const size_t aligns[FORMS] = { 0, 0, 0, 0, 64, 256, 32, 128 };

	(void)state;
	for (int form = 0; form < FORMS; form++) {
		void *p = plugin_new(form, sizes[form], aligns[form]);

		recorded_by_plugin(p, sizes[form]);
		plugin_delete(form, p, aligns[form]);
		gone((uintptr_t)p);
	}
}

/* A nothrow operator new that fails returns NULL, and the next block is recorded as before. */
static void operator_new_nothrow_fails_as_its_own(void **state)
{
	void *p;

	(void)state;
	assert_null(plugin_new(2, (size_t)1 << 62, 0));
	assert_null(plugin_new(6, (size_t)1 << 62, 64));
	p = plugin_new(0, 48, 0);
	recorded_by_plugin(p, 48);
	plugin_delete(0, p, 0);
}

static int run_preloaded_tests(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(the_programs_malloc_is_the_librarys),
		cmocka_unit_test(malloc_calloc_free),
		cmocka_unit_test(realloc_moves_and_renames),
		cmocka_unit_test(aligned_variants),
		cmocka_unit_test(not_heap_blocks),
		cmocka_unit_test(operator_new_names_its_caller),
		cmocka_unit_test(operator_new_nothrow_fails_as_its_own),
	};

	void *plugin = dlopen(NEW_PLUGIN, RTLD_NOW | RTLD_LOCAL);

	if (!plugin) {
		fprintf(stderr, "%s\n", dlerror());
		return 1;
	}
	plugin_new = (void *(*)(int, size_t, size_t))dlsym(plugin, "races_plugin_new");
	plugin_delete = (void (*)(int, void *, size_t))dlsym(plugin, "races_plugin_delete");
	find = (lkr_heap_find_fn)dlsym(RTLD_DEFAULT, LKR_HEAP_FIND_SYMBOL);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

int main(int argc, char **argv)
{
	(void)argc;
	if (!getenv("LKT_HEAP_PRELOADED")) {
		setenv("LKT_HEAP_PRELOADED", "1", 1);
		setenv("LD_PRELOAD", HEAP_LIB, 1);
		execv("/proc/self/exe", argv);
		perror("execv");
		return 1;
	}
	return run_preloaded_tests();
}
