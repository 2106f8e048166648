// SPDX-License-Identifier: MIT
/*
 * The consumer's Perfetto fast path (perfetto.c: a class's packet laid out once a batch, the
 * timestamp delta and the values patched in) writes the very bytes of the general path, the one
 * that converts CTF: the same records of every kind of class -- a span, counters of each type (an
 * unsigned one over INT64_MAX, which becomes a double), an event with an argument of each numeric
 * type, one with a string that is not UTF-8, one whose packet is over 127 bytes -- encoded as one thread's batch with templates and as
 * another's without, with and without CPU time, after a batch of a third (which describes the
 * counters' tracks, once a trace). The two batches differ in their sequence id only.
 */
#include <fcntl.h>
#include <limits.h>
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
#include "format/protobuf/protobuf.h"
#include "internal/ctf_reader.h"

#define ROUNDS 4

static __attribute__((noinline)) void sites(long i)
{
	LK_SPAN(pft, outer);
	LK_COUNTER(pft, signed_count, (int64_t)-i);
	LK_COUNTER(pft, unsigned_count, (uint64_t)i);
	LK_COUNTER(pft, double_count, (double)i / 3);
	LK_PROBE(pft, numbers, (int64_t)-i, (uint64_t)i, (double)i * 1.5, (void *)&i);
	LK_PROBE(pft, text, "t");
	/* negative integers are 10-byte varints: its packet is over 127 bytes, its lengths move */
	LK_PROBE(pft, wide, (int64_t)-i, (int64_t)-i, (int64_t)-i, (int64_t)-i, (int64_t)-i,
		 (int64_t)-i, (int64_t)-i, (int64_t)-i);
}

static const struct lk__event_class *find(const struct lk__trace_reader *r, const char *event,
					  int kind)
{
	for (size_t i = 0; i < r->nclasses; i++)
		if (r->classes[i] && strcmp(r->classes[i]->provider, "pft") == 0 &&
		    strcmp(r->classes[i]->event, event) == 0 && r->classes[i]->kind == kind)
			return r->classes[i];
	fail_msg("no class pft:%s in the metadata", event);
	return NULL;
}

/* A record of c as the ring holds it: header, CPU time, the arguments. */
static uint8_t *put(uint8_t *w, const struct lk__trace_reader *r, const struct lk__event_class *c,
		    uint64_t tsc, int round)
{
	uint64_t head = (tsc & LK__PROBE_TSC_MASK) << LK__PROBE_ID_BITS | c->id,
		 cpu = 1000u * (uint64_t)round + 7;

	memcpy(w, &head, 8), w += 8;
	if (r->cputime)
		memcpy(w, &cpu, 8), w += 8;
	for (unsigned int i = 0; i < c->nargs; i++) {
		uint64_t v = (uint64_t)(int64_t)(-round - 7);
		double d = round * 0.25 - 1;

		switch (lk__arg_type(c->arg_types, i)) {
		case LK_PROBE_STR:
			memcpy(w, "a\xff", 3), w += 3; /* NUL included; not UTF-8: repaired */
			continue;
		case LK_PROBE_F64:
			memcpy(&v, &d, 8);
			break;
		case LK_PROBE_U64:
			v = round == 1 ? UINT64_MAX - 5 : (uint64_t)round << 20;
			break;
		case LK_PROBE_PTR:
			v = 0x7f0000001000u + (uint64_t)round;
			break;
		default:
			break;
		}
		memcpy(w, &v, 8), w += 8;
	}
	return w;
}

static void same_bytes(bool cputime)
{
	char dir[] = "/tmp/lkt-pft-fast-XXXXXX", ctf[64], out[64], meta[80], err[256];
	struct lk_trace_config config = { .path = ctf, .flags = cputime ? LK_TRACE_CPUTIME : 0 };
	struct lk__pft_stream warm = { .tid = 4242 }, fast = { .tid = 4242 },
			      slow = { .tid = 4242 };
	static uint8_t ring[ROUNDS * 8 * 64];
	uint8_t *w = ring, *bytes, key_fast[4], key_slow[4];
	const uint8_t *next;
	struct lk__trace_reader r;
	struct lk__pft *p;
	uint64_t events, tsc, at0, at1, at2, base;
	int fd;
	size_t n;
	FILE *f;

	assert_non_null(mkdtemp(dir));
	snprintf(ctf, sizeof(ctf), "%s/meta.ctf", dir);
	snprintf(out, sizeof(out), "%s/out.pftrace", dir);
	assert_true(lk_probe_enable("pft") > 0);
	assert_int_equal(lk_trace_start(&config), 0);
	sites(1); /* the trace is for its metadata: the sites' event classes */
	assert_int_equal(lk_trace_stop(), 0);
	assert_int_equal(lk__reader_open(&r, ctf, err, sizeof(err)), 0);

	const struct lk__event_class *order[] = {
		find(&r, "outer", LK_PROBE_SPAN_BEGIN),
		find(&r, "signed_count", LK_PROBE_COUNTER),
		find(&r, "unsigned_count", LK_PROBE_COUNTER),
		find(&r, "double_count", LK_PROBE_COUNTER),
		find(&r, "numbers", LK_PROBE_EVENT),
		find(&r, "text", LK_PROBE_EVENT),
		find(&r, "wide", LK_PROBE_EVENT),
		find(&r, "outer", LK_PROBE_SPAN_END),
	};
	tsc = r.tsc0 + 1000;
	for (int round = 0; round < ROUNDS; round++)
		for (size_t k = 0; k < sizeof(order) / sizeof(order[0]); k++)
			w = put(w, &r, order[k], tsc += 37 + (uint64_t)round, round);

	fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(lk__pft_open(&p, fd, out, &r, err, sizeof(err)), 0);
	close(fd); /* the writer has its own */
	/* a batch before, so that neither describes the counters' tracks (once a trace) */
	assert_int_equal(lk__pft_records(p, &warm, ring, w, tsc + 1, &next, &events), 0);
	base = lk__pft_fast_records(p);
	at0 = lk__pft_bytes(p);
	assert_int_equal(lk__pft_records(p, &fast, ring, w, tsc + 1, &next, &events), 0);
	assert_ptr_equal(next, w);
	assert_int_equal(events, ROUNDS * 8);
	at1 = lk__pft_bytes(p);
	lk__pft_slow_only(p, true);
	assert_int_equal(lk__pft_records(p, &slow, ring, w, tsc + 1, &next, &events), 0);
	assert_int_equal(events, ROUNDS * 8);
	at2 = lk__pft_bytes(p);
	/* the fast way: every record but each class's first and the strings, and the big unsigned */
	assert_int_equal(lk__pft_fast_records(p) - base, (ROUNDS - 1) * 7 - 1);
	assert_int_equal(lk__pft_close(p, err, sizeof(err)), 0);
	lk__reader_close(&r);

	assert_int_equal(at1 - at0, at2 - at1);
	bytes = malloc(at2);
	f = fopen(out, "rb");
	assert_non_null(f);
	assert_int_equal(fread(bytes, 1, at2, f), at2);
	fclose(f);
	assert_int_equal(lk__pb_put_varint(key_fast, fast.seq),
			 lk__pb_put_varint(key_slow, slow.seq));
	n = lk__pb_varint_size(fast.seq);
	for (uint64_t i = 0; i < at1 - at0; i++) {
		const uint8_t *a = bytes + at0 + i, *b = bytes + at1 + i;

		if (i + n <= at1 - at0 && memcmp(a, key_fast, n) == 0 &&
		    memcmp(b, key_slow, n) == 0) {
			i += n - 1; /* the sequence id */
			continue;
		}
		if (*a != *b)
			fail_msg("byte %llu of the batch: %02x with templates, %02x without",
				 (unsigned long long)i, *a, *b);
	}
	free(bytes);
	unlink(out);
	lk__remove_streams(ctf);
	snprintf(meta, sizeof(meta), "%s/metadata", ctf);
	unlink(meta);
	rmdir(ctf), rmdir(dir);
}

static void fast_path_writes_the_general_paths_bytes(void **state)
{
	(void)state;
	same_bytes(false);
}

static void with_cpu_time(void **state)
{
	(void)state;
	same_bytes(true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(fast_path_writes_the_general_paths_bytes),
		cmocka_unit_test(with_cpu_time),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
