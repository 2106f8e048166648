// SPDX-License-Identifier: MIT
/*
 * `lowkey bench branch`'s output: the text, each part as soon as its figures are measured
 * (lkb_row), or JSON at the end; beside the rows tinylab.org's "RISC-V jump_label" article
 * published.
 */
#include <stdio.h>

#include "bench.h"
#include "branch_bench.h"

static void print_published_cell(FILE *out, double v)
{
	if (__builtin_isnan(v))
		fprintf(out, "  %7s", "-");
	else
		fprintf(out, "  %6.2fs", v);
}

void branch_print_key_vs_nop(const struct key_vs_nop *k, double in_process)
{
	FILE *out = lkb_section_begin();

	fprintf(out, "\nstatic key off vs nop: ");
	if (k->identical)
		fprintf(out,
			"identical by construction: the loop bodies (the %zu bytes from the loop head,\n"
			"  entry + %ld, to the backward branch) are the same bytes in both functions, and the\n"
			"  key's site (entry + %ld) is " SITE_NOP_NAME
			"; before the head (run once per call)\n"
			"  %d byte(s) differ; loop heads at +%u (nop) and +%u (key off) in their 64-byte\n"
			"  lines\n",
			k->bytes, k->head, k->site_offset, k->prologue_diff, k->head_line[0],
			k->head_line[1]);
	else if (k->aligned)
		fprintf(out,
			"the same code but for one 2-byte c.nop before the key's site,\n"
			"  which aligns the site to 4 bytes (the kernel's riscv jump labels align the same way):\n"
			"  it runs every pass; the key's site (entry + %ld) is " SITE_NOP_NAME "\n",
			k->site_offset);
	else
		fprintf(out, "not the same code: %s\n", k->why);
	if (k->processes == 0) {
		fprintf(out,
			"  (not measured in processes of their own: %s; this table's single process: %+.1f%%,\n"
			"  no verdict)\n",
			k->requested ? "they failed" : "--processes 0", 100.0 * (in_process - 1.0));
		lkb_section_end(out);
		return;
	}
	fprintf(out,
		"  key off / nop in %d processes of their own (%s): median %+.1f%%,\n"
		"  spread %+.1f%%..%+.1f%% (this table's single process: %+.1f%%): ",
		k->processes,
		k->aslr == 0 ? "ASLR is off: all placed alike" : "ASLR: each placed anew",
		100.0 * (k->median - 1.0), 100.0 * (k->min - 1.0), 100.0 * (k->max - 1.0),
		100.0 * (in_process - 1.0));
	if (k->verdict)
		fprintf(out, "%s (the spread resolves %.0f%%)\n", k->verdict, RESOLVE_PCT);
	else if (k->processes < 3)
		fprintf(out, "no verdict (fewer than 3 processes)\n");
	else
		fprintf(out, "no verdict: the spread does not\n  resolve %.0f%%%s\n", RESOLVE_PCT,
			k->identical ? " (between identical loops it is where the code landed)" :
				       "");
	lkb_section_end(out);
}

void branch_print_header(int runs)
{
	lkb_row("lowkey bench branch: the \"RISC-V jump_label\" article's table on this machine\n");
	lkb_row("machine: %s\n", lkb_machine());
	lkb_row("method:  same loop for every row, median of %d runs, rows interleaved\n\n", runs);
}

/* The rows are measured interleaved, run after run: they are all done at once. */
void branch_print_loop_rows(bool have_second_cpu)
{
	double nop = branch_loop_rows[ROW_NOP].ns;
	FILE *out = lkb_section_begin();

	fprintf(out, "%-27s %9s %8s   %-34s\n", "", "", "", "published (s, its own loop count)");
	fprintf(out, "%-27s %9s %8s  %8s %8s %8s\n", "row", "ns/iter", "x nop", "MIPS64", "AArch64",
		"RISC-V");
	for (size_t i = 0; i < NROWS; i++) {
		const struct loop_row *r = &branch_loop_rows[i];

		if (__builtin_isnan(r->ns))
			fprintf(out, "%-27s %9s %8s", r->name, "n/a", "");
		else
			fprintf(out, "%-27s %9.3f %8.3f", r->name, r->ns, r->ns / nop);
		print_published_cell(out, r->published.mips64);
		print_published_cell(out, r->published.aarch64);
		print_published_cell(out, r->published.riscv);
		fputc('\n', out);
	}
	if (!have_second_cpu)
		fprintf(out, "(the cache-miss row needs a second CPU)\n");
	fprintf(out, "\nload + branch, cache miss vs static key off: %.1fx\n",
		branch_loop_rows[ROW_LOAD_BRANCH_MISS].ns / branch_loop_rows[ROW_KEY_OFF].ns);
	lkb_section_end(out);
}

void branch_print_sites(const struct pass_result *pf, const struct pass_result *pk)
{
	lkb_row("\n1,000 distinct sites in one pass (ns per site; cold = flags and code flushed first)\n");
	lkb_row("%-27s %9s %9s\n", "", "warm", "cold");
	lkb_row("%-27s %9.3f %9.3f\n", "load + branch, own flag", pf->warm_ns / NSITES,
		pf->cold_ns / NSITES);
	lkb_row("%-27s %9.3f %9.3f\n", "static key off, own key", pk->warm_ns / NSITES,
		pk->cold_ns / NSITES);
	lkb_row("%-27s %8.2fx %8.2fx\n", "load + branch / key", pf->warm_ns / pk->warm_ns,
		pf->cold_ns / pk->cold_ns);
}

static void print_flip_figures(const char *name, const struct flip_figures *ff)
{
	lkb_row("%-27s %9.1f %9.1f %9.1f %9.1f\n", name, ff->enable_alone, ff->disable_alone,
		ff->enable_busy, ff->disable_busy);
}

void branch_print_flip_row(const struct flip_row *f)
{
	if (f == &branch_flip_rows[0]) {
		lkb_row("\nflipping a key (µs, median; busy = another thread running the key's sites)\n");
		lkb_row("%-27s %9s %9s %9s %9s\n", "", "enable", "disable", "enable", "disable");
		lkb_row("%-27s %9s %9s %9s %9s\n", "", "alone", "alone", "busy", "busy");
	}
	print_flip_figures(f->name, &f->by[PROTOCOL_NOW]);
	if (NPROTOCOLS > 1)
		print_flip_figures("  int3 protocol, forced", &f->by[PROTOCOL_INT3]);
}

void branch_print_membarrier(double membarrier_us)
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

static void json_published(struct lk__json *j, const struct published_row *s)
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
	lk__json_num(j, "in_process_ratio",
		     branch_loop_rows[ROW_KEY_OFF].ns / branch_loop_rows[ROW_NOP].ns);
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
		const struct flip_figures *ff = &branch_flip_rows[i].by[protocol];

		lk__json_object(j, NULL);
		lk__json_str(j, "key", branch_flip_rows[i].name);
		lk__json_num(j, "enable_alone", ff->enable_alone);
		lk__json_num(j, "disable_alone", ff->disable_alone);
		lk__json_num(j, "enable_busy", ff->enable_busy);
		lk__json_num(j, "disable_busy", ff->disable_busy);
		lk__json_close(j);
	}
	lk__json_close(j);
}

void branch_print_json(int runs, const struct pass_result *pf, const struct pass_result *pk,
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
		lk__json_str(&j, "row", branch_loop_rows[i].name);
		lk__json_num(&j, "ns_per_iter", branch_loop_rows[i].ns);
		lk__json_num(&j, "x_nop", branch_loop_rows[i].ns / branch_loop_rows[ROW_NOP].ns);
		json_published(&j, &branch_loop_rows[i].published);
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
