/* SPDX-License-Identifier: MIT */
/*
 * UTF-8 validation for the trace writers: probe arguments are whatever bytes a program passed,
 * while JSON and protobuf strings must be UTF-8. Invalid bytes are replaced, one U+FFFD each.
 *
 * And the control characters of text another program supplied (a trace's names, a peer's
 * messages, /proc): a terminal acts on them instead of showing them, so they are escaped before
 * such text is printed, or refused where it is received.
 */
#ifndef LK_CORE_UTF8_H
#define LK_CORE_UTF8_H

#include <stddef.h>
#include <stdio.h>
#include <string.h>

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

/*
 * The length of the control character at s (n >= 1 bytes left), 0 if s starts none: C0
 * (U+0000..U+001F), DEL, and C1 (U+0080..U+009F) encoded in UTF-8 or as a byte 0x80..0x9f
 * that is no part of a UTF-8 sequence (an 8-bit terminal's C1; such a byte never starts one).
 */
static inline size_t lk__utf8_control(const unsigned char *s, size_t n)
{
	if (s[0] < 0x20 || s[0] == 0x7f || (s[0] >= 0x80 && s[0] <= 0x9f))
		return 1;
	return n >= 2 && s[0] == 0xc2 && s[1] >= 0x80 && s[1] <= 0x9f ? 2 : 0;
}

/*
 * s, fit for a terminal, into out (len >= 1 bytes, NUL-ended): each byte of a control character
 * (lk__utf8_control) as \xHH, the rest as it is; cut short to fit, never inside an escape or a
 * UTF-8 sequence. For any text a trace, another process or /proc supplied. Returns out.
 */
static inline char *lk__text_escape(const char *s, char *out, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s), at = 0;

	for (size_t i = 0; i < n;) {
		size_t c = lk__utf8_control(p + i, n - i),
		       k = c ? c : lk__utf8_sequence(p + i, n - i);

		k = k ? k :
			1; /* a byte that starts no sequence and is no control: a Latin-1 letter */
		if (at + (c ? 4 * c : k) >= len)
			break;
		for (size_t b = 0; b < k; b++) {
			if (c)
				at += (size_t)snprintf(out + at, 5, "\\x%02x", p[i + b]);
			else
				out[at++] = (char)p[i + b];
		}
		i += k;
	}
	out[at] = 0;
	return out;
}

#endif
