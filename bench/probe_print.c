// SPDX-License-Identifier: MIT
/*
 * `lowkey bench probe`'s output: the text table, a row as soon as it is measured (lkb_row), or
 * JSON at the end.
 */
#include <math.h>
#include <stdio.h>

#include "bench.h"
#include "probe_bench.h"

static void print_lttng_side(const char *name, const struct lttng_side *s)
{
	lkb_row("%-34s %8ld %9.3f %10.3f %8.2fx   %.2fx (%.2fx..%.2fx)\n", name, s->burst,
		s->lowkey_ns, s->lttng_ns, s->ratio_of_medians, s->ratio_median, s->ratio_min,
		s->ratio_max);
}

void probe_print_lttng_text(const struct probe_options *o, const struct lttng_result *l)
{
	lkb_row("\nbeside LTTng-UST 2.13, like for like: both tracers in one process (lowkey-bench-lttng) and one\n"
		"thread, the same loop around each one's two-integer event, bursts of the same length;\n"
		"lowkey and LTTng-UST alternate burst by burst (lowkey, LTTng-UST, lowkey, ...), %d rounds,\n"
		"a %d ms pause after every enabled burst (lowkey's also waits until its consumer has written\n"
		"it). ns/event: medians of the rounds; ratio: LTTng-UST / lowkey, of those medians, and the\n"
		"median (min..max) of the per-round ratios\n",
		o->runs, PEER_PAUSE_MS);
	if (!l->have_off && !l->have_on) {
		lkb_row("%-34s %10s   (%s)\n", "LTTng-UST tracepoint", "n/a",
			l->missing ? l->missing : "not run");
		return;
	}
	lkb_row("%-34s %8s %9s %10s %9s   %s\n", "ns/event", "burst", "lowkey", "LTTng-UST",
		"ratio", "per round");
	if (l->have_off)
		print_lttng_side("disabled (no trace, no session)", &l->off);
	if (l->have_on)
		print_lttng_side("enabled (trace, session)", &l->on);
	if (l->missing)
		lkb_row("(%s)\n", l->missing);
	if (l->have_on) {
		lkb_row("\nLTTng-UST enabled / lowkey enabled: %.1fx (ratio of the medians; per round %.1fx, "
			"%.1fx..%.1fx)\n",
			l->on.ratio_of_medians, l->on.ratio_median, l->on.ratio_min,
			l->on.ratio_max);
		if (l->on.lowkey_lost)
			lkb_row("(lowkey lost %llu events in the timed bursts)\n",
				l->on.lowkey_lost);
		if (l->discarded[0])
			lkb_row("(LTTng-UST: %s)\n", l->discarded);
	}
}

void probe_text_heading(const struct probe_options *o)
{
	lkb_row("lowkey bench probe: what a probe costs, beside LTTng-UST\n");
	lkb_row("machine: %s\n", lkb_machine());
	lkb_row("method:  median of %d runs; enabled rows in bursts of %ld events that fit the buffer,\n"
		"         traces written to %s\n\n",
		o->runs, o->burst, o->trace_dir);
	lkb_row("%-46s %10s\n", "", "ns/event");
}

void probe_text_rate_heading(const struct probe_options *o)
{
	lkb_row("\nsustained rate without loss, default buffer (2 MiB per thread, growing to 16 MiB while the\n"
		"consumer lags): the highest rate a %g s trial recorded with no event lost; median of %d\n"
		"searches (min, max); loss N/%d: N searches ended at a rate where events were lost (the\n"
		"consumer fell behind), the others where the producers could not keep the rate (short of\n"
		"CPU: one shared with the consumer, or with other programs)\n",
		o->seconds, SEARCHES, SEARCHES);
}

void probe_text_rate(const char *name, const struct rate_summary *s)
{
	lkb_row("%-46s %10.1f M events/s (min %.1f, max %.1f; loss %d/%d)\n", name, s->median / 1e6,
		s->min / 1e6, s->max / 1e6, s->ended_by_loss, SEARCHES);
}

void probe_text_lttng_rate_heading(const struct probe_options *o)
{
	int cpus = lkb_ncpus();

	lkb_row("\nbeside LTTng-UST 2.13, the same search (the same paced producers), a session of its own\n"
		"per trial: discard mode, per-UID buffers of %d x %d MiB per CPU (%d MiB, a lowkey thread's\n"
		"ring at its largest; %d CPUs: %d MiB in all), its consumer daemon writing to %s;\n"
		"lost: the events `lttng list` says the channel discarded\n",
		LTTNG_RATE_SUBBUFS, LTTNG_RATE_SUBBUF_MIB,
		LTTNG_RATE_SUBBUFS * LTTNG_RATE_SUBBUF_MIB, cpus,
		cpus * LTTNG_RATE_SUBBUFS * LTTNG_RATE_SUBBUF_MIB, o->trace_dir);
}

static void text_cpu_row(const char *name, const struct consumer_cpu *c)
{
	if (c->missing) {
		lkb_row("%-46s %10s   (%s)\n", name, "n/a", c->missing);
		return;
	}
	lkb_row("%-46s %10.2f ns/event (min %.2f, max %.2f; %.1f M events, %llu lost)\n", name,
		c->ns_per_event, c->min, c->max, (double)c->events / 1e6,
		(unsigned long long)c->lost);
}

void probe_text_consumer_cpu(const struct consumer_cpu_result *c)
{
	lkb_row("\nconsumer CPU an event written (ns; the same figure is ms per million events): one\n"
		"producer thread at %.1f M events/s for %.1f s, median (min, max) of %d runs, the tracers\n"
		"alternating; the consumers' run time from /proc's schedstat until every event is written\n",
		c->rate / 1e6, c->seconds, CPU_RUNS);
	text_cpu_row("lowkey (the threads its trace starts)", &c->lowkey);
	text_cpu_row("LTTng-UST (lttng-consumerd)", &c->lttng);
}

/* The limits the lossless rate is quoted against, and the ratios. */
struct limits {
	double unlimited;	 /* events/s one thread produces with nothing limiting it */
	double record_bytes;	 /* an event's bytes in lowkey's trace */
	double memcpy_bytes;	 /* memcpy bytes/s */
	double memcpy_events;	 /* the same in events/s at record_bytes */
	double dir_write_bytes;	 /* one thread writing a new file in the trace directory, bytes/s */
	double dir_write_events; /* the same in events/s at record_bytes */
	double lossless_over_unlimited, lossless_over_memcpy, lossless_over_dir_write;
	double over_lttng_one, over_lttng_two; /* lowkey / LTTng-UST lossless rates */
	double cpu_lowkey_over_lttng;	       /* consumer CPU an event */
};

/* a / b, NaN where either is unknown (NaN, or a rate of 0: not measured). */
static double ratio(double a, double b)
{
	return a > 0 && b > 0 ? a / b : NAN;
}

static struct limits compute_limits(const struct results *r)
{
	struct limits l;
	const struct rate_trial *best = &r->rate1.best;
	bool lttng = !r->lttng_rate_missing;

	l.unlimited = ratio(1e9, r->two.ns);
	l.record_bytes = ratio((double)best->bytes, (double)best->events);
	l.memcpy_bytes = r->memcpy_bytes_per_s;
	l.memcpy_events = ratio(l.memcpy_bytes, l.record_bytes);
	l.lossless_over_unlimited = ratio(r->rate1.median, l.unlimited);
	l.lossless_over_memcpy = ratio(r->rate1.median, l.memcpy_events);
	l.dir_write_bytes = r->dir_write_bytes_per_s;
	l.dir_write_events = ratio(l.dir_write_bytes, l.record_bytes);
	l.lossless_over_dir_write = ratio(r->rate1.median, l.dir_write_events);
	l.over_lttng_one = lttng ? ratio(r->rate1.median, r->lttng_rate1.median) : NAN;
	l.over_lttng_two = lttng ? ratio(r->rate2.median, r->lttng_rate2.median) : NAN;
	l.cpu_lowkey_over_lttng =
		ratio(r->consumer.lowkey.ns_per_event, r->consumer.lttng.ns_per_event);
	return l;
}

/* A ratio's row: "n/a" where it is unknown. */
static void text_ratio(const char *name, double v)
{
	if (isnan(v))
		lkb_row("%-52s %8s\n", name, "n/a");
	else
		lkb_row("%-52s %8.3f\n", name, v);
}

void probe_text_limits(const struct probe_options *o, const struct results *r)
{
	struct limits l = compute_limits(r);
	char name[64];

	lkb_row("\nwhat the lossless rate is quoted against, same run:\n");
	lkb_row("%-46s %10.1f M events/s (1 / the enabled event's ns)\n",
		"1 thread, nothing limiting it", l.unlimited / 1e6);
	snprintf(name, sizeof(name), "memcpy between two %d MiB buffers", MEMCPY_MIB);
	lkb_row("%-46s %10.2f GB/s = %.1f M events/s at %.2f bytes an event\n"
		"%-46s (lowkey's trace: bytes written / events)\n",
		name, l.memcpy_bytes / 1e9, l.memcpy_events / 1e6, l.record_bytes, "");
	snprintf(name, sizeof(name), "writing a new file in %s", o->trace_dir);
	if (isnan(l.dir_write_bytes))
		lkb_row("%-46s %10s   (a write failed)\n", name, "n/a");
	else
		lkb_row("%-46s %10.2f GB/s = %.1f M events/s\n"
			"%-46s (one thread, 256 KiB writes, as the consumer writes,\n"
			"%-46s  for %g s or %d MiB, median of 3)\n",
			name, l.dir_write_bytes / 1e9, l.dir_write_events / 1e6, "", "", o->seconds,
			DIR_WRITE_MAX_MIB);
	lkb_row("\nratios (lossless: the sustained rates' medians above):\n");
	text_ratio("lowkey lossless 1 thread / 1 thread unlimited", l.lossless_over_unlimited);
	text_ratio("lowkey lossless 1 thread / memcpy (bytes/s)", l.lossless_over_memcpy);
	text_ratio("lowkey lossless 1 thread / writing a new file", l.lossless_over_dir_write);
	text_ratio("lowkey / LTTng-UST lossless, 1 thread", l.over_lttng_one);
	text_ratio("lowkey / LTTng-UST lossless, 2 threads", l.over_lttng_two);
	text_ratio("consumer CPU an event, lowkey / LTTng-UST", l.cpu_lowkey_over_lttng);
}

static void json_lttng_side(struct lk__json *j, const char *key, const struct lttng_side *s,
			    bool have)
{
	if (!have) {
		lk__json_null(j, key);
		return;
	}
	lk__json_object(j, key);
	lk__json_int(j, "burst", s->burst);
	lk__json_int(j, "rounds", s->rounds);
	lk__json_num(j, "lowkey_ns", s->lowkey_ns);
	lk__json_num(j, "lttng_ns", s->lttng_ns);
	lk__json_num(j, "ratio_of_medians", s->ratio_of_medians);
	lk__json_num(j, "ratio_per_round_median", s->ratio_median);
	lk__json_num(j, "ratio_per_round_min", s->ratio_min);
	lk__json_num(j, "ratio_per_round_max", s->ratio_max);
	lk__json_int(j, "lowkey_lost", (long long)s->lowkey_lost);
	lk__json_close(j);
}

/* The like-for-like comparison; ns_per_event.lttng_* hold its LTTng-UST medians. */
static void print_lttng_json(struct lk__json *j, const struct lttng_result *l)
{
	lk__json_object(j, "lttng_comparison");
	lk__json_str(j, "method",
		     "one process (lowkey-bench-lttng), one thread, same burst length, "
		     "lowkey and LTTng-UST bursts alternating; ns: medians of the rounds; "
		     "ratio: LTTng-UST / lowkey");
	lk__json_str(j, "ratio", "ratio_of_medians");
	lk__json_int(j, "pause_ms", PEER_PAUSE_MS);
	json_lttng_side(j, "disabled", &l->off, l->have_off);
	json_lttng_side(j, "enabled", &l->on, l->have_on);
	lk__json_num(j, "lttng_enabled_over_lowkey_enabled",
		     l->have_on ? l->on.ratio_of_medians : -1);
	if (l->discarded[0])
		lk__json_str(j, "lttng_discarded", l->discarded);
	else
		lk__json_null(j, "lttng_discarded");
	lk__json_close(j);
}

/* LTTng-UST's sustained rates, in sustained_events_per_s: null where there are none. */
static void json_lttng_rates(struct lk__json *j, const struct results *r)
{
	const struct rate_summary *one = &r->lttng_rate1, *two = &r->lttng_rate2;
	bool have = !r->lttng_rate_missing;

	lk__json_num(j, "lttng_one_thread", have ? one->median : NAN);
	lk__json_num(j, "lttng_one_thread_min", have ? one->min : NAN);
	lk__json_num(j, "lttng_one_thread_max", have ? one->max : NAN);
	lk__json_num(j, "lttng_two_threads", have ? two->median : NAN);
	lk__json_num(j, "lttng_two_threads_min", have ? two->min : NAN);
	lk__json_num(j, "lttng_two_threads_max", have ? two->max : NAN);
}

static void json_lttng_int(struct lk__json *j, const char *key, int v, const struct results *r)
{
	if (r->lttng_rate_missing)
		lk__json_null(j, key);
	else
		lk__json_int(j, key, v);
}

/* How LTTng-UST's sustained rows were set up. */
static void json_lttng_sustained(struct lk__json *j, const struct probe_options *o,
				 const struct results *r)
{
	long long per_cpu = (long long)LTTNG_RATE_SUBBUFS * LTTNG_RATE_SUBBUF_MIB << 20;

	lk__json_object(j, "lttng_sustained");
	lk__json_str(j, "method",
		     "the search of lowkey's rows, the same paced producers (lowkey-bench-lttng); "
		     "a session per trial: discard mode, per-UID buffers, output in trace_dir; "
		     "lost: the events `lttng list` says the channel discarded");
	lk__json_str(j, "buffer_matching",
		     "per CPU as many bytes as a lowkey thread's ring at its largest "
		     "(2 MiB growing 8 times)");
	lk__json_int(j, "subbuf_bytes", (long long)LTTNG_RATE_SUBBUF_MIB << 20);
	lk__json_int(j, "subbufs", LTTNG_RATE_SUBBUFS);
	lk__json_int(j, "bytes_per_cpu", per_cpu);
	lk__json_int(j, "cpus", lkb_ncpus());
	lk__json_int(j, "bytes_in_all", per_cpu * lkb_ncpus());
	lk__json_str(j, "trace_dir", o->trace_dir);
	lk__json_str_or_null(j, "missing", r->lttng_rate_missing);
	lk__json_close(j);
}

static void json_cpu_side(struct lk__json *j, const char *prefix, const struct consumer_cpu *c)
{
	char key[64];

	snprintf(key, sizeof(key), "%s_ns_per_event", prefix);
	lk__json_num(j, key, c->missing ? NAN : c->ns_per_event);
	snprintf(key, sizeof(key), "%s_ns_per_event_min", prefix);
	lk__json_num(j, key, c->missing ? NAN : c->min);
	snprintf(key, sizeof(key), "%s_ns_per_event_max", prefix);
	lk__json_num(j, key, c->missing ? NAN : c->max);
	snprintf(key, sizeof(key), "%s_events", prefix);
	lk__json_uint(j, key, c->events);
	snprintf(key, sizeof(key), "%s_lost", prefix);
	lk__json_uint(j, key, c->lost);
	snprintf(key, sizeof(key), "%s_missing", prefix);
	lk__json_str_or_null(j, key, c->missing);
}

/* Both consumers' CPU an event written, over the fixed-rate runs. */
static void json_consumer_cpu(struct lk__json *j, const struct consumer_cpu_result *c)
{
	lk__json_object(j, "consumer_cpu");
	lk__json_str(j, "method",
		     "one producer thread at events_per_s for seconds, runs times, the tracers "
		     "alternating; the consumer's run time (/proc schedstat) until every event is "
		     "written, over the events written: lowkey's the threads its trace starts, "
		     "LTTng-UST's lttng-consumerd");
	lk__json_num(j, "events_per_s", c->rate);
	lk__json_num(j, "seconds", c->seconds);
	lk__json_int(j, "runs", CPU_RUNS);
	json_cpu_side(j, "lowkey", &c->lowkey);
	json_cpu_side(j, "lttng", &c->lttng);
	lk__json_close(j);
}

/* The limits the lossless rate is quoted against, and the ratios the goals are stated in. */
static void json_limits(struct lk__json *j, const struct results *r)
{
	struct limits l = compute_limits(r);

	lk__json_object(j, "sustained_limits");
	lk__json_num(j, "unlimited_events_per_s", l.unlimited);
	lk__json_num(j, "memcpy_bytes_per_s", l.memcpy_bytes);
	lk__json_int(j, "memcpy_buffer_bytes", (long long)MEMCPY_MIB << 20);
	lk__json_num(j, "record_bytes", l.record_bytes);
	lk__json_num(j, "memcpy_events_per_s", l.memcpy_events);
	lk__json_num(j, "dir_write_bytes_per_s", l.dir_write_bytes);
	lk__json_num(j, "dir_write_events_per_s", l.dir_write_events);
	lk__json_close(j);
	lk__json_object(j, "sustained_ratios");
	lk__json_num(j, "lossless_over_unlimited", l.lossless_over_unlimited);
	lk__json_num(j, "lossless_over_memcpy", l.lossless_over_memcpy);
	lk__json_num(j, "lossless_over_dir_write", l.lossless_over_dir_write);
	lk__json_num(j, "lowkey_over_lttng_lossless_one_thread", l.over_lttng_one);
	lk__json_num(j, "lowkey_over_lttng_lossless_two_threads", l.over_lttng_two);
	lk__json_num(j, "consumer_cpu_per_event_lowkey_over_lttng", l.cpu_lowkey_over_lttng);
	lk__json_close(j);
}

/* The sustained rates (--only cost leaves them out), the consumers' CPU, limits and ratios. */
static void json_sustained(struct lk__json *j, const struct probe_options *o,
			   const struct results *r)
{
	lk__json_object(j, "sustained_events_per_s");
	lk__json_num(j, "one_thread", r->rate1.median);
	lk__json_num(j, "one_thread_min", r->rate1.min);
	lk__json_num(j, "one_thread_max", r->rate1.max);
	lk__json_num(j, "two_threads", r->rate2.median);
	lk__json_num(j, "two_threads_min", r->rate2.min);
	lk__json_num(j, "two_threads_max", r->rate2.max);
	lk__json_num(j, "one_thread_fixed_buffer", r->rate1_fixed.median);
	lk__json_num(j, "one_thread_fixed_buffer_min", r->rate1_fixed.min);
	lk__json_num(j, "one_thread_fixed_buffer_max", r->rate1_fixed.max);
	json_lttng_rates(j, r);
	lk__json_close(j);
	lk__json_object(j, "sustained_searches_ended_by_loss");
	lk__json_int(j, "searches", SEARCHES);
	lk__json_int(j, "one_thread", r->rate1.ended_by_loss);
	lk__json_int(j, "two_threads", r->rate2.ended_by_loss);
	lk__json_int(j, "one_thread_fixed_buffer", r->rate1_fixed.ended_by_loss);
	json_lttng_int(j, "lttng_one_thread", r->lttng_rate1.ended_by_loss, r);
	json_lttng_int(j, "lttng_two_threads", r->lttng_rate2.ended_by_loss, r);
	lk__json_close(j);
	json_lttng_sustained(j, o, r);
	json_consumer_cpu(j, &r->consumer);
	json_limits(j, r);
}

void probe_print_json(const struct probe_options *o, const struct results *r)
{
	struct lk__json j;

	lk__json_begin(&j, stdout, false);
	lk__json_str(&j, "bench", "probe");
	lk__json_str(&j, "machine", lkb_machine());
	lk__json_int(&j, "runs", o->runs);
	lk__json_int(&j, "burst", o->burst);
	lk__json_str(&j, "trace_dir", o->trace_dir);
	lk__json_object(&j, "ns_per_event");
	lk__json_num(&j, "empty_loop", r->empty_ns);
	lk__json_num(&j, "disabled", r->disabled_ns);
	lk__json_num(&j, "usdt_no_trace", r->usdt_ns);
	lk__json_num(&j, "usdt_span_no_trace", r->usdt_span_ns);
	lk__json_num(&j, "enabled_two_ints", r->two.ns);
	lk__json_num(&j, "enabled_with_cputime", r->cpu.ns);
	lk__json_num(&j, "span", r->span.ns);
	lk__json_num(&j, "lttng_disabled", r->lttng.have_off ? r->lttng.off.lttng_ns : -1);
	lk__json_num(&j, "lttng_enabled", r->lttng.have_on ? r->lttng.on.lttng_ns : -1);
	lk__json_close(&j);
	if (r->lttng.missing)
		lk__json_str(&j, "lttng_missing", r->lttng.missing);
	print_lttng_json(&j, &r->lttng);
	if (o->sustained)
		json_sustained(&j, o, r);
	lk__json_int(&j, "memory_per_thread_bytes", r->mem);
	lk__json_end(&j);
}
