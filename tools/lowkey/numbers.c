// SPDX-License-Identifier: MIT
/*
 * Numbers on the command line: the whole argument, in range, or refused. strtol alone takes
 * "12abc" as 12, "-8" as a huge unsigned value and 4294967298 as 2 once cast to int.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

#include "cli.h"

bool lk_cli_parse_long(const char *s, long long min, long long max, long long *out)
{
	char *end;
	long long v;

	if (!s || !*s || isspace((unsigned char)*s))
		return false;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return false;
	*out = v;
	return true;
}

bool lk_cli_parse_unsigned(const char *s, unsigned long long max, unsigned long long *out)
{
	char *end;
	unsigned long long v;

	if (!s || !isdigit((unsigned char)*s))
		return false;	/* no sign, no space: strtoull would wrap "-8" */
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end || v > max)
		return false;
	*out = v;
	return true;
}
