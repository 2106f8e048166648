// SPDX-License-Identifier: MIT
/*
 * lowkey bench branch: the table of what a disabled branch costs from tinylab.org's "RISC-V
 * jump_label" article (part 1, technical background), on this machine.
 *
 * 1. One loop, one instruction sequence per row: empty, 5-byte NOP, unconditional branch,
 *    conditional branch, load + branch, load + branch while another CPU writes the flag's cache
 *    line, static key off, static key on. Median ns per iteration over repeated runs, rows
 *    interleaved so drift hits them alike.
 * 2. 1,000 distinct sites in one pass, each testing its own flag (load + branch) or its own key,
 *    warm and cold (flags and code flushed from the caches before each pass).
 * 3. The cost of flipping a key with 1, 10 and 1,000 sites, alone and while another thread runs
 *    those sites; on x86-64 both as a process with threads flips (pages remapped) and with the
 *    int3 protocol (what a single-threaded caller gets) forced for the bench: the two interleaved
 *    in one run.
 *
 * Static key off against the NOP: the two loops run the same instructions, so one process's
 * difference between them is where the code landed (ASLR gives each process other addresses, and
 * branch predictors index by them), worth -13 % to +18 % in single runs. The bench compares the
 * two loop bodies' machine code at run time (identical by construction when they are the same
 * bytes and the key's site is the same 5-byte NOP), and measures the pair in several processes of
 * their own (this program re-executed, each placed anew): the median and the spread (min..max)
 * of the ratio. A verdict is printed only when that spread resolves 5 %.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lowkey/lowkey.h>

#include "bench.h"
#include "internal/key.h"

/* ---- 1. the loop ---- */

static LK_DEFINE_KEY_FALSE(key_off);
static LK_DEFINE_KEY_FALSE(key_on);	/* enabled before measuring */
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
#define LOOP(fn, BODY)                                                                        \
	static __attribute__((noinline)) uint64_t fn(uint64_t n)                              \
	{                                                                                     \
		uint64_t hits = 0;                                                            \
		for (uint64_t i = 0; i < n; i++) {                                            \
			BODY;                                                                 \
			asm volatile("" : "+r"(hits));                                        \
		}                                                                             \
		return hits;                                                                  \
	}

#define READ_FLAG(x) (*(volatile int *)&(x))

/*
 * Each architecture's instructions for the rows: a NOP the size of a key's site, an unconditional
 * branch to the next instruction, a never-taken compare and branch, and what every taken branch
 * does -- an asm the compiler cannot turn into a cmov, sbb or csel, so each "branch" row really
 * has a branch. TAKEN_ADD(i) is TAKEN with a distinct immediate per site.
 * riscv64: the 4-byte forms (.option norvc), as a key's site is; with the C extension the
 * assembler would emit the 2-byte c.nop and c.j.
 */
#if defined(__x86_64__)
#define NOP_ROW "nop (5-byte)"
#define ASM_NOP ".byte 0x0f, 0x1f, 0x44, 0x00, 0x00"
#define ASM_UBRANCH ".byte 0xe9\n\t.long 0"		/* jmp rel32 to the next insn */
#define CBRANCH(i) asm volatile("cmp $-1, %0\n\tje 1f\n1:" : : "r"(i) : "cc")
#define TAKEN asm volatile("inc %0" : "+r"(hits))
#define TAKEN_ADD(i) asm volatile("add %1, %0" : "+r"(hits) : "i"(i))
#elif defined(__aarch64__)
#define NOP_ROW "nop (4-byte)"
#define ASM_NOP "nop"
#define ASM_UBRANCH "b 1f\n1:"
#define CBRANCH(i) asm volatile("cmn %0, #1\n\tb.eq 1f\n1:" : : "r"(i) : "cc")
#define TAKEN asm volatile("add %0, %0, #1" : "+r"(hits))
#define TAKEN_ADD(i) asm volatile("add %0, %0, %1" : "+r"(hits) : "I"(i))
#elif defined(__riscv) && __riscv_xlen == 64
#define NOP_ROW "nop (4-byte)"
#define ASM_NOP ".option push\n\t.option norvc\n\tnop\n\t.option pop"
#define ASM_UBRANCH ".option push\n\t.option norvc\n\tj 1f\n1:\n\t.option pop"
#define CBRANCH(i) asm volatile(".option push\n\t.option norvc\n\tbeq %0, %1, 1f\n1:\n\t.option pop" \
				: : "r"(i), "r"(~(uint64_t)0))
#define TAKEN asm volatile("addi %0, %0, 1" : "+r"(hits))
#define TAKEN_ADD(i) asm volatile("addi %0, %0, %1" : "+r"(hits) : "I"(i))
#else
#error "bench/branch.c: no row instructions for this architecture"
#endif

LOOP(loop_empty, (void)0)
LOOP(loop_nop, asm volatile(ASM_NOP))
LOOP(loop_ubranch, asm volatile(ASM_UBRANCH))
LOOP(loop_cbranch, CBRANCH(i))	/* never taken */
LOOP(loop_load_branch, if (LK__UNLIKELY(READ_FLAG(flag_off))) TAKEN)
LOOP(loop_load_branch_miss, if (LK__UNLIKELY(READ_FLAG(bounce.flag))) TAKEN)
LOOP(loop_key_off, if (lk_branch_unlikely(&key_off)) TAKEN)
LOOP(loop_key_on, if (lk_branch_unlikely(&key_on)) TAKEN)
LOOP(loop_load_branch_on, if (LK__UNLIKELY(READ_FLAG(flag_on))) TAKEN)

struct seed_row {
	double mips64, aarch64, riscv;	/* seconds, as published; NAN: not published */
};

struct loop_row {
	const char *name;
	uint64_t (*fn)(uint64_t);
	bool bounce;			/* needs the writer on another CPU */
	struct seed_row seed;
	uint64_t iters;
	double *samples;
	double ns;			/* median ns per iteration */
};

#define NO_SEED { __builtin_nan(""), __builtin_nan(""), __builtin_nan("") }

static struct loop_row loop_rows[] = {
	{ "empty loop", loop_empty, false, NO_SEED },
	{ NOP_ROW, loop_nop, false, { 4.35, 5.30, 5.03 } },
	{ "unconditional branch", loop_ubranch, false, { 8.71, 7.6, 5.05 } },
	{ "conditional branch", loop_cbranch, false, { 8.71, 7.6, 7.54 } },
	{ "load + branch", loop_load_branch, false, { 8.7, 7.6, 5.87 } },
	{ "load + branch, cache miss", loop_load_branch_miss, true, { 25.2, __builtin_nan(""), 28.3 } },
	{ "static key off", loop_key_off, false, NO_SEED },
	{ "static key on", loop_key_on, false, NO_SEED },
	{ "load + branch, flag on", loop_load_branch_on, false, NO_SEED },
};

#define NROWS (sizeof(loop_rows) / sizeof(loop_rows[0]))

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

static int measure_loop(int runs, bool have_second_cpu)
{
	pthread_t writer;

	for (size_t i = 0; i < NROWS; i++) {
		loop_rows[i].samples = calloc((size_t)runs, sizeof(double));
		if (!loop_rows[i].samples)
			return -ENOMEM;
		loop_rows[i].iters = calibrate(&loop_rows[i], 20 * 1000 * 1000);
	}
	for (int run = 0; run < runs; run++) {
		lkb_progress("the loop rows, run %d of %d", run + 1, runs);
		for (size_t i = 0; i < NROWS; i++) {
			struct loop_row *r = &loop_rows[i];

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
		struct loop_row *r = &loop_rows[i];

		r->ns = (r->bounce && !have_second_cpu) ? __builtin_nan("")
							: lkb_median(r->samples, (size_t)runs);
	}
	return 0;
}

/* ---- 1b. static key off vs nop: the code, and the pair in several processes ---- */

#define ROW_NOP 1
#define ROW_KEY_OFF 6
/* A key's site when off, as the site table finds it: the NOP key.h emits, in memory order. */
#if defined(__x86_64__)
#define SITE_NOP "\x0f\x1f\x44\x00\x00"	/* nopl 0x0(%rax,%rax,1) */
#define SITE_NOP_NAME "the 5-byte NOP 0f 1f 44 00 00"
#elif defined(__aarch64__)
#define SITE_NOP "\x1f\x20\x03\xd5"		/* nop: 0xd503201f */
#define SITE_NOP_NAME "the NOP d503201f"
#elif defined(__riscv)
#define SITE_NOP "\x13\x00\x00\x00"		/* addi zero, zero, 0: 0x00000013 */
#define SITE_NOP_NAME "the 4-byte NOP 00000013"
#endif
#define SITE_LEN (sizeof(SITE_NOP) - 1)
#define RESOLVE_PCT 5.0		/* a verdict needs the per-process spread within this */

struct key_vs_nop {
	/* the code */
	bool identical;		/* the same loop body bytes, the key's site SITE_NOP inside */
	bool aligned;		/* the same but for ALIGN_PAD before the site (riscv64) */
	long head;		/* the loop head from the entry; -1: not found */
	size_t bytes;		/* the loop body's, compared: head to the backward branch's end */
	int prologue_diff;	/* bytes that differ between entry and head (run once per call) */
	unsigned int head_line[2];	/* the heads' offsets in their 64-byte lines: nop, key off */
	long site_offset;	/* the key's site from loop_key_off's entry; -1: not found */
	uint8_t site[SITE_LEN];
	const char *why;	/* why not identical, or NULL */
	/* several processes: key off / nop */
	int requested;		/* --processes */
	int processes;		/* that reported */
	double ratio[64];
	double median, min, max;
	int aslr;		/* /proc/sys/kernel/randomize_va_space, -1 unknown */
	const char *verdict;	/* NULL: the spread does not resolve RESOLVE_PCT */
};

/* The entry of __lk_key_sites for key's site in this executable, or NULL. */
static const uint8_t *key_site_code(const struct lk_key *key)
{
	const struct lk__key_site *e = (const struct lk__key_site *)__start___lk_key_sites;
	const struct lk__key_site *end = (const struct lk__key_site *)__stop___lk_key_sites;

	for (; e && e < end; e++) {
		int64_t offset = e->ref & ~(int64_t)LK__SITE_FLAGS;

		if (*(struct lk_key *const *)((const char *)&e->ref + offset) == key)
			return (const uint8_t *)&e->code + e->code;
	}
	return NULL;
}

/*
 * The loop of a loop function: its first backward conditional branch in the first 256 bytes,
 * which goes to the loop head; the body is from the head to just past that branch. False when the
 * code has another shape. (GCC puts the ret right after the loop; Clang may put the key's
 * out-of-line block between them.)
 */
#define LOOP_SEARCH_BYTES 256

/* A backward branch at fn + at, len bytes long, to fn + target: the loop, if target is in fn. */
struct loop {
	long head;	/* where the backward branch goes */
	long branch;	/* the backward branch */
	long end;	/* just past it */
};

static bool loop_found(long at, long len, long displacement, struct loop *l)
{
	if (displacement >= 0 || at + displacement < 0)
		return false;
	l->head = at + displacement;
	l->branch = at;
	l->end = at + len;
	return true;
}

/* Whether the loop bodies differ only by what the architecture puts before a site to align it. */
static bool same_but_alignment(const uint8_t *nop, const uint8_t *key, const struct loop *n,
			       const struct loop *k, long site_offset);

#if defined(__x86_64__)
/* jne rel8 or jne rel32, the displacement from the next instruction. */
static bool find_loop(const uint8_t *fn, struct loop *l)
{
	for (long i = 0; i + 6 <= LOOP_SEARCH_BYTES; i++) {
		if (fn[i] == 0x75 && loop_found(i, 2, 2 + (int8_t)fn[i + 1], l))
			return true;
		if (fn[i] == 0x0f && fn[i + 1] == 0x85) {
			int32_t d;

			memcpy(&d, fn + i + 2, sizeof(d));
			if (loop_found(i, 6, 6 + (long)d, l))
				return true;
		}
	}
	return false;
}
#elif defined(__aarch64__)
static long sign_extend(uint32_t v, unsigned int bits)
{
	return (long)((int64_t)((uint64_t)v << (64 - bits)) >> (64 - bits));
}

/* b.cond, cbz/cbnz (imm19) or tbz/tbnz (imm14), in words from the branch itself. */
static bool find_loop(const uint8_t *fn, struct loop *l)
{
	for (long i = 0; i + 4 <= LOOP_SEARCH_BYTES; i += 4) {
		uint32_t w;
		long words;

		memcpy(&w, fn + i, sizeof(w));
		if ((w & 0xff000010u) == 0x54000000u || (w & 0x7e000000u) == 0x34000000u)
			words = sign_extend((w >> 5) & 0x7ffffu, 19);
		else if ((w & 0x7e000000u) == 0x36000000u)
			words = sign_extend((w >> 5) & 0x3fffu, 14);
		else
			continue;
		if (loop_found(i, 4, words * 4, l))
			return true;
	}
	return false;
}
#elif defined(__riscv)
static long sign_extend(uint32_t v, unsigned int bits)
{
	return (long)((int64_t)((uint64_t)v << (64 - bits)) >> (64 - bits));
}

/* B-type branches (4 bytes) and c.beqz/c.bnez (2 bytes), walking instruction by instruction. */
static bool find_loop(const uint8_t *fn, struct loop *l)
{
	for (long i = 0; i + 4 <= LOOP_SEARCH_BYTES;) {
		uint16_t h;
		uint32_t w;

		memcpy(&h, fn + i, sizeof(h));
		if ((h & 3) != 3) {
			if ((h & 0xc003u) == 0xc001u) {		/* c.beqz, c.bnez */
				uint32_t imm = ((h >> 12) & 1u) << 8 | ((h >> 10) & 3u) << 3 |
					       ((h >> 5) & 3u) << 6 | ((h >> 3) & 3u) << 1 |
					       ((h >> 2) & 1u) << 5;

				if (loop_found(i, 2, sign_extend(imm, 9), l))
					return true;
			}
			i += 2;
			continue;
		}
		memcpy(&w, fn + i, sizeof(w));
		if ((w & 0x7fu) == 0x63u) {
			uint32_t imm = (w >> 31) << 12 | ((w >> 7) & 1u) << 11 |
				       ((w >> 25) & 0x3fu) << 5 | ((w >> 8) & 0xfu) << 1;

			if (loop_found(i, 4, sign_extend(imm, 13), l))
				return true;
		}
		i += 4;
	}
	return false;
}
#endif

#if defined(__riscv)
/*
 * A riscv64 site is aligned to 4 bytes (.balign 4, as the kernel's riscv jump labels are); with the
 * C extension the code before it may end 2 bytes off, and the assembler pads with a c.nop that
 * runs every pass. The bodies then match around it, all but the backward branch, whose
 * displacement is 2 bytes longer.
 */
#define ALIGN_PAD "\x01\x00"	/* c.nop */
#define ALIGN_PAD_LEN 2

static bool same_but_alignment(const uint8_t *nop, const uint8_t *key, const struct loop *n,
			       const struct loop *k, long site_offset)
{
	long pad = site_offset - ALIGN_PAD_LEN;

	return k->head == n->head && k->branch == n->branch + ALIGN_PAD_LEN &&
	       k->end - k->branch == n->end - n->branch && pad >= n->head && site_offset < k->branch &&
	       memcmp(key + pad, ALIGN_PAD, ALIGN_PAD_LEN) == 0 &&
	       memcmp(nop + n->head, key + n->head, (size_t)(pad - n->head)) == 0 &&
	       memcmp(nop + pad, key + site_offset, (size_t)(n->branch - pad)) == 0;
}
#else
static bool same_but_alignment(const uint8_t *nop, const uint8_t *key, const struct loop *n,
			       const struct loop *k, long site_offset)
{
	(void)nop, (void)key, (void)n, (void)k, (void)site_offset;
	return false;
}
#endif

/*
 * Compare the machine code of loop_nop and loop_key_off where it runs every iteration: the loop
 * body, from the head the backward branch goes to through that branch. The key's site, found in
 * the site table as the library finds it, must be in that body and be the same 5-byte NOP. (The
 * bytes before the head run once per call; they differ where a jump displacement steps over the
 * key's out-of-line block.)
 */
static void compare_code(struct key_vs_nop *k)
{
	const uint8_t *nop = (const uint8_t *)(uintptr_t)loop_nop;
	const uint8_t *key = (const uint8_t *)(uintptr_t)loop_key_off;
	const uint8_t *site = key_site_code(&key_off.key);
	struct loop n, kl;

	k->site_offset = -1;
	k->head = -1;
	if (!find_loop(nop, &n)) {
		k->why = "loop_nop does not end in a backward branch (this compiler laid it out otherwise)";
		return;
	}
	k->head = n.head;
	k->bytes = (size_t)(n.end - n.head);
	k->prologue_diff = 0;
	for (long i = 0; i < n.head; i++)
		k->prologue_diff += nop[i] != key[i];
	k->head_line[0] = (unsigned int)((uintptr_t)(nop + n.head) & 63);
	if (!site) {
		k->why = "the key's site is not in the site table (a portable build: load + branch)";
		return;
	}
	k->site_offset = (long)(site - key);
	memcpy(k->site, site, sizeof(k->site));
	if (!find_loop(key, &kl))
		k->why = "loop_key_off does not end in a backward branch";
	else if (memcmp(site, SITE_NOP, SITE_LEN) != 0)
		k->why = "the key's site is not " SITE_NOP_NAME;
	else if (same_but_alignment(nop, key, &n, &kl, k->site_offset))
		k->aligned = true;
	else if (kl.head != n.head || kl.end != n.end)
		k->why = "the two loops are at different offsets from their entries";
	else if (k->site_offset < n.head || k->site_offset + (long)SITE_LEN > n.end)
		k->why = "the key's site is not in loop_key_off's loop body";
	else if (memcmp(nop + n.head, key + n.head, k->bytes) != 0)
		k->why = "the two loop bodies' bytes differ";
	else
		k->identical = true;
	k->head_line[1] = (unsigned int)((uintptr_t)(key + kl.head) & 63);
}

/* One process's part (--key-vs-nop-child): the pair alone, interleaved, alternating which goes
 * first; prints "NOP_NS KEY_OFF_NS", medians of runs. */
static int key_vs_nop_child(int runs)
{
	const struct loop_row *nop = &loop_rows[ROW_NOP], *key = &loop_rows[ROW_KEY_OFF];
	double *vn = calloc((size_t)runs, sizeof(double)), *vk = calloc((size_t)runs, sizeof(double));
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
	char *argv[] = { "lowkey", "bench", "branch", "--key-vs-nop-child", "--runs", runs_arg, NULL };
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
	FILE *f = fopen("/proc/sys/kernel/randomize_va_space", "re");
	int v = -1;

	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static void measure_key_vs_nop(struct key_vs_nop *k, int processes, int runs)
{
	double sorted[64];

	compare_code(k);
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

/* ---- 2. 1,000 sites in one pass ---- */

#define NSITES 1000

static struct {
	volatile int v;
} __attribute__((aligned(64))) site_flags[NSITES];

static struct lk_key_false site_keys[NSITES];

#define D10(M, x) M((x) + 0) M((x) + 1) M((x) + 2) M((x) + 3) M((x) + 4) \
		  M((x) + 5) M((x) + 6) M((x) + 7) M((x) + 8) M((x) + 9)
#define D100(M, x) D10(M, (x) + 0) D10(M, (x) + 10) D10(M, (x) + 20) D10(M, (x) + 30) \
		   D10(M, (x) + 40) D10(M, (x) + 50) D10(M, (x) + 60) D10(M, (x) + 70) \
		   D10(M, (x) + 80) D10(M, (x) + 90)
#define D1000(M) D100(M, 0) D100(M, 100) D100(M, 200) D100(M, 300) D100(M, 400) \
		 D100(M, 500) D100(M, 600) D100(M, 700) D100(M, 800) D100(M, 900)

#define FLAG_SITE(i) if (LK__UNLIKELY(site_flags[i].v)) TAKEN_ADD(i);
#define KEY_SITE(i) if (lk_branch_unlikely(&site_keys[i])) TAKEN_ADD(i);

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

#define FLIP1_SITE(i) if (lk_branch_unlikely(&flip_key_1)) TAKEN_ADD(i);
#define FLIP10_SITE(i) if (lk_branch_unlikely(&flip_key_10)) TAKEN_ADD(i);
#define FLIP1000_SITE(i) if (lk_branch_unlikely(&flip_key_1000)) TAKEN_ADD(i);

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
		return;		/* one sweep (with the flags) does for both */
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
	flush_range(__start_lkb_site_passes, (size_t)(__stop_lkb_site_passes - __start_lkb_site_passes), true);
	FLUSH_DONE();
}

struct pass_result {
	double warm_ns, cold_ns;	/* per pass, medians */
};

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

static int measure_passes(int runs, struct pass_result *flags, struct pass_result *keys)
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

/*
 * How a flip is made: as the library chooses, and on x86-64 also with the int3 protocol forced in
 * place (lk__patch_traps_for_bench), which the library uses only where the caller is alone.
 */
enum { PROTOCOL_NOW, PROTOCOL_INT3, PROTOCOLS_MAX };
#if defined(__x86_64__)
#define NPROTOCOLS 2
#else
#define NPROTOCOLS 1
#endif

struct flip_figures {
	double enable_alone, disable_alone, enable_busy, disable_busy;	/* µs, medians */
};

struct flip_row {
	const char *name;
	struct lk_key *key;
	uint64_t (*run)(void);
	struct flip_figures by[PROTOCOLS_MAX];
};

static struct flip_row flip_rows[] = {
	{ "1 site", &flip_key_1.key, run_flip_1, { { 0 } } },
	{ "10 sites", &flip_key_10.key, run_flip_10, { { 0 } } },
	{ "1,000 sites", &flip_key_1000.key, run_flip_1000, { { 0 } } },
};

#define NFLIPS (sizeof(flip_rows) / sizeof(flip_rows[0]))

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
	double *en = calloc((size_t)flips, sizeof(double)), *dis = calloc((size_t)flips, sizeof(double));
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

static void print_flip_row(const struct flip_row *f);

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
static int measure_flips(int flips, bool have_second_cpu, bool text)
{
	for (size_t i = 0; i < NFLIPS; i++) {
		struct flip_row *f = &flip_rows[i];

		lkb_progress("flipping a key with %s, %d flips", f->name, flips);
		for (int p = 0; p < NPROTOCOLS; p++) {
			int err = measure_flip_row(f, p, flips, have_second_cpu);

			if (err)
				return err;
		}
		if (text)
			print_flip_row(f);
	}
	return 0;
}

/* Context for the flip figures: the system calls a flip is made of. */
static double time_membarrier_us(int reps)
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

/* ---- output ---- */

static void print_seed_cell(FILE *out, double v)
{
	if (__builtin_isnan(v))
		fprintf(out, "  %7s", "-");
	else
		fprintf(out, "  %6.2fs", v);
}

static void print_key_vs_nop(const struct key_vs_nop *k, double in_process)
{
	FILE *out = lkb_section_begin();

	fprintf(out, "\nstatic key off vs nop: ");
	if (k->identical)
		fprintf(out, "identical by construction: the loop bodies (the %zu bytes from the loop head,\n"
		       "  entry + %ld, to the backward branch) are the same bytes in both functions, and the\n"
		       "  key's site (entry + %ld) is " SITE_NOP_NAME "; before the head (run once per call)\n"
		       "  %d byte(s) differ; loop heads at +%u (nop) and +%u (key off) in their 64-byte\n"
		       "  lines\n", k->bytes, k->head, k->site_offset, k->prologue_diff, k->head_line[0],
		       k->head_line[1]);
	else if (k->aligned)
		fprintf(out, "the same code but for one 2-byte c.nop before the key's site,\n"
		       "  which aligns the site to 4 bytes (the kernel's riscv jump labels align the same way):\n"
		       "  it runs every pass; the key's site (entry + %ld) is " SITE_NOP_NAME "\n",
		       k->site_offset);
	else
		fprintf(out, "not the same code: %s\n", k->why);
	if (k->processes == 0) {
		fprintf(out, "  (not measured in processes of their own: %s; this table's single process: %+.1f%%,\n"
		       "  no verdict)\n", k->requested ? "they failed" : "--processes 0", 100.0 * (in_process - 1.0));
		lkb_section_end(out);
		return;
	}
	fprintf(out, "  key off / nop in %d processes of their own (%s): median %+.1f%%,\n"
	       "  spread %+.1f%%..%+.1f%% (this table's single process: %+.1f%%): ", k->processes,
	       k->aslr == 0 ? "ASLR is off: all placed alike" : "ASLR: each placed anew",
	       100.0 * (k->median - 1.0), 100.0 * (k->min - 1.0), 100.0 * (k->max - 1.0),
	       100.0 * (in_process - 1.0));
	if (k->verdict)
		fprintf(out, "%s (the spread resolves %.0f%%)\n", k->verdict, RESOLVE_PCT);
	else if (k->processes < 3)
		fprintf(out, "no verdict (fewer than 3 processes)\n");
	else
		fprintf(out, "no verdict: the spread does not\n  resolve %.0f%%%s\n", RESOLVE_PCT,
		       k->identical ? " (between identical loops it is where the code landed)" : "");
	lkb_section_end(out);
}

/* The text is printed a part at a time, each as soon as its figures are measured (lkb_row). */
static void print_header(int runs)
{
	lkb_row("lowkey bench branch: the \"RISC-V jump_label\" article's table on this machine\n");
	lkb_row("machine: %s\n", lkb_machine());
	lkb_row("method:  same loop for every row, median of %d runs, rows interleaved\n\n", runs);
}

/* The rows are measured interleaved, run after run: they are all done at once. */
static void print_loop_rows(bool have_second_cpu)
{
	double nop = loop_rows[ROW_NOP].ns;
	FILE *out = lkb_section_begin();

	fprintf(out, "%-27s %9s %8s   %-34s\n", "", "", "", "published (s, its own loop count)");
	fprintf(out, "%-27s %9s %8s  %8s %8s %8s\n", "row", "ns/iter", "x nop", "MIPS64", "AArch64", "RISC-V");
	for (size_t i = 0; i < NROWS; i++) {
		const struct loop_row *r = &loop_rows[i];

		if (__builtin_isnan(r->ns))
			fprintf(out, "%-27s %9s %8s", r->name, "n/a", "");
		else
			fprintf(out, "%-27s %9.3f %8.3f", r->name, r->ns, r->ns / nop);
		print_seed_cell(out, r->seed.mips64);
		print_seed_cell(out, r->seed.aarch64);
		print_seed_cell(out, r->seed.riscv);
		fputc('\n', out);
	}
	if (!have_second_cpu)
		fprintf(out, "(the cache-miss row needs a second CPU)\n");
	fprintf(out, "\nload + branch, cache miss vs static key off: %.1fx\n", loop_rows[5].ns / loop_rows[ROW_KEY_OFF].ns);
	lkb_section_end(out);
}

static void print_sites(const struct pass_result *pf, const struct pass_result *pk)
{
	lkb_row("\n1,000 distinct sites in one pass (ns per site; cold = flags and code flushed first)\n");
	lkb_row("%-27s %9s %9s\n", "", "warm", "cold");
	lkb_row("%-27s %9.3f %9.3f\n", "load + branch, own flag", pf->warm_ns / NSITES, pf->cold_ns / NSITES);
	lkb_row("%-27s %9.3f %9.3f\n", "static key off, own key", pk->warm_ns / NSITES, pk->cold_ns / NSITES);
	lkb_row("%-27s %8.2fx %8.2fx\n", "load + branch / key", pf->warm_ns / pk->warm_ns, pf->cold_ns / pk->cold_ns);
}

static void print_flip_figures(const char *name, const struct flip_figures *ff)
{
	lkb_row("%-27s %9.1f %9.1f %9.1f %9.1f\n", name, ff->enable_alone, ff->disable_alone,
		ff->enable_busy, ff->disable_busy);
}

static void print_flip_row(const struct flip_row *f)
{
	if (f == &flip_rows[0]) {
		lkb_row("\nflipping a key (µs, median; busy = another thread running the key's sites)\n");
		lkb_row("%-27s %9s %9s %9s %9s\n", "", "enable", "disable", "enable", "disable");
		lkb_row("%-27s %9s %9s %9s %9s\n", "", "alone", "alone", "busy", "busy");
	}
	print_flip_figures(f->name, &f->by[PROTOCOL_NOW]);
	if (NPROTOCOLS > 1)
		print_flip_figures("  int3 protocol, forced", &f->by[PROTOCOL_INT3]);
}

static void print_membarrier(double membarrier_us)
{
	lkb_row("%-27s %9.1f\n", "one membarrier(SYNC_CORE)", membarrier_us);
#if defined(__x86_64__)
	lkb_row("(this process has threads, so a flip swaps in rewritten copies of the pages: per run of\n"
		" pages a read of /proc/self/maps, an open(), mmap(), mprotect() and mremap(), then one\n"
		" membarrier call. The int3 protocol rows force the kernel's protocol in place: 3 membarrier\n"
		" calls and 2 mprotect calls per run of pages, which a thread blocking SIGTRAP does not\n"
		" survive, so flips use it only where the caller is the only thread.\n"
		" The kernel's figure for a batch of 56 sites is 1.4 ms)\n");
#else
	lkb_row("(a flip is one store per site, its cache maintenance, 2 mprotect calls per run of pages\n"
		" and one membarrier call, for any number of sites; the kernel's figure for a batch of\n"
		" 56 sites on x86-64 is 1.4 ms)\n");
#endif
}

static void json_seed(struct lk__json *j, const struct seed_row *s)
{
	lk__json_object(j, "published_s");
	lk__json_num(j, "mips64", s->mips64);
	lk__json_num(j, "aarch64", s->aarch64);
	lk__json_num(j, "riscv", s->riscv);
	lk__json_close(j);
}

static void json_key_vs_nop(struct lk__json *j, const struct key_vs_nop *k)
{
	char site[3 * SITE_LEN + 1] = "";

	for (size_t i = 0; i < SITE_LEN; i++)
		snprintf(site + 3 * i, sizeof(site) - 3 * i, i ? " %02x" : "%02x", k->site[i]);
	lk__json_object(j, "key_off_vs_nop");
	lk__json_bool(j, "identical_code", k->identical);
	lk__json_bool(j, "identical_but_alignment_padding", k->aligned);
	lk__json_int(j, "loop_head_offset", k->head);
	lk__json_int(j, "loop_body_bytes_compared", (long long)k->bytes);
	lk__json_int(j, "prologue_bytes_differing", k->prologue_diff);
	lk__json_int(j, "nop_loop_head_in_cache_line", k->head_line[0]);
	lk__json_int(j, "key_off_loop_head_in_cache_line", k->head_line[1]);
	lk__json_int(j, "site_offset", k->site_offset);
	if (k->site_offset >= 0)
		lk__json_str(j, "site_bytes", site);
	else
		lk__json_null(j, "site_bytes");
	if (k->why)
		lk__json_str(j, "why_not_identical", k->why);
	lk__json_num(j, "in_process_ratio", loop_rows[ROW_KEY_OFF].ns / loop_rows[ROW_NOP].ns);
	lk__json_int(j, "processes", k->processes);
	lk__json_int(j, "aslr", k->aslr);
	lk__json_array(j, "ratio_per_process");
	for (int i = 0; i < k->processes; i++)
		lk__json_num(j, NULL, k->ratio[i]);
	lk__json_close(j);
	lk__json_num(j, "ratio_median", k->median);
	lk__json_num(j, "ratio_min", k->min);
	lk__json_num(j, "ratio_max", k->max);
	lk__json_num(j, "resolves_pct", RESOLVE_PCT);
	if (k->verdict)
		lk__json_str(j, "verdict", k->verdict);
	else
		lk__json_null(j, "verdict");
	lk__json_close(j);
}

static void json_flips(struct lk__json *j, const char *name, int protocol)
{
	lk__json_array(j, name);
	for (size_t i = 0; i < NFLIPS; i++) {
		const struct flip_figures *ff = &flip_rows[i].by[protocol];

		lk__json_object(j, NULL);
		lk__json_str(j, "key", flip_rows[i].name);
		lk__json_num(j, "enable_alone", ff->enable_alone);
		lk__json_num(j, "disable_alone", ff->disable_alone);
		lk__json_num(j, "enable_busy", ff->enable_busy);
		lk__json_num(j, "disable_busy", ff->disable_busy);
		lk__json_close(j);
	}
	lk__json_close(j);
}

static void print_json(int runs, const struct pass_result *pf, const struct pass_result *pk,
		       double membarrier_us, const struct key_vs_nop *k)
{
	struct lk__json j;

	lk__json_begin(&j, stdout, false);
	lk__json_str(&j, "bench", "branch");
	lk__json_str(&j, "machine", lkb_machine());
	lk__json_int(&j, "runs", runs);
	lk__json_array(&j, "loop");
	for (size_t i = 0; i < NROWS; i++) {
		lk__json_object(&j, NULL);
		lk__json_str(&j, "row", loop_rows[i].name);
		lk__json_num(&j, "ns_per_iter", loop_rows[i].ns);
		lk__json_num(&j, "x_nop", loop_rows[i].ns / loop_rows[1].ns);
		json_seed(&j, &loop_rows[i].seed);
		lk__json_close(&j);
	}
	lk__json_close(&j);
	json_key_vs_nop(&j, k);
	lk__json_object(&j, "sites_1000");
	lk__json_num(&j, "load_branch_warm_ns_per_site", pf->warm_ns / NSITES);
	lk__json_num(&j, "load_branch_cold_ns_per_site", pf->cold_ns / NSITES);
	lk__json_num(&j, "key_off_warm_ns_per_site", pk->warm_ns / NSITES);
	lk__json_num(&j, "key_off_cold_ns_per_site", pk->cold_ns / NSITES);
	lk__json_close(&j);
	json_flips(&j, "flip_us", PROTOCOL_NOW);
	if (NPROTOCOLS > 1)
		json_flips(&j, "flip_int3_forced_us", PROTOCOL_INT3);
	lk__json_num(&j, "membarrier_sync_core_us", membarrier_us);
	lk__json_end(&j);
}

static const char branch_usage[] =
	"usage: lowkey bench branch [--runs N] [--flips N] [--processes N] [-j|--json]\n"
	"\n"
	"Re-runs the table of tinylab.org's \"RISC-V jump_label\" article (the cost of a disabled\n"
	"branch) on this machine: the same loop with a NOP, a branch, a load + branch (also with the\n"
	"flag's cache line bouncing to another CPU) and a static key off and on; 1,000 distinct sites\n"
	"with their own flags or keys, warm and cold; and the cost of flipping keys with 1, 10 and\n"
	"1,000 sites, alone and while another thread runs them -- on x86-64 also with the kernel's\n"
	"int3 protocol forced in place, which flips use only where the caller is the only thread\n"
	"(JSON: flip_int3_forced_us). Prints medians beside the article's published rows.\n"
	"\n"
	"Static key off and the NOP are the same code: the bench compares the two loops' bytes, and\n"
	"measures the pair in several processes of their own (each with its own code placement),\n"
	"printing the median and spread of the ratio, and a verdict only where the spread resolves 5%.\n"
	"\n"
	"  --runs N        repetitions of each loop row (default 15)\n"
	"  --flips N       flips timed per key (default 51)\n"
	"  --processes N   processes measuring static key off vs nop (default 5; 0: none)\n"
	"  -j, --json      print the figures as JSON\n";

static int branch_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "runs", required_argument, NULL, 'r' },
		{ "flips", required_argument, NULL, 'f' },
		{ "processes", required_argument, NULL, 'P' },
		{ "json", no_argument, NULL, 'j' },
		{ "key-vs-nop-child", no_argument, NULL, 'C' },	/* one of those processes */
		{ NULL, 0, NULL, 0 },
	};
	struct pass_result pf, pk;
	struct key_vs_nop kvn;
	int runs = 15, flips = 51, processes = 5, c, err;
	bool json = false, second_cpu, child = false;
	double membarrier_us;

	optind = 1;
	while ((c = getopt_long(argc, argv, "r:f:P:j", opts, NULL)) != -1) {
		switch (c) {
		case 'r': runs = atoi(optarg); break;
		case 'f': flips = atoi(optarg); break;
		case 'P': processes = atoi(optarg); break;
		case 'C': child = true; break;
		case 'j': json = true; break;
		default: fputs(branch_usage, stderr); return 2;
		}
	}
	if (runs < 1 || flips < 1 || processes < 0 || processes > 64 || optind != argc) {
		fputs(branch_usage, stderr);
		return 2;
	}
	if (child)
		return key_vs_nop_child(runs);

	second_cpu = lkb_ncpus() >= 2;
	lkb_pin(0);
	err = lk_key_enable(&key_on);
	if (err) {
		fprintf(stderr, "lowkey bench branch: cannot enable a static key: %s\nhint: %s\n",
			lk_strerror(err), lk_last_error());
		return 1;
	}
	if (!json)
		print_header(runs);
	err = measure_loop(runs, second_cpu);
	if (!err && !json)
		print_loop_rows(second_cpu);
	if (!err)
		err = measure_passes(runs, &pf, &pk);
	if (!err && !json)
		print_sites(&pf, &pk);
	if (!err)
		err = measure_flips(flips, second_cpu, !json);
	if (err) {
		fprintf(stderr, "lowkey bench branch: %s\n%s\n", lk_strerror(err), lk_last_error());
		return 1;
	}
	membarrier_us = time_membarrier_us(flips);
	if (!json)
		print_membarrier(membarrier_us);
	memset(&kvn, 0, sizeof(kvn));
	measure_key_vs_nop(&kvn, processes, runs);
	if (json)
		print_json(runs, &pf, &pk, membarrier_us, &kvn);
	else
		print_key_vs_nop(&kvn, loop_rows[ROW_KEY_OFF].ns / loop_rows[ROW_NOP].ns);
	return 0;
}

LK_BENCH(branch_bench, "branch", "jump_label article's table: a disabled branch's cost, and a key flip's",
	 branch_usage, branch_run);
