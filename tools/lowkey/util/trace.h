/* SPDX-License-Identifier: MIT */
/*
 * lowkey trace: what its two modes (trace_run.c, trace_attach.c) share with builtin-trace.c, the
 * output (trace_output.c) and the recovery of an unfinished trace (trace_recover.c).
 */
#ifndef LOWKEY_CLI_TRACE_H
#define LOWKEY_CLI_TRACE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define TRACE_MAX_GLOBS 64

struct trace_opts {
	const char *globs[TRACE_MAX_GLOBS]; /* as given; a leading '-' disables */
	int nglobs;
	char *output; /* absolute */
	int format;   /* enum lk_trace_format */
	bool cputime;
	bool overwrite;		     /* --overwrite: a flight recorder */
	const char *snapshot_signal; /* --snapshot-signal, as given; NULL: none */
	bool sched;		     /* --sched: context switches */
	uint64_t buffer;	     /* 0: the library's default */
	pid_t pid;		     /* --pid */
	double duration;	     /* --pid: seconds; 0: until Ctrl-C */
	char **argv;		     /* the command */
	bool created_output;	     /* we made the (empty) output: remove it if unused */
	bool json;		     /* the summary as JSON */
	bool quiet;		     /* --quiet: no status line */
	uid_t peer_uid;		     /* root tracing another user's process: that user, */
	gid_t peer_gid;		     /* whose rights recovery uses (-1: our own) */
};

struct trace_totals {
	uint64_t events, lost, bytes;
	unsigned int threads;
};

/* ---- trace_output.c ---- */

/*
 * Rotate an existing output to OUT.old (only lowkey traces and regular files are moved), then
 * create an empty one (a directory for CTF, a file for JSON) so that an unwritable path fails now.
 * An existing empty directory is kept for a CTF trace. uid/gid: give the new output to them (-1:
 * keep). fd_out (may be NULL): the output, left open (a directory for CTF, else the file).
 * 0, or 1 after printing the error.
 */
int trace_prepare_output(struct trace_opts *o, uid_t uid, gid_t gid, int *fd_out);

/* Remove the output we created if nothing was written to it. */
void trace_discard_output(const struct trace_opts *o);

/* Remove a lowkey trace directory: only the files a trace has, then the directory if empty. */
int trace_remove_dir(const char *dir);

/* The one-line summary, on stderr. */
void trace_print_summary(const struct trace_opts *o, const struct trace_totals *t);

/* ---- trace_recover.c ---- */

/*
 * A trace whose process ended without finishing it: count what reached the disk, and for JSON,
 * convert the CTF it left in ctf_dir. Everything it reads, writes and removes there is the traced
 * process's to change: as root tracing another user's process, it works in a child with that
 * user's rights (peer_uid), and for JSON it only takes a ctf_dir named OUTPUT.ctf-XXXXXX.
 * Returns 0 or -errno (err says why).
 */
int trace_recover(const struct trace_opts *o, const char *ctf_dir, struct trace_totals *t,
		  char *err, size_t errlen);

/* Sites of the trace at dir that glob selects (for a trace whose process could not say). */
int trace_count_matches(const char *dir, const char *glob);

/* ---- the two modes ---- */

int trace_run_command(struct trace_opts *o); /* trace_run.c */
int trace_attach(struct trace_opts *o);	     /* trace_attach.c */

#endif
