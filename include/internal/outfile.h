/* SPDX-License-Identifier: MIT */
/*
 * Internal: the files lowkey writes its output to (traces, snapshots, reports), in the library
 * and the CLI alike.
 *
 * An output is created with O_EXCL (mkdir for a directory) relative to its parent directory, and
 * what was at the name already is opened with O_NOFOLLOW and checked on the descriptor: nothing
 * checks a name and opens it later (another user may swap the name between the two), nothing
 * follows a symbolic link at the name, and a file or directory another user owns in a sticky
 * directory (/tmp) is not written unless that user owns the directory too, as the kernel's
 * protected_regular has it: another user's planted link or file never turns an output into a
 * write to someone else's file. Everything after is written through the descriptor.
 */
#ifndef LK_CORE_OUTFILE_H
#define LK_CORE_OUTFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum {
	LK__OUT_DIR = 1 << 0,	  /* a directory (opened O_RDONLY | O_DIRECTORY), not a file */
	LK__OUT_EMPTY = 1 << 1,	  /* an existing one is used if empty (0 bytes; no entry) */
	LK__OUT_REPLACE = 1 << 2, /* a -o FILE: an existing regular file is emptied; a device or a
					   pipe (/dev/null) is written; a link of the caller's or of root's
					   in root's directory (/dev/stdout) is followed (files only) */
	LK__OUT_SKIP = 1
		       << 3, /* a name that cannot be used as it is is -EEXIST, whatever is there */
};

/*
 * lk__out_open - create the output path (a file opened O_WRONLY, mode 0644 before the umask; or
 * a directory, 0755), or open what is there when flags allow. Returns the descriptor (O_CLOEXEC),
 * with *created (may be NULL) saying whether it was made here; or -errno with the reason in err:
 * -EEXIST (in use: not allowed by flags, not empty, not a regular file or directory), -ELOOP (a
 * symbolic link), -EACCES (another user's, in a sticky directory; or the system's refusal), and
 * any error of creating it, named as the system names it. Not async-signal-safe.
 */
int lk__out_open(const char *path, unsigned int flags, bool *created, char *err, size_t errlen);

/*
 * lk__out_dir_empty - whether the directory open at fd has no entry but "." and "..". False
 * also when it cannot be read. Leaves fd's offset at the start. Not async-signal-safe.
 */
bool lk__out_dir_empty(int fd);

/*
 * lk__out_fopen - lk__out_open(path, LK__OUT_REPLACE) as a stream (lk__out_stream): what the
 * CLI's -o FILE options write. NULL with the reason in err.
 */
FILE *lk__out_fopen(const char *path, char *err, size_t errlen);

/*
 * lk__out_stream - a stdio stream writing to fd (which it owns: fclose closes it) that only this
 * process writes through. A child forked while the stream holds buffered output gets a copy of
 * that buffer; the child's exit() flushes every stream, and with an ordinary FILE that copy would
 * land in the parent's file, in the middle of what the parent writes. Here the child's flush is
 * dropped. Returns NULL with errno set (ENOMEM); fd is then left open. Not async-signal-safe.
 */
FILE *lk__out_stream(int fd);

#endif
