/* SPDX-License-Identifier: MIT */
/* Internal: setting the calling thread's error message. */
#ifndef LK_CORE_ERROR_H
#define LK_CORE_ERROR_H

#include <errno.h>
#include <stdarg.h>

/*
 * lk__fail - record a message for lk_last_error() and return err.
 * @err: a negative errno value; it is returned unchanged so callers can write
 *       `return lk__fail(-EINVAL, "...")`.
 */
int lk__fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int lk__vfail(int err, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* lk__fail_append - add a sentence to the calling thread's current message. */
void lk__fail_append(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
