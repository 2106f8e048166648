/* SPDX-License-Identifier: MIT */
/*
 * The parts of `lowkey bench probe` (probe.c): what one event costs, off and on
 * (probe_cost.c), beside LTTng-UST's tracepoint (probe_lttng.c), the sustained rate and the
 * memory per thread (probe_rate.c), LTTng-UST's sustained rate (probe_lttng_rate.c), the
 * consumers' CPU and the memcpy bandwidth (probe_consumer.c), and the text and JSON output
 * (probe_print.c).
 */
#ifndef LOWKEY_BENCH_PROBE_BENCH_H
#define LOWKEY_BENCH_PROBE_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

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
	bool cost;	 /* not --only sustained: the per-event rows beyond the enabled event */
	bool sustained;	 /* not --only cost: the sustained rates, consumer CPU, limits */
	double cpu_rate; /* --cpu-rate: the consumers' CPU run's rate at most, events/s */
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

/* What every LTTng-UST row needs: the peer program and a session daemon. */
struct lttng_env {
	const char *peer;     /* lowkey-bench-lttng */
	pid_t started_daemon; /* the session daemon started here, to stop at the end; 0: none */
	const char *missing;  /* why there can be no LTTng-UST rows, or NULL */
};

/* Find the peer and the lttng command, and start lttng-sessiond if none answers. */
void probe_lttng_setup(struct lttng_env *e);
/* Stop the session daemon probe_lttng_setup started, if it did. */
void probe_lttng_teardown(struct lttng_env *e);
/* Run the shell command fmt makes, its output thrown away: system()'s result. */
int probe_quiet(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Both modes, in the environment probe_lttng_setup made. */
struct lttng_result probe_bench_lttng(const struct probe_options *o, const struct lttng_env *e);

/* ---- sustained rate and memory (probe_rate.c) ---- */

struct rate_trial {
	double rate_per_thread, achieved_total;
	uint64_t events, lost;
	uint64_t bytes; /* written to the trace (lowkey's trials) */
	int err;
};

/* One trial: `threads` paced producers at `rate` events/s each for o->seconds; ctx is the
 * tracer's. */
typedef struct rate_trial (*rate_trial_fn)(const struct probe_options *o, int threads, double rate,
					   const void *ctx);

struct rate_summary {
	double median, min, max; /* events/s over SEARCHES searches */
	struct rate_trial best;
	/*
	 * Searches that ended on a trial that lost events: the consumer fell behind. The others
	 * ended where the producers could not emit at the rate asked, with every event written:
	 * they were short of CPU (sharing one with the consumer, or with other programs).
	 */
	int ended_by_loss;
	int err; /* a trial could not be run: no figures */
};

/* The highest rate `threads` producers sustain with no event lost, searched SEARCHES times:
 * doubled from 2.5 M events/s per thread until a trial fails, then bisected 4 times. */
struct rate_summary probe_search_rate(const struct probe_options *o, int threads,
				      rate_trial_fn trial, const void *ctx);
/* That search for lowkey, in traces started with flags. */
struct rate_summary probe_summarize_rate(const struct probe_options *o, int threads,
					 unsigned int flags);
/*
 * lowkey's paced producers (probe_pace.h) for `seconds`: one unpinned, or one per CPU from 0.
 * Returns their rates added up; *emitted: the events they emitted together.
 */
double probe_produce(int threads, double rate, double seconds, uint64_t *emitted);
/* Bytes resident for a thread's first event in a trace; -1 if it cannot trace. */
long probe_memory_per_thread(const struct probe_options *o);

/* ---- LTTng-UST's sustained rate (probe_lttng_rate.c) ---- */

/*
 * LTTng-UST's channel for its sustained rows: discard mode, per-UID buffers, and per CPU as many
 * bytes as a lowkey thread's ring holds at its largest (2 MiB growing to 8 times that while the
 * consumer lags): a producer thread writes into one CPU's buffer at a time, as a lowkey thread
 * into its own ring.
 */
#define LTTNG_RATE_SUBBUFS 4
#define LTTNG_RATE_SUBBUF_MIB 4

/* The search above for LTTng-UST: a session of its own per trial, the peer's paced producers. */
struct rate_summary probe_lttng_rate(const struct probe_options *o, const struct lttng_env *e,
				     int threads);

/* ---- the consumers' CPU and the limits (probe_consumer.c, probe_lttng_rate.c) ---- */

/* One fixed-rate run: the consumer's CPU time over it, and what it wrote. */
struct cpu_run {
	uint64_t cpu_ns;       /* the consumer's CPU time over the run */
	uint64_t events, lost; /* written, lost */
	const char *missing;   /* why there is no figure, or NULL */
};

struct consumer_cpu {
	double ns_per_event; /* median of the runs: CPU ns an event written (= ms a million) */
	double min, max;
	uint64_t events, lost; /* over all the runs */
	const char *missing;   /* why there is no figure, or NULL */
};

struct consumer_cpu_result {
	double rate, seconds; /* one producer thread at this rate, for this long, CPU_RUNS times */
	struct consumer_cpu lowkey, lttng;
};

#define CPU_RUNS 3

/* The CPU time of thread tid of process pid, or (tid 0) of all its threads now, in ns, from
 * /proc's schedstat; -errno where it cannot be read. */
int64_t probe_task_cpu_ns(pid_t pid, pid_t tid);
/* The consumer's CPU over one run of each tracer: lowkey's own threads, lttng-consumerd. */
struct cpu_run probe_lowkey_cpu_run(const struct probe_options *o, double rate, double seconds);
struct cpu_run probe_lttng_cpu_run(const struct probe_options *o, const struct lttng_env *e,
				   double rate, double seconds);
/* Both tracers' consumers, at the highest rate both sustained (rate1 of each, if known), at
 * most o->cpu_rate; e NULL: lowkey's only. */
struct consumer_cpu_result probe_consumer_cpu(const struct probe_options *o,
					      const struct lttng_env *e, double lowkey_rate,
					      double lttng_rate);

/* What a memcpy loop copies a second between two buffers of MEMCPY_MIB each: median of runs. */
#define MEMCPY_MIB 64
double probe_memcpy_bytes_per_s(void);

/*
 * What one thread writes a second into a new file in dir, as the consumer writes (256 KiB at a
 * time): for seconds or DIR_WRITE_MAX_MIB, median of runs, each file removed after it. NaN if a
 * write fails. Every byte of a trace lands in pages the file system takes anew: where that is
 * slower than the consumer, it, not the consumer, sets the lossless rate.
 */
#define DIR_WRITE_MAX_MIB 2048
double probe_dir_write_bytes_per_s(const char *dir, double seconds);

/* ---- output (probe_print.c) ---- */

struct results {
	double empty_ns, disabled_ns, usdt_ns, usdt_span_ns;
	struct burst_result two, cpu, span;
	struct lttng_result lttng;
	struct rate_summary rate1, rate2, rate1_fixed;
	struct rate_summary lttng_rate1, lttng_rate2;
	const char *lttng_rate_missing; /* why LTTng-UST has no sustained rows, or NULL */
	struct consumer_cpu_result consumer;
	double memcpy_bytes_per_s;
	double dir_write_bytes_per_s;
	long mem;
};

/* The text table, a row as soon as it is measured (lkb_row); JSON is printed at the end. */
void probe_text_heading(const struct probe_options *o);
void probe_print_lttng_text(const struct probe_options *o, const struct lttng_result *l);
void probe_text_rate_heading(const struct probe_options *o);
void probe_text_rate(const char *name, const struct rate_summary *s);
void probe_text_lttng_rate_heading(const struct probe_options *o);
void probe_text_consumer_cpu(const struct consumer_cpu_result *c);
/* The limits the lossless rate is quoted against, and the ratios of the goals. */
void probe_text_limits(const struct probe_options *o, const struct results *r);
void probe_print_json(const struct probe_options *o, const struct results *r);

#endif
