/* SPDX-License-Identifier: MIT */
/*
 * Internal to the CTF reader: what its files share -- the trace's description (metadata.c), its
 * directory and files (reader.c), the stream cursor (cursor.c).
 */
#ifndef LK_FORMAT_CTF_READ_H
#define LK_FORMAT_CTF_READ_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "internal/ctf_reader.h"

#define INDEX_NAME ".lowkey-index"
#define METADATA_NAME "metadata"
#define METADATA_FIRST_LINE "/* CTF 1.8 */"
#define MAX_INDEX (64u << 20) /* a line per event class: 65535 classes need far less */

/* Parse an index (lowkey-trace N) or a metadata (text[len] writable) into r; 0 or -errno. */
int lk__ctf_parse_index(struct lk__trace_reader *r, char *text, size_t len, char *err,
			size_t errlen);
int lk__ctf_parse_metadata(struct lk__trace_reader *r, char *text, size_t len, char *err,
			   size_t errlen);
void lk__ctf_free_class(struct lk__event_class *c);

/*
 * Open name in the trace's directory if it is a regular file: never a FIFO or a device, never a
 * link. The descriptor, or -errno with a message in err.
 */
int lk__ctf_open_regular(const struct lk__trace_reader *r, const char *name, struct stat *st,
			 char *err, size_t errlen);

/* Read up to len bytes at off: fewer only at the end of the file. -errno on error. */
ssize_t lk__ctf_read_at(int fd, void *buf, size_t len, uint64_t off);

#endif
