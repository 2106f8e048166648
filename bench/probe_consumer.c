// SPDX-License-Identifier: MIT
/*
 * `lowkey bench probe`: what each tracer's consumer spends an event, and the memcpy bandwidth and
 * the trace directory's write rate the sustained rate is quoted against.
 *
 * The consumers' CPU: one paced producer thread at a rate both tracers sustained, for 3 trial
 * lengths, CPU_RUNS times each, lowkey and LTTng-UST alternating. lowkey's consumer is the
 * threads its trace adds to this process (the thread named lowkey-trace today); LTTng-UST's is
 * the lttng-consumerd process that serves user space. Both read from /proc's schedstat, the
 * scheduler's run time in ns (utime and stime in /proc's stat count 10 ms ticks: too coarse for a
 * few seconds of a consumer that idles most of them), over the run and until every event is
 * written: lowkey's once its statistics count every event emitted, before lk_trace_stop;
 * LTTng-UST's once `lttng stop` returned, which waits for the consumer daemon.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lowkey/lowkey.h>

#include "bench.h"
#include "probe_bench.h"

/* The run time in ns that a schedstat file begins with, or -errno. */
static int64_t read_schedstat(const char *path)
{
	unsigned long long ns;
	FILE *f = fopen(path, "re");
	int n;

	if (!f)
		return -errno;
	n = fscanf(f, "%llu", &ns);
	fclose(f);
	return n == 1 ? (int64_t)ns : -ENODATA;
}

int64_t probe_task_cpu_ns(pid_t pid, pid_t tid)
{
	char path[320];
	struct dirent *de;
	int64_t sum = 0;
	DIR *d;

	if (tid) {
		snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", (int)pid, (int)tid);
		return read_schedstat(path);
	}
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		int64_t ns;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/schedstat", (int)pid, de->d_name);
		ns = read_schedstat(path);
		if (ns == -ENOENT)
			continue; /* the thread exited meanwhile */
		if (ns < 0) {
			sum = ns;
			break;
		}
		sum += ns;
	}
	closedir(d);
	return sum;
}

/* ---- lowkey's consumer ---- */

#define MAX_TASKS 256

/* This process's threads, and the CPU time of each. */
struct tasks {
	int n;
	pid_t tid[MAX_TASKS];
	int64_t cpu_ns[MAX_TASKS];
};

static void list_tasks(struct tasks *t)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;

	t->n = 0;
	if (!d)
		return;
	while ((de = readdir(d)) && t->n < MAX_TASKS) {
		pid_t tid = (pid_t)atoi(de->d_name);
		int64_t ns = tid > 0 ? probe_task_cpu_ns(getpid(), tid) : -1;

		if (ns >= 0) {
			t->tid[t->n] = tid;
			t->cpu_ns[t->n++] = ns;
		}
	}
	closedir(d);
}

/* tid's index in t, or -1. */
static int task_index(const struct tasks *t, pid_t tid)
{
	for (int i = 0; i < t->n; i++)
		if (t->tid[i] == tid)
			return i;
	return -1;
}

/* The CPU time, between started and now, of the threads in now that were not in before: those
 * the trace started (its producers have been joined). */
static uint64_t trace_threads_cpu(const struct tasks *before, const struct tasks *started,
				  const struct tasks *now)
{
	uint64_t ns = 0;

	for (int i = 0; i < now->n; i++) {
		int at = task_index(started, now->tid[i]);

		if (task_index(before, now->tid[i]) >= 0)
			continue;
		ns += (uint64_t)(now->cpu_ns[i] - (at >= 0 ? started->cpu_ns[at] : 0));
	}
	return ns;
}

/* Wait until the trace has written (or lost) `expected` events, at most about 2 s: false if not. */
static bool wait_written(uint64_t expected)
{
	struct lk_trace_stats st;

	for (int i = 0; i < 4000; i++) {
		lk_trace_stats(&st);
		if (st.events + st.lost >= expected)
			return true;
		usleep(500);
	}
	return false;
}

struct cpu_run probe_lowkey_cpu_run(const struct probe_options *o, double rate, double seconds)
{
	static struct tasks before, started, now;
	struct cpu_run r = { 0 };
	struct lk_trace_stats st;
	uint64_t emitted;
	char dir[4096];

	if (probe_task_cpu_ns(getpid(), (pid_t)gettid()) < 0) {
		r.missing = "no /proc/self/task/TID/schedstat (a kernel without CONFIG_SCHED_INFO)";
		return r;
	}
	list_tasks(&before);
	if (probe_start_trace(o, "cpu", 0, 0, dir, sizeof(dir)) != 0) {
		r.missing = "cannot trace";
		return r;
	}
	list_tasks(&started);
	probe_produce(1, rate, seconds, &emitted);
	if (!wait_written(emitted))
		r.missing = "the trace had not written every event 2 s after the producer stopped";
	list_tasks(&now);
	lk_trace_stop();
	lk_trace_stats(&st);
	probe_remove_trace(dir);
	r.cpu_ns = trace_threads_cpu(&before, &started, &now);
	r.events = st.events;
	r.lost = st.lost;
	return r;
}

/* ---- both ---- */

/* The median, min and max of runs' CPU an event written, and their events and losses. */
static struct consumer_cpu summarize_cpu(const struct cpu_run *runs, int n)
{
	struct consumer_cpu c = { .ns_per_event = NAN, .min = NAN, .max = NAN };
	double v[CPU_RUNS];

	for (int i = 0; i < n; i++) {
		if (runs[i].missing || !runs[i].events) {
			c.missing = runs[i].missing ? runs[i].missing : "no event written";
			return c;
		}
		v[i] = (double)runs[i].cpu_ns / (double)runs[i].events;
		c.events += runs[i].events;
		c.lost += runs[i].lost;
	}
	c.ns_per_event = lkb_median(v, (size_t)n);
	c.min = v[0];
	c.max = v[n - 1];
	return c;
}

/* The highest rate both sustained, with a margin, at most o->cpu_rate; a round figure. */
static double common_rate(const struct probe_options *o, double lowkey_rate, double lttng_rate)
{
	double rate = o->cpu_rate;

	if (lowkey_rate > 0)
		rate = fmin(rate, 0.8 * lowkey_rate);
	if (lttng_rate > 0)
		rate = fmin(rate, 0.8 * lttng_rate);
	rate = floor(rate / 1e5) * 1e5;
	return rate < 1e5 ? 1e5 : rate;
}

struct consumer_cpu_result probe_consumer_cpu(const struct probe_options *o,
					      const struct lttng_env *e, double lowkey_rate,
					      double lttng_rate)
{
	struct consumer_cpu_result c = { .seconds = 3 * o->seconds };
	struct cpu_run lk[CPU_RUNS], lt[CPU_RUNS];

	c.rate = common_rate(o, lowkey_rate, e ? lttng_rate : 0);
	for (int i = 0; i < CPU_RUNS; i++) {
		lkb_progress("consumer CPU, run %d of %d: lowkey", i + 1, CPU_RUNS);
		lk[i] = probe_lowkey_cpu_run(o, c.rate, c.seconds);
		if (!e)
			continue;
		lkb_progress("consumer CPU, run %d of %d: LTTng-UST", i + 1, CPU_RUNS);
		lt[i] = probe_lttng_cpu_run(o, e, c.rate, c.seconds);
	}
	c.lowkey = summarize_cpu(lk, CPU_RUNS);
	if (e)
		c.lttng = summarize_cpu(lt, CPU_RUNS);
	else
		c.lttng = (struct consumer_cpu){ .ns_per_event = NAN,
						 .min = NAN,
						 .max = NAN,
						 .missing = "skipped (--no-lttng)" };
	return c;
}

/* ---- memory bandwidth ---- */

#define MEMCPY_RUNS 9
#define MEMCPY_COPIES 4

double probe_memcpy_bytes_per_s(void)
{
	size_t size = (size_t)MEMCPY_MIB << 20;
	char *from = malloc(size), *to = malloc(size);
	double v[MEMCPY_RUNS];

	if (!from || !to) {
		free(from);
		free(to);
		return NAN;
	}
	memset(from, 1, size); /* every page faulted in before the clock runs */
	memset(to, 2, size);
	for (int r = 0; r < MEMCPY_RUNS; r++) {
		uint64_t t0 = lkb_now_ns();

		for (int i = 0; i < MEMCPY_COPIES; i++) {
			memcpy(to, from, size);
			asm volatile("" : : "r"(to) : "memory");
		}
		v[r] = (double)(MEMCPY_COPIES * size) / ((double)(lkb_now_ns() - t0) / 1e9);
	}
	free(from);
	free(to);
	return lkb_median(v, MEMCPY_RUNS);
}

/* ---- the trace directory's write rate ---- */

#define DIR_WRITE_RUNS 3
#define DIR_WRITE_CHUNK (256u << 10)

/* Bytes/s of one run, NaN if a write fails. */
static double dir_write_once(const char *path, const char *chunk, double seconds)
{
	uint64_t max = (uint64_t)DIR_WRITE_MAX_MIB << 20, bytes = 0, t0, end, now;
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

	if (fd < 0)
		return NAN;
	t0 = lkb_now_ns();
	end = t0 + (uint64_t)(seconds * 1e9);
	do {
		if (write(fd, chunk, DIR_WRITE_CHUNK) != (ssize_t)DIR_WRITE_CHUNK) {
			bytes = 0;
			break;
		}
		bytes += DIR_WRITE_CHUNK;
		now = lkb_now_ns();
	} while (now < end && bytes < max);
	close(fd);
	unlink(path);
	return bytes ? (double)bytes / ((double)(now - t0) / 1e9) : NAN;
}

double probe_dir_write_bytes_per_s(const char *dir, double seconds)
{
	char path[4096], *chunk = malloc(DIR_WRITE_CHUNK);
	double v[DIR_WRITE_RUNS];

	if (!chunk)
		return NAN;
	memset(chunk, 3, DIR_WRITE_CHUNK);
	snprintf(path, sizeof(path), "%s/lowkey-bench-write-%d", dir, (int)getpid());
	for (int r = 0; r < DIR_WRITE_RUNS; r++) {
		v[r] = dir_write_once(path, chunk, seconds);
		if (isnan(v[r])) {
			free(chunk);
			return NAN;
		}
	}
	free(chunk);
	return lkb_median(v, DIR_WRITE_RUNS);
}
