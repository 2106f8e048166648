// SPDX-License-Identifier: MIT
/*
 * A debug log that costs one NOP while off, switched on and off at run time.
 *
 *   cc keys.c $(pkg-config --cflags --libs lowkey) -o keys && ./keys
 */
#include <stdio.h>

#include <lowkey/lowkey.h>

static LK_DEFINE_KEY_FALSE(debug_log);

static long work(long i)
{
	if (lk_branch_unlikely(&debug_log))
		printf("  work(%ld)\n", i);
	return i * i;
}

int main(void)
{
	long sum = 0;
	int err;

	for (long i = 0; i < 3; i++)
		sum += work(i); /* silent: the site is a NOP */

	err = lk_key_enable(&debug_log);
	if (err) {
		fprintf(stderr, "cannot enable the key: %s\n", lk_last_error());
		return 1;
	}
	for (long i = 3; i < 6; i++)
		sum += work(i); /* logs: the site is now a jmp to the printf */

	lk_key_disable(&debug_log);
	printf("sum = %ld\n", sum);
	return 0;
}
