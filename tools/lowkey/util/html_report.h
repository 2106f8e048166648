/* SPDX-License-Identifier: MIT */
/*
 * A command's page made from its own JSON report (lowkey locks --html, lowkey races --html): the
 * report read back with the project's JSON reader, and the page written with html.h's builder.
 */
#ifndef LOWKEY_CLI_HTML_REPORT_H
#define LOWKEY_CLI_HTML_REPORT_H

#include <stddef.h>
#include <stdio.h>

struct lk__jr_value;

/*
 * html_report_page - parse len bytes of json, the report of command cmd, and write its page to
 * out_path ("-": standard output) with page(), ended by lkh_page_end(). Returns CLI_EXIT_OK, or
 * CLI_EXIT_FAIL after saying on stderr why: the report does not parse, out_path cannot be
 * created (lowkey's output-file rules), or writing it failed.
 */
int html_report_page(const char *cmd, const char *json, size_t len, const char *out_path,
		     void (*page)(FILE *f, const struct lk__jr_value *root));

#endif
