/* SPDX-License-Identifier: MIT */
/* lowkey locks: internal to the command. */
#ifndef LOWKEY_CLI_LOCKS_H
#define LOWKEY_CLI_LOCKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal/lock_file.h"

struct lks_site {
	uint64_t address; /* the return address; 0: none */
	uint64_t offset;  /* in its object */
	char module[64];
	char function[160];
	char file[128];
	int line;
};

#endif
