// SPDX-License-Identifier: MIT
/*
 * `lowkey bench sem`, after sembench: the cost of an uncontended lock + unlock (pthread_mutex,
 * lk_mutex, and pthread_mutex in a program run under `lowkey locks`, liblowkey-locks.so
 * preloaded), and a lock-heavy program, bare and under `lowkey locks`: the slowdown the profiler
 * costs.
 *
 * These run in child processes -- this same program, re-executed with `--child WHAT` -- so that
 * the bare run and the run with liblowkey-locks.so preloaded start alike. A child prints its
 * figures on one line.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lowkey/lowkey.h>

#include "bench.h"
#include "lowkey-locks-paths.h"
#include "sem_bench.h"

#define LOCK_LOOPS 5000000
#define LOCK_ROUNDS 9

static void *idle_thread(void *arg)
{
	pause();
	return arg;
}

/* Median ns per lock + unlock, for pthread_mutex and lk_mutex, measured interleaved. */
int sem_child_locks(void)
{
	static pthread_mutex_t pm = PTHREAD_MUTEX_INITIALIZER;
	static lk_mutex_t lm = LK_MUTEX_INIT("bench");
	double p[LOCK_ROUNDS], l[LOCK_ROUNDS];
	pthread_t idle;

	/* a second thread: glibc then uses atomic instructions, as in any threaded program */
	pthread_create(&idle, NULL, idle_thread, NULL);
	for (int r = 0; r < LOCK_ROUNDS; r++) {
		uint64_t t0 = lkb_now_ns();

		for (int i = 0; i < LOCK_LOOPS; i++) {
			pthread_mutex_lock(&pm);
			pthread_mutex_unlock(&pm);
		}
		p[r] = (double)(lkb_now_ns() - t0) / LOCK_LOOPS;
		t0 = lkb_now_ns();
		for (int i = 0; i < LOCK_LOOPS; i++) {
			lk_mutex_lock(&lm);
			lk_mutex_unlock(&lm);
		}
		l[r] = (double)(lkb_now_ns() - t0) / LOCK_LOOPS;
	}
	printf("%.3f %.3f\n", lkb_median(p, LOCK_ROUNDS), lkb_median(l, LOCK_ROUNDS));
	return 0;
}

#define INSIDE 40  /* dependent multiply-adds in the critical section (~50 ns) */
#define OUTSIDE 80 /* and between two (~100 ns) */

struct heavy_slot {
	pthread_mutex_t lock;
	uint64_t counters[4];
} __attribute__((aligned(64)));

struct heavy {
	struct heavy_slot slots[HEAVY_LOCKS];
	bool empty;
	uint64_t sink;
};

static uint64_t spin(uint64_t x, int n)
{
	for (int i = 0; i < n; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	return x;
}

static void *heavy_thread(void *arg)
{
	struct heavy *h = arg;
	uint64_t x = (uint64_t)pthread_self() | 1;
	int ops = h->empty ? HEAVY_OPS / 2 : HEAVY_OPS;

	for (int i = 0; i < ops; i++) {
		struct heavy_slot *s;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		s = &h->slots[x % HEAVY_LOCKS];
		pthread_mutex_lock(&s->lock);
		if (!h->empty) {
			for (int j = 0; j < 4; j++)
				s->counters[j] += x >> j;
			x = spin(x, INSIDE);
		}
		pthread_mutex_unlock(&s->lock);
		if (!h->empty)
			x = spin(x, OUTSIDE);
	}
	__atomic_fetch_add(&h->sink, x, __ATOMIC_RELAXED);
	return NULL;
}

/* Seconds for the lock-heavy program: 2 threads per CPU (at most 8) sharing 64 mutexes. */
int sem_child_heavy(bool empty)
{
	static struct heavy h;
	int nthreads = 2 * lkb_ncpus();
	pthread_t t[8];
	uint64_t t0;

	if (nthreads > 8)
		nthreads = 8;
	h.empty = empty;
	for (int i = 0; i < HEAVY_LOCKS; i++)
		pthread_mutex_init(&h.slots[i].lock, NULL);
	t0 = lkb_now_ns();
	for (int i = 0; i < nthreads; i++)
		pthread_create(&t[i], NULL, heavy_thread, &h);
	for (int i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	printf("%.6f %d\n", (double)(lkb_now_ns() - t0) / 1e9, nthreads);
	return 0;
}

static const char *find_preload(void)
{
	const char *env = getenv("LOWKEY_LOCKS_LIB");
	static char buf[4096];
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (env)
		return access(env, R_OK) == 0 ? env : NULL;
	if (n > 0) {
		char *slash;

		exe[n] = 0;
		slash = strrchr(exe, '/');
		if (slash) {
			*slash = 0;
			if (snprintf(buf, sizeof(buf), "%s/../%s/liblowkey-locks.so", exe,
				     LK_LOCKS_LIBDIR) < (int)sizeof(buf) &&
			    access(buf, R_OK) == 0)
				return buf;
		}
	}
	if (access(LK_LOCKS_PRELOAD_BUILD, R_OK) == 0)
		return LK_LOCKS_PRELOAD_BUILD;
	if (access(LK_LOCKS_PRELOAD_INSTALL, R_OK) == 0)
		return LK_LOCKS_PRELOAD_INSTALL;
	return NULL;
}

static void remove_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	while (d && (de = readdir(d))) {
		char path[4096];

		if (de->d_name[0] != '.' &&
		    snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) < (int)sizeof(path))
			unlink(path);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

/* Run `lowkey bench sem --child what`, bare or under the preload; its figures in v[0..n). */
static int run_child(const char *what, const char *preload, double *v, int n)
{
	char dir[] = "/tmp/lowkey-bench-sem.XXXXXX", line[256];
	int fd[2], status, got = 0;
	ssize_t len;
	pid_t pid;

	if (preload && !mkdtemp(dir))
		return -errno;
	if (pipe(fd) != 0)
		return -errno;
	pid = fork();
	if (pid == 0) {
		dup2(fd[1], 1);
		close(fd[0]);
		close(fd[1]);
		if (preload) {
			setenv("LD_PRELOAD", preload, 1);
			setenv("LOWKEY_LOCKS_DIR", dir, 1);
		}
		execl("/proc/self/exe", "lowkey", "bench", "sem", "--child", what, (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	len = pid > 0 ? read(fd[0], line, sizeof(line) - 1) : -1;
	close(fd[0]);
	if (pid > 0)
		waitpid(pid, &status, 0);
	if (preload)
		remove_dir(dir);
	if (len <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return -ECHILD;
	line[len] = 0;
	for (char *p = line, *end; got < n; p = end, got++) {
		v[got] = strtod(p, &end);
		if (end == p)
			return -EINVAL;
	}
	return 0;
}

int sem_measure_lock_costs(int runs, struct lock_costs *c)
{
	const char *preload = find_preload();
	double p[16], l[16], q[16], hb[16], hp[16], eb[16], ep[16], v[2];
	int err = 0;

	memset(c, 0, sizeof(*c));
	c->have_preload = preload != NULL;
	for (int r = 0; r < runs && !err; r++) {
		err = run_child("locks", NULL, v, 2);
		p[r] = v[0];
		l[r] = v[1];
		err = err ?: run_child("heavy", NULL, v, 2);
		hb[r] = v[0];
		c->heavy_threads = (int)v[1];
		err = err ?: run_child("empty", NULL, v, 2);
		eb[r] = v[0];
		if (preload && !err) {
			err = run_child("locks", preload, v, 2);
			q[r] = v[0];
			err = err ?: run_child("heavy", preload, v, 2);
			hp[r] = v[0];
			err = err ?: run_child("empty", preload, v, 2);
			ep[r] = v[0];
		}
	}
	if (err)
		return err;
	c->pthread_ns = lkb_median(p, (size_t)runs);
	c->lk_ns = lkb_median(l, (size_t)runs);
	c->heavy_bare_s = lkb_median(hb, (size_t)runs);
	c->empty_bare_s = lkb_median(eb, (size_t)runs);
	if (preload) {
		c->preload_ns = lkb_median(q, (size_t)runs);
		c->heavy_preload_s = lkb_median(hp, (size_t)runs);
		c->empty_preload_s = lkb_median(ep, (size_t)runs);
	}
	return 0;
}
