// SPDX-License-Identifier: MIT
/*
 * The program test_container_files runs in a chroot-like root, built twice: as it is, and with
 * LKT_DECOY, the other build the host keeps at the same path -- other probe sites, its counter in
 * another section, its write on another line. It prints its pid, its counter's address and the
 * line that writes it, then waits for "go" on stdin, writes the counter ROUNDS times and fires its
 * probe, prints "done", and exits at end of input.
 */
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <lowkey/probe.h>

#define ROUNDS 5

#ifdef LKT_DECOY
volatile long lkt_ns_counter = 1; /* in .data, not .bss: at another offset */
#else
volatile long lkt_ns_counter;
#endif
static int write_line;

static __attribute__((noinline)) void bump(long value)
{
#ifdef LKT_DECOY
	LK_PROBE(nsdecoy, host_only, value);
	/* the decoy's write is some lines further down */

#else
	LK_PROBE(nsprog, in_root, value);
#endif
	write_line = __LINE__ + 1;
	lkt_ns_counter = value;
}

int main(void)
{
	char line[64];

	/* a tracer that is not our parent may read our memory (Yama's ptrace_scope 1) */
	prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
	bump(0);
	printf("pid %d addr %p line %d\n", (int)getpid(), (void *)&lkt_ns_counter, write_line);
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		if (strncmp(line, "go", 2) != 0)
			continue;
		for (long i = 1; i <= ROUNDS; i++)
			bump(i);
		printf("done\n");
		fflush(stdout);
	}
	return 0;
}
