/* SPDX-License-Identifier: MIT */
/*
 * Internal: spans open on each thread of a trace, paired with their ends -- the one pairing the
 * trace reader, `lowkey report` and its HTML page share: an end closes the latest open begin of
 * its provider:event on its thread, and the spans opened after that begin are dropped with it. A
 * begin, the lookup of an end's match and each span's closing are O(1) on average, however many
 * spans are open or were never closed.
 */
#ifndef LK_FORMAT_SPANS_H
#define LK_FORMAT_SPANS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal/ctf_reader.h"
#include "internal/trace_file.h"

struct lk__pair_open {
	uint32_t id;	/* the begin's class */
	uint32_t below; /* position + 1 of the open span of the same name under it; 0: none */
	uint64_t tsc, cpu;
};

/* A thread's open spans, outermost first. Zero it before use. */
struct lk__pair_stack {
	struct lk__pair_open *v;
	size_t depth, cap;
	uint32_t serial; /* the thread's number in the index's keys; 0: none given yet */
};

struct lk__pair_index {
	uint32_t *name; /* by class id: the first id of the same provider:event, of any kind */
	size_t nclasses;
	struct lk__tf_map
		top; /* (serial, name) to the position + 1 of its latest open span; 0: none */
	uint32_t serials;
};

/*
 * Set ix up for r's classes, given their ids sorted by provider and event (lk__group_classes).
 * 0 or -ENOMEM.
 */
int lk__pair_init(struct lk__pair_index *ix, const struct lk__trace_reader *r, const uint32_t *rows,
		  size_t nrows);
void lk__pair_free(struct lk__pair_index *ix);

/* Open a span of e's class on s: one lookup of its name. 0 or -ENOMEM. */
int lk__pair_open(struct lk__pair_index *ix, struct lk__pair_stack *s, const struct lk__event *e);
/*
 * The latest open span on s that an end of class end_id closes: its position into *k, and where
 * the index keeps it (for lk__pair_close); NULL if none. One lookup.
 */
uint32_t *lk__pair_match(struct lk__pair_index *ix, const struct lk__pair_stack *s, uint32_t end_id,
			 size_t *k);
/*
 * Close the span at position k that lk__pair_match gave, with top, and the spans above it: a
 * lookup for each of those, none for it.
 */
void lk__pair_close(struct lk__pair_index *ix, struct lk__pair_stack *s, size_t k, uint32_t *top);
/* Close the spans at positions k and above: a lookup each. */
void lk__pair_close_from(struct lk__pair_index *ix, struct lk__pair_stack *s, size_t k);
void lk__pair_stack_free(struct lk__pair_stack *s);

#endif
