/* SPDX-License-Identifier: MIT */
/* A process's or a thread's signal masks, as its /proc status file gives them. */
#ifndef LKT_PROC_SIGNALS_H
#define LKT_PROC_SIGNALS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * The mask on the line that starts with field ("SigBlk:", "SigIgn:", "SigCgt:") of the status file
 * at status ("/proc/PID/status", "/proc/self/task/TID/status"), in *mask; false when the file or
 * the line is not there (the process is gone).
 */
static inline bool lkt_signal_mask(const char *status, const char *field, uint64_t *mask)
{
	bool found = false;
	char line[256];
	FILE *f = fopen(status, "re");

	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, field, strlen(field)) == 0) {
			*mask = strtoull(line + strlen(field), NULL, 16);
			found = true;
		}
	if (f)
		fclose(f);
	return found;
}

/* Whether sig is in process pid's mask field ("SigIgn:"); false once the process is gone. */
static inline bool lkt_process_has_signal(pid_t pid, const char *field, int sig)
{
	char status[64];
	uint64_t mask;

	snprintf(status, sizeof(status), "/proc/%d/status", (int)pid);
	return lkt_signal_mask(status, field, &mask) && (mask & (UINT64_C(1) << (sig - 1)));
}

#endif
