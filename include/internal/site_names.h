// SPDX-License-Identifier: MIT
/*
 * What a site descriptor says, as traces and listings show it; shared by the registry and by
 * `lowkey list`, which reads descriptors from ELF files.
 */
#ifndef LK_PROBE_SITE_NAMES_H
#define LK_PROBE_SITE_NAMES_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <lowkey/probe.h>

/* The argument names: the macro's arguments as written, less the provider and the event. */
static inline char *lk__site_arg_names(const char *written)
{
	int depth = 0, skip = 2;
	const char *p = written ? written : "";

	for (; *p && skip; p++) {
		if (*p == '(' || *p == '[' || *p == '{')
			depth++;
		else if ((*p == ')' || *p == ']' || *p == '}') && depth > 0)
			depth--;
		else if (*p == ',' && depth == 0)
			skip--;
	}
	if (skip)
		return strdup("");
	while (*p == ' ')
		p++;
	return strdup(p);
}

/* Argument types as traces and lk_probe_list() show them: a C++ string view is a string. */
static inline uint32_t lk__site_public_types(uint32_t types, unsigned int nargs)
{
	for (unsigned int i = 0; i < nargs; i++)
		if ((types >> (4 * i) & 0xf) == LK__PROBE_VIEW)
			types ^= (uint32_t)(LK__PROBE_VIEW ^ LK_PROBE_STR) << (4 * i);
	return types;
}

#endif
