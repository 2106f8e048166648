// SPDX-License-Identifier: MIT
/*
 * The Perfetto writer's track descriptors (write.h): the process's, a thread's with its CPU-time
 * or off-CPU child track, and a counter's (one per provider:event).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "format/perfetto/write.h"

int lk__pft_describe_process(struct lk__pft *p)
{
	struct lk__pb *pb = &p->pb;

	lk__pft_begin_packet(p, 0);
	lk__pb_begin(pb, PKT_TRACK_DESCRIPTOR);
	lk__pb_uint(pb, TD_UUID, lk__pft_track_uuid(p, TRACK_PROCESS, 0));
	lk__pb_begin(pb, TD_PROCESS);
	lk__pb_uint(pb, PD_PID, (uint64_t)p->r->pid);
	lk__pb_utf8(pb, PD_NAME, p->r->procname);
	if (p->r->overwrite) { /* a flight recorder's snapshot: its lost events are older ones overwritten */
		char dropped[48];

		snprintf(dropped, sizeof(dropped), "lowkey:dropped=%" PRIu64, p->r->dropped);
		lk__pb_utf8(pb, PD_LABELS, "lowkey:overwrite");
		lk__pb_utf8(pb, PD_LABELS, dropped);
	}
	lk__pb_end(pb);
	lk__pb_end(pb);
	return lk__pft_packet_done(p);
}

/* The thread's track (again with its name, when the trace names it) and its CPU-time track. */
int lk__pft_describe_thread(struct lk__pft *p, const char *name)
{
	struct lk__pb *pb = &p->pb;
	uint64_t uuid = lk__pft_track_uuid(p, TRACK_THREAD, (uint64_t)p->st->tid);

	lk__pft_begin_packet(p, 0);
	lk__pb_begin(pb, PKT_TRACK_DESCRIPTOR);
	lk__pb_uint(pb, TD_UUID, uuid);
	lk__pb_uint(pb, TD_PARENT_UUID, lk__pft_track_uuid(p, TRACK_PROCESS, 0));
	lk__pb_begin(pb, TD_THREAD);
	lk__pb_uint(pb, THD_PID, (uint64_t)p->r->pid);
	lk__pb_uint(pb, THD_TID, (uint64_t)p->st->tid);
	if (name)
		lk__pb_utf8(pb, THD_NAME, name);
	lk__pb_end(pb);
	lk__pb_end(pb);
	lk__pft_packet_done(p);
	if (p->st->thread_described || (!p->r->cputime && !p->st->sched)) {
		p->st->thread_described = true;
		return p->pb.failed ? -ENOMEM : 0;
	}
	p->st->thread_described = true;
	lk__pft_begin_packet(p, 0);
	lk__pb_begin(pb, PKT_TRACK_DESCRIPTOR);
	lk__pb_uint(pb, TD_UUID,
		    lk__pft_track_uuid(p, p->st->sched ? TRACK_OFF_CPU : TRACK_CPUTIME,
				       (uint64_t)p->st->tid));
	lk__pb_uint(pb, TD_PARENT_UUID, uuid);
	if (p->st->sched) {
		lk__pb_utf8(pb, TD_NAME, "off-CPU");
	} else {
		lk__pb_utf8(pb, TD_NAME, "thread CPU time");
		lk__pb_begin(pb, TD_COUNTER);
		lk__pb_uint(pb, CD_TYPE, COUNTER_THREAD_TIME_NS);
		lk__pb_uint(pb, CD_UNIT, UNIT_TIME_NS);
		lk__pb_end(pb);
	}
	lk__pb_end(pb);
	return lk__pft_packet_done(p);
}

/*
 * A counter's track: one per provider:event, whichever sites record it. Described the first time
 * each site's values come (a counter with several sites is described as many times, the same).
 */
static uint64_t counter_uuid(const struct lk__pft *p, const struct lk__event_class *c)
{
	/*
	 * Every value names its track: 35 bits are 5 bytes of varint instead of 10, and still leave
	 * a collision with another track of this trace or a merged one a chance in billions.
	 */
	return lk__pft_track_uuid(p, TRACK_COUNTER,
				  lk__pft_hash_string(c->provider) ^
					  lk__pft_mix64(lk__pft_hash_string(c->event))) >>
		       29 |
	       1;
}

int lk__pft_describe_counter(struct lk__pft *p, const struct lk__event_class *c)
{
	struct lk__pb *pb = &p->pb;
	char name[256];

	p->classes[c->id].counter_described = true;
	p->classes[c->id].counter_track = counter_uuid(p, c);
	snprintf(name, sizeof(name), "%s:%s", c->provider, c->event);
	lk__pft_begin_packet(p, 0);
	lk__pb_begin(pb, PKT_TRACK_DESCRIPTOR);
	lk__pb_uint(pb, TD_UUID, counter_uuid(p, c));
	lk__pb_uint(pb, TD_PARENT_UUID, lk__pft_track_uuid(p, TRACK_PROCESS, 0));
	lk__pb_utf8(pb, TD_NAME, name);
	lk__pb_begin(pb, TD_COUNTER);
	lk__pb_end(pb);
	lk__pb_end(pb);
	return lk__pft_packet_done(p);
}
