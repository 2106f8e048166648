/* SPDX-License-Identifier: MIT */
/*
 * The parts of `lowkey bench breakpoint` (breakpoint.c: the options, and what both experiments
 * share): the thread experiment (breakpoint_thread.c) and the enable experiment
 * (breakpoint_enable.c) of kernel commit 0912037fec, "perf/hw_breakpoint: Reduce contention with
 * large number of tasks".
 */
#ifndef LOWKEY_BENCH_BREAKPOINT_BENCH_H
#define LOWKEY_BENCH_BREAKPOINT_BENCH_H

#include <stdbool.h>

#include "bench.h"

#define BP_NAN __builtin_nan("")

/* ---- breakpoint.c: what both experiments share ---- */

/* perf bench breakpoint's breakpoint on addr: read/write, 1 byte, inherited. Its fd or -1 (errno). */
int bp_perf_breakpoint(void *addr);

void bp_futex_wake(unsigned int *word, int n);

/* A thread that sleeps until *(unsigned int *)done is 1 (and it is woken: bp_futex_wake). */
void *bp_passive_thread(void *done);

struct bp_placement {
	bool pinned;	/* false: --cpus all, the affinity as it was */
	char cpus[256]; /* the CPU list every thread of both tools ran on */
	int ncpus;
};

/* Apply --cpus (NULL: the first CPU this process may use; "all": leave the affinity as it is). */
int bp_place(const char *cpus, struct bp_placement *pl);
void bp_print_placement(const struct bp_placement *pl);

/* Whether perf bench breakpoint runs here (linux-perf). */
bool bp_have_perf(void);

/* perf bench for one experiment: whether it runs here, and its arguments. */
struct bp_perf {
	bool ok;
	const char *args;
};

/* Run `perf bench -r R breakpoint ARGS` and return its "usecs/op", or NAN. */
double bp_run_perf_bench(int repeat, const char *args);

/* The rows: perf bench itself, the same experiment with raw perf_event_open, with lowkey; the
 * thread experiment adds a row without breakpoints. */
enum variant { V_PERF_BENCH, V_RAW, V_LOWKEY, V_NONE, NVARIANTS };

extern const char *const bp_variant_names[NVARIANTS];

/* Each variant's samples (NAN: not run), and their medians once finished. */
struct bp_results {
	double *samples[NVARIANTS];
	double median[NVARIANTS];
	int runs;
};

/* 0 or -ENOMEM. bp_results_finish frees the samples, keeping the medians. */
int bp_results_init(struct bp_results *r, int runs);
void bp_results_finish(struct bp_results *r);

/* v against base, as " +12.3%", or "-" where either is NAN. */
void bp_print_ratio(double v, double base);

/* One experiment: its name, its rows, and how it runs and prints them. */
struct bp_experiment {
	const char *name; /* "thread", "enable": for messages */
	int nvariants;	  /* it runs the variants below this one */
	/* one run of variant v: its figure in *usecs (left NAN when it does not run); 0, or an error
	 * it has reported */
	int (*run)(enum variant v, const struct bp_perf *perf, double *usecs);
	void (*print_json)(const struct bp_results *r, const struct bp_perf *perf,
			   const struct bp_placement *pl);
	void (*print_text)(const struct bp_results *r, const struct bp_perf *perf,
			   const struct bp_placement *pl);
};

/*
 * Run experiment e with perf bench's arguments perf_args: place every thread on cpus (bp_place),
 * then runs times every variant, each run starting with the next one so that none always comes
 * first (or last), and print the medians, as JSON or text. The bench's exit status.
 */
int bp_experiment_run(const struct bp_experiment *e, const char *perf_args, int runs, bool json,
		      const char *cpus);

/* --json: begin the document with the bench's name and the machine; then how it was run (the
 * runs, perf bench's arguments, the CPUs). */
void bp_json_begin(struct lk__json *j, const char *bench);
void bp_json_method(struct lk__json *j, const struct bp_results *r, const char *perf_args,
		    const struct bp_placement *pl);

/* The text row of perf bench where it is not installed: true when printed. */
bool bp_print_no_perf(enum variant v, bool perf_ok, const char *name);

/* ---- breakpoint_thread.c ---- */

struct bp_thread_params {
	int breakpoints, parallel, threads, repeat;
};

/* B breakpoints, then P threads creating and joining batches of T threads, R batches. The bench's
 * exit status. */
int bp_thread_experiment(const struct bp_thread_params *p, int runs, bool json, const char *cpus);

/* ---- breakpoint_enable.c ---- */

struct bp_enable_params {
	int passive, active, repeat;
};

/* One inherited breakpoint, P sleeping and A spinning threads, R disable+enable pairs. The bench's
 * exit status. */
int bp_enable_experiment(const struct bp_enable_params *p, int runs, bool json, const char *cpus);

#endif
