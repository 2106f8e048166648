/* SPDX-License-Identifier: MIT */
/* lowkey locks --html: the report as one self-contained HTML page (locks_html.c). */
#ifndef LOWKEY_CLI_LOCKS_HTML_H
#define LOWKEY_CLI_LOCKS_HTML_H

#include <stddef.h>

/*
 * Write the page for a report given as `lowkey locks --json` prints it (len bytes of json) to
 * out_path ("-": standard output). Returns an CLI_EXIT_* status, having said what failed.
 */
int locks_html(const char *json, size_t len, const char *out_path);

#endif
