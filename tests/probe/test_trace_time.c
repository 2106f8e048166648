// SPDX-License-Identifier: MIT
/*
 * One tick, one nanosecond, in every format: the CTF reader (lk__reader_ns) and the Perfetto
 * writer, on its general path (the one that converts a CTF trace) and on the consumer's fast
 * path, time a counter value alike, as floor(ticks * 10^9 / hz) exactly. Checked where a
 * conversion through a double or a rate rounded once would drift: a counter past 2^53 (as an
 * aarch64 counter that counts from the epoch is, or a TSC after weeks of uptime) at rates that
 * divide no second evenly, over spans of about 1.5 ms and of seconds. The Perfetto file is read
 * back through the public reader, span for span.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <lowkey/lowkey.h>

#include "format/perfetto/perfetto.h"
#include "probe/probe_internal.h"
#include "internal/ctf_reader.h"

#define SPANS 48

static __attribute__((noinline)) void site(void)
{
	LK_SPAN(ttime, work);
}

/* The rule, computed here on its own: monotonic0_ns + floor((tsc - tsc0) * 10^9 / hz). */
static uint64_t expected_ns(const struct lk__trace_reader *r, uint64_t tsc)
{
	return r->monotonic0_ns +
	       (uint64_t)((unsigned __int128)(tsc - r->tsc0) * 1000000000u / r->tsc_hz);
}

static const struct lk__event_class *find(const struct lk__trace_reader *r, int kind)
{
	for (size_t i = 0; i < r->nclasses; i++)
		if (r->classes[i] && strcmp(r->classes[i]->provider, "ttime") == 0 &&
		    r->classes[i]->kind == kind)
			return r->classes[i];
	fail_msg("no class ttime:work of kind %d in the metadata", kind);
	return NULL;
}

static uint8_t *put(uint8_t *w, const struct lk__event_class *c, uint64_t tsc)
{
	uint64_t head = (tsc & LK__PROBE_TSC_MASK) << LK__PROBE_ID_BITS | c->id;

	memcpy(w, &head, 8);
	return w + 8;
}

/*
 * Spans of about 1.5 ms, each a few ticks longer than the last, and every eighth of seconds,
 * from tsc0 on: their begins and ends in tsc[], their records in ring.
 */
static uint8_t *spans(const struct lk__trace_reader *r, uint8_t *ring, uint64_t *tsc)
{
	const struct lk__event_class *begin = find(r, LK_PROBE_SPAN_BEGIN),
				     *end = find(r, LK_PROBE_SPAN_END);
	uint64_t at = r->tsc0 + 977, len;
	uint8_t *w = ring;

	for (int i = 0; i < SPANS; i++) {
		len = r->tsc_hz / 667 + 13u * (uint64_t)i;
		if (i % 8 == 7)
			len = r->tsc_hz * 3 + (uint64_t)i;
		tsc[2 * i] = at;
		tsc[2 * i + 1] = at + len;
		w = put(w, begin, tsc[2 * i]);
		w = put(w, end, tsc[2 * i + 1]);
		at += len + 1009u * (uint64_t)i + 1;
	}
	return w;
}

/*
 * Thread tid's events in the Perfetto file: the times of tsc[] (counted from the thread's first
 * event: the reader counts a Perfetto file's time from its start), the spans' durations alike.
 */
static void read_back(const char *path, const struct lk__trace_reader *r, int tid,
		      const uint64_t *tsc)
{
	struct lk_trace_file *tf;
	struct lk_trace_event ev;
	uint64_t first = 0;
	size_t k = 0;

	assert_int_equal(lk_trace_file_open(path, &tf), 0);
	while (lk_trace_file_next(tf, &ev) == 1) {
		if (ev.tid != tid || ev.type != LK_TRACE_EV_PROBE)
			continue;
		assert_true(k < 2 * SPANS);
		first = k ? first : ev.ns;
		assert_int_equal(ev.ns - first, expected_ns(r, tsc[k]) - expected_ns(r, tsc[0]));
		assert_int_equal(lk__reader_ns(r, tsc[k]), expected_ns(r, tsc[k]));
		assert_int_equal(lk__reader_ns_divided(r, tsc[k]), expected_ns(r, tsc[k]));
		if (ev.kind == LK_PROBE_SPAN_END) {
			assert_true(ev.paired);
			assert_int_equal(ev.duration_ns,
					 lk__reader_ns(r, tsc[k]) - lk__reader_ns(r, tsc[k - 1]));
		}
		k++;
	}
	assert_int_equal(k, 2 * SPANS);
	lk_trace_file_close(tf);
}

/* The records written as one thread's batch with the fast path, as another's without. */
static void perfetto_alike(struct lk__trace_reader *r, const char *out)
{
	static uint8_t ring[2 * SPANS * 8];
	uint64_t tsc[2 * SPANS], events;
	struct lk__pft_stream fast = { .tid = 4242 }, slow = { .tid = 4343 };
	const uint8_t *next, *w = spans(r, ring, tsc);
	struct lk__pft *p;
	char err[256];
	int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(lk__pft_open(&p, fd, out, r, err, sizeof(err)), 0);
	close(fd);
	assert_int_equal(lk__pft_records(p, &fast, ring, w, tsc[2 * SPANS - 1], &next, &events), 0);
	assert_int_equal(events, 2 * SPANS);
	assert_true(lk__pft_fast_records(p) > 0);
	lk__pft_slow_only(p, true);
	assert_int_equal(lk__pft_records(p, &slow, ring, w, tsc[2 * SPANS - 1], &next, &events), 0);
	assert_int_equal(events, 2 * SPANS);
	assert_int_equal(lk__pft_close(p, err, sizeof(err)), 0);
	read_back(out, r, 4242, tsc);
	read_back(out, r, 4343, tsc);
}

static void ticks_to_ns_alike(void **state)
{
	static const uint64_t rates[] = { 62500000,    62500001, 1000000007,
					  2999999999u, 3,	 20000000011u };
	static const uint64_t starts[] = { 1000, (1ull << 57) + 12345, (1ull << 62) + 7 };
	char dir[] = "/tmp/lkt-trace-time-XXXXXX", ctf[64], out[64], meta[80], err[256];
	struct lk_trace_config config = { .path = ctf };
	struct lk__trace_reader r;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(ctf, sizeof(ctf), "%s/meta.ctf", dir);
	snprintf(out, sizeof(out), "%s/out.pftrace", dir);
	assert_true(lk_probe_enable("ttime") > 0);
	assert_int_equal(lk_trace_start(&config), 0);
	site(); /* the trace is for its metadata: the span's event classes */
	assert_int_equal(lk_trace_stop(), 0);
	assert_int_equal(lk__reader_open(&r, ctf, err, sizeof(err)), 0);
	for (size_t i = 0; i < sizeof(rates) / sizeof(rates[0]); i++) {
		for (size_t j = 0; j < sizeof(starts) / sizeof(starts[0]); j++) {
			r.tsc_hz = rates[i];
			r.tsc0 = starts[j];
			lk__reader_set_clock(&r);
			perfetto_alike(&r, out);
		}
	}
	lk__reader_close(&r);
	unlink(out);
	lk__remove_streams(ctf);
	snprintf(meta, sizeof(meta), "%s/metadata", ctf);
	unlink(meta);
	rmdir(ctf), rmdir(dir);
}

/* Before the trace's start (a damaged trace, another CPU's counter a hair behind): rounded down. */
static void before_the_start(void **state)
{
	struct lk__trace_reader r = { .tsc_hz = 62500001,
				      .tsc0 = (1ull << 57) + 5,
				      .monotonic0_ns = 5000000000u };

	(void)state;
	assert_int_equal(lk__reader_ns(&r, r.tsc0), r.monotonic0_ns);
	/* one tick is 15.99... ns: 16 before, rounded down */
	assert_int_equal(lk__reader_ns(&r, r.tsc0 - 1), r.monotonic0_ns - 16);
	assert_int_equal(lk__reader_ns(&r, r.tsc0 + 1), r.monotonic0_ns + 15);
	assert_int_equal(lk__reader_ns(&r, r.tsc0 - 62500001u), r.monotonic0_ns - 1000000000u);
	assert_int_equal(lk__reader_ns(&r, 0), 0);
	assert_int_equal(lk__reader_ns(&r, UINT64_MAX), UINT64_MAX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(ticks_to_ns_alike),
		cmocka_unit_test(before_the_start),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
