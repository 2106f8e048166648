// SPDX-License-Identifier: MIT
/*
 * Counting with lowkey: a function of this thread, then a child process and everything it forks.
 *
 *   cc counters.c $(pkg-config --cflags --libs lowkey) -o counters && ./counters ls -l /
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lowkey/lowkey.h>

static void print_values(struct lk_counters *c)
{
	struct lk_counter_value v[8];
	int n = lk_counters_read(c, v, 8);

	for (int i = 0; i < n && i < 8; i++) {
		struct lk_counter_info info;

		lk_counters_describe(c, (size_t)i, &info);
		if (info.error) {
			printf("  %-22s not counted: %s\n", info.name, info.why);
			continue;
		}
		printf("  %-22s %12llu %-3s", info.name, (unsigned long long)v[i].scaled,
		       info.unit);
		if (v[i].time_running < v[i].time_enabled) /* the PMU was shared: an estimate */
			printf("  (counted %.0f%% of the time)",
			       100.0 * (double)v[i].time_running / (double)v[i].time_enabled);
		printf("%s\n",
		       info.user_only_fallback ? "  (user space only: perf_event_paranoid)" : "");
	}
}

/* 1. This thread: a group of software events, read at once. */
static int count_a_function(void)
{
	struct lk_counters *c;
	char *memory;

	if (lk_counters_open(&c, "task-clock,{page-faults,context-switches}", 0, 0) < 0) {
		fprintf(stderr, "counters: %s\n", lk_last_error());
		return 1;
	}
	memory = malloc(8 << 20);
	for (size_t i = 0; memory && i < (8u << 20); i += 4096)
		memory[i] = 1; /* a page fault per page */
	printf("touching 8 MiB:\n");
	print_values(c);
	free(memory);
	lk_counters_close(c);
	return 0;
}

/* 2. A command, counted from its exec, with its children and threads (what `lowkey stat` does). */
static int count_a_command(char **argv)
{
	struct lk_counters *c;
	int go[2], status;
	char byte = 0;
	pid_t child;

	if (pipe(go))
		return 1;
	child = fork();
	if (child == 0) {
		close(go[1]);
		if (read(go[0], &byte, 1) != 1) /* wait until the counters are open */
			_exit(126);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(go[0]);
	/* cycles and instructions may not exist here (a VM without a PMU): keep going without. */
	if (lk_counters_open(&c, "task-clock,page-faults,cycles,instructions", child,
			     LK_COUNTERS_INHERIT | LK_COUNTERS_ENABLE_ON_EXEC |
				     LK_COUNTERS_SKIP_UNSUPPORTED) < 0) {
		fprintf(stderr, "counters: %s\n", lk_last_error());
		kill(child, SIGKILL);
		waitpid(child, &status, 0);
		return 1;
	}
	if (write(go[1], &byte, 1) != 1)
		return 1;
	close(go[1]);
	waitpid(child, &status, 0);
	printf("\n%s:\n", argv[0]);
	print_values(c);
	lk_counters_close(c);
	return 0;
}

int main(int argc, char **argv)
{
	char *ls[] = { "ls", "/", NULL };

	if (count_a_function())
		return 1;
	return count_a_command(argc > 1 ? argv + 1 : ls);
}
