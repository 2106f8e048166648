// SPDX-License-Identifier: MIT
/*
 * A program for `lowkey watch` to watch: it prints its pid, the address of lk_fixture_counter and
 * the source line that writes it, waits for a line on stdin (unless --auto), then writes the
 * counter ROUNDS times from its main thread and ROUNDS times from a thread it creates afterwards,
 * prints both threads' ids, and (unless --auto) waits for another line before it exits, so the
 * values it left can still be read.
 *
 * It survives a SIGTRAP that names no breakpoint, and reports how many each thread took: in some
 * virtual machines the hypervisor loses the debug status of a hit, and the kernel then sends that
 * instead of counting the hit (docs/watch.md). Each such trap is one write lowkey cannot see.
 */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ROUNDS 5
#ifndef TRAP_BRKPT
#define TRAP_BRKPT 1
#endif

volatile long lk_fixture_counter;
static int write_line;
static pid_t main_tid;
static volatile sig_atomic_t lost_traps[2]; /* main thread, second writer */

static void on_unattributed_trap(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	(void)ctx;
	if (si->si_code != TRAP_BRKPT) {
		signal(SIGTRAP,
		       SIG_DFL); /* not the hypervisor's doing: die as SIGTRAP would have */
		raise(SIGTRAP);
	}
	lost_traps[syscall(SYS_gettid) == main_tid ? 0 : 1]++;
}

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
	struct sigaction sa = { .sa_sigaction = on_unattributed_trap, .sa_flags = SA_SIGINFO };

	main_tid = (pid_t)syscall(SYS_gettid);
	sigaction(SIGTRAP, &sa, NULL);
	bump(0); /* sets write_line */
	printf("pid %d addr %p line %d\n", (int)getpid(), (void *)&lk_fixture_counter, write_line);
	fflush(stdout);
	bool waits = !(argc > 1 && strcmp(argv[1], "--auto") == 0);

	if (waits && !fgets(go, sizeof(go), stdin))
		return 1;
	for (long i = 1; i <= ROUNDS; i++)
		bump(i);
	pthread_create(&t, NULL, second_writer, &tid2);
	pthread_join(t, NULL);
	printf("tids %ld %ld lost %d %d\n", (long)main_tid, tid2, (int)lost_traps[0],
	       (int)lost_traps[1]);
	fflush(stdout);
	if (waits && !fgets(go, sizeof(go), stdin))
		return 1;
	return 0;
}
