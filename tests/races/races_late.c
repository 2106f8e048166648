// SPDX-License-Identifier: MIT
/*
 * The library races_fixture's `late` mode opens with dlopen() after sampling started: each thread's
 * racy access is the program's, called from here, so that both stacks have a frame in it.
 */

void races_late_call(void (*fn)(void), int times);

void races_late_call(void (*fn)(void), int times)
{
	for (int i = 0; i < times; i++) {
		fn();
		__asm__ volatile("" ::: "memory"); /* a call, not a jump: a frame of its own */
	}
}
