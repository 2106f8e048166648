// SPDX-License-Identifier: MIT
/*
 * lowkey agent --otlp: which spans are exported (docs/fleet.md, "Sampling").
 *
 * --sample GLOB=RATE: each site of each process exports num of every den of its spans (an event
 * is a zero-length span: the same), by a counter rather than a hash. Each span adds num to the
 * site's credit and is exported when the credit reaches den, which is then taken off; the credit
 * starts at den - num, so a site's first span is exported and, of its first n, exactly
 * ceil(n * num / den). The counts are exact and reproducible, so what /metrics counts as sampled
 * out is exactly what the collector misses; a hash of the span's thread and times would give the
 * same rate on average with a binomial count. The counter's one bias: spans of one site that
 * repeat with a period sharing a factor with den are sampled in step with it.
 *
 * --slow S,W: tail sampling, in the agent. It reads every event as it is written, so the spans of
 * the last moments held in its memory are a flight recorder one hop from the process, at no cost
 * to it. A span longer than S is slow: it and every span (or event) of its process overlapping
 * [its start - W, its end + W] are exported, no other. A span ends before it is known to be in a
 * window still to come (a slow span that is still open), so it is held, and decided when either
 *   - a window covering it becomes known: exported, at once; or
 *   - none can come any more: sampled out. A slow span covering it starts before its end + W
 *     and is known slow once open for S, seen here at most GRACE after (the process writes its
 *     rings out every --flush-ms; the agent reads twice as often): past its end + W + S + GRACE
 *     no window can take it.
 * An open span is slow as soon as it has been open for S, before its end: its window then stays
 * open ([start - W, forever)) until it ends. So a span is held at most W + S + GRACE, and a
 * recorder holds at most RECORDER_MAX of them: past it, its oldest is decided early (sampled
 * out, counted in lowkey_agent_otlp_recorder_full_total). Windows that overlap are merged; a
 * held span leaves the recorder once, exported or not, so none is exported twice.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent.h"
#include "internal/probe.h"
#include "otlp.h"
#include "otlp_internal.h"

#define RECORDER_MAX (1u << 18) /* spans a process's recorder holds */
#define NONE UINT64_MAX

/* A site's rate and where its count stands (by class id). */
struct agent_keep {
	uint64_t num, den; /* 0/0: not looked up yet */
	uint64_t credit;
};

struct held {
	struct otlp_item *it;
	uint64_t until; /* CLOCK_REALTIME ns past which no window can take it */
	uint32_t site;	/* its index in the process's sites; UINT32_MAX: none */
};

struct window {
	uint64_t from, to; /* CLOCK_REALTIME ns */
};

struct agent_recorder {
	struct held *v; /* a ring, oldest first: head, n, cap */
	size_t head, n, cap;
	struct window *w; /* the ended slow spans', sorted, disjoint */
	size_t nw, capw;
	uint64_t open_from; /* the earliest window of a slow span still open; NONE */
};

static uint64_t ns_of(double s)
{
	return (uint64_t)(s * 1e9 + 0.5);
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* How late a span is read after it ended, at most (docs/fleet.md: what is lost). */
static uint64_t grace_ns(const struct agent *a)
{
	return 1000000000u + 2000000ull * a->o->flush_ms;
}

static void count_out(struct agent *a, struct agent_proc *p, uint32_t site, enum agent_sampled why)
{
	if (site < p->nsites)
		p->sites[site].sampled_out[why]++;
	a->sampled_out[why]++;
}

/* ---- --sample ---- */

static struct agent_keep *keep_of(struct agent *a, struct agent_proc *p,
				  const struct lk__event_class *cls)
{
	struct agent_keep *k;

	if (cls->id >= p->nkeep) {
		size_t n = cls->id + 1 > 2 * p->nkeep ? cls->id + 1 : 2 * p->nkeep;
		struct agent_keep *grown = realloc(p->keep, n * sizeof(*grown));

		if (!grown)
			return NULL;
		memset(grown + p->nkeep, 0, (n - p->nkeep) * sizeof(*grown));
		p->keep = grown;
		p->nkeep = n;
	}
	k = &p->keep[cls->id];
	if (!k->den) {
		k->num = k->den = 1;
		for (int i = 0; i < a->o->nrates; i++)
			if (lk__probe_glob_matches(a->o->rates[i].glob, cls->provider,
						   cls->event)) {
				k->num = a->o->rates[i].num;
				k->den = a->o->rates[i].den;
				break;
			}
		k->credit = k->den - k->num;
	}
	return k;
}

static bool rate_keeps(struct agent_keep *k)
{
	if (!k || k->num == k->den)
		return true; /* out of memory: as without --sample */
	k->credit += k->num;
	if (k->credit < k->den)
		return false;
	k->credit -= k->den;
	return true;
}

/* ---- --slow ---- */

static void send(struct agent *a, struct agent_proc *p, const struct otlp_span *s)
{
	if (p->otlp_res)
		otlp_export(a->otlp, p->otlp_res, s); /* false: dropped, and counted there */
}

static void item_free(struct otlp_item *it)
{
	otlp_resource_put(it->res);
	free(it);
}

static struct held *held_at(struct agent_recorder *rec, size_t i)
{
	return &rec->v[(rec->head + i) % rec->cap];
}

/* The oldest held span, decided: sampled out. */
static void release_oldest(struct agent *a, struct agent_proc *p)
{
	struct agent_recorder *rec = p->rec;
	struct held *h = held_at(rec, 0);

	count_out(a, p, h->site, AGENT_SAMPLED_TAIL);
	item_free(h->it);
	rec->head = (rec->head + 1) % rec->cap;
	rec->n--;
}

static bool overlaps(const struct otlp_span *s, uint64_t from, uint64_t to)
{
	return s->end_unix_ns >= from && s->start_unix_ns <= to;
}

/* The held spans [from, to] overlaps exported, the rest kept in their order. */
static void take_window(struct agent *a, struct agent_proc *p, uint64_t from, uint64_t to)
{
	struct agent_recorder *rec = p->rec;
	size_t kept = 0;

	for (size_t i = 0; i < rec->n; i++) {
		struct held h = *held_at(rec, i);

		if (overlaps(&h.it->span, from, to)) {
			otlp_export(a->otlp, h.it->res, &h.it->span);
			item_free(h.it);
		} else {
			*held_at(rec, kept++) = h;
		}
	}
	rec->n = kept;
}

static bool in_window(const struct agent_recorder *rec, const struct otlp_span *s)
{
	if (s->end_unix_ns >= rec->open_from)
		return true;
	for (size_t i = rec->nw; i-- > 0;) /* the latest first: the likeliest */
		if (overlaps(s, rec->w[i].from, rec->w[i].to))
			return true;
	return false;
}

/* [from, to] in the windows, merged with those it overlaps; false if they covered it already. */
static bool add_window(struct agent_recorder *rec, uint64_t from, uint64_t to)
{
	struct window nw = { from, to };
	size_t kept = 0, at;

	for (size_t i = 0; i < rec->nw; i++)
		if (rec->w[i].from <= from && to <= rec->w[i].to)
			return false;
	for (size_t i = 0; i < rec->nw; i++) {
		struct window w = rec->w[i];

		if (w.from <= nw.to && w.to >= nw.from) {
			nw.from = w.from < nw.from ? w.from : nw.from;
			nw.to = w.to > nw.to ? w.to : nw.to;
		} else {
			rec->w[kept++] = w;
		}
	}
	rec->nw = kept;
	if (rec->nw == rec->capw) {
		size_t cap = rec->capw ? 2 * rec->capw : 8;
		struct window *grown = realloc(rec->w, cap * sizeof(*grown));

		if (!grown)
			return true; /* its spans are taken, later ones not: fewer exported */
		rec->w = grown;
		rec->capw = cap;
	}
	for (at = rec->nw; at > 0 && rec->w[at - 1].from > nw.from; at--)
		rec->w[at] = rec->w[at - 1];
	rec->w[at] = nw;
	rec->nw++;
	return true;
}

static bool grow_ring(struct agent_recorder *rec)
{
	size_t cap = rec->cap ? 2 * rec->cap : 1024;
	struct held *v;

	if (cap > RECORDER_MAX || !(v = malloc(cap * sizeof(*v))))
		return false;
	for (size_t i = 0; i < rec->n; i++)
		v[i] = *held_at(rec, i);
	free(rec->v);
	rec->v = v;
	rec->cap = cap;
	rec->head = 0;
	return true;
}

static void hold(struct agent *a, struct agent_proc *p, uint32_t site, const struct otlp_span *s)
{
	struct agent_recorder *rec = p->rec;
	struct otlp_item *it;

	if (!p->otlp_res)
		return;
	if (rec->n == rec->cap && !grow_ring(rec)) {
		if (!rec->n) {
			send(a, p, s); /* no recorder at all: exported, as without --slow */
			return;
		}
		release_oldest(a, p);
		a->recorder_full++;
	}
	it = otlp_item_new(p->otlp_res, s);
	if (!it) {
		send(a, p, s); /* out of memory: dropped there, and counted */
		return;
	}
	*held_at(rec, rec->n++) = (struct held){
		.it = it,
		.until = s->end_unix_ns + ns_of(a->o->window_s + a->o->slow_s) + grace_ns(a),
		.site = site,
	};
}

static struct agent_recorder *new_recorder(void)
{
	struct agent_recorder *rec = calloc(1, sizeof(*rec));

	if (rec)
		rec->open_from = NONE;
	return rec; /* NULL: spans exported as without --slow */
}

void agent_sample(struct agent *a, struct agent_proc *p, const struct lk__event_class *cls,
		  const struct otlp_span *s)
{
	struct agent_site *site = agent_site_of(a, p, cls);
	uint32_t si = site ? (uint32_t)(site - p->sites) : UINT32_MAX;
	uint64_t w = ns_of(a->o->window_s);
	bool slow = a->o->slow_s > 0 && !s->is_event && s->end_unix_ns > s->start_unix_ns &&
		    s->end_unix_ns - s->start_unix_ns > ns_of(a->o->slow_s);

	if (!slow && a->o->nrates && !rate_keeps(keep_of(a, p, cls))) {
		count_out(a, p, si, AGENT_SAMPLED_RATE);
		return;
	}
	if (a->o->slow_s > 0 && !p->rec)
		p->rec = new_recorder();
	if (!p->rec || slow || in_window(p->rec, s)) {
		if (slow && p->rec &&
		    add_window(p->rec, s->start_unix_ns > w ? s->start_unix_ns - w : 0,
			       s->end_unix_ns + w))
			take_window(a, p, s->start_unix_ns > w ? s->start_unix_ns - w : 0,
				    s->end_unix_ns + w);
		send(a, p, s);
		return;
	}
	hold(a, p, si, s);
}

static void open_from_streams(struct agent_proc *p)
{
	p->rec->open_from = NONE;
	for (size_t i = 0; i < p->nstreams; i++)
		if (p->streams[i].slow_from && p->streams[i].slow_from < p->rec->open_from)
			p->rec->open_from = p->streams[i].slow_from;
}

void agent_sample_outer_end(struct agent_proc *p, struct agent_stream *st)
{
	if (!p->rec || !st->slow_from)
		return;
	st->slow_from = 0; /* its own window has come, as the span ended */
	open_from_streams(p);
}

/* Open spans that have run for longer than --slow: slow, their windows open from now on. */
static void find_open_slow(struct agent *a, struct agent_proc *p, uint64_t now)
{
	uint64_t w = ns_of(a->o->window_s), was = p->rec->open_from;

	for (size_t i = 0; i < p->nstreams; i++) {
		struct agent_stream *st = &p->streams[i];
		uint64_t start;

		st->slow_from = 0;
		if (!st->open.depth || !p->have_reader)
			continue;
		start = agent_otlp_unix_ns(&p->r, st->open.v[0].tsc);
		if (now > start + ns_of(a->o->slow_s))
			st->slow_from = start > w ? start - w : 1;
	}
	open_from_streams(p);
	if (p->rec->open_from < was)
		take_window(a, p, p->rec->open_from, NONE);
}

/* Windows that no span still to be read can overlap. */
static void prune_windows(struct agent *a, struct agent_recorder *rec, uint64_t now)
{
	uint64_t horizon = 2 * (grace_ns(a) + ns_of(a->o->slow_s + a->o->window_s));
	size_t kept = 0;

	for (size_t i = 0; i < rec->nw; i++)
		if (rec->w[i].to + horizon >= now)
			rec->w[kept++] = rec->w[i];
	rec->nw = kept;
}

void agent_sample_pass(struct agent *a, struct agent_proc *p)
{
	uint64_t now = realtime_ns();

	if (!p->rec)
		return;
	if (!p->exited)
		find_open_slow(a, p, now);
	while (p->rec->n && (p->exited || held_at(p->rec, 0)->until <= now))
		release_oldest(a, p);
	prune_windows(a, p->rec, now);
}

void agent_sample_free(struct agent *a, struct agent_proc *p)
{
	if (p->rec) {
		while (p->rec->n)
			release_oldest(a, p);
		free(p->rec->v);
		free(p->rec->w);
		free(p->rec);
		p->rec = NULL;
	}
	free(p->keep);
	p->keep = NULL;
	p->nkeep = 0;
}

/* ---- /metrics ---- */

static void put_sampled(FILE *f, struct agent *a, enum agent_sampled why)
{
	static const char *const reason[] = { "rate", "tail" };

	for (size_t i = 0; i < a->nprocs; i++) {
		const struct agent_proc *p = a->procs[i];

		for (size_t k = 0; agent_shown(p) && k < p->nsites; k++) {
			if (p->sites[k].is_counter)
				continue;
			fputs("lowkey_agent_otlp_spans_sampled_out_total{", f);
			agent_put_site_labels(f, p, &p->sites[k]);
			fprintf(f, ",reason=\"%s\"} %" PRIu64 "\n", reason[why],
				p->sites[k].sampled_out[why]);
		}
	}
}

void agent_sample_render(struct agent *a, FILE *f, bool openmetrics)
{
	const char *total = openmetrics ? "" : "_total";
	uint64_t held = 0;

	if (!a->o->nrates && !(a->o->slow_s > 0))
		return;
	fprintf(f,
		"# HELP lowkey_agent_otlp_spans_sampled_out%s Spans and events not exported for "
		"sampling: reason=\"rate\" (--sample), reason=\"tail\" (--slow: outside every slow "
		"span's window)\n# TYPE lowkey_agent_otlp_spans_sampled_out%s counter\n",
		total, total);
	if (a->o->nrates)
		put_sampled(f, a, AGENT_SAMPLED_RATE);
	if (!(a->o->slow_s > 0))
		return;
	put_sampled(f, a, AGENT_SAMPLED_TAIL);
	for (size_t i = 0; i < a->nprocs; i++)
		held += a->procs[i]->rec ? a->procs[i]->rec->n : 0;
	fprintf(f,
		"# HELP lowkey_agent_otlp_spans_held Spans held by --slow until known in or out of "
		"a slow span's window\n# TYPE lowkey_agent_otlp_spans_held gauge\n"
		"lowkey_agent_otlp_spans_held %" PRIu64 "\n",
		held);
	fprintf(f,
		"# HELP lowkey_agent_otlp_recorder_full%s Held spans sampled out early: their "
		"process's recorder was full\n# TYPE lowkey_agent_otlp_recorder_full%s counter\n"
		"lowkey_agent_otlp_recorder_full_total %" PRIu64 "\n",
		total, total, a->recorder_full);
}
