/* SPDX-License-Identifier: MIT */
/*
 * The lowkey command line, laid out as perf's: each command in its own builtin-NAME.c defines
 * cmd_NAME, main.c dispatches through one table of them, and what commands share is in util/.
 *
 * Exit status, as perf and git: 0 success, 1 the command failed, 2 bad usage. A command that runs
 * a program (stat, trace, locks) exits with the program's status, as a shell: 128+N for signal N,
 * 127 not found, 126 not executable. cli_conventions says it to users.
 */
#ifndef LOWKEY_CLI_BUILTIN_H
#define LOWKEY_CLI_BUILTIN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2

struct cli_command {
	const char *name;
	const char *summary; /* one line for `lowkey help` */
	const char *usage;   /* the whole help text for `lowkey help NAME` and `NAME --help` */
	int (*run)(int argc, char **argv); /* argv[0] is the command's name */
	unsigned int flags;		   /* CLI_OWN_HELP */
};

/* The command answers --help itself (it dispatches to sub-commands that have their own). */
#define CLI_OWN_HELP 0x1

/* The commands (builtin-NAME.c); main.c's table lists them. */
extern const struct cli_command cmd_agent, cmd_bench, cmd_clock, cmd_convert, cmd_disable,
	cmd_enable, cmd_help, cmd_list, cmd_locks, cmd_races, cmd_report, cmd_snapshot, cmd_stat,
	cmd_trace, cmd_version, cmd_watch;

/* The rules every command follows (event lists, exit status, -j, progress), for `lowkey help`. */
extern const char cli_conventions[];

const struct cli_command *cli_find(const char *name);
/* Why this build left out command name (a library missing for the target), or NULL. */
const char *cli_left_out(const char *name);
void cli_list(void);
void cli_suggest(const char *name);

/*
 * Print "lowkey CMD: message" on stderr, and a hint line if hint is not NULL. The message's
 * control characters are escaped (lk__text_escape): it may quote a trace, a process or /proc.
 */
void cli_error(const char *cmd, const char *hint, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * A command-line number: the whole of s, within [min, max]. Decimal for the signed form; decimal,
 * 0x hex or 0 octal, with no sign, for the unsigned one. false for anything else, overflow too.
 */
bool cli_parse_long(const char *s, long long min, long long max, long long *out);
bool cli_parse_unsigned(const char *s, unsigned long long max, unsigned long long *out);

/* A list of CPUs as perf -C takes it, "0,2-3": malloc()ed into *cpus, *n of them. false for
 * anything else (an empty item, a range backwards, a CPU twice, a number over 2^20). */
bool cli_parse_cpu_list(const char *s, int **cpus, size_t *n);

/*
 * What every command that takes --pid says of a process it cannot have (util/target_pid.c), in
 * the same words for every command. cli_check_pid: 0, or CLI_EXIT_FAIL after saying on stderr
 * that there is no such process or, with look_into (a command that reads the process's memory or
 * counts it), that it is another user's and out of this user's reach (the kernel's ptrace access
 * check). Commands that go through the control socket leave permission to the process, which
 * admits its own user and root: on the connection's -EACCES they call cli_pid_denied with its
 * message ("process N belongs to uid U"), which adds what to do and returns CLI_EXIT_FAIL.
 * Both read /proc or print only.
 */
int cli_check_pid(const char *cmd, pid_t pid, bool look_into);
int cli_pid_denied(const char *cmd, const char *why);

/* Whether argv[1..] asks for help before any "--". */
bool cli_wants_help(int argc, char **argv);

#endif
