/* SPDX-License-Identifier: MIT */
/*
 * Internal: a lowkey CTF trace into the other formats, after recording (at lk_trace_stop for a
 * JSON or Perfetto trace, in `lowkey convert`, and when `lowkey trace` finishes the trace of a
 * process that died). Each reads the CTF through the reader (reader.h), which trusts nothing in
 * it, and returns 0 or -errno with a message in err: -EINVAL for a damaged trace (what came
 * before the damage is written), -errno from writing out.
 */
#ifndef LK_FORMAT_CONVERT_H
#define LK_FORMAT_CONVERT_H

#include <stddef.h>

#include <lowkey/probe.h>

struct lk__progress_sink;

/* "ctf", "json", "perfetto"; NULL for another value. */
const char *lk__trace_format_name(enum lk_trace_format format);

/* The file name extension for a format: "ctf", "json", "pftrace". */
const char *lk__trace_format_extension(enum lk_trace_format format);

/* A format by its name (any case); -1 for none. */
int lk__trace_format_parse(const char *name);

/*
 * Chrome Trace Event JSON (json.c) and Perfetto protobuf (perfetto.c), written to the file path
 * (created, or an existing regular file emptied: internal/outfile.h), or to the open file fd (emptied
 * first, written from its start; fd stays the caller's) named path in messages.
 */
int lk__json_convert(const char *ctf_dir, const char *path, char *err, size_t errlen);
int lk__perfetto_convert(const char *ctf_dir, const char *path, char *err, size_t errlen);
int lk__json_convert_fd(const char *ctf_dir, int fd, const char *path, char *err, size_t errlen);
int lk__perfetto_convert_fd(const char *ctf_dir, int fd, const char *path, char *err, size_t errlen);

/*
 * ctf_dir into out in format: a file for JSON and Perfetto (created, or an existing regular file
 * replaced), a new or empty directory for CTF (the trace's files copied, as read: a damaged stream
 * is refused, one cut short is copied up to its last whole packet). Never through a symbolic link
 * at out, nor into another user's file in a sticky directory (internal/outfile.h).
 */
int lk__trace_convert(const char *ctf_dir, const char *out, enum lk_trace_format format, char *err,
		      size_t errlen);

/* lk__trace_convert, telling sink (NULL: nobody) how much of the CTF it has read (progress.h). */
int lk__trace_convert_progress(const char *ctf_dir, const char *out, enum lk_trace_format format,
			       const struct lk__progress_sink *sink, char *err, size_t errlen);

/*
 * lk__trace_convert_progress into an output already open (lk__out_open): fd is the file (JSON,
 * Perfetto) or the empty directory (CTF), out its name for messages. fd stays the caller's.
 */
int lk__trace_convert_fd(const char *ctf_dir, int fd, const char *out, enum lk_trace_format format,
			 const struct lk__progress_sink *sink, char *err, size_t errlen);

#endif
