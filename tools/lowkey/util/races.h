/* SPDX-License-Identifier: MIT */
/*
 * lowkey races: internal to the command. builtin-races.c runs the program with
 * liblowkey-races.so and the plan; races_decode.c finds the instructions to sample in the
 * program's code (Capstone); races_report.c names and prints what the library found, and
 * races_html.c makes a page of it.
 */
#ifndef LOWKEY_CLI_RACES_H
#define LOWKEY_CLI_RACES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "internal/races_file.h"

/* Why the debug information says an access is atomic (races_mark_atomics()). */
enum races_atomic_kind {
	RACES_NOT_ATOMIC,      /* as far as it says */
	RACES_ATOMIC_C11,      /* an _Atomic type (DW_TAG_atomic_type) */
	RACES_ATOMIC_STD,      /* std::atomic<T>: a member of that type, or code of its functions */
	RACES_ATOMIC_SIG,      /* a volatile sig_atomic_t */
	RACES_ATOMIC_METADATA, /* listed by Clang's sanitizer metadata (races_mark_metadata()) */
	RACES_ATOMIC_KINDS,
};

/* A memory-accessing instruction of the program, as decoded. */
struct races_insn {
	struct lkr_insn plan; /* what the library needs to sample it */
	bool atomic;	      /* lock prefix, xchg with memory, cmpxchg, xadd */
	bool sampled;	      /* in the plan: see races_decode() for what is left out */
	uint8_t atomic_kind;  /* enum races_atomic_kind: what the debug information says */
	bool covered;	      /* in a function Clang's sanitizer metadata lists every atomic of */
};

struct races_code {
	struct races_insn *insns; /* by address */
	size_t n;
	size_t sampled; /* of them, in the plan */
	size_t atomic;	/* left out as atomic */
	size_t stack;	/* left out as accesses to the thread's own stack frame */
	size_t atomic_debug[RACES_ATOMIC_KINDS]; /* left out as atomic by the debug information */
	size_t covered; /* in functions whose atomics Clang's sanitizer metadata lists */
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
 * races_mark_metadata - leave out of the plan the instructions of object (decoded from path into
 * code) that Clang's sanitizer metadata lists as atomic (-fexperimental-sanitize-metadata=atomics,
 * sections sanmd_atomics and sanmd_covered), and mark those of the functions it covers: there the
 * list is exact, so races_mark_atomics() leaves them as they are. Counts them in
 * code->atomic_debug[RACES_ATOMIC_METADATA] and code->covered. A file without the sections, or
 * with sections in a layout it does not know, changes nothing. Call it before
 * races_mark_atomics(). Returns 0, or -errno with err saying why: path not a readable regular
 * file.
 */
int races_mark_metadata(const char *path, uint8_t object, struct races_code *code, char *err,
			size_t errlen);

/*
 * races_mark_atomics - leave out of the plan the instructions of object (decoded from path into
 * code) that access an atomic as the debug information says, though the instruction is plain:
 * one that addresses a global or static variable directly (rip-relative) where the bytes accessed
 * are an _Atomic type, a std::atomic<T> or a volatile sig_atomic_t; one inside a member function
 * of std::atomic<T> (libstdc++, libc++), inlined or not. Sets their atomic_kind and counts them
 * in code->atomic_debug. A file without DWARF changes nothing. Reads path's DWARF with libdw
 * (the file itself, not a separate debug file). Returns 0, or -errno with err saying why: path
 * not a readable regular file, no memory.
 */
int races_mark_atomics(const char *path, uint8_t object, struct races_code *code, char *err,
		       size_t errlen);

/*
 * Suppressions in ThreadSanitizer's syntax: one per line, "race:PATTERN" or "race_top:PATTERN",
 * '#' comments and blank lines; TSan's other kinds (thread:, mutex:, signal:, deadlock:,
 * called_from_lib:) are read and ignored, as lowkey reports nothing of theirs. PATTERN is matched
 * as TSan does (races_pattern_match()), against what races_race_suppressed() says.
 */
struct races_pattern {
	char *text;
	bool top; /* race_top: the first frame of each access only */
};

struct races_suppressions {
	struct races_pattern *patterns;
	size_t n;
};

/*
 * races_suppressions_read - add the race patterns of the file at path. Returns 0, or -errno with
 * err saying why: the file cannot be read (-ENOENT, -EACCES...), a line of an unknown kind or
 * with an empty pattern (-EINVAL, err names the line), no memory.
 */
int races_suppressions_read(struct races_suppressions *s, const char *path, char *err,
			    size_t errlen);
void races_suppressions_free(struct races_suppressions *s);

/* A frame of a stack, or where the race's address is, as a suppression sees it; NULL: not known. */
struct races_names {
	const char *function; /* demangled; for a location, the global's name */
	const char *mangled;  /* as the object names it */
	const char *file;     /* source file */
	const char *module;   /* the object's path */
};

/* One access of a race: its thread's stack, innermost first (an inlined function an entry). */
struct races_access_names {
	const struct races_names *frames;
	size_t n;
};

/*
 * races_race_suppressed - whether s suppresses a race of n accesses (2, or 1 when only the held
 * one is known), as ThreadSanitizer decides: a race: pattern that matches the function
 * (demangled or mangled), source file or object of any frame of either access, or a name of one
 * of the nlocations locations (where the address is: the global, with what of it TSan matches;
 * the caller leaves NULL what is not matched); a race_top: pattern that matches the function,
 * file or object of the first frame of either access (the function the access is in, or the one
 * inlined there), never a location.
 */
bool races_race_suppressed(const struct races_suppressions *s,
			   const struct races_access_names *accesses, size_t n,
			   const struct races_names *locations, size_t nlocations);

/* The pattern match alone (TSan's TemplateMatch): exported for the tests. */
bool races_pattern_match(const char *pattern, const char *string);

/*
 * The decoded instruction of object that ends at its ELF address end (a data watchpoint's ip),
 * or NULL.
 */
const struct races_insn *races_insn_ending(const struct races_code *code, uint8_t object,
					   uint64_t end);

/*
 * races_attach - hand the plan open at plan_fd to liblowkey-races.so waiting in process pid
 * (started with it preloaded and LOWKEY_RACES_ATTACH=1; program: its executable, for messages;
 * lib: the library's path, for the hint) and wait until it stops sampling: the plan's duration,
 * the process's exit, or ^C / SIGTERM / SIGHUP, which ask it to stop and remove its watchpoints
 * (blocked meanwhile: one that comes before the sampling begins stops it at once). Returns 0
 * when the library took the plan (the plan's flags and error say whether it sampled), or
 * CLI_EXIT_FAIL after saying why on stderr: nothing waits (not started so, another network
 * namespace), another process answers, it refused the plan (another executable), no answer; or,
 * saying nothing, when a signal was held back before (signal_forward_held()): not attached.
 */
int races_attach(pid_t pid, int plan_fd, const char *program, const char *lib);

/* What the report says around the races. */
struct races_run {
	const char *command;
	const char *const *paths; /* absolute: the program's, then the libraries' (--lib) */
	uint64_t seed;
	double rate, window_ms;
	int status;    /* the command's wait status */
	bool attached; /* --pid: no status (the process runs on) */
	bool heap;     /* --heap: heap blocks asked for */
	const struct races_suppressions *suppressions;
	size_t suppressed; /* set by races_report(): races matched by a suppression */
};

/*
 * races_report - name the races in h (the file the library filled) with libdw and print them as
 * text or JSON on out, less those run->suppressions match (counted in run->suppressed). Returns
 * the number of races reported.
 */
size_t races_report(FILE *out, struct lkr_header *h, const struct races_code *code,
		    struct races_run *run, bool json);

/*
 * races_html - write the page of a report as races_report() prints it in JSON (len bytes of json)
 * to out_path ("-": standard output): how often each race was caught, the races, both threads'
 * stacks. Every name from the program is escaped. Returns a CLI_EXIT_* status, having said what
 * failed (the JSON unreadable, out_path not writable, a write error).
 */
int races_html(const char *json, size_t len, const char *out_path);

#endif
