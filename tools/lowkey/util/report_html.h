/* SPDX-License-Identifier: MIT */
/* lowkey report --html: a trace as one self-contained HTML page (report_html.c). */
#ifndef LOWKEY_CLI_REPORT_HTML_H
#define LOWKEY_CLI_REPORT_HTML_H

/*
 * Read the trace at trace_path (any format, lowkey/trace_reader.h; once, its events gone through
 * twice: figures, then the timeline) and write the page to
 * out_path ("-": standard output). Returns an CLI_EXIT_* status, having said what failed.
 */
int report_html(const char *trace_path, const char *out_path);

#endif
