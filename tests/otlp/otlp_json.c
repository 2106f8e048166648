// SPDX-License-Identifier: MIT
#include "otlp_json.h"

#include "collector.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int lkt_otlp_read(struct lkt_otlp_got *g, const char *path, char *err, size_t errlen)
{
	size_t len, pos = 0;
	char *text = lkt_read_file(path, &len), why[256];

	if (!text) {
		snprintf(err, errlen, "cannot read %s", path);
		return -1;
	}
	while (pos < len) {
		struct lk__jr_value *v, **grown;

		while (pos < len && (text[pos] == '\n' || text[pos] == ' '))
			pos++;
		if (pos == len)
			break;
		v = lk__jr_parse_next(text, len, &pos, why, sizeof(why));
		grown = v ? realloc(g->lines, (g->nlines + 1) * sizeof(*g->lines)) : NULL;
		if (!grown) {
			snprintf(err, errlen, "%s: %s", path, v ? "out of memory" : why);
			lk__jr_free(v);
			free(text);
			return -1;
		}
		g->lines = grown;
		g->lines[g->nlines++] = v;
	}
	free(text);
	return 0;
}

void lkt_otlp_free(struct lkt_otlp_got *g)
{
	for (size_t i = 0; i < g->nlines; i++)
		lk__jr_free(g->lines[i]);
	free(g->lines);
	memset(g, 0, sizeof(*g));
}

static void each_in(const struct lk__jr_value *rs, lkt_otlp_span_fn fn, void *arg)
{
	const struct lk__jr_value *res = lk__jr_get(rs, "resource");
	const struct lk__jr_value *sss = lk__jr_get(rs, "scopeSpans");

	for (size_t s = 0; sss && s < sss->n; s++) {
		const struct lk__jr_value *spans = lk__jr_get(&sss->items[s], "spans");

		for (size_t i = 0; spans && i < spans->n; i++)
			fn(res, &spans->items[i], arg);
	}
}

void lkt_otlp_each_span(const struct lkt_otlp_got *g, lkt_otlp_span_fn fn, void *arg)
{
	for (size_t l = 0; l < g->nlines; l++) {
		const struct lk__jr_value *rss = lk__jr_get(g->lines[l], "resourceSpans");

		for (size_t r = 0; rss && r < rss->n; r++)
			each_in(&rss->items[r], fn, arg);
	}
}

const struct lk__jr_value *lkt_otlp_attr(const struct lk__jr_value *owner, const char *key)
{
	const struct lk__jr_value *attrs = owner ? lk__jr_get(owner, "attributes") : NULL;

	for (size_t i = 0; attrs && i < attrs->n; i++) {
		const char *k = lk__jr_string(&attrs->items[i], "key");

		if (k && !strcmp(k, key))
			return lk__jr_get(&attrs->items[i], "value");
	}
	return NULL;
}

const char *lkt_otlp_attr_string(const struct lk__jr_value *owner, const char *key)
{
	const struct lk__jr_value *v = lkt_otlp_attr(owner, key);

	return v ? lk__jr_string(v, "stringValue") : NULL;
}

int64_t lkt_otlp_attr_int(const struct lk__jr_value *owner, const char *key)
{
	const struct lk__jr_value *v = lkt_otlp_attr(owner, key);
	const char *s = v ? lk__jr_string(v, "intValue") : NULL;

	return s ? strtoll(s, NULL, 10) : INT64_MIN;
}

uint64_t lkt_otlp_u64(const struct lk__jr_value *owner, const char *key)
{
	const char *s = lk__jr_string(owner, key);

	return s ? strtoull(s, NULL, 10) : 0;
}

void lkt_otlp_hex(const uint8_t *id, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", id[i]);
	out[2 * n] = 0;
}
