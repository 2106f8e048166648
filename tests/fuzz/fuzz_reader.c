// SPDX-License-Identifier: MIT
/*
 * libFuzzer harness for the trace reader (src/format/ctf/): the index parser and the stream
 * walker that `lowkey report`, the JSON conversion and the summary of a killed program run on
 * traces someone else may have written.
 *
 * An input is a trace's description and a stream: a 2-byte little-endian length n, n bytes of
 * text (the metadata, or the index of a trace of lowkey before format 3), then the stream's bytes. Properties checked, besides what AddressSanitizer and UBSan check:
 *   - the parser returns 0 or one of its errors, with a message; an accepted index has the
 *     built-in class and classes only at ids 16 .. 65534, whose kinds, argument counts and types
 *     are in range, and a non-zero TSC frequency;
 *   - the walk returns 0, -EINVAL (damage) or -ENOMEM, never reads past the input, and counts at
 *     most one event per 8 bytes; what it says was cut short is a tail of the input;
 *   - every event the walk gives has every argument its class declares, inside its payload;
 *   - the count the public reader makes on demand (lk__ctf_cursor_count) finds the same events
 *     and the same end as the walk.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Isrc -Iinclude -Ibuild/include \
 *         tests/fuzz/fuzz_reader.c src/format/ctf/reader.c src/probe/record.c -o fuzz_reader
 *   ./fuzz_reader -max_len=16384 tests/fuzz/corpus/reader     (grows the corpus in place)
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <lowkey/probe.h>

#include "probe/probe_internal.h"
#include "internal/ctf_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int condition)
{
	if (!condition)
		__builtin_trap();
}

struct walk_state {
	const struct lk__trace_reader *r;
	size_t stream_len;
	uint64_t events;
};

static int on_event(const struct lk__event *e, void *arg)
{
	struct walk_state *w = arg;
	size_t off = 0;

	w->events++;
	must(e->cls && e->cls->nargs <= LK_PROBE_MAX_ARGS && e->payload_len <= w->stream_len);
	for (unsigned int i = 0; i < e->cls->nargs; i++) {
		uint64_t v;
		const char *s;

		off = lk__event_arg(e, off, i, &v, &s);
		must(off != 0 && off <= e->payload_len);
		must(!s || (s >= (const char *)e->payload && strlen(s) < e->payload_len));
	}
	(void)lk__reader_ns(w->r, e->tsc);
	return 0;
}

static int on_stream_end(const struct lk__stream_info *s, void *arg)
{
	struct walk_state *w = arg;

	must(s->truncated < w->stream_len || (s->truncated == w->stream_len && s->packets == 0));
	must(s->events <= w->stream_len / 8);
	return 0;
}

static void check_classes(const struct lk__trace_reader *r)
{
	must(r->tsc_hz != 0 && r->nclasses <= LK__MAX_EVENT_ID + 1u);
	must(r->classes[LK__EVENT_THREAD_NAME] && r->classes[LK__EVENT_SCHED_OUT] &&
	     r->classes[LK__EVENT_SCHED_IN]);
	must(r->format == 2 || r->format == LK__CTF_FORMAT_VTID || r->format == LK__CTF_FORMAT);
	for (size_t i = 0; i < r->nclasses; i++) {
		const struct lk__event_class *c = r->classes[i];

		if (!c || i == LK__EVENT_THREAD_NAME || i == LK__EVENT_SCHED_OUT ||
		    i == LK__EVENT_SCHED_IN)
			continue;
		must(c->id == i && i >= LK__FIRST_SITE_ID && i <= LK__MAX_EVENT_ID);
		must(c->kind >= LK_PROBE_EVENT && c->kind <= LK_PROBE_COUNTER &&
		     c->nargs <= LK_PROBE_MAX_ARGS);
		for (unsigned int a = 0; a < 8; a++) {
			unsigned int t = lk__arg_type(c->arg_types, a);

			must(a < c->nargs ? t >= LK_PROBE_I64 && t <= LK_PROBE_PTR : t == 0);
		}
	}
}

/*
 * The count the public reader makes at open (record sizes only) agrees with the walk's decoding:
 * the same events, the same end.
 */
static void check_count(const struct lk__trace_reader *r, const uint8_t *data, size_t len,
			int walk_rc, uint64_t walked)
{
	struct lk__ctf_cursor c;
	struct lk__event e;
	uint64_t n = 0;
	int rc;

	lk__ctf_cursor_bytes(&c, r, data, len, 1, 0);
	while ((rc = lk__ctf_cursor_count(&c, &n, &e)) == 1) {
		must(e.cls && e.cls->id == LK__EVENT_THREAD_NAME);
		n++;
	}
	must(rc == walk_rc && n == walked);
	lk__ctf_cursor_close(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct lk__reader_ops ops = { NULL, on_event, on_stream_end };
	struct lk__stream_info s = { .tid = 1, .file = "stream-1" };
	struct lk__trace_reader r;
	struct walk_state w;
	size_t n;
	char err[256] = "", *text;
	int rc;

	if (size < 2)
		return 0;
	n = (size_t)data[0] | (size_t)data[1] << 8;
	if (n > size - 2)
		n = size - 2;
	text = malloc(n + 1);
	must(text != NULL);
	memcpy(text, data + 2, n);
	rc = lk__reader_parse_index(&r, text, n, err, sizeof(err));
	free(text); /* the classes keep copies */
	if (rc) {
		must((rc == -EINVAL || rc == -ENOMEM) && err[0] != 0);
		return 0;
	}
	check_classes(&r);
	w = (struct walk_state){ &r, size - 2 - n, 0 };
	rc = lk__reader_walk_bytes(&r, data + 2 + n, w.stream_len, &s, &ops, &w);
	must(rc == 0 || rc == -EINVAL || rc == -ENOMEM);
	must(w.events == s.events && s.truncated <= w.stream_len);
	check_count(&r, data + 2 + n, w.stream_len, rc, w.events);
	lk__reader_close(&r);
	return 0;
}
