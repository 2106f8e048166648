// SPDX-License-Identifier: MIT
/*
 * lowkey bench NAME: re-run a published kernel experiment on this machine.
 */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "util/bench_html.h"
#include "builtin.h"

static const char bench_usage[] =
	"usage: lowkey bench NAME [OPTIONS] [-j|--json] [-q|--quiet]\n"
	"       lowkey bench list\n"
	"\n"
	"Re-runs the experiment of one of the kernel documents lowkey comes from, on this machine,\n"
	"beside the figures the document published and beside the tool you would otherwise use.\n"
	"Figures are medians of repeated runs; `lowkey bench NAME --help` lists a bench's options.\n"
	"Rows are printed as soon as they are measured. On a terminal, a status line on standard\n"
	"error says what is being measured and for how long (never in the output itself).\n"
	"\n"
	"  -j, --json    print the figures as JSON\n"
	"  -q, --quiet   no status line\n"
	"  --html OUT    write the figures as one self-contained HTML page to OUT instead, the\n"
	"                published figures drawn beside this machine's\n";

static void list(FILE *out)
{
	fprintf(out, "benchmarks:\n");
	lkb_list(out);
}

/* --quiet (-q) is every bench's: take it out before the bench's own options; none after "--". */
static bool take_quiet(int *argc, char **argv)
{
	bool quiet = false;
	int out = 1;

	for (int i = 1; i < *argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			while (i < *argc)
				argv[out++] = argv[i++];
			break;
		}
		if (strcmp(argv[i], "--quiet") == 0 || strcmp(argv[i], "-q") == 0)
			quiet = true;
		else
			argv[out++] = argv[i];
	}
	argv[out] = NULL;
	*argc = out;
	return quiet;
}

static int bench_run(int argc, char **argv)
{
	const struct lk_bench *b;
	const char *html;
	bool quiet;
	int rc;

	if (argc < 2) {
		fputs(bench_usage, stderr);
		list(stderr);
		return CLI_EXIT_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		fputs(bench_usage, stdout);
		list(stdout);
		return CLI_EXIT_OK;
	}
	if (strcmp(argv[1], "list") == 0) {
		list(stdout);
		return CLI_EXIT_OK;
	}
	b = lkb_find(argv[1]);
	if (!b) {
		cli_error("bench", "`lowkey bench list` shows them", "no benchmark named '%s'",
			  argv[1]);
		return CLI_EXIT_USAGE;
	}
	if (cli_wants_help(argc - 1, argv + 1)) {
		fputs(b->usage, stdout);
		return CLI_EXIT_OK;
	}
	quiet = take_quiet(&argc, argv);
	if (!bench_html_option(&argc, argv, &html))
		return CLI_EXIT_USAGE;
	if (html)
		return bench_html(b, argc - 1, argv + 1, html, quiet);
	lkb_progress_start(b->name, quiet);
	rc = b->run(argc - 1, argv + 1);
	lkb_progress_stop();
	return rc;
}

const struct cli_command cmd_bench = {
	.name = "bench",
	.summary = "re-run a published kernel experiment on this machine",
	.usage = bench_usage,
	.run = bench_run,
	.flags = CLI_OWN_HELP,
};
