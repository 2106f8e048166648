/* SPDX-License-Identifier: MIT */
/* Internal to the probe module. */
#ifndef LK_PROBE_INTERNAL_H
#define LK_PROBE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <lowkey/probe.h>

#include "internal/probe.h"

#include "core/dso.h"

/*
 * A record in a thread's ring, laid out as the CTF event record the trace declares:
 *   u64 header: event id bits 0-15 | TSC bits 16-63 (lk__probe_header)
 *   [u64 thread CPU time ns, when the trace records it]
 *   arguments: 8 bytes each; strings NUL-terminated, unpadded.
 * Records are byte-granular and carry no size: the event id's layout gives it (lk__payload_size).
 * A pad (id 0xffff, never given) ends a run of records: the records go on at the offset in the
 * ring held in its upper 48 bits (0: the start). See buffer.c for where pads go.
 */
#define LK__PAD_ID 0xffffu

static inline uint64_t lk__pad(size_t offset)
{
	return (uint64_t)offset << 16 | LK__PAD_ID;
}
#define LK__MAX_EVENT_ID 0xfffeu

/* lk_probe_site.flags, set when the site registers */
#define LK__SITE_STRINGS 0x1 /* has string arguments: variable-size records */

/*
 * Overwrite mode: a thread's ring is LK__SLOTS sub-buffers ("slots", in sequence) held in
 * LK__SLOTS + 1 equal areas of memory, one of them spare. An area's fields are atomics: the
 * producer writes them, a snapshot reads them (buffer.c gives the protocol).
 */
#define LK__SLOTS 8
#define LK__NONE UINT64_MAX   /* no such sequence number, count not known yet */
#define LK__AREA_WRITING 0x1u /* the producer writes here (its current sub-buffer) */
#define LK__AREA_READING 0x2u /* a reader holds it: the producer does not start it anew */

struct lk__area {
	unsigned int state; /* LK__AREA_WRITING | LK__AREA_READING */
	uint32_t used;	    /* bytes of records, once closed */
	uint64_t seq;	    /* the sub-buffer it holds: 0, 1, 2, ... */
	uint64_t count;	    /* its events, once counted; LK__NONE before */
	uint64_t first;	    /* events the thread recorded before it; LK__NONE until known */
};

/* One thread's ring buffer. Created by the thread, drained and freed by the consumer. */
struct lk__probe_buffer {
	/* the producer's hot fields (its TLS); read by the consumer only under the hazard below */
	struct lk__probe_tls *tls;
	uint8_t *data;
	size_t cap;	   /* the mapping: the ring's room at its largest */
	size_t size;	   /* where laps end while the consumer keeps up (resident) */
	size_t max_record; /* larger records are dropped: size / 4, or a sub-buffer */
	pid_t tid;
	char name[16];

	/* the producer's slow path */
	uintptr_t slow_end;  /* it may write up to here without looking at rp */
	uint8_t *woke_at_rp; /* rp when it last woke the consumer */
	uint8_t *lap_end;    /* where it last wrapped to the start (its pad) */
	uint8_t *jumped_to;  /* where it went on past lap_end with the ring full; NULL */
	bool grown;	     /* pages past size were written since they were last released */

	/* consumer side, on a line of its own */
	_Alignas(64) uint8_t *rp; /* next byte to read (release: frees space for the producer) */
	uint64_t lost;		  /* producer: events dropped since creation (relaxed) */
	uint64_t lost_written;	  /* consumer: what the trace says so far */
	uint64_t events;	  /* consumer: records written */
	uint64_t packets;
	int fd;			/* the stream file, opened at the first packet */
	unsigned int trace_gen; /* the trace this buffer's stream belongs to */

	/*
	 * Thread exit: the destructor stores final_committed and sets dead; the consumer never
	 * reads tls once dead is set, and the destructor waits while the consumer is reading.
	 * Its last touch of the buffer sets gone: only then may the consumer free it.
	 */
	uintptr_t final_committed;
	int dead;
	int reading;
	int gone;
	bool retired; /* consumer: dead, drained, its stream closed */

	/* overwrite mode (LK_TRACE_OVERWRITE): sub-buffers, see buffer.c and snapshot.c */
	bool overwrite;
	bool snapshotted;   /* dead, and written by a snapshot since: may be freed */
	size_t area_size;   /* bytes of one sub-buffer: size / LK__SLOTS */
	unsigned int cur;   /* producer: the area it writes */
	unsigned int spare; /* producer: the area no slot holds */
	uint64_t left;	    /* producer: events in sub-buffers that left the ring */
	uint64_t left_at;   /* producer: the s whose start retired the oldest; LK__NONE: none */
	uint64_t seq;	    /* the newest sub-buffer's number; LK__NONE before the first */
	unsigned int slot_area[LK__SLOTS]; /* slot seq % LK__SLOTS: the area holding it */
	struct lk__area areas[LK__SLOTS + 1];

	struct lk__probe_buffer *next;
};

struct lk__trace {
	bool running;
	bool stopping;
	unsigned int gen; /* increments at every start */
	struct lk_trace_config config;
	char *path;    /* absolute */
	char *ctf_dir; /* where the CTF goes (a temporary one for JSON) */
	int dir_fd;    /* ctf_dir, open (lk__ctf_open) */
	int out_fd;    /* a JSON or Perfetto trace's file, open from the start; else -1 */
	unsigned char uuid[16];
	uint64_t tsc_hz;
	uint64_t tsc0;		/* TSC at start ... */
	uint64_t realtime0_ns;	/* ... and CLOCK_REALTIME at the same moment */
	uint64_t monotonic0_ns; /* ... and CLOCK_MONOTONIC */
	bool cputime;
	bool sched;	     /* LK_TRACE_SCHED: context switches recorded (sched.c) */
	uint64_t sched_lost; /* context switch records the kernel dropped */
	struct lk__sched *sched_state;

	pthread_t consumer;
	unsigned int wake; /* futex word: producers bump it to wake the consumer */
	int consumer_sleeping;

	/* stats, updated by the consumer */
	uint64_t events, lost, bytes;
	unsigned int threads;
	int error; /* the first output error; stops the trace */
	char error_msg[256];
	bool overwrite; /* LK_TRACE_OVERWRITE: keep the newest events, write on snapshots */
	unsigned int snapshot_requests; /* lk_trace_snapshot_request(): the consumer takes them */
	unsigned int snapshots;		/* taken, for the next default name (snapshot lock) */
	int snapshot_error;		/* the first failure of a requested snapshot */
	int snapshot_at_exit;		/* a last snapshot at exit (tracing from the environment);
					 * an int: riscv64's GCC calls libatomic to exchange a byte */
	char snapshot_error_msg[512];
	bool last_snapshot; /* the snapshot at exit: none comes after it */
	int sites_error;    /* the first failure to turn sites on while tracing */
	char sites_error_msg[512];
};

extern struct lk__trace lk__trace;
extern pthread_mutex_t lk__trace_mutex; /* start/stop/config */

/* ---- site.c: the registry of probe sites (registry lock held unless said) ---- */

struct lk__probe_site_rt {
	struct lk_probe_site *site; /* NULL once its object is unloaded */
	struct lk__dso_rt *dso;
	/* copies, so a trace can still describe a site whose object was unloaded */
	char *provider, *event, *file, *arg_names, *object, *function;
	uint32_t id, line, arg_types;
	uint8_t kind, nargs;
	bool enabled;
};

/* Argument i's type in a packed arg_types (4 bits each, the first in the low bits). */
static inline unsigned int lk__arg_type(uint32_t types, unsigned int i)
{
	return (types >> (4 * i)) & 0xf;
}

/* Whether any of the first nargs arguments is a string (records of variable size). */
static inline bool lk__has_strings(uint32_t types, unsigned int nargs)
{
	for (unsigned int i = 0; i < nargs; i++)
		if (lk__arg_type(types, i) == LK_PROBE_STR ||
		    lk__arg_type(types, i) == LK__PROBE_VIEW)
			return true;
	return false;
}

/*
 * The argument layout of every event id, for the consumer walking records without a lock:
 * written before the id is given to a site, never changed after. nargs == 0 && !valid: no such id.
 */
struct lk__record_layout {
	uint32_t arg_types;
	uint8_t nargs;
	bool strings;
	bool valid;
};
extern struct lk__record_layout lk__record_layouts[LK__MAX_EVENT_ID + 1];

/*
 * Bytes of a record's arguments at p (after the header and CPU time), at most avail: 8 for each
 * number, the string's length and NUL for each string. 0 with *ok false when a string does not
 * end within avail. Any context.
 */
size_t lk__payload_size(uint32_t types, unsigned int nargs, const uint8_t *p, size_t avail,
			bool *ok);

/* A record header's parts. */
static inline uint32_t lk__header_id(uint64_t header)
{
	return (uint32_t)(header & ((1u << LK__PROBE_ID_BITS) - 1));
}

static inline uint64_t lk__header_tsc48(uint64_t header)
{
	return header >> LK__PROBE_ID_BITS;
}

/* A full TSC from a record's 48 bits and a full TSC within 2^47 cycles of it, before or after. */
static inline uint64_t lk__tsc_extend(uint64_t near, uint64_t low48)
{
	uint64_t delta = (low48 - near)
			 << (64 - LK__PROBE_TSC_BITS); /* low48 - near, modulo 2^48, on top */

	return near + (uint64_t)((int64_t)delta >> (64 - LK__PROBE_TSC_BITS)); /* sign-extended */
}

/* CTF's rule for a narrow timestamp, as readers apply it: forward from prev, wrapping at most once. */
static inline uint64_t lk__tsc_advance(uint64_t prev, uint64_t low48)
{
	uint64_t v = (prev & ~LK__PROBE_TSC_MASK) | low48;

	return v < prev ? v + LK__PROBE_TSC_MASK + 1 : v;
}

/* Every site ever registered, by id - LK__FIRST_SITE_ID. */
struct lk__probe_site_rt *lk__probe_sites(size_t *n);

/* Flip sites to what the rules say (all off when !tracing). Registry lock held. */
int lk__probe_apply_rules_locked(bool tracing);

/* Forget the newest rule (glob, enable), as if never added: 0, -ENOENT, or a flipping error. */
int lk__probe_remove_rule(const char *glob, bool enable);

/* A list of rules: globs that turn sites on or off, the last matching one deciding. */
struct lk__rule {
	char *glob;
	bool enable;
};

struct lk__rule_list {
	struct lk__rule *v;
	size_t n;
};

/* Whether the rules select rt (none matching: no). Registry lock held. */
bool lk__rules_select(const struct lk__rule_list *l, const struct lk__probe_site_rt *rt);

/*
 * Append (glob, enable) to l and apply every rule; fn names the API call in errors. Returns the
 * number of registered sites glob matches, or -EINVAL (NULL or empty glob), -ENOMEM, or a flipping
 * error (the rule is then forgotten). Takes the registry lock.
 */
int lk__rules_add(struct lk__rule_list *l, const char *glob, bool enable, const char *fn);

/* Empty l and apply every rule: 0 or a flipping error. Takes the registry lock. */
int lk__rules_reset(struct lk__rule_list *l);

/* ---- buffer.c: per-thread buffers ---- */

/*
 * The list of buffers: threads push at the head, lock-free; only the consumer unlinks and frees,
 * holding lk__probe_buffers_lock, which every other walker of the list holds too (a buffer must
 * not be freed under a walker's feet). Not taken on any recording path.
 */
extern struct lk__probe_buffer *lk__probe_buffers;
extern pthread_mutex_t lk__probe_buffers_lock;

/* Point every live thread's fast path at the slow path, or back (tracing flags changed). */
void lk__probe_buffers_retarget(void);

/* The consumer's view: bytes committed in b, or of a dead thread's last commit. */
uintptr_t lk__buffer_committed(struct lk__probe_buffer *b);

/* Release the space up to rp to the producer. */
void lk__buffer_release(struct lk__probe_buffer *b, uint8_t *rp);

/* Wait until no thread is inside an emit (after the keys are off). */
void lk__probe_buffers_quiesce(void);

/* Free a drained buffer of an exited thread. */
void lk__buffer_free(struct lk__probe_buffer *b);

/* In a forked child: this thread has no buffer (the list it was on is gone). */
void lk__probe_forget_thread(void);

/* ---- snapshot.c: the flight recorder's reader ---- */

/* What one snapshot wrote. */
struct lk__snapshot_result {
	uint64_t events; /* events written */
	uint64_t discarded; /* events the threads recorded before and between them: overwritten or dropped */
	uint64_t bytes;
	unsigned int threads;
};

/* The size of the record at p, at most avail bytes; 0 if it makes no sense. Any context. */
size_t lk__record_size(const uint8_t *p, size_t avail, bool cputime);

/* Records in [p, end), walked by their sizes (the producer's, for a sub-buffer no one counted). */
uint64_t lk__count_records(const uint8_t *p, const uint8_t *end, bool cputime);

/* The same walk: *n records from p, up to end or the first that is not one (a pad); returns where it stopped. */
const uint8_t *lk__walk_records(const uint8_t *p, const uint8_t *end, bool cputime, uint64_t *n);

/* Count the closed sub-buffers no one has counted yet, unless a snapshot is being taken. Consumer. */
void lk__snapshot_count_ahead(void);

/* In a forked child: the snapshot lock is free (the parent's consumer may have held it). */
void lk__snapshot_forget(void);

/*
 * Write what the rings of the running overwrite-mode trace hold to path (NULL: the next default
 * name, see lk_trace_snapshot), under the snapshot lock: one reader at a time. The caller keeps
 * the trace running (holds the trace mutex, or is the consumer). The path written goes to
 * written. 0 or -errno with lk__fail's message.
 */
int lk__snapshot(const char *path, struct lk__snapshot_result *r, char *written, size_t len);

/*
 * lk__snapshot_in - lk__snapshot into dir_fd (>= 0), an empty directory the caller made, as CTF
 * whatever the trace's format; path only names it. Takes dir_fd (closed on every path); -1: as
 * lk__snapshot.
 */
int lk__snapshot_in(const char *path, int dir_fd, struct lk__snapshot_result *r, char *written,
		    size_t len);

/* ---- trace.c ---- */

/* lk_trace_snapshot with what it wrote: takes the trace mutex and checks the trace's mode. */
int lk__trace_snapshot(const char *path, struct lk__snapshot_result *r, char *written, size_t len);

/* lk__trace_snapshot into the caller's directory (lk__snapshot_in); takes dir_fd. */
int lk__trace_snapshot_in(const char *path, int dir_fd, struct lk__snapshot_result *r,
			  char *written, size_t len);

/*
 * lk__trace_start_in - lk_trace_start into dir_fd, an empty directory the caller made (the
 * control socket's client, on its side of a mount namespace): CTF only, not a flight recorder
 * (-EINVAL). config->path only names it in messages. Takes dir_fd (closed on failure, and by the
 * trace at its end). 0 or lk_trace_start's errors.
 */
int lk__trace_start_in(const struct lk_trace_config *config, int dir_fd);

/* At exit: the last snapshot snapshot_at_exit asks for, once; its error goes where a requested
 * snapshot's goes (lk_trace_stop returns it). 0 or -errno. */
int lk__trace_exit_snapshot(void);

/* ---- consumer.c ---- */

int lk__consumer_start(void);

/* Sites that should record could not be turned on (err, lk_last_error() says why): the trace
 * goes on, and lk_trace_stop() returns the first such error. Call with the registry lock held. */
void lk__trace_sites_failed(int err, const char *where);
void lk__consumer_stop(void); /* joins, after a final drain */
void lk__consumer_wake(void); /* async-signal-safe */

/*
 * For tests: while lk__consumer_hold is set the consumer drains nothing, as a descheduled one
 * would not; lk__consumer_held says it has seen the hold.
 */
extern int lk__consumer_hold, lk__consumer_held;

/* ---- ctf.c: the CTF writer ---- */

/*
 * env.lowkey_format: the layout below, read by reader.c. Format 4 is the rings' bytes as they
 * are (what the recorder writes); format 3 has each event of stream 0 carry its thread's id as
 * the vtid context (what lowkey convert writes, for Trace Compass's UST analyses). In both, a
 * context switch (stream 1) carries it.
 */
#define LK__CTF_FORMAT 4
#define LK__CTF_FORMAT_VTID 3
#define LK__CTF_PACKET_PREFIX 80 /* packet header and context, in bytes */

/* Open t->ctf_dir (a new or empty directory: internal/outfile.h) unless t->dir_fd already is; a uuid. */
int lk__ctf_open(struct lk__trace *t);
int lk__ctf_write_metadata(struct lk__trace *t);
int lk__ctf_open_stream(struct lk__trace *t, struct lk__probe_buffer *b);
/*
 * Write the records of b's thread at start, up to end, as one packet of b's stream: as many as
 * fit in 256 KiB (one larger record alone), up to the first that is not a record (a pad). *next:
 * where it stopped (start: the first is not a record, and nothing was written); *events: the
 * records in it. Their 48-bit timestamps are extended from now (a TSC read after they were
 * committed). start == end writes a packet of no events at now, which carries b->lost. 0, or
 * -errno with *next and *events saying what was not written (the file then ends at its last
 * whole packet).
 */
int lk__ctf_write_records(struct lk__trace *t, struct lk__probe_buffer *b, const uint8_t *start,
			  const uint8_t *end, uint64_t now, const uint8_t **next, uint64_t *events);
void lk__ctf_close(struct lk__trace *t);
/*
 * Remove the stream-* files of a CTF directory (a temporary one, once converted); with
 * lk__remove_ctf, its metadata and index and the directory too. Only what the writer creates, and
 * through the directory opened O_NOFOLLOW: never in a directory a link at its name points to.
 */
void lk__remove_streams(const char *dir);
void lk__remove_ctf(const char *dir);

/*
 * Write one packet of stream class 1 (context switches) for thread tid: records [out, out+len),
 * already in CTF form. *fd: the stream-TID-sched file, opened at its first packet (again after it
 * was closed: appending); *packets: its count. 0 or -errno (the file then ends at its last whole
 * packet).
 */
int lk__ctf_write_sched_packet(struct lk__trace *t, pid_t tid, int *fd, uint64_t *packets,
			       const uint8_t *out, size_t len, uint64_t ts_begin, uint64_t ts_end);

/* ---- sched.c: context switches, LK_TRACE_SCHED ---- */

#define LK__SCHED_FLUSH_MS 20 /* the longest the consumer sleeps while switches are recorded */

/* Open the context-switch events of every thread of the process (perf_event_open): 0 or -errno. */
int lk__sched_start(struct lk__trace *t);
/*
 * The consumer, once a pass (final: the last): write what the kernel recorded (overwrite mode:
 * keep the newest for the snapshots); 0 or -errno.
 */
int lk__sched_drain(struct lk__trace *t, bool final);
/*
 * Overwrite mode, from a snapshot: take what the kernel recorded since the consumer's last pass,
 * then write every thread's kept switches (the newest) as stream-TID-sched files in out's
 * directory, and out->sched_lost. *switches: how many. 0 or -errno. The last snapshot
 * (t->last_snapshot) takes every record; others leave the last CUT_NS to the next pass.
 */
int lk__sched_snapshot(struct lk__trace *t, struct lk__trace *out, uint64_t *switches);
/* After the consumer's last pass, or in a forked child: close everything. */
void lk__sched_stop(struct lk__trace *t);

/* ---- json.c ---- */

int lk__json_convert(const char *ctf_dir, const char *json_path, char *err, size_t errlen);

#endif
