/* SPDX-License-Identifier: MIT */
/* Errors reported into a caller's buffer (code that runs outside the library's own error state:
 * the control protocol, its client, the CLI's ELF reader). */
#ifndef LK_CORE_FAILF_H
#define LK_CORE_FAILF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/* Format the message into err (if err and errlen), return code. */
static inline __attribute__((format(printf, 4, 5))) int lk__failf(char *err, size_t errlen,
								  int code, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

#endif
