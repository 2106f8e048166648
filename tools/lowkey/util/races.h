/* SPDX-License-Identifier: MIT */
/*
 * lowkey races: internal to the command. builtin-races.c runs the program with
 * liblowkey-races.so and the plan; races_decode.c finds the instructions to sample in the
 * program's code (Capstone); races_report.c names and prints what the library found.
 */
#ifndef LOWKEY_CLI_RACES_H
#define LOWKEY_CLI_RACES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "internal/races_file.h"

/* A memory-accessing instruction of the program, as decoded. */
struct races_insn {
	struct lkr_insn plan; /* what the library needs to sample it */
	bool atomic;	      /* lock prefix, xchg with memory, cmpxchg, xadd */
	bool sampled;	      /* in the plan: see races_decode() for what is left out */
};

struct races_code {
	struct races_insn *insns; /* by address */
	size_t n;
	size_t sampled; /* of them, in the plan */
	size_t atomic;	/* left out as atomic */
	size_t stack;	/* left out as accesses to the thread's own stack frame */
};

/*
 * races_decode - add to code every instruction of path's executable sections that accesses
 * memory through one explicit operand, decoded with Capstone, as object number object (the
 * program 0, libraries after). Sampled are those of 1, 2, 4 or 8 bytes that are not atomic, not
 * relative to fs/gs (thread-local), not string operations, not jumps or calls, and not addressed
 * from rsp or rbp alone (the thread's own frame). code stays sorted by object and address. x86-64
 * ELF only. Returns 0, or -errno with err saying why (not a readable x86-64 ELF file, no memory,
 * Capstone failed); code then holds what it held before.
 */
int races_decode(const char *path, uint8_t object, struct races_code *code, char *err,
		 size_t errlen);
void races_code_free(struct races_code *code);

/*
 * The decoded instruction of object that ends at its ELF address end (a data watchpoint's ip),
 * or NULL.
 */
const struct races_insn *races_insn_ending(const struct races_code *code, uint8_t object,
					   uint64_t end);

/* What the report says around the races. */
struct races_run {
	const char *command;
	const char *const *paths; /* absolute: the program's, then the libraries' (--lib) */
	uint64_t seed;
	double rate, window_ms;
	int status; /* the command's wait status */
};

/*
 * races_report - name the races in h (the file the library filled) with libdw and print them as
 * text or JSON on out. Returns the number of races reported.
 */
size_t races_report(FILE *out, struct lkr_header *h, const struct races_code *code,
		    const struct races_run *run, bool json);

#endif
