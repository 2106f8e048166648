// SPDX-License-Identifier: MIT
/*
 * A program with known counts, for the counter tests (and for trying `lowkey stat` by hand):
 *
 *   counter_workload STEP [STEP...]
 *     faults N         touch N fresh pages (N page faults)
 *     fork-faults N    a forked child touches N pages
 *     thread-faults N  a new thread touches N pages
 *     pingpong N       N round trips over pipes with a forked child, both on CPU 0
 *     spin MS          burn MS milliseconds of CPU time
 *     task-spin MS     burn MS milliseconds of task-clock, as the process's own perf counter reads
 *                      it (the clock lowkey stat's task-clock counts in; CPU time may differ from it)
 *     sleep MS         sleep MS milliseconds
 *     tally 0          print "switches N": the kernel's count of its context switches so far
 *     exit CODE        exit with CODE
 */
#include <pthread.h>
#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <time.h>

#include "helpers.h"

static void *thread_faults(void *arg)
{
	touch_pages((size_t)arg);
	return NULL;
}

static int pingpong(long n)
{
	int ping[2], pong[2], status;
	char token = 't';
	pid_t child;

	if (pipe(ping) || pipe(pong))
		return 1;
	pin_to_cpu(0);
	child = fork();
	if (child == 0) {
		for (long i = 0; i < n; i++)
			if (read(ping[0], &token, 1) != 1 || write(pong[1], &token, 1) != 1)
				_exit(1);
		_exit(0);
	}
	for (long i = 0; i < n; i++)
		if (write(ping[1], &token, 1) != 1 || read(pong[0], &token, 1) != 1)
			return 1;
	waitpid(child, &status, 0);
	return 0;
}

static double cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void spin(long ms)
{
	double end = cpu_ms() + (double)ms;
	volatile unsigned long sink = 0;

	while (cpu_ms() < end)
		for (int i = 0; i < 10000; i++)
			sink += (unsigned long)i;
	(void)sink; /* read once, so the work is used (clang: -Wunused-but-set-variable) */
}

/*
 * Until a task-clock counter of this thread, opened now, reads ms: lowkey stat's task-clock of the
 * process, opened before, reads that much at least. CLOCK_PROCESS_CPUTIME_ID is the scheduler's
 * clock, and may read a little ahead of task-clock's on a CPU shared with other processes.
 */
static int task_spin(long ms)
{
	struct perf_event_attr attr;
	volatile unsigned long sink = 0;
	uint64_t ns = 0;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_SOFTWARE;
	attr.config = PERF_COUNT_SW_TASK_CLOCK;
	fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
	if (fd < 0) {
		perror("counter_workload: task-spin: perf_event_open");
		return 1;
	}
	while (ns < (uint64_t)ms * 1000000u) {
		for (int i = 0; i < 10000; i++)
			sink += (unsigned long)i;
		if (read(fd, &ns, sizeof(ns)) != (ssize_t)sizeof(ns)) {
			perror("counter_workload: task-spin: read");
			close(fd);
			return 1;
		}
	}
	(void)sink;
	close(fd);
	return 0;
}

/* The kernel's count of this process's context switches so far, its waited-for children's included. */
static void print_switches(void)
{
	struct rusage self, children;

	getrusage(RUSAGE_SELF, &self);
	getrusage(RUSAGE_CHILDREN, &children);
	printf("switches %ld\n",
	       self.ru_nvcsw + self.ru_nivcsw + children.ru_nvcsw + children.ru_nivcsw);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	for (int i = 1; i + 1 < argc; i += 2) {
		const char *step = argv[i];
		long n = strtol(argv[i + 1], NULL, 10);

		if (strcmp(step, "faults") == 0) {
			touch_pages((size_t)n);
		} else if (strcmp(step, "fork-faults") == 0) {
			int status;
			pid_t child = fork();

			if (child == 0)
				_exit(touch_pages((size_t)n) ? 1 : 0);
			waitpid(child, &status, 0);
		} else if (strcmp(step, "thread-faults") == 0) {
			pthread_t t;

			pthread_create(&t, NULL, thread_faults, (void *)n);
			pthread_join(t, NULL);
		} else if (strcmp(step, "pingpong") == 0) {
			if (pingpong(n))
				return 1;
		} else if (strcmp(step, "spin") == 0) {
			spin(n);
		} else if (strcmp(step, "task-spin") == 0) {
			if (task_spin(n))
				return 1;
		} else if (strcmp(step, "sleep") == 0) {
			usleep((useconds_t)n * 1000);
		} else if (strcmp(step, "tally") == 0) {
			print_switches();
		} else if (strcmp(step, "exit") == 0) {
			return (int)n;
		} else {
			fprintf(stderr, "counter_workload: unknown step '%s'\n", step);
			return 2;
		}
	}
	return 0;
}
