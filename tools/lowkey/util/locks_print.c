// SPDX-License-Identifier: MIT
/*
 * lowkey locks: the report of each process, as text (a table, most waited-for lock first, with
 * the call sites) and as JSON (every figure; locks_html.c draws its page from it).
 */
#include <stdio.h>
#include <sys/wait.h>

#include "internal/json.h"
#include "internal/lock.h"
#include "internal/utf8.h"
#include "locks.h"

static const char *ending_name(enum lks_ending e)
{
	static const char *const names[] = { "exit", "exec", "_exit", "signal", "_exit or signal" };

	return names[e];
}

/* What the summary line says about the end: nothing for a plain exit. */
static const char *ending_note(enum lks_ending e)
{
	static const char *const notes[] = {
		"",
		" [exec'd another program]",
		" [ended by _exit(): no exit handlers ran]",
		" [killed by a signal]",
		" [ended without exit handlers: _exit() or a signal]",
	};

	return notes[e];
}

/* The names come from the program's files: escaped (lk__text_escape). */
const char *lks_site_string(const struct lks_site *site, char *buf, size_t len)
{
	char raw[1024];

	if (!site->address)
		snprintf(raw, sizeof(raw), "?");
	else if (site->function[0] && site->file[0])
		snprintf(raw, sizeof(raw), "%s (%s:%d)", site->function, site->file, site->line);
	else if (site->function[0])
		snprintf(raw, sizeof(raw), "%s (%s)", site->function, site->module);
	else if (site->module[0])
		snprintf(raw, sizeof(raw), "%s+0x%lx", site->module, (unsigned long)site->offset);
	else
		snprintf(raw, sizeof(raw), "0x%lx", (unsigned long)site->address);
	return lk__text_escape(raw, buf, len);
}

const char *lks_kind_name(enum lkl_kind k)
{
	static const char *const names[] = { "mutex", "rwlock", "spinlock", "semaphore" };

	return names[k & LKL_KIND_MASK];
}

/* "812ns", "4.2us", "17.0ms", "2.50s" */
static const char *duration(char *buf, size_t len, uint64_t ns)
{
	return lk__lock_duration(buf, len, ns, 1);
}

static double per_mille_cpu(uint64_t wait_ns, const struct lks_proc *p)
{
	uint32_t cpus = p->h->cpus ? p->h->cpus : 1;

	return p->duration_ns ? 1000.0 * (double)wait_ns / ((double)p->duration_ns * cpus) : 0;
}

static size_t shown(const struct lks_proc *p, long top)
{
	return top > 0 && (size_t)top < p->nrows ? (size_t)top : p->nrows;
}

/* ---- text ---- */

static void print_summary(FILE *out, const struct lks_proc *p)
{
	const struct lkl_header *h = p->h;
	char a[16], b[16], name[4 * sizeof(h->exe)];

	fprintf(out,
		"\nlowkey locks: %s (pid %u)%s, %s on %u CPUs: %lu lock%s, %lu acquisitions, %lu contended (%.2f%%), "
		"%s waiting = %.1f/1000 of CPU time\n",
		lk__text_escape(h->comm[0] ? h->comm : h->exe, name, sizeof(name)), h->pid,
		ending_note(p->ended), duration(a, sizeof(a), p->duration_ns), h->cpus,
		(unsigned long)p->nlocks, p->nlocks == 1 ? "" : "s", (unsigned long)p->acquisitions,
		(unsigned long)p->contended,
		p->acquisitions ? 100.0 * (double)p->contended / (double)p->acquisitions : 0,
		duration(b, sizeof(b), p->wait_ns), per_mille_cpu(p->wait_ns, p));
}

/* Row i of the table, and its line of call site and details. */
static void print_row(FILE *out, const struct lks_proc *p, size_t i)
{
	const struct lks_row *r = &p->rows[i];
	const struct lkl_entry *e = r->e;
	char a[16], b[16], c[16], d[16], e2[16], f[16], site[400], first[400], label[64];

	snprintf(label, sizeof(label), "%s %#lx%s", lks_kind_name(r->kind),
		 (unsigned long)r->address, r->destroyed ? " (gone)" : "");
	fprintf(out, "%3zu %-28s %10lu %9lu %5.1f%% %9s %9s %9s %9s %9s %9s %8lu %8.2f\n", i + 1,
		label, (unsigned long)r->acquisitions, (unsigned long)e->contended,
		r->acquisitions ? 100.0 * (double)e->contended / (double)r->acquisitions : 0,
		duration(a, sizeof(a), r->wait_ns), duration(b, sizeof(b), r->wait_max_ns),
		duration(c, sizeof(c), r->wait_mean_ns), duration(d, sizeof(d), r->hold_ns),
		duration(e2, sizeof(e2), r->hold_max_ns), duration(f, sizeof(f), r->hold_mean_ns),
		(unsigned long)e->owner_changes, per_mille_cpu(r->wait_ns, p));
	if (e->site)
		fprintf(out, "    contended first at %s",
			lks_site_string(&r->site, site, sizeof(site)));
	else
		fprintf(out, "    never contended; first taken at %s",
			lks_site_string(&r->first_site, first, sizeof(first)));
	if (r->kind == LKL_RWLOCK)
		fprintf(out, "; %lu reads (held %s, max %s), %lu writes",
			(unsigned long)e->read_acquisitions,
			duration(a, sizeof(a), r->read_hold_ns),
			duration(b, sizeof(b), r->read_hold_max_ns),
			(unsigned long)e->acquisitions);
	if (e->cond_reacquires)
		fprintf(out, "; %lu re-taken by condition waits",
			(unsigned long)e->cond_reacquires);
	if (e->try_fails)
		fprintf(out, "; %lu failed try-locks", (unsigned long)e->try_fails);
	if (r->kind == LKL_SEM)
		fprintf(out, "; %lu posts", (unsigned long)e->posts);
	fputc('\n', out);
}

/* Of the rows from first on, those never contended. */
static size_t uncontended_from(const struct lks_proc *p, size_t first)
{
	size_t n = 0;

	for (size_t i = first; i < p->nrows; i++)
		n += !p->rows[i].e->contended;
	return n;
}

/* What the table leaves out, and how hold times were taken. */
static void print_notes(FILE *out, const struct lks_proc *p, size_t n)
{
	const struct lkl_header *h = p->h;

	if (n < p->nrows)
		fprintf(out,
			"    %zu more lock%s not listed, %zu of them never contended: --all lists every lock\n",
			p->nrows - n, p->nrows - n == 1 ? "" : "s", uncontended_from(p, n));
	if (h->folded_locks)
		fprintf(out,
			"    %lu destroyed locks never contended were summed, not listed (%lu acquisitions): the table was half full; raise --max-locks\n",
			(unsigned long)h->folded_locks, (unsigned long)h->folded_acquisitions);
	if (h->untracked)
		fprintf(out,
			"    %lu acquisitions of locks beyond the table's %u entries were not counted: raise --max-locks\n",
			(unsigned long)h->untracked, h->capacity);
	if (h->hold_period > 1)
		fprintf(out,
			"    hold times: one hold in %u timed, totals are mean x acquisitions (--hold-sampling 1 times all)\n",
			h->hold_period);
}

void lks_print_text(FILE *out, const struct lks_proc *p, const struct lks_view *v)
{
	size_t n = shown(p, v->top);

	print_summary(out, p);
	if (!n)
		return;
	fprintf(out, "%3s %-28s %10s %9s %6s %9s %9s %9s %9s %9s %9s %8s %8s\n", "#", "lock",
		"acquired", "contended", "%", "wait tot", "wait max", "wait avg", "hold tot",
		"hold max", "hold avg", "owners", "1/1000");
	for (size_t i = 0; i < n; i++)
		print_row(out, p, i);
	print_notes(out, p, n);
}

/* ---- JSON ---- */

static void json_site(struct lk__json *j, const char *key, const struct lks_site *s)
{
	char addr[32];

	if (!s->address) {
		lk__json_null(j, key);
		return;
	}
	lk__json_object(j, key);
	snprintf(addr, sizeof(addr), "%#lx", (unsigned long)s->address);
	lk__json_str(j, "address", addr);
	lk__json_str(j, "module", s->module);
	lk__json_int(j, "offset", (long long)s->offset);
	if (s->function[0])
		lk__json_str(j, "function", s->function);
	else
		lk__json_null(j, "function");
	if (s->file[0]) {
		lk__json_str(j, "file", s->file);
		lk__json_int(j, "line", s->line);
	}
	lk__json_close(j);
}

static void json_row(struct lk__json *j, const struct lks_proc *p, const struct lks_row *r)
{
	const struct lkl_entry *e = r->e;
	char addr[32];

	lk__json_object(j, NULL);
	lk__json_str(j, "kind", lks_kind_name(r->kind));
	snprintf(addr, sizeof(addr), "%#lx", (unsigned long)r->address);
	lk__json_str(j, "address", addr);
	lk__json_bool(j, "destroyed", r->destroyed);
	json_site(j, "site", &r->site);
	json_site(j, "first_site", &r->first_site);
	lk__json_int(j, "acquisitions", (long long)r->acquisitions);
	lk__json_int(j, "read_acquisitions", (long long)e->read_acquisitions);
	lk__json_int(j, "contended", (long long)e->contended);
	lk__json_num(j, "contended_pct",
		     r->acquisitions ? 100.0 * (double)e->contended / (double)r->acquisitions : 0);
	lk__json_int(j, "wait_total_ns", (long long)r->wait_ns);
	lk__json_int(j, "wait_max_ns", (long long)r->wait_max_ns);
	lk__json_int(j, "wait_mean_ns", (long long)r->wait_mean_ns);
	lk__json_int(j, "hold_samples", (long long)e->hold_samples);
	lk__json_int(j, "hold_total_ns", (long long)r->hold_ns);
	lk__json_int(j, "hold_max_ns", (long long)r->hold_max_ns);
	lk__json_int(j, "hold_mean_ns", (long long)r->hold_mean_ns);
	lk__json_int(j, "read_hold_total_ns", (long long)r->read_hold_ns);
	lk__json_int(j, "read_hold_max_ns", (long long)r->read_hold_max_ns);
	lk__json_int(j, "owner_changes", (long long)e->owner_changes);
	lk__json_int(j, "cond_reacquires", (long long)e->cond_reacquires);
	lk__json_int(j, "failed_trylocks", (long long)e->try_fails);
	lk__json_int(j, "posts", (long long)e->posts);
	lk__json_num(j, "wait_per_mille_cpu", per_mille_cpu(r->wait_ns, p));
	lk__json_close(j);
}

static void json_proc(struct lk__json *j, const struct lks_proc *p, long top)
{
	const struct lkl_header *h = p->h;
	size_t n = shown(p, top);

	lk__json_object(j, NULL);
	lk__json_int(j, "pid", h->pid);
	lk__json_int(j, "ppid", h->ppid);
	lk__json_str(j, "command", h->comm);
	lk__json_str(j, "executable", h->exe);
	lk__json_bool(j, "exited", h->flags & LKL_F_EXITED);
	lk__json_str(j, "ended", ending_name(p->ended));
	lk__json_int(j, "duration_ns", (long long)p->duration_ns);
	lk__json_int(j, "cpus", h->cpus);
	lk__json_int(j, "hold_sampling", h->hold_period);
	lk__json_int(j, "locks", (long long)p->nlocks);
	lk__json_int(j, "acquisitions", (long long)p->acquisitions);
	lk__json_int(j, "contended", (long long)p->contended);
	lk__json_int(j, "wait_total_ns", (long long)p->wait_ns);
	lk__json_num(j, "wait_per_mille_cpu", per_mille_cpu(p->wait_ns, p));
	lk__json_int(j, "untracked_acquisitions", (long long)h->untracked);
	lk__json_int(j, "destroyed_uncontended_locks", (long long)h->folded_locks);
	lk__json_int(j, "listed", (long long)n);
	lk__json_int(j, "left_out", (long long)(p->nrows - n));
	lk__json_int(j, "left_out_uncontended", (long long)uncontended_from(p, n));
	lk__json_array(j, "top");
	for (size_t i = 0; i < n; i++)
		json_row(j, p, &p->rows[i]);
	lk__json_close(j);
	lk__json_close(j);
}

void lks_write_json(FILE *out, const struct lks_proc *procs, size_t n, const struct lks_view *v,
		    int status, const char *cmd)
{
	struct lk__json j;

	lk__json_begin(&j, out, false);
	lk__json_str(&j, "command", cmd);
	lk__json_str(&j, "sort", lks_sort_name(v->sort));
	lk__json_int(&j, "counter_hz", (long long)v->counter_hz);
	if (WIFEXITED(status))
		lk__json_int(&j, "exit_status", WEXITSTATUS(status));
	else
		lk__json_int(&j, "signal", WTERMSIG(status));
	lk__json_array(&j, "processes");
	for (size_t i = 0; i < n; i++)
		json_proc(&j, &procs[i], v->top);
	lk__json_close(&j);
	lk__json_end(&j);
}
