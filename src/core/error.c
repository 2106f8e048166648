// SPDX-License-Identifier: MIT
/*
 * Error strings. The message buffer is per thread, so a failing call in one thread never garbles
 * another thread's message.
 */
#include <stdio.h>
#include <string.h>

#include <lowkey/error.h>
#include <lowkey/version.h>

#include "core/error.h"

#define LK_ERRMSG_MAX 768

static __thread char lk__errmsg[LK_ERRMSG_MAX];

int lk__vfail(int err, const char *fmt, va_list ap)
{
	vsnprintf(lk__errmsg, sizeof(lk__errmsg), fmt, ap);
	return err;
}

int lk__fail(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	lk__vfail(err, fmt, ap);
	va_end(ap);
	return err;
}

void lk__fail_append(const char *fmt, ...)
{
	size_t used = strnlen(lk__errmsg, sizeof(lk__errmsg));
	va_list ap;

	if (used + 1 >= sizeof(lk__errmsg))
		return;
	va_start(ap, fmt);
	vsnprintf(lk__errmsg + used, sizeof(lk__errmsg) - used, fmt, ap);
	va_end(ap);
}

LK_API const char *lk_last_error(void)
{
	return lk__errmsg;
}

LK_API const char *lk_strerror(int err)
{
	const char *desc;

	if (err < 0)
		err = -err;
	if (err == 0)
		return "success";
	/* strerrordesc_np() returns static, untranslated text: thread- and signal-safe. */
	desc = strerrordesc_np(err);
	return desc ? desc : "unknown error";
}

LK_API const char *lk_version(void)
{
	return LK_VERSION_STRING;
}
