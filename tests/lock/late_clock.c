// SPDX-License-Identifier: MIT
/*
 * Linked into a second test_lockstat: the first reading of each clock in the process comes back
 * 10 ms after it was taken, as when the thread is preempted just after it. The library reads a
 * clock next to the cycle counter at start to convert lock ticks to nanoseconds; taking that
 * reading as a reference point would make every duration of the process longer than it was.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <time.h>

#define LATE_NS (10 * 1000 * 1000)

int clock_gettime(clockid_t id, struct timespec *ts)
{
	static bool seen[16];
	int (*real)(clockid_t, struct timespec *) = dlsym(RTLD_NEXT, "clock_gettime");
	int ret = real(id, ts);

	if (id >= 0 && id < 16 && !__atomic_exchange_n(&seen[id], true, __ATOMIC_RELAXED)) {
		struct timespec late = { 0, LATE_NS };

		while (nanosleep(&late, &late) != 0)
			;
	}
	return ret;
}
