/* SPDX-License-Identifier: MIT */
/*
 * UTF-8 validation for the trace writers: probe arguments are whatever bytes a program passed,
 * while JSON and protobuf strings must be UTF-8. Invalid bytes are replaced, one U+FFFD each.
 */
#ifndef LK_CORE_UTF8_H
#define LK_CORE_UTF8_H

#include <stddef.h>

/* The UTF-8 encoding of U+FFFD, which replaces each byte that starts no valid sequence. */
#define LK__UTF8_REPLACEMENT "\xef\xbf\xbd"

/*
 * The length (1 to 4) of the valid UTF-8 sequence at s, at most n bytes long, or 0 if s[0] starts
 * none: overlong forms, surrogates (U+D800..U+DFFF) and code points past U+10FFFF are invalid,
 * as RFC 3629 says. NUL is a valid one-byte sequence.
 */
static inline size_t lk__utf8_sequence(const unsigned char *s, size_t n)
{
	unsigned char c = s[0], lo = 0x80, hi = 0xbf;
	size_t len;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
	else
		return 0;
	if (n < len || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

/* Whether the n bytes at s are all valid UTF-8. */
static inline int lk__utf8_valid(const unsigned char *s, size_t n)
{
	size_t i = 0, k;

	while (i < n) {
		if (s[i] < 0x80) {
			i++;
			continue;
		}
		k = lk__utf8_sequence(s + i, n - i);
		if (!k)
			return 0;
		i += k;
	}
	return 1;
}

#endif
