// SPDX-License-Identifier: MIT
/* A shared library with probe sites, for the control tests (lkt_ctl_lib). */
#define _POSIX_C_SOURCE 200809L /* nanosleep, in the compiler matrix's strict C11 cells too */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <lowkey/probe.h>

#include "target.h"

void lkt_lib_work(int i)
{
	LK_PROBE(lib, work, i, "from the library");
}

/*
 * A slow library constructor, between liblowkey's and the program's: LKT_LIB_CTOR_MARKER is
 * created, then the constructor sleeps LKT_LIB_CTOR_SLEEP_MS.
 */
__attribute__((constructor)) static void slow_start(void)
{
	const char *marker = getenv("LKT_LIB_CTOR_MARKER"), *ms = getenv("LKT_LIB_CTOR_SLEEP_MS");
	FILE *f;

	if (marker && (f = fopen(marker, "w")))
		fclose(f);
	if (ms) {
		long n = atol(ms);
		struct timespec ts = { n / 1000, (n % 1000) * 1000000L };

		nanosleep(&ts, NULL);
	}
}
