/* SPDX-License-Identifier: MIT */
/*
 * Internal: the Perfetto writer (perfetto.c) for a trace written in pieces. lk__perfetto_convert
 * (convert.h) reads a whole CTF trace at once; while a trace records, perfetto_live.c feeds the
 * writer the records the consumer drains from each thread's ring and the packets of the context
 * switches' CTF streams, so that the .pftrace is nearly complete when the trace stops.
 *
 * Each piece of a stream is a batch: it begins by clearing its sequence's incremental state
 * (SEQ_INCREMENTAL_STATE_CLEARED, its defaults and a clock snapshot again), so the writer keeps
 * no interning state between batches, only what a stream needs to go on: its sequence id, the
 * incremental clock's value, whether its tracks were described, a switch out not yet matched,
 * and the events it lost. Not thread-safe: one thread writes a given lk__pft.
 */
#ifndef LK_FORMAT_PERFETTO_H
#define LK_FORMAT_PERFETTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "internal/ctf_reader.h"

struct lk__pft;

/* A switch out not yet matched by its switch in: the off-CPU slice it begins. */
struct lk__pft_switched_out {
	bool pending;
	bool preempted;
	uint64_t tsc, cpu;
};

/* What a stream keeps from one batch to the next. Zero it before its first batch. */
struct lk__pft_stream {
	int tid;
	bool sched;   /* the thread's context switches (stream-TID-sched) */
	bool started; /* its sequence has an id and a first packet */
	bool thread_described;
	uint32_t seq;	  /* trusted_packet_sequence_id */
	uint64_t last_ns; /* the incremental clock's value */
	uint64_t lost;	  /* events lost, as its packets count them (cumulative) */
	struct lk__pft_switched_out out;
};

/*
 * A writer of the open file fd (emptied if it is not empty; the writer writes through its own
 * duplicate of fd, the caller keeps fd) named path in messages, for the trace r describes; the
 * process's track is written at once. r must stay open until lk__pft_set_reader replaces it or
 * lk__pft_close. 0 or -errno with a message in err.
 */
int lk__pft_open(struct lk__pft **out, int fd, const char *path, struct lk__trace_reader *r,
		 char *err, size_t errlen);

/* A reader of the same trace that knows more event classes (its metadata rewritten since). */
int lk__pft_set_reader(struct lk__pft *p, struct lk__trace_reader *r);

/* The TSC's rate to convert timestamps with from now on (the rate measured so far). */
void lk__pft_set_rate(struct lk__pft *p, uint64_t tsc_hz);

/*
 * A batch of st: the whole packets at the start of data[0..len) (a stream file's bytes from a
 * packet's start). *consumed: the bytes of the packets written (a packet cut short is left for
 * the next batch). Returns 0, -EINVAL for bytes that are not a stream of this trace (or have an
 * event class the reader does not know), -ENOMEM, or -errno from writing.
 */
int lk__pft_batch(struct lk__pft *p, struct lk__pft_stream *st, const uint8_t *data, size_t len,
		  size_t *consumed);

/* After st's last batch: its switch out left open and its lost events, if any. */
int lk__pft_stream_done(struct lk__pft *p, struct lk__pft_stream *st);

/*
 * A batch of st from its thread's ring (the consumer writing Perfetto directly): the records in
 * [start, end), their timestamps extended from now, a TSC read after they were committed. Stops at
 * a pad or at the end of what was committed. *next: where it stopped; *events: records written.
 * Returns 0, -ENOENT for a record of a class the reader does not know (*next is at it: read the
 * metadata again and go on from there), -ENOMEM, or -errno from writing.
 */
int lk__pft_records(struct lk__pft *p, struct lk__pft_stream *st, const uint8_t *start,
		    const uint8_t *end, uint64_t now, const uint8_t **next, uint64_t *events);

/* lk__pft_records writes every record the general way, without templates (for tests: same bytes). */
void lk__pft_slow_only(struct lk__pft *p, bool slow);

/* Records lk__pft_records wrote from templates so far. */
uint64_t lk__pft_fast_records(const struct lk__pft *p);

/* Write out what is buffered: whole packets. 0, -ENOMEM (something could not be encoded) or -errno. */
int lk__pft_flush(struct lk__pft *p);

/* Write out what is buffered, close the file and free p; 0 or -errno with a message in err. */
int lk__pft_close(struct lk__pft *p, char *err, size_t errlen);

/* Close the file and free p without writing what is buffered (a forked child's copy). */
void lk__pft_discard(struct lk__pft *p);

/* The bytes written so far (for lk_trace_stats and messages). */
uint64_t lk__pft_bytes(const struct lk__pft *p);

/*
 * perfetto_live.c: a trace recorded as Perfetto is written while it records, by the consumer,
 * from the threads' rings. lk_trace_start calls lk__perfetto_live_start once the CTF directory
 * (t->ctf_dir: its metadata, and with --sched the context switches' streams) is set up and before
 * the consumer starts. If it fails (no memory), the consumer writes CTF and the trace is converted
 * at the stop. 0 or -errno.
 */
struct lk__trace;
struct lk__probe_buffer;
int lk__perfetto_live_start(struct lk__trace *t);

/* Whether the consumer writes this trace's records as Perfetto (set before it starts). */
bool lk__perfetto_direct(void);

/*
 * The consumer's side. Records of b in [start, end): as lk__pft_records, each on b's thread's
 * packet sequence; a class not known yet is looked up in the metadata again (-EINVAL if it is not
 * there either). 0 or -errno: the trace's error.
 */
int lk__perfetto_direct_records(struct lk__probe_buffer *b, const uint8_t *start,
				const uint8_t *end, uint64_t now, const uint8_t **next,
				uint64_t *events);

/* b's thread's part ends (it exited, or the trace stops): its lost events and open off-CPU slice. */
int lk__perfetto_direct_retire(struct lk__probe_buffer *b, uint64_t lost);

/* After each drain: the context switches' new packets, then the buffer written out (whole packets). */
int lk__perfetto_direct_drained(void);

/*
 * Called by lk__perfetto_convert: when the consumer writes path (from ctf_dir's trace), what is
 * left (the context switches' last packets, each thread's end) is written and the file closed:
 * 0 or -errno with a message in err. 1 when it does not (none, another trace): convert it whole.
 */
int lk__perfetto_live_finish(const char *ctf_dir, const char *path, char *err, size_t errlen);

/* The trace failed: close the file as it is (whole packets), nothing more written; nothing when none. */
void lk__perfetto_live_cancel(void);

/* In a forked child (trace.c's atfork handler): forget the parent's writer, touching nothing of it. */
void lk__perfetto_live_forget_in_child(void);

#endif
