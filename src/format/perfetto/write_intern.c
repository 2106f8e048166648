// SPDX-License-Identifier: MIT
/*
 * The Perfetto writer's interning (write.h): event names, categories and argument names, each
 * interned once a batch (a sequence's incremental state) and queued for the InternedData of the
 * first packet that uses it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "format/perfetto/write.h"

static int table_grow(struct intern_table *t, uint32_t gen)
{
	size_t n = t->slots ? (t->mask + 1) * 2 : 64;
	struct intern_slot *slots = calloc(n, sizeof(*slots)), *old = t->slots;
	size_t oldn = t->slots ? t->mask + 1 : 0;

	if (!slots)
		return -ENOMEM;
	t->slots = slots;
	t->mask = n - 1;
	for (size_t i = 0; i < oldn; i++) {
		if (old[i].gen != gen || !old[i].s)
			continue;
		for (size_t k = lk__pft_hash_string(old[i].s) & t->mask;; k = (k + 1) & t->mask) {
			if (!slots[k].s) {
				slots[k] = old[i];
				break;
			}
		}
	}
	free(old);
	return 0;
}

/* s's iid in this sequence; a new one is queued for the packet's InternedData. 0: no memory. */
uint64_t lk__pft_intern(struct lk__pft *p, enum intern_kind kind, const char *s)
{
	struct intern_table *t = &p->tables[kind];
	size_t k;

	if ((t->used + 1) * 2 > (t->slots ? t->mask + 1 : 0) && table_grow(t, p->gen) != 0) {
		p->pb.failed = true;
		return 0;
	}
	for (k = lk__pft_hash_string(s) & t->mask; t->slots[k].s && t->slots[k].gen == p->gen;
	     k = (k + 1) & t->mask)
		if (strcmp(t->slots[k].s, s) == 0)
			return t->slots[k].iid;
	t->slots[k] = (struct intern_slot){ s, ++t->next_iid, p->gen };
	t->used++;
	p->pending[p->npending++] = (struct pending){ kind, t->next_iid, s };
	return t->next_iid;
}

void lk__pft_reset_interning(struct lk__pft *p)
{
	for (int i = 0; i < 4; i++)
		p->tables[i].used = 0, p->tables[i].next_iid = 0;
}

/* The iids of c's class, interned in this batch (lk__pft_class_iids when it has none yet). */
const struct class_iids *lk__pft_intern_class(struct lk__pft *p, const struct lk__event_class *c)
{
	struct class_iids *ci = &p->classes[c->id];

	ci->name = lk__pft_intern(p, NAMES, c->event);
	ci->category = lk__pft_intern(p, CATEGORIES, c->provider);
	for (unsigned int i = 0; i < c->nargs; i++)
		ci->arg[i] = lk__pft_intern(p, ARG_NAMES, c->arg_name[i]);
	ci->gen = p->gen;
	return ci;
}

/* The queued strings as an InternedData (lk__pft_put_interned when there are some). */
uint8_t *lk__pft_put_pending(struct lk__pft *p, uint8_t *w)
{
	uint8_t *data, *entry;

	data = lk__pbw_begin(w, PKT_INTERNED_DATA);
	w = data;
	for (unsigned int i = 0; i < p->npending; i++) {
		entry = lk__pbw_begin(w, p->pending[i].kind);
		w = lk__pbw_uint(entry, 1, p->pending[i].iid);
		w = lk__pbw_utf8(w, 2, p->pending[i].s, strlen(p->pending[i].s));
		w = lk__pbw_end(w, entry);
	}
	p->npending = 0;
	return lk__pbw_end(w, data);
}
