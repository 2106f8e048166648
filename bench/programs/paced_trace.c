// SPDX-License-Identifier: MIT
/*
 * paced_trace: one trial of `lowkey bench probe`'s sustained rate, alone. One thread records
 * two-integer events at RATE events/s for SECONDS into a trace in DIR (removed after), as the
 * bench's paced producer does; then what was written and lost, and how busy the trace's consumer
 * thread was meanwhile: its time on a CPU and its time waiting for one (runnable), from /proc's
 * schedstat, over the run's wall time.
 *
 *   paced_trace RATE [DIR [SECONDS]]       defaults: /dev/shm, 1
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lowkey/lowkey.h>

#include "probe_pace.h"

static void batch(uint64_t n)
{
	for (int i = 0; i < LKB_PACE_BATCH; i++)
		LK_PROBE(paced, event, (long)n, (long)i);
}

/* The trace's consumer thread (it names itself once it runs), or 0. */
static int consumer_tid(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	int tid = 0;

	while (d && (de = readdir(d))) {
		char path[300], comm[64] = "";
		FILE *f;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", de->d_name);
		f = fopen(path, "r");
		if (f && fgets(comm, sizeof(comm), f) && strncmp(comm, "lowkey-trace", 12) == 0)
			tid = atoi(de->d_name);
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
	return tid;
}

/* The thread's time on a CPU and waiting for one (runnable), ns: /proc's schedstat. */
static void sched_ns(int tid, double *run, double *wait)
{
	char path[128];
	unsigned long long r = 0, w = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat", tid);
	f = fopen(path, "r");
	if (f && fscanf(f, "%llu %llu", &r, &w) != 2)
		r = w = 0;
	if (f)
		fclose(f);
	*run = (double)r;
	*wait = (double)w;
}

int main(int argc, char **argv)
{
	double rate = argc > 1 ? atof(argv[1]) : 0, seconds = argc > 3 ? atof(argv[3]) : 1;
	const char *dir = argc > 2 ? argv[2] : "/dev/shm";
	struct lkb_pace pace = { .rate = rate, .seconds = seconds, .cpu = -1 };
	struct lk_trace_stats st;
	double run0, run1, wait0, wait1, t0, t1;
	char path[4096], cmd[4200];
	int tid;

	if (rate <= 0 || seconds <= 0) {
		fprintf(stderr, "usage: %s RATE [DIR [SECONDS]]\n", argv[0]);
		return 2;
	}
	snprintf(path, sizeof(path), "%s/paced_trace-%d", dir, (int)getpid());
	lk_probe_enable("paced");
	if (lk_trace_start(&(struct lk_trace_config){ .path = path })) {
		fprintf(stderr, "%s: %s\n", argv[0], lk_last_error());
		return 1;
	}
	while (!(tid = consumer_tid()))
		usleep(100);
	sched_ns(tid, &run0, &wait0);
	t0 = (double)lkb_pace_now_ns();
	lkb_pace_run(&pace, batch);
	sched_ns(tid, &run1, &wait1);
	t1 = (double)lkb_pace_now_ns();
	lk_trace_stop();
	lk_trace_stats(&st);
	printf("asked %.1f M events/s, emitted %.1f M/s: %llu written, %llu lost; consumer on a CPU "
	       "%.2f of the run, waiting for one %.2f\n",
	       rate / 1e6, pace.achieved / 1e6, (unsigned long long)st.events,
	       (unsigned long long)st.lost, (run1 - run0) / (t1 - t0), (wait1 - wait0) / (t1 - t0));
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	return system(cmd) ? 1 : 0;
}
