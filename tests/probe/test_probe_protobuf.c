// SPDX-License-Identifier: MIT
/*
 * The Perfetto writer's protobuf encoder (src/format/protobuf/protobuf.h): varints at every length,
 * fixed64, strings and bytes, nested messages whose length outgrows the byte reserved for it,
 * deep nesting, and strings repaired to UTF-8. Each is checked against the bytes the protobuf
 * encoding spec gives, decoded back by a small decoder written here.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "internal/utf8.h"
#include "format/protobuf/protobuf.h"

static void expect_bytes(const struct lk__pb *pb, const void *want, size_t n)
{
	assert_false(pb->failed);
	assert_int_equal(pb->len, n);
	assert_memory_equal(pb->buf, want, n);
}

/* A varint at *p (before end): its value; *p moves past it. */
static uint64_t get_varint(const uint8_t **p, const uint8_t *end)
{
	uint64_t v = 0;

	for (int shift = 0; *p < end; shift += 7) {
		uint8_t b = *(*p)++;

		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
	fail_msg("varint runs past the end");
	return 0;
}

static void varints(void **state)
{
	static const struct {
		uint64_t v;
		size_t n;
		uint8_t bytes[10];
	} cases[] = {
		{ 0, 1, { 0x00 } },
		{ 1, 1, { 0x01 } },
		{ 127, 1, { 0x7f } },
		{ 128, 2, { 0x80, 0x01 } },
		{ 300, 2, { 0xac, 0x02 } }, /* the spec's example */
		{ 16383, 2, { 0xff, 0x7f } },
		{ 16384, 3, { 0x80, 0x80, 0x01 } },
		{ UINT32_MAX, 5, { 0xff, 0xff, 0xff, 0xff, 0x0f } },
		{ (uint64_t)-1, 10, { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 } },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t out[LK__PB_VARINT_MAX];
		const uint8_t *p = out;

		assert_int_equal(lk__pb_put_varint(out, cases[i].v), cases[i].n);
		assert_int_equal(lk__pb_varint_size(cases[i].v), cases[i].n);
		assert_memory_equal(out, cases[i].bytes, cases[i].n);
		assert_true(get_varint(&p, out + cases[i].n) == cases[i].v);
	}
}

static void fields(void **state)
{
	struct lk__pb pb = { 0 };
	const uint8_t want[] = {
		0x08, 0x96, 0x01, /* field 1, varint 150: the spec's example */
		0xa0, 0x1f, 0x2a, /* field 500: a two-byte key */
		0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, /* int64 -1 */
		0x19, 0,    0,	  0,	0,    0,    0,	  0xf8, 0x3f, /* field 3, double 1.5 */
		0x22, 0x07, 't',  'e',	's',  't',  'i',  'n',	'g', /* field 4, string: the spec's example */
	};

	(void)state;
	lk__pb_uint(&pb, 1, 150);
	lk__pb_uint(&pb, 500, 42);
	lk__pb_uint(&pb, 2, (uint64_t)(int64_t)-1);
	lk__pb_double(&pb, 3, 1.5);
	lk__pb_bytes(&pb, 4, "testing", 7);
	expect_bytes(&pb, want, sizeof(want));
	lk__pb_free(&pb);
}

static void nested_messages(void **state)
{
	struct lk__pb pb = { 0 };
	const uint8_t small[] = { 0x1a, 0x03, 0x08, 0x96, 0x01 }; /* the spec's embedded message */
	const uint8_t *p, *end;
	uint64_t len;
	char body[300];

	(void)state;
	lk__pb_begin(&pb, 3);
	lk__pb_uint(&pb, 1, 150);
	lk__pb_end(&pb);
	expect_bytes(&pb, small, sizeof(small));

	/* bodies of 127, 128 and 300 bytes: lengths of one, two, two bytes; the body moves */
	for (size_t k = 0; k < 3; k++) {
		size_t n = (size_t[]){ 125, 126, 298 }[k];

		pb.len = 0;
		memset(body, 'a' + (int)(n % 26), sizeof(body));
		lk__pb_begin(&pb, 2);
		lk__pb_bytes(&pb, 1, body, n); /* 2 + n bytes of body (n < 128), 3 + n past it */
		lk__pb_end(&pb);
		p = pb.buf;
		end = pb.buf + pb.len;
		assert_int_equal(get_varint(&p, end), 2 << 3 | 2);
		len = get_varint(&p, end);
		assert_int_equal(len, (uint64_t)(end - p));
		assert_int_equal(lk__pb_varint_size(len), n + 2 < 128 ? 1 : 2);
		assert_int_equal(get_varint(&p, end), 1 << 3 | 2);
		assert_int_equal(get_varint(&p, end), n);
		assert_int_equal(end - p, n);
		assert_memory_equal(p, body, n);
	}

	/* three levels, the inner ones long: every length matches what it encloses */
	pb.len = 0;
	lk__pb_begin(&pb, 1);
	lk__pb_begin(&pb, 2);
	lk__pb_begin(&pb, 3);
	lk__pb_bytes(&pb, 4, body, 200);
	lk__pb_end(&pb);
	lk__pb_uint(&pb, 5, 7);
	lk__pb_end(&pb);
	lk__pb_uint(&pb, 6, 8);
	lk__pb_end(&pb);
	p = pb.buf;
	end = pb.buf + pb.len;
	for (uint64_t field = 1; field <= 3; field++) {
		assert_int_equal(get_varint(&p, end), field << 3 | 2);
		len = get_varint(&p, end);
		assert_int_equal(len, (uint64_t)(end - p) - (field == 1 ? 0 : field == 2 ? 2 : 4));
	}
	assert_int_equal(get_varint(&p, end), 4 << 3 | 2);
	assert_int_equal(get_varint(&p, end), 200);
	p += 200;
	assert_int_equal(get_varint(&p, end), 5 << 3);
	assert_int_equal(get_varint(&p, end), 7);
	assert_int_equal(get_varint(&p, end), 6 << 3);
	assert_int_equal(get_varint(&p, end), 8);
	assert_ptr_equal(p, end);
	assert_int_equal(pb.depth, 0);
	assert_false(pb.failed);

	/* too deep: refused, marked failed, and the begins and ends still balance */
	pb.len = 0;
	for (int i = 0; i < LK__PB_MAX_DEPTH + 2; i++)
		lk__pb_begin(&pb, 1);
	for (int i = 0; i < LK__PB_MAX_DEPTH + 2; i++)
		lk__pb_end(&pb);
	assert_true(pb.failed);
	assert_int_equal(pb.depth, 0);
	lk__pb_free(&pb);
}

static void strings_become_utf8(void **state)
{
	struct lk__pb pb = { 0 };
	const uint8_t valid[] = { 0x0a, 0x06, 'c', 'a', 'f', 0xc3, 0xa9, '!' };
	const uint8_t repaired[] = { 0x0a, 0x0a, 0xef, 0xbf, 0xbd, 0xef,
				     0xbf, 0xbd, ' ',  'o',  'k',  '.' };

	(void)state;
	lk__pb_utf8(&pb, 1, "caf\xc3\xa9!");
	expect_bytes(&pb, valid, sizeof(valid));
	pb.len = 0;
	lk__pb_utf8(&pb, 1, "\xff\xfe ok.");
	expect_bytes(&pb, repaired, sizeof(repaired));
	lk__pb_free(&pb);

	/* the validator's edges, as RFC 3629 draws them */
	assert_true(lk__utf8_valid((const unsigned char *)"\xf4\x8f\xbf\xbf", 4));  /* U+10FFFF */
	assert_false(lk__utf8_valid((const unsigned char *)"\xf4\x90\x80\x80", 4)); /* past it */
	assert_false(lk__utf8_valid((const unsigned char *)"\xed\xa0\x80", 3)); /* a surrogate */
	assert_false(lk__utf8_valid((const unsigned char *)"\xc0\xaf", 2));	/* overlong '/' */
	assert_false(lk__utf8_valid((const unsigned char *)"\xe2\x82", 2));	/* cut short */
	assert_true(lk__utf8_valid((const unsigned char *)"\xe2\x82\xac", 3));	/* the euro sign */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(varints),
		cmocka_unit_test(fields),
		cmocka_unit_test(nested_messages),
		cmocka_unit_test(strings_become_utf8),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
