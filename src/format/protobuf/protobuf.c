// SPDX-License-Identifier: MIT
/* The protobuf encoder's slow paths: growing the buffer, long messages, strings to repair. */
#include <stdlib.h>

#include "internal/utf8.h"
#include "format/protobuf/protobuf.h"

bool lk__pb_grow(struct lk__pb *pb, size_t need)
{
	size_t cap = pb->cap ? pb->cap : 4096;
	uint8_t *grown;

	if (pb->failed)
		return false;
	while (cap - pb->len < need) {
		if (cap > SIZE_MAX / 2)
			goto fail;
		cap *= 2;
	}
	grown = realloc(pb->buf, cap);
	if (!grown)
		goto fail;
	pb->buf = grown;
	pb->cap = cap;
	return true;
fail:
	pb->failed = true;
	return false;
}

void lk__pb_free(struct lk__pb *pb)
{
	free(pb->buf);
	*pb = (struct lk__pb){ 0 };
}

/* A body of 128 bytes or more: its length takes more than the byte reserved, so move it. */
void lk__pb_end_long(struct lk__pb *pb, size_t start, size_t body)
{
	size_t extra = lk__pb_varint_size(body) - 1;

	if (!lk__pb_room(pb, extra))
		return;
	memmove(pb->buf + start + extra, pb->buf + start, body);
	lk__pb_put_varint(pb->buf + start - 1, body);
	pb->len += extra;
}

uint8_t *lk__pbw_utf8(uint8_t *w, uint32_t field, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	uint8_t *start;
	size_t i = 0, k;

	if (lk__utf8_valid(p, n))
		return lk__pbw_bytes(w, field, s, n);
	start = lk__pbw_begin(w, field); /* a string's bytes are laid out as a message's are */
	w = start;
	while (i < n) {
		k = lk__utf8_sequence(p + i, n - i);
		if (k) {
			memcpy(w, p + i, k);
			w += k;
			i += k;
		} else {
			memcpy(w, LK__UTF8_REPLACEMENT, 3);
			w += 3;
			i++;
		}
	}
	return lk__pbw_end(w, start);
}

void lk__pb_utf8(struct lk__pb *pb, uint32_t field, const char *s)
{
	size_t n = strlen(s);
	uint8_t *w = lk__pb_reserve(pb, 3 * n + 2 * LK__PB_VARINT_MAX);

	if (w)
		lk__pb_commit(pb, lk__pbw_utf8(w, field, s, n));
}
