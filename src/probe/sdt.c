// SPDX-License-Identifier: MIT
/*
 * USDT: sites on for tracers outside lowkey (perf, bpftrace, SystemTap).
 *
 * Every site carries an SDT note (lowkey/probe.h) whose probe point is on the path that runs only
 * while the site's key is on. A site is on for an external tracer, with or without a lowkey trace,
 * when
 *  - a USDT rule selects it (lk_probe_usdt_enable, `lowkey enable --pid`), or
 *  - one of its semaphores is above zero: the kernel increments a semaphore while a uprobe that
 *    names it (ref_ctr_offset) is attached, as bpftrace and perf do.
 * The kernel says nothing when it increments a semaphore, so the library reads them: whenever it
 * applies rules anyway (a rule added, a trace started or stopped, an object loaded while tracing),
 * at each USDT request on the control socket, on lk_probe_usdt_poll(), and every
 * LK__USDT_WATCH_DEFAULT_MS on a thread of its own (the watcher), started when the first object
 * with USDT sites registers (LOWKEY_USDT_WATCH=MS sets the interval, 0 starts none;
 * lk_probe_usdt_watch() starts, changes or stops it from the program). The sites themselves never
 * look at a semaphore: docs/probe.md says why a thread polls.
 */
#include <errno.h>
#include <fnmatch.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/env.h"
#include "core/error.h"
#include "probe/sdt_internal.h"

static struct lk__rule_list usdt_rules;

/* By site index (id - LK__FIRST_SITE_ID): a semaphore of the site was above zero at the last scan. */
static bool *attached;
static size_t nattached;

/* An entry of __lk_probe_sdt: offsets, each from its own field, of the site's slot and of a semaphore. */
struct sdt_entry {
	int64_t slot;
	int64_t semaphore;
};

static struct lk_probe_site *entry_site(const struct sdt_entry *e)
{
	struct lk_probe_site *const *slot =
		(struct lk_probe_site *const *)((const char *)&e->slot + e->slot);

	return *slot;
}

static unsigned short entry_semaphore(const struct sdt_entry *e)
{
	const unsigned short *sem =
		(const unsigned short *)((const char *)&e->semaphore + e->semaphore);

	return __atomic_load_n(sem,
			       __ATOMIC_RELAXED); /* the kernel writes it from another context */
}

/* The index of a registered site, or -1 (an object's site registered with another object's). */
static long site_index(const struct lk_probe_site *s, const struct lk__probe_site_rt *sites,
		       size_t n)
{
	size_t i = s->id - LK__FIRST_SITE_ID;

	if (s->magic != LK__PROBE_MAGIC || s->id < LK__FIRST_SITE_ID || i >= n ||
	    sites[i].site != s)
		return -1;
	return (long)i;
}

static void scan_object(const struct lk__dso_rt *dso, bool *now,
			const struct lk__probe_site_rt *sites, size_t n)
{
	const struct sdt_entry *e = dso->desc->sdt_sites.start;
	const struct sdt_entry *end = dso->desc->sdt_sites.stop;

	if (!e || !end)
		return;
	for (; e < end; e++) {
		long i;

		if (!entry_semaphore(e))
			continue;
		i = site_index(entry_site(e), sites, n);
		if (i >= 0)
			now[i] = true;
	}
}

void lk__sdt_scan_locked(void)
{
	size_t n;
	const struct lk__probe_site_rt *sites = lk__probe_sites(&n);
	bool *now;

	if (n == 0)
		return;
	now = calloc(n, sizeof(*now));
	if (!now)
		return; /* keep what the last scan saw */
	for (const struct lk__dso_rt *d = lk__dso_list(); d; d = d->next)
		scan_object(d, now, sites, n);
	free(attached);
	attached = now;
	nattached = n;
}

bool lk__sdt_attached_locked(const struct lk__probe_site_rt *rt)
{
	size_t n, i;
	const struct lk__probe_site_rt *sites = lk__probe_sites(&n);

	i = (size_t)(rt - sites);
	return i < nattached && attached[i];
}

bool lk__sdt_wanted_locked(const struct lk__probe_site_rt *rt)
{
	return lk__sdt_attached_locked(rt) || lk__rules_select(&usdt_rules, rt);
}

LK_API int lk_probe_usdt_enable(const char *glob)
{
	return lk__rules_add(&usdt_rules, glob, true, "lk_probe_usdt_enable");
}

LK_API int lk_probe_usdt_disable(const char *glob)
{
	return lk__rules_add(&usdt_rules, glob, false, "lk_probe_usdt_disable");
}

LK_API int lk_probe_usdt_reset_rules(void)
{
	return lk__rules_reset(&usdt_rules);
}

static int count_attached(void)
{
	int n = 0;

	for (size_t i = 0; i < nattached; i++)
		n += attached[i];
	return n;
}

LK_API int lk_probe_usdt_poll(void)
{
	int err;

	lk__registry_lock();
	err = lk__probe_apply_rules_locked(lk__probe_tracing()); /* scans the semaphores first */
	if (!err)
		err = count_attached();
	lk__registry_unlock();
	return err;
}

/* ---- the watcher ---- */

static pthread_mutex_t watch_control = PTHREAD_MUTEX_INITIALIZER; /* one caller at a time */
static pthread_mutex_t watch_mutex = PTHREAD_MUTEX_INITIALIZER;	  /* the thread's wait */
static pthread_cond_t watch_cond;
static pthread_once_t watch_once = PTHREAD_ONCE_INIT;
static pthread_t watcher;
static bool watching, watch_stop;
static bool watch_chosen; /* lk_probe_usdt_watch was called: no default start after it */
static unsigned int watch_ms;
static pid_t watcher_tid; /* set by the thread before watch_start returns; 0: none */

static void watch_cond_init(void)
{
	pthread_condattr_t attr;

	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&watch_cond, &attr);
	pthread_condattr_destroy(&attr);
}

static int watch_start(unsigned int interval_ms, bool wait_for_id);

/*
 * The thread is not in the child, and the mutexes and the condition variable may have been in use
 * at the fork: made anew. A child of a watching process watches too (a server's workers are
 * what tracers attach to), at the same interval; it costs a fork a thread creation. fork() does
 * not wait for the new thread to run: it may need a lock that another thread of the parent held
 * at the fork and that no one in the child will release (an allocator's that keeps no fork
 * handler, such as the sanitizers'), and the child must not hang in fork() for it.
 */
static void watch_fork_child(void)
{
	bool was_watching = watching;

	pthread_mutex_init(&watch_control, NULL);
	pthread_mutex_init(&watch_mutex, NULL);
	watch_cond_init();
	watching = false;
	__atomic_store_n(&watcher_tid, 0, __ATOMIC_RELAXED);
	if (!was_watching)
		return;
	pthread_mutex_lock(&watch_mutex);
	watch_start(watch_ms, false); /* without a thread, the child reads semaphores as before */
	pthread_mutex_unlock(&watch_mutex);
}

static void watch_init(void)
{
	watch_cond_init();
	pthread_atfork(NULL, NULL, watch_fork_child);
}

static void deadline_after(struct timespec *ts, unsigned int ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts->tv_nsec >= 1000000000) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000;
	}
}

static void *watch_main(void *arg)
{
	struct timespec deadline;

	(void)arg;
	pthread_mutex_lock(&watch_mutex);
	__atomic_store_n(&watcher_tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELAXED);
	pthread_cond_broadcast(&watch_cond); /* watch_start waits for the id */
	while (!watch_stop) {
		deadline_after(&deadline, watch_ms);
		while (!watch_stop &&
		       pthread_cond_timedwait(&watch_cond, &watch_mutex, &deadline) != ETIMEDOUT)
			;
		if (watch_stop)
			break;
		pthread_mutex_unlock(&watch_mutex);
		lk_probe_usdt_poll(); /* an error (sites that cannot be flipped) is retried next time */
		pthread_mutex_lock(&watch_mutex);
	}
	pthread_mutex_unlock(&watch_mutex);
	return NULL;
}

/*
 * With watch_mutex held: 0, or pthread_create's -errno. wait_for_id: return once the thread has
 * published its id (lk__sdt_watcher_tid, which a trace's context switches leave out).
 */
static int watch_start(unsigned int interval_ms, bool wait_for_id)
{
	sigset_t all, old;
	int err;

	watch_ms = interval_ms;
	if (watching)
		return 0; /* the running thread takes the new interval at its next wait */
	watch_stop = false;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all,
			&old); /* the thread takes none of the program's signals */
	err = pthread_create(&watcher, NULL, watch_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		return -err;
	/* what ps -L and top -H show; named here, so that it has its name once this returns */
	pthread_setname_np(watcher, "lowkey-usdt");
	while (wait_for_id && !__atomic_load_n(&watcher_tid, __ATOMIC_RELAXED))
		pthread_cond_wait(&watch_cond, &watch_mutex);
	watching = true;
	return 0;
}

static void watch_end(void)
{
	pthread_t t = watcher;

	if (!watching)
		return;
	watch_stop = true;
	watching = false;
	pthread_cond_broadcast(&watch_cond);
	pthread_mutex_unlock(&watch_mutex);
	pthread_join(t, NULL);
	__atomic_store_n(&watcher_tid, 0, __ATOMIC_RELAXED);
	pthread_mutex_lock(&watch_mutex);
}

pid_t lk__sdt_watcher_tid(void)
{
	return __atomic_load_n(&watcher_tid, __ATOMIC_RELAXED);
}

LK_API int lk_probe_usdt_watch(unsigned int interval_ms)
{
	int err = 0;

	if (interval_ms > LK__USDT_WATCH_MAX_MS)
		return lk__fail(-EINVAL, "lk_probe_usdt_watch: %u ms is more than an hour",
				interval_ms);
	pthread_once(&watch_once, watch_init);
	pthread_mutex_lock(&watch_control);
	pthread_mutex_lock(&watch_mutex);
	watch_chosen = true;
	if (interval_ms)
		err = watch_start(interval_ms, true);
	else
		watch_end();
	pthread_mutex_unlock(&watch_mutex);
	pthread_mutex_unlock(&watch_control);
	if (err)
		return lk__fail(err, "lk_probe_usdt_watch: cannot create the watching thread");
	return 0;
}

/* LOWKEY_USDT_WATCH: 0 (no watcher), MS (its interval), else the default. */
static unsigned int interval_from_environment(void)
{
	const char *v = lk__env("LOWKEY_USDT_WATCH");
	char *end;
	unsigned long ms;

	if (!v || !*v)
		return LK__USDT_WATCH_DEFAULT_MS;
	ms = strtoul(v, &end, 10);
	if (*end != '\0' || end == v || ms > LK__USDT_WATCH_MAX_MS)
		return LK__USDT_WATCH_DEFAULT_MS;
	return (unsigned int)ms;
}

static bool has_usdt_sites(const struct lk__dso_rt *dso)
{
	const struct sdt_entry *e = dso->desc->sdt_sites.start;
	const struct sdt_entry *end = dso->desc->sdt_sites.stop;

	return e && end && e < end;
}

void lk__sdt_object_loaded_locked(const struct lk__dso_rt *dso)
{
	unsigned int ms;

	if (!has_usdt_sites(dso))
		return;
	pthread_once(&watch_once, watch_init);
	/* Busy: a caller of lk_probe_usdt_watch is choosing, and may be joining a thread that waits
	 * for the registry lock held here. */
	if (pthread_mutex_trylock(&watch_control) != 0)
		return;
	ms = interval_from_environment();
	pthread_mutex_lock(&watch_mutex);
	/* no thread (out of threads): semaphores are read as without one */
	if (!watch_chosen && !watching && ms)
		watch_start(ms, true);
	pthread_mutex_unlock(&watch_mutex);
	pthread_mutex_unlock(&watch_control);
}
