/* SPDX-License-Identifier: MIT */
/*
 * Errors. Every lowkey function that can fail returns a negative errno value (-EINVAL, -EPERM, ...)
 * and leaves a sentence for the calling thread that says what went wrong and what to change.
 */
#ifndef LOWKEY_ERROR_H
#define LOWKEY_ERROR_H

#include <lowkey/bits/compiler.h>

LK_BEGIN_DECLS

/*
 * lk_strerror - a short sentence for an error code.
 * @err: a lowkey return value (-EPERM) or an errno value (EPERM); 0 gives "success".
 *
 * Returns a static string, never NULL. Costs a table lookup. Thread-safe and async-signal-safe.
 */
LK_API const char *lk_strerror(int err);

/*
 * lk_last_error - what the calling thread's most recent failing lowkey call had to say.
 *
 * The message names the cause and the fix where one exists, for example the sysctl or capability a
 * denied perf_event_open needs. A successful call does not clear it. Returns "" when this thread has
 * had no failure, never NULL. The string belongs to the thread and stays valid until its next
 * failing lowkey call. Thread-safe; not async-signal-safe in a thread's first call (TLS setup).
 */
LK_API const char *lk_last_error(void);

/* lk_version - the library's version, "MAJOR.MINOR.PATCH". Static string. */
LK_API const char *lk_version(void);

LK_END_DECLS

#endif
