/* SPDX-License-Identifier: MIT */
/* Source lines from libdwfl, for `lowkey watch` and `lowkey locks`. */
#ifndef LOWKEY_CLI_DWFL_LINES_H
#define LOWKEY_CLI_DWFL_LINES_H

#include <elfutils/libdwfl.h>
#include <stdint.h>

/*
 * The source file of the run-time address addr in mod, its line in *line; NULL when libdw knows
 * no line for it (*line then means nothing). The string is libdw's: valid while mod is.
 */
const char *lk_dwfl_source_line(Dwfl_Module *mod, uint64_t addr, int *line);

#endif
