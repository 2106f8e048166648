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
static size_t *index_slot(const struct agent_lockset *set, const char *name)
{
	size_t mask = set->index_size - 1, i = hash_name(name) & mask;

	while (set->index[i] && strcmp(set->locks[set->index[i] - 1].name, name) != 0)
		i = (i + 1) & mask;
	return &set->index[i];
}

/* An index twice as large for the names there are: 0, or -ENOMEM (the old one kept). */
static int grow_index(struct agent_lockset *set)
{
	size_t size = set->index_size ? 2 * set->index_size : 64;
	size_t *old = set->index;

	set->index = calloc(size, sizeof(*set->index));
	if (!set->index) {
		set->index = old;
		return -ENOMEM;
	}
	set->index_size = size;
	for (size_t i = 0; i < set->nlocks; i++)
		*index_slot(set, set->locks[i].name) = i + 1;
	free(old);
	return 0;
}

struct agent_lock *agent_place_lock(struct agent *a, struct agent_lockset *set, const char *name,
				    bool *folded)
{
	struct agent_lock *grown;
	size_t *slot;

	*folded = false;
	if (strcmp(name, "other") == 0)
		return &set->other; /* its own series would be the fold's: one series, the sum */
	if (!set->index_size && grow_index(set))
		return NULL;
	slot = index_slot(set, name);
	if (*slot)
		return &set->locks[*slot - 1];
	if (set->nlocks >= a->o->max_locks) {
		*folded = true;
		return &set->other;
	}
	grown = realloc(set->locks, (set->nlocks + 1) * sizeof(*grown));
	if (!grown)
		return NULL;
	set->locks = grown;
	set->locks[set->nlocks] = (struct agent_lock){ .name = strdup(name) };
	if (!set->locks[set->nlocks].name)
		return NULL;
	*slot = ++set->nlocks;
	if (2 * set->nlocks >= set->index_size)
		grow_index(set); /* out of memory: the index stays as it is, fuller */
	return &set->locks[set->nlocks - 1];
}

void agent_lockset_clear(struct agent_lockset *set)
{
	for (size_t i = 0; i < set->nlocks; i++) {
		char *name = set->locks[i].name;

		set->locks[i] = (struct agent_lock){ .name = name };
	}
	set->other = (struct agent_lock){ .name = set->other.name };
	set->folded = 0;
}

void agent_lockset_free(struct agent_lockset *set)
{
	for (size_t i = 0; i < set->nlocks; i++)
		free(set->locks[i].name);
	free(set->locks);
	free(set->index);
	*set = (struct agent_lockset){ 0 };
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

	agent_lockset_clear(&p->locks);
	for (size_t i = 0; i < r->n; i++) {
		const char *name = r->locks[i].name[0] ? r->locks[i].name : UNNAMED;
		bool fold;
		struct agent_lock *l = agent_place_lock(a, &p->locks, name, &fold);

		if (!l)
			continue; /* out of memory: left out of this poll */
		add_lock(l, &r->locks[i]);
		if (fold && folded)
			folded[nfolded++] = name;
	}
	p->locks.folded = distinct(folded, nfolded); /* names, not locks */
	free(folded);
}

void agent_table_free(struct agent_table *t)
{
	agent_lockset_free(&t->locks);
	free(t->names);
	free(t);
}

bool agent_table_shown(const struct agent_table *t)
{
	return !t->gone || t->scrapes_since_gone == 0;
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
	agent_lockset_free(&p->locks);
	free(p->own_sets);
	p->own_sets = NULL;
	p->nown_sets = 0;
	perf_free(p);
}

/* ---- the text ---- */

/* Whose locks: a followed process's named locks, or a table's (source="preload"). */
struct lock_owner {
	pid_t pid;
	const char *process, *source;
	const struct agent_lockset *set;
};

static void put_lock_labels(FILE *f, const struct lock_owner *o, const struct agent_lock *l,
			    const char *mode)
{
	fprintf(f, "pid=\"%d\",process=\"", (int)o->pid);
	agent_put_label(f, o->process);
	fputc('"', f);
	if (o->source)
		fprintf(f, ",source=\"%s\"", o->source);
	fputs(",lock=\"", f);
	agent_put_label(f, l->name ? l->name : "other");
	fputc('"', f);
	if (mode)
		fprintf(f, ",mode=\"%s\"", mode);
}

enum lock_series { ACQ, CONTENDED, WAIT, HOLD };

static void put_lock_samples(FILE *f, const struct lock_owner *o, const struct agent_lock *l,
			     enum lock_series which, const char *name)
{
	switch (which) {
	case ACQ:
	case HOLD:
		fprintf(f, "%s_total{", name);
		put_lock_labels(f, o, l, "exclusive");
		if (which == ACQ)
			fprintf(f, "} %llu\n", (unsigned long long)l->acq);
		else
			fprintf(f, "} %.17g\n", (double)l->hold_ns / 1e9);
		if (!l->shared)
			return;
		fprintf(f, "%s_total{", name);
		put_lock_labels(f, o, l, "shared");
		if (which == ACQ)
			fprintf(f, "} %llu\n", (unsigned long long)l->read_acq);
		else
			fprintf(f, "} %.17g\n", (double)l->read_hold_ns / 1e9);
		return;
	case CONTENDED:
		fprintf(f, "%s_total{", name);
		put_lock_labels(f, o, l, NULL);
		fprintf(f, "} %llu\n", (unsigned long long)l->contended);
		return;
	case WAIT:
		fprintf(f, "%s_total{", name);
		put_lock_labels(f, o, l, NULL);
		fprintf(f, "} %.17g\n", (double)l->wait_ns / 1e9);
		return;
	}
}

static bool has_locks(const struct agent_lockset *set)
{
	for (size_t i = 0; i < set->nlocks; i++)
		if (set->locks[i].present)
			return true;
	return set->other.present;
}

static void put_owner_locks(FILE *f, const struct lock_owner *o, enum lock_series which,
			    const char *name)
{
	for (size_t k = 0; k < o->set->nlocks; k++)
		if (o->set->locks[k].present)
			put_lock_samples(f, o, &o->set->locks[k], which, name);
	if (o->set->other.present)
		put_lock_samples(f, o, &o->set->other, which, name);
}

static struct lock_owner proc_owner(const struct agent_proc *p)
{
	return (struct lock_owner){ p->pid, p->name, NULL, &p->locks };
}

static struct lock_owner table_owner(const struct agent_table *t)
{
	return (struct lock_owner){ t->pid, t->name, "preload", &t->locks };
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
		struct lock_owner o = proc_owner(a->procs[i]);

		if (agent_shown(a->procs[i]))
			put_owner_locks(f, &o, which, fams[which].name);
	}
	for (size_t i = 0; i < a->ntables; i++) {
		struct lock_owner o = table_owner(a->tables[i]);

		if (agent_table_shown(a->tables[i]))
			put_owner_locks(f, &o, which, fams[which].name);
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
		if (!agent_shown(a->procs[i]) || !has_locks(&a->procs[i]->locks))
			continue;
		fputs("lowkey_agent_locks_folded{", f);
		agent_put_proc_labels(f, a->procs[i]);
		fprintf(f, "} %llu\n", (unsigned long long)a->procs[i]->locks.folded);
	}
	for (size_t i = 0; i < a->ntables; i++) {
		const struct agent_table *t = a->tables[i];

		if (!agent_table_shown(t) || !has_locks(&t->locks))
			continue;
		fprintf(f, "lowkey_agent_locks_folded{pid=\"%d\",process=\"", (int)t->pid);
		agent_put_label(f, t->name);
		fprintf(f, "\",source=\"preload\"} %llu\n", (unsigned long long)t->locks.folded);
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
