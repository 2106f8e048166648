// SPDX-License-Identifier: MIT
#include <ctype.h>
#include <string.h>

#include "internal/edit_distance.h"

#define MAX_LEN 128

static bool same(char x, char y, bool fold_case)
{
	if (fold_case)
		return tolower((unsigned char)x) == tolower((unsigned char)y);
	return x == y;
}

size_t lk__edit_distance(const char *a, const char *b, bool fold_case)
{
	size_t la = strlen(a), lb = strlen(b), row[MAX_LEN];

	if (la >= MAX_LEN || lb >= MAX_LEN)
		return (size_t)-1;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];

		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j], best = diag + !same(a[i - 1], b[j - 1], fold_case);

			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			diag = up;
			row[j] = best;
		}
	}
	return row[lb];
}
