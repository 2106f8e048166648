/* SPDX-License-Identifier: MIT */
/*
 * lowkey stat: what a run collects (stat_count.c, stat_interval.c), and the three ways to print it
 * (stat_print.c).
 */
#ifndef LOWKEY_STAT_H
#define LOWKEY_STAT_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct lk_counters;

struct stat_event {
	char *name;	/* as written, "cycles:u" when perf_event_paranoid forced :u */
	char *resolved; /* lk_counter_info.event */
	char *unit;
	double scale;
	uint32_t type;
	uint64_t config;
	bool supported;
	int error; /* why not, as an errno */
	bool user_only, user_only_fallback;
	char *why;		   /* why it is not supported */
	double *runs;		   /* the scaled value of each run */
	uint64_t enabled, running; /* summed over the runs */
	double mean, stddev;
};

struct stat_thread {
	pid_t pid, tid; /* tid 0: the threads still running, not told apart */
	char comm[64];	/* its name, escaped (lk__text_escape): the thread chose it */
	double *values; /* one per event (scaled) */
};

struct stat_result {
	char *target;	   /* "ls -l", "process 1234", "system wide" or "CPU(s) 0,2" */
	bool process_mode; /* -p, or -a/-C without a command: no exit status */
	pid_t pid;	   /* with -p; 0 for -a/-C without a command */
	int runs;	   /* runs done */
	size_t nevents;
	struct stat_event *events;
	double *elapsed_ns; /* per run */
	double elapsed_mean, elapsed_stddev;
	double user_ns, sys_ns; /* means over the runs; < 0 when not known (-p) */
	int exit_status;	/* of the last run; -1 for -p */
	size_t nthreads;
	struct stat_thread *threads;
	long lost; /* per-thread reports the kernel could not deliver */
};

enum stat_format { STAT_TEXT, STAT_CSV, STAT_JSON };

/* What ends a count: the command or process exiting, a deadline, or Ctrl-C (stat_interrupted). */
struct stat_watch {
	pid_t pid;	    /* 0: nothing to watch (the CPUs, until the deadline or Ctrl-C) */
	bool child;	    /* pid is our child: its end is seen without reaping it */
	int pidfd;	    /* -1 without pidfd_open() (Linux < 5.3): polled every 100 ms */
	double deadline_ns; /* stat_now_ns() time; 0: none */
};

extern volatile sig_atomic_t stat_interrupted; /* set by the SIGINT/SIGTERM handler */

/* CLOCK_MONOTONIC in ns. */
double stat_now_ns(void);

/* Sleep until until_ns; true as soon as the target ends, the deadline passes or Ctrl-C comes. */
bool stat_sleep_until(const struct stat_watch *w, double until_ns);

/* The command line: what to count, how and where to print it (builtin-stat.c). */
struct stat_options {
	char *events;
	int repeat;
	pid_t pid;
	double duration;
	bool per_thread;
	bool json;
	const char *sep;
	const char *output;
	long interval_ms; /* -I; 0: one report at the end */
	bool all_cpus;	  /* -a or -C */
	int *cpus;	  /* -C; NULL: every online CPU */
	size_t ncpus;
	const char *cpu_list; /* -C as given */
	bool verbose;
	char **argv; /* the command */
	enum stat_format format;
	FILE *out; /* standard error, or -o FILE */
};

/*
 * Count o->argv, o->repeat times (stat_command), or o->pid or the CPUs once (stat_attached),
 * into r (stat_count.c). Return -1 once counted, else lowkey's exit status after the error is
 * printed; r->runs says how many runs r holds either way.
 */
int stat_command(const struct stat_options *o, struct stat_result *r);
int stat_attached(const struct stat_options *o, struct stat_result *r);

/* Free what r holds (the events, threads and runs stat_command or stat_attached allocated). */
void stat_free_result(struct stat_result *r);

struct stat_interval_options {
	long interval_ms;
	FILE *out;
	enum stat_format format;
	const char *sep; /* STAT_CSV */
};

/*
 * -I: read c every interval until the watch ends, and print each interval's counts (perf stat -I:
 * not cumulative) as it ends, the last one partial. r describes the events. *elapsed_ns: the time
 * from the start to the last reading. Returns 0, or a negative errno of a failed read.
 */
int stat_intervals(struct lk_counters *c, const struct stat_result *r, const struct stat_watch *w,
		   const struct stat_interval_options *io, double *elapsed_ns);

/* One interval: text and CSV lines lead with the time in seconds, JSON lines carry "interval".
 * first: the text header goes before the first interval. */
void stat_print_interval(FILE *out, enum stat_format format, const char *sep, double seconds,
			 const struct stat_result *d, bool first);

void stat_print_text(FILE *out, const struct stat_result *r);
void stat_print_csv(FILE *out, const char *sep, const struct stat_result *r);
void stat_print_json(FILE *out, const struct stat_result *r);

#endif
