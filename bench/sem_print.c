// SPDX-License-Identifier: MIT
/*
 * `lowkey bench sem`'s output: the text, a part as soon as it is measured, or JSON at the end;
 * beside this machine's figures, those Manfred Spraul's series "ipc/sem.c: Optimization for
 * reducing spinlock contention" published.
 */
#include <math.h>
#include <stdio.h>

#include "bench.h"
#include "sem_bench.h"

static const char *const mode_titles[NMODES] = { "SysV semop (ipc)", "lk_semset (lowkey)", "futex",
						 "nanosleep poll" };

/* The series' figures: ./sembench -t 250 -w 64 -o 0 -r 30 on a 4-core AMD Phenom, before and after. */
static const struct published_figures {
	const char *when;
	double burns_per_s, main_burns, free, contended, wait_cycles, avg_cycles, per_mille;
} published[2] = {
	{ "before", 211756, 2194274, 745344, 7801967, 110278262115.0, 14134, 470 },
	{ "after", 236144, 112890, 6704845, 490448, 2625106215.0, 5352, 11 },
};

static double kernel_per_mille(const struct run_result *r)
{
	return r->seconds > 0 ?
		       (double)r->kernel.wait_ns / (r->seconds * 1e9 * lkb_ncpus()) * 1000 :
		       0;
}

static void print_kernel(const struct run_result *r)
{
	const struct kernel_locks *k = &r->kernel;

	if (!k->ok) {
		printf("      kernel locks: n/a (%s)\n", k->why);
		return;
	}
	printf("      kernel locks:   free n/a  contended %lu  wait %lu ns  avg %lu ns  1/1000 cpu time %.1f%s\n",
	       (unsigned long)k->contended, (unsigned long)k->wait_ns,
	       (unsigned long)(k->contended ? k->wait_ns / k->contended : 0), kernel_per_mille(r),
	       k->lost || k->overflow ? "  (events lost: figures are lower bounds)" : "");
}

/* The text a part at a time, each as soon as it is measured: the modes' runs, then the lock costs. */
void sem_print_header(const struct sem_options *o)
{
	printf("lowkey bench sem: sembench, %d threads waking %d at a time, %.0f s x %d runs, %s\n",
	       o->nthreads, o->wake, (double)o->seconds, o->runs,
	       o->bind ? "bound to CPUs" : "not bound");
	printf("machine: %s\n\n", lkb_machine());
	fflush(stdout);
}

void sem_print_modes(const struct sem_options *o, const struct mode_result *m)
{
	for (int i = 0; i < NMODES; i++) {
		const struct run_result *r = &m[i].median;

		if (!m[i].ran)
			continue;
		printf("  %-20s %10.0f worker burns/s   main thread burns %lu\n", mode_titles[i],
		       m[i].burns_per_s, (unsigned long)r->main_burns);
		printf("      worker burn count total %lu min %lu max %lu avg %lu, run time %.2f s\n",
		       (unsigned long)r->burns, (unsigned long)r->min_burns,
		       (unsigned long)r->max_burns,
		       (unsigned long)(r->burns / (uint64_t)o->nthreads), r->seconds);
		if (i == MODE_LOWKEY)
			printf("      lk_semset locks: free %lu  contended %lu  wait %lu ns  avg %lu ns  1/1000 cpu time %.1f"
			       "  (set-lock calls %lu, switches to set-lock mode %lu)\n",
			       (unsigned long)r->lk.free, (unsigned long)r->lk.contended,
			       (unsigned long)r->lk.wait_ns, (unsigned long)r->lk.wait_avg_ns,
			       r->lk.wait_per_mille, (unsigned long)r->lk.global_ops,
			       (unsigned long)r->lk.global_mode_entries);
		print_kernel(r);
	}
	if (m[MODE_IPC].ran && m[MODE_LOWKEY].ran)
		printf("\n  lk_semset / SysV worker burns per second: %.2fx (target: >= 2x at -t 250 -w 64)\n",
		       m[MODE_LOWKEY].burns_per_s / m[MODE_IPC].burns_per_s);
	printf("\n  \"ipc/sem.c: Optimization for reducing spinlock contention\"\n"
	       "  (ipc, -t 250 -w 64 -r 30, 4-core AMD Phenom; wait and avg in TSC cycles):\n");
	for (int i = 0; i < 2; i++)
		printf("    %-6s %8.0f worker burns/s  main burns %.0f  free %.0f contended %.0f wait %.0f avg %.0f "
		       "1/1000 cpu time %.0f\n",
		       published[i].when, published[i].burns_per_s, published[i].main_burns,
		       published[i].free, published[i].contended, published[i].wait_cycles,
		       published[i].avg_cycles, published[i].per_mille);
	fflush(stdout);
}

void sem_print_lock_costs(const struct sem_options *o, const struct lock_costs *c)
{
	int runs = o->runs;

	printf("\n  lock + unlock, uncontended, ns (median of %d processes):\n", runs);
	printf("    pthread_mutex                     %6.2f\n", c->pthread_ns);
	printf("    lk_mutex                          %6.2f   (%+.2f ns; target: within 5 ns)\n",
	       c->lk_ns, c->lk_ns - c->pthread_ns);
	if (c->have_preload)
		printf("    pthread_mutex under lowkey locks  %6.2f   (%+.2f ns)\n", c->preload_ns,
		       c->preload_ns - c->pthread_ns);
	else
		printf("    pthread_mutex under lowkey locks  n/a (liblowkey-locks.so not found; set LOWKEY_LOCKS_LIB)\n");
	printf("\n  lock-heavy program: %d threads, %d mutexes, %d lock/unlock each (seconds, median of %d):\n",
	       c->heavy_threads, HEAVY_LOCKS, HEAVY_OPS, runs);
	if (c->have_preload) {
		printf("    ~50 ns critical sections          bare %.3f   under lowkey locks %.3f   %.2fx (target: <= 1.5x)\n",
		       c->heavy_bare_s, c->heavy_preload_s, c->heavy_preload_s / c->heavy_bare_s);
		printf("    empty critical sections (worst)   bare %.3f   under lowkey locks %.3f   %.2fx\n",
		       c->empty_bare_s, c->empty_preload_s, c->empty_preload_s / c->empty_bare_s);
	}
}

static void json_kernel(struct lk__json *j, const struct run_result *r)
{
	lk__json_object(j, "kernel_locks");
	if (r->kernel.ok) {
		lk__json_null(j, "free");
		lk__json_int(j, "contended", (long long)r->kernel.contended);
		lk__json_int(j, "wait_ns", (long long)r->kernel.wait_ns);
		lk__json_int(j, "avg_ns",
			     (long long)(r->kernel.contended ?
						 r->kernel.wait_ns / r->kernel.contended :
						 0));
		lk__json_num(j, "per_mille_cpu", kernel_per_mille(r));
		lk__json_int(j, "lost_events", (long long)r->kernel.lost);
		lk__json_bool(j, "lower_bounds", r->kernel.lost || r->kernel.overflow);
	} else {
		lk__json_str(j, "unavailable", r->kernel.why);
	}
	lk__json_close(j);
}

static void json_lk_semset(struct lk__json *j, const struct run_result *r)
{
	lk__json_object(j, "lk_semset_locks");
	lk__json_int(j, "free", (long long)r->lk.free);
	lk__json_int(j, "contended", (long long)r->lk.contended);
	lk__json_int(j, "wait_ns", (long long)r->lk.wait_ns);
	lk__json_int(j, "avg_ns", (long long)r->lk.wait_avg_ns);
	lk__json_num(j, "per_mille_cpu", r->lk.wait_per_mille);
	lk__json_int(j, "set_lock_calls", (long long)r->lk.global_ops);
	lk__json_int(j, "set_lock_mode_switches", (long long)r->lk.global_mode_entries);
	lk__json_close(j);
}

static void json_modes(struct lk__json *j, const struct mode_result *m)
{
	lk__json_array(j, "sembench");
	for (int i = 0; i < NMODES; i++) {
		const struct run_result *r = &m[i].median;

		if (!m[i].ran)
			continue;
		lk__json_object(j, NULL);
		lk__json_str(j, "mode", sem_mode_names[i]);
		lk__json_num(j, "worker_burns_per_s", m[i].burns_per_s);
		lk__json_int(j, "worker_burns", (long long)r->burns);
		lk__json_int(j, "worker_burns_min", (long long)r->min_burns);
		lk__json_int(j, "worker_burns_max", (long long)r->max_burns);
		lk__json_int(j, "main_burns", (long long)r->main_burns);
		lk__json_num(j, "run_s", r->seconds);
		if (i == MODE_LOWKEY)
			json_lk_semset(j, r);
		json_kernel(j, r);
		lk__json_close(j);
	}
	lk__json_close(j);
}

static void json_published(struct lk__json *j)
{
	lk__json_array(j, "published");
	for (int i = 0; i < 2; i++) {
		lk__json_object(j, NULL);
		lk__json_str(j, "when", published[i].when);
		lk__json_num(j, "worker_burns_per_s", published[i].burns_per_s);
		lk__json_num(j, "main_burns", published[i].main_burns);
		lk__json_num(j, "free", published[i].free);
		lk__json_num(j, "contended", published[i].contended);
		lk__json_num(j, "wait_cycles", published[i].wait_cycles);
		lk__json_num(j, "avg_cycles", published[i].avg_cycles);
		lk__json_num(j, "per_mille_cpu", published[i].per_mille);
		lk__json_close(j);
	}
	lk__json_close(j);
}

static void json_lock_costs(struct lk__json *j, const struct lock_costs *c)
{
	lk__json_object(j, "lock_unlock_ns");
	lk__json_num(j, "pthread_mutex", c->pthread_ns);
	lk__json_num(j, "lk_mutex", c->lk_ns);
	if (c->have_preload)
		lk__json_num(j, "pthread_mutex_lowkey_locks", c->preload_ns);
	else
		lk__json_null(j, "pthread_mutex_lowkey_locks");
	lk__json_close(j);
	lk__json_object(j, "lock_heavy_s");
	lk__json_int(j, "threads", c->heavy_threads);
	lk__json_num(j, "bare", c->heavy_bare_s);
	lk__json_num(j, "lowkey_locks", c->have_preload ? c->heavy_preload_s : NAN);
	lk__json_num(j, "empty_bare", c->empty_bare_s);
	lk__json_num(j, "empty_lowkey_locks", c->have_preload ? c->empty_preload_s : NAN);
	lk__json_close(j);
}

void sem_print_json(const struct sem_options *o, const struct mode_result *m,
		    const struct lock_costs *c)
{
	struct lk__json j;

	lk__json_begin(&j, stdout, false);
	lk__json_str(&j, "bench", "sem");
	lk__json_str(&j, "machine", lkb_machine());
	lk__json_int(&j, "threads", o->nthreads);
	lk__json_int(&j, "wake", o->wake);
	lk__json_num(&j, "seconds", o->seconds);
	lk__json_int(&j, "runs", o->runs);
	lk__json_bool(&j, "bind", o->bind);
	json_modes(&j, m);
	if (m[MODE_IPC].ran && m[MODE_LOWKEY].ran)
		lk__json_num(&j, "lowkey_over_ipc",
			     m[MODE_LOWKEY].burns_per_s / m[MODE_IPC].burns_per_s);
	json_published(&j);
	if (c)
		json_lock_costs(&j, c);
	lk__json_end(&j);
}
