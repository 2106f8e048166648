/* SPDX-License-Identifier: MIT */
/*
 * A protocol-buffers wire-format decoder for `lowkey report` on Perfetto traces
 * (perfetto/read.c): a message's fields one at a time, on a cursor over bytes it never reads
 * past. A field is its key (number << 3 | wire type) as a varint, then a varint (type 0), 8 bytes
 * (type 1, little-endian), a varint length and that many bytes (type 2: strings, bytes, nested
 * messages) or 4 bytes (type 5). Groups (types 3 and 4, deprecated, which lowkey never writes)
 * and every malformed field are errors. Nothing is allocated; no length is trusted before it is
 * checked against the bytes that are left.
 */
#ifndef LK_FORMAT_PB_READ_H
#define LK_FORMAT_PB_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { PB_VARINT = 0, PB_FIXED64 = 1, PB_LEN = 2, PB_FIXED32 = 5 };

struct pb_cursor {
	const uint8_t *p, *end;
};

struct pb_field {
	uint32_t number;
	unsigned int type;
	uint64_t value;	     /* PB_VARINT, PB_FIXED64, PB_FIXED32 */
	const uint8_t *data; /* PB_LEN: len bytes */
	size_t len;
};

static inline struct pb_cursor pb_cursor(const uint8_t *data, size_t len)
{
	return (struct pb_cursor){ data, data + len };
}

/* A varint of at most 10 bytes whose value fits in 64 bits; false if not. */
static inline bool pb_varint(struct pb_cursor *c, uint64_t *v)
{
	uint64_t x = 0;

	for (unsigned int shift = 0; shift < 64 && c->p < c->end; shift += 7) {
		uint8_t b = *c->p++;

		if (shift == 63 && b > 1)
			return false; /* past 64 bits */
		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			return true;
		}
	}
	return false;
}

static inline uint64_t pb_le(const uint8_t *p, unsigned int n)
{
	uint64_t v = 0;

	for (unsigned int i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/*
 * The next field of the message at c: 1 (in *f), 0 at the message's end, -1 for bytes that are no
 * field (a bad key or varint, a length past the end, a group, field number 0).
 */
static inline int pb_next(struct pb_cursor *c, struct pb_field *f)
{
	uint64_t key, n;

	if (c->p == c->end)
		return 0;
	if (!pb_varint(c, &key) || key >> 3 == 0 || key >> 3 > 0x1fffffff)
		return -1;
	f->number = (uint32_t)(key >> 3);
	f->type = (unsigned int)(key & 7);
	f->data = NULL;
	f->len = 0;
	switch (f->type) {
	case PB_VARINT:
		return pb_varint(c, &f->value) ? 1 : -1;
	case PB_FIXED64:
	case PB_FIXED32:
		n = f->type == PB_FIXED64 ? 8 : 4;
		if ((size_t)(c->end - c->p) < n)
			return -1;
		f->value = pb_le(c->p, (unsigned int)n);
		c->p += n;
		return 1;
	case PB_LEN:
		if (!pb_varint(c, &n) || n > (uint64_t)(c->end - c->p))
			return -1;
		f->data = c->p;
		f->len = (size_t)n;
		c->p += n;
		return 1;
	default:
		return -1;
	}
}

#endif
