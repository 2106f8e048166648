// SPDX-License-Identifier: MIT
/* The protobuf encoder's slow paths: growing the buffer, long messages, strings to repair. */
#include <stdlib.h>

#include "core/utf8.h"
#include "probe/protobuf.h"

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

void lk__pb_utf8(struct lk__pb *pb, uint32_t field, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s), i = 0, k;

	if (lk__utf8_valid(p, n)) {
		lk__pb_bytes(pb, field, s, n);
		return;
	}
	lk__pb_begin(pb, field);	/* a string's bytes are laid out as a message's are */
	while (i < n && lk__pb_room(pb, 4)) {
		k = lk__utf8_sequence(p + i, n - i);
		if (k) {
			memcpy(pb->buf + pb->len, p + i, k);
			pb->len += k;
			i += k;
		} else {
			memcpy(pb->buf + pb->len, LK__UTF8_REPLACEMENT, 3);
			pb->len += 3;
			i++;
		}
	}
	lk__pb_end(pb);
}
