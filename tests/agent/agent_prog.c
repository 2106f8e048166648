// SPDX-License-Identifier: MIT
/*
 * The program test_agent follows: it records what it is told on its standard input, one command a
 * line, and answers "done" on its standard output once the events are recorded.
 *   go N     N times: a span agt:work around an event agt:tick, then the counter agt:level = i
 *   ticks N  N events agt:tick, nothing else
 *   bench N  the same, timed by the thread's CPU time (the machine may be busy): prints
 *            "ns X", X per event, before its "done"
 *   lib N PATH  dlopen the library PATH (tests/control's lkt_ctl_lib: sites loaded now) and
 *            call its lkt_lib_work N times: N events lib:work
 *   otlp N MS  on a thread named "agt-otlp", N times: a span otl:request around an event
 *            otl:item (i, quarter = i / 4.0, label = "item") and a span otl:parse; then a span otl:nap around a
 *            sleep of MS ms. Prints "otlp TID BEFORE AFTER": the thread's id and CLOCK_REALTIME
 *            in ns 2 ms before its first event and 2 ms after its last
 *   beats FROM N US  for i from FROM, N times: a span otl:beat around an event otl:seq (i),
 *            then a sleep of US us
 *   locks N  4 threads, N times each: the mutex agt-queue (contended, sleeping 20 us held every
 *            64th time), the rwlock agt-table read (written every 16th time), then each of the
 *            two mutexes named agt-pair once. Prints "lock NAME ACQ READ_ACQ CONTENDED WAIT_NS
 *            HOLD_NS READ_HOLD_NS" for each of the four locks, as lk_*_stat gives them
 *   manylocks N  N more mutexes, many-00000 to many-N-1 (to 99999), each locked once and kept
 *            (bench/agent_locks.sh's scrape with many lock series)
 *   perf     opens the counter set "task-clock,context-switches" of its main thread (once) and
 *            prints "perf TASK_CLOCK ENABLED RUNNING CONTEXT_SWITCHES", read now; or "perf
 *            error MESSAGE" where the machine refuses
 *   perf2    opens a second set, "page-faults" of the process, and leaves it open
 *   pace FROM N PER_S  as beats, PER_S a second: each millisecond's at once, then a sleep
 *   cpu N US  N times: a span otl:burn around an event otl:turn (i) and, for even i, a loop
 *            spinning until the thread has used US us of CPU time, for odd i a sleep of US us.
 *            Prints, per span, "burn I INNER OUTER WALL": the thread's CPU time (ns) inside the
 *            span and around it, and CLOCK_MONOTONIC's time (ns) around it
 *   tail PATH SLOW_MS WINDOW_MS  spans otl:fast around an event otl:mark (i), 20 ms apart,
 *            and three spans otl:slow around a sleep of 2 * SLOW_MS: after 1.2 s of fast
 *            spans, after 1.2 s more, after 0.15 s more; then 1.2 s of fast spans. Each is written to PATH as recorded,
 *            "fast I T0 T1" or "slow T0 T1" (CLOCK_REALTIME ns before its begin and after its
 *            end), none within 5 ms of where a window of WINDOW_MS around a slow span ends:
 *            which ones a slow span's window covers is never a matter of a clock's jitter
 *   quit     exit(0)
 * LKT_PROG_NAME in its environment renames it (its comm) before anything is recorded.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <lowkey/counter.h>
#include <lowkey/error.h>
#include <lowkey/lock.h>
#include <lowkey/probe.h>

static void go(long n)
{
	for (long i = 0; i < n; i++) {
		{
			LK_SPAN(agt, work);
			LK_PROBE(agt, tick, i);
		}
		LK_COUNTER(agt, level, (int64_t)i);
	}
}

static void ticks(long n)
{
	for (long i = 0; i < n; i++)
		LK_PROBE(agt, tick, i);
}

static double cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void lib(long n, const char *path)
{
	void *h = dlopen(path, RTLD_NOW);
	void (*work)(int) = h ? (void (*)(int))dlsym(h, "lkt_lib_work") : NULL;

	if (!work) {
		printf("dlopen %s: %s\n", path, dlerror());
		return;
	}
	for (long i = 0; i < n; i++)
		work((int)i);
}

struct otlp_work {
	long n, sleep_ms;
	uint64_t before, after;
	pid_t tid;
};

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *otlp_thread(void *arg)
{
	struct otlp_work *w = arg;
	struct timespec nap = { w->sleep_ms / 1000, (w->sleep_ms % 1000) * 1000000L };
	/*
	 * A live trace's times are its counter at the rate calibrated when it started (the rate
	 * measured over the whole trace comes at its end): they stray from CLOCK_REALTIME by a few
	 * parts per million of the time since. 2 ms between the clock readings and the events is
	 * more than that strays in the seconds the test takes.
	 */
	struct timespec gap = { 0, 2000000 };

	/* named before its first event, which records the name */
	pthread_setname_np(pthread_self(), "agt-otlp");
	w->tid = gettid();
	w->before = realtime_ns();
	nanosleep(&gap, NULL);
	for (long i = 0; i < w->n; i++) {
		double quarter = (double)i / 4.0;
		const char *label = "item";
		LK_SPAN(otl, request);

		LK_PROBE(otl, item, i, quarter, label);
		{
			LK_SPAN(otl, parse);
		}
	}
	{
		LK_SPAN(otl, nap);
		nanosleep(&nap, NULL);
	}
	nanosleep(&gap, NULL);
	w->after = realtime_ns();
	return NULL;
}

static void otlp(long n, long sleep_ms)
{
	struct otlp_work w = { n, sleep_ms, 0, 0, 0 };
	pthread_t t;

	if (pthread_create(&t, NULL, otlp_thread, &w) == 0) {
		pthread_join(t, NULL);
		printf("otlp %d %llu %llu\n", (int)w.tid, (unsigned long long)w.before,
		       (unsigned long long)w.after);
	}
}

static uint64_t clock_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A span's thread CPU time, read by the program itself inside it and around it. */
struct burn {
	uint64_t inner, outer, wall;
};

static void burn_one(long i, long us, struct burn *b)
{
	uint64_t w0 = clock_ns(CLOCK_MONOTONIC), c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID), c1;

	{
		LK_SPAN(otl, burn);
		uint64_t in0 = clock_ns(CLOCK_THREAD_CPUTIME_ID), in1 = in0;
		struct timespec nap = { us / 1000000, (us % 1000000) * 1000 };

		LK_PROBE(otl, turn, i);
		if (i % 2 == 0)
			while (in1 - in0 < (uint64_t)us * 1000)
				in1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
		else
			nanosleep(&nap, NULL);
		in1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
		b->inner = in1 - in0;
	}
	c1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	b->wall = clock_ns(CLOCK_MONOTONIC) - w0;
	b->outer = c1 - c0;
}

static void burn(long n, long us)
{
	struct burn b;

	for (long i = 0; i < n; i++) {
		burn_one(i, us, &b);
		printf("burn %ld %llu %llu %llu\n", i, (unsigned long long)b.inner,
		       (unsigned long long)b.outer, (unsigned long long)b.wall);
	}
}

static void beats(long from, long n, long us)
{
	for (long i = from; i < from + n; i++) {
		{
			LK_SPAN(otl, beat);
			LK_PROBE(otl, seq, i);
		}
		if (us)
			usleep((useconds_t)us);
	}
}

static lk_mutex_t queue = LK_MUTEX_INIT("agt-queue");
static lk_rwlock_t table = LK_RWLOCK_INIT("agt-table");
static lk_mutex_t pair[2];

static void *lock_thread(void *arg)
{
	long n = *(const long *)arg;
	struct timespec held = { 0, 20000 };

	for (long i = 0; i < n; i++) {
		lk_mutex_lock(&queue);
		if (i % 64 == 0)
			nanosleep(&held, NULL); /* the others wait: contention */
		lk_mutex_unlock(&queue);
		if (i % 16 == 0) {
			lk_rwlock_write_lock(&table);
			lk_rwlock_write_unlock(&table);
		} else {
			lk_rwlock_read_lock(&table);
			lk_rwlock_read_unlock(&table);
		}
	}
	for (int k = 0; k < 2; k++) {
		lk_mutex_lock(&pair[k]);
		lk_mutex_unlock(&pair[k]);
	}
	return NULL;
}

static void print_lock(const struct lk_lockstat *st)
{
	printf("lock %s %llu %llu %llu %llu %llu %llu\n", st->name,
	       (unsigned long long)st->acquisitions, (unsigned long long)st->read_acquisitions,
	       (unsigned long long)st->contended, (unsigned long long)st->wait_total_ns,
	       (unsigned long long)st->hold_total_ns, (unsigned long long)st->read_hold_total_ns);
}

static void locks(long n)
{
	static bool made;
	pthread_t t[4];
	struct lk_lockstat st;

	if (!made) {
		lk_mutex_init(&pair[0], "agt-pair");
		lk_mutex_init(&pair[1], "agt-pair");
		made = true;
	}
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, lock_thread, &n);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	lk_mutex_stat(&queue, &st);
	print_lock(&st);
	lk_rwlock_stat(&table, &st);
	print_lock(&st);
	for (int k = 0; k < 2; k++) {
		lk_mutex_stat(&pair[k], &st);
		print_lock(&st);
	}
}

static void many_locks(long n)
{
	static char names[100000][32];
	lk_mutex_t *m = aligned_alloc(64, (size_t)n * sizeof(*m));

	for (long i = 0; m && i < n && i < 100000; i++) {
		snprintf(names[i], sizeof(names[i]), "many-%05ld", i);
		lk_mutex_init(&m[i], names[i]);
		lk_mutex_lock(&m[i]);
		lk_mutex_unlock(&m[i]);
	}
}

static void perf(void)
{
	static struct lk_counters *set;
	struct lk_counter_value v[2];

	if (!set && lk_counters_open(&set, "task-clock,context-switches", 0, 0) < 0) {
		printf("perf error %s\n", lk_last_error());
		return;
	}
	lk_counters_read(set, v, 2);
	printf("perf %llu %llu %llu %llu\n", (unsigned long long)v[0].value,
	       (unsigned long long)v[0].time_enabled, (unsigned long long)v[0].time_running,
	       (unsigned long long)v[1].value);
}

static void perf2(void)
{
	static struct lk_counters *set;

	if (!set && lk_counters_open(&set, "page-faults", 0, LK_COUNTERS_PROCESS) < 0)
		printf("perf error %s\n", lk_last_error());
}

/* A millisecond's beats at once, then a sleep until the next: the CPU left to the others. */
static void pace(long from, long n, long per_s)
{
	struct timespec at;

	clock_gettime(CLOCK_MONOTONIC, &at);
	for (long i = 0, ms = 1; i < n; ms++) {
		long due = (long)((uint64_t)ms * (uint64_t)per_s / 1000u);

		for (; i < n && i < due; i++) {
			LK_SPAN(otl, beat);
			LK_PROBE(otl, seq, from + i);
		}
		at.tv_nsec += 1000000;
		if (at.tv_nsec >= 1000000000L) {
			at.tv_sec++;
			at.tv_nsec -= 1000000000L;
		}
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL);
	}
}

#define TAIL_MAX 1024
#define TAIL_MARGIN_NS 5000000ull

struct tail {
	FILE *f;
	uint64_t slow_ns, window_ns;
	uint64_t fast_end[TAIL_MAX]; /* the fast spans' T1 */
	uint64_t slow_end[8];	     /* the slow spans' T1 */
	long nfast, nslow;
};

static void sleep_until(uint64_t t)
{
	for (uint64_t now = realtime_ns(); now < t; now = realtime_ns()) {
		struct timespec ts = { (time_t)((t - now) / 1000000000u),
				       (long)((t - now) % 1000000000u) };

		nanosleep(&ts, NULL);
	}
}

static bool near(uint64_t t, uint64_t edge)
{
	return t + TAIL_MARGIN_NS > edge && t < edge + TAIL_MARGIN_NS;
}

/* A fast span, started clear of the end of every slow span's window. */
static void tail_fast(struct tail *t)
{
	uint64_t t0, t1;
	long i = t->nfast;

	for (long k = 0; k < t->nslow; k++)
		if (near(realtime_ns(), t->slow_end[k] + t->window_ns))
			sleep_until(t->slow_end[k] + t->window_ns + TAIL_MARGIN_NS);
	t0 = realtime_ns();
	{
		LK_SPAN(otl, fast);
		LK_PROBE(otl, mark, i);
	}
	t1 = realtime_ns();
	fprintf(t->f, "fast %ld %llu %llu\n", i, (unsigned long long)t0, (unsigned long long)t1);
	t->fast_end[t->nfast++] = t1;
}

/* A slow span, started where its window's start is clear of every fast span's end. */
static void tail_slow(struct tail *t)
{
	struct timespec nap = { (time_t)(2 * t->slow_ns / 1000000000u),
				(long)(2 * t->slow_ns % 1000000000u) };
	uint64_t t0, t1;
	bool clear;

	do {
		t0 = realtime_ns();
		clear = true;
		for (long k = 0; k < t->nfast && clear; k++)
			clear = !near(t->fast_end[k], t0 - t->window_ns);
		if (!clear)
			sleep_until(t0 + 1000000);
	} while (!clear);
	{
		LK_SPAN(otl, slow);
		nanosleep(&nap, NULL);
	}
	t1 = realtime_ns();
	fprintf(t->f, "slow %llu %llu\n", (unsigned long long)t0, (unsigned long long)t1);
	t->slow_end[t->nslow++] = t1;
}

static void tail_fast_for(struct tail *t, long ms)
{
	uint64_t end = realtime_ns() + (uint64_t)ms * 1000000u;
	struct timespec gap = { 0, 20000000 };

	while (realtime_ns() < end && t->nfast < TAIL_MAX) {
		tail_fast(t);
		nanosleep(&gap, NULL);
	}
}

static void tail(const char *path, long slow_ms, long window_ms)
{
	static const long fast_ms[] = { 1200, 1200, 150, 1200 };
	struct tail t = { .f = fopen(path, "w"),
			  .slow_ns = (uint64_t)slow_ms * 1000000u,
			  .window_ns = (uint64_t)window_ms * 1000000u };

	if (!t.f) {
		printf("cannot write %s\n", path);
		return;
	}
	for (int k = 0; k < 4; k++) {
		tail_fast_for(&t, fast_ms[k]);
		if (k < 3)
			tail_slow(&t);
	}
	fclose(t.f);
}

int main(void)
{
	char line[4200], path[4096];
	long n, m, from;

	/* a name of its own (its comm): agents following lkt_agent_prog leave it alone */
	if (getenv("LKT_PROG_NAME"))
		prctl(PR_SET_NAME, getenv("LKT_PROG_NAME"), 0, 0, 0);
	setvbuf(stdout, NULL, _IONBF, 0);
	printf("ready\n");
	while (fgets(line, sizeof(line), stdin)) {
		if (sscanf(line, "go %ld", &n) == 1)
			go(n);
		else if (sscanf(line, "otlp %ld %ld", &n, &m) == 2)
			otlp(n, m);
		else if (sscanf(line, "beats %ld %ld %ld", &from, &n, &m) == 3)
			beats(from, n, m);
		else if (sscanf(line, "pace %ld %ld %ld", &from, &n, &m) == 3 && m > 0)
			pace(from, n, m);
		else if (sscanf(line, "cpu %ld %ld", &n, &m) == 2)
			burn(n, m);
		else if (sscanf(line, "ticks %ld", &n) == 1)
			ticks(n);
		else if (sscanf(line, "bench %ld", &n) == 1 && n > 0) {
			double t0 = cpu_ns();

			ticks(n);
			printf("ns %.3f\n", (cpu_ns() - t0) / (double)n);
		} else if (sscanf(line, "locks %ld", &n) == 1)
			locks(n);
		else if (sscanf(line, "manylocks %ld", &n) == 1 && n > 0)
			many_locks(n);
		else if (strncmp(line, "perf2", 5) == 0)
			perf2();
		else if (strncmp(line, "perf", 4) == 0)
			perf();
		else if (sscanf(line, "tail %4095s %ld %ld", path, &n, &m) == 3)
			tail(path, n, m);
		else if (sscanf(line, "lib %ld %4095s", &n, path) == 2)
			lib(n, path);
		else if (strncmp(line, "quit", 4) == 0)
			break;
		printf("done\n");
	}
	return 0;
}
