/* SPDX-License-Identifier: MIT */
/*
 * Internal: the files lowkey writes its output to (traces, snapshots, reports), in the library
 * and the CLI alike.
 */
#ifndef LK_CORE_OUTFILE_H
#define LK_CORE_OUTFILE_H

#include <stdio.h>

/*
 * lk__out_stream - a stdio stream writing to fd (which it owns: fclose closes it) that only this
 * process writes through. A child forked while the stream holds buffered output gets a copy of
 * that buffer; the child's exit() flushes every stream, and with an ordinary FILE that copy would
 * land in the parent's file, in the middle of what the parent writes. Here the child's flush is
 * dropped. Returns NULL with errno set (ENOMEM); fd is then left open. Not async-signal-safe.
 */
FILE *lk__out_stream(int fd);

#endif
