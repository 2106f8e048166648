// SPDX-License-Identifier: MIT
/*
 * Method page (cap_user_time), which this machine's kernel does not offer: the formula against
 * synthetic pages (x86 and arm64 "short" counters), then the whole method (fast path, rebases,
 * losing cap_user_time) on this thread with a synthetic page standing in for the kernel's.
 * Linked with the static library to reach the internals.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <cmocka.h>

#include "clock_test.h"

/* cyc * mult >> shift for any cyc, the long way. */
static uint64_t cyc2ns(uint64_t cyc, uint32_t mult, uint16_t shift)
{
	return (uint64_t)(((unsigned __int128)cyc * mult) >> shift);
}

static void fill(struct perf_event_mmap_page *p, uint32_t mult, uint16_t shift, uint64_t offset,
		 uint64_t time_offset)
{
	memset(p, 0, sizeof(*p));
	p->cap_user_time = 1;
	p->time_mult = mult;
	p->time_shift = shift;
	p->offset = (int64_t)offset;
	p->time_offset = time_offset;
	p->lock = 42;
}

static void formula(void **state)
{
	static struct perf_event_mmap_page p;
	uint64_t cycles[] = { 0,	  1,	12345, 1ull << 32, 3ull << 40, 0x7fffffffffffull,
			      1ull << 62, ~0ull };
	uint64_t tc;

	(void)state;
	/* ~2.3 GHz as x86's cyc2ns would say it, and a 1 GHz counter with shift 0. */
	struct {
		uint32_t mult;
		uint16_t shift;
	} scales[] = { { 466848833u, 30 }, { 1, 0 }, { 0xffffffffu, 31 } };
	for (size_t s = 0; s < sizeof(scales) / sizeof(scales[0]); s++)
		for (size_t i = 0; i < sizeof(cycles) / sizeof(cycles[0]); i++) {
			uint64_t time_offset = (uint64_t)-1000000;

			fill(&p, scales[s].mult, scales[s].shift, 5000, time_offset);
			assert_true(lk__page_task_clock(&p, cycles[i], &tc));
			assert_int_equal(tc, 5000 + time_offset +
						     cyc2ns(cycles[i], scales[s].mult,
							    scales[s].shift));
		}
}

static void short_counter(void **state)
{
	static struct perf_event_mmap_page p;
	uint64_t tc;

	(void)state;
	/* arm64: a 56-bit counter; only its low bits past time_cycles count. */
	fill(&p, 1u << 24, 24, 0, 0);
	p.cap_user_time_short = 1;
	p.time_cycles = 1000;
	p.time_mask = (1ull << 56) - 1;
	assert_true(lk__page_task_clock(&p, 1500, &tc));
	assert_int_equal(tc, 1500);
	/* A raw read whose high bits differ from time_cycles' (wrapped): only the masked delta
	 * counts. */
	assert_true(lk__page_task_clock(&p, (1ull << 60) | 1500, &tc));
	assert_int_equal(tc, 1500);
}

static void without_cap_user_time(void **state)
{
	static struct perf_event_mmap_page p;
	uint64_t tc = 7;

	(void)state;
	fill(&p, 1, 0, 0, 0);
	p.cap_user_time = 0;
	assert_false(lk__page_task_clock(&p, 100, &tc));
	fill(&p, 1, 0, 0, 0);
	p.index = 3; /* a hardware counter: its count is not in `offset` alone */
	assert_false(lk__page_task_clock(&p, 100, &tc));
	assert_int_equal(tc, 7);
}

/* ---- the method, end to end, on a synthetic page ---- */

static struct perf_event_mmap_page fake __attribute__((aligned(4096)));

/* A page that says: the task clock was `ns` at counter value now, and runs with the counter. */
static void fake_now(void)
{
	struct lk_clock_info info;
	uint16_t shift = 30;
	uint32_t mult;
	uint64_t c0, ns0;

	assert_int_equal(lk_clock_info(&info), 0);
	assert_true(info.tsc_hz > 0);
	mult = (uint32_t)((1000000000ull << shift) / info.tsc_hz);
	ns0 = sys_cputime();
	c0 = lk__arch_counter();
	/* delta = time_offset + cyc2ns(cyc) must be cyc2ns(cyc) - cyc2ns(c0), as the kernel's
	 * quotient/remainder form computes it. */
	fill(&fake, mult, shift, ns0,
	     -((c0 >> shift) * mult + (((c0 & ((1ull << shift) - 1)) * mult) >> shift)));
}

static void page_method_end_to_end(void **state)
{
	struct lk__cputime_thread *t = &lk__cputime_tls;
	const volatile struct perf_event_mmap_page *real;
	struct cputime_bounds b;
	uint32_t real_method;
	uint64_t prev = 0;

	(void)state;
	lk_thread_cputime_ns();
	if (t->state != LK__T_FAST || !lk__clock.counter.usable)
		skip(); /* no task-clock page here: nothing to stand in for */
	b = cputime_bounds();
	real = t->page;
	real_method = t->method;
	fake_now();

	t->page = &fake;
	t->switch_check = false; /* the fake page follows no switches, by design */
	t->method = LK_CPUTIME_PAGE;
	t->max_age = lk__clock.rebase_ns;
	t->base.tag = LK__TAG_INVALID;
	t->ready = 0; /* the next call rebases, then the fast path runs */
	for (int i = 0; i < 20000; i++) {
		assert_true(cputime_sample_ok(b, &prev));
		if (i % 1000 == 999)
			burn(300000); /* past the rebase interval */
	}
	assert_int_equal(t->method, LK_CPUTIME_PAGE);
	assert_int_not_equal(t->ready, 0);

	/* The kernel clears cap_user_time (it marked the TSC unstable): the thread goes on with
	 * method seq, on the same page. */
	fake.cap_user_time = 0;
	burn(300000);
	assert_true(cputime_sample_ok(b, &prev));
	assert_int_equal(t->method, LK_CPUTIME_SEQ);

	/* Back to the real page, which kept following the thread's switches meanwhile. */
	t->page = real;
	t->switch_check = true;
	t->method = real_method;
	t->max_age = lk__ns_to_cycles(lk__clock.rebase_ns);
	t->base.tag = LK__TAG_INVALID;
	for (int i = 0; i < 1000; i++)
		assert_true(cputime_sample_ok(b, &prev));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(formula),
		cmocka_unit_test(short_counter),
		cmocka_unit_test(without_cap_user_time),
		cmocka_unit_test(page_method_end_to_end),
	};

	setenv("LOWKEY_CLOCK_REBASE_US", "200", 1);
	unsetenv("LOWKEY_CLOCK");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
