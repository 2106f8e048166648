/* SPDX-License-Identifier: MIT */
/*
 * Bursts of accesses on a machine that drops debug traps. On our KVM guest, under load, a thread's
 * breakpoint sometimes goes quiet for a few microseconds after a hit, and the next accesses of a
 * burst are never raised: the kernel does not count them either (`perf record -e mem:ADDR:w` and a
 * program's own counting breakpoint show it without lowkey; docs/watch.md). A test of a burst
 * therefore checks lowkey's part on every attempt -- each access the kernel counted reached
 * lowkey (lk_watch_counted) -- and runs again, WATCH_ATTEMPTS times in all, when the kernel
 * counted fewer accesses than were made. A lowkey that misses accesses misses them every time.
 * Include after cmocka.h.
 */
#ifndef LK_TEST_WATCH_ATTEMPTS_H
#define LK_TEST_WATCH_ATTEMPTS_H

#include <stdint.h>

#include <lowkey/watch.h>

#define WATCH_ATTEMPTS 3

enum attempt { ALL_COUNTED, MACHINE_MISSED };

/*
 * After a burst of `made` accesses to w: asserts that every access the kernel counted reached
 * lowkey, and says whether the kernel counted them all (traps that came unattributed, `lost`,
 * are accesses lowkey saw without knowing whose).
 */
static inline enum attempt burst_counted(struct lk_watch *w, uint64_t made, uint64_t lost)
{
	struct lk_watch_stats st;
	uint64_t counted = 0;

	assert_int_equal(lk_watch_stats(w, &st), 0);
	assert_int_equal(lk_watch_counted(w, &counted), 0);
	assert_int_equal(st.hits + st.ignored, counted);
	if (counted + lost < made) {
		print_message("the kernel counted %llu of %llu accesses (%llu unattributed)\n",
			      (unsigned long long)counted, (unsigned long long)made,
			      (unsigned long long)lost);
		return MACHINE_MISSED;
	}
	assert_int_equal(counted + lost, made);
	return ALL_COUNTED;
}

/* Run attempt() until the kernel counted every access of its burst, WATCH_ATTEMPTS times at most. */
static inline void with_attempts(enum attempt (*attempt)(void), const char *what)
{
	for (int i = 1; i <= WATCH_ATTEMPTS; i++) {
		if (attempt() == ALL_COUNTED)
			return;
		print_message("%s: attempt %d of %d missed accesses\n", what, i, WATCH_ATTEMPTS);
	}
	fail_msg("%s: accesses uncounted in all %d attempts: the watchpoint does not cover them",
		 what, WATCH_ATTEMPTS);
}

#endif
