/* SPDX-License-Identifier: MIT */
/* How many flips the stress tests make: LKT_FLIPS, else the build's count (tests/key/CMakeLists.txt). */
#ifndef LKT_FLIPS_H
#define LKT_FLIPS_H

#include <stdlib.h>

static inline unsigned long lkt_flips(void)
{
	const char *env = getenv("LKT_FLIPS");

	if (!env)
		env = getenv("LKT_FLIPS_DEFAULT");
	return env ? strtoul(env, NULL, 10) : 25000;
}

#endif
