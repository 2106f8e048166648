/* SPDX-License-Identifier: MIT */
/*
 * Internal: a lowkey trace of any format into any other, after recording (at lk_trace_stop for a
 * JSON or Perfetto trace, in `lowkey convert`, and when `lowkey trace` finishes the trace of a
 * process that died). The input, named in, is told apart by content (trace_file.h): a CTF
 * directory is read through the CTF reader as it goes, a JSON or Perfetto file whole; every
 * writer is fed the one walk of its events. Nothing in the input is trusted. Each returns 0 or
 * -errno with a message in err: -ENOENT and the like for an input that cannot be opened, -EINVAL
 * for one that is not a lowkey trace or is damaged (for a CTF input, what came before the damage
 * is written), -ENOMEM, -errno from writing out.
 */
#ifndef LK_FORMAT_CONVERT_H
#define LK_FORMAT_CONVERT_H

#include <stddef.h>

#include <lowkey/probe.h>

struct lk__progress_sink;
struct lk__trace_file;

/* "ctf", "json", "perfetto"; NULL for another value. */
const char *lk__trace_format_name(enum lk_trace_format format);

/* The file name extension for a format: "ctf", "json", "pftrace". */
const char *lk__trace_format_extension(enum lk_trace_format format);

/* A format by its name (any case); -1 for none. */
int lk__trace_format_parse(const char *name);

/*
 * Open the trace in for a conversion (lk__trace_file_open), its clock set so that the writers
 * keep a JSON trace's real time: a trace read whole counts its time from its first event
 * (trace_file.h), and a JSON trace's time is real time.
 */
int lk__convert_open(struct lk__trace_file *t, const char *in, char *err, size_t errlen);

/*
 * Chrome Trace Event JSON (json.c) and Perfetto protobuf (perfetto.c) of the trace t, walked once,
 * to the open file fd (emptied first, written from its start; fd stays the caller's) named path in
 * messages. A CTF directory as t is read as it goes; for a damaged one, what came before the
 * damage is written and -EINVAL returned.
 */
int lk__json_write(struct lk__trace_file *t, int fd, const char *path, char *err, size_t errlen);
int lk__perfetto_write(struct lk__trace_file *t, int fd, const char *path, char *err,
		       size_t errlen);

/*
 * The same from the trace in (lk__convert_open), written to the file path (created, or an
 * existing regular file emptied: internal/outfile.h), or to fd. A Perfetto file that the trace's
 * consumer wrote while it recorded (perfetto.h) is finished rather than converted.
 */
int lk__json_convert(const char *in, const char *path, char *err, size_t errlen);
int lk__perfetto_convert(const char *in, const char *path, char *err, size_t errlen);
int lk__json_convert_fd(const char *in, int fd, const char *path, char *err, size_t errlen);
int lk__perfetto_convert_fd(const char *in, int fd, const char *path, char *err, size_t errlen);

/*
 * The trace in, of any format, into out in format: a file for JSON and Perfetto (created, or an
 * existing regular file replaced), a new or empty directory for CTF. A CTF input into CTF is a
 * copy of its files, as read: a damaged stream is refused, one cut short is copied up to its last
 * whole packet; a JSON or Perfetto input into CTF is written from its events (ctf/ctf.h). Never
 * through a symbolic link at out, nor into another user's file in a sticky directory
 * (internal/outfile.h).
 */
int lk__trace_convert(const char *in, const char *out, enum lk_trace_format format, char *err,
		      size_t errlen);

/* lk__trace_convert, telling sink (NULL: nobody) how much of the input it has read (progress.h). */
int lk__trace_convert_progress(const char *in, const char *out, enum lk_trace_format format,
			       const struct lk__progress_sink *sink, char *err, size_t errlen);

/*
 * lk__trace_convert_progress into an output already open (lk__out_open): fd is the file (JSON,
 * Perfetto) or the empty directory (CTF), out its name for messages. fd stays the caller's.
 */
int lk__trace_convert_fd(const char *in, int fd, const char *out, enum lk_trace_format format,
			 const struct lk__progress_sink *sink, char *err, size_t errlen);

#endif
