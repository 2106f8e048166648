// SPDX-License-Identifier: MIT
/*
 * `lowkey bench branch`: 1,000 distinct sites in one pass, each testing its own flag (load +
 * branch) or its own key, warm and cold (flags and code flushed from the caches before each
 * pass); and the cost of flipping a key with 1, 10 and 1,000 sites, alone and while another
 * thread runs those sites; on x86-64 both as a process with threads flips (pages remapped) and
 * with the int3 protocol (what a single-threaded caller gets) forced for the bench: the two
 * interleaved in one run.
 */
#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <lowkey/lowkey.h>

#include "bench.h"
#include "branch_bench.h"
#include "internal/key.h"

/* ---- 2. 1,000 sites in one pass ---- */

static struct {
	volatile int v;
} __attribute__((aligned(64))) site_flags[NSITES];

static struct lk_key_false site_keys[NSITES];

/* clang-format off */
#define D10(M, x) M((x) + 0) M((x) + 1) M((x) + 2) M((x) + 3) M((x) + 4) \
		  M((x) + 5) M((x) + 6) M((x) + 7) M((x) + 8) M((x) + 9)
#define D100(M, x) D10(M, (x) + 0) D10(M, (x) + 10) D10(M, (x) + 20) D10(M, (x) + 30) \
		   D10(M, (x) + 40) D10(M, (x) + 50) D10(M, (x) + 60) D10(M, (x) + 70) \
		   D10(M, (x) + 80) D10(M, (x) + 90)
#define D1000(M) D100(M, 0) D100(M, 100) D100(M, 200) D100(M, 300) D100(M, 400) \
		 D100(M, 500) D100(M, 600) D100(M, 700) D100(M, 800) D100(M, 900)
/* clang-format on */

#define FLAG_SITE(i)                       \
	if (LK__UNLIKELY(site_flags[i].v)) \
		TAKEN_ADD(i);
#define KEY_SITE(i)                            \
	if (lk_branch_unlikely(&site_keys[i])) \
		TAKEN_ADD(i);

/* Both pass functions live in one section so a cold pass can flush exactly their code. */
#define PASS_FN __attribute__((noinline, section("lkb_site_passes")))

PASS_FN static uint64_t pass_flags(void)
{
	uint64_t hits = 0;

	D1000(FLAG_SITE)
	return hits;
}

PASS_FN static uint64_t pass_keys(void)
{
	uint64_t hits = 0;

	D1000(KEY_SITE)
	return hits;
}

/* ---- 3. keys with 1, 10 and 1,000 sites, for the flip cost ---- */

static LK_DEFINE_KEY_FALSE(flip_key_1);
static LK_DEFINE_KEY_FALSE(flip_key_10);
static LK_DEFINE_KEY_FALSE(flip_key_1000);

#define FLIP1_SITE(i)                        \
	if (lk_branch_unlikely(&flip_key_1)) \
		TAKEN_ADD(i);
#define FLIP10_SITE(i)                        \
	if (lk_branch_unlikely(&flip_key_10)) \
		TAKEN_ADD(i);
#define FLIP1000_SITE(i)                        \
	if (lk_branch_unlikely(&flip_key_1000)) \
		TAKEN_ADD(i);

PASS_FN static uint64_t run_flip_1(void)
{
	uint64_t hits = 0;

	FLIP1_SITE(1)
	return hits;
}

PASS_FN static uint64_t run_flip_10(void)
{
	uint64_t hits = 0;

	D10(FLIP10_SITE, 0)
	return hits;
}

PASS_FN static uint64_t run_flip_1000(void)
{
	uint64_t hits = 0;

	D1000(FLIP1000_SITE)
	return hits;
}

extern const char __start_lkb_site_passes[];
extern const char __stop_lkb_site_passes[];

/*
 * Cold passes: the flags and the passes' code out of every cache level. x86: clflush. aarch64:
 * dc civac (clean and invalidate to the point of coherency; Linux lets EL0 use it) and, for code,
 * ic ivau, with the 64-byte stride a superset of any line size. Elsewhere (riscv64 has no
 * baseline cache-maintenance instruction) a 64 MiB buffer is read through, which evicts the
 * shared levels and the data cache, though not necessarily the instruction cache.
 */
#if defined(__x86_64__)
static void flush_range(const volatile void *start, size_t len, bool code)
{
	(void)code;
	for (uintptr_t p = (uintptr_t)start & ~(uintptr_t)63; p < (uintptr_t)start + len; p += 64)
		asm volatile("clflush (%0)" : : "r"(p) : "memory");
}
#define FLUSH_DONE() asm volatile("mfence" : : : "memory")
#elif defined(__aarch64__)
static void flush_range(const volatile void *start, size_t len, bool code)
{
	for (uintptr_t p = (uintptr_t)start & ~(uintptr_t)63; p < (uintptr_t)start + len; p += 64) {
		asm volatile("dc civac, %0" : : "r"(p) : "memory");
		if (code)
			asm volatile("ic ivau, %0" : : "r"(p) : "memory");
	}
}
#define FLUSH_DONE() asm volatile("dsb ish\n\tisb" : : : "memory")
#else
static void flush_range(const volatile void *start, size_t len, bool code)
{
	static volatile uint8_t *evict;
	static size_t evict_len = (size_t)64 << 20;
	uint64_t sum = 0;

	(void)start, (void)len;
	if (code)
		return; /* one sweep (with the flags) does for both */
	if (!evict) {
		evict = malloc(evict_len);
		if (!evict)
			return;
		memset((void *)evict, 1, evict_len);
	}
	for (size_t i = 0; i < evict_len; i += 64)
		sum += evict[i];
	asm volatile("" : : "r"(sum));
}
#define FLUSH_DONE() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#endif

static void flush_passes(void)
{
	flush_range(site_flags, sizeof(site_flags), false);
	flush_range(__start_lkb_site_passes,
		    (size_t)(__stop_lkb_site_passes - __start_lkb_site_passes), true);
	FLUSH_DONE();
}

static double time_pass(uint64_t (*pass)(void), bool cold)
{
	uint64_t t0, sink;

	if (cold)
		flush_passes();
	t0 = lkb_now_ns();
	sink = pass();
	asm volatile("" : : "r"(sink));
	return (double)(lkb_now_ns() - t0);
}

int branch_measure_passes(int runs, struct pass_result *flags, struct pass_result *keys)
{
	int n = runs * 20;
	double *fw = calloc((size_t)n, sizeof(double)), *fc = calloc((size_t)n, sizeof(double));
	double *kw = calloc((size_t)n, sizeof(double)), *kc = calloc((size_t)n, sizeof(double));

	if (!fw || !fc || !kw || !kc) {
		free(fw), free(fc), free(kw), free(kc);
		return -ENOMEM;
	}
	lkb_progress("1,000 distinct sites, %d passes", n);
	for (int i = 0; i < n; i++) {
		kc[i] = time_pass(pass_keys, true);
		fc[i] = time_pass(pass_flags, true);
		time_pass(pass_keys, false);
		time_pass(pass_flags, false);
		kw[i] = time_pass(pass_keys, false);
		fw[i] = time_pass(pass_flags, false);
	}
	flags->warm_ns = lkb_median(fw, (size_t)n);
	flags->cold_ns = lkb_median(fc, (size_t)n);
	keys->warm_ns = lkb_median(kw, (size_t)n);
	keys->cold_ns = lkb_median(kc, (size_t)n);
	free(fw), free(fc), free(kw), free(kc);
	return 0;
}

/* ---- 3. flips ---- */

struct flip_row branch_flip_rows[NFLIPS] = {
	{ "1 site", &flip_key_1.key, run_flip_1, { { 0 } } },
	{ "10 sites", &flip_key_10.key, run_flip_10, { { 0 } } },
	{ "1,000 sites", &flip_key_1000.key, run_flip_1000, { { 0 } } },
};

struct runner {
	uint64_t (*run)(void);
	int stop;
	uint64_t passes;
};

static void *site_runner(void *arg)
{
	struct runner *r = arg;

	lkb_pin(1);
	while (!__atomic_load_n(&r->stop, __ATOMIC_RELAXED)) {
		r->run();
		r->passes++;
	}
	return NULL;
}

static int time_flips(struct lk_key *key, int flips, double *enable_us, double *disable_us)
{
	double *en = calloc((size_t)flips, sizeof(double)),
	       *dis = calloc((size_t)flips, sizeof(double));
	int err = 0;

	if (!en || !dis) {
		free(en), free(dis);
		return -ENOMEM;
	}
	for (int i = 0; i < flips && !err; i++) {
		uint64_t t0 = lkb_now_ns();

		err = (lk_key_enable)(key);
		en[i] = (double)(lkb_now_ns() - t0) / 1000.0;
		t0 = lkb_now_ns();
		if (!err)
			err = (lk_key_disable)(key);
		dis[i] = (double)(lkb_now_ns() - t0) / 1000.0;
	}
	*enable_us = lkb_median(en, (size_t)flips);
	*disable_us = lkb_median(dis, (size_t)flips);
	free(en), free(dis);
	return err;
}

static void set_protocol(int protocol)
{
	__atomic_store_n(&lk__patch_traps_for_bench, protocol == PROTOCOL_INT3, __ATOMIC_RELAXED);
}

/* One row with one protocol: alone, then while another thread runs the sites. */
static int measure_flip_row(struct flip_row *f, int protocol, int flips, bool have_second_cpu)
{
	struct flip_figures *ff = &f->by[protocol];
	struct runner runner = { f->run, 0, 0 };
	pthread_t t;
	int err;

	set_protocol(protocol);
	err = time_flips(f->key, flips, &ff->enable_alone, &ff->disable_alone);
	ff->enable_busy = ff->disable_busy = __builtin_nan("");
	if (!err && have_second_cpu && pthread_create(&t, NULL, site_runner, &runner) == 0) {
		usleep(2000);
		err = time_flips(f->key, flips, &ff->enable_busy, &ff->disable_busy);
		__atomic_store_n(&runner.stop, 1, __ATOMIC_RELAXED);
		pthread_join(t, NULL);
	}
	set_protocol(PROTOCOL_NOW);
	return err;
}

/* Each row printed (text) as soon as it is measured, both protocols of a row one after the other. */
int branch_measure_flips(int flips, bool have_second_cpu, bool text)
{
	for (size_t i = 0; i < NFLIPS; i++) {
		struct flip_row *f = &branch_flip_rows[i];

		lkb_progress("flipping a key with %s, %d flips", f->name, flips);
		for (int p = 0; p < NPROTOCOLS; p++) {
			int err = measure_flip_row(f, p, flips, have_second_cpu);

			if (err)
				return err;
		}
		if (text)
			branch_print_flip_row(f);
	}
	return 0;
}

/* Context for the flip figures: the system calls a flip is made of. */
double branch_time_membarrier_us(int reps)
{
	double *v = calloc((size_t)reps, sizeof(double)), med;

	if (!v)
		return __builtin_nan("");
	for (int i = 0; i < reps; i++) {
		uint64_t t0 = lkb_now_ns();

		syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0);
		v[i] = (double)(lkb_now_ns() - t0) / 1000.0;
	}
	med = lkb_median(v, (size_t)reps);
	free(v);
	return med;
}
