/* SPDX-License-Identifier: MIT */
/* Internal: lowkey's environment variables. */
#ifndef LK_CORE_ENV_H
#define LK_CORE_ENV_H

#include <stdbool.h>

/*
 * lk__env - the value of a LOWKEY_* variable, or NULL. Ignored (NULL) in set-user-ID and
 * set-group-ID programs, so the environment cannot steer a privileged program.
 */
const char *lk__env(const char *name);

/* lk__env_is - whether variable name is set to value (case-insensitive). */
bool lk__env_is(const char *name, const char *value);

#endif
