// SPDX-License-Identifier: MIT
/* The shared library of races_fixture's `lib` mode: the racy ++ is here, not in the program. */

void races_lib_bump(int *counter, int times);

void races_lib_bump(int *counter, int times)
{
	for (int i = 0; i < times; i++) {
		(*counter)++;
		__asm__ volatile("" ::: "memory");
	}
}
