// SPDX-License-Identifier: MIT
/*
 * `lowkey bench branch`, the article's table: one loop, one instruction sequence per row: empty,
 * NOP, unconditional branch, conditional branch, load + branch, load + branch while another CPU
 * writes the flag's cache line, static key off, static key on. Median ns per iteration over
 * repeated runs, rows interleaved so drift hits them alike.
 *
 * Static key off against the NOP: the two loops run the same instructions, so one process's
 * difference between them is where the code landed (ASLR gives each process other addresses, and
 * branch predictors index by them). The pair is also measured in several processes of their own
 * (this program re-executed, each placed anew): the median and the spread (min..max) of the
 * ratio, with a verdict only when that spread resolves RESOLVE_PCT.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lowkey/lowkey.h>

#include "bench.h"
#include "internal/proc.h"
#include "branch_bench.h"

static LK_DEFINE_KEY_FALSE(key_off);
static LK_DEFINE_KEY_FALSE(key_on); /* enabled before measuring */
static int flag_off;
static int flag_on = 1;

/* The flag another CPU keeps stealing: same cache line as `scribble`. */
static struct {
	int flag;
	int scribble;
} __attribute__((aligned(64))) bounce;

static int writer_stop;

/*
 * Every row is this loop with BODY in it. The empty asm keeps `hits` in a register and the loop
 * from being optimized away; GCC does not unroll at -O2.
 */
#define LOOP(fn, BODY)                                           \
	static __attribute__((noinline)) uint64_t fn(uint64_t n) \
	{                                                        \
		uint64_t hits = 0;                               \
		for (uint64_t i = 0; i < n; i++) {               \
			BODY;                                    \
			asm volatile("" : "+r"(hits));           \
		}                                                \
		return hits;                                     \
	}

#define READ_FLAG(x) (*(volatile int *)&(x))

LOOP(loop_empty, (void)0)
LOOP(loop_nop, asm volatile(ASM_NOP))
LOOP(loop_ubranch, asm volatile(ASM_UBRANCH))
LOOP(loop_cbranch, CBRANCH(i)) /* never taken */
LOOP(loop_load_branch, if (LK__UNLIKELY(READ_FLAG(flag_off))) TAKEN)
LOOP(loop_load_branch_miss, if (LK__UNLIKELY(READ_FLAG(bounce.flag))) TAKEN)
LOOP(loop_key_off, if (lk_branch_unlikely(&key_off)) TAKEN)
LOOP(loop_key_on, if (lk_branch_unlikely(&key_on)) TAKEN)
LOOP(loop_load_branch_on, if (LK__UNLIKELY(READ_FLAG(flag_on))) TAKEN)

/* clang-format off */
#define UNPUBLISHED { __builtin_nan(""), __builtin_nan(""), __builtin_nan("") }
/* clang-format on */

struct loop_row branch_loop_rows[NROWS] = {
	[ROW_EMPTY] = { "empty loop", loop_empty, false, UNPUBLISHED },
	[ROW_NOP] = { NOP_ROW, loop_nop, false, { 4.35, 5.30, 5.03 } },
	[ROW_UBRANCH] = { "unconditional branch", loop_ubranch, false, { 8.71, 7.6, 5.05 } },
	[ROW_CBRANCH] = { "conditional branch", loop_cbranch, false, { 8.71, 7.6, 7.54 } },
	[ROW_LOAD_BRANCH] = { "load + branch", loop_load_branch, false, { 8.7, 7.6, 5.87 } },
	[ROW_LOAD_BRANCH_MISS] = { "load + branch, cache miss",
				   loop_load_branch_miss,
				   true,
				   { 25.2, __builtin_nan(""), 28.3 } },
	[ROW_KEY_OFF] = { "static key off", loop_key_off, false, UNPUBLISHED },
	[ROW_KEY_ON] = { "static key on", loop_key_on, false, UNPUBLISHED },
	[ROW_LOAD_BRANCH_ON] = { "load + branch, flag on", loop_load_branch_on, false,
				 UNPUBLISHED },
};

int branch_enable_key_on(void)
{
	return lk_key_enable(&key_on);
}

static void *bounce_writer(void *arg)
{
	(void)arg;
	lkb_pin(1);
	while (!__atomic_load_n(&writer_stop, __ATOMIC_RELAXED))
		__atomic_fetch_add(&bounce.scribble, 1, __ATOMIC_RELAXED);
	return NULL;
}

static double time_loop(const struct loop_row *r, uint64_t iters)
{
	uint64_t t0 = lkb_now_ns();

	r->fn(iters);
	return (double)(lkb_now_ns() - t0) / (double)iters;
}

/* Enough iterations for one run to take about target_ns. */
static uint64_t calibrate(const struct loop_row *r, uint64_t target_ns)
{
	uint64_t iters = 1000;

	for (;;) {
		uint64_t t0 = lkb_now_ns(), dt;

		r->fn(iters);
		dt = lkb_now_ns() - t0;
		if (dt >= target_ns / 4 || iters >= (1ull << 40))
			return iters * target_ns / (dt ? dt : 1);
		iters *= 4;
	}
}

int branch_measure_loop(int runs, bool have_second_cpu)
{
	pthread_t writer;

	for (size_t i = 0; i < NROWS; i++) {
		branch_loop_rows[i].samples = calloc((size_t)runs, sizeof(double));
		if (!branch_loop_rows[i].samples)
			return -ENOMEM;
		branch_loop_rows[i].iters = calibrate(&branch_loop_rows[i], 20 * 1000 * 1000);
	}
	for (int run = 0; run < runs; run++) {
		lkb_progress("the loop rows, run %d of %d", run + 1, runs);
		for (size_t i = 0; i < NROWS; i++) {
			struct loop_row *r = &branch_loop_rows[i];

			if (r->bounce) {
				if (!have_second_cpu)
					continue;
				__atomic_store_n(&writer_stop, 0, __ATOMIC_RELAXED);
				if (pthread_create(&writer, NULL, bounce_writer, NULL) != 0)
					continue;
				usleep(1000);
				r->samples[run] = time_loop(r, r->iters);
				__atomic_store_n(&writer_stop, 1, __ATOMIC_RELAXED);
				pthread_join(writer, NULL);
			} else {
				r->samples[run] = time_loop(r, r->iters);
			}
		}
	}
	for (size_t i = 0; i < NROWS; i++) {
		struct loop_row *r = &branch_loop_rows[i];

		r->ns = (r->bounce && !have_second_cpu) ? __builtin_nan("") :
							  lkb_median(r->samples, (size_t)runs);
	}
	return 0;
}

/* ---- 1b. static key off vs nop in several processes ---- */

/* One process's part (--key-vs-nop-child): the pair alone, interleaved, alternating which goes
 * first; prints "NOP_NS KEY_OFF_NS", medians of runs. */
int branch_key_vs_nop_child(int runs)
{
	const struct loop_row *nop = &branch_loop_rows[ROW_NOP];
	const struct loop_row *key = &branch_loop_rows[ROW_KEY_OFF];
	double *vn = calloc((size_t)runs, sizeof(double)),
	       *vk = calloc((size_t)runs, sizeof(double));
	uint64_t in, ik;

	if (!vn || !vk)
		return 1;
	lkb_pin(0);
	in = calibrate(nop, 20 * 1000 * 1000);
	ik = calibrate(key, 20 * 1000 * 1000);
	for (int r = 0; r < runs; r++) {
		if (r % 2) {
			vk[r] = time_loop(key, ik);
			vn[r] = time_loop(nop, in);
		} else {
			vn[r] = time_loop(nop, in);
			vk[r] = time_loop(key, ik);
		}
	}
	printf("%.6f %.6f\n", lkb_median(vn, (size_t)runs), lkb_median(vk, (size_t)runs));
	free(vn), free(vk);
	return 0;
}

/* Run the pair in a process of its own (this program again); the ratio key off / nop, or NAN. */
static double key_vs_nop_process(int runs)
{
	char runs_arg[16], line[128] = "";
	char *argv[] = {
		"lowkey", "bench", "branch", "--key-vs-nop-child", "--runs", runs_arg, NULL
	};
	double n = 0, k = 0;
	int fds[2], status;
	ssize_t got, len = 0;
	pid_t pid;

	snprintf(runs_arg, sizeof(runs_arg), "%d", runs);
	if (pipe2(fds, O_CLOEXEC) != 0)
		return __builtin_nan("");
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		close(fds[0]), close(fds[1]);
		return __builtin_nan("");
	}
	if (pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	close(fds[1]);
	while (len < (ssize_t)sizeof(line) - 1 &&
	       (got = read(fds[0], line + len, sizeof(line) - 1 - (size_t)len)) > 0)
		len += got;
	line[len] = 0;
	close(fds[0]);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return __builtin_nan("");
	if (sscanf(line, "%lf %lf", &n, &k) != 2 || n <= 0 || k <= 0)
		return __builtin_nan("");
	return k / n;
}

static int read_aslr(void)
{
	long v;

	return lk__read_long_file("/proc/sys/kernel/randomize_va_space", &v) == 0 && v >= 0 &&
			       v <= 2 ?
		       (int)v :
		       -1;
}

void branch_measure_key_vs_nop(struct key_vs_nop *k, int processes, int runs)
{
	double sorted[64];

	branch_compare_code(k, (const uint8_t *)(uintptr_t)loop_nop,
			    (const uint8_t *)(uintptr_t)loop_key_off, &key_off.key);
	k->requested = processes;
	k->aslr = read_aslr();
	k->median = k->min = k->max = __builtin_nan("");
	for (int i = 0; i < processes && i < 64; i++) {
		double r;

		lkb_progress("static key off vs nop, process %d of %d", i + 1, processes);
		r = key_vs_nop_process(runs);

		if (!__builtin_isnan(r))
			k->ratio[k->processes++] = r;
	}
	if (k->processes == 0)
		return;
	memcpy(sorted, k->ratio, sizeof(double) * (size_t)k->processes);
	k->median = lkb_median(sorted, (size_t)k->processes);
	k->min = sorted[0];
	k->max = sorted[k->processes - 1];
	/* A verdict needs several placements and a spread that resolves RESOLVE_PCT. */
	if (k->processes < 3 || 100.0 * (k->max - k->min) > RESOLVE_PCT)
		k->verdict = NULL;
	else if (k->min <= 1.0 && k->max >= 1.0)
		k->verdict = "within noise";
	else
		k->verdict = k->min > 1.0 ? "slower" : "faster";
}
