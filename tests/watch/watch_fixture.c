// SPDX-License-Identifier: MIT
/*
 * A program for `lowkey watch` to watch: it prints its pid, the address of lk_fixture_counter and
 * the source line that writes it, waits for a line on stdin (unless --auto), then writes the
 * counter ROUNDS times from its main thread and ROUNDS times from a thread it creates afterwards,
 * prints both threads' ids, and (unless --auto) waits for another line before it exits, so the
 * values it left can still be read.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ROUNDS 5

volatile long lk_fixture_counter;
static int write_line;

static __attribute__((noinline)) void bump(long value)
{
	write_line = __LINE__ + 1;
	lk_fixture_counter = value;
}

static void *second_writer(void *arg)
{
	long *tid = arg;

	*tid = syscall(SYS_gettid);
	for (long i = 1; i <= ROUNDS; i++)
		bump(100 + i);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t;
	long tid2;
	char go[16];

	bump(0);	/* sets write_line */
	printf("pid %d addr %p line %d\n", (int)getpid(), (void *)&lk_fixture_counter, write_line);
	fflush(stdout);
	bool waits = !(argc > 1 && strcmp(argv[1], "--auto") == 0);

	if (waits && !fgets(go, sizeof(go), stdin))
		return 1;
	for (long i = 1; i <= ROUNDS; i++)
		bump(i);
	pthread_create(&t, NULL, second_writer, &tid2);
	pthread_join(t, NULL);
	printf("tids %ld %ld\n", (long)syscall(SYS_gettid), tid2);
	fflush(stdout);
	if (waits && !fgets(go, sizeof(go), stdin))
		return 1;
	return 0;
}
