// SPDX-License-Identifier: MIT
/* lowkey report --html: (counter, thread) to samples and line, in open addressing (counter_lines.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "counter_lines.h"

#define FREE UINT32_MAX

static size_t slot_of(const struct counter_lines *m, uint32_t cls, uint32_t thread)
{
	uint64_t k = ((uint64_t)cls << 32 | thread) * 0x9e3779b97f4a7c15ull;

	return (size_t)(k ^ k >> 29) & (m->cap - 1);
}

/* Where the pair is, or the free slot where it would go (the map is never full). */
static struct counter_thread *probe(const struct counter_lines *m, uint32_t cls, uint32_t thread)
{
	for (size_t i = slot_of(m, cls, thread);; i = (i + 1) & (m->cap - 1)) {
		struct counter_thread *e = &m->slot[i];

		if (e->thread == FREE || (e->cls == cls && e->thread == thread))
			return e;
	}
}

static int grow(struct counter_lines *m)
{
	struct counter_lines bigger = { NULL, m->cap ? m->cap * 2 : 64, m->n, NULL };

	bigger.slot = malloc(bigger.cap * sizeof(*bigger.slot));
	if (!bigger.slot)
		return -ENOMEM;
	for (size_t i = 0; i < bigger.cap; i++)
		bigger.slot[i].thread = FREE;
	for (size_t i = 0; i < m->cap; i++)
		if (m->slot[i].thread != FREE)
			*probe(&bigger, m->slot[i].cls, m->slot[i].thread) = m->slot[i];
	free(m->slot);
	*m = bigger;
	return 0;
}

static bool is_last(const struct counter_lines *m, uint32_t cls, uint32_t thread)
{
	return m->last && m->last->cls == cls && m->last->thread == thread;
}

struct counter_thread *counter_lines_get(struct counter_lines *m, uint32_t cls, uint32_t thread)
{
	struct counter_thread *e;

	if (is_last(m, cls, thread))
		return m->last;
	if ((m->n + 1) * 2 > m->cap && grow(m))
		return NULL;
	e = probe(m, cls, thread);
	if (e->thread == FREE) {
		*e = (struct counter_thread){ cls, thread, 0, 0 };
		m->n++;
	}
	return m->last = e;
}

struct counter_thread *counter_lines_find(struct counter_lines *m, uint32_t cls, uint32_t thread)
{
	struct counter_thread *e;

	if (is_last(m, cls, thread))
		return m->last;
	e = m->cap ? probe(m, cls, thread) : NULL;
	if (!e || e->thread == FREE)
		return NULL;
	return m->last = e;
}

static int by_counter_thread(const void *a, const void *b)
{
	const struct counter_thread *p = *(struct counter_thread *const *)a,
				    *q = *(struct counter_thread *const *)b;

	if (p->cls != q->cls)
		return p->cls < q->cls ? -1 : 1;
	return (p->thread > q->thread) - (p->thread < q->thread);
}

int counter_lines_sorted(const struct counter_lines *m, struct counter_thread ***out, size_t *n)
{
	size_t k = 0;

	*out = malloc((m->n + 1) * sizeof(**out));
	if (!*out)
		return -ENOMEM;
	for (size_t i = 0; i < m->cap; i++)
		if (m->slot[i].thread != FREE)
			(*out)[k++] = &m->slot[i];
	qsort(*out, k, sizeof(**out), by_counter_thread);
	*n = k;
	return 0;
}

void counter_lines_free(struct counter_lines *m)
{
	free(m->slot);
	*m = (struct counter_lines){ 0 };
}
