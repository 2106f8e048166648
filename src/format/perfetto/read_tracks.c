// SPDX-License-Identifier: MIT
/*
 * Reading a lowkey Perfetto trace back (read.h): its track descriptors -- the process (its pid,
 * name and a flight recorder's labels), each thread (its tid and name), a thread's CPU-time and
 * off-CPU tracks, and a counter's, which names its class "provider:event".
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/perfetto/read.h"

static int add_track(struct pft_reader *p, uint64_t uuid, struct track tr)
{
	uint32_t i;

	if (lk__tf_map_get(&p->track_of, uuid, &i)) {
		if (p->tracks[i].kind != tr.kind || p->tracks[i].tid != tr.tid ||
		    p->tracks[i].cls != tr.cls)
			return lk__pfr_refuse(p, "%s", "describes a track again as something else");
		return 0;
	}
	if (p->ntracks == p->captracks) {
		size_t cap = p->captracks ? p->captracks * 2 : 64;
		struct track *grown = realloc(p->tracks, cap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		p->tracks = grown;
		p->captracks = cap;
	}
	if (p->ntracks >= UINT32_MAX - 1 ||
	    lk__tf_map_put(&p->track_of, uuid, (uint32_t)p->ntracks))
		return -ENOMEM;
	p->tracks[p->ntracks++] = tr;
	return 0;
}

const struct track *lk__pfr_track(const struct pft_reader *p, uint64_t uuid)
{
	uint32_t i;

	return lk__tf_map_get(&p->track_of, uuid, &i) ? &p->tracks[i] : NULL;
}

/* lowkey's labels of a flight recorder's snapshot: its lost events are older ones overwritten. */
static void process_label(struct pft_reader *p, const struct pb_field *f)
{
	static const char overwrite[] = "lowkey:overwrite", dropped[] = "lowkey:dropped=";
	const size_t prefix = sizeof(dropped) - 1;
	uint64_t n = 0;

	if (f->len == sizeof(overwrite) - 1 && !memcmp(f->data, overwrite, f->len)) {
		p->t->r.overwrite = true;
		return;
	}
	if (f->len <= prefix || f->len > prefix + 19 || memcmp(f->data, dropped, prefix))
		return;
	for (size_t i = prefix; i < f->len; i++) {
		if (f->data[i] < '0' || f->data[i] > '9')
			return;
		n = n * 10 + (uint64_t)(f->data[i] - '0'); /* 19 digits cannot overflow */
	}
	p->t->r.dropped = n;
}

static int process_descriptor(struct pft_reader *p, uint64_t uuid, const struct pb_field *pd)
{
	struct pb_cursor c = pb_cursor(pd->data, pd->len);
	struct pb_field f;
	int got;

	while ((got = pb_next(&c, &f)) > 0) {
		if (f.number == PD_PID && f.type == PB_VARINT && f.value <= INT_MAX)
			p->t->r.pid = (int)f.value;
		else if (f.number == PD_NAME && f.type == PB_LEN)
			snprintf(p->t->r.procname, sizeof(p->t->r.procname), "%.*s",
				 (int)(f.len < 63 ? f.len : 63), (const char *)f.data);
		else if (f.number == PD_LABELS && f.type == PB_LEN)
			process_label(p, &f);
	}
	if (got < 0)
		return lk__pfr_malformed(p);
	p->process_seen = true;
	return add_track(p, uuid, (struct track){ TRACK_PROCESS, 0, 0 });
}

static int thread_descriptor(struct pft_reader *p, uint64_t uuid, const struct pb_field *td)
{
	struct pb_cursor c = pb_cursor(td->data, td->len);
	struct str name = { NULL, 0 };
	struct lk__tf_thread *th;
	struct pb_field f;
	uint64_t tid = 0;
	int got, rc;

	while ((got = pb_next(&c, &f)) > 0) {
		if (f.number == THD_TID && f.type == PB_VARINT)
			tid = f.value;
		else if (f.number == THD_NAME && f.type == PB_LEN)
			name = (struct str){ (const char *)f.data, f.len };
	}
	if (got < 0)
		return lk__pfr_malformed(p);
	if (tid == 0 || tid > INT_MAX)
		return lk__pfr_refuse(p, "%s",
				      "describes a thread without a thread id lowkey records");
	if ((rc = add_track(p, uuid, (struct track){ TRACK_THREAD, (int)tid, 0 })) != 0)
		return rc;
	if (!(th = lk__tf_thread(p->t, (int)tid)))
		return -ENOMEM;
	return name.s ? lk__tf_thread_name(p->t, th, 0, name.s, name.n) : 0;
}

/* A child track of a thread's (CPU time, off-CPU) or of the process's (a counter's: "provider:event"). */
static int child_track(struct pft_reader *p, uint64_t uuid, uint64_t parent, struct str name,
		       bool counter, uint64_t counter_type)
{
	const struct track *of = lk__pfr_track(p, parent);
	const char *colon = name.s ? memchr(name.s, ':', name.n) : NULL;
	uint32_t cls;
	int rc;

	if (!of)
		return lk__pfr_refuse(p, "%s",
				      "describes a track whose parent is not described before it");
	if (of->kind == TRACK_THREAD && counter && counter_type == COUNTER_THREAD_TIME_NS) {
		p->t->r.cputime = true;
		return add_track(p, uuid, (struct track){ TRACK_CPUTIME, of->tid, 0 });
	}
	if (of->kind == TRACK_THREAD && !counter && name.s && name.n == 7 &&
	    memcmp(name.s, "off-CPU", 7) == 0)
		return add_track(p, uuid, (struct track){ TRACK_OFF_CPU, of->tid, 0 });
	if (of->kind != TRACK_PROCESS || !counter || counter_type || !colon)
		return lk__pfr_refuse(p, "%s", "describes a track lowkey does not write");
	rc = lk__tf_class(p->t, name.s, (size_t)(colon - name.s), colon + 1,
			  name.n - (size_t)(colon - name.s) - 1, LK_PROBE_COUNTER, &cls);
	if (rc == -E2BIG)
		return lk__pfr_refuse(p, "%s", "names more counters than a lowkey trace can have");
	return rc ? rc : add_track(p, uuid, (struct track){ TRACK_COUNTER, 0, cls });
}

int lk__pfr_track_descriptor(struct pft_reader *p, const struct pb_field *td)
{
	struct pb_cursor c = pb_cursor(td->data, td->len), k;
	struct pb_field f, process = { 0 }, thread = { 0 }, g;
	uint64_t uuid = 0, parent = 0, counter_type = 0;
	bool counter = false;
	struct str name = { NULL, 0 };
	int got;

	while ((got = pb_next(&c, &f)) > 0) {
		if (f.number == TD_UUID && f.type == PB_VARINT)
			uuid = f.value;
		else if (f.number == TD_PARENT_UUID && f.type == PB_VARINT)
			parent = f.value;
		else if (f.number == TD_NAME && f.type == PB_LEN)
			name = (struct str){ (const char *)f.data, f.len };
		else if (f.number == TD_PROCESS && f.type == PB_LEN)
			process = f;
		else if (f.number == TD_THREAD && f.type == PB_LEN)
			thread = f;
		else if (f.number == TD_COUNTER && f.type == PB_LEN) {
			counter = true;
			k = pb_cursor(f.data, f.len);
			while ((got = pb_next(&k, &g)) > 0)
				if (g.number == CD_TYPE && g.type == PB_VARINT)
					counter_type = g.value;
			if (got < 0)
				return lk__pfr_malformed(p);
		}
	}
	if (got < 0)
		return lk__pfr_malformed(p);
	if (!uuid)
		return lk__pfr_refuse(p, "%s", "describes a track without a uuid");
	if (process.data)
		return process_descriptor(p, uuid, &process);
	if (thread.data)
		return thread_descriptor(p, uuid, &thread);
	return child_track(p, uuid, parent, name, counter, counter_type);
}
