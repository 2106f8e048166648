/* SPDX-License-Identifier: MIT */
/*
 * The lowkey command line. Each subcommand lives in its own file and registers itself with
 * LK_CLI_COMMAND; main.c finds them all through the linker section.
 *
 * Exit status, as perf and git: 0 success, 1 the command failed, 2 bad usage. A command that runs
 * a program (stat, trace, locks) exits with the program's status, as a shell: 128+N for signal N,
 * 127 not found, 126 not executable. lk_cli_conventions says it to users.
 */
#ifndef LOWKEY_CLI_H
#define LOWKEY_CLI_H

#include <stdbool.h>
#include <stddef.h>

#define LK_EXIT_OK 0
#define LK_EXIT_FAIL 1
#define LK_EXIT_USAGE 2

struct lk_cli_command {
	const char *name;
	const char *summary;	/* one line for `lowkey help` */
	const char *usage;	/* the whole help text for `lowkey help NAME` and `NAME --help` */
	int (*run)(int argc, char **argv);	/* argv[0] is the command's name */
	unsigned int flags;			/* LK_CLI_OWN_HELP */
};

/* The command answers --help itself (it dispatches to sub-commands that have their own). */
#define LK_CLI_OWN_HELP 0x1

#define LK_CLI_COMMAND(ident, ...)                                                            \
	static const struct lk_cli_command ident                                              \
		__attribute__((used, section("lk_cli_commands"), aligned(sizeof(void *)))) =  \
			{ __VA_ARGS__ }

/* The rules every command follows (event lists, exit status, -j, progress), for `lowkey help`. */
extern const char lk_cli_conventions[];

const struct lk_cli_command *lk_cli_find(const char *name);
void lk_cli_list(void);
void lk_cli_suggest(const char *name);

/*
 * Print "lowkey CMD: message" on stderr, and a hint line if hint is not NULL. The message's
 * control characters are escaped (lk__text_escape): it may quote a trace, a process or /proc.
 */
void lk_cli_error(const char *cmd, const char *hint, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * A command-line number: the whole of s, within [min, max]. Decimal for the signed form; decimal,
 * 0x hex or 0 octal, with no sign, for the unsigned one. false for anything else, overflow too.
 */
bool lk_cli_parse_long(const char *s, long long min, long long max, long long *out);
bool lk_cli_parse_unsigned(const char *s, unsigned long long max, unsigned long long *out);

/* A list of CPUs as perf -C takes it, "0,2-3": malloc()ed into *cpus, *n of them. false for
 * anything else (an empty item, a range backwards, a CPU twice, a number over 2^20). */
bool lk_cli_parse_cpu_list(const char *s, int **cpus, size_t *n);

/* Whether argv[1..] asks for help before any "--". */
bool lk_cli_wants_help(int argc, char **argv);

#endif
