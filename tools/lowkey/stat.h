/* SPDX-License-Identifier: MIT */
/* lowkey stat: what a run collects, and the three ways to print it (stat_print.c). */
#ifndef LOWKEY_STAT_H
#define LOWKEY_STAT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct stat_event {
	char *name;		/* as written, "cycles:u" when perf_event_paranoid forced :u */
	char *resolved;		/* lk_counter_info.event */
	char *unit;
	double scale;
	uint32_t type;
	uint64_t config;
	bool supported;
	int error;		/* why not, as an errno */
	bool user_only, user_only_fallback;
	char *why;		/* why it is not supported */
	double *runs;		/* the scaled value of each run */
	uint64_t enabled, running;	/* summed over the runs */
	double mean, stddev;
};

struct stat_thread {
	pid_t pid, tid;		/* tid 0: the threads still running, not told apart */
	char comm[32];
	double *values;		/* one per event (scaled) */
};

struct stat_result {
	char *target;		/* "ls -l" or "process 1234" */
	bool process_mode;	/* -p */
	pid_t pid;		/* with -p */
	int runs;		/* runs done */
	size_t nevents;
	struct stat_event *events;
	double *elapsed_ns;	/* per run */
	double elapsed_mean, elapsed_stddev;
	double user_ns, sys_ns;	/* means over the runs; < 0 when not known (-p) */
	int exit_status;	/* of the last run; -1 for -p */
	size_t nthreads;
	struct stat_thread *threads;
	long lost;		/* per-thread reports the kernel could not deliver */
};

/* Mean and sample standard deviation of v[0..n). */
void stat_mean_stddev(const double *v, int n, double *mean, double *stddev);

void stat_print_text(FILE *out, const struct stat_result *r);
void stat_print_csv(FILE *out, const char *sep, const struct stat_result *r);
void stat_print_json(FILE *out, const struct stat_result *r);

#endif
