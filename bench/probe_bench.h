/* SPDX-License-Identifier: MIT */
/*
 * The parts of `lowkey bench probe` (probe.c): what one event costs, off and on
 * (probe_cost.c), beside LTTng-UST's tracepoint (probe_lttng.c), the sustained rate and the
 * memory per thread (probe_rate.c), and the text and JSON output (probe_print.c).
 */
#ifndef LOWKEY_BENCH_PROBE_BENCH_H
#define LOWKEY_BENCH_PROBE_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The longest burst: 32-byte events (two integers and the CPU time) then fill half of lowkey's
 * default 2 MiB buffer. */
#define MAX_BURST 32768
/* The pause after every enabled burst of the LTTng-UST comparison, both tracers alike. */
#define PEER_PAUSE_MS 20
/* The no-loss rate is searched this many times: trials are short and a busy machine's stalls
 * are not. */
#define SEARCHES 3

struct probe_options {
	const char *trace_dir; /* --dir */
	int runs;	       /* --runs: per row, and rounds of the LTTng-UST comparison */
	long burst;	       /* --burst: events per timed burst, lowkey and LTTng-UST alike */
	double seconds;	       /* --seconds: per sustained-rate trial */
	bool lttng;	       /* not --no-lttng */
	bool json;
};

/* ---- one event's cost (probe_cost.c) ---- */

struct burst_result {
	double ns; /* median ns per iteration */
	uint64_t lost;
	int err;
};

/* The loops the rows time, n iterations each; the enabled event's is lkb_loop_two_ints. */
uint64_t probe_loop_empty(uint64_t n);
uint64_t probe_loop_disabled(uint64_t n);
uint64_t probe_loop_usdt(uint64_t n);	   /* a site on for a USDT tracer */
uint64_t probe_loop_usdt_span(uint64_t n); /* a span on for a USDT tracer */
uint64_t probe_loop_span(uint64_t n);

/* ns per iteration of a loop that records nothing, median of o->runs. */
double probe_time_unrecorded(const struct probe_options *o, uint64_t (*loop)(uint64_t));
/* o->runs bursts of loop inside a trace started with flags; records_per_iter per iteration. */
struct burst_result probe_time_bursts(const struct probe_options *o, const char *name,
				      uint64_t (*loop)(uint64_t), unsigned int flags,
				      unsigned int records_per_iter);
/* Start a trace into <o->trace_dir>/lowkey-bench-NAME-PID (its path into dir); lk_trace_start's
 * result. */
int probe_start_trace(const struct probe_options *o, const char *name, unsigned int flags,
		      size_t buffer, char *dir, size_t dirlen);
void probe_remove_trace(const char *dir);

/* ---- beside LTTng-UST (probe_lttng.c) ---- */

/*
 * One mode of the comparison, as lowkey-bench-lttng measured it: both tracers in one process and
 * one thread, bursts of the same length alternating lowkey, LTTng-UST, lowkey, ... per round.
 */
struct lttng_side {
	long burst;				   /* events per burst, both tracers */
	int rounds;				   /* rounds the peer reported */
	double lowkey_ns, lttng_ns;		   /* ns per event, medians of the rounds */
	double ratio_of_medians;		   /* lttng_ns / lowkey_ns */
	double ratio_median, ratio_min, ratio_max; /* of the per-round ratios LTTng-UST / lowkey */
	unsigned long long lowkey_lost;
};

struct lttng_result {
	struct lttng_side off, on; /* disabled (no trace, no session), enabled */
	bool have_off, have_on;
	char discarded[200]; /* what `lttng stop` said of discarded events, or "" */
	const char *missing; /* why there are no (or not all) LTTng figures, or NULL */
};

/* Both modes, with a session daemon started (and stopped) here if none runs. */
struct lttng_result probe_bench_lttng(const struct probe_options *o);

/* ---- sustained rate and memory (probe_rate.c) ---- */

struct rate_trial {
	double rate_per_thread, achieved_total;
	uint64_t events, lost;
	int err;
};

struct rate_summary {
	double median, min, max; /* events/s over SEARCHES searches */
	struct rate_trial best;
	/*
	 * Searches that ended on a trial that lost events: the consumer fell behind. The others
	 * ended where the producers could not emit at the rate asked, with every event written:
	 * they were short of CPU (sharing one with the consumer, or with other programs).
	 */
	int ended_by_loss;
};

/* The highest rate `threads` producers sustain with no event lost, searched SEARCHES times. */
struct rate_summary probe_summarize_rate(const struct probe_options *o, int threads,
					 unsigned int flags);
/* Bytes resident for a thread's first event in a trace; -1 if it cannot trace. */
long probe_memory_per_thread(const struct probe_options *o);

/* ---- output (probe_print.c) ---- */

struct results {
	double empty_ns, disabled_ns, usdt_ns, usdt_span_ns;
	struct burst_result two, cpu, span;
	struct lttng_result lttng;
	struct rate_summary rate1, rate2, rate1_fixed;
	long mem;
};

/* The text table, a row as soon as it is measured (lkb_row); JSON is printed at the end. */
void probe_text_heading(const struct probe_options *o);
void probe_print_lttng_text(const struct probe_options *o, const struct lttng_result *l);
void probe_text_rate_heading(const struct probe_options *o);
void probe_text_rate(const char *name, const struct rate_summary *s);
void probe_print_json(const struct probe_options *o, const struct results *r);

#endif
