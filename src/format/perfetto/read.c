// SPDX-License-Identifier: MIT
/*
 * lowkey's Perfetto traces (perfetto.c, docs/trace.md "Perfetto") read back into a trace file of
 * any format (trace_file.h), with the wire-format decoder of protobuf/pb_read.h.
 *
 * Only what lowkey writes is read, and anything else is refused: packets on lowkey's sequences
 * (8192 to 16383), each sequence opened by a packet that clears its state and ties its clock (id
 * 64, incremental, in ns) in a ClockSnapshot; strings interned per sequence with iids 1, 2, 3...;
 * a process track, a track per thread, a "thread CPU time" counter track per thread, a counter
 * track per provider:event and an "off-CPU" track per thread recorded with --sched. On those:
 * slices for spans (their ends, nameless, close the thread's latest open slice), instants for
 * events and for lowkey:lost, counter values, and off-CPU slices "preempted" or "blocked".
 *
 * A Perfetto file has no end marker: one cut at a packet's boundary reads as a shorter trace.
 * Cut anywhere else, or damaged so that a packet is not lowkey's, it is an error naming the byte.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lowkey/probe.h>

#include "internal/failf.h"
#include "format/perfetto/perfetto_proto.h"
#include "format/protobuf/pb_read.h"
#include "internal/trace_file.h"
#include "format/perfetto/read.h"

/* What one packet holds, gathered before any of it is acted on (fields may come in any order). */
struct packet {
	uint64_t seq, flags, timestamp, clock_id;
	bool has_seq, has_timestamp, has_clock_id;
	struct pb_field defaults, snapshot, descriptor, interned, event;
};

int lk__pfr_refuse(struct pft_reader *p, const char *fmt, const char *what)
{
	char why[200];

	snprintf(why, sizeof(why), fmt, what);
	return lk__failf(
		p->err, p->errlen, -EINVAL,
		"%s: the packet at byte %zu %s: not a Perfetto trace lowkey "
		"wrote, or a damaged one (lowkey report reads the traces of lowkey trace --format "
		"perfetto; open others in ui.perfetto.dev)",
		p->name, p->at, why);
}

int lk__pfr_malformed(struct pft_reader *p)
{
	return lk__pfr_refuse(p, "%s", "is not a well-formed protobuf message");
}

/* ---- interned strings ---- */

static int intern_entry(struct pft_reader *p, struct str_table *tab, const struct pb_field *entry)
{
	struct pb_cursor c = pb_cursor(entry->data, entry->len);
	struct str s = { NULL, 0 };
	uint64_t iid = 0;
	struct pb_field f;
	int got;

	while ((got = pb_next(&c, &f)) > 0) {
		if (f.number == 1 && f.type == PB_VARINT)
			iid = f.value;
		else if (f.number == 2 && f.type == PB_LEN)
			s = (struct str){ (const char *)f.data, f.len };
	}
	if (got < 0)
		return lk__pfr_malformed(p);
	if (iid != tab->n + 1 || !s.s)
		return lk__pfr_refuse(
			p, "%s", "interns a string out of order (lowkey numbers them 1, 2, 3...)");
	if (tab->n == tab->cap) {
		size_t cap = tab->cap ? tab->cap * 2 : 16;
		struct str *grown = realloc(tab->v, cap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		tab->v = grown;
		tab->cap = cap;
	}
	tab->v[tab->n++] = s;
	return 0;
}

static int interned_data(struct pft_reader *p, struct sequence *sq, const struct pb_field *data)
{
	struct pb_cursor c = pb_cursor(data->data, data->len);
	struct pb_field f;
	int got, rc;

	while ((got = pb_next(&c, &f)) > 0) {
		if (f.number < 1 || f.number > 3 || f.type != PB_LEN)
			return lk__pfr_refuse(p, "%s", "interns something lowkey does not");
		if ((rc = intern_entry(p, &sq->tables[f.number], &f)) != 0)
			return rc;
	}
	return got < 0 ? lk__pfr_malformed(p) : 0;
}

/* ---- sequences ---- */

static void clear_sequence(struct sequence *sq)
{
	for (int i = 0; i < 4; i++)
		sq->tables[i].n = 0;
	sq->track = 0;
	sq->clock_ns = 0;
	sq->started = false;
}

/* The first packet of a sequence: its clock, at the time the ClockSnapshot gives clock 64. */
static int clock_snapshot(struct pft_reader *p, struct sequence *sq, const struct pb_field *snap)
{
	struct pb_cursor c = pb_cursor(snap->data, snap->len);
	struct pb_field f, g;
	int got, got2;

	while ((got = pb_next(&c, &f)) > 0) {
		struct pb_cursor k;
		uint64_t id = 0, ts = 0;

		if (f.number != SNAP_CLOCKS || f.type != PB_LEN)
			continue;
		k = pb_cursor(f.data, f.len);
		while ((got2 = pb_next(&k, &g)) > 0) {
			if (g.number == CLOCK_ID && g.type == PB_VARINT)
				id = g.value;
			else if (g.number == CLOCK_TIMESTAMP && g.type == PB_VARINT)
				ts = g.value;
		}
		if (got2 < 0)
			return lk__pfr_malformed(p);
		if (id == LK_CLOCK) {
			sq->clock_ns = ts;
			sq->started = true;
		}
	}
	if (got < 0)
		return lk__pfr_malformed(p);
	return sq->started ?
		       0 :
		       lk__pfr_refuse(
			       p, "%s",
			       "starts a sequence without lowkey's clock (64) in its snapshot");
}

static int defaults(struct pft_reader *p, struct sequence *sq, const struct pb_field *def)
{
	struct pb_cursor c = pb_cursor(def->data, def->len), k;
	struct pb_field f, g;
	int got, got2;

	while ((got = pb_next(&c, &f)) > 0) {
		if (f.number == DEF_TIMESTAMP_CLOCK_ID && f.type == PB_VARINT &&
		    f.value != LK_CLOCK)
			return lk__pfr_refuse(p, "%s",
					      "times its sequence on a clock lowkey does not use");
		if (f.number != DEF_TRACK_EVENT || f.type != PB_LEN)
			continue;
		k = pb_cursor(f.data, f.len);
		while ((got2 = pb_next(&k, &g)) > 0)
			if (g.number == TED_TRACK_UUID && g.type == PB_VARINT)
				sq->track = g.value;
		if (got2 < 0)
			return lk__pfr_malformed(p);
	}
	return got < 0 ? lk__pfr_malformed(p) : 0;
}

/* ---- packets ---- */

static int gather(struct pft_reader *p, const struct pb_field *packet, struct packet *pk)
{
	struct pb_cursor c = pb_cursor(packet->data, packet->len);
	struct pb_field f;
	int got;

	while ((got = pb_next(&c, &f)) > 0) {
		bool varint = f.type == PB_VARINT, message = false;

		switch (f.number) {
		case PKT_SEQUENCE_ID:
			pk->seq = f.value, pk->has_seq = varint;
			break;
		case PKT_SEQUENCE_FLAGS:
			pk->flags = f.value;
			break;
		case PKT_TIMESTAMP:
			pk->timestamp = f.value, pk->has_timestamp = varint;
			break;
		case PKT_TIMESTAMP_CLOCK_ID:
			pk->clock_id = f.value, pk->has_clock_id = varint;
			break;
		case PKT_FIRST_ON_SEQUENCE:
			break; /* the cleared state says as much */
		case PKT_DEFAULTS:
			pk->defaults = f, message = true;
			break;
		case PKT_CLOCK_SNAPSHOT:
			pk->snapshot = f, message = true;
			break;
		case PKT_TRACK_DESCRIPTOR:
			pk->descriptor = f, message = true;
			break;
		case PKT_INTERNED_DATA:
			pk->interned = f, message = true;
			break;
		case PKT_TRACK_EVENT:
			pk->event = f, message = true;
			break;
		default:
			return lk__pfr_refuse(p, "%s", "has a field lowkey does not write");
		}
		if (f.type != (message ? PB_LEN : PB_VARINT))
			return lk__pfr_refuse(p, "%s", "has a field of the wrong wire type");
	}
	return got < 0 ? lk__pfr_malformed(p) : 0;
}

static struct sequence *sequence(struct pft_reader *p, uint64_t id)
{
	struct sequence **sq = &p->seqs[id - SEQ_BASE];

	if (!*sq)
		*sq = calloc(1, sizeof(**sq));
	return *sq;
}

/* A sequence's state first, then its strings, then the packet's time, then what it describes. */
static int packet(struct pft_reader *p, const struct pb_field *field)
{
	struct packet pk = { 0 };
	struct sequence *sq;
	int rc;

	if ((rc = gather(p, field, &pk)) != 0)
		return rc;
	if (!pk.has_seq || pk.seq < SEQ_BASE || pk.seq >= SEQ_BASE + SEQ_SPAN)
		return lk__pfr_refuse(
			p, "%s",
			"is on a sequence lowkey does not use (it numbers its own 8192 to 16383)");
	if (!(sq = sequence(p, pk.seq)))
		return -ENOMEM;
	if (pk.flags & SEQ_INCREMENTAL_STATE_CLEARED) {
		clear_sequence(sq);
		if (!pk.snapshot.data)
			return lk__pfr_refuse(p, "%s",
					      "starts a sequence without a clock snapshot");
		if ((rc = clock_snapshot(p, sq, &pk.snapshot)) != 0)
			return rc;
	} else if (!sq->started || pk.snapshot.data) {
		return lk__pfr_refuse(p, "%s",
				      "comes on a sequence before the packet that starts it");
	}
	if (pk.defaults.data && (rc = defaults(p, sq, &pk.defaults)) != 0)
		return rc;
	if (pk.interned.data && (rc = interned_data(p, sq, &pk.interned)) != 0)
		return rc;
	if (pk.has_timestamp && (!pk.has_clock_id || pk.clock_id == LK_CLOCK)) {
		if (sq->clock_ns > UINT64_MAX - pk.timestamp)
			return lk__pfr_refuse(p, "%s", "has a time past the clock's range");
		sq->clock_ns += pk.timestamp;
	}
	if (pk.descriptor.data && (rc = lk__pfr_track_descriptor(p, &pk.descriptor)) != 0)
		return rc;
	if (pk.event.data) {
		if (!pk.has_timestamp || (pk.has_clock_id && pk.clock_id != LK_CLOCK))
			return lk__pfr_refuse(p, "%s",
					      "has an event without a time on lowkey's clock");
		return lk__pfr_track_event(p, sq, &pk.event, sq->clock_ns);
	}
	return 0;
}

static void free_reader(struct pft_reader *p)
{
	for (size_t i = 0; i < SEQ_SPAN; i++) {
		if (!p->seqs[i])
			continue;
		for (int k = 0; k < 4; k++)
			free(p->seqs[i]->tables[k].v);
		free(p->seqs[i]);
	}
	free(p->tracks);
	free(p->outs);
	lk__tf_map_free(&p->track_of);
	lk__tf_map_free(&p->end_of);
}

static int read_packets(struct pft_reader *p, const uint8_t *data, size_t len)
{
	struct pb_cursor c = pb_cursor(data, len);
	struct pb_field f;
	int got, rc;

	for (;;) {
		p->at = (size_t)(c.p - data);
		lk__tf_parsed(p->t, p->at);
		if ((got = pb_next(&c, &f)) <= 0)
			break;
		if (f.number != TRACE_PACKET || f.type != PB_LEN)
			return lk__pfr_refuse(p, "%s", "is not a TracePacket");
		if ((rc = packet(p, &f)) != 0)
			return rc;
	}
	if (got < 0)
		return lk__failf(p->err, p->errlen, -EINVAL,
				 "%s is cut short or damaged at byte %zu (a packet runs past "
				 "the end of the file, or its length is not a varint)",
				 p->name, p->at);
	if (!p->process_seen)
		return lk__failf(p->err, p->errlen, -EINVAL,
				 "%s is not a Perfetto trace lowkey wrote: it describes no "
				 "process",
				 p->name);
	return lk__pfr_open_slices(p);
}

int lk__perfetto_read(struct lk__trace_file *t, const uint8_t *data, size_t len, const char *name,
		      char *err, size_t errlen)
{
	struct pft_reader *p = calloc(1, sizeof(*p));
	int rc;

	if (!p)
		return lk__failf(err, errlen, -ENOMEM, "out of memory reading %s", name);
	*p = (struct pft_reader){ .t = t, .name = name, .err = err, .errlen = errlen };
	rc = read_packets(p, data, len);
	if (rc == -ENOMEM || rc == -E2BIG)
		rc = lk__failf(err, errlen, -ENOMEM, "out of memory reading %s", name);
	free_reader(p);
	free(p);
	return rc;
}
