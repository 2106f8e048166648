/* SPDX-License-Identifier: MIT */
/*
 * The parts of `lowkey bench branch` (branch.c): one loop per instruction sequence and static
 * key off against the NOP in processes of their own (branch_loop.c), the machine code of those
 * two loops compared (branch_code.c), 1,000 distinct sites and the cost of a flip
 * (branch_sites.c), and the text and JSON output (branch_print.c).
 */
#ifndef LOWKEY_BENCH_BRANCH_BENCH_H
#define LOWKEY_BENCH_BRANCH_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <lowkey/lowkey.h>

/*
 * Each architecture's instructions for the rows: a NOP the size of a key's site, an unconditional
 * branch to the next instruction, a never-taken compare and branch, and what every taken branch
 * does -- an asm the compiler cannot turn into a cmov, sbb or csel, so each "branch" row really
 * has a branch. TAKEN_ADD(i) is TAKEN with a distinct immediate per site. TAKEN and TAKEN_ADD add
 * to the `hits` of the function they are in.
 * riscv64: the 4-byte forms (.option norvc), as a key's site is; with the C extension the
 * assembler would emit the 2-byte c.nop and c.j.
 */
#if defined(__x86_64__)
#define NOP_ROW "nop (5-byte)"
#define ASM_NOP ".byte 0x0f, 0x1f, 0x44, 0x00, 0x00"
#define ASM_UBRANCH ".byte 0xe9\n\t.long 0" /* jmp rel32 to the next insn */
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
#define CBRANCH(i)                                                                        \
	asm volatile(".option push\n\t.option norvc\n\tbeq %0, %1, 1f\n1:\n\t.option pop" \
		     :                                                                    \
		     : "r"(i), "r"(~(uint64_t)0))
#define TAKEN asm volatile("addi %0, %0, 1" : "+r"(hits))
#define TAKEN_ADD(i) asm volatile("addi %0, %0, %1" : "+r"(hits) : "I"(i))
#else
#error "bench/branch_bench.h: no row instructions for this architecture"
#endif

/* ---- 1. the loop (branch_loop.c) ---- */

/* The article's figures for a row, in seconds of its own loop count; NAN: not published. */
struct published_row {
	double mips64, aarch64, riscv;
};

struct loop_row {
	const char *name;
	uint64_t (*fn)(uint64_t);
	bool bounce; /* needs the writer on another CPU */
	struct published_row published;
	uint64_t iters;
	double *samples;
	double ns; /* median ns per iteration */
};

enum loop_row_id {
	ROW_EMPTY,
	ROW_NOP,
	ROW_UBRANCH,
	ROW_CBRANCH,
	ROW_LOAD_BRANCH,
	ROW_LOAD_BRANCH_MISS,
	ROW_KEY_OFF,
	ROW_KEY_ON,
	ROW_LOAD_BRANCH_ON,
	NROWS
};

extern struct loop_row branch_loop_rows[NROWS];

/* Turn the "static key on" row's key on; lk_key_enable's result. */
int branch_enable_key_on(void);
/* Every row, runs times, interleaved; the cache-miss row only with a second CPU. 0 or -ENOMEM. */
int branch_measure_loop(int runs, bool have_second_cpu);

/* ---- 1b. static key off vs nop: the code (branch_code.c), the processes (branch_loop.c) ---- */

/* A key's site when off, as the site table finds it: the NOP key.h emits, in memory order. */
#if defined(__x86_64__)
#define SITE_NOP "\x0f\x1f\x44\x00\x00" /* nopl 0x0(%rax,%rax,1) */
#define SITE_NOP_NAME "the 5-byte NOP 0f 1f 44 00 00"
#elif defined(__aarch64__)
#define SITE_NOP "\x1f\x20\x03\xd5" /* nop: 0xd503201f */
#define SITE_NOP_NAME "the NOP d503201f"
#elif defined(__riscv)
#define SITE_NOP "\x13\x00\x00\x00" /* addi zero, zero, 0: 0x00000013 */
#define SITE_NOP_NAME "the 4-byte NOP 00000013"
#endif
#define SITE_LEN (sizeof(SITE_NOP) - 1)
#define RESOLVE_PCT 5.0 /* a verdict needs the per-process spread within this */

struct key_vs_nop {
	/* the code */
	bool identical;	   /* the same loop body bytes, the key's site SITE_NOP inside */
	bool aligned;	   /* the same but for ALIGN_PAD before the site (riscv64) */
	long head;	   /* the loop head from the entry; -1: not found */
	size_t bytes;	   /* the loop body's, compared: head to the backward branch's end */
	int prologue_diff; /* bytes that differ between entry and head (run once per call) */
	unsigned int head_line[2]; /* the heads' offsets in their 64-byte lines: nop, key off */
	long site_offset;	   /* the key's site from loop_key_off's entry; -1: not found */
	uint8_t site[SITE_LEN];
	const char *why; /* why not identical, or NULL */
	/* several processes: key off / nop */
	int requested; /* --processes */
	int processes; /* that reported */
	double ratio[64];
	double median, min, max;
	int aslr;	     /* /proc/sys/kernel/randomize_va_space, -1 unknown */
	const char *verdict; /* NULL: the spread does not resolve RESOLVE_PCT */
};

/*
 * Compare the loop bodies of nop and key, two loop functions of the same shape, key's holding the
 * site of site_key; the code fields of *k.
 */
void branch_compare_code(struct key_vs_nop *k, const uint8_t *nop, const uint8_t *key,
			 const struct lk_key *site_key);
/* The code compared, then the pair timed in `processes` processes of their own. */
void branch_measure_key_vs_nop(struct key_vs_nop *k, int processes, int runs);
/* One of those processes (--key-vs-nop-child): prints "NOP_NS KEY_OFF_NS"; its exit status. */
int branch_key_vs_nop_child(int runs);

/* ---- 2. 1,000 sites in one pass, and 3. flips (branch_sites.c) ---- */

#define NSITES 1000

struct pass_result {
	double warm_ns, cold_ns; /* per pass, medians */
};

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
	double enable_alone, disable_alone, enable_busy, disable_busy; /* µs, medians */
};

struct flip_row {
	const char *name;
	struct lk_key *key;
	uint64_t (*run)(void);
	struct flip_figures by[PROTOCOLS_MAX];
};

#define NFLIPS 3 /* keys with 1, 10 and 1,000 sites */

extern struct flip_row branch_flip_rows[NFLIPS];

/* Warm and cold passes over the 1,000 sites with flags and with keys; 0 or -ENOMEM. */
int branch_measure_passes(int runs, struct pass_result *flags, struct pass_result *keys);
/* Each key flipped `flips` times, with each protocol, alone and busy; each row printed (text) as
 * soon as it is measured. 0 or the error of lk_key_enable/disable. */
int branch_measure_flips(int flips, bool have_second_cpu, bool text);
/* Context for the flip figures: one membarrier(SYNC_CORE), median of reps, in µs. */
double branch_time_membarrier_us(int reps);

/* ---- output (branch_print.c) ---- */

/* The text is printed a part at a time, each as soon as its figures are measured (lkb_row). */
void branch_print_header(int runs);
void branch_print_loop_rows(bool have_second_cpu);
void branch_print_sites(const struct pass_result *pf, const struct pass_result *pk);
void branch_print_flip_row(const struct flip_row *f);
void branch_print_membarrier(double membarrier_us);
void branch_print_key_vs_nop(const struct key_vs_nop *k, double in_process);
void branch_print_json(int runs, const struct pass_result *pf, const struct pass_result *pk,
		       double membarrier_us, const struct key_vs_nop *k);

#endif
