// SPDX-License-Identifier: MIT
/*
 * Each open span links to the open span of the same name under it, and the index keeps the
 * latest one per thread and name: an end finds its begin in one lookup, and closing a span puts
 * back the one under it. Spans dropped above a match are unlinked the same way, each once.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal/trace_spans.h"

static bool same_name(const struct lk__event_class *x, const struct lk__event_class *y)
{
	return strcmp(x->provider, y->provider) == 0 && strcmp(x->event, y->event) == 0;
}

int lk__pair_init(struct lk__pair_index *ix, const struct lk__trace_reader *r, const uint32_t *rows,
		  size_t nrows)
{
	memset(ix, 0, sizeof(*ix));
	ix->name = calloc(r->nclasses + 1, sizeof(*ix->name));
	if (!ix->name)
		return -ENOMEM;
	ix->nclasses = r->nclasses;
	for (size_t i = 0; i < nrows; i++) {
		bool same = i && same_name(r->classes[rows[i - 1]], r->classes[rows[i]]);

		ix->name[rows[i]] = same ? ix->name[rows[i - 1]] : rows[i];
	}
	return 0;
}

void lk__pair_free(struct lk__pair_index *ix)
{
	free(ix->name);
	lk__tf_map_free(&ix->top);
	memset(ix, 0, sizeof(*ix));
}

static uint64_t key(const struct lk__pair_index *ix, const struct lk__pair_stack *s, uint32_t id)
{
	return (uint64_t)s->serial << 32 | (id < ix->nclasses ? ix->name[id] : id);
}

int lk__pair_open(struct lk__pair_index *ix, struct lk__pair_stack *s, const struct lk__event *e)
{
	uint32_t *top;

	if (!s->serial) {
		if (ix->serials == UINT32_MAX)
			return -ENOMEM;
		s->serial = ++ix->serials;
	}
	if (s->depth == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		struct lk__pair_open *grown =
			cap < UINT32_MAX - 1 ? realloc(s->v, cap * sizeof(*grown)) : NULL;

		if (!grown)
			return -ENOMEM;
		s->v = grown;
		s->cap = cap;
	}
	top = lk__tf_map_add(&ix->top, key(ix, s, e->cls->id), 0);
	if (!top)
		return -ENOMEM;
	s->v[s->depth] = (struct lk__pair_open){ e->cls->id, *top, e->tsc, e->cputime_ns };
	*top = (uint32_t)++s->depth;
	return 0;
}

uint32_t *lk__pair_match(struct lk__pair_index *ix, const struct lk__pair_stack *s, uint32_t end_id,
			 size_t *k)
{
	uint32_t *top = s->serial ? lk__tf_map_at(&ix->top, key(ix, s, end_id)) : NULL;

	if (!top || !*top)
		return NULL;
	*k = *top - 1;
	return top;
}

/* Every open span's name has its place in the map: closing one adds no key. */
void lk__pair_close_from(struct lk__pair_index *ix, struct lk__pair_stack *s, size_t k)
{
	for (; s->depth > k; s->depth--) {
		const struct lk__pair_open *o = &s->v[s->depth - 1];

		*lk__tf_map_at(&ix->top, key(ix, s, o->id)) = o->below;
	}
}

void lk__pair_close(struct lk__pair_index *ix, struct lk__pair_stack *s, size_t k, uint32_t *top)
{
	lk__pair_close_from(ix, s, k + 1);
	*top = s->v[k].below;
	s->depth = k;
}

void lk__pair_stack_free(struct lk__pair_stack *s)
{
	free(s->v);
	memset(s, 0, sizeof(*s));
}
