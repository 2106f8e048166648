/* SPDX-License-Identifier: MIT */
/* JSON output shared by the library, the CLI and the benches. */
#ifndef LK_CORE_JSON_H
#define LK_CORE_JSON_H

#include <stdio.h>

/*
 * lk__json_string - write s to f as a JSON string: quoted, '"' and '\' escaped, control
 * characters as \u00XX; NULL as null. Bytes >= 0x80 pass through (UTF-8 stays UTF-8).
 */
void lk__json_string(FILE *f, const char *s);

#endif
