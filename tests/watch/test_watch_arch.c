// SPDX-License-Identifier: MIT
/*
 * What each architecture's debug registers accept, as lowkey checks it before any system call,
 * and which watchpoints each architecture refuses outright. Runs natively and under qemu-user
 * (CROSS_TESTS: label "arch"), where perf_event_open() is missing: a request the checks accept
 * then fails with something other than -EINVAL, which is all this test asks of it.
 *
 * x86-64: 1, 2, 4, 8 bytes aligned to their length. arm64: 1 to 8 bytes inside one aligned
 * doubleword, execution at 4-byte-aligned addresses, and no watchpoint that signals the thread
 * (the kernel's step over the access goes wrong with a signal: src/watch/arch/aarch64.c).
 * Elsewhere every watchpoint is -EOPNOTSUPP.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <lowkey/error.h>
#include <lowkey/watch.h>

static _Alignas(16) volatile uint8_t area[32];

struct request {
	unsigned int offset; /* into area, which is 16-byte aligned */
	size_t len;
	unsigned int access;
	bool accepted; /* by lowkey's checks; the kernel may still refuse */
};

#if defined(__x86_64__)
static const struct request requests[] = {
	{ 0, 8, LK_WATCH_WRITE, true },	 { 4, 4, LK_WATCH_READWRITE, true },
	{ 6, 2, LK_WATCH_WRITE, true },	 { 3, 1, LK_WATCH_WRITE, true },
	{ 4, 8, LK_WATCH_WRITE, false }, /* not aligned to its length */
	{ 1, 2, LK_WATCH_WRITE, false }, { 0, 3, LK_WATCH_WRITE, false }, /* not a power of two */
	{ 0, 0, LK_WATCH_WRITE, false }, { 0, 2, LK_WATCH_EXEC, false },  /* execute takes len 1 */
};
#define SIGNALS_SUPPORTED true
#define REFUSED (-EINVAL)
#elif defined(__aarch64__)
static const struct request requests[] = {
	{ 0, 8, LK_WATCH_WRITE, true },
	{ 1, 3, LK_WATCH_WRITE, true }, /* any bytes of one doubleword */
	{ 5, 3, LK_WATCH_READWRITE, true },
	{ 7, 1, LK_WATCH_WRITE, true },
	{ 6, 3, LK_WATCH_WRITE, false }, /* crosses the doubleword */
	{ 4, 8, LK_WATCH_WRITE, false },
	{ 0, 9, LK_WATCH_WRITE, false },
	{ 0, 0, LK_WATCH_WRITE, false },
	{ 0, 1, LK_WATCH_EXEC, true },
	{ 2, 1, LK_WATCH_EXEC, false }, /* instructions are 4-byte aligned */
	{ 0, 4, LK_WATCH_EXEC, false }, /* execute takes len 1 */
};
#define SIGNALS_SUPPORTED false
#define REFUSED (-EINVAL)
#else
static const struct request requests[] = {
	{ 0, 8, LK_WATCH_WRITE, false },
};
#define SIGNALS_SUPPORTED false
#define REFUSED (-EOPNOTSUPP)
#endif

static const char *access_name(unsigned int access)
{
	return access == LK_WATCH_EXEC ? "exec" : access == LK_WATCH_WRITE ? "write" : "readwrite";
}

/*
 * The sampler takes every access kind and signals nothing, so it shows the length checks on every
 * architecture that has them.
 */
static void test_lengths(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(requests) / sizeof(requests[0]); i++) {
		const struct request *r = &requests[i];
		struct lk_watch_sampler *s = NULL;
		int err = lk_watch_sampler_open(
			&s, getpid(), (uint64_t)(uintptr_t)(area + r->offset), r->len, r->access);

		printf("%s %zu bytes at +%u: %d (%s)\n", access_name(r->access), r->len, r->offset,
		       err, err ? lk_last_error() : "opened");
		if (r->accepted) {
			assert_int_not_equal(err, -EINVAL);
		} else {
			assert_int_equal(err, REFUSED);
			assert_null(s);
		}
		lk_watch_sampler_close(s);
	}
}

static void noop(const struct lk_watch_hit *hit, void *arg)
{
	(void)hit, (void)arg;
}

static void test_signalling_watchpoints(void **state)
{
	struct lk_watch *w = NULL;
	int err;

	(void)state;
	err = lk_watch_add(&w, (const void *)area, 8, LK_WATCH_WRITE, noop, NULL);
	printf("lk_watch_add: %d (%s)\n", err, err ? lk_last_error() : "added");
	if (SIGNALS_SUPPORTED) {
		assert_int_not_equal(err, -EINVAL);
		assert_int_not_equal(err, -EOPNOTSUPP);
	} else {
		assert_int_equal(err, -EOPNOTSUPP);
		assert_null(w);
#if defined(__aarch64__)
		assert_non_null(strstr(lk_last_error(), "arm64"));
		assert_non_null(strstr(lk_last_error(), "lk_watch_sampler_open()"));
#endif
	}
	if (w)
		lk_watch_remove(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lengths),
		cmocka_unit_test(test_signalling_watchpoints),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
