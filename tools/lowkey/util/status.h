/* SPDX-License-Identifier: MIT */
/*
 * A status line for long work in a command: "lowkey CMD: what (how far)" on standard error,
 * redrawn in place, only when standard error is a terminal, and never when the command was asked
 * for --quiet or prints JSON there. Erased before the command prints anything else.
 */
#ifndef LOWKEY_CLI_STATUS_H
#define LOWKEY_CLI_STATUS_H

#include <stdbool.h>
#include <stdint.h>

/* Show status lines for cmd from now on, if wanted is true and standard error is a terminal. */
void status_begin(const char *cmd, bool wanted);

/* Draw the line (replacing the one shown); nothing when status lines are off. */
void status_show(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Erase the line, if one is shown. */
void status_clear(void);

/* "WHAT: 45% (120.0 of 266.7 MiB)": done of total bytes; done >= total is the end: the line is erased. */
void status_progress(const char *what, uint64_t done, uint64_t total);

/* The same as a progress sink's report (internal/trace_progress.h); arg: what. */
void status_progress_sink(uint64_t done, uint64_t total, void *what);

/*
 * "converting the trace to JSON: 45% (120.0 of 266.7 MiB)": a conversion's progress, done of total
 * bytes; format as lk__trace_format_name() names it. done == total is the end: the line is erased.
 */
void status_conversion(const char *format, uint64_t done, uint64_t total);

/* The same as a progress sink's report (internal/trace_progress.h); arg: the format's name. */
void status_conversion_sink(uint64_t done, uint64_t total, void *arg);

/*
 * A trace at path is read (walks times, from here to status_reading_end): "reading PATH", then
 * for a CTF directory how much of its streams the reader has walked; for a JSON or Perfetto file,
 * how much of it is read into memory, then how much is parsed (once, whatever walks is).
 */
void status_reading_begin(const char *path, unsigned int walks);
void status_reading_end(void);

#endif
