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
 * branch predictors index by them), which moves single runs either way. The bench compares the
 * two loop bodies' machine code at run time (identical by construction when they are the same
 * bytes and the key's site is the same 5-byte NOP), and measures the pair in several processes of
 * their own (this program re-executed, each placed anew): the median and the spread (min..max)
 * of the ratio. A verdict is printed only when that spread resolves RESOLVE_PCT (5 %).
 *
 * The parts: branch_loop.c (1 and the pair in processes of their own), branch_code.c (the two
 * loops' machine code compared), branch_sites.c (2 and 3), branch_print.c (text and JSON).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lowkey/lowkey.h>

#include "bench.h"
#include "branch_bench.h"

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

struct branch_options {
	int runs, flips, processes;
	bool json;
	bool child; /* --key-vs-nop-child: a process measuring key off vs nop */
};

/* The options into *o; false when they are not the bench's (the usage is printed). */
static bool parse_options(int argc, char **argv, struct branch_options *o)
{
	static const struct option opts[] = {
		{ "runs", required_argument, NULL, 'r' },
		{ "flips", required_argument, NULL, 'f' },
		{ "processes", required_argument, NULL, 'P' },
		{ "json", no_argument, NULL, 'j' },
		{ "key-vs-nop-child", no_argument, NULL, 'C' }, /* one of those processes */
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*o = (struct branch_options){ .runs = 15, .flips = 51, .processes = 5 };
	optind = 1;
	while ((c = getopt_long(argc, argv, "r:f:P:j", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			o->runs = atoi(optarg);
			break;
		case 'f':
			o->flips = atoi(optarg);
			break;
		case 'P':
			o->processes = atoi(optarg);
			break;
		case 'C':
			o->child = true;
			break;
		case 'j':
			o->json = true;
			break;
		default:
			fputs(branch_usage, stderr);
			return false;
		}
	}
	if (o->runs < 1 || o->flips < 1 || o->processes < 0 || o->processes > 64 ||
	    optind != argc) {
		fputs(branch_usage, stderr);
		return false;
	}
	return true;
}

/* The loop rows, the 1,000 sites and the flips, each part printed (text) once measured. */
static int measure_parts(const struct branch_options *o, bool second_cpu, struct pass_result *pf,
			 struct pass_result *pk)
{
	int err = branch_measure_loop(o->runs, second_cpu);

	if (!err && !o->json)
		branch_print_loop_rows(second_cpu);
	if (!err)
		err = branch_measure_passes(o->runs, pf, pk);
	if (!err && !o->json)
		branch_print_sites(pf, pk);
	if (!err)
		err = branch_measure_flips(o->flips, second_cpu, !o->json);
	return err;
}

static int branch_run(int argc, char **argv)
{
	struct branch_options o;
	struct pass_result pf, pk;
	struct key_vs_nop kvn;
	double membarrier_us;
	bool second_cpu;
	int err;

	if (!parse_options(argc, argv, &o))
		return 2;
	if (o.child)
		return branch_key_vs_nop_child(o.runs);

	second_cpu = lkb_ncpus() >= 2;
	lkb_pin(0);
	err = branch_enable_key_on();
	if (err) {
		fprintf(stderr, "lowkey bench branch: cannot enable a static key: %s\nhint: %s\n",
			lk_strerror(err), lk_last_error());
		return 1;
	}
	if (!o.json)
		branch_print_header(o.runs);
	err = measure_parts(&o, second_cpu, &pf, &pk);
	if (err) {
		fprintf(stderr, "lowkey bench branch: %s\n%s\n", lk_strerror(err), lk_last_error());
		return 1;
	}
	membarrier_us = branch_time_membarrier_us(o.flips);
	if (!o.json)
		branch_print_membarrier(membarrier_us);
	memset(&kvn, 0, sizeof(kvn));
	branch_measure_key_vs_nop(&kvn, o.processes, o.runs);
	if (o.json)
		branch_print_json(o.runs, &pf, &pk, membarrier_us, &kvn);
	else
		branch_print_key_vs_nop(&kvn, branch_loop_rows[ROW_KEY_OFF].ns /
						      branch_loop_rows[ROW_NOP].ns);
	return 0;
}

LK_BENCH(branch_bench, "branch",
	 "jump_label article's table: a disabled branch's cost, and a key flip's", branch_usage,
	 branch_run);
