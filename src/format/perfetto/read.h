/* SPDX-License-Identifier: MIT */
/*
 * Internal to the Perfetto reader (lk__perfetto_read, trace_file.h): its state and what its parts
 * share. read.c: the packets, their sequences and interned strings; read_tracks.c: the track
 * descriptors; read_events.c: the track events, into spans, events, counters and off-CPU time.
 */
#ifndef LK_FORMAT_PERFETTO_READ_H
#define LK_FORMAT_PERFETTO_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <lowkey/probe.h>

#include "format/perfetto/perfetto_proto.h"
#include "format/protobuf/pb_read.h"
#include "internal/trace_file.h"

struct str {
	const char *s;
	size_t n;
};

/* A sequence's interned strings of one kind: iid i is v[i - 1]. */
struct str_table {
	struct str *v;
	size_t n, cap;
};

struct sequence {
	bool started;
	uint64_t clock_ns;	    /* the incremental clock: the time of its last packet */
	uint64_t track;		    /* the defaults' track (0: none) */
	struct str_table tables[4]; /* 1: categories, 2: event names, 3: annotation names */
};

enum track_kind { TRACK_PROCESS = 1, TRACK_THREAD, TRACK_CPUTIME, TRACK_COUNTER, TRACK_OFF_CPU };

struct track {
	enum track_kind kind;
	int tid;      /* thread, CPU-time and off-CPU tracks */
	uint32_t cls; /* counter tracks */
};

/* A switch out whose switch in has not come yet. */
struct pending_out {
	bool pending, preempted;
	uint64_t ns, cpu, next_cpu;
};

struct pft_reader {
	struct lk__trace_file *t;
	const char *name;
	char *err;
	size_t errlen;
	size_t at; /* the packet's offset, for messages */
	struct sequence *seqs[SEQ_SPAN];
	struct track *tracks;
	size_t ntracks, captracks;
	struct lk__tf_map track_of; /* uuid to index in tracks */
	struct lk__tf_map end_of;   /* a span begin's class to its end's */
	struct pending_out *outs;   /* by thread index */
	size_t capouts;
	bool process_seen;
};

/* The packet being read is not lowkey's: -EINVAL, a message naming it (fmt: one %s, what). */
int lk__pfr_refuse(struct pft_reader *p, const char *fmt, const char *what);

/* The packet being read is not a well-formed protobuf message: -EINVAL. */
int lk__pfr_malformed(struct pft_reader *p);

/* The string interned in sq's table (1: categories, 2: event names, 3: annotation names) as iid. */
static inline bool lk__pfr_lookup(const struct sequence *sq, unsigned int table, uint64_t iid,
				  struct str *s)
{
	if (iid == 0 || iid > sq->tables[table].n)
		return false;
	*s = sq->tables[table].v[iid - 1];
	return true;
}

/* ---- tracks (read_tracks.c) ---- */

/* A TrackDescriptor: the track added, by its uuid. 0, -EINVAL (refused) or -ENOMEM. */
int lk__pfr_track_descriptor(struct pft_reader *p, const struct pb_field *td);

/* The track of that uuid, described before; NULL if none. */
const struct track *lk__pfr_track(const struct pft_reader *p, uint64_t uuid);

/* ---- track events (read_events.c) ---- */

/* A TrackEvent of sequence sq at ns: into the trace file. 0, -EINVAL (refused) or -ENOMEM. */
int lk__pfr_track_event(struct pft_reader *p, struct sequence *sq, const struct pb_field *ev,
			uint64_t ns);

/* After the last packet: off-CPU slices that did not end, as open ones. 0 or -errno. */
int lk__pfr_open_slices(struct pft_reader *p);

#endif
