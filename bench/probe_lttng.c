// SPDX-License-Identifier: MIT
/*
 * `lowkey bench probe` beside LTTng-UST 2.13's tracepoint with the same two integers, like for
 * like: both tracers in one process (lowkey-bench-lttng, which links both), one thread, bursts of
 * the same length, lowkey and LTTng-UST alternating burst by burst, the same pause after each;
 * disabled (no trace, no session) and enabled (a lowkey trace and an LTTng session this bench
 * creates, with a session daemon it starts if none runs). Medians of the rounds, and the
 * per-round ratios. The session daemon is set up here (probe_lttng_setup) once for every
 * LTTng-UST row of the bench, this comparison's and the sustained rows' (probe_lttng_rate.c).
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "probe_bench.h"

/* The disabled rounds: nothing to drain, so long loops and no pause. */
#define DISABLED_BURST (1L << 20)

static const char *lttng_peer(void)
{
	const char *env = getenv("LOWKEY_BENCH_LTTNG");

	if (env && access(env, X_OK) == 0)
		return env;
#ifdef LK_BENCH_LTTNG_BUILD
	if (access(LK_BENCH_LTTNG_BUILD, X_OK) == 0)
		return LK_BENCH_LTTNG_BUILD;
	if (access(LK_BENCH_LTTNG_INSTALLED, X_OK) == 0)
		return LK_BENCH_LTTNG_INSTALLED;
#endif
	return NULL;
}

int probe_quiet(const char *fmt, ...)
{
	char cmd[4200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	strncat(cmd, " >/dev/null 2>&1", sizeof(cmd) - strlen(cmd) - 1);
	return system(cmd);
}

/*
 * Run the peer: `runs` rounds of `events`-event bursts, lowkey tracing into lowkey_dir ("-": its
 * sites off). Returns 0 with *s filled, or -1.
 */
static int run_peer(const char *peer, int runs, long events, const char *lowkey_dir, int pause_ms,
		    struct lttng_side *s)
{
	double lk[64], lt[64], ratio[64];
	char cmd[4400], line[256];
	int n = 0;
	FILE *p;

	memset(s, 0, sizeof(*s));
	s->burst = events;
	snprintf(cmd, sizeof(cmd), "'%s' %d %ld '%s' %d 2>/dev/null", peer, runs, events,
		 lowkey_dir, pause_ms);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p)) {
		unsigned long long lost;

		if (n < 64 && sscanf(line, "%lf %lf", &lk[n], &lt[n]) == 2 && lk[n] > 0 &&
		    lt[n] > 0) {
			ratio[n] = lt[n] / lk[n];
			n++;
		} else if (sscanf(line, "lowkey_lost %llu", &lost) == 1) {
			s->lowkey_lost = lost;
		}
	}
	if (pclose(p) != 0 || n == 0)
		return -1;
	s->rounds = n;
	s->ratio_median = lkb_median(ratio, (size_t)n); /* sorts ratio */
	s->ratio_min = ratio[0];
	s->ratio_max = ratio[n - 1];
	s->lowkey_ns = lkb_median(lk, (size_t)n);
	s->lttng_ns = lkb_median(lt, (size_t)n);
	s->ratio_of_medians = s->lttng_ns / s->lowkey_ns;
	return 0;
}

/* The session daemon's pid, from the pid file it writes (root: /var/run/lttng; others: ~/.lttng,
 * or $LTTNG_HOME/.lttng); 0 if unknown. */
static pid_t sessiond_pid(void)
{
	const char *home = getenv("LTTNG_HOME") ? getenv("LTTNG_HOME") : getenv("HOME");
	char path[4200];
	long pid = 0;
	FILE *f;

	if (geteuid() == 0)
		snprintf(path, sizeof(path), "/var/run/lttng/lttng-sessiond.pid");
	else
		snprintf(path, sizeof(path), "%s/.lttng/lttng-sessiond.pid", home ? home : "");
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fscanf(f, "%ld", &pid) != 1)
		pid = 0;
	fclose(f);
	return (pid_t)pid;
}

/* `lttng stop`, keeping what it says of discarded events (it warns when there were any). */
static void lttng_stop(const char *session, char *discarded, size_t len)
{
	char cmd[256], line[512];
	FILE *p;

	discarded[0] = 0;
	snprintf(cmd, sizeof(cmd), "lttng stop %s 2>&1", session);
	p = popen(cmd, "r");
	if (!p)
		return;
	while (fgets(line, sizeof(line), p))
		if (!discarded[0] && (strstr(line, "discarded") || strstr(line, "lost"))) {
			line[strcspn(line, "\n")] = 0;
			line[len - 1 < sizeof(line) - 1 ? len - 1 : sizeof(line) - 1] = 0;
			memcpy(discarded, line, strlen(line) + 1);
		}
	pclose(p);
}

void probe_lttng_setup(struct lttng_env *e)
{
	*e = (struct lttng_env){ .peer = lttng_peer() };
	if (!e->peer) {
		e->missing =
			"lowkey-bench-lttng was not built (install liblttng-ust-dev and rebuild)";
		return;
	}
	if (probe_quiet("command -v lttng") != 0) {
		e->missing = "the lttng command is missing (install lttng-tools)";
		return;
	}
	if (probe_quiet("lttng list") != 0) {
		if (probe_quiet("lttng-sessiond --daemonize") != 0) {
			e->missing = "could not start lttng-sessiond";
			return;
		}
		e->started_daemon = sessiond_pid();
	}
}

void probe_lttng_teardown(struct lttng_env *e)
{
	if (e->started_daemon > 0) /* the one this bench started, by its pid */
		kill(e->started_daemon, SIGTERM);
	e->started_daemon = 0;
}

struct lttng_result probe_bench_lttng(const struct probe_options *o, const struct lttng_env *e)
{
	struct lttng_result r = { 0 };
	char session[64], dir[4096], lowkey_dir[4096];

	if (e->missing) {
		r.missing = e->missing;
		return r;
	}
	r.have_off = run_peer(e->peer, o->runs, DISABLED_BURST, "-", 0, &r.off) == 0;
	if (!r.have_off)
		r.missing = "lowkey-bench-lttng failed (run it by hand to see why)";

	snprintf(session, sizeof(session), "lowkey-bench-%d", (int)getpid());
	snprintf(dir, sizeof(dir), "%s/%s", o->trace_dir, session);
	snprintf(lowkey_dir, sizeof(lowkey_dir), "%s/lowkey-bench-peer-%d", o->trace_dir,
		 (int)getpid());
	if (probe_quiet("lttng create %s --output='%s'", session, dir) == 0 &&
	    probe_quiet("lttng enable-channel -u --subbuf-size=8M --num-subbuf=4 -s %s lkch",
			session) == 0 &&
	    probe_quiet("lttng enable-event -u -c lkch -s %s lkbench:two_ints", session) == 0 &&
	    probe_quiet("lttng start %s", session) == 0) {
		r.have_on =
			run_peer(e->peer, o->runs, o->burst, lowkey_dir, PEER_PAUSE_MS, &r.on) == 0;
		if (!r.have_on)
			r.missing = "lowkey-bench-lttng failed (run it by hand to see why)";
		lttng_stop(session, r.discarded, sizeof(r.discarded));
	} else {
		r.missing = "could not set up an LTTng session";
	}
	probe_quiet("lttng destroy %s", session);
	probe_remove_trace(dir);
	probe_remove_trace(lowkey_dir);
	return r;
}
