/* SPDX-License-Identifier: MIT */
/* JSON output shared by the library, the CLI and the benches. */
#ifndef LK_CORE_JSON_H
#define LK_CORE_JSON_H

#include <stdio.h>

/*
 * lk__json_string - write s to f as a JSON string: quoted, '"' and '\' escaped, control
 * characters (C0, DEL and C1: a terminal's, should the JSON reach one) as \u00XX; NULL as null.
 * Valid UTF-8 passes through; each byte that starts no valid UTF-8 sequence is written as \ufffd
 * (the replacement character), so the output is always valid JSON text (RFC 8259 requires UTF-8)
 * whatever bytes s holds.
 */
void lk__json_string(FILE *f, const char *s);

#endif
