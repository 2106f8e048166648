/* SPDX-License-Identifier: MIT */
/* lowkey locks: internal to the command. */
#ifndef LOWKEY_CLI_LOCKS_H
#define LOWKEY_CLI_LOCKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal/lock_file.h"

struct lks_site {
	uint64_t address;	/* the return address; 0: none */
	uint64_t offset;	/* in its object */
	char module[64];
	char function[160];
	char file[128];
	int line;
};

struct lks_symbolizer;

/* Symbolize addresses of the process described by h and its loaded objects. NULL: no memory. */
struct lks_symbolizer *lks_symbolizer_new(const struct lkl_header *h, const struct lkl_module *modules, uint32_t n);
void lks_symbolizer_free(struct lks_symbolizer *s);
void lks_symbolize(struct lks_symbolizer *s, uint64_t return_address, struct lks_site *out);

/* "function (file.c:42)", "function (libfoo.so)", "libfoo.so+0x1a2b" or "?" */
const char *lks_site_string(const struct lks_site *site, char *buf, size_t len);

#endif
