// SPDX-License-Identifier: MIT
/*
 * lowkey stat's output: perf stat's table, CSV (-x SEP) and JSON, with the derived metrics (CPUs
 * utilized, rates per second, GHz, IPC, miss ratios) where the counters they need are in the set.
 */
#include <linux/perf_event.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "internal/json.h"
#include "stat.h"

/* ---- which event is which ---- */

#define CACHE(id, op, result) \
	((id) | (PERF_COUNT_HW_CACHE_OP_##op << 8) | (PERF_COUNT_HW_CACHE_RESULT_##result << 16))

static int find(const struct stat_result *r, uint32_t type, uint64_t config)
{
	for (size_t i = 0; i < r->nevents; i++)
		if (r->events[i].supported && r->events[i].type == type &&
		    r->events[i].config == config)
			return (int)i;
	return -1;
}

static bool is(const struct stat_event *e, uint32_t type, uint64_t config)
{
	return e->type == type && e->config == config;
}

static bool is_clock(const struct stat_event *e)
{
	return is(e, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK) ||
	       is(e, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK);
}

/*
 * Enabled but never on a counter (multiplexed out the whole time). An event that was never
 * enabled, a thread that slept throughout, counted a true 0.
 */
/* As perf: never on a counter, or not even enabled (an interval before the command began). */
static bool not_counted(const struct stat_event *e)
{
	return e->running == 0;
}

struct metric {
	double value;
	char unit[40];
	bool percent; /* value is a percentage */
};

static bool ratio_metric(const struct stat_result *r, const struct stat_event *e, uint32_t type,
			 uint64_t denominator, const char *unit, bool percent, struct metric *m)
{
	int d = find(r, type, denominator);

	if (d < 0 || r->events[d].mean <= 0)
		return false;
	m->value = e->mean / r->events[d].mean * (percent ? 100.0 : 1.0);
	m->percent = percent;
	snprintf(m->unit, sizeof(m->unit), "%s", unit);
	return true;
}

/* A count per second of CPU time (task-clock) as perf prints it, or per second of wall time. */
static void rate_metric(const struct stat_result *r, const struct stat_event *e, struct metric *m)
{
	static const char *const prefix[] = { "", "K", "M", "G" };
	int clock = find(r, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK);
	double seconds = clock >= 0 ? r->events[clock].mean / 1e9 : r->elapsed_mean / 1e9;
	double rate = seconds > 0 ? e->mean / seconds : 0;
	int p = 0;

	while (rate >= 1000 && p < 3) {
		rate /= 1000;
		p++;
	}
	m->value = rate;
	snprintf(m->unit, sizeof(m->unit), "%s/sec", prefix[p]);
}

static bool metric_for(const struct stat_result *r, const struct stat_event *e, struct metric *m)
{
	m->percent = false;
	if (!e->supported || not_counted(e))
		return false;
	if (is_clock(e)) {
		if (r->elapsed_mean <= 0)
			return false;
		m->value = e->mean / r->elapsed_mean;
		snprintf(m->unit, sizeof(m->unit), "CPUs utilized");
		return true;
	}
	switch (e->type) {
	case PERF_TYPE_HARDWARE:
		switch (e->config) {
		case PERF_COUNT_HW_CPU_CYCLES: {
			int clock = find(r, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK);

			if (clock < 0 || r->events[clock].mean <= 0)
				break;
			m->value = e->mean / r->events[clock].mean;
			snprintf(m->unit, sizeof(m->unit), "GHz");
			return true;
		}
		case PERF_COUNT_HW_INSTRUCTIONS:
			return ratio_metric(r, e, PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES,
					    "insn per cycle", false, m);
		case PERF_COUNT_HW_BRANCH_MISSES:
			return ratio_metric(r, e, PERF_TYPE_HARDWARE,
					    PERF_COUNT_HW_BRANCH_INSTRUCTIONS, "of all branches",
					    true, m);
		case PERF_COUNT_HW_CACHE_MISSES:
			return ratio_metric(r, e, PERF_TYPE_HARDWARE,
					    PERF_COUNT_HW_CACHE_REFERENCES, "of all cache refs",
					    true, m);
		case PERF_COUNT_HW_STALLED_CYCLES_FRONTEND:
			return ratio_metric(r, e, PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES,
					    "frontend cycles idle", true, m);
		case PERF_COUNT_HW_STALLED_CYCLES_BACKEND:
			return ratio_metric(r, e, PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES,
					    "backend cycles idle", true, m);
		}
		break;
	case PERF_TYPE_HW_CACHE:
		switch (e->config) {
		case CACHE(PERF_COUNT_HW_CACHE_L1D, READ, MISS):
			return ratio_metric(r, e, PERF_TYPE_HW_CACHE,
					    CACHE(PERF_COUNT_HW_CACHE_L1D, READ, ACCESS),
					    "of all L1-dcache accesses", true, m);
		case CACHE(PERF_COUNT_HW_CACHE_L1I, READ, MISS):
			return ratio_metric(r, e, PERF_TYPE_HW_CACHE,
					    CACHE(PERF_COUNT_HW_CACHE_L1I, READ, ACCESS),
					    "of all L1-icache accesses", true, m);
		case CACHE(PERF_COUNT_HW_CACHE_LL, READ, MISS):
			return ratio_metric(r, e, PERF_TYPE_HW_CACHE,
					    CACHE(PERF_COUNT_HW_CACHE_LL, READ, ACCESS),
					    "of all LL-cache accesses", true, m);
		case CACHE(PERF_COUNT_HW_CACHE_DTLB, READ, MISS):
			return ratio_metric(r, e, PERF_TYPE_HW_CACHE,
					    CACHE(PERF_COUNT_HW_CACHE_DTLB, READ, ACCESS),
					    "of all dTLB cache accesses", true, m);
		case CACHE(PERF_COUNT_HW_CACHE_ITLB, READ, MISS):
			return ratio_metric(r, e, PERF_TYPE_HW_CACHE,
					    CACHE(PERF_COUNT_HW_CACHE_ITLB, READ, ACCESS),
					    "of all iTLB cache accesses", true, m);
		}
		break;
	case PERF_TYPE_SOFTWARE:
		if (e->config == PERF_COUNT_SW_DUMMY)
			return false;
		break;
	default:
		if (e->unit[0])
			return false; /* energy and the like: the unit says it all */
		break;
	}
	rate_metric(r, e, m);
	return true;
}

/* Percent of the enabled time the event counted; 100 when not multiplexed. */
static double running_percent(const struct stat_event *e)
{
	return e->enabled ? 100.0 * (double)e->running / (double)e->enabled : 100.0;
}

/* The time an event was enabled or running, per run: perf prints the mean over -r runs. */
static unsigned long long per_run(uint64_t sum, int runs)
{
	return runs > 1 ? (unsigned long long)llround((double)sum / runs) : (unsigned long long)sum;
}

/* Relative standard error of the mean over the runs, in percent (perf's "+-"). */
static double error_percent(const struct stat_event *e, int runs)
{
	return e->mean > 0 && runs > 1 ? 100.0 * e->stddev / sqrt(runs) / e->mean : 0;
}

/* ---- the table ---- */

/* 1234567 -> "1,234,567" */
static void grouped(char *buf, size_t size, double value)
{
	char digits[32];
	size_t len, out = 0;

	snprintf(digits, sizeof(digits), "%.0f", value);
	len = strlen(digits);
	for (size_t i = 0; i < len && out + 2 < size; i++) {
		buf[out++] = digits[i];
		if ((len - i - 1) % 3 == 0 && i + 1 < len && digits[i] != '-')
			buf[out++] = ',';
	}
	buf[out] = '\0';
}

static void text_value(const struct stat_event *e, char *value, size_t vsize, const char **unit)
{
	if (is_clock(e)) {
		snprintf(value, vsize, "%.2f", e->mean / 1e6);
		*unit = "msec";
	} else if (e->unit[0]) {
		snprintf(value, vsize, "%.2f", e->mean * e->scale);
		*unit = e->unit;
	} else {
		grouped(value, vsize, e->mean);
		*unit = "";
	}
}

static void text_event(FILE *out, const struct stat_result *r, const struct stat_event *e)
{
	char value[64];
	const char *unit;
	struct metric m;

	if (!e->supported) {
		fprintf(out, " %18s      %-32s\n", "<not supported>", e->name);
		return;
	}
	if (not_counted(e)) {
		fprintf(out, " %18s      %-32s\n", "<not counted>", e->name);
		return;
	}
	text_value(e, value, sizeof(value), &unit);
	fprintf(out, " %18s %-5s %-32s", value, unit, e->name);
	if (metric_for(r, e, &m) && m.percent)
		fprintf(out, " # %8.2f%% %-24s", m.value, m.unit);
	else if (metric_for(r, e, &m))
		fprintf(out, " # %9.3f %-24s", m.value, m.unit);
	else
		fprintf(out, "   %9s %-24s", "", "");
	if (r->runs > 1)
		fprintf(out, " ( +- %5.2f%% )", error_percent(e, r->runs));
	if (e->running < e->enabled)
		fprintf(out, " (%.2f%%)", running_percent(e));
	fputc('\n', out);
}

/* Same error for the same kind of event: the same explanation but for the event's name. */
static bool same_reason(const struct stat_event *a, const struct stat_event *b)
{
	return !a->supported && !b->supported && a->error == b->error && a->type == b->type;
}

/* Events not counted for the same reason share one note. */
static void text_notes(FILE *out, const struct stat_result *r)
{
	bool fallback = false, kernel_only_sw = false;

	for (size_t i = 0; i < r->nevents; i++) {
		const struct stat_event *e = &r->events[i];
		bool first = !e->supported;

		for (size_t j = 0; j < i && first; j++)
			first = !same_reason(&r->events[j], e);
		if (!first)
			continue;
		fprintf(out, "\n ");
		for (size_t j = i; j < r->nevents; j++)
			if (same_reason(&r->events[j], e))
				fprintf(out, "%s%s", j == i ? "" : ", ", r->events[j].name);
		fprintf(out, ": not counted.\n   %s\n", e->why ? e->why : "");
	}
	for (size_t i = 0; i < r->nevents; i++) {
		const struct stat_event *e = &r->events[i];

		fallback |= e->user_only_fallback;
		kernel_only_sw |= e->user_only && e->type == PERF_TYPE_SOFTWARE &&
				  (e->config == PERF_COUNT_SW_CONTEXT_SWITCHES ||
				   e->config == PERF_COUNT_SW_CPU_MIGRATIONS);
	}
	if (fallback)
		fprintf(out,
			"\n Events marked :u counted user space only: this user may not count the "
			"kernel (kernel.perf_event_paranoid >= 2).\n   `sysctl -w kernel.perf_event_paranoid=1` "
			"as root, or CAP_PERFMON, counts it too.\n");
	if (kernel_only_sw)
		fprintf(out,
			"   context-switches and cpu-migrations happen in the kernel: counted user "
			"space only they stay 0.\n");
}

static void text_threads(FILE *out, const struct stat_result *r)
{
	fprintf(out, "\n Per thread:\n");
	if (r->lost)
		fprintf(out,
			" (%ld exit reports were lost: the per-CPU buffers filled up; the "
			"first line counts those threads)\n",
			r->lost);
	for (size_t t = 0; t < r->nthreads; t++) {
		const struct stat_thread *th = &r->threads[t];

		for (size_t i = 0; i < r->nevents; i++) {
			const struct stat_event *e = &r->events[i];
			struct stat_event one = *e;
			const char *unit;
			char value[64];

			if (!e->supported)
				continue;
			one.mean = th->values[i];
			text_value(&one, value, sizeof(value), &unit);
			if (th->tid)
				fprintf(out, " %16s-%-7d %18s %-5s %s\n", th->comm, (int)th->tid,
					value, unit, e->name);
			else
				fprintf(out, " %24s %18s %-5s %s\n", "(still running)", value, unit,
					e->name);
		}
	}
}

void stat_print_text(FILE *out, const struct stat_result *r)
{
	if (r->process_mode && r->pid)
		fprintf(out, "\n Performance counter stats for %s", r->target);
	else
		fprintf(out, "\n Performance counter stats for '%s'", r->target);
	if (r->runs > 1)
		fprintf(out, " (%d runs)", r->runs);
	fprintf(out, ":\n\n");
	for (size_t i = 0; i < r->nevents; i++)
		text_event(out, r, &r->events[i]);
	if (r->nthreads)
		text_threads(out, r);
	fprintf(out, "\n %18.9f seconds time elapsed", r->elapsed_mean / 1e9);
	if (r->runs > 1)
		fprintf(out, "  ( +- %5.2f%% )",
			r->elapsed_mean > 0 ?
				100.0 * r->elapsed_stddev / sqrt(r->runs) / r->elapsed_mean :
				0);
	fputc('\n', out);
	if (r->user_ns >= 0) {
		fprintf(out, "\n %18.9f seconds user\n", r->user_ns / 1e9);
		fprintf(out, " %18.9f seconds sys\n", r->sys_ns / 1e9);
	}
	text_notes(out, r);
	fputc('\n', out);
}

/* ---- CSV, as perf stat -x ---- */

static void csv_event(FILE *out, const char *sep, const struct stat_result *r,
		      const struct stat_event *e)
{
	struct metric m;
	bool has_metric = metric_for(r, e, &m);

	if (!e->supported)
		fprintf(out, "<not supported>%s%s%s%s", sep, is_clock(e) ? "msec" : e->unit, sep,
			e->name);
	else if (not_counted(e))
		fprintf(out, "<not counted>%s%s%s%s", sep, is_clock(e) ? "msec" : e->unit, sep,
			e->name);
	else if (is_clock(e))
		fprintf(out, "%.2f%smsec%s%s", e->mean / 1e6, sep, sep, e->name);
	else if (e->unit[0])
		fprintf(out, "%.6g%s%s%s%s", e->mean * e->scale, sep, e->unit, sep, e->name);
	else
		fprintf(out, "%.0f%s%s%s", e->mean, sep, sep, e->name);
	if (r->runs > 1)
		fprintf(out, "%s%.2f%%", sep, error_percent(e, r->runs));
	fprintf(out, "%s%llu%s%.2f", sep, per_run(e->running, r->runs), sep, running_percent(e));
	if (has_metric)
		fprintf(out, "%s%.3f%s%s%s", sep, m.value, sep, m.percent ? "% " : "", m.unit);
	else
		fprintf(out, "%s%s", sep, sep);
	fputc('\n', out);
}

void stat_print_csv(FILE *out, const char *sep, const struct stat_result *r)
{
	for (size_t i = 0; i < r->nevents; i++)
		csv_event(out, sep, r, &r->events[i]);
	for (size_t t = 0; t < r->nthreads; t++)
		for (size_t i = 0; i < r->nevents; i++)
			if (r->events[i].supported)
				fprintf(out, "%s-%d%s%.0f%s%s%s%s\n", r->threads[t].comm,
					(int)r->threads[t].tid, sep, r->threads[t].values[i], sep,
					r->events[i].unit, sep, r->events[i].name);
}

/* ---- JSON ---- */

void stat_print_json(FILE *out, const struct stat_result *r)
{
	struct lk__json j;

	lk__json_begin(&j, out, false);
	if (r->process_mode && r->pid)
		lk__json_int(&j, "pid", r->pid);
	else if (r->process_mode)
		lk__json_str(&j, "cpus", r->target);
	else
		lk__json_str(&j, "command", r->target);
	lk__json_int(&j, "runs", r->runs);
	if (!r->process_mode)
		lk__json_int(&j, "exit_status", r->exit_status);
	lk__json_int(&j, "elapsed_ns", llround(r->elapsed_mean));
	if (r->runs > 1)
		lk__json_int(&j, "elapsed_stddev_ns", llround(r->elapsed_stddev));
	if (r->user_ns >= 0) {
		lk__json_int(&j, "user_ns", llround(r->user_ns));
		lk__json_int(&j, "sys_ns", llround(r->sys_ns));
	}
	lk__json_array(&j, "events");
	for (size_t i = 0; i < r->nevents; i++) {
		const struct stat_event *e = &r->events[i];
		struct metric m;

		lk__json_object(&j, NULL);
		lk__json_str(&j, "event", e->name);
		lk__json_str(&j, "resolved", e->resolved);
		lk__json_str(&j, "unit", e->unit);
		lk__json_bool(&j, "supported", e->supported);
		if (!e->supported) {
			lk__json_str(&j, "why", e->why ? e->why : "");
			lk__json_close(&j);
			continue;
		}
		lk__json_bool(&j, "counted", !not_counted(e));
		lk__json_int(&j, "value", llround(e->mean));
		if (e->scale != 1.0)
			lk__json_num(&j, "scaled_to_unit", e->mean * e->scale);
		if (r->runs > 1) {
			lk__json_num(&j, "stddev", e->stddev);
			lk__json_num(&j, "variance", e->stddev * e->stddev);
		}
		lk__json_int(&j, "time_enabled_ns", (long long)per_run(e->enabled, r->runs));
		lk__json_int(&j, "time_running_ns", (long long)per_run(e->running, r->runs));
		lk__json_num(&j, "pcnt_running", running_percent(e));
		lk__json_bool(&j, "user_only", e->user_only);
		lk__json_bool(&j, "user_only_fallback", e->user_only_fallback);
		if (metric_for(r, e, &m)) {
			char unit[48];

			snprintf(unit, sizeof(unit), "%s%s", m.percent ? "% " : "", m.unit);
			lk__json_num(&j, "metric_value", m.value);
			lk__json_str(&j, "metric_unit", unit);
		}
		lk__json_close(&j);
	}
	lk__json_close(&j);
	if (r->nthreads) {
		lk__json_array(&j, "threads");
		for (size_t t = 0; t < r->nthreads; t++) {
			lk__json_object(&j, NULL);
			lk__json_int(&j, "pid", r->threads[t].pid);
			lk__json_int(&j, "tid", r->threads[t].tid);
			lk__json_str(&j, "comm", r->threads[t].comm);
			lk__json_object(&j, "values");
			for (size_t i = 0; i < r->nevents; i++)
				if (r->events[i].supported)
					lk__json_int(&j, r->events[i].name,
						     llround(r->threads[t].values[i]));
			lk__json_close(&j);
			lk__json_close(&j);
		}
		lk__json_close(&j);
	}
	lk__json_end(&j);
}

/* ---- -I: one interval ---- */

/* One event of an interval as a JSON line; the keys of --json's events, and "interval". */
static void json_line(FILE *out, double seconds, const struct stat_result *d,
		      const struct stat_event *e)
{
	struct lk__json j;
	struct metric m;

	lk__json_begin(&j, out, true);
	lk__json_fixed(&j, "interval", seconds, 9);
	lk__json_str_or_null(&j, "event", e->name);
	lk__json_str_or_null(&j, "unit", e->unit);
	lk__json_bool(&j, "supported", e->supported);
	if (e->supported) {
		lk__json_bool(&j, "counted", !not_counted(e));
		lk__json_int(&j, "value", llround(e->mean));
		lk__json_uint(&j, "time_enabled_ns", e->enabled);
		lk__json_uint(&j, "time_running_ns", e->running);
		lk__json_fixed(&j, "pcnt_running", running_percent(e), 2);
	}
	if (e->supported && metric_for(d, e, &m)) {
		lk__json_num(&j, "metric_value", m.value);
		lk__json_strf(&j, "metric_unit", "%s%s", m.percent ? "% " : "", m.unit);
	}
	lk__json_end(&j);
}

void stat_print_interval(FILE *out, enum stat_format format, const char *sep, double seconds,
			 const struct stat_result *d, bool first)
{
	if (format == STAT_TEXT && first)
		fprintf(out, "#           time             counts unit events\n");
	for (size_t i = 0; i < d->nevents; i++) {
		const struct stat_event *e = &d->events[i];

		if (format == STAT_JSON) {
			json_line(out, seconds, d, e);
			continue;
		}
		fprintf(out, "%16.9f%s", seconds, format == STAT_CSV ? sep : "");
		if (format == STAT_CSV)
			csv_event(out, sep, d, e);
		else
			text_event(out, d, e);
	}
}
