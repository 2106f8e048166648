// SPDX-License-Identifier: MIT
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "internal/trace_classes.h"

static int by_name(const void *a, const void *b, void *arg)
{
	struct lk__event_class *const *classes = arg;
	const struct lk__event_class *x = classes[*(const uint32_t *)a],
				     *y = classes[*(const uint32_t *)b];
	int c;

	if ((c = strcmp(x->provider, y->provider)) || (c = strcmp(x->event, y->event)))
		return c;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

static bool same_row(const struct lk__event_class *x, const struct lk__event_class *y)
{
	return x->kind == y->kind && strcmp(x->provider, y->provider) == 0 &&
	       strcmp(x->event, y->event) == 0;
}

uint32_t *lk__group_classes(const struct lk__trace_reader *r, uint32_t *first, size_t *n)
{
	uint32_t *ids = malloc((r->nclasses + 1) * sizeof(*ids));

	*n = 0;
	if (!ids)
		return NULL;
	for (size_t i = 0; i < r->nclasses; i++)
		if (r->classes[i])
			ids[(*n)++] = (uint32_t)i;
	qsort_r(ids, *n, sizeof(*ids), by_name, r->classes);
	for (size_t i = 0; i < *n; i++) {
		bool same = i && same_row(r->classes[ids[i - 1]], r->classes[ids[i]]);

		first[ids[i]] = same ? first[ids[i - 1]] : ids[i];
	}
	return ids;
}
