/* SPDX-License-Identifier: MIT */
/*
 * Benchmarks for `lowkey bench NAME`. Each registers itself with LK_BENCH. A benchmark prints
 * figures: medians of repeated runs, each row beside its baseline measured in the same run, and
 * the figures the kernel work it re-runs published. --json prints the same rows for machines.
 */
#ifndef LOWKEY_BENCH_H
#define LOWKEY_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "internal/json.h" /* --json: the one writer, lk__json_* */

struct lk_bench {
	const char *name;
	const char *summary;
	const char *usage;
	int (*run)(int argc, char **argv); /* argv[0] is the bench's name */
};

#define LK_BENCH(ident, ...)                               \
	static const struct lk_bench ident __attribute__(( \
		used, section("lk_benches"), aligned(sizeof(void *)))) = { __VA_ARGS__ }

const struct lk_bench *lkb_find(const char *name);
void lkb_list(FILE *out);

/* ---- progress and rows (progress.c) ---- */

/*
 * A status line on standard error while a bench works, redrawn every 250 ms with the time spent:
 * only when standard error is a terminal, not with quiet (--quiet), and not in a `lowkey bench` a
 * bench runs. `lowkey bench` starts and stops it around every bench. Never written to standard
 * output: rows and JSON there stay clean. Where standard output is the same terminal, writing to
 * it (printf, lkb_row) erases the status line first: no row shares a line with it.
 */
void lkb_progress_start(const char *bench, bool quiet);
void lkb_progress_stop(void);
/* What the bench is measuring now ("lowkey span, 21 runs"); shown on the status line. */
void lkb_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* printf() a finished row (or heading) to standard output now: the status line is erased first,
 * and standard output flushed, so each row appears as soon as it is measured, pipes included. */
void lkb_row(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Rows made a piece at a time: print into the FILE lkb_section_begin() returns (a memory
 * stream; standard output if it cannot be had), then lkb_section_end() prints them as lkb_row(). */
FILE *lkb_section_begin(void);
void lkb_section_end(FILE *section);

/* ---- timing and statistics ---- */

/* CLOCK_MONOTONIC in ns. */
uint64_t lkb_now_ns(void);

/* Sorts v in place. p in [0, 100]. */
double lkb_median(double *v, size_t n);
double lkb_percentile(double *v, size_t n, double p);
void lkb_mean_stddev(const double *v, size_t n, double *mean, double *stddev);

/* ---- errors ---- */

/* "lowkey bench: WHAT: <err>" on standard error, then lowkey's hint (lk_last_error()) if it has
 * one. Returns 1, a bench's exit status when it cannot measure. */
int lkb_fail(const char *what, int err);

/* ---- the machine ---- */

int lkb_ncpus(void);
/* Pin the calling thread to cpu; returns 0 or -errno. */
int lkb_pin(int cpu);
/* "<CPU model>, 2 CPUs, virtual machine guest, Linux <release> <machine>" */
const char *lkb_machine(void);

#endif
