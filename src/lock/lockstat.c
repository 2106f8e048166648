// SPDX-License-Identifier: MIT
/*
 * The registry of named locks, their statistics, and the report.
 *
 * A lock joins the registry at init, or at its first acquisition when statically initialized
 * (lk__lock_first_use, called by the acquiring thread), and leaves it at destroy. The registry is a
 * list under one mutex; only init, first use, destroy and the readers below take it, never a lock
 * or unlock. Figures are read with relaxed loads while the locks are in use.
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>

#include "core/env.h"
#include "core/error.h"
#include "internal/json.h"
#include "internal/lock.h"
#include "lock/lock_internal.h"

#define DEFAULT_HOLD_PERIOD 16

LK_API uint64_t lk__hold_threshold = UINT64_MAX / DEFAULT_HOLD_PERIOD;
static unsigned int hold_period = DEFAULT_HOLD_PERIOD;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct lk__lockmeta registry = { .next = &registry, .prev = &registry };

static void fork_prepare(void)
{
	pthread_mutex_lock(&registry_lock);
}

static void fork_release(void)
{
	pthread_mutex_unlock(&registry_lock);
}

/*
 * The registry is held across fork(): a thread that reads it (the control socket's server, for a
 * tracer asking for the locks' figures) must not leave a child its mutex taken.
 */
__attribute__((constructor)) static void registry_atfork(void)
{
	pthread_atfork(fork_prepare, fork_release, fork_release);
}

__attribute__((constructor)) static void hold_sampling_from_env(void)
{
	const char *v = lk__env("LOWKEY_LOCK_HOLD_SAMPLING");
	char *end;
	unsigned long period;

	if (!v)
		return;
	period = strtoul(v, &end, 10);
	if (*end == 0 && period > 0 && period <= UINT32_MAX)
		lk_lockstat_set_hold_sampling((unsigned int)period);
}

LK_API int lk_lockstat_set_hold_sampling(unsigned int period)
{
	unsigned int old;

	if (period == 0)
		return lk__fail(
			-EINVAL,
			"hold sampling period 0: pass 1 to time every hold, N to time one in N");
	old = __atomic_exchange_n(&hold_period, period, __ATOMIC_RELAXED);
	__atomic_store_n(&lk__hold_threshold, period == 1 ? UINT64_MAX : UINT64_MAX / period,
			 __ATOMIC_RELAXED);
	return (int)old;
}

LK_API void lk__lock_first_use(struct lk__lockmeta *meta)
{
	if (__atomic_load_n(&meta->registered, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&registry_lock);
	if (!meta->registered) {
		LK__ST(meta->created, lk__lock_ticks());
		meta->next = &registry;
		meta->prev = registry.prev;
		registry.prev->next = meta;
		registry.prev = meta;
		__atomic_store_n(&meta->registered, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&registry_lock);
}

void lk__lock_unregister(struct lk__lockmeta *meta)
{
	pthread_mutex_lock(&registry_lock);
	if (meta->registered) {
		meta->prev->next = meta->next;
		meta->next->prev = meta->prev;
		meta->next = meta->prev = NULL;
		__atomic_store_n(&meta->registered, 0, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&registry_lock);
}

void lk__lockmeta_init(struct lk__lockmeta *meta, const char *name, enum lk_lock_kind kind)
{
	meta->name = name;
	meta->kind = (uint16_t)kind;
	lk__lock_first_use(meta);
}

/* ---- snapshots ---- */

static uint64_t mean(uint64_t total, uint64_t n)
{
	return n ? (total + n / 2) / n : 0;
}

static void hold_figures(const struct lk__hold *h, uint64_t acquisitions, uint64_t *samples,
			 uint64_t *total_ns, uint64_t *max_ns, uint64_t *mean_ns)
{
	uint64_t n = LK__LD(h->samples), total = LK__LD(h->total);
	double mean_ticks = n ? (double)total / (double)n : 0;

	*samples = n;
	/* converted before rounding: a tick is 0.3 ns on x86 but 16 to 42 ns on arm64's timer */
	*mean_ns = (uint64_t)(mean_ticks / lk__ticks_per_ns() + 0.5);
	*max_ns = lk__ticks_to_ns(LK__LD(h->max));
	/* every hold timed: the exact sum; sampled: the mean over the acquisitions */
	*total_ns = n >= acquisitions ?
			    lk__ticks_to_ns(total) :
			    lk__ticks_to_ns((uint64_t)(mean_ticks * (double)acquisitions));
}

/* cpus: the online CPUs (get_nprocs(), which reads a file: once per snapshot, not per lock) */
static void meta_figures(const struct lk__lockmeta *meta, const void *lock, int cpus,
			 struct lk_lockstat *out)
{
	uint64_t now = lk__lock_ticks(), created = LK__LD(meta->created);
	uint64_t wait = LK__LD(meta->wait_total);

	out->name = meta->name ? meta->name : "";
	out->lock = lock;
	out->kind = (enum lk_lock_kind)meta->kind;
	out->contended = LK__LD(meta->contended);
	out->wait_total_ns = lk__ticks_to_ns(wait);
	out->wait_max_ns = lk__ticks_to_ns(LK__LD(meta->wait_max));
	out->wait_mean_ns = mean(out->wait_total_ns, out->contended);
	out->lifetime_ns = created && now > created ? lk__ticks_to_ns(now - created) : 0;
	out->wait_fraction = out->lifetime_ns ?
				     (double)out->wait_total_ns /
					     ((double)out->lifetime_ns * (cpus > 0 ? cpus : 1)) :
				     0;
}

static void exclusive_figures(uint64_t acq, uint64_t changes, const struct lk__hold *hold,
			      struct lk_lockstat *out)
{
	out->acquisitions = acq;
	out->owner_changes = changes;
	hold_figures(hold, acq, &out->hold_samples, &out->hold_total_ns, &out->hold_max_ns,
		     &out->hold_mean_ns);
}

static void mutex_stat(const lk_mutex_t *m, int cpus, struct lk_lockstat *out)
{
	memset(out, 0, sizeof(*out));
	meta_figures(&m->lk__meta, m, cpus, out);
	out->kind = LK_LOCK_MUTEX;
	exclusive_figures(LK__LD(m->lk__acq), LK__LD(m->lk__owner_changes), &m->lk__hold, out);
}

static void spinlock_stat(const lk_spinlock_t *s, int cpus, struct lk_lockstat *out)
{
	memset(out, 0, sizeof(*out));
	meta_figures(&s->lk__meta, s, cpus, out);
	out->kind = LK_LOCK_SPINLOCK;
	exclusive_figures(LK__LD(s->lk__acq), LK__LD(s->lk__owner_changes), &s->lk__hold, out);
}

static void rwlock_stat(const lk_rwlock_t *l, int cpus, struct lk_lockstat *out)
{
	memset(out, 0, sizeof(*out));
	meta_figures(&l->lk__meta, l, cpus, out);
	out->kind = LK_LOCK_RWLOCK;
	exclusive_figures(LK__LD(l->lk__acq), LK__LD(l->lk__owner_changes), &l->lk__hold, out);
	out->read_acquisitions = LK__LD(l->lk__read_acq);
	hold_figures(&l->lk__read_hold, out->read_acquisitions, &out->read_hold_samples,
		     &out->read_hold_total_ns, &out->read_hold_max_ns, &out->read_hold_mean_ns);
}

LK_API int lk_mutex_stat(const lk_mutex_t *m, struct lk_lockstat *out)
{
	if (!m || !out)
		return lk__fail(-EINVAL, "lk_mutex_stat: NULL %s", m ? "out" : "lock");
	mutex_stat(m, get_nprocs(), out);
	return 0;
}

LK_API int lk_spinlock_stat(const lk_spinlock_t *s, struct lk_lockstat *out)
{
	if (!s || !out)
		return lk__fail(-EINVAL, "lk_spinlock_stat: NULL %s", s ? "out" : "lock");
	spinlock_stat(s, get_nprocs(), out);
	return 0;
}

LK_API int lk_rwlock_stat(const lk_rwlock_t *l, struct lk_lockstat *out)
{
	if (!l || !out)
		return lk__fail(-EINVAL, "lk_rwlock_stat: NULL %s", l ? "out" : "lock");
	rwlock_stat(l, get_nprocs(), out);
	return 0;
}

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

static void meta_stat(const struct lk__lockmeta *meta, int cpus, struct lk_lockstat *out)
{
	switch (meta->kind) {
	case LK_LOCK_MUTEX:
		mutex_stat(container_of(meta, lk_mutex_t, lk__meta), cpus, out);
		break;
	case LK_LOCK_SPINLOCK:
		spinlock_stat(container_of(meta, lk_spinlock_t, lk__meta), cpus, out);
		break;
	case LK_LOCK_RWLOCK:
		rwlock_stat(container_of(meta, lk_rwlock_t, lk__meta), cpus, out);
		break;
	}
}

/* Copy every registered lock's figures; *n set to their count. NULL with *n 0 when none. */
static int snapshot(struct lk_lockstat **out, size_t *n)
{
	size_t count = 0, i = 0;
	struct lk_lockstat *v;
	int cpus = get_nprocs();

	lk__ticks_per_ns(); /* may sleep to calibrate: not under the registry lock */
	pthread_mutex_lock(&registry_lock);
	for (struct lk__lockmeta *m = registry.next; m != &registry; m = m->next)
		count++;
	v = count ? calloc(count, sizeof(*v)) : NULL;
	if (count && !v) {
		pthread_mutex_unlock(&registry_lock);
		return lk__fail(-ENOMEM, "no memory to copy the figures of %zu locks", count);
	}
	for (struct lk__lockmeta *m = registry.next; m != &registry; m = m->next)
		meta_stat(m, cpus, &v[i++]);
	pthread_mutex_unlock(&registry_lock);
	*out = v;
	*n = count;
	return 0;
}

LK_API int lk_lockstat_foreach(int (*fn)(const struct lk_lockstat *stat, void *arg), void *arg)
{
	struct lk_lockstat *v;
	size_t n;
	int ret;

	if (!fn)
		return lk__fail(-EINVAL, "lk_lockstat_foreach: NULL callback");
	ret = snapshot(&v, &n);
	if (ret)
		return ret;
	for (size_t i = 0; i < n && ret == 0; i++)
		ret = fn(&v[i], arg);
	free(v);
	return ret;
}

/* ---- the report ---- */

static int by_wait(const void *a, const void *b)
{
	const struct lk_lockstat *x = a, *y = b;

	if (x->wait_total_ns != y->wait_total_ns)
		return x->wait_total_ns < y->wait_total_ns ? 1 : -1;
	if (x->acquisitions + x->read_acquisitions != y->acquisitions + y->read_acquisitions)
		return x->acquisitions + x->read_acquisitions <
				       y->acquisitions + y->read_acquisitions ?
			       1 :
			       -1;
	return strcmp(x->name, y->name);
}

static const char *kind_name(enum lk_lock_kind kind)
{
	switch (kind) {
	case LK_LOCK_MUTEX:
		return "mutex";
	case LK_LOCK_RWLOCK:
		return "rwlock";
	case LK_LOCK_SPINLOCK:
		return "spinlock";
	}
	return "?";
}

const char *lk__lock_duration(char *buf, size_t len, uint64_t ns, int decimals)
{
	if (ns < 1000)
		snprintf(buf, len, "%luns", (unsigned long)ns);
	else if (ns < 1000000)
		snprintf(buf, len, "%.*fus", decimals, (double)ns / 1e3);
	else if (ns < 1000000000)
		snprintf(buf, len, "%.*fms", decimals, (double)ns / 1e6);
	else
		snprintf(buf, len, "%.2fs", (double)ns / 1e9);
	return buf;
}

/* "812ns", "4.21us", "17.03ms", "2.50s" */
static const char *duration(char *buf, size_t len, uint64_t ns)
{
	return lk__lock_duration(buf, len, ns, 2);
}

static void lock_json(struct lk__json *j, const struct lk_lockstat *s)
{
	lk__json_object_line(j, NULL);
	lk__json_str_or_null(j, "name", s->name);
	lk__json_strf(j, "address", "%p", s->lock);
	lk__json_str(j, "kind", kind_name(s->kind));
	lk__json_uint(j, "acquisitions", s->acquisitions);
	lk__json_uint(j, "read_acquisitions", s->read_acquisitions);
	lk__json_uint(j, "contended", s->contended);
	lk__json_uint(j, "wait_total_ns", s->wait_total_ns);
	lk__json_uint(j, "wait_max_ns", s->wait_max_ns);
	lk__json_uint(j, "wait_mean_ns", s->wait_mean_ns);
	lk__json_uint(j, "hold_samples", s->hold_samples);
	lk__json_uint(j, "hold_total_ns", s->hold_total_ns);
	lk__json_uint(j, "hold_max_ns", s->hold_max_ns);
	lk__json_uint(j, "hold_mean_ns", s->hold_mean_ns);
	lk__json_uint(j, "read_hold_samples", s->read_hold_samples);
	lk__json_uint(j, "read_hold_total_ns", s->read_hold_total_ns);
	lk__json_uint(j, "read_hold_max_ns", s->read_hold_max_ns);
	lk__json_uint(j, "read_hold_mean_ns", s->read_hold_mean_ns);
	lk__json_uint(j, "owner_changes", s->owner_changes);
	lk__json_uint(j, "lifetime_ns", s->lifetime_ns);
	lk__json_num(j, "wait_fraction", s->wait_fraction);
	lk__json_close(j);
}

static void report_json(FILE *out, const struct lk_lockstat *v, size_t n)
{
	struct lk__json j;

	lk__json_begin(&j, out, false);
	lk__json_uint(&j, "hold_sampling", __atomic_load_n(&hold_period, __ATOMIC_RELAXED));
	lk__json_array(&j, "locks");
	for (size_t i = 0; i < n; i++)
		lock_json(&j, &v[i]);
	lk__json_close(&j);
	lk__json_end(&j);
}

static void report_table(FILE *out, const struct lk_lockstat *v, size_t n)
{
	char a[16], b[16], c[16], d[16], e[16], f[16];

	fprintf(out, "%-24s %-8s %12s %10s %7s %9s %9s %9s %9s %9s %9s %10s %9s\n", "lock", "kind",
		"acquired", "contended", "%", "wait tot", "wait max", "wait avg", "hold tot",
		"hold max", "hold avg", "owner chg", "1/1000cpu");
	for (size_t i = 0; i < n; i++) {
		const struct lk_lockstat *s = &v[i];
		uint64_t acq = s->acquisitions + s->read_acquisitions;
		char label[64];

		if (s->name[0])
			snprintf(label, sizeof(label), "%s", s->name);
		else
			snprintf(label, sizeof(label), "%p", s->lock);
		fprintf(out, "%-24s %-8s %12lu %10lu %6.2f%% %9s %9s %9s %9s %9s %9s %10lu %9.3f\n",
			label, kind_name(s->kind), (unsigned long)acq, (unsigned long)s->contended,
			acq ? 100.0 * (double)s->contended / (double)acq : 0.0,
			duration(a, sizeof(a), s->wait_total_ns),
			duration(b, sizeof(b), s->wait_max_ns),
			duration(c, sizeof(c), s->wait_mean_ns),
			duration(d, sizeof(d), s->hold_total_ns),
			duration(e, sizeof(e), s->hold_max_ns),
			duration(f, sizeof(f), s->hold_mean_ns), (unsigned long)s->owner_changes,
			1000.0 * s->wait_fraction);
		if (s->kind == LK_LOCK_RWLOCK && s->read_acquisitions)
			fprintf(out, "%-24s %-8s %12lu %10s %7s %9s %9s %9s %9s %9s %9s\n", "",
				"(reads)", (unsigned long)s->read_acquisitions, "", "", "", "", "",
				duration(d, sizeof(d), s->read_hold_total_ns),
				duration(e, sizeof(e), s->read_hold_max_ns),
				duration(f, sizeof(f), s->read_hold_mean_ns));
	}
	fprintf(out, "hold times: one hold in %u timed%s\n",
		__atomic_load_n(&hold_period, __ATOMIC_RELAXED),
		__atomic_load_n(&hold_period, __ATOMIC_RELAXED) == 1 ?
			" (exact)" :
			"; totals are mean x acquisitions");
}

LK_API int lk_lockstat_report(FILE *out, unsigned int flags)
{
	struct lk_lockstat *v;
	size_t n, kept = 0;
	int ret;

	if (!out || (flags & ~(LK_LOCKSTAT_JSON | LK_LOCKSTAT_CONTENDED)))
		return lk__fail(-EINVAL,
				out ? "lk_lockstat_report: unknown flags 0x%x" :
				      "lk_lockstat_report: NULL FILE",
				flags);
	ret = snapshot(&v, &n);
	if (ret)
		return ret;
	for (size_t i = 0; i < n; i++)
		if (!(flags & LK_LOCKSTAT_CONTENDED) || v[i].contended)
			v[kept++] = v[i];
	if (kept)
		qsort(v, kept, sizeof(*v), by_wait);
	if (flags & LK_LOCKSTAT_JSON)
		report_json(out, v, kept);
	else
		report_table(out, v, kept);
	free(v);
	if (fflush(out) != 0 || ferror(out))
		return lk__fail(-EIO, "lk_lockstat_report: writing the report failed: %s",
				strerror(errno));
	return 0;
}
