// SPDX-License-Identifier: MIT
/*
 * lowkey bench probe: what a probe costs, off and on, beside LTTng-UST's tracepoint.
 *
 * 1. ns per event, in one run: a disabled site (against the empty loop), an enabled event with
 *    two integers (TSC stamp), the same with the thread's CPU time, a span (begin and end).
 *    Enabled rows are timed in bursts that fit the buffers, with a pause between bursts for the
 *    consumer: an event dropped because a buffer is full costs less than one written, and would
 *    flatter either tracer.
 * 1b. Beside LTTng-UST 2.13's tracepoint with the same two integers, like for like: both tracers
 *    in one process (lowkey-bench-lttng, which links both), one thread, bursts of the same length,
 *    lowkey and LTTng-UST alternating burst by burst, the same pause after each; disabled (no
 *    trace, no session) and enabled (a lowkey trace and an LTTng session this bench creates, with
 *    a session daemon it starts if none runs). Medians of the rounds, and the per-round ratios.
 * 2. Sustained events/s to a file without loss at the default buffer size, from one and two
 *    producer threads: producers paced at a given rate, the rate raised until events are lost.
 * 2b. The same search for LTTng-UST (discard mode, per-UID buffers, its consumer daemon writing
 *    to the same file system), and the CPU each tracer's consumer spends an event over a run at a
 *    rate both sustain.
 * 2c. What the sustained rate is quoted against: the rate one thread produces events at when
 *    nothing limits it (the enabled event of 1), a memcpy loop's bandwidth, and how fast one
 *    thread writes a new file in the trace directory (every byte of a trace lands in pages the
 *    file system takes anew; on a guest whose host takes back freed memory, those can be slower
 *    to take than the consumer is to fill them).
 * 3. Memory per thread.
 *
 * The parts: probe_cost.c (1), probe_lttng.c (1b), probe_rate.c (2 and 3), probe_lttng_rate.c
 * and probe_consumer.c (2b, 2c), probe_print.c (the text and JSON).
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <lowkey/lowkey.h>

#include "bench.h"
#include "probe_bench.h"
#include "probe_loop.h"

static const char probe_usage[] =
	"usage: lowkey bench probe [--runs N] [--burst N] [--seconds S] [--dir DIR] [--no-lttng]\n"
	"                          [--only cost|sustained] [--cpu-rate R] [-j|--json]\n"
	"\n"
	"What a probe costs: a disabled site, an enabled event (two integers), with the thread's CPU\n"
	"time, a span; beside LTTng-UST's tracepoint disabled and enabled into a session (the bench\n"
	"starts lttng-sessiond if none runs), like for like: both in one process, bursts of the same\n"
	"length alternating between the two. Then the highest rate one and two threads sustain with\n"
	"no event lost at the default buffer size, lowkey's and LTTng-UST's (discard mode, per-UID\n"
	"buffers, written to the same DIR); the CPU each one's consumer spends an event at a rate both\n"
	"sustain; the rate one thread produces events at when nothing limits it, a memcpy loop's\n"
	"bandwidth and how fast one thread writes a new file in DIR, with the ratios between them;\n"
	"and the memory a recording thread uses.\n"
	"\n"
	"  --runs N        repetitions of each row, and rounds of the LTTng-UST comparison (default 21)\n"
	"  --burst N       events per timed burst of every enabled row, lowkey's and LTTng-UST's alike\n"
	"                  (default 16384, at most 32768)\n"
	"  --seconds S     length of each sustained-rate trial; the consumers' CPU runs last 3 times\n"
	"                  that (default 1)\n"
	"  --dir DIR       where the traces go, both tracers' (default /dev/shm, else /tmp)\n"
	"  --no-lttng      skip the LTTng-UST rows\n"
	"  --only cost     only what an event costs, off and on: the rows before the sustained rates\n"
	"  --only sustained\n"
	"                  only the sustained rates, the consumers' CPU, the limits and the ratios\n"
	"                  (and the enabled event, which the limits need)\n"
	"  --cpu-rate R    the consumers' CPU runs' rate at most, events/s (default 2000000, at least\n"
	"                  100000); lower where a tracer sustained less\n"
	"  -j, --json      print the figures as JSON\n";

/* The options into *o; false when they are not the bench's (the usage is printed). */
static bool parse_options(int argc, char **argv, struct probe_options *o)
{
	static const struct option opts[] = {
		{ "runs", required_argument, NULL, 'r' },
		{ "burst", required_argument, NULL, 'b' },
		{ "seconds", required_argument, NULL, 's' },
		{ "dir", required_argument, NULL, 'd' },
		{ "no-lttng", no_argument, NULL, 'n' },
		{ "only", required_argument, NULL, 'o' },
		{ "cpu-rate", required_argument, NULL, 'c' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	struct stat st;
	int c;

	*o = (struct probe_options){ .trace_dir = "/dev/shm",
				     .runs = 21,
				     .burst = LKB_DEFAULT_BURST,
				     .seconds = 1.0,
				     .lttng = true,
				     .cost = true,
				     .sustained = true,
				     .cpu_rate = 2e6 };
	optind = 1;
	while ((c = getopt_long(argc, argv, "r:b:s:d:nj", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			o->runs = atoi(optarg);
			break;
		case 'b':
			o->burst = atol(optarg);
			break;
		case 's':
			o->seconds = atof(optarg);
			break;
		case 'd':
			o->trace_dir = optarg;
			break;
		case 'n':
			o->lttng = false;
			break;
		case 'o':
			o->cost = strcmp(optarg, "cost") == 0;
			o->sustained = strcmp(optarg, "sustained") == 0;
			break;
		case 'c':
			o->cpu_rate = atof(optarg);
			break;
		case 'j':
			o->json = true;
			break;
		default:
			fputs(probe_usage, stderr);
			return false;
		}
	}
	if (o->runs < 1 || o->runs > 64 || o->burst < 2 || o->burst > MAX_BURST ||
	    o->seconds <= 0 || !(o->cost || o->sustained) || !(o->cpu_rate >= 1e5) ||
	    optind != argc) {
		fputs(probe_usage, stderr);
		return false;
	}
	if (stat(o->trace_dir, &st) != 0 || !S_ISDIR(st.st_mode))
		o->trace_dir = "/tmp";
	return true;
}

/* The loops that record nothing: empty, a disabled site, sites on for a USDT tracer. 0 or 1. */
static int measure_unrecorded(const struct probe_options *o, struct results *r)
{
	int runs = o->runs;

	lkb_progress("empty loop, %d runs", runs);
	r->empty_ns = probe_time_unrecorded(o, probe_loop_empty);
	if (!o->json)
		lkb_row("%-46s %10.3f\n", "empty loop (baseline)", r->empty_ns);
	lkb_progress("disabled site, %d runs", runs);
	r->disabled_ns = probe_time_unrecorded(o, probe_loop_disabled);
	if (!o->json)
		lkb_row("%-46s %10.3f   (%+.3f over the empty loop)\n", "lowkey disabled site",
			r->disabled_ns, r->disabled_ns - r->empty_ns);
	lkb_progress("site on for a USDT tracer, no trace, %d runs", runs);
	if (lk_probe_usdt_enable("lkbench_usdt") < 0) {
		fprintf(stderr, "lowkey bench probe: %s\n", lk_last_error());
		return 1;
	}
	r->usdt_ns = probe_time_unrecorded(o, probe_loop_usdt);
	lkb_progress("span on for a USDT tracer, no trace, %d runs", runs);
	r->usdt_span_ns = probe_time_unrecorded(o, probe_loop_usdt_span);
	lk_probe_usdt_reset_rules();
	if (!o->json) {
		lkb_row("%-46s %10.3f   (%+.3f over the empty loop)\n",
			"lowkey site on for USDT, no trace", r->usdt_ns, r->usdt_ns - r->empty_ns);
		lkb_row("%-46s %10.3f   (begin and end)\n", "lowkey span on for USDT, no trace",
			r->usdt_span_ns);
	}
	return 0;
}

/* Enabled events, in bursts inside a trace: two integers, with the CPU time, a span (the last
 * two not with --only sustained). 0 or 1. */
static int measure_enabled(const struct probe_options *o, struct results *r)
{
	int runs = o->runs;

	lkb_progress("enabled event, %d runs", runs);
	r->two = probe_time_bursts(o, "two", lkb_loop_two_ints, 0, 1);
	if (!o->json && !r->two.err)
		lkb_row("%-46s %10.3f\n", "lowkey enabled event, 2 integers, TSC stamp", r->two.ns);
	if (r->two.err) {
		fprintf(stderr, "lowkey bench probe: cannot trace: %s\n", lk_last_error());
		return 1;
	}
	if (!o->cost)
		return 0;
	lkb_progress("enabled event with CPU time, %d runs", runs);
	r->cpu = probe_time_bursts(o, "cpu", lkb_loop_two_ints, LK_TRACE_CPUTIME, 1);
	if (!o->json && !r->cpu.err)
		lkb_row("%-46s %10.3f\n", "lowkey enabled event + thread CPU time", r->cpu.ns);
	lkb_progress("span, %d runs", runs);
	r->span = probe_time_bursts(o, "span", probe_loop_span, 0, 2);
	if (r->cpu.err || r->span.err) {
		fprintf(stderr, "lowkey bench probe: cannot trace: %s\n", lk_last_error());
		return 1;
	}
	if (!o->json) {
		lkb_row("%-46s %10.3f   (begin and end)\n", "lowkey span", r->span.ns);
		if (r->two.lost || r->cpu.lost || r->span.lost)
			lkb_row("(events lost during the timed bursts: %llu, %llu, %llu)\n",
				(unsigned long long)r->two.lost, (unsigned long long)r->cpu.lost,
				(unsigned long long)r->span.lost);
	}
	return 0;
}

static void measure_lttng(const struct probe_options *o, const struct lttng_env *e,
			  struct results *r)
{
	lkb_progress("beside LTTng-UST, %d rounds", o->runs);
	r->lttng = probe_bench_lttng(o, e);
	if (!o->json)
		probe_print_lttng_text(o, &r->lttng);
}

/* The highest rate with no event lost: one thread, two, and one in a ring that does not grow. */
static void measure_rates(const struct probe_options *o, struct results *r)
{
	if (!o->json)
		probe_text_rate_heading(o);
	lkb_progress("sustained rate, 1 thread, %d searches", SEARCHES);
	r->rate1 = probe_summarize_rate(o, 1, 0);
	if (!o->json)
		probe_text_rate("1 producer thread", &r->rate1);
	lkb_progress("sustained rate, 2 threads, %d searches", SEARCHES);
	r->rate2 = lkb_ncpus() >= 2 ? probe_summarize_rate(o, 2, 0) : (struct rate_summary){ 0 };
	if (!o->json)
		probe_text_rate("2 producer threads, together", &r->rate2);
	lkb_progress("sustained rate, fixed ring, %d searches", SEARCHES);
	r->rate1_fixed = probe_summarize_rate(o, 1, LK_TRACE_FIXED_BUFFER);
	if (!o->json)
		probe_text_rate("1 thread, ring fixed at 2 MiB (no growth)", &r->rate1_fixed);
}

/* LTTng-UST's highest rates with no event lost, one thread and two, by the same search. */
static void measure_lttng_rates(const struct probe_options *o, const struct lttng_env *e,
				struct results *r)
{
	if (!o->json)
		probe_text_lttng_rate_heading(o);
	r->lttng_rate_missing = e->missing;
	if (!e->missing) {
		lkb_progress("LTTng-UST sustained rate, 1 thread, %d searches", SEARCHES);
		r->lttng_rate1 = probe_lttng_rate(o, e, 1);
		lkb_progress("LTTng-UST sustained rate, 2 threads, %d searches", SEARCHES);
		if (!r->lttng_rate1.err && lkb_ncpus() >= 2)
			r->lttng_rate2 = probe_lttng_rate(o, e, 2);
		if (r->lttng_rate1.err || r->lttng_rate2.err)
			r->lttng_rate_missing = "an LTTng-UST trial failed: lttng or "
						"lowkey-bench-lttng failed, or the program "
						"was not traced (run them by hand to see why)";
	}
	if (o->json)
		return;
	if (r->lttng_rate_missing) {
		lkb_row("%-46s %10s   (%s)\n", "LTTng-UST", "n/a", r->lttng_rate_missing);
		return;
	}
	probe_text_rate("LTTng-UST, 1 producer thread", &r->lttng_rate1);
	probe_text_rate("LTTng-UST, 2 producer threads, together", &r->lttng_rate2);
}

/* The sustained rates of both tracers, their consumers' CPU, the limits and the ratios. */
static void measure_sustained(const struct probe_options *o, const struct lttng_env *e,
			      struct results *r)
{
	measure_rates(o, r);
	measure_lttng_rates(o, e, r);
	r->consumer = probe_consumer_cpu(o, e->missing ? NULL : e, r->rate1.median,
					 r->lttng_rate_missing ? 0 : r->lttng_rate1.median);
	if (e->missing)
		r->consumer.lttng.missing = e->missing;
	if (!o->json)
		probe_text_consumer_cpu(&r->consumer);
	lkb_progress("memcpy bandwidth");
	r->memcpy_bytes_per_s = probe_memcpy_bytes_per_s();
	lkb_progress("writing to %s", o->trace_dir);
	r->dir_write_bytes_per_s = probe_dir_write_bytes_per_s(o->trace_dir, o->seconds);
	if (!o->json)
		probe_text_limits(o, r);
}

/* Every row the options ask for, the LTTng-UST environment set up; 0 or 1. */
static int measure(const struct probe_options *o, const struct lttng_env *e, struct results *r)
{
	if (o->cost && measure_unrecorded(o, r))
		return 1;
	if (measure_enabled(o, r))
		return 1;
	if (o->cost)
		measure_lttng(o, e, r);
	if (o->sustained)
		measure_sustained(o, e, r);
	return 0;
}

static int probe_run(int argc, char **argv)
{
	struct probe_options o;
	struct lttng_env env = { .missing = "skipped (--no-lttng)" };
	struct results r = { .empty_ns = NAN,
			     .disabled_ns = NAN,
			     .usdt_ns = NAN,
			     .usdt_span_ns = NAN,
			     .cpu.ns = NAN,
			     .span.ns = NAN,
			     .memcpy_bytes_per_s = NAN,
			     .dir_write_bytes_per_s = NAN };
	int err;

	if (!parse_options(argc, argv, &o))
		return 2;
	if (lk_probe_enable("lkbench") < 0) {
		fprintf(stderr, "lowkey bench probe: %s\n", lk_last_error());
		return 1;
	}
	if (!o.json)
		probe_text_heading(&o);
	if (o.lttng)
		probe_lttng_setup(&env);
	err = measure(&o, &env, &r);
	probe_lttng_teardown(&env);
	if (err)
		return 1;
	lkb_progress("memory per thread");
	r.mem = probe_memory_per_thread(&o);
	if (o.json)
		probe_print_json(&o, &r);
	else
		lkb_row("\nmemory per recording thread: %ld KiB resident (the ring, allocated at its first event)\n",
			r.mem / 1024);
	return 0;
}

LK_BENCH(probe_bench, "probe",
	 "probe cost off and on, sustained events/s and consumer CPU, beside LTTng-UST",
	 probe_usage, probe_run);
