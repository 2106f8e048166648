/* SPDX-License-Identifier: MIT */
/* "Did you mean ...?": how far apart two names are, for the library's and the CLI's hints. */
#ifndef LK_CORE_EDIT_DISTANCE_H
#define LK_CORE_EDIT_DISTANCE_H

#include <stdbool.h>
#include <stddef.h>

/*
 * lk__edit_distance - the Levenshtein distance of a and b (insertions, deletions and
 * substitutions of one byte), letters compared regardless of case when fold_case is set;
 * (size_t)-1 when either is 128 bytes or longer. O(strlen(a) * strlen(b)) time, no allocation.
 */
size_t lk__edit_distance(const char *a, const char *b, bool fold_case);

#endif
