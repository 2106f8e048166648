// SPDX-License-Identifier: MIT
/*
 * lowkey stat's waiting: until the command or process ends, a deadline passes or Ctrl-C, and with
 * -I MSEC the counts of each interval printed as it ends (perf stat -I): the difference between two
 * readings, the multiplexing estimate taken over the interval's own enabled and running times.
 */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <lowkey/lowkey.h>

#include "stat.h"

volatile sig_atomic_t stat_interrupted;

double stat_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Whether the watched command or process has ended, without waiting and without reaping it. */
static bool target_ended(const struct stat_watch *w)
{
	struct pollfd pfd = { .fd = w->pidfd, .events = POLLIN };
	siginfo_t info = { 0 };

	if (w->pid <= 0)
		return false;
	if (w->pidfd >= 0)
		return poll(&pfd, 1, 0) > 0;
	if (w->child) /* WNOWAIT: the status stays for wait4() */
		return waitid(P_PID, (id_t)w->pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
		       info.si_pid == w->pid;
	return kill(w->pid, 0) != 0 && errno == ESRCH;
}

bool stat_sleep_until(const struct stat_watch *w, double until_ns)
{
	for (;;) {
		struct pollfd pfd = { .fd = w->pidfd, .events = POLLIN };
		double now = stat_now_ns(), until = until_ns, left_ms;

		if (stat_interrupted || target_ended(w) ||
		    (w->deadline_ns > 0 && now >= w->deadline_ns))
			return true;
		if (w->deadline_ns > 0 && w->deadline_ns < until)
			until = w->deadline_ns;
		if (now >= until)
			return false;
		/* Without a pidfd the end is seen by polling: at least every 100 ms. */
		left_ms = ceil((until - now) / 1e6);
		poll(&pfd, w->pidfd >= 0,
		     w->pidfd >= 0 || left_ms < 100 ? (int)fmin(left_ms, 1e9) : 100);
	}
}

/* d = now - prev, event by event; the estimate as the kernel would make it for the interval. */
static void interval_delta(struct stat_result *d, const struct lk_counter_value *now,
			   const struct lk_counter_value *prev)
{
	for (size_t i = 0; i < d->nevents; i++) {
		struct stat_event *e = &d->events[i];
		uint64_t value = now[i].value - prev[i].value;

		e->enabled = now[i].time_enabled - prev[i].time_enabled;
		e->running = now[i].time_running - prev[i].time_running;
		e->mean = (double)lk_counter_scale(value, e->enabled, e->running);
		if (e->running == 0 && e->enabled == 0)
			e->mean = (double)value; /* not enabled at all: a true count (0) */
		e->stddev = 0;
	}
}

int stat_intervals(struct lk_counters *c, const struct stat_result *r, const struct stat_watch *w,
		   const struct stat_interval_options *io, double *elapsed_ns)
{
	struct lk_counter_value *now = calloc(r->nevents + 1, sizeof(*now));
	struct lk_counter_value *prev = calloc(r->nevents + 1, sizeof(*prev));
	struct stat_event *events = calloc(r->nevents + 1, sizeof(*events));
	struct stat_result d = *r;
	double t0 = stat_now_ns(), last = t0, next = t0;
	bool ended = false;
	int err = 0;

	if (!now || !prev || !events) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < r->nevents; i++)
		events[i] = r->events[i]; /* names, units, support: the printing needs them */
	d.events = events;
	d.runs = 1;
	d.nthreads = 0;
	d.user_ns = d.sys_ns = -1;
	for (long k = 0; !ended; k++) {
		struct lk_counter_value *swap;
		double t;

		next += (double)io->interval_ms * 1e6;
		ended = stat_sleep_until(w, next);
		t = stat_now_ns();
		err = lk_counters_read(c, now, r->nevents);
		if (err < 0)
			break;
		err = 0;
		interval_delta(&d, now, prev);
		d.elapsed_mean = t - last;
		stat_print_interval(io->out, io->format, io->sep, (t - t0) / 1e9, &d, k == 0);
		fflush(io->out);
		swap = prev;
		prev = now;
		now = swap;
		last = t;
		/* Woken late (a busy machine): the next tick on the grid still ahead, not a burst of
		 * empty intervals to catch up. */
		while (next + (double)io->interval_ms * 1e6 <= t)
			next += (double)io->interval_ms * 1e6;
	}
	*elapsed_ns = last - t0;
out:
	free(now);
	free(prev);
	free(events);
	return err;
}
