// SPDX-License-Identifier: MIT
/*
 * libFuzzer harness for `lowkey report`'s readers of lowkey's JSON and Perfetto traces
 * (src/format/trace_file.c, chrome_json/read.c, perfetto/read.c, protobuf/pb_read.h): an input is a file's
 * bytes, read as `lowkey report FILE` reads them. Properties checked, besides what AddressSanitizer
 * and UBSan check:
 *   - reading returns 0, or -EINVAL or -ENOMEM with a message;
 *   - an accepted file walks twice alike, into no more events than it has bytes; every event has a
 *     class and a time, lowkey's own events (thread names, switches) and probes their arguments
 *     exactly filling their payload, counters their value; a thread's switches alternate out and
 *     in, in time order.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Isrc -Iinclude -Ibuild/include \
 *         tests/fuzz/fuzz_report.c src/format/trace_file.c src/format/chrome_json/read.c \
 *         src/format/perfetto/read.c src/format/chrome_json/json_read.c src/format/ctf/reader.c src/probe/record.c \
 *         -lm -o fuzz_report
 *   ./fuzz_report -max_len=65536 tests/fuzz/corpus/report     (grows the corpus in place)
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <lowkey/probe.h>

#include "probe/probe_internal.h"
#include "internal/trace_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int condition)
{
	if (!condition)
		__builtin_trap();
}

struct walk_state {
	uint64_t events;
	unsigned int stream_id;
	bool out; /* in a sched stream: the last switch was out */
	uint64_t last_switch;
};

static int on_stream_begin(const struct lk__stream_info *s, void *arg)
{
	struct walk_state *w = arg;

	must(s->tid > 0 && s->stream_id <= 1 && s->truncated == 0);
	w->stream_id = s->stream_id;
	w->out = false;
	w->last_switch = 0;
	return 0;
}

static void check_switch(struct walk_state *w, const struct lk__event *e)
{
	bool out = e->cls->id == LK__EVENT_SCHED_OUT;
	uint64_t v;
	const char *s;

	must(w->stream_id == 1 && out != w->out && e->tsc >= w->last_switch);
	must(lk__event_arg(e, 0, 0, &v, &s) == 8);
	if (out)
		must(lk__event_arg(e, 8, 1, &v, &s) == 16);
	w->out = out;
	w->last_switch = e->tsc;
}

/* A probe's payload holds its class's arguments, each whole, and nothing after them. */
static void check_args(const struct lk__event *e)
{
	size_t at = 0;
	uint64_t v;
	const char *s;

	must(e->cls->nargs <= LK_PROBE_MAX_ARGS);
	for (unsigned int i = 0; i < e->cls->nargs; i++) {
		at = lk__event_arg(e, at, i, &v, &s);
		must(at != 0);
	}
	must(at == e->payload_len);
}

static int on_event(const struct lk__event *e, void *arg)
{
	struct walk_state *w = arg;
	uint64_t v;
	const char *s;

	w->events++;
	must(e->cls != NULL && e->tsc != 0);
	if (e->cls->id == LK__EVENT_THREAD_NAME) {
		must(lk__event_arg(e, 0, 0, &v, &s) == e->payload_len && s &&
		     strlen(s) < e->payload_len);
	} else if (e->cls->id == LK__EVENT_SCHED_OUT || e->cls->id == LK__EVENT_SCHED_IN) {
		check_switch(w, e);
	} else {
		must(w->stream_id == 0 && e->cls->id >= LK__FIRST_SITE_ID &&
		     e->cls->id <= LK__MAX_EVENT_ID);
		must(e->cls->kind >= LK_PROBE_EVENT && e->cls->kind <= LK_PROBE_COUNTER);
		if (e->cls->kind == LK_PROBE_COUNTER)
			must(lk__event_arg(e, 0, 0, &v, &s) == 8 && e->payload_len == 8);
		else
			check_args(e);
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct lk__reader_ops ops = { on_stream_begin, on_event, NULL };
	struct walk_state first = { 0 }, again = { 0 };
	struct lk__trace_file t;
	char err[512] = "";
	int rc = lk__trace_file_parse(&t, data, size, "input", err, sizeof(err));

	if (rc) {
		must((rc == -EINVAL || rc == -ENOMEM) && err[0] != 0);
		return 0;
	}
	must(t.format == LK__TF_JSON || t.format == LK__TF_PERFETTO);
	must(lk__trace_file_walk(&t, &ops, &first, err, sizeof(err)) == 0);
	must(lk__trace_file_walk(&t, &ops, &again, err, sizeof(err)) == 0);
	must(first.events == again.events && first.events <= size);
	must(t.r.nclasses <= LK__MAX_EVENT_ID + 1u && t.r.tsc_hz == 1000000000u);
	lk__trace_file_close(&t);
	return 0;
}
