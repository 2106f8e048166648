// SPDX-License-Identifier: MIT
/*
 * Numbers on the command line: the whole argument, in range, or refused. strtol alone takes
 * "12abc" as 12, "-8" as a huge unsigned value and 4294967298 as 2 once cast to int.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"

bool cli_parse_long(const char *s, long long min, long long max, long long *out)
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

bool cli_parse_unsigned(const char *s, unsigned long long max, unsigned long long *out)
{
	char *end;
	unsigned long long v;

	if (!s || !isdigit((unsigned char)*s))
		return false; /* no sign, no space: strtoull would wrap "-8" */
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end || v > max)
		return false;
	*out = v;
	return true;
}

/* "0,2-3" -> {0, 2, 3}: ascending ranges or single CPUs, no repeats. */
bool cli_parse_cpu_list(const char *s, int **cpus, size_t *n)
{
	const char *p = s;
	int *v = NULL;
	size_t count = 0;

	*cpus = NULL;
	*n = 0;
	while (p && *p) {
		unsigned long long lo, hi;
		char item[32], *dash;
		size_t len = strcspn(p, ",");
		int *grown;

		if (!len || len >= sizeof(item))
			goto bad;
		memcpy(item, p, len);
		item[len] = '\0';
		dash = strchr(item, '-');
		if (dash)
			*dash = '\0';
		if (!cli_parse_unsigned(item, 1 << 20, &lo) ||
		    !cli_parse_unsigned(dash ? dash + 1 : item, 1 << 20, &hi) || hi < lo ||
		    hi - lo >= (1 << 16))
			goto bad;
		grown = realloc(v, (count + (size_t)(hi - lo) + 1) * sizeof(*v));
		if (!grown)
			goto bad;
		v = grown;
		for (unsigned long long cpu = lo; cpu <= hi; cpu++) {
			for (size_t k = 0; k < count; k++)
				if (v[k] == (int)cpu)
					goto bad;
			v[count++] = (int)cpu;
		}
		p += len;
		if (*p == ',' && !*++p)
			goto bad; /* a trailing comma */
	}
	if (!count)
		goto bad;
	*cpus = v;
	*n = count;
	return true;
bad:
	free(v);
	return false;
}
