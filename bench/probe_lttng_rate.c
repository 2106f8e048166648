// SPDX-License-Identifier: MIT
/*
 * `lowkey bench probe`: LTTng-UST's sustained rate without loss, by the search lowkey's rows use
 * (probe_rate.c), and the CPU its consumer daemon spends an event.
 *
 * Each trial is a session of its own: a channel in discard mode with per-UID buffers (per CPU,
 * LTTNG_RATE_SUBBUFS sub-buffers of LTTNG_RATE_SUBBUF_MIB MiB), the session's output in the
 * bench's --dir, the file system lowkey's traces go to; lowkey-bench-lttng's paced producers
 * (probe_pace.h, as lowkey's) emit LTTng-UST's two-integer tracepoint; `lttng stop` returns once
 * the consumer daemon has written every sub-buffer, and `lttng list` gives the events the
 * channel discarded. The trace's size is checked against the events emitted: a program that did
 * not register in time with the session daemon records nothing and discards nothing, which
 * would pass for a lossless trial.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "internal/proc.h"
#include "probe_bench.h"

/* Bytes an LTTng-UST event holds at the least: its two 8-byte integers. */
#define LTTNG_PAYLOAD_BYTES 16

struct session {
	char name[64];
	char dir[4096];
};

static void session_destroy(const struct session *s)
{
	probe_quiet("lttng destroy %s", s->name);
	probe_remove_trace(s->dir);
}

/* A started session with the rate channel and its event, writing into o->trace_dir: 0 or -1. */
static int session_create(const struct probe_options *o, struct session *s)
{
	static unsigned int serial;

	snprintf(s->name, sizeof(s->name), "lowkey-bench-rate-%d-%u", (int)getpid(), serial++);
	snprintf(s->dir, sizeof(s->dir), "%s/%s", o->trace_dir, s->name);
	if (probe_quiet("lttng create %s --output='%s'", s->name, s->dir) != 0)
		return -1;
	if (probe_quiet("lttng enable-channel -u --buffers-uid --discard --subbuf-size=%dM "
			"--num-subbuf=%d -s %s lkrate",
			LTTNG_RATE_SUBBUF_MIB, LTTNG_RATE_SUBBUFS, s->name) != 0 ||
	    probe_quiet("lttng enable-event -u -c lkrate -s %s lkbench:two_ints", s->name) != 0 ||
	    probe_quiet("lttng start %s", s->name) != 0) {
		session_destroy(s);
		return -1;
	}
	return 0;
}

/*
 * `lttng stop` (it returns once the consumer daemon has written what the buffers held), then the
 * events the session discarded, from `lttng list`'s "Discarded events: N": 0, or -1 where no such
 * line came.
 */
static int session_stop(const struct session *s, uint64_t *discarded)
{
	char cmd[128], line[512];
	bool found = false;
	FILE *p;

	*discarded = 0;
	if (probe_quiet("lttng stop %s", s->name) != 0)
		return -1;
	snprintf(cmd, sizeof(cmd), "lttng list %s 2>/dev/null", s->name);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p)) {
		const char *at = strstr(line, "Discarded events:");
		unsigned long long n;

		if (at && sscanf(at, "Discarded events: %llu", &n) == 1) {
			*discarded += n;
			found = true;
		}
	}
	if (pclose(p) != 0)
		return -1;
	return found ? 0 : -1;
}

static uint64_t tree_bytes;

static int add_file_size(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)path;
	(void)ftw;
	if (type == FTW_F)
		tree_bytes += (uint64_t)st->st_size;
	return 0;
}

/* The bytes of the files under dir (the session's trace). */
static uint64_t trace_bytes(const char *dir)
{
	tree_bytes = 0;
	nftw(dir, add_file_size, 16, FTW_PHYS);
	return tree_bytes;
}

/* Run the peer's paced producers; 0 with *emitted and *achieved, or -1. */
static int run_producers(const char *peer, int threads, double rate, double seconds,
			 uint64_t *emitted, double *achieved)
{
	char cmd[4400], line[128];
	unsigned long long n;
	int got = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "'%s' rate %d %.0f %.6f 2>/dev/null", peer, threads, rate,
		 seconds);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p)) {
		if (sscanf(line, "emitted %llu", &n) == 1) {
			*emitted = n;
			got |= 1;
		} else if (sscanf(line, "achieved %lf", achieved) == 1) {
			got |= 2;
		}
	}
	if (pclose(p) != 0 || got != 3)
		return -1;
	return 0;
}

/* A trial of LTTng-UST's: ctx is the struct lttng_env. */
static struct rate_trial lttng_trial(const struct probe_options *o, int threads, double rate,
				     const void *ctx)
{
	const struct lttng_env *e = ctx;
	struct rate_trial t = { .rate_per_thread = rate };
	uint64_t emitted = 0, discarded = 0;
	struct session s;

	if (session_create(o, &s) != 0) {
		t.err = -1;
		return t;
	}
	if (run_producers(e->peer, threads, rate, o->seconds, &emitted, &t.achieved_total) != 0 ||
	    session_stop(&s, &discarded) != 0)
		t.err = -1;
	t.bytes = trace_bytes(s.dir);
	session_destroy(&s);
	t.lost = discarded;
	t.events = emitted > discarded ? emitted - discarded : 0;
	if (!t.err && t.bytes < t.events * LTTNG_PAYLOAD_BYTES)
		t.err = -1; /* the program was not traced */
	return t;
}

struct rate_summary probe_lttng_rate(const struct probe_options *o, const struct lttng_env *e,
				     int threads)
{
	return probe_search_rate(o, threads, lttng_trial, e);
}

/* ---- the consumer daemon's CPU ---- */

/* Whether process pid's command line holds word (its arguments, NUL-separated). */
static bool cmdline_has(pid_t pid, const char *word)
{
	char path[64], buf[4096];
	size_t n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	for (size_t i = 0; i < n; i++)
		if (buf[i] == '\0')
			buf[i] = ' ';
	buf[n] = '\0';
	return strstr(buf, word) != NULL;
}

/*
 * The 64-bit user-space consumer daemon (its command socket's path holds "ustconsumerd64"):
 * this user's where there are several, as the session daemon this user's lttng talks to runs
 * it. 0 if none.
 */
static pid_t ust_consumerd(void)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	pid_t found = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		struct lk__proc_ids ids;
		char comm[32];
		pid_t pid;

		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		pid = (pid_t)atoi(de->d_name);
		if (lk__proc_comm(pid, 0, comm, sizeof(comm)) < 0 ||
		    strcmp(comm, "lttng-consumerd") != 0 || !cmdline_has(pid, "ustconsumerd64"))
			continue;
		if (!found)
			found = pid;
		if (lk__proc_ids(pid, &ids) == 0 && ids.euid == geteuid()) {
			found = pid;
			break;
		}
	}
	closedir(d);
	return found;
}

/*
 * A small run first, not measured: the session daemon sets up the per-UID buffers when the
 * first program registers, and that is the daemons' work, not the consumer's of the events.
 */
#define WARM_RATE 1e5
#define WARM_SECONDS 0.01

struct cpu_run probe_lttng_cpu_run(const struct probe_options *o, const struct lttng_env *e,
				   double rate, double seconds)
{
	struct cpu_run r = { 0 };
	uint64_t warm = 0, emitted = 0, discarded = 0;
	int64_t before, after;
	double achieved;
	struct session s;
	pid_t consumerd;

	if (e->missing) {
		r.missing = e->missing;
		return r;
	}
	if (session_create(o, &s) != 0) {
		r.missing = "could not set up an LTTng session";
		return r;
	}
	if (run_producers(e->peer, 1, WARM_RATE, WARM_SECONDS, &warm, &achieved) != 0) {
		r.missing = "lowkey-bench-lttng failed (run it by hand to see why)";
		goto out;
	}
	consumerd = ust_consumerd();
	if (!consumerd) {
		r.missing = "no lttng-consumerd for user space found in /proc";
		goto out;
	}
	before = probe_task_cpu_ns(consumerd, 0);
	if (before < 0) {
		r.missing = "the consumer daemon's /proc/PID/task/TID/schedstat cannot be read";
		goto out;
	}
	if (run_producers(e->peer, 1, rate, seconds, &emitted, &achieved) != 0 ||
	    session_stop(&s, &discarded) != 0) {
		r.missing = "lowkey-bench-lttng or lttng failed";
		goto out;
	}
	after = probe_task_cpu_ns(consumerd, 0);
	if (after < before) {
		r.missing = "a thread of the consumer daemon exited during the run";
		goto out;
	}
	r.cpu_ns = (uint64_t)(after - before);
	r.lost = discarded;
	r.events = warm + emitted > discarded ? warm + emitted - discarded : 0;
out:
	session_destroy(&s);
	return r;
}
