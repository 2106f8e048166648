// SPDX-License-Identifier: MIT
/*
 * Sites run in tight loops by several threads while other threads flip their keys: at least
 * the build's count of flips (flips.h). No thread may crash, and every observation must be valid:
 *
 * The flipper makes `generation` odd while a flip is under way and even once the flip has
 * returned; an even generation g means the key is on iff (g / 2) is odd. A runner reads the
 * generation, runs the site, reads it again: if both reads saw the same even value, the flip
 * that produced it had completed before the site ran (its final core sync came first), so the
 * site must have gone the key's way. Otherwise the site raced a flip and either way is valid:
 * the site's two paths return 0 and 1, and anything else -- or a crash -- is a failure (see
 * `emulated` for the one allowance under qemu-user). Sites are
 * run from functions of their own and inlined into the runner's loop.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cmocka.h>

#include <lowkey/lowkey.h>

#include "flips.h"
#include "settled.h"

#define RUNNERS 3

static LK_DEFINE_KEY_FALSE(stress_key);
static LK_DEFINE_KEY_TRUE(stress_true_key);
static LK_DEFINE_KEY_FALSE(batch_x);
static LK_DEFINE_KEY_FALSE(batch_y);

static unsigned long generation, batch_generation;
static int stop;

struct tally {
	unsigned long observed, checked, wrong, stale;
};

/* Under qemu-user a run of the key's previous direction is stale, not wrong (settled.h). */
static bool emulated;

static __attribute__((noinline)) int site_unlikely(void)
{
	if (lk_branch_unlikely(&stress_key))
		return 1;
	return 0;
}

/* The same key through a likely site, and a TRUE key flipped in the opposite phase. */
static __attribute__((noinline)) int site_likely(void)
{
	if (lk_branch_likely(&stress_key))
		return 1;
	return 0;
}

static __attribute__((noinline)) int site_true_key(void)
{
	if (lk_branch_likely(&stress_true_key))
		return 0;
	return 1; /* inverted: stress_true_key is off exactly when stress_key is on */
}

static __attribute__((noinline)) int site_batch(void)
{
	int x = lk_branch_unlikely(&batch_x) ? 1 : 0;
	int y = lk_branch_unlikely(&batch_y) ? 1 : 0;

	return x * 2 + y;
}

static void check(struct tally *t, unsigned long g1, int r, unsigned long g2, int values)
{
	t->observed++;
	if (r < 0 || r >= values) {
		t->wrong++;
		return;
	}
	if (g1 != g2 || (g1 & 1))
		return;
	t->checked++;
	bool on = (g1 / 2) & 1;
	int want = values == 2 ? on : (on ? 3 : 0), before = values == 2 ? !on : (on ? 0 : 3);

	if (r == want)
		return;
	if (emulated && r == before)
		t->stale++;
	else
		t->wrong++;
}

/* A site in a function of its own. */
static void observe(struct tally *t, unsigned long *gen, int (*site)(void), int values)
{
	unsigned long g1 = __atomic_load_n(gen, __ATOMIC_ACQUIRE);
	int r = site();
	unsigned long g2 = __atomic_load_n(gen, __ATOMIC_ACQUIRE);

	check(t, g1, r, g2, values);
}

/*
 * A site inlined between the two reads (the compiler barriers keep it there): in straight-line
 * code with them, which an emulator translates as one block.
 */
#define OBSERVE_INLINED(t, gen, on)                                           \
	do {                                                                  \
		unsigned long g1_ = __atomic_load_n(gen, __ATOMIC_ACQUIRE);   \
		int r_;                                                       \
		__asm__ __volatile__("" : : : "memory");                      \
		r_ = (on) ? 1 : 0;                                            \
		__asm__ __volatile__("" : : : "memory");                      \
		check(t, g1_, r_, __atomic_load_n(gen, __ATOMIC_ACQUIRE), 2); \
	} while (0)

static void *runner(void *arg)
{
	struct tally *t = arg;

	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		observe(t, &generation, site_unlikely, 2);
		observe(t, &generation, site_likely, 2);
		observe(t, &generation, site_true_key, 2);
		observe(t, &batch_generation, site_batch, 4);
		OBSERVE_INLINED(t, &generation, lk_branch_unlikely(&stress_key));
		OBSERVE_INLINED(t, &generation, lk_branch_likely(&stress_key));
	}
	return NULL;
}

/* Flips stress_key and stress_true_key together, in one batch, in opposite directions. */
static void *flipper(void *arg)
{
	unsigned long n = *(unsigned long *)arg;

	for (unsigned long i = 0; i < n; i++) {
		bool on = !(i & 1);
		struct lk_key_change c[] = {
			{ LK_KEY(&stress_key), on ? LK_KEY_ENABLE : LK_KEY_DISABLE },
			{ LK_KEY(&stress_true_key), on ? LK_KEY_DISABLE : LK_KEY_ENABLE },
		};

		__atomic_add_fetch(&generation, 1, __ATOMIC_RELEASE);
		if (lk_key_apply(c, 2) != 0)
			abort();
		__atomic_add_fetch(&generation, 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

/* Meanwhile another thread flips two other keys in batches: concurrent flips of different keys. */
static void *batch_flipper(void *arg)
{
	unsigned long n = *(unsigned long *)arg / 10;

	for (unsigned long i = 0; i < n; i++) {
		enum lk_key_op op = (i & 1) ? LK_KEY_DEC : LK_KEY_INC;
		struct lk_key_change c[] = { { LK_KEY(&batch_x), op }, { LK_KEY(&batch_y), op } };

		__atomic_add_fetch(&batch_generation, 1, __ATOMIC_RELEASE);
		if (lk_key_apply(c, 2) != 0)
			abort();
		__atomic_add_fetch(&batch_generation, 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

static void flips_while_sites_run(void **state)
{
	unsigned long n = lkt_flips();
	struct tally tallies[RUNNERS] = { 0 };
	pthread_t runners[RUNNERS], flip, batch;
	unsigned long observed = 0, checked = 0, wrong = 0, stale = 0;

	(void)state;
	emulated = lkt_under_emulator();
	for (int i = 0; i < RUNNERS; i++)
		assert_int_equal(pthread_create(&runners[i], NULL, runner, &tallies[i]), 0);
	assert_int_equal(pthread_create(&flip, NULL, flipper, &n), 0);
	assert_int_equal(pthread_create(&batch, NULL, batch_flipper, &n), 0);
	pthread_join(flip, NULL);
	pthread_join(batch, NULL);
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < RUNNERS; i++) {
		pthread_join(runners[i], NULL);
		observed += tallies[i].observed;
		checked += tallies[i].checked;
		wrong += tallies[i].wrong;
		stale += tallies[i].stale;
	}
	print_message("%lu flips, %lu observations, %lu checked against a settled key, %lu wrong\n",
		      n, observed, checked, wrong);
	if (emulated)
		print_message(
			"under an emulator: %lu stale (the previous direction, from an old translation)\n",
			stale);
	assert_int_equal(wrong, 0);
	assert_true(checked > 0);
	/* the flipper ended on a disable; the batch flipper on a DEC */
	assert_false(lk_key_enabled(&stress_key));
	assert_int_equal(site_unlikely(), 0);
	assert_int_equal(site_batch(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(flips_while_sites_run),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
