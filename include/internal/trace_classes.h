/* SPDX-License-Identifier: MIT */
/*
 * One row per provider:event and kind: a trace has a class per site and per dlopen generation,
 * and `lowkey report` and its HTML page group them the same way.
 */
#ifndef LK_FORMAT_CLASSES_H
#define LK_FORMAT_CLASSES_H

#include <stddef.h>
#include <stdint.h>

#include "internal/ctf_reader.h"

/*
 * Fill first[id] (r->nclasses entries) with the first class id of id's row, for every class the
 * trace has. Returns the class ids sorted by provider, event, kind and id (*n of them; free it),
 * or NULL when out of memory.
 */
uint32_t *lk__group_classes(const struct lk__trace_reader *r, uint32_t *first, size_t *n);

#endif
