/* SPDX-License-Identifier: MIT */
/* lowkey bench NAME --html OUT: a bench's figures as one self-contained HTML page (bench_html.c). */
#ifndef LOWKEY_CLI_BENCH_HTML_H
#define LOWKEY_CLI_BENCH_HTML_H

#include <stdbool.h>

#include "bench.h"

/*
 * Take "--html OUT" (or "--html=OUT") out of argv[1..] (none after "--"), leaving *out NULL if it
 * is not there. false: --html without its argument (said on stderr).
 */
bool bench_html_option(int *argc, char **argv, const char **out);

/*
 * Run bench b with argv (argv[0] its name) and --json, its standard output into a temporary file
 * (its status line, on a terminal, goes on as usual), then write the page to out_path: the
 * published figures of the kernel work it re-runs beside this machine's as grouped bars where the
 * bench has them, and every table of its JSON. Returns the bench's status, or CLI_EXIT_FAIL having
 * said what failed.
 */
int bench_html(const struct lk_bench *b, int argc, char **argv, const char *out_path, bool quiet);

#endif
