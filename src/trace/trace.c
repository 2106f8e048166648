// SPDX-License-Identifier: MIT
/*
 * Starting and stopping a trace, from the API or from the environment.
 *
 * Start: create the output, describe every registered site in the metadata, start the consumer,
 * and only then flip on the sites the rules select. Stop: flip every site off, wait for threads
 * still inside an emit, route their next events to the slow path (which sees no trace), let the
 * consumer drain everything, and write the metadata again with the TSC frequency measured over the
 * whole trace.
 *
 * A forked child never writes into its parent's trace: its copy of the trace is dropped and its
 * sites turned off. Environment tracing (LOWKEY_TRACE) starts only in the process the variable was
 * meant for (LOWKEY_TRACE_PID), not in the children it inherits it to.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <lowkey/error.h>

#include "core/counter_pair.h"
#include "core/env.h"
#include "core/error.h"
#include "internal/outfile.h"
#include "control/control_internal.h"
#include "internal/trace_convert.h"
#include "format/perfetto/perfetto.h"
#include "probe/probe_internal.h"
#include "internal/trace_progress.h"

struct lk__trace lk__trace = { .dir_fd = -1, .out_fd = -1 };

/* Tracing from the environment (environment.c) comes wherever tracing does, liblowkey.a included. */
extern const int lk__probe_environment_linked;
__attribute__((used)) static const int *const link_environment = &lk__probe_environment_linked;
pthread_mutex_t lk__trace_mutex = PTHREAD_MUTEX_INITIALIZER;

#define DEFAULT_BUFFER (2u << 20)
#define MAX_BUFFER (1u << 30)
#define DEFAULT_FLUSH_MS 100

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void free_paths(struct lk__trace *t)
{
	if (t->out_fd >= 0)
		close(t->out_fd);
	t->out_fd = -1;
	free(t->path);
	free(t->ctf_dir);
	t->path = t->ctf_dir = NULL;
}

static int check_config(const struct lk_trace_config *c)
{
	if (!c || !c->path || !*c->path)
		return lk__fail(-EINVAL, "lk_trace_start: no output path");
	if (c->format != LK_TRACE_CTF && c->format != LK_TRACE_JSON &&
	    c->format != LK_TRACE_PERFETTO)
		return lk__fail(-EINVAL, "lk_trace_start: unknown format %d", (int)c->format);
	if (c->buffer_size > MAX_BUFFER)
		return lk__fail(-EINVAL,
				"lk_trace_start: buffer_size %zu is over the limit of %u bytes",
				c->buffer_size, MAX_BUFFER);
	if (c->buffer_size && c->buffer_size < 4096)
		return lk__fail(-EINVAL, "lk_trace_start: buffer_size %zu is under 4096 bytes",
				c->buffer_size);
	if (c->flags & ~(unsigned int)(LK_TRACE_CPUTIME | LK_TRACE_FIXED_BUFFER |
				       LK_TRACE_OVERWRITE | LK_TRACE_SCHED))
		return lk__fail(-EINVAL, "lk_trace_start: unknown flags %#x", c->flags);
	return 0;
}

/* An absolute path (the process may chdir), without requiring the file to exist. */
static char *absolute(const char *path)
{
	char cwd[PATH_MAX], *out;

	if (path[0] == '/')
		return strdup(path);
	if (!getcwd(cwd, sizeof(cwd)))
		return NULL;
	if (asprintf(&out, "%s/%s", cwd, path) < 0)
		return NULL;
	return out;
}

/*
 * Where the CTF goes: the path itself, a new or empty directory (anything else would mix two
 * traces); or beside the JSON or Perfetto file, created or replaced now and kept open until it is
 * converted. Neither through a symbolic link, nor into another user's in a sticky directory.
 */
static int prepare_output(struct lk__trace *t, const char *path)
{
	bool file = t->config.format != LK_TRACE_CTF;
	char msg[PATH_MAX + 200];
	int fd;

	t->path = absolute(path);
	if (!t->path)
		return lk__fail(-ENOMEM, "lk_trace_start: out of memory");
	fd = lk__out_open(t->path, file ? LK__OUT_REPLACE : LK__OUT_DIR | LK__OUT_EMPTY, NULL, msg,
			  sizeof(msg));
	if (fd < 0)
		return lk__fail(fd, "lk_trace_start: %s", msg);
	if (!file) {
		t->dir_fd = fd;
		t->ctf_dir = strdup(t->path);
		return t->ctf_dir ? 0 : lk__fail(-ENOMEM, "lk_trace_start: out of memory");
	}
	t->out_fd = fd;
	if (asprintf(&t->ctf_dir, "%s.ctf-XXXXXX", t->path) < 0 || !mkdtemp(t->ctf_dir))
		return lk__fail(-errno, "cannot create a directory beside %s: %s", t->path,
				strerror(errno));
	return 0;
}

/*
 * A CTF trace into dir_fd, an empty directory the caller made (on its side of a mount namespace,
 * say): nothing is created by name; path only names it in messages. Takes dir_fd.
 */
static int adopt_output(struct lk__trace *t, const char *path, int dir_fd)
{
	t->dir_fd = dir_fd;
	t->path = strdup(path);
	t->ctf_dir = strdup(path);
	if (!t->path || !t->ctf_dir)
		return lk__fail(-ENOMEM, "lk_trace_start: out of memory");
	return 0;
}

static void snapshot_clocks(struct lk__trace *t)
{
	t->tsc_hz = lk__probe_tsc_hz();
	lk__counter_pair(CLOCK_MONOTONIC, &t->tsc0, &t->monotonic0_ns, 3);
	t->realtime0_ns = clock_ns(CLOCK_REALTIME);
}

/* At the end: the TSC rate over the whole trace, more precise than any calibration at start. */
static void measure_tsc_rate(struct lk__trace *t)
{
	uint64_t tsc, mono;

	lk__counter_pair(CLOCK_MONOTONIC, &tsc, &mono, 3);
	if (mono - t->monotonic0_ns > 200000000u && tsc > t->tsc0)
		t->tsc_hz = (uint64_t)((double)(tsc - t->tsc0) * 1e9 /
				       (double)(mono - t->monotonic0_ns));
}

void lk__trace_sites_failed(int err, const char *where)
{
	struct lk__trace *t = &lk__trace;

	if (t->sites_error)
		return;
	snprintf(
		t->sites_error_msg, sizeof(t->sites_error_msg),
		"probe sites in %s could not be turned on, so their events are missing from the trace: %s",
		where, lk_last_error());
	t->sites_error = err;
}

/* The trace's state for a new start: config with its defaults, every counter and error cleared. */
static void reset_for_start(struct lk__trace *t, const struct lk_trace_config *config)
{
	memset(&t->config, 0, sizeof(t->config));
	t->config = *config;
	t->config.path = NULL; /* the caller's string: t->path holds our copy */
	if (!t->config.buffer_size)
		t->config.buffer_size = DEFAULT_BUFFER;
	if (!t->config.flush_ms)
		t->config.flush_ms = DEFAULT_FLUSH_MS;
	t->cputime = config->flags & LK_TRACE_CPUTIME;
	t->overwrite = config->flags & LK_TRACE_OVERWRITE;
	t->sched = config->flags & LK_TRACE_SCHED;
	__atomic_store_n(&t->sched_lost, 0, __ATOMIC_RELAXED);
	t->snapshots = 0;
	__atomic_store_n(&t->snapshot_requests, 0, __ATOMIC_RELAXED);
	t->snapshot_error = 0;
	t->snapshot_error_msg[0] = 0;
	t->snapshot_at_exit = false;
	t->last_snapshot = false;
	/* lk_trace_stats may read these from another thread meanwhile */
	__atomic_store_n(&t->events, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&t->lost, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&t->bytes, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&t->threads, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&t->error, 0, __ATOMIC_RELAXED);
	t->error_msg[0] = 0;
	t->sites_error = 0;
	t->sites_error_msg[0] = 0;
}

static int start_locked(const struct lk_trace_config *config, int dir_fd)
{
	struct lk__trace *t = &lk__trace;
	int err;

	reset_for_start(t, config);
	/* A flight recorder writes nothing until a snapshot (snapshot.c), which makes its own output. */
	if (dir_fd >= 0)
		err = adopt_output(t, config->path, dir_fd);
	else if (t->overwrite)
		err = (t->path = absolute(config->path)) ?
			      0 :
			      lk__fail(-ENOMEM, "lk_trace_start: out of memory");
	else
		err = prepare_output(t, config->path);
	if (!err && !t->overwrite)
		err = lk__ctf_open(t);
	if (err)
		goto fail;
	snapshot_clocks(t);
	if (t->sched && t->config.flush_ms > LK__SCHED_FLUSH_MS)
		t->config.flush_ms =
			LK__SCHED_FLUSH_MS; /* the kernel's rings fill faster than ours */
	if (t->sched && (err = lk__sched_start(t)) != 0)
		goto fail;
	__atomic_add_fetch(&t->gen, 1, __ATOMIC_RELEASE);

	lk__registry_lock();
	err = t->overwrite ? 0 : lk__ctf_write_metadata(t);
	lk__registry_unlock();
	if (!err && t->config.format == LK_TRACE_PERFETTO &&
	    !t->overwrite) /* a flight recorder converts snapshots */
		lk__perfetto_live_start(
			t); /* the consumer writes it; if it cannot, converted at stop */
	if (!err)
		err = lk__consumer_start();
	if (err)
		goto fail;
	__atomic_store_n(&t->running, true, __ATOMIC_RELEASE);
	lk__probe_buffers_retarget(); /* threads with a buffer from an earlier trace re-attach */

	lk__registry_lock();
	err = lk__probe_apply_rules_locked(true);
	lk__registry_unlock();
	if (err) {
		__atomic_store_n(&t->running, false, __ATOMIC_RELEASE);
		lk__consumer_stop();
		goto fail;
	}
	return 0;
fail:
	lk__perfetto_live_cancel();
	lk__sched_stop(t);
	lk__ctf_close(t);
	if (t->ctf_dir && t->config.format != LK_TRACE_CTF)
		rmdir(t->ctf_dir);
	free_paths(t);
	return err;
}

LK_API int lk_trace_start(const struct lk_trace_config *config)
{
	int err = check_config(config);

	if (err)
		return err;
	pthread_mutex_lock(&lk__trace_mutex);
	if (lk__trace.running)
		err = lk__fail(-EBUSY,
			       "lk_trace_start: a trace is already running in this process (to %s)",
			       lk__trace.path);
	else
		err = start_locked(config, -1);
	pthread_mutex_unlock(&lk__trace_mutex);
	return err;
}

int lk__trace_start_in(const struct lk_trace_config *config, int dir_fd)
{
	int err = check_config(config);

	if (!err && config->format != LK_TRACE_CTF)
		err = lk__fail(-EINVAL, "a trace into a directory descriptor is CTF");
	if (!err && (config->flags & LK_TRACE_OVERWRITE))
		err = lk__fail(-EINVAL, "a flight recorder writes nothing until its snapshots: "
					"it takes no directory at its start");
	if (err) {
		close(dir_fd);
		return err;
	}
	pthread_mutex_lock(&lk__trace_mutex);
	if (lk__trace.running) {
		err = lk__fail(-EBUSY,
			       "lk_trace_start: a trace is already running in this process (to %s)",
			       lk__trace.path);
		close(dir_fd);
	} else {
		err = start_locked(config, dir_fd);
	}
	pthread_mutex_unlock(&lk__trace_mutex);
	return err;
}

static int stop_locked(void)
{
	struct lk__trace *t = &lk__trace;
	char msg[512];
	int err;

	__atomic_store_n(&t->stopping, true, __ATOMIC_RELEASE);
	lk__registry_lock();
	lk__probe_apply_rules_locked(false);
	lk__registry_unlock();
	lk__probe_buffers_quiesce();
	lk__probe_buffers_retarget();
	lk__consumer_stop();
	lk__sched_stop(t);

	measure_tsc_rate(t);
	lk__registry_lock();
	err = t->error || t->overwrite ? 0 : lk__ctf_write_metadata(t);
	lk__registry_unlock();
	lk__ctf_close(t);
	__atomic_store_n(&t->running, false, __ATOMIC_RELEASE);
	__atomic_store_n(&t->stopping, false, __ATOMIC_RELEASE);

	if (t->error) {
		lk__fail(t->error, "%s", t->error_msg);
		err = t->error;
	}
	if (!err && t->config.format != LK_TRACE_CTF && !t->overwrite) {
		err = lk__trace_convert_fd(t->ctf_dir, t->out_fd, t->path, t->config.format,
					   lk__progress_stop_sink(), msg, sizeof(msg));
		if (err)
			lk__fail(err, "%s", msg);
		else
			lk__remove_ctf(t->ctf_dir);
	}
	lk__perfetto_live_cancel(); /* not converted: the trace failed */
	if (!err && t->sites_error)
		err = lk__fail(t->sites_error, "%s", t->sites_error_msg);
	if (!err && t->snapshot_error)
		err = lk__fail(t->snapshot_error, "%s", t->snapshot_error_msg);
	free_paths(t);
	return err;
}

LK_API int lk_trace_stop(void)
{
	int err;

	pthread_mutex_lock(&lk__trace_mutex);
	if (!lk__trace.running)
		err = lk__fail(-ENOENT, "lk_trace_stop: no trace is running");
	else
		err = stop_locked();
	pthread_mutex_unlock(&lk__trace_mutex);
	return err;
}

/* ---- the flight recorder's snapshots (snapshot.c writes them) ---- */

int lk__trace_snapshot(const char *path, struct lk__snapshot_result *r, char *written, size_t len)
{
	return lk__trace_snapshot_in(path, -1, r, written, len);
}

int lk__trace_snapshot_in(const char *path, int dir_fd, struct lk__snapshot_result *r,
			  char *written, size_t len)
{
	bool handed = false; /* dir_fd is lk__snapshot_in's, which closes it */
	int err;

	pthread_mutex_lock(&lk__trace_mutex);
	if (!lk__trace.running || lk__trace.stopping)
		err = lk__fail(-ENOENT, "lk_trace_snapshot: no trace is running");
	else if (!lk__trace.overwrite)
		err = lk__fail(
			-EINVAL,
			"lk_trace_snapshot: the running trace streams everything to %s; snapshots are "
			"for a flight recorder, a trace started with LK_TRACE_OVERWRITE (lowkey trace --overwrite, "
			"LOWKEY_TRACE_MODE=overwrite)",
			lk__trace.path);
	else {
		handed = true;
		err = lk__snapshot_in(path, dir_fd, r, written, len);
	}
	if (!handed && dir_fd >= 0)
		close(dir_fd);
	pthread_mutex_unlock(&lk__trace_mutex);
	return err;
}

int lk__trace_exit_snapshot(void)
{
	struct lk__snapshot_result r;
	struct lk__trace *t = &lk__trace;
	int err;

	if (!__atomic_exchange_n(&t->snapshot_at_exit, false, __ATOMIC_ACQ_REL))
		return 0;
	lk_trace_snapshot_signal(0); /* none may come in after this one */
	__atomic_store_n(&t->last_snapshot, true,
			 __ATOMIC_RELEASE); /* the consumer may be taking one */
	err = lk__trace_snapshot(NULL, &r, NULL, 0);
	if (err && !t->snapshot_error) {
		snprintf(t->snapshot_error_msg, sizeof(t->snapshot_error_msg),
			 "the snapshot at exit failed: %s", lk_last_error());
		__atomic_store_n(&t->snapshot_error, err, __ATOMIC_RELEASE);
	}
	return err;
}

LK_API int lk_trace_snapshot(const char *path)
{
	struct lk__snapshot_result r;

	return lk__trace_snapshot(path, &r, NULL, 0);
}

LK_API int lk_trace_snapshot_request(void)
{
	if (!__atomic_load_n(&lk__trace.running, __ATOMIC_ACQUIRE) ||
	    !__atomic_load_n(&lk__trace.overwrite, __ATOMIC_RELAXED))
		return -ENOENT; /* no message: lk__fail is not async-signal-safe */
	__atomic_fetch_add(&lk__trace.snapshot_requests, 1, __ATOMIC_RELEASE);
	lk__consumer_wake();
	return 0;
}

static struct sigaction snapshot_old_action;
static int snapshot_sig;

static void snapshot_on_signal(int sig, siginfo_t *info, void *ctx)
{
	int saved = errno;

	lk_trace_snapshot_request();
	errno = saved;
	if (snapshot_old_action.sa_flags & SA_SIGINFO)
		snapshot_old_action.sa_sigaction(sig, info, ctx);
	else if (snapshot_old_action.sa_handler != SIG_DFL &&
		 snapshot_old_action.sa_handler != SIG_IGN)
		snapshot_old_action.sa_handler(sig);
}

LK_API int lk_trace_snapshot_signal(int sig)
{
	struct sigaction sa = { .sa_sigaction = snapshot_on_signal,
				.sa_flags = SA_SIGINFO | SA_RESTART };
	const char *why = sig ? lk__snapshot_signal_unfit(sig) : NULL;
	char name[32];
	int err = 0;

	if (sig < 0 || sig >= NSIG)
		return lk__fail(-EINVAL, "lk_trace_snapshot_signal: %d is not a signal", sig);
	if (why)
		return lk__fail(
			-EINVAL,
			"lk_trace_snapshot_signal: %s cannot take snapshots: %s; use SIGUSR2 or a "
			"real-time signal",
			lk__signal_name(sig, name, sizeof(name)), why);
	pthread_mutex_lock(&lk__trace_mutex);
	if (snapshot_sig)
		sigaction(snapshot_sig, &snapshot_old_action, NULL);
	snapshot_sig = 0;
	sigemptyset(&sa.sa_mask);
	if (sig && sigaction(sig, &sa, &snapshot_old_action) != 0)
		err = lk__fail(-errno, "lk_trace_snapshot_signal: cannot handle signal %d: %s", sig,
			       strerror(errno));
	else if (sig)
		snapshot_sig = sig;
	pthread_mutex_unlock(&lk__trace_mutex);
	return err;
}

LK_API int lk_trace_stats(struct lk_trace_stats *stats)
{
	struct lk__trace *t = &lk__trace;
	uint64_t live_lost = 0;

	if (!stats)
		return lk__fail(-EINVAL, "lk_trace_stats: stats is NULL");
	pthread_mutex_lock(&lk__probe_buffers_lock);
	for (struct lk__probe_buffer *b = __atomic_load_n(&lk__probe_buffers, __ATOMIC_ACQUIRE); b;
	     b = b->next)
		if (__atomic_load_n(&b->trace_gen, __ATOMIC_ACQUIRE) ==
			    __atomic_load_n(&t->gen, __ATOMIC_ACQUIRE) &&
		    __atomic_load_n(&t->running, __ATOMIC_ACQUIRE))
			live_lost += __atomic_load_n(&b->lost, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&lk__probe_buffers_lock);
	/* an output error stopped the recording; lk_trace_stop() still has to be called */
	stats->running = __atomic_load_n(&t->running, __ATOMIC_ACQUIRE) &&
			 !__atomic_load_n(&t->error, __ATOMIC_ACQUIRE);
	stats->events = __atomic_load_n(&t->events, __ATOMIC_RELAXED);
	stats->lost = __atomic_load_n(&t->lost, __ATOMIC_RELAXED) + live_lost;
	stats->bytes = __atomic_load_n(&t->bytes, __ATOMIC_RELAXED);
	stats->threads = __atomic_load_n(&t->threads, __ATOMIC_RELAXED);
	stats->error = __atomic_load_n(&t->error, __ATOMIC_ACQUIRE);
	return 0;
}

/*
 * fork() waits while another thread starts or stops a trace (the trace mutex is taken in the
 * prepare handler): a child never inherits a trace half-started or half-stopped, or its mutex
 * locked. It may be forked during a snapshot, which does not hold that mutex: the snapshot's
 * files are written through streams a child never flushes (internal/outfile.h), and the snapshot's
 * lock is made anew in the child.
 */
static void trace_fork_prepare(void)
{
	pthread_mutex_lock(&lk__trace_mutex);
}

static void trace_fork_parent(void)
{
	pthread_mutex_unlock(&lk__trace_mutex);
}

/*
 * In a forked child: the consumer and the parent's threads are gone, and the output belongs to the
 * parent. Drop it all, turn the sites off, and let this thread start afresh if it traces again.
 */
static void trace_fork_child(void)
{
	struct lk__trace *t = &lk__trace;

	/* another thread of the parent may have held them at the fork */
	pthread_mutex_init(&lk__probe_buffers_lock, NULL);
	lk__snapshot_forget();
	pthread_mutex_unlock(&lk__trace_mutex);
	if (!t->running)
		return;
	for (struct lk__probe_buffer *b = lk__probe_buffers, *next; b; b = next) {
		next = b->next;
		if (b->fd >= 0)
			close(b->fd);
		lk__buffer_free(b);
	}
	lk__probe_buffers = NULL;
	lk__probe_forget_thread();
	lk__sched_stop(t); /* our copies of the parent's events and files */
	lk__perfetto_live_forget_in_child();
	if (t->dir_fd >= 0)
		close(t->dir_fd);
	t->dir_fd = -1;
	t->running = false;
	t->stopping = false;
	free_paths(t);
	lk__registry_lock();
	lk__probe_apply_rules_locked(false);
	lk__registry_unlock();
}

/*
 * At load, before any trace can start or any thread fork. The registry's fork handlers first: the
 * trace mutex is taken before the registry lock (stop does), so it must be taken first in
 * prepare too, and prepare handlers run in the reverse order of registration.
 */
static void object_failed(const struct lk__dso_rt *dso, int err)
{
	if (lk__trace.running)
		lk__trace_sites_failed(err, dso->path[0] ? dso->path : "the program");
}

__attribute__((constructor)) static void trace_init(void)
{
	lk__registry_fork_init();
	pthread_atfork(trace_fork_prepare, trace_fork_parent, trace_fork_child);
	lk__dso_on_load_error =
		object_failed; /* a loading object's key sites that could not be set */
}

/*
 * exit() with a trace running (and no lk_trace_stop): finish it, so what every thread recorded
 * is in the trace. Other threads may still run; stopping is safe while they do. _exit() and
 * fatal signals skip this, and the last flush_ms of events with it.
 */
__attribute__((destructor)) static void trace_at_exit(void)
{
	if (__atomic_load_n(&lk__trace.running, __ATOMIC_ACQUIRE)) {
		lk__trace_exit_snapshot(); /* a flight recorder traced from the environment */
		lk_trace_stop();
	}
}
