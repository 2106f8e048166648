/* SPDX-License-Identifier: MIT */
/*
 * A small JSON reader for the HTML pages of `lowkey locks` and `lowkey bench`, which draw what
 * those commands print with --json: the page is made from the same figures as the JSON, by one
 * path, without reaching into each bench's own structures; and, a value at a time, for `lowkey
 * report` on a JSON trace (chrome_json/read.c), whose events are read one by one.
 *
 * RFC 8259 text into a tree. Strings are decoded (\uXXXX and surrogate pairs into UTF-8; a lone
 * surrogate becomes U+FFFD) and may hold any bytes the text held; the HTML writer escapes them.
 * Nesting is limited to 64 levels. Costs one allocation per value; not async-signal-safe.
 */
#ifndef LK_FORMAT_JSON_READ_H
#define LK_FORMAT_JSON_READ_H

#include <stdbool.h>
#include <stddef.h>

enum lk__jr_type {
	LK__JR_NULL,
	LK__JR_BOOL,
	LK__JR_NUMBER,
	LK__JR_STRING,
	LK__JR_ARRAY,
	LK__JR_OBJECT
};

struct lk__jr_value {
	enum lk__jr_type type;
	bool boolean;
	double number;
	const char *raw; /* a number's text (raw_len bytes, in the parsed text) */
	size_t raw_len;
	char *string;		    /* a string, NUL-terminated (a \u0000 inside ends it early) */
	char *key;		    /* the member's name inside an object; NULL elsewhere */
	struct lk__jr_value *items; /* LK__JR_ARRAY, LK__JR_OBJECT: n members in order */
	size_t n;
};

/*
 * Parse len bytes of text. Returns the tree (free it with lk__jr_free), or NULL with a message in
 * err:
 * malformed text (with its offset), too deep, trailing garbage, or out of memory.
 */
struct lk__jr_value *lk__jr_parse(const char *text, size_t len, char *err, size_t errlen);
void lk__jr_free(struct lk__jr_value *v);

/*
 * Parse the one value at text + *pos (after blanks) and move *pos past it, for reading a large
 * document a piece at a time. The same results as lk__jr_parse; offsets in messages count from
 * text.
 */
struct lk__jr_value *lk__jr_parse_next(const char *text, size_t len, size_t *pos, char *err,
				       size_t errlen);

/* An object's member by name (the first), or NULL if v is not an object or has none. */
const struct lk__jr_value *lk__jr_get(const struct lk__jr_value *v, const char *key);
/* The member's number, or NaN (absent, null, not a number). */
double lk__jr_number(const struct lk__jr_value *v, const char *key);
/* The member's string, or NULL. */
const char *lk__jr_string(const struct lk__jr_value *v, const char *key);

#endif
