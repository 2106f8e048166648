// SPDX-License-Identifier: MIT
/*
 * lowkey agent: the series of each process and their text for /metrics.
 *
 * A site is one provider:event of one process. Cardinality is bounded per process: its first
 * max_sites sites get series of their own, every later one is folded into site="other" (and
 * counted in lowkey_agent_sites_folded), so a process brings at most max_sites + 1 sites, each
 * with a fixed number of series (a counter, a gauge, and one or two histograms of nbuckets + 3).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lowkey/probe.h>

#include "agent.h"
#include "internal/utf8.h"

static struct agent_site *new_site(struct agent *a, struct agent_proc *p, const char *name)
{
	struct agent_site *grown = realloc(p->sites, (p->nsites + 1) * sizeof(*grown)), *s;
	size_t nb = a->o->nbuckets + 1;

	if (!grown)
		return NULL;
	p->sites = grown;
	s = &p->sites[p->nsites];
	*s = (struct agent_site){ .name = strdup(name) };
	s->wall.n = calloc(nb, sizeof(uint64_t));
	s->cpu.n = calloc(nb, sizeof(uint64_t));
	if (!s->name || !s->wall.n || !s->cpu.n) {
		free(s->name);
		free(s->wall.n);
		free(s->cpu.n);
		return NULL;
	}
	p->nsites++;
	return s;
}

static long find_site(const struct agent_proc *p, const char *name)
{
	for (size_t i = 0; i < p->nsites; i++)
		if (strcmp(p->sites[i].name, name) == 0)
			return (long)i;
	return -1;
}

/* The site a new name goes to: its own, or "other" once the process has max_sites. */
static long place_site(struct agent *a, struct agent_proc *p, const char *name)
{
	long i = find_site(p, name);
	size_t own = p->nsites - (p->other >= 0);

	if (i >= 0)
		return i;
	if (own < a->o->max_sites)
		return new_site(a, p, name) ? (long)p->nsites - 1 : -1;
	p->folded++;
	if (p->other < 0 && new_site(a, p, "other"))
		p->other = (long)p->nsites - 1;
	return p->other;
}

struct agent_site *agent_site_of(struct agent *a, struct agent_proc *p,
				 const struct lk__event_class *cls)
{
	char name[2 * 256 + 2];
	long i;

	if (cls->id >= p->nsite_of) {
		size_t n = cls->id + 1 > 2 * p->nsite_of ? cls->id + 1 : 2 * p->nsite_of;
		uint32_t *grown = realloc(p->site_of, n * sizeof(*grown));

		if (!grown)
			return NULL;
		memset(grown + p->nsite_of, 0, (n - p->nsite_of) * sizeof(*grown));
		p->site_of = grown;
		p->nsite_of = n;
	}
	if (p->site_of[cls->id])
		return &p->sites[p->site_of[cls->id] - 1];
	snprintf(name, sizeof(name), "%s:%s", cls->provider, cls->event);
	i = place_site(a, p, name);
	if (i < 0)
		return NULL;
	p->site_of[cls->id] = (uint32_t)i + 1;
	return &p->sites[i];
}

void agent_hist_add(const struct agent_opts *o, struct agent_hist *h, double v)
{
	size_t i = 0;

	while (i < o->nbuckets && v > o->buckets[i])
		i++;
	h->n[i]++;
	h->count++;
	h->sum += v;
}

void agent_sites_free(struct agent_proc *p)
{
	for (size_t i = 0; i < p->nsites; i++) {
		free(p->sites[i].name);
		free(p->sites[i].wall.n);
		free(p->sites[i].cpu.n);
	}
	free(p->sites);
	free(p->site_of);
	p->sites = NULL;
	p->site_of = NULL;
	p->nsites = p->nsite_of = 0;
}

/* ---- the text ---- */

/*
 * A label's value: backslash, double quote and line feed escaped, as both formats want; a byte
 * that starts no UTF-8 sequence (a process may name itself anything) replaced by U+FFFD.
 */
void agent_put_label(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t n = strlen(str);

	for (size_t i = 0; i < n;) {
		size_t k = lk__utf8_sequence(s + i, n - i);

		if (!k) {
			fputs(LK__UTF8_REPLACEMENT, f);
			i++;
			continue;
		}
		if (s[i] == '\\' || s[i] == '"')
			fputc('\\', f);
		if (s[i] == '\n')
			fputs("\\n", f);
		else
			fwrite(s + i, 1, k, f);
		i += k;
	}
}

void agent_put_proc_labels(FILE *f, const struct agent_proc *p)
{
	fprintf(f, "pid=\"%d\",process=\"", (int)p->pid);
	agent_put_label(f, p->name);
	fputc('"', f);
}

void agent_put_site_labels(FILE *f, const struct agent_proc *p, const struct agent_site *s)
{
	agent_put_proc_labels(f, p);
	fputs(",site=\"", f);
	agent_put_label(f, s->name);
	fputc('"', f);
}

/*
 * The family's header. OpenMetrics names a counter's family without its _total, which only its
 * samples carry; Prometheus' 0.0.4 text names it as its samples.
 */
void agent_put_family(FILE *f, const struct family *fam, bool om)
{
	bool counter = strcmp(fam->type, "counter") == 0;
	const char *total = counter && !om ? "_total" : "";

	fprintf(f, "# HELP %s%s %s\n# TYPE %s%s %s\n", fam->name, total, fam->help, fam->name,
		total, fam->type);
	if (om && fam->unit)
		fprintf(f, "# UNIT %s %s\n", fam->name, fam->unit);
}

bool agent_shown(const struct agent_proc *p)
{
	return !p->exited || p->scrapes_since_exit == 0;
}

static void put_hist(FILE *f, const struct agent *a, const char *name, const struct agent_proc *p,
		     const struct agent_site *s, const struct agent_hist *h)
{
	uint64_t below = 0;

	for (size_t i = 0; i <= a->o->nbuckets; i++) {
		below += h->n[i];
		fprintf(f, "%s_bucket{", name);
		agent_put_site_labels(f, p, s);
		if (i < a->o->nbuckets)
			fprintf(f, ",le=\"%.15g\"} %llu\n", a->o->buckets[i],
				(unsigned long long)below);
		else
			fprintf(f, ",le=\"+Inf\"} %llu\n", (unsigned long long)below);
	}
	fprintf(f, "%s_sum{", name);
	agent_put_site_labels(f, p, s);
	fprintf(f, "} %.17g\n%s_count{", h->sum, name);
	agent_put_site_labels(f, p, s);
	fprintf(f, "} %llu\n", (unsigned long long)h->count);
}

/* --locks-dir: the tables read, those of ended processes in their last scrape left out. */
static void put_tables(FILE *f, struct agent *a)
{
	size_t n = 0;

	for (size_t i = 0; i < a->ntables; i++)
		n += !a->tables[i]->gone;
	fprintf(f,
		"# HELP lowkey_agent_lock_tables Processes whose liblowkey-locks.so table the agent "
		"reads (--locks-dir)\n# TYPE lowkey_agent_lock_tables gauge\n"
		"lowkey_agent_lock_tables %zu\n",
		n);
}

static void put_process_families(FILE *f, struct agent *a, bool om)
{
	static const struct family attached = { "lowkey_process_attached", "gauge", NULL,
						"1 while the agent follows the process; 0 in the "
						"last scrape after it exited" };
	static const struct family lost = { "lowkey_events_lost", "counter", NULL,
					    "Events the process's threads dropped (full rings)" };
	static const struct family folded = {
		"lowkey_agent_sites_folded", "gauge", NULL,
		"Event classes of the process counted under the site other (past --max-sites)"
	};
	size_t shown_n = 0;

	agent_put_family(f, &attached, om);
	for (size_t i = 0; i < a->nprocs; i++) {
		if (!agent_shown(a->procs[i]))
			continue;
		fputs("lowkey_process_attached{", f);
		agent_put_proc_labels(f, a->procs[i]);
		fprintf(f, "} %d\n", !a->procs[i]->exited);
		shown_n += !a->procs[i]->exited;
	}
	agent_put_family(f, &lost, om);
	for (size_t i = 0; i < a->nprocs; i++) {
		if (!agent_shown(a->procs[i]))
			continue;
		fputs("lowkey_events_lost_total{", f);
		agent_put_proc_labels(f, a->procs[i]);
		fprintf(f, "} %llu\n", (unsigned long long)a->procs[i]->lost);
	}
	agent_put_family(f, &folded, om);
	for (size_t i = 0; i < a->nprocs; i++) {
		if (!agent_shown(a->procs[i]))
			continue;
		fputs("lowkey_agent_sites_folded{", f);
		agent_put_proc_labels(f, a->procs[i]);
		fprintf(f, "} %llu\n", (unsigned long long)a->procs[i]->folded);
	}
	fprintf(f,
		"# HELP lowkey_agent_processes Processes the agent follows\n"
		"# TYPE lowkey_agent_processes gauge\nlowkey_agent_processes %zu\n",
		shown_n);
	fprintf(f,
		"# HELP lowkey_agent_attach_failures%s Processes with a control socket the agent "
		"could not attach to\n# TYPE lowkey_agent_attach_failures%s counter\n"
		"lowkey_agent_attach_failures_total %llu\n",
		om ? "" : "_total", om ? "" : "_total", (unsigned long long)a->attach_failures);
	if (a->o->locks_dir)
		put_tables(f, a);
}

enum site_series { EVENTS, COUNTER, WALL, CPU };

static void put_site_family(FILE *f, struct agent *a, bool om, enum site_series which)
{
	static const struct family fams[] = {
		[EVENTS] = { "lowkey_events", "counter", NULL,
			     "Events recorded, per site (a span's begin and end are two)" },
		[COUNTER] = { "lowkey_counter", "gauge", NULL,
			      "The last value of each LK_COUNTER track" },
		[WALL] = { "lowkey_span_duration_seconds", "histogram", "seconds",
			   "Spans' wall-clock durations" },
		[CPU] = { "lowkey_span_cpu_seconds", "histogram", "seconds",
			  "Spans' thread CPU time (traces recorded with --cputime)" },
	};
	const struct family *fam = &fams[which];

	if (which == CPU && !a->o->cputime)
		return;
	agent_put_family(f, fam, om);
	for (size_t i = 0; i < a->nprocs; i++) {
		const struct agent_proc *p = a->procs[i];

		for (size_t k = 0; agent_shown(p) && k < p->nsites; k++) {
			const struct agent_site *s = &p->sites[k];

			if (which == EVENTS) {
				fputs("lowkey_events_total{", f);
				agent_put_site_labels(f, p, s);
				fprintf(f, "} %llu\n", (unsigned long long)s->events);
			} else if (which == COUNTER && s->is_counter) {
				fputs("lowkey_counter{", f);
				agent_put_site_labels(f, p, s);
				fprintf(f, "} %.17g\n", s->value);
			} else if (which >= WALL && s->has_spans) {
				put_hist(f, a, fam->name, p, s, which == WALL ? &s->wall : &s->cpu);
			}
		}
	}
}

char *agent_render(struct agent *a, bool openmetrics, size_t *len)
{
	char *text = NULL;
	FILE *f = open_memstream(&text, len);
	bool bad;

	if (!f)
		return NULL;
	pthread_mutex_lock(&a->lock);
	put_process_families(f, a, openmetrics);
	put_site_family(f, a, openmetrics, EVENTS);
	put_site_family(f, a, openmetrics, COUNTER);
	put_site_family(f, a, openmetrics, WALL);
	put_site_family(f, a, openmetrics, CPU);
	agent_figures_render(a, f, openmetrics);
#ifdef LK_HAVE_OTLP
	agent_otlp_render(a, f, openmetrics);
#endif
	for (size_t i = 0; i < a->nprocs; i++)
		if (a->procs[i]->exited)
			a->procs[i]->scrapes_since_exit++;
	for (size_t i = 0; i < a->ntables; i++)
		if (a->tables[i]->gone)
			a->tables[i]->scrapes_since_gone++;
	pthread_mutex_unlock(&a->lock);
	if (openmetrics)
		fputs("# EOF\n", f);
	bad = ferror(f);
	if (fclose(f) != 0 || bad) {
		free(text);
		return NULL;
	}
	return text;
}
