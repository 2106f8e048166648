// SPDX-License-Identifier: MIT
/*
 * lowkey convert: a lowkey trace of any format (CTF, Chrome JSON, Perfetto protobuf) into any of
 * them, with the converters the library runs at lk_trace_stop (include/internal/trace_convert.h).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "builtin.h"
#include "internal/trace_convert.h"
#include "internal/trace_progress.h"
#include "util/status.h"

static const char convert_usage[] =
	"usage: lowkey convert IN -o OUT [--format ctf|json|perfetto] [--quiet]\n"
	"\n"
	"Writes the lowkey trace IN in another format (or the same one). IN is any trace that\n"
	"`lowkey trace` or lk_trace_start wrote, told apart by its content: a CTF directory, a\n"
	"Perfetto .pftrace or a Chrome JSON file. A CTF stream cut short (a program killed while it\n"
	"wrote) is converted up to its last whole packet; a damaged one is an error after what came\n"
	"before the damage was written. A damaged JSON or Perfetto file is an error.\n"
	"\n"
	"Options:\n"
	"  -o, --output OUT     where to write: a file for json and perfetto (replaced if it is one),\n"
	"                       a new or empty directory for ctf\n"
	"  -f, --format FMT     perfetto (Perfetto's protobuf, .pftrace), json (Chrome Trace Event\n"
	"                       JSON) or ctf (a copy of a CTF trace; written from the events of\n"
	"                       the others); default: from OUT's extension (.pftrace,\n"
	"                       .perfetto-trace, .json, .ctf); any other name needs --format\n"
	"  -q, --quiet          no status line while converting (shown on a terminal only)\n"
	"  -h, --help           this text\n"
	"\n"
	"Examples:\n"
	"  lowkey convert lowkey.ctf -o run.pftrace\n"
	"  lowkey convert lowkey.ctf -o run.json --format json\n"
	"  lowkey convert run.pftrace -o run.ctf\n"
	"\n"
	"Then open the file in https://ui.perfetto.dev (see docs/trace.md, \"Formats\").\n";

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n > k && strcmp(s + n - k, suffix) == 0;
}

/* The format OUT's name asks for, or -1 where its extension names none. */
static int format_of(const char *out)
{
	if (ends_with(out, ".json"))
		return LK_TRACE_JSON;
	if (ends_with(out, ".ctf") || ends_with(out, ".ctf/"))
		return LK_TRACE_CTF;
	if (ends_with(out, ".pftrace") || ends_with(out, ".perfetto-trace"))
		return LK_TRACE_PERFETTO;
	return -1;
}

static int convert_main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "format", required_argument, NULL, 'f' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *in, *out = NULL;
	char err[1024];
	int c, rc, format = -1;
	bool quiet = false;

	optind = 1;
	while ((c = getopt_long(argc, argv, "o:f:qh", options, NULL)) != -1) {
		switch (c) {
		case 'o':
			out = optarg;
			break;
		case 'f':
			format = lk__trace_format_parse(optarg);
			if (format < 0) {
				cli_error("convert", "ctf, json or perfetto", "unknown format '%s'",
					  optarg);
				return CLI_EXIT_USAGE;
			}
			break;
		case 'q':
			quiet = true;
			break;
		case 'h':
			fputs(convert_usage, stdout);
			return CLI_EXIT_OK;
		default:
			fputs(convert_usage, stderr);
			return CLI_EXIT_USAGE;
		}
	}
	if (optind != argc - 1 || !out) {
		cli_error("convert", "lowkey convert IN -o OUT [--format ctf|json|perfetto]",
			  optind >= argc ? "no trace to convert" :
			  !out		 ? "no output (-o OUT)" :
					   "one trace at a time");
		return CLI_EXIT_USAGE;
	}
	in = argv[optind];
	if (format < 0)
		format = format_of(out);
	if (format < 0) {
		cli_error("convert",
			  "name it .pftrace, .json or .ctf, or give --format ctf|json|perfetto",
			  "cannot tell which format to write from the name %s", out);
		return CLI_EXIT_USAGE;
	}
	/* out is created, or what is there replaced, by the conversion (internal/outfile.h) */
	status_begin("convert", !quiet);
	rc = lk__trace_convert_progress(
		in, out, (enum lk_trace_format)format,
		&(struct lk__progress_sink){
			status_conversion_sink,
			(void *)lk__trace_format_name((enum lk_trace_format)format) },
		err, sizeof(err));
	status_clear();
	if (rc) {
		cli_error("convert", NULL, "%s", err);
		return CLI_EXIT_FAIL;
	}
	return CLI_EXIT_OK;
}

const struct cli_command cmd_convert = {
	.name = "convert",
	.summary = "write a lowkey trace of any format as Perfetto protobuf, Chrome JSON or CTF",
	.usage = convert_usage,
	.run = convert_main,
};
