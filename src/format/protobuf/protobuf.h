/* SPDX-License-Identifier: MIT */
/*
 * Internal: a small protocol-buffers encoder for the Perfetto writer (perfetto.c). Messages are
 * built in one growable buffer: a nested message reserves one byte for its length and moves its
 * body when it ends longer than 127 bytes, which few do. It runs in the conversion from CTF and
 * in the consumer thread writing a Perfetto trace; no recording thread uses it.
 *
 * Wire format (protobuf encoding spec): a field is its key, (number << 3 | wire type), as a
 * varint, then a varint (type 0), 8 little-endian bytes (type 1), or a varint length and that
 * many bytes (type 2: strings, bytes, nested messages).
 */
#ifndef LK_FORMAT_PROTOBUF_H
#define LK_FORMAT_PROTOBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define LK__PB_MAX_DEPTH 8
#define LK__PB_VARINT_MAX 10

enum { LK__PB_VARINT = 0, LK__PB_FIXED64 = 1, LK__PB_LEN = 2 };

struct lk__pb {
	uint8_t *buf;
	size_t len, cap;
	size_t open[LK__PB_MAX_DEPTH]; /* where each open message's body starts */
	unsigned int depth;
	bool failed; /* out of memory, or nested too deep: the buffer is incomplete */
};

/* Make room for need more bytes: false (and failed set) if it cannot be had. */
bool lk__pb_grow(struct lk__pb *pb, size_t need);

void lk__pb_free(struct lk__pb *pb);

/* Encode v as a varint at out (LK__PB_VARINT_MAX bytes of room); its length. */
static inline size_t lk__pb_put_varint(uint8_t *out, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		out[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	out[n++] = (uint8_t)v;
	return n;
}

static inline size_t lk__pb_varint_size(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80)
		v >>= 7, n++;
	return n;
}

static inline bool lk__pb_room(struct lk__pb *pb, size_t need)
{
	return pb->cap - pb->len >= need || lk__pb_grow(pb, need);
}

static inline void lk__pb_key(struct lk__pb *pb, uint32_t field, unsigned int type)
{
	pb->len += lk__pb_put_varint(pb->buf + pb->len, (uint64_t)field << 3 | type);
}

/* uint32/uint64/int32/int64/bool/enum fields (negative int64: cast, 10 bytes, as protobuf does). */
static inline void lk__pb_uint(struct lk__pb *pb, uint32_t field, uint64_t v)
{
	if (!lk__pb_room(pb, 2 * LK__PB_VARINT_MAX))
		return;
	lk__pb_key(pb, field, LK__PB_VARINT);
	pb->len += lk__pb_put_varint(pb->buf + pb->len, v);
}

/* double (and fixed64) fields: 8 bytes, little-endian. */
static inline void lk__pb_fixed64(struct lk__pb *pb, uint32_t field, uint64_t bits)
{
	if (!lk__pb_room(pb, LK__PB_VARINT_MAX + 8))
		return;
	lk__pb_key(pb, field, LK__PB_FIXED64);
	for (int i = 0; i < 8; i++)
		pb->buf[pb->len++] = (uint8_t)(bits >> (8 * i));
}

static inline void lk__pb_double(struct lk__pb *pb, uint32_t field, double v)
{
	uint64_t bits;

	memcpy(&bits, &v, sizeof(bits));
	lk__pb_fixed64(pb, field, bits);
}

/* string and bytes fields (strings must be UTF-8: see lk__pb_utf8). */
static inline void lk__pb_bytes(struct lk__pb *pb, uint32_t field, const void *data, size_t n)
{
	if (!lk__pb_room(pb, 2 * LK__PB_VARINT_MAX + n))
		return;
	lk__pb_key(pb, field, LK__PB_LEN);
	pb->len += lk__pb_put_varint(pb->buf + pb->len, n);
	memcpy(pb->buf + pb->len, data, n);
	pb->len += n;
}

/* A string field holding s with each byte that starts no valid UTF-8 sequence replaced by U+FFFD. */
void lk__pb_utf8(struct lk__pb *pb, uint32_t field, const char *s);

/*
 * The same on a cursor, unchecked, for the hot path: the caller makes room for everything it will
 * write (lk__pb_reserve), writes at w, and hands the cursor back (lk__pb_commit). Working on a
 * local cursor keeps the compiler from reloading pb->len after every byte stored.
 */
static inline uint8_t *lk__pb_reserve(struct lk__pb *pb, size_t need)
{
	return lk__pb_room(pb, need) ? pb->buf + pb->len : NULL;
}

static inline void lk__pb_commit(struct lk__pb *pb, uint8_t *w)
{
	pb->len = (size_t)(w - pb->buf);
}

static inline uint8_t *lk__pbw_varint(uint8_t *w, uint64_t v)
{
	while (v >= 0x80) {
		*w++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*w++ = (uint8_t)v;
	return w;
}

static inline uint8_t *lk__pbw_uint(uint8_t *w, uint32_t field, uint64_t v)
{
	return lk__pbw_varint(lk__pbw_varint(w, (uint64_t)field << 3 | LK__PB_VARINT), v);
}

static inline uint8_t *lk__pbw_fixed64(uint8_t *w, uint32_t field, uint64_t bits)
{
	w = lk__pbw_varint(w, (uint64_t)field << 3 | LK__PB_FIXED64);
	memcpy(w, &bits, 8); /* little-endian, as protobuf: lowkey runs on little-endian machines */
	return w + 8;
}

static inline uint8_t *lk__pbw_bytes(uint8_t *w, uint32_t field, const void *data, size_t n)
{
	w = lk__pbw_varint(lk__pbw_varint(w, (uint64_t)field << 3 | LK__PB_LEN), n);
	memcpy(w, data, n);
	return w + n;
}

/* Open a nested message: returns where its body starts (give it to lk__pbw_end). */
static inline uint8_t *lk__pbw_begin(uint8_t *w, uint32_t field)
{
	return lk__pbw_varint(w, (uint64_t)field << 3 | LK__PB_LEN) + 1;
}

/* Close it: its length before its body; a body of 128 bytes or more moves up (room: 2 bytes more). */
static inline uint8_t *lk__pbw_end(uint8_t *w, uint8_t *start)
{
	size_t body = (size_t)(w - start), extra;

	if (body < 0x80) {
		start[-1] = (uint8_t)body;
		return w;
	}
	extra = lk__pb_varint_size(body) - 1;
	memmove(start + extra, start, body);
	lk__pbw_varint(start - 1, body);
	return w + extra;
}

/* A string field of s (n bytes), each byte that starts no valid UTF-8 sequence as U+FFFD (room: 3n + 12). */
uint8_t *lk__pbw_utf8(uint8_t *w, uint32_t field, const char *s, size_t n);

/* Open a nested message as field; every begin needs its end. */
static inline void lk__pb_begin(struct lk__pb *pb, uint32_t field)
{
	if (pb->depth >= LK__PB_MAX_DEPTH || !lk__pb_room(pb, LK__PB_VARINT_MAX + 1)) {
		pb->failed = true;
		pb->depth++; /* so that its end still balances */
		return;
	}
	lk__pb_key(pb, field, LK__PB_LEN);
	pb->len++; /* the length, if it fits in one byte */
	pb->open[pb->depth++] = pb->len;
}

/* Close the innermost open message: write its length before its body. */
void lk__pb_end_long(struct lk__pb *pb, size_t start, size_t body);

static inline void lk__pb_end(struct lk__pb *pb)
{
	size_t start, body;

	pb->depth--;
	if (pb->failed)
		return;
	start = pb->open[pb->depth];
	body = pb->len - start;
	if (body < 0x80)
		pb->buf[start - 1] = (uint8_t)body;
	else
		lk__pb_end_long(pb, start, body);
}

#endif
