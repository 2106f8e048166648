// SPDX-License-Identifier: MIT
/* A small JSON reader (json_read.h): recursive descent over the text, one value at a time. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/json_read.h"

#define MAX_DEPTH 64

struct parser {
	const char *p, *start, *end;
	int depth;
	char *err;
	size_t errlen;
	bool failed;
};

static bool fail(struct parser *ps, const char *what)
{
	if (!ps->failed)
		snprintf(ps->err, ps->errlen, "JSON: %s at offset %zu", what,
			 (size_t)(ps->p - ps->start));
	ps->failed = true;
	return false;
}

static void skip_space(struct parser *ps)
{
	while (ps->p < ps->end &&
	       (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

static bool literal(struct parser *ps, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
		return fail(ps, "unexpected character");
	ps->p += n;
	return true;
}

static int hex4(const char *p)
{
	int v = 0;

	for (int i = 0; i < 4; i++) {
		char c = p[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return -1;
	}
	return v;
}

static size_t put_utf8(char *out, uint32_t cp)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | cp >> 12);
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | cp >> 18);
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* \uXXXX at ps->p (after the backslash and 'u'), with its low surrogate if it is a high one. */
static bool unicode_escape(struct parser *ps, uint32_t *cp)
{
	int hi = ps->end - ps->p >= 4 ? hex4(ps->p) : -1, lo;

	if (hi < 0)
		return fail(ps, "bad \\u escape");
	ps->p += 4;
	*cp = (uint32_t)hi;
	if (hi >= 0xdc00 && hi <= 0xdfff) {
		*cp = 0xfffd;
	} else if (hi >= 0xd800 && hi <= 0xdbff) {
		lo = ps->end - ps->p >= 6 && ps->p[0] == '\\' && ps->p[1] == 'u' ? hex4(ps->p + 2) :
										   -1;
		if (lo >= 0xdc00 && lo <= 0xdfff) {
			ps->p += 6;
			*cp = 0x10000 + (((uint32_t)hi - 0xd800) << 10) + ((uint32_t)lo - 0xdc00);
		} else {
			*cp = 0xfffd;
		}
	}
	return true;
}

/* A string at ps->p (its opening quote); decoded into a new buffer, never longer than the text. */
static char *string(struct parser *ps)
{
	const char *q = ++ps->p;
	char *out, *w;

	while (q < ps->end && *q != '"')
		q += *q == '\\' ? 2 : 1;
	if (q >= ps->end) {
		fail(ps, "unterminated string");
		return NULL;
	}
	out = w = malloc((size_t)(q - ps->p) + 1);
	if (!out) {
		fail(ps, "out of memory");
		return NULL;
	}
	while (ps->p < q) { /* an escape never reaches past q: q was found skipping them */
		char c = *ps->p++;
		uint32_t cp = 0; /* set by unicode_escape(); GCC -O1 cannot tell */

		if ((unsigned char)c < 0x20) {
			free(out);
			fail(ps, "control character in a string");
			return NULL;
		}
		if (c != '\\') {
			*w++ = c;
			continue;
		}
		c = *ps->p++;
		switch (c) {
		case '"':
		case '\\':
		case '/':
			*w++ = c;
			break;
		case 'b':
			*w++ = '\b';
			break;
		case 'f':
			*w++ = '\f';
			break;
		case 'n':
			*w++ = '\n';
			break;
		case 'r':
			*w++ = '\r';
			break;
		case 't':
			*w++ = '\t';
			break;
		case 'u':
			if (!unicode_escape(ps, &cp)) {
				free(out);
				return NULL;
			}
			w += put_utf8(w, cp); /* at most as long as its escape */
			break;
		default:
			free(out);
			fail(ps, "bad escape");
			return NULL;
		}
	}
	ps->p++;
	*w = 0;
	return out;
}

static bool number_char(char c)
{
	return (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.' || c == 'e' || c == 'E';
}

/* A whole number of up to 15 digits, exact in a double: most of a trace's, without strtod. */
static bool small_integer(const char *p, size_t n, double *v)
{
	size_t i = n && p[0] == '-';
	uint64_t x = 0;

	if (n == i || n - i > 15)
		return false;
	for (size_t k = i; k < n; k++) {
		if (p[k] < '0' || p[k] > '9')
			return false;
		x = x * 10 + (uint64_t)(p[k] - '0');
	}
	*v = i ? -(double)x : (double)x;
	return true;
}

static bool number(struct parser *ps, struct lk__jr_value *v)
{
	char buf[64], *endp;
	size_t n = 0;

	while (ps->p + n < ps->end && n < sizeof(buf) - 1 && number_char(ps->p[n]))
		n++;
	if (!small_integer(ps->p, n, &v->number)) {
		memcpy(buf, ps->p, n);
		buf[n] = 0;
		v->number = strtod(buf, &endp);
		if (n == 0 || endp != buf + n)
			return fail(ps, "bad number");
	}
	v->raw = ps->p;
	v->raw_len = n;
	ps->p += n;
	return true;
}

static bool value(struct parser *ps, struct lk__jr_value *v);

static bool add_item(struct parser *ps, struct lk__jr_value *v, size_t *cap)
{
	if (v->n == *cap) {
		size_t c = *cap ? *cap * 2 : 8;
		struct lk__jr_value *grown = realloc(v->items, c * sizeof(*grown));

		if (!grown)
			return fail(ps, "out of memory");
		v->items = grown;
		*cap = c;
	}
	memset(&v->items[v->n++], 0, sizeof(*v->items));
	return true;
}

/* An array's or object's members, after its opening bracket. */
static bool members(struct parser *ps, struct lk__jr_value *v, char close)
{
	size_t cap = 0;

	if (++ps->depth > MAX_DEPTH)
		return fail(ps, "nested too deep");
	skip_space(ps);
	if (ps->p < ps->end && *ps->p == close) {
		ps->p++;
		ps->depth--;
		return true;
	}
	for (;;) {
		struct lk__jr_value *item;

		if (!add_item(ps, v, &cap))
			return false;
		item = &v->items[v->n - 1];
		skip_space(ps);
		if (close == '}') {
			if (ps->p >= ps->end || *ps->p != '"')
				return fail(ps, "expected a member name");
			if (!(item->key = string(ps)))
				return false;
			skip_space(ps);
			if (ps->p >= ps->end || *ps->p++ != ':')
				return fail(ps, "expected ':'");
		}
		if (!value(ps, item))
			return false;
		skip_space(ps);
		if (ps->p < ps->end && *ps->p == ',') {
			ps->p++;
			continue;
		}
		if (ps->p < ps->end && *ps->p == close) {
			ps->p++;
			ps->depth--;
			return true;
		}
		return fail(ps, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
	}
}

static bool value(struct parser *ps, struct lk__jr_value *v)
{
	skip_space(ps);
	if (ps->p >= ps->end)
		return fail(ps, "unexpected end");
	switch (*ps->p) {
	case '{':
		ps->p++;
		v->type = LK__JR_OBJECT;
		return members(ps, v, '}');
	case '[':
		ps->p++;
		v->type = LK__JR_ARRAY;
		return members(ps, v, ']');
	case '"':
		v->type = LK__JR_STRING;
		return (v->string = string(ps)) != NULL;
	case 't':
		v->type = LK__JR_BOOL;
		v->boolean = true;
		return literal(ps, "true");
	case 'f':
		v->type = LK__JR_BOOL;
		return literal(ps, "false");
	case 'n':
		v->type = LK__JR_NULL;
		return literal(ps, "null");
	default:
		v->type = LK__JR_NUMBER;
		return number(ps, v);
	}
}

static void free_members(struct lk__jr_value *v)
{
	for (size_t i = 0; i < v->n; i++)
		free_members(&v->items[i]);
	free(v->items);
	free(v->string);
	free(v->key);
}

void lk__jr_free(struct lk__jr_value *v)
{
	if (v) {
		free_members(v);
		free(v);
	}
}

struct lk__jr_value *lk__jr_parse(const char *text, size_t len, char *err, size_t errlen)
{
	struct parser ps = { text, text, text + len, 0, err, errlen, false };
	struct lk__jr_value *v = calloc(1, sizeof(*v));

	if (!v) {
		snprintf(err, errlen, "JSON: out of memory");
		return NULL;
	}
	if (value(&ps, v)) {
		skip_space(&ps);
		if (ps.p == ps.end)
			return v;
		fail(&ps, "text after the value");
	}
	lk__jr_free(v);
	return NULL;
}

struct lk__jr_value *lk__jr_parse_next(const char *text, size_t len, size_t *pos, char *err,
				       size_t errlen)
{
	struct parser ps = { text + *pos, text, text + len, 0, err, errlen, false };
	struct lk__jr_value *v = calloc(1, sizeof(*v));

	if (!v) {
		snprintf(err, errlen, "JSON: out of memory");
		return NULL;
	}
	if (*pos <= len && value(&ps, v)) {
		*pos = (size_t)(ps.p - text);
		return v;
	}
	if (*pos > len)
		fail(&ps, "unexpected end");
	lk__jr_free(v);
	return NULL;
}

const struct lk__jr_value *lk__jr_get(const struct lk__jr_value *v, const char *key)
{
	if (!v || v->type != LK__JR_OBJECT)
		return NULL;
	for (size_t i = 0; i < v->n; i++)
		if (strcmp(v->items[i].key, key) == 0)
			return &v->items[i];
	return NULL;
}

double lk__jr_number(const struct lk__jr_value *v, const char *key)
{
	const struct lk__jr_value *m = lk__jr_get(v, key);

	return m && m->type == LK__JR_NUMBER ? m->number : NAN;
}

const char *lk__jr_string(const struct lk__jr_value *v, const char *key)
{
	const struct lk__jr_value *m = lk__jr_get(v, key);

	return m && m->type == LK__JR_STRING ? m->string : NULL;
}
