// SPDX-License-Identifier: MIT
/*
 * How much of a function's wall time was this thread's CPU time? Timestamps at ~10 ns a read,
 * cheap enough to take around every call of a hot function.
 *
 *   cc cputime.c $(pkg-config --cflags --libs lowkey) -o cputime && ./cputime
 *   LOWKEY_CLOCK=syscall ./cputime     # the same figures, from the system call
 */
#include <stdio.h>
#include <unistd.h>

#include <lowkey/lowkey.h>

/* Half computing, half waiting. */
static double work(int round)
{
	double x = round;

	for (int i = 0; i < 2000000; i++)
		x = x * 1.0000001 + 1e-9;
	usleep(5000);
	return x;
}

int main(void)
{
	struct lk_clock_info info;
	double sink = 0;

	if (lk_clock_info(&info) == 0)
		printf("thread CPU time: %s (%s)\nnow: %s, counter %s at %.3f GHz (%s)\n\n",
		       info.cputime_name, info.cputime_reason, info.now_name, info.counter_name,
		       (double)info.tsc_hz / 1e9, info.tsc_hz_source);

	for (int round = 0; round < 5; round++) {
		uint64_t wall0 = lk_now_ns(), cpu0 = lk_thread_cputime_ns();

		sink += work(round);

		uint64_t cpu = lk_thread_cputime_ns() - cpu0, wall = lk_now_ns() - wall0;

		printf("round %d: %6.2f ms wall, %6.2f ms on the CPU (%2.0f%%)\n", round,
		       wall / 1e6, cpu / 1e6, 100.0 * (double)cpu / (double)wall);
	}
	return sink < 0;
}
