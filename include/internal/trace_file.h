/* SPDX-License-Identifier: MIT */
/*
 * Internal: a trace in any of the formats lowkey writes, told apart by content: a CTF
 * directory is read by the library's reader (ctf/reader.h) as it goes; a Chrome JSON file
 * (chrome_json/read.c) or a Perfetto protobuf file (perfetto/read.c) is read whole into memory first
 * and then walked exactly as the CTF reader walks its streams -- the same lk__trace_reader (event
 * classes, process), the same callbacks in the same order (a thread's probes, then its context
 * switches; threads in the order of their stream files' names) -- so the report, its JSON and its
 * HTML page are made by one path whatever the format.
 *
 * For JSON and Perfetto, the trace's "TSC" is nanoseconds (tsc_hz 10^9) counted from just before
 * its first event, on the file's own clock (real time for JSON, lowkey's monotonic one for
 * Perfetto): durations are the file's, to its resolution (1 ns in both).
 *
 * A file's reading and its parse each tell the bytes they have done to the reader's progress hook
 * (lk__reader_packet_hook), as the CTF reader tells its packets: `lowkey report` shows them.
 *
 * Nothing in a file is trusted: a file that is not a whole trace lowkey wrote -- cut short,
 * damaged at any byte, another program's -- is an error with a message, never a crash; what is
 * allocated is bounded by the file's size (its events, their names) and by the class limit of
 * CTF (65,535 event classes).
 */
#ifndef LK_FORMAT_TRACE_FILE_H
#define LK_FORMAT_TRACE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <lowkey/probe.h>

#include "internal/ctf_reader.h"

/*
 * LK__TF_CTF: a CTF trace lowkey's writer wrote, read by the library's reader as it goes;
 * LK__TF_FOREIGN_CTF: any other CTF trace (lowkey's rewritten by babeltrace2, LTTng's), read
 * whole through libbabeltrace2 (ctf/foreign.c), its times kept as the trace gives them.
 */
enum lk__trace_format { LK__TF_CTF, LK__TF_JSON, LK__TF_PERFETTO, LK__TF_FOREIGN_CTF };

/* An event read into memory: its payload (the CTF layout: 8 bytes a number, strings NUL-ended) in lk__trace_file.bytes. */
struct lk__tf_event {
	uint64_t ns, cpu_ns;
	uint64_t at; /* its payload's offset in lk__trace_file.bytes */
	uint32_t cls;
	uint32_t len;
};

struct lk__tf_stream {
	struct lk__tf_event *v;
	size_t n, cap;
};

struct lk__tf_thread {
	int tid;
	uint64_t lost;
	struct lk__tf_stream probes, sched; /* as CTF's stream-TID and stream-TID-sched */
	uint32_t *open;	   /* Perfetto: the classes of the slices open on the thread ... */
	size_t depth, cap; /* ... which its slice ends, nameless, close */
};

/* uint64 keys to uint32 values (open addressing); bounded by what is put in it. */
struct lk__tf_map {
	uint64_t *keys;
	uint32_t *vals; /* UINT32_MAX: an empty slot */
	size_t mask, used;
};

/*
 * An event's arguments as a JSON or Perfetto file gives them: names, types (LK_PROBE_*, 4 bits
 * each) and the payload in the CTF layout, gathered before its class is known. Zero it first;
 * reset it for each event.
 */
struct lk__tf_args {
	unsigned int n;
	uint32_t types;
	char names[LK_PROBE_MAX_ARGS][64];
	uint8_t *payload;
	size_t len, cap;
};

struct lk__trace_file {
	struct lk__trace_reader r;
	enum lk__trace_format format;
	const char *format_name; /* "CTF", "Chrome JSON", "Perfetto" */
	/* JSON and Perfetto: what was read */
	struct lk__tf_thread *threads;
	size_t nthreads, capthreads;
	struct lk__tf_map thread_of; /* tid to index in threads */
	uint32_t *class_slots; /* provider:event and kind to class id (open addressing, 0: empty) */
	size_t class_mask;
	uint32_t next_class; /* classes are numbered from 16 without gaps */
	uint8_t *bytes;	     /* the events' payloads */
	size_t nbytes, capbytes;
	size_t parsed;	  /* bytes of the file parsed, as last told to the progress hook */
	uint64_t base_ns; /* the earliest time in the file */
	bool have_base;
	struct lk__tf_args args; /* the event being read's arguments */
	/* what the file says about itself that a CTF trace says otherwise */
	uint64_t nonfinite_counters; /* JSON: counter values left out, NaN or infinite */
	uint64_t context_names;	     /* foreign CTF: name records made of a procname context */
};

/*
 * Open path: a CTF trace directory, or a JSON or Perfetto file lowkey wrote (read whole). 0, or
 * -errno with a message in err: -ENOENT and the like for a path that cannot be opened, -EINVAL for
 * what is not a lowkey trace or is damaged (the message names the format and the byte), -ENOMEM.
 */
int lk__trace_file_open(struct lk__trace_file *t, const char *path, char *err, size_t errlen);

/* The same for a file's bytes (for the fuzzer); name is for messages. Nothing is kept of data. */
int lk__trace_file_parse(struct lk__trace_file *t, const uint8_t *data, size_t len,
			 const char *name, char *err, size_t errlen);

/* Visit the trace's streams and events, as lk__reader_walk does; may be called again. */
int lk__trace_file_walk(struct lk__trace_file *t, const struct lk__reader_ops *ops, void *arg,
			char *err, size_t errlen);

/*
 * One stream of a trace of any format read an event at a time: a CTF stream file through its
 * cursor (lk__ctf_cursor: one packet in memory), a JSON or Perfetto thread's events from memory.
 * An event's payload is valid until its cursor moves on.
 */
struct lk__tf_cursor {
	const struct lk__trace_file *t;
	const struct lk__tf_stream *v; /* JSON, Perfetto: the thread's events; NULL: CTF */
	size_t pos;
	struct lk__stream_info s; /* JSON, Perfetto (CTF: ctf.s) */
	struct lk__ctf_cursor ctf;
};

/*
 * A cursor on each of the trace's streams, in the order lk__trace_file_walk visits them, into
 * *v (*n of them). 0, or -errno with a message in err. A CTF trace of many streams has its
 * cursors open each stream's file only while they read a packet (lk__ctf_cursor.transient).
 */
int lk__tf_cursors_open(struct lk__trace_file *t, struct lk__tf_cursor **v, size_t *n, char *err,
			size_t errlen);
void lk__tf_cursors_close(struct lk__tf_cursor *v, size_t n);

/* As lk__ctf_cursor_next (JSON and Perfetto streams end without errors). */
int lk__tf_cursor_next(struct lk__tf_cursor *c, struct lk__event *e);
/* As lk__ctf_cursor_count: events counted onto *events up to the next thread name (into *e). */
int lk__tf_cursor_count(struct lk__tf_cursor *c, uint64_t *events, struct lk__event *e);
void lk__tf_cursor_rewind(struct lk__tf_cursor *c);
/* The stream's tid, stream_id, file and counters as far as the cursor has read. */
const struct lk__stream_info *lk__tf_cursor_info(const struct lk__tf_cursor *c);
/* The message for rc, an error lk__tf_cursor_next returned; returns rc. */
int lk__tf_cursor_error(const struct lk__tf_cursor *c, int rc, char *err, size_t errlen);

/*
 * Put each JSON or Perfetto thread's events in time order (the file's order where times tie),
 * as a CTF stream is recorded; a no-op for CTF. Cursors on t must be rewound after.
 */
void lk__tf_sort_streams(struct lk__trace_file *t);

void lk__trace_file_close(struct lk__trace_file *t);

/* ---- for the readers of the formats (chrome_json/read.c, perfetto/read.c) ---- */

int lk__chrome_json_read(struct lk__trace_file *t, const char *text, size_t len, const char *name,
			 char *err, size_t errlen);
int lk__perfetto_read(struct lk__trace_file *t, const uint8_t *data, size_t len, const char *name,
		      char *err, size_t errlen);
/*
 * The CTF trace in directory path (or below it) through libbabeltrace2, into t (lk__tf_init'ed).
 * 0, or -errno with a message in err: -ENOTSUP without libbabeltrace2 (what to install), -EINVAL
 * for what babeltrace2 cannot read (its message), -E2BIG, -ENOMEM.
 */
int lk__ctf_foreign_read(struct lk__trace_file *t, const char *path, char *err, size_t errlen);

/*
 * The parse has reached byte at of the file: what is new since the last step (256 KiB) is told
 * to lk__reader_packet_hook (reader.h), where a progress is shown (progress.h); a load when none.
 */
void lk__tf_parsed(struct lk__trace_file *t, size_t at);

/* Set up t->r for a trace read into memory: the built-in classes, the clock in nanoseconds. */
int lk__tf_init(struct lk__trace_file *t, enum lk__trace_format format);

/* Add an argument: raw for a number, str (slen bytes) for LK_PROBE_STR. 0, -ENOMEM, or -E2BIG past 8. */
int lk__tf_arg(struct lk__tf_args *a, const char *name, size_t nlen, unsigned int type,
	       uint64_t raw, const char *str, size_t slen);
void lk__tf_args_reset(struct lk__tf_args *a);
void lk__tf_args_free(struct lk__tf_args *a);

/*
 * The class of provider:event of this kind (LK_PROBE_*) with these arguments (NULL: none; a
 * counter's value), added the first time: one class per signature, as a CTF trace has one per
 * site. 0, -ENOMEM, or -E2BIG past the classes a trace can hold.
 */
int lk__tf_class(struct lk__trace_file *t, const char *provider, size_t plen, const char *event,
		 size_t elen, unsigned int kind, uint32_t *id);
int lk__tf_class_args(struct lk__trace_file *t, const char *provider, size_t plen,
		      const char *event, size_t elen, unsigned int kind,
		      const struct lk__tf_args *a, uint32_t *id);

/* The thread tid, added the first time; NULL when out of memory. */
struct lk__tf_thread *lk__tf_thread(struct lk__trace_file *t, int tid);

/* An event of class cls on th at ns; its payload len bytes (a copy is kept). 0 or -ENOMEM. */
int lk__tf_event(struct lk__trace_file *t, struct lk__tf_thread *th, uint32_t cls, uint64_t ns,
		 uint64_t cpu_ns, const void *payload, size_t len);

int lk__tf_thread_name(struct lk__trace_file *t, struct lk__tf_thread *th, uint64_t ns,
		       const char *name, size_t len);
int lk__tf_counter(struct lk__trace_file *t, struct lk__tf_thread *th, uint32_t cls, uint64_t ns,
		   double value);
/* A context switch record as CTF has it (LK__EVENT_SCHED_OUT or _IN, its payload): 0 or -ENOMEM. */
int lk__tf_switch(struct lk__trace_file *t, struct lk__tf_thread *th, uint32_t cls, uint64_t ns,
		  const void *payload, size_t len);

/*
 * The thread off its CPU from out_ns to in_ns: a switch out (on cpu) and back in (on next_cpu);
 * in_ns UINT64_MAX: never back before the trace ended (a switch out alone). 0, -ENOMEM, or
 * -ERANGE for an interval before the thread's previous one ends, or after one that never ended.
 */
int lk__tf_off_cpu(struct lk__trace_file *t, struct lk__tf_thread *th, uint64_t out_ns,
		   uint64_t in_ns, bool preempted, uint64_t cpu, uint64_t next_cpu);

int lk__tf_map_put(struct lk__tf_map *m, uint64_t key, uint32_t val);
bool lk__tf_map_get(const struct lk__tf_map *m, uint64_t key, uint32_t *val);
/* key's value where the map keeps it, to read and write in place; NULL if key is not there. The
 * place moves when a key is added: valid until then. */
uint32_t *lk__tf_map_at(const struct lk__tf_map *m, uint64_t key);
/* The same, key added with val first if it is not there; NULL: -ENOMEM. */
uint32_t *lk__tf_map_add(struct lk__tf_map *m, uint64_t key, uint32_t val);
void lk__tf_map_free(struct lk__tf_map *m);

#endif
