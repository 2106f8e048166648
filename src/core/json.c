// SPDX-License-Identifier: MIT
#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "internal/json.h"
#include "internal/utf8.h"

void lk__json_string(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s, *run;
	size_t n;

	if (!s) {
		fputs("null", f);
		return;
	}
	n = strlen(s);
	fputc('"', f);
	run = p;
	while (*p) {
		unsigned char c = *p;
		size_t k;

		if (c >= 0x20 && c != '"' && c != '\\' && c < 0x7f) {
			p++;
			continue;
		}
		k = c >= 0x80 ? lk__utf8_sequence(p, n - (size_t)(p - (const unsigned char *)s)) :
				0;
		if (k && !(k == 2 && lk__utf8_control(p, 2))) {
			p += k;
			continue;
		}
		fwrite(run, 1, (size_t)(p - run), f);
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c <= 0x7f)
			fprintf(f, "\\u%04x", c);
		else if (k) /* C1, U+0080..U+009F: valid JSON raw, but a terminal's controls */
			fprintf(f, "\\u%04x", p[1]);
		else
			fputs("\\ufffd", f); /* not UTF-8: JSON text must be */
		p += k ? k : 1;
		run = p;
	}
	fwrite(run, 1, (size_t)(p - run), f);
	fputc('"', f);
}

/* ---- the writer ---- */

static bool on_one_line(const struct lk__json *j)
{
	return j->line_depth && j->depth >= j->line_depth;
}

/* Before a member or element: the comma after the one before, the line break and the indent. */
static void json_key(struct lk__json *j, const char *key)
{
	bool first = !j->need_comma[j->depth];

	j->need_comma[j->depth] = true;
	if (on_one_line(j)) {
		if (!first)
			fputs(", ", j->out);
	} else {
		fputs(first ? "\n" : ",\n", j->out);
		for (int i = 0; i < j->depth; i++)
			fputs("  ", j->out);
	}
	if (key) {
		lk__json_string(j->out, key);
		fputs(": ", j->out);
	}
}

void lk__json_begin(struct lk__json *j, FILE *out, bool one_line)
{
	memset(j, 0, sizeof(*j));
	j->out = out;
	j->depth = 1;
	j->line_depth = one_line ? 1 : 0;
	j->closer[1] = '}';
	fputc('{', out);
}

void lk__json_end(struct lk__json *j)
{
	assert(j->depth == 1);
	fputs(j->line_depth ? "}\n" : "\n}\n", j->out);
}

static void json_open(struct lk__json *j, const char *key, char bracket, bool one_line)
{
	assert(j->depth + 1 < LK__JSON_DEPTH);
	json_key(j, key);
	fputc(bracket, j->out);
	j->depth++;
	j->need_comma[j->depth] = false;
	j->closer[j->depth] = bracket == '{' ? '}' : ']';
	if (one_line && !j->line_depth)
		j->line_depth = j->depth;
}

void lk__json_object(struct lk__json *j, const char *key)
{
	json_open(j, key, '{', false);
}

void lk__json_array(struct lk__json *j, const char *key)
{
	json_open(j, key, '[', false);
}

void lk__json_object_line(struct lk__json *j, const char *key)
{
	json_open(j, key, '{', true);
}

void lk__json_array_line(struct lk__json *j, const char *key)
{
	json_open(j, key, '[', true);
}

void lk__json_close(struct lk__json *j)
{
	char closer = j->closer[j->depth];

	assert(j->depth > 1);
	/* an empty container closes where it opened: [] and {} */
	if (!on_one_line(j) && j->need_comma[j->depth]) {
		fputc('\n', j->out);
		for (int i = 1; i < j->depth; i++)
			fputs("  ", j->out);
	}
	if (j->line_depth == j->depth)
		j->line_depth = 0;
	j->depth--;
	fputc(closer, j->out);
}

void lk__json_str(struct lk__json *j, const char *key, const char *s)
{
	json_key(j, key);
	lk__json_string(j->out, s ? s : "");
}

void lk__json_str_or_null(struct lk__json *j, const char *key, const char *s)
{
	json_key(j, key);
	lk__json_string(j->out, s);
}

void lk__json_strf(struct lk__json *j, const char *key, const char *fmt, ...)
{
	char text[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	lk__json_str(j, key, text);
}

void lk__json_num(struct lk__json *j, const char *key, double v)
{
	json_key(j, key);
	if (isfinite(v))
		fprintf(j->out, "%.6g", v);
	else
		fputs("null", j->out);
}

void lk__json_fixed(struct lk__json *j, const char *key, double v, int decimals)
{
	json_key(j, key);
	if (isfinite(v))
		fprintf(j->out, "%.*f", decimals, v);
	else
		fputs("null", j->out);
}

void lk__json_int(struct lk__json *j, const char *key, long long v)
{
	json_key(j, key);
	fprintf(j->out, "%lld", v);
}

void lk__json_uint(struct lk__json *j, const char *key, uint64_t v)
{
	json_key(j, key);
	fprintf(j->out, "%" PRIu64, v);
}

void lk__json_bool(struct lk__json *j, const char *key, bool v)
{
	json_key(j, key);
	fputs(v ? "true" : "false", j->out);
}

void lk__json_null(struct lk__json *j, const char *key)
{
	json_key(j, key);
	fputs("null", j->out);
}
