// SPDX-License-Identifier: MIT
/*
 * Static keys in one program: the direction of every kind of site after every kind of flip, the
 * machine code at the sites, reference counting, batches, and bad input.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#include <lowkey/lowkey.h>

#include "sites.h"

LK_DEFINE_KEY_FALSE(basic_false);
LK_DEFINE_KEY_TRUE(basic_true);
static LK_DEFINE_KEY_FALSE(static_false);
static LK_DEFINE_KEY_FALSE(many);
static LK_DEFINE_KEY_FALSE(batch_a);
static LK_DEFINE_KEY_TRUE(batch_b);

int o0_unlikely_false(void);
int o0_likely_true(void);

/* One site of each kind. noinline: each function holds exactly one site. */
#define SITE_FN(fn, test, key)                        \
	static __attribute__((noinline)) int fn(void) \
	{                                             \
		if (test(&key))                       \
			return 1;                     \
		return 0;                             \
	}

SITE_FN(false_unlikely, lk_branch_unlikely, basic_false)
SITE_FN(false_likely, lk_branch_likely, basic_false)
SITE_FN(true_unlikely, lk_branch_unlikely, basic_true)
SITE_FN(true_likely, lk_branch_likely, basic_true)
SITE_FN(static_site, lk_branch_unlikely, static_false)
SITE_FN(batch_a_site, lk_branch_unlikely, batch_a)
SITE_FN(batch_b_site, lk_branch_likely, batch_b)

/*
 * Both keys' sites (here and in o0_sites.c) agree with the key, in behaviour and, for the two
 * patched sites here, in code; o0_sites.c's are load + branch.
 */
static void expect_false_key(bool on)
{
	assert_int_equal(false_unlikely(), on);
	assert_int_equal(false_likely(), on);
	assert_int_equal(o0_unlikely_false(), on);
	assert_int_equal(lk_key_enabled(&basic_false), on);
	assert_int_equal(lkt_check_sites(&basic_false), LKT_PATCHING ? 2 : 0);
}

static void expect_true_key(bool on)
{
	assert_int_equal(true_unlikely(), on);
	assert_int_equal(true_likely(), on);
	assert_int_equal(o0_likely_true(), on);
	assert_int_equal(lk_key_enabled(&basic_true), on);
	assert_int_equal(lkt_check_sites(&basic_true), LKT_PATCHING ? 2 : 0);
}

static void initial_directions(void **state)
{
	(void)state;
	expect_false_key(false);
	expect_true_key(true);
	assert_int_equal(static_site(), 0);
	/* the patched sites here; o0_sites.c's load + branch sites are not counted */
	assert_int_equal(lk_key_sites(&basic_false), LKT_PATCHING ? 2 : 0);
	assert_int_equal(lk_key_sites(&basic_true), LKT_PATCHING ? 2 : 0);
}

static void default_direction_is_a_nop(void **state)
{
#if LKT_PATCHING
	const struct lk__key_site *b = (const void *)__start___lk_key_sites;
	const struct lk__key_site *e = (const void *)__stop___lk_key_sites;
	int nops = 0;

	(void)state;
	for (; b < e; b++) {
		const uint8_t *code = (const uint8_t *)&b->code + b->code;
		const uint8_t *target = (const uint8_t *)&b->target + b->target;

		/* In their initial state, sites compiled as a NOP are NOPs, the others jumps. */
		if (b->ref & LK__SITE_INIT_JMP)
			assert_true(lkt_site_jumps_to(code, target));
		else
			assert_true(lkt_site_is_nop(code)), nops++;
	}
	assert_true(nops >= 4);
#else
	(void)state;
	skip();
#endif
}

static void enable_disable_every_kind(void **state)
{
	(void)state;
	assert_int_equal(lk_key_enable(&basic_false), 0);
	expect_false_key(true);
	assert_int_equal(lk_key_enable(&basic_false), 0); /* again: no change */
	expect_false_key(true);
	assert_int_equal(lk_key_disable(&basic_false), 0);
	expect_false_key(false);
	assert_int_equal(lk_key_disable(&basic_false), 0);
	expect_false_key(false);

	assert_int_equal(lk_key_disable(&basic_true), 0);
	expect_true_key(false);
	assert_int_equal(lk_key_enable(&basic_true), 0);
	expect_true_key(true);

	assert_int_equal(lk_key_enable(&static_false), 0);
	assert_int_equal(static_site(), 1);
	assert_int_equal(lk_key_disable(&static_false), 0);
	assert_int_equal(static_site(), 0);
}

static void reference_counting(void **state)
{
	(void)state;
	assert_int_equal(lk_key_inc(&basic_false), 0);
	expect_false_key(true);
	assert_int_equal(lk_key_inc(&basic_false), 0);
	assert_int_equal(lk_key_dec(&basic_false), 0);
	expect_false_key(true); /* one reference left */
	assert_int_equal(lk_key_dec(&basic_false), 0);
	expect_false_key(false);
	assert_int_equal(lk_key_dec(&basic_false), -EINVAL); /* below zero: refused */
	assert_non_null(strstr(lk_last_error(), "below zero"));
	expect_false_key(false);
	assert_int_equal(basic_false.key.lk__count, 0);

	/* A TRUE key starts with one reference. */
	assert_int_equal(lk_key_dec(&basic_true), 0);
	expect_true_key(false);
	assert_int_equal(lk_key_inc(&basic_true), 0);
	expect_true_key(true);

	/* disable drops every reference */
	assert_int_equal(lk_key_inc(&basic_false), 0);
	assert_int_equal(lk_key_inc(&basic_false), 0);
	assert_int_equal(lk_key_disable(&basic_false), 0);
	expect_false_key(false);
	assert_int_equal(basic_false.key.lk__count, 0);
}

static void overflow_refused(void **state)
{
	(void)state;
	assert_int_equal(lk_key_enable(&static_false), 0);
	static_false.key.lk__count = INT_MAX; /* rather than 2^31 calls */
	assert_int_equal(lk_key_inc(&static_false), -EOVERFLOW);
	assert_int_equal(static_false.key.lk__count, INT_MAX);
	assert_int_equal(static_site(), 1);
	assert_int_equal(lk_key_disable(&static_false), 0);
	assert_int_equal(static_site(), 0);
}

/* 64 sites of one key in one function (the compiler may duplicate some: each copy is a site). */
/* clang-format off */
#define MANY1(x) if (lk_branch_unlikely(&many)) hits += (x);
#define MANY8(x) MANY1(x) MANY1((x) + 1) MANY1((x) + 2) MANY1((x) + 3) \
		 MANY1((x) + 4) MANY1((x) + 5) MANY1((x) + 6) MANY1((x) + 7)
/* clang-format on */

static __attribute__((noinline)) int many_sites(void)
{
	int hits = 0;

	MANY8(0) MANY8(8) MANY8(16) MANY8(24) MANY8(32) MANY8(40) MANY8(48) MANY8(56) return hits;
}

static void many_sites_of_one_key(void **state)
{
	(void)state;
	int sites = lk_key_sites(&many);

	if (LKT_PATCHING)
		assert_true(sites >= 64);
	else
		assert_int_equal(sites, 0);
	assert_int_equal(many_sites(), 0);
	assert_int_equal(lk_key_enable(&many), 0);
	assert_int_equal(many_sites(), 63 * 64 / 2); /* every one of them taken */
	assert_int_equal(lkt_check_sites(&many), sites);
	assert_int_equal(lk_key_disable(&many), 0);
	assert_int_equal(many_sites(), 0);
	assert_int_equal(lkt_check_sites(&many), sites);
}

static void batch_applies_in_order(void **state)
{
	struct lk_key_change changes[] = {
		{ LK_KEY(&batch_a), LK_KEY_INC }, { LK_KEY(&batch_b), LK_KEY_DISABLE },
		{ LK_KEY(&batch_a), LK_KEY_INC }, { LK_KEY(&batch_a), LK_KEY_DEC },
		{ LK_KEY(&many), LK_KEY_ENABLE },
	};

	(void)state;
	assert_int_equal(lk_key_apply(changes, 5), 0);
	assert_int_equal(batch_a_site(), 1);
	assert_int_equal(batch_a.key.lk__count, 1);
	assert_int_equal(batch_b_site(), 0);
	assert_int_equal(many_sites(), 63 * 64 / 2);
	assert_int_equal(lkt_check_sites(&batch_a), LKT_PATCHING ? 1 : 0);
	assert_int_equal(lkt_check_sites(&batch_b), LKT_PATCHING ? 1 : 0);

	assert_int_equal(lk_key_apply(NULL, 0), 0); /* nothing to do */
}

static void batch_is_all_or_nothing(void **state)
{
	struct lk_key_change changes[] = {
		{ LK_KEY(&batch_b), LK_KEY_ENABLE },
		{ LK_KEY(&many), LK_KEY_DISABLE },
		{ LK_KEY(&batch_a), LK_KEY_DEC },
		{ LK_KEY(&batch_a), LK_KEY_DEC }, /* below zero */
	};
	struct lk_key_change null_key[] = {
		{ LK_KEY(&batch_b), LK_KEY_ENABLE },
		{ NULL, LK_KEY_ENABLE },
	};
	struct lk_key_change bad_op[] = {
		{ LK_KEY(&batch_b), LK_KEY_ENABLE },
		{ LK_KEY(&batch_a), (enum lk_key_op)42 },
	};

	(void)state;
	assert_int_equal(lk_key_apply(changes, 4), -EINVAL);
	assert_int_equal(lk_key_apply(null_key, 2), -EINVAL);
	assert_int_equal(lk_key_apply(bad_op, 2), -EINVAL);
	assert_int_equal(lk_key_apply(NULL, 3), -EINVAL);
	/* nothing changed */
	assert_int_equal(batch_b_site(), 0);
	assert_int_equal(many_sites(), 63 * 64 / 2);
	assert_int_equal(batch_a_site(), 1);
	assert_int_equal(batch_a.key.lk__count, 1);
	assert_int_equal(lkt_check_sites(&many), lk_key_sites(&many));

	assert_int_equal(lk_key_disable(&many), 0);
	assert_int_equal(lk_key_disable(&batch_a), 0);
	assert_int_equal(lk_key_enable(&batch_b), 0);
}

static void null_key_refused(void **state)
{
	(void)state;
	assert_int_equal(lk_key_enable((struct lk_key *)NULL), -EINVAL);
	assert_int_equal(lk_key_disable((struct lk_key *)NULL), -EINVAL);
	assert_int_equal(lk_key_inc((struct lk_key *)NULL), -EINVAL);
	assert_int_equal(lk_key_dec((struct lk_key *)NULL), -EINVAL);
	assert_int_equal(lk_key_sites((struct lk_key *)NULL), -EINVAL);
	assert_false(lk_key_enabled((struct lk_key *)NULL));
	assert_non_null(strstr(lk_last_error(), "NULL"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(initial_directions),
		cmocka_unit_test(default_direction_is_a_nop),
		cmocka_unit_test(enable_disable_every_kind),
		cmocka_unit_test(reference_counting),
		cmocka_unit_test(overflow_refused),
		cmocka_unit_test(many_sites_of_one_key),
		cmocka_unit_test(batch_applies_in_order),
		cmocka_unit_test(batch_is_all_or_nothing),
		cmocka_unit_test(null_key_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
