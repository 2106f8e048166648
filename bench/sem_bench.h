/* SPDX-License-Identifier: MIT */
/*
 * The parts of `lowkey bench sem` (sem.c): the sembench workload (sem_sembench.c), the kernel's
 * lock contention traced while it runs (sem_kernel_locks.c), the cost of a lock in child
 * processes (sem_lock_costs.c), and the text and JSON output (sem_print.c).
 */
#ifndef LOWKEY_BENCH_SEM_BENCH_H
#define LOWKEY_BENCH_SEM_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <lowkey/lowkey.h>

/* The implementations sembench runs: the kernel's System V semaphores, lk_semset, bare futexes,
 * polling workers. */
enum mode { MODE_IPC, MODE_LOWKEY, MODE_FUTEX, MODE_NANOSLEEP, NMODES };

/* "ipc", "lowkey", ...: the names -o takes and JSON prints. */
extern const char *const sem_mode_names[NMODES];

struct sem_options {
	int nthreads; /* -t: workers, each asleep on its own semaphore */
	int wake;     /* -w: the most the main thread wakes with one call */
	int seconds;  /* -r: per run */
	int runs;     /* --runs: figures are medians of these */
	bool bind;    /* --bind: main thread on CPU 0, workers on the others */
	bool json;
	bool locks;	   /* not --no-locks: measure the lock costs too */
	bool want[NMODES]; /* -o */
};

/* ---- one sembench run (sem_sembench.c) ---- */

/* The kernel's lock contention during one run: lock:contention_begin/end, paired per thread. */
struct kernel_locks {
	bool ok;
	bool overflow; /* a ring buffer filled up: the figures are lower bounds */
	char why[160];
	uint64_t contended, wait_ns, lost;
};

/* Figures of one run. */
struct run_result {
	double seconds;
	uint64_t burns, min_burns, max_burns, main_burns;
	struct lk_semset_stats lk;
	struct kernel_locks kernel;
};

/* A mode's figures: the run with the median rate of its runs. */
struct mode_result {
	bool ran;
	struct run_result median; /* the run with the median burns per second */
	double burns_per_s;
};

/* One run of `seconds` with mode: 0, or -errno (-EAGAIN: not one worker thread started). */
int sembench_run(enum mode mode, const struct sem_options *o, struct run_result *r);

/* ---- the kernel's lock contention (sem_kernel_locks.c) ---- */

#define MAX_TRACE_CPUS 64

/* lock:contention_begin and _end, one perf ring per CPU and event. */
struct ktrace {
	int ncpus; /* 0: not open */
	int fd[2][MAX_TRACE_CPUS];
	void *ring[2][MAX_TRACE_CPUS];
	size_t ring_size;
};

/*
 * Open both tracepoints, disabled, on every CPU for this thread and the threads it will create
 * (inherited). 0, or -errno with k->why saying what is missing (the tracepoint, tracefs, the
 * privilege, locked memory).
 */
int ktrace_open(struct ktrace *t, struct kernel_locks *k);
void ktrace_enable(struct ktrace *t, bool on);
/* Read the rings: the contended waits and their total into *k. */
void ktrace_figures(struct ktrace *t, struct kernel_locks *k);
void ktrace_close(struct ktrace *t);

/* ---- lock costs, in child processes (sem_lock_costs.c) ---- */

#define HEAVY_LOCKS 64	  /* mutexes of the lock-heavy program */
#define HEAVY_OPS 2000000 /* lock + unlock per thread */

struct lock_costs {
	bool have_preload;
	double pthread_ns, lk_ns, preload_ns;
	double heavy_bare_s, heavy_preload_s, empty_bare_s, empty_preload_s;
	int heavy_threads;
};

/* `--child locks`, `--child heavy`, `--child empty`: print one line of figures, return 0. */
int sem_child_locks(void);
int sem_child_heavy(bool empty);
/* Run the children `runs` times each, bare and under liblowkey-locks.so; 0 or -errno. */
int sem_measure_lock_costs(int runs, struct lock_costs *c);

/* ---- output (sem_print.c) ---- */

/* The text a part at a time, each as soon as it is measured. */
void sem_print_header(const struct sem_options *o);
void sem_print_modes(const struct sem_options *o, const struct mode_result *m);
void sem_print_lock_costs(const struct sem_options *o, const struct lock_costs *c);
/* All of it as JSON, at the end; c NULL with --no-locks. */
void sem_print_json(const struct sem_options *o, const struct mode_result *m,
		    const struct lock_costs *c);

#endif
