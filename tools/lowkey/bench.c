// SPDX-License-Identifier: MIT
/*
 * lowkey bench NAME: re-run a seed document's experiment on this machine.
 */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "cli.h"

static const char bench_usage[] =
	"usage: lowkey bench NAME [OPTIONS] [--json]\n"
	"       lowkey bench list\n"
	"\n"
	"Re-runs the experiment of one of the kernel documents lowkey comes from, on this machine,\n"
	"beside the figures the document published and beside the tool you would otherwise use.\n"
	"Figures are medians of repeated runs; `lowkey bench NAME --help` lists a bench's options.\n";

static void list(FILE *out)
{
	fprintf(out, "benchmarks:\n");
	lkb_list(out);
}

static int bench_run(int argc, char **argv)
{
	const struct lk_bench *b;

	if (argc < 2) {
		fputs(bench_usage, stderr);
		list(stderr);
		return LK_EXIT_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		fputs(bench_usage, stdout);
		list(stdout);
		return LK_EXIT_OK;
	}
	if (strcmp(argv[1], "list") == 0) {
		list(stdout);
		return LK_EXIT_OK;
	}
	b = lkb_find(argv[1]);
	if (!b) {
		lk_cli_error("bench", "`lowkey bench list` shows them", "no benchmark named '%s'", argv[1]);
		return LK_EXIT_USAGE;
	}
	if (lk_cli_wants_help(argc - 1, argv + 1)) {
		fputs(b->usage, stdout);
		return LK_EXIT_OK;
	}
	return b->run(argc - 1, argv + 1);
}

LK_CLI_COMMAND(bench_command, "bench", "re-run a seed document's experiment on this machine",
	       bench_usage, bench_run, LK_CLI_OWN_HELP);
