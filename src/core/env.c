// SPDX-License-Identifier: MIT
#include <stdlib.h>
#include <strings.h>

#include "core/env.h"

const char *lk__env(const char *name)
{
	const char *v = secure_getenv(name);

	return (v && *v) ? v : NULL;
}

bool lk__env_is(const char *name, const char *value)
{
	const char *v = lk__env(name);

	return v && strcasecmp(v, value) == 0;
}
