/* SPDX-License-Identifier: MIT */
/*
 * Internal: the CTF encoder both CTF writers share -- the live one (ctf.c, fed from the threads'
 * rings while a trace records) and the one fed from events (write.c, a trace of another format
 * written as CTF): the metadata's TSDL and the packets, in the layout reader.c reads.
 */
#ifndef LK_FORMAT_CTF_CTF_H
#define LK_FORMAT_CTF_CTF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <lowkey/probe.h>

/* What the metadata says of the trace as a whole (its env, clock and stream classes). */
struct lk__ctf_meta {
	const unsigned char *uuid; /* 16 bytes, also in every packet */
	uint64_t tsc_hz, tsc0, monotonic0_ns, realtime0_ns;
	uint64_t sched_lost;
	uint64_t dropped; /* overwrite only: what the threads dropped */
	bool cputime, sched, overwrite;
	bool vtid; /* every event of stream 0 carries its thread's id (format 3); else format 4 */
	int pid;
	const char *procname, *hostname;
};

/* An event class; names are its fields' names, already made TSDL identifiers (lk__ctf_field_names). */
struct lk__ctf_class {
	uint32_t id;
	unsigned int kind, nargs;
	uint32_t arg_types;
	const char *provider, *event;
	const char *where; /* model.emf.uri, "file:line"; "" or NULL: none */
	char names[LK_PROBE_MAX_ARGS][64];
};

/*
 * The metadata up to the event classes (types, trace, env, clock, streams, lowkey's own events),
 * then one event class, to f. Nothing is checked: a write error shows in ferror(f).
 */
void lk__ctf_put_prologue(FILE *f, const struct lk__ctf_meta *m);
void lk__ctf_put_class(FILE *f, const struct lk__ctf_class *c);

/*
 * c->names from raw names (name(i, arg) gives argument i's, or NULL): the name when it is an
 * identifier, "value" for a counter, argI otherwise or when a name repeats (CTF readers reject
 * duplicate members). The reader derives the same names.
 */
void lk__ctf_field_names(struct lk__ctf_class *c,
			 void (*name)(unsigned int i, const void *arg, const char **p, size_t *n),
			 const void *arg);

/*
 * One packet of stream stream_id of thread tid at the end of fd: its prefix (sequence number seq,
 * events_discarded cumulative) and len bytes of records; with lead, an empty packet counting no
 * loss before it (see ctf.c). Written whole or not at all (what a failed write left is cut away):
 * 0 or -errno (-ENOSPC for a short write). Any thread; one writer per fd.
 */
int lk__ctf_put_packet(int fd, const unsigned char uuid[16], unsigned int stream_id, pid_t tid,
		       uint64_t ts_begin, uint64_t ts_end, uint64_t seq, uint64_t discarded,
		       bool lead, const void *records, size_t len);

/* A new version 4 UUID for a trace. */
void lk__ctf_uuid(unsigned char uuid[16]);

#define LK__CTF_MAX_PACKET \
	(256u << 10) /* bytes of records a packet holds, unless one record is larger */

struct lk__trace_file;

/*
 * The trace t (of any format; write.c) as a CTF trace in the open, empty directory dir_fd, named
 * out in messages: its metadata from t's classes and clock, a stream file per thread (and per
 * thread's context switches) from its events. Walks t once. 0, or -errno with a message in err:
 * -EINVAL for an event name CTF cannot hold or a damaged t (what came before is written),
 * -ENOMEM, -errno from writing out.
 */
int lk__ctf_write_trace(struct lk__trace_file *t, int dir_fd, const char *out, char *err,
			size_t errlen);

#endif
