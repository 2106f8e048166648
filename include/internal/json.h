/* SPDX-License-Identifier: MIT */
/*
 * JSON output shared by the library, the CLI and the benches: one string escaper and one writer,
 * so that every --json document has the same spacing.
 *
 * The writer's style: `"key": value`; the members of a container either one per line, indented
 * by two spaces per level, or all on one line, separated by ", ". Which containers go on one line
 * is the caller's choice (a record in a list, a short summary); everything inside a one-line
 * container is on that line too. Numbers that JSON cannot carry (NaN, infinities) are written as
 * null.
 *
 * None of these functions is async-signal-safe (stdio); none allocates; none reports an error:
 * a write error stays in the FILE (ferror) for the caller to check. A writer is one thread's.
 */
#ifndef LK_INTERNAL_JSON_H
#define LK_INTERNAL_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/*
 * lk__json_string - write s to f as a JSON string: quoted, '"' and '\' escaped, control
 * characters (C0, DEL and C1: a terminal's, should the JSON reach one) as \u00XX; NULL as null.
 * Valid UTF-8 passes through; each byte that starts no valid UTF-8 sequence is written as \ufffd
 * (the replacement character), so the output is always valid JSON text (RFC 8259 requires UTF-8)
 * whatever bytes s holds. Cost: one pass over s.
 */
void lk__json_string(FILE *f, const char *s);

/* How deep containers nest in one document, the top-level object included. */
#define LK__JSON_DEPTH 32

/* One document being written: fill it with lk__json_begin(), never by hand. */
struct lk__json {
	FILE *out;
	int depth;
	int line_depth; /* the depth of the outermost one-line container; 0: none */
	bool need_comma[LK__JSON_DEPTH];
	char closer[LK__JSON_DEPTH];
};

/*
 * lk__json_begin - start a document, a top-level object, on out: its members one per line, or,
 * with one_line, the whole document on one line (a record in a stream of them, one per line).
 * lk__json_end - close the top-level object and end the line. Every container opened in between
 * must have been closed (lk__json_close).
 */
void lk__json_begin(struct lk__json *j, FILE *out, bool one_line);
void lk__json_end(struct lk__json *j);

/*
 * Open a container as the member key of the current object, or as the next element of the
 * current array (key NULL). The _line variants put the container and all it holds on one line.
 * At most LK__JSON_DEPTH levels: deeper is the caller's bug (checked by assert).
 * lk__json_close - close the innermost open container.
 */
void lk__json_object(struct lk__json *j, const char *key);
void lk__json_array(struct lk__json *j, const char *key);
void lk__json_object_line(struct lk__json *j, const char *key);
void lk__json_array_line(struct lk__json *j, const char *key);
void lk__json_close(struct lk__json *j);

/*
 * Values: the member key of the current object, or (key NULL) the next element of the current
 * array. Keys are escaped as strings are (lk__json_string).
 *
 * lk__json_str - s as a JSON string; NULL as the empty string.
 * lk__json_str_or_null - s as a JSON string; NULL as null (unknown, not empty).
 * lk__json_strf - the printf-style fmt's text (at most 255 bytes kept) as a JSON string.
 * lk__json_num - v with 6 significant digits (%.6g); NaN and infinities as null.
 * lk__json_fixed - v with decimals digits after the point (%.*f); NaN and infinities as null.
 * lk__json_int, lk__json_uint - an integer, exactly.
 * lk__json_bool, lk__json_null - true or false; null.
 */
void lk__json_str(struct lk__json *j, const char *key, const char *s);
void lk__json_str_or_null(struct lk__json *j, const char *key, const char *s);
void lk__json_strf(struct lk__json *j, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void lk__json_num(struct lk__json *j, const char *key, double v);
void lk__json_fixed(struct lk__json *j, const char *key, double v, int decimals);
void lk__json_int(struct lk__json *j, const char *key, long long v);
void lk__json_uint(struct lk__json *j, const char *key, uint64_t v);
void lk__json_bool(struct lk__json *j, const char *key, bool v);
void lk__json_null(struct lk__json *j, const char *key);

#endif
