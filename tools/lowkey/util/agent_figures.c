// SPDX-License-Identifier: MIT
/*
 * lowkey agent: the figures of a process's named locks and of the counter sets it opened.
 *
 * At each scan the agent asks every process it follows, over the connection it already holds, for
 * its locks (LK_CTL_LOCKS) and its counter sets' readings (LK_CTL_COUNTERS). The process's control
 * thread answers from the lock and counter modules' registries; its other threads never see the
 * request. A reply is a message per lock or per event, then a RESULT.
 *
 * Cardinality is bounded per process as for sites: locks are summed by name, and the first
 * max_locks names met get series of their own, every later one is summed under lock="other";
 * counter sets are told apart by their number in the process, and the first max_sets met get
 * series of their own, the events of every later one summed by name under set="other".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lowkey/lock.h>

#include "agent.h"

#define REPLY_TIMEOUT_MS 10000 /* as agent_check's: a process silent that long is left */
#define UNNAMED "(unnamed)"

/* What one reply brought, copied out of the client's buffer as it came. */
struct raw {
	struct lk__ctl_lock *locks;
	struct lk__ctl_perf *perf;
	size_t n, cap;
};

static void raw_free(struct raw *r, bool locks)
{
	for (size_t i = 0; i < r->n; i++)
		free((char *)(locks ? r->locks[i].name : r->perf[i].event));
	free(locks ? (void *)r->locks : (void *)r->perf);
}

static int raw_add(struct raw *r, const struct lk__ctl_msg *m)
{
	bool lock = m->type == LK_CTL_LOCK;
	size_t size = lock ? sizeof(*r->locks) : sizeof(*r->perf);
	char *copy;

	if (r->n == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 64;
		void *grown = realloc(lock ? (void *)r->locks : (void *)r->perf, cap * size);

		if (!grown)
			return -ENOMEM;
		if (lock)
			r->locks = grown;
		else
			r->perf = grown;
		r->cap = cap;
	}
	copy = strdup(lock ? m->lock.name : m->perf.event);
	if (!copy)
		return -ENOMEM;
	if (lock) {
		r->locks[r->n] = m->lock;
		r->locks[r->n].name = copy;
	} else {
		r->perf[r->n] = m->perf;
		r->perf[r->n].event = copy;
	}
	r->n++;
	return 0;
}

/*
 * Send request type and take its messages of type item into r until its RESULT: 0, or -errno
 * (the process refused, exited, or gave no answer within the bound).
 */
static int ask(struct agent_proc *p, uint16_t type, uint16_t item, struct raw *r)
{
	struct lk__ctl_msg req = { .type = type }, m;
	int64_t deadline = lk__ctl_deadline(REPLY_TIMEOUT_MS);
	char err[256];
	int rc = lk__ctl_send(p->ctl, &req), kept = 0;

	while (!rc) {
		rc = lk__ctl_recv(p->ctl, &m, lk__ctl_left_ms(deadline), err, sizeof(err));
		if (rc)
			break;
		if (m.type == LK_CTL_EXIT)
			return -ECONNRESET;
		if (m.type == LK_CTL_RESULT && m.seq == req.seq)
			return kept ? kept : m.result.err;
		/* out of memory: read on to the RESULT, so the next request finds its own reply */
		if (m.type == item && m.seq == req.seq && !kept)
			kept = raw_add(r, &m);
	}
	return rc;
}

/* ---- locks ---- */

static size_t hash_name(const char *s)
{
	uint64_t h = 14695981039346656037ull; /* FNV-1a */

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return (size_t)h;
}

/* The slot of name in the index: its entry's, or the empty one where it would go. */
static size_t *index_slot(const struct agent_proc *p, const char *name)
{
	size_t mask = p->lock_index_size - 1, i = hash_name(name) & mask;

	while (p->lock_index[i] && strcmp(p->locks[p->lock_index[i] - 1].name, name) != 0)
		i = (i + 1) & mask;
	return &p->lock_index[i];
}

/* An index twice as large for the names there are: 0, or -ENOMEM (the old one kept). */
static int grow_index(struct agent_proc *p)
{
	size_t size = p->lock_index_size ? 2 * p->lock_index_size : 64;
	size_t *old = p->lock_index;

	p->lock_index = calloc(size, sizeof(*p->lock_index));
	if (!p->lock_index) {
		p->lock_index = old;
		return -ENOMEM;
	}
	p->lock_index_size = size;
	for (size_t i = 0; i < p->nlocks; i++)
		*index_slot(p, p->locks[i].name) = i + 1;
	free(old);
	return 0;
}

/*
 * The entry the locks of a name go to: their own, made while the process has fewer than
 * max_locks names, else "other" (*folded). Names keep their entries for the process's life, so a
 * name keeps its series when its locks come back. NULL when out of memory.
 */
static struct agent_lock *place_lock(struct agent *a, struct agent_proc *p, const char *name,
				     bool *folded)
{
	struct agent_lock *grown;
	size_t *slot;

	*folded = false;
	if (strcmp(name, "other") == 0)
		return &p->other_lock; /* its own series would be the fold's: one series, the sum */
	if (!p->lock_index_size && grow_index(p))
		return NULL;
	slot = index_slot(p, name);
	if (*slot)
		return &p->locks[*slot - 1];
	if (p->nlocks >= a->o->max_locks) {
		*folded = true;
		return &p->other_lock;
	}
	grown = realloc(p->locks, (p->nlocks + 1) * sizeof(*grown));
	if (!grown)
		return NULL;
	p->locks = grown;
	p->locks[p->nlocks] = (struct agent_lock){ .name = strdup(name) };
	if (!p->locks[p->nlocks].name)
		return NULL;
	*slot = ++p->nlocks;
	if (2 * p->nlocks >= p->lock_index_size)
		grow_index(p); /* out of memory: the index stays as it is, fuller */
	return &p->locks[p->nlocks - 1];
}

static void add_lock(struct agent_lock *l, const struct lk__ctl_lock *m)
{
	l->acq += m->acquisitions;
	l->read_acq += m->read_acquisitions;
	l->contended += m->contended;
	l->wait_ns += m->wait_ns;
	l->hold_ns += m->hold_ns;
	l->read_hold_ns += m->read_hold_ns;
	l->shared |= m->kind == LK_LOCK_RWLOCK;
	l->present = true;
}

static int by_name(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

/* How many different names the n names hold (sorted here). */
static size_t distinct(const char **names, size_t n)
{
	size_t count = n ? 1 : 0;

	qsort(names, n, sizeof(*names), by_name);
	for (size_t i = 1; i < n; i++)
		count += strcmp(names[i - 1], names[i]) != 0;
	return count;
}

/* The figures of this poll, summed by name; under a->lock. */
static void take_locks(struct agent *a, struct agent_proc *p, const struct raw *r)
{
	const char **folded = malloc((r->n ? r->n : 1) * sizeof(*folded));
	size_t nfolded = 0;

	for (size_t i = 0; i < p->nlocks; i++) {
		char *name = p->locks[i].name;

		p->locks[i] = (struct agent_lock){ .name = name };
	}
	p->other_lock = (struct agent_lock){ .name = p->other_lock.name };
	for (size_t i = 0; i < r->n; i++) {
		const char *name = r->locks[i].name[0] ? r->locks[i].name : UNNAMED;
		bool fold;
		struct agent_lock *l = place_lock(a, p, name, &fold);

		if (!l)
			continue; /* out of memory: left out of this poll */
		add_lock(l, &r->locks[i]);
		if (fold && folded)
			folded[nfolded++] = name;
	}
	p->locks_folded = distinct(folded, nfolded); /* names, not locks */
	free(folded);
}

/* ---- counter sets ---- */

/* The set label of set number n: n itself while it has series of its own, else 0 ("other"). */
static uint32_t place_set(struct agent *a, struct agent_proc *p, uint32_t n)
{
	uint32_t *grown;

	for (size_t i = 0; i < p->nown_sets; i++)
		if (p->own_sets[i] == n)
			return n;
	if (p->nown_sets >= a->o->max_sets)
		return 0;
	grown = realloc(p->own_sets, (p->nown_sets + 1) * sizeof(*grown));
	if (!grown)
		return 0;
	p->own_sets = grown;
	p->own_sets[p->nown_sets++] = n;
	return n;
}

static struct agent_perf *find_perf(struct agent_proc *p, uint32_t set, const char *event)
{
	struct agent_perf *grown;

	for (size_t i = 0; i < p->nperf; i++)
		if (p->perf[i].set == set && strcmp(p->perf[i].event, event) == 0)
			return &p->perf[i];
	grown = realloc(p->perf, (p->nperf + 1) * sizeof(*grown));
	if (!grown)
		return NULL;
	p->perf = grown;
	p->perf[p->nperf] = (struct agent_perf){ .set = set, .event = strdup(event) };
	if (!p->perf[p->nperf].event)
		return NULL;
	return &p->perf[p->nperf++];
}

static void perf_free(struct agent_proc *p)
{
	for (size_t i = 0; i < p->nperf; i++)
		free(p->perf[i].event);
	free(p->perf);
	p->perf = NULL;
	p->nperf = 0;
}

/* The readings of this poll: the events of the sets open now, and nothing of closed ones. */
static void take_perf(struct agent *a, struct agent_proc *p, const struct raw *r)
{
	uint32_t last = 0;

	perf_free(p);
	p->sets_folded = p->nsets = 0;
	for (size_t i = 0; i < r->n; i++) {
		const struct lk__ctl_perf *m = &r->perf[i];
		uint32_t set = place_set(a, p, m->set);
		struct agent_perf *e;

		if (m->set != last) { /* a set's events come together */
			p->nsets++;
			p->sets_folded += set == 0;
			last = m->set;
		}
		e = find_perf(p, set, m->event);
		if (!e)
			continue;
		e->value += m->value;
		e->enabled_ns += m->time_enabled;
		e->running_ns += m->time_running;
	}
}

/* ---- the poll ---- */

void agent_poll_figures(struct agent *a, struct agent_proc *p)
{
	struct raw locks = { 0 }, perf = { 0 };
	int rc;

	if (!p->ctl || p->exiting)
		return;
	rc = ask(p, LK_CTL_LOCKS, LK_CTL_LOCK, &locks);
	if (!rc)
		rc = ask(p, LK_CTL_COUNTERS, LK_CTL_PERF, &perf);
	if (rc == -ECONNRESET || rc == -ETIMEDOUT) {
		p->exiting = true; /* read what is left, as agent_check */
	} else if (!rc) {
		pthread_mutex_lock(&a->lock);
		take_locks(a, p, &locks);
		take_perf(a, p, &perf);
		pthread_mutex_unlock(&a->lock);
	}
	raw_free(&locks, true);
	raw_free(&perf, false);
}

void agent_figures_free(struct agent_proc *p)
{
	for (size_t i = 0; i < p->nlocks; i++)
		free(p->locks[i].name);
	free(p->locks);
	p->locks = NULL;
	p->nlocks = 0;
	free(p->lock_index);
	p->lock_index = NULL;
	p->lock_index_size = 0;
	free(p->own_sets);
	p->own_sets = NULL;
	p->nown_sets = 0;
	perf_free(p);
}

/* ---- the text ---- */

static void put_lock_labels(FILE *f, const struct agent_proc *p, const struct agent_lock *l,
			    const char *mode)
{
	agent_put_proc_labels(f, p);
	fputs(",lock=\"", f);
	agent_put_label(f, l->name ? l->name : "other");
	fputc('"', f);
	if (mode)
		fprintf(f, ",mode=\"%s\"", mode);
}

enum lock_series { ACQ, CONTENDED, WAIT, HOLD };

static void put_lock_samples(FILE *f, const struct agent_proc *p, const struct agent_lock *l,
			     enum lock_series which, const char *name)
{
	switch (which) {
	case ACQ:
	case HOLD:
		fprintf(f, "%s_total{", name);
		put_lock_labels(f, p, l, "exclusive");
		if (which == ACQ)
			fprintf(f, "} %llu\n", (unsigned long long)l->acq);
		else
			fprintf(f, "} %.17g\n", (double)l->hold_ns / 1e9);
		if (!l->shared)
			return;
		fprintf(f, "%s_total{", name);
		put_lock_labels(f, p, l, "shared");
		if (which == ACQ)
			fprintf(f, "} %llu\n", (unsigned long long)l->read_acq);
		else
			fprintf(f, "} %.17g\n", (double)l->read_hold_ns / 1e9);
		return;
	case CONTENDED:
		fprintf(f, "%s_total{", name);
		put_lock_labels(f, p, l, NULL);
		fprintf(f, "} %llu\n", (unsigned long long)l->contended);
		return;
	case WAIT:
		fprintf(f, "%s_total{", name);
		put_lock_labels(f, p, l, NULL);
		fprintf(f, "} %.17g\n", (double)l->wait_ns / 1e9);
		return;
	}
}

static bool has_locks(const struct agent_proc *p)
{
	for (size_t i = 0; i < p->nlocks; i++)
		if (p->locks[i].present)
			return true;
	return p->other_lock.present;
}

static void put_lock_family(FILE *f, struct agent *a, bool om, enum lock_series which)
{
	static const struct family fams[] = {
		[ACQ] = { "lowkey_lock_acquisitions", "counter", NULL,
			  "Acquisitions of the process's named locks, per name and mode" },
		[CONTENDED] = { "lowkey_lock_contended", "counter", NULL,
				"Acquisitions that found the lock taken and waited" },
		[WAIT] = { "lowkey_lock_wait_seconds", "counter", "seconds",
			   "Time spent waiting for the locks, all waits together" },
		[HOLD] = { "lowkey_lock_hold_seconds", "counter", "seconds",
			   "Time the locks were held, per mode (sampled holds: mean x acquisitions)" },
	};

	agent_put_family(f, &fams[which], om);
	for (size_t i = 0; i < a->nprocs; i++) {
		const struct agent_proc *p = a->procs[i];

		if (!agent_shown(p))
			continue;
		for (size_t k = 0; k < p->nlocks; k++)
			if (p->locks[k].present)
				put_lock_samples(f, p, &p->locks[k], which, fams[which].name);
		if (p->other_lock.present)
			put_lock_samples(f, p, &p->other_lock, which, fams[which].name);
	}
}

enum perf_series { VALUE, ENABLED, RUNNING };

static void put_perf_family(FILE *f, struct agent *a, bool om, enum perf_series which)
{
	static const struct family fams[] = {
		[VALUE] = { "lowkey_perf_event_count", "counter", NULL,
			    "Counts of the perf events of the counter sets the process opened, "
			    "unscaled (task-clock and cpu-clock in ns)" },
		[ENABLED] = { "lowkey_perf_event_enabled_seconds", "counter", "seconds",
			      "Time each event was enabled (summed over the threads it counts)" },
		[RUNNING] = { "lowkey_perf_event_running_seconds", "counter", "seconds",
			      "Time each event was counting: less than enabled when multiplexed" },
	};

	agent_put_family(f, &fams[which], om);
	for (size_t i = 0; i < a->nprocs; i++) {
		const struct agent_proc *p = a->procs[i];

		for (size_t k = 0; agent_shown(p) && k < p->nperf; k++) {
			const struct agent_perf *e = &p->perf[k];

			fprintf(f, "%s_total{", fams[which].name);
			agent_put_proc_labels(f, p);
			if (e->set)
				fprintf(f, ",set=\"%u\",event=\"", e->set);
			else
				fputs(",set=\"other\",event=\"", f);
			agent_put_label(f, e->event);
			if (which == VALUE)
				fprintf(f, "\"} %llu\n", (unsigned long long)e->value);
			else
				fprintf(f, "\"} %.17g\n",
					(double)(which == ENABLED ? e->enabled_ns : e->running_ns) /
						1e9);
		}
	}
}

static void put_folded(FILE *f, struct agent *a, bool om)
{
	static const struct family locks = {
		"lowkey_agent_locks_folded", "gauge", NULL,
		"Lock names of the process counted under the lock other (past --max-locks)"
	};
	static const struct family sets = {
		"lowkey_agent_perf_sets_folded", "gauge", NULL,
		"Counter sets of the process counted under the set other (past --max-counter-sets)"
	};

	agent_put_family(f, &locks, om);
	for (size_t i = 0; i < a->nprocs; i++) {
		if (!agent_shown(a->procs[i]) || !has_locks(a->procs[i]))
			continue;
		fputs("lowkey_agent_locks_folded{", f);
		agent_put_proc_labels(f, a->procs[i]);
		fprintf(f, "} %llu\n", (unsigned long long)a->procs[i]->locks_folded);
	}
	agent_put_family(f, &sets, om);
	for (size_t i = 0; i < a->nprocs; i++) {
		if (!agent_shown(a->procs[i]) || !a->procs[i]->nsets)
			continue;
		fputs("lowkey_agent_perf_sets_folded{", f);
		agent_put_proc_labels(f, a->procs[i]);
		fprintf(f, "} %llu\n", (unsigned long long)a->procs[i]->sets_folded);
	}
}

void agent_figures_render(struct agent *a, FILE *f, bool openmetrics)
{
	put_lock_family(f, a, openmetrics, ACQ);
	put_lock_family(f, a, openmetrics, CONTENDED);
	put_lock_family(f, a, openmetrics, WAIT);
	put_lock_family(f, a, openmetrics, HOLD);
	put_perf_family(f, a, openmetrics, VALUE);
	put_perf_family(f, a, openmetrics, ENABLED);
	put_perf_family(f, a, openmetrics, RUNNING);
	put_folded(f, a, openmetrics);
}
