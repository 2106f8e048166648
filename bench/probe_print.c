// SPDX-License-Identifier: MIT
/*
 * `lowkey bench probe`'s output: the text table, a row as soon as it is measured (lkb_row), or
 * JSON at the end.
 */
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
		"consumer lags): the highest rate a %.1f s trial recorded with no event lost; median of %d\n"
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
	lk__json_object(&j, "sustained_events_per_s");
	lk__json_num(&j, "one_thread", r->rate1.median);
	lk__json_num(&j, "one_thread_min", r->rate1.min);
	lk__json_num(&j, "one_thread_max", r->rate1.max);
	lk__json_num(&j, "two_threads", r->rate2.median);
	lk__json_num(&j, "two_threads_min", r->rate2.min);
	lk__json_num(&j, "two_threads_max", r->rate2.max);
	lk__json_num(&j, "one_thread_fixed_buffer", r->rate1_fixed.median);
	lk__json_num(&j, "one_thread_fixed_buffer_min", r->rate1_fixed.min);
	lk__json_num(&j, "one_thread_fixed_buffer_max", r->rate1_fixed.max);
	lk__json_close(&j);
	lk__json_object(&j, "sustained_searches_ended_by_loss");
	lk__json_int(&j, "searches", SEARCHES);
	lk__json_int(&j, "one_thread", r->rate1.ended_by_loss);
	lk__json_int(&j, "two_threads", r->rate2.ended_by_loss);
	lk__json_int(&j, "one_thread_fixed_buffer", r->rate1_fixed.ended_by_loss);
	lk__json_close(&j);
	lk__json_int(&j, "memory_per_thread_bytes", r->mem);
	lk__json_end(&j);
}
