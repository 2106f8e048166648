// SPDX-License-Identifier: MIT
/*
 * Print a trace's events in time order, whatever format lowkey wrote it in: spans paired (an end
 * shows its duration), counters as numbers, context switches where they were recorded.
 *
 *   cc read_trace.c $(pkg-config --cflags --libs lowkey) -o read_trace
 *   lowkey trace -o t.pftrace -- ./example_probes && ./read_trace t.pftrace
 */
#include <inttypes.h>
#include <stdio.h>

#include <lowkey/lowkey.h>

static void print_arg(const struct lk_trace_arg *a)
{
	switch (a->type) {
	case LK_PROBE_I64:
		printf(" %s=%" PRId64, a->name, a->v.i64);
		break;
	case LK_PROBE_F64:
		printf(" %s=%g", a->name, a->v.f64);
		break;
	case LK_PROBE_STR:
		printf(" %s=\"%s\"", a->name, a->v.str);
		break;
	case LK_PROBE_PTR:
		printf(" %s=0x%" PRIx64, a->name, a->v.u64);
		break;
	default:
		printf(" %s=%" PRIu64, a->name, a->v.u64);
		break;
	}
}

static void print_event(const struct lk_trace_event *ev)
{
	static const char *const kinds[] = { "?", "event", "begin", "end", "counter" };

	printf("%" PRIu64 ".%09" PRIu64 " %d %-12s ", ev->ns / 1000000000u, ev->ns % 1000000000u,
	       ev->tid, ev->thread_name);
	if (ev->type == LK_TRACE_EV_SWITCH_OUT) {
		printf("off cpu %u (%s)\n", ev->cpu, ev->preempted ? "preempted" : "blocked");
		return;
	}
	if (ev->type == LK_TRACE_EV_SWITCH_IN) {
		printf("on cpu %u\n", ev->cpu);
		return;
	}
	printf("%-7s %*s%s:%s", kinds[ev->kind <= 4 ? ev->kind : 0], 2 * (int)ev->depth, "",
	       ev->provider, ev->name);
	if (ev->kind == LK_PROBE_COUNTER)
		printf(" = %g", ev->value);
	else
		for (unsigned int i = 0; i < ev->nargs; i++) {
			struct lk_trace_arg a;

			if (lk_trace_event_arg(ev, i, &a) == 0)
				print_arg(&a);
		}
	if (ev->kind == LK_PROBE_SPAN_END && ev->paired)
		printf("  (%" PRIu64 " ns)", ev->duration_ns);
	else if (ev->kind == LK_PROBE_SPAN_END)
		printf("  (no begin)");
	printf("\n");
}

int main(int argc, char **argv)
{
	const struct lk_trace_file_info *info;
	struct lk_trace_file *tf;
	struct lk_trace_event ev;
	int rc;

	if (argc != 2) {
		fprintf(stderr, "usage: %s TRACE   (a CTF directory, .pftrace or JSON file)\n",
			argv[0]);
		return 2;
	}
	if (lk_trace_file_open(argv[1], &tf) != 0) {
		fprintf(stderr, "%s\n", lk_last_error());
		return 1;
	}
	info = lk_trace_file_get_info(tf);
	printf("%s trace of %s (pid %d), %u threads\n", info->format_name, info->process_name,
	       info->pid, info->threads);
	while ((rc = lk_trace_file_next(tf, &ev)) == 1)
		print_event(&ev);
	if (rc < 0)
		fprintf(stderr, "%s\n", lk_last_error());
	else /* counted by the reading, now that it is done */
		printf("%" PRIu64 " events, %" PRIu64 " lost\n", info->events, info->lost);
	lk_trace_file_close(tf);
	return rc < 0;
}
