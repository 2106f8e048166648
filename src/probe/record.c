// SPDX-License-Identifier: MIT
/*
 * The size of a record's arguments, found from its event's layout: records carry no size of their
 * own, so that an event with two integers takes 24 bytes, not 32.
 */
#include <string.h>

#include <lowkey/probe.h>

#include "probe/probe_internal.h"

size_t lk__payload_size(uint32_t types, unsigned int nargs, const uint8_t *p, size_t avail,
			bool *ok)
{
	size_t size = 0;

	for (unsigned int i = 0; i < nargs; i++) {
		if (lk__arg_type(types, i) == LK_PROBE_STR) {
			const uint8_t *nul = size < avail ? memchr(p + size, 0, avail - size) :
							    NULL;

			if (!nul) {
				*ok = false;
				return 0;
			}
			size = (size_t)(nul - p) + 1;
		} else {
			size += 8;
		}
	}
	*ok = size <= avail;
	return *ok ? size : 0;
}
