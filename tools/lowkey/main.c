// SPDX-License-Identifier: MIT
/*
 * lowkey: dispatch to a subcommand.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <lowkey/lowkey.h>

#include "builtin.h"
#include "internal/edit_distance.h"
#include "internal/utf8.h"
#include "util/status.h"

/* Every command, sorted by name: `lowkey help` lists them in this order. */
static const struct cli_command *const commands[] = {
#ifdef LK_HAVE_AGENT
	&cmd_agent,
#endif
	&cmd_bench,  &cmd_clock,    &cmd_convert, &cmd_disable, &cmd_enable,  &cmd_help,
#ifdef LK_HAVE_LIBELF
	&cmd_list,
#endif
#ifdef LK_HAVE_LIBDW
	&cmd_locks,
#endif
#ifdef LK_HAVE_RACES
	&cmd_races,
#endif
	&cmd_report, &cmd_snapshot, &cmd_stat,	  &cmd_trace,	&cmd_version,
#ifdef LK_HAVE_LIBDW
	&cmd_watch,
#endif
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

/* The commands this build left out, and why: a user asking for one is told, not "no such". */
static const struct {
	const char *name, *why;
} left_out[] = {
#include "left_out.h"
	{ NULL, NULL },
};

const char *cli_left_out(const char *name)
{
	for (size_t i = 0; left_out[i].name; i++)
		if (strcmp(left_out[i].name, name) == 0)
			return left_out[i].why;
	return NULL;
}

const struct cli_command *cli_find(const char *name)
{
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (strcmp(commands[i]->name, name) == 0)
			return commands[i];
	return NULL;
}

static void list_to(FILE *out)
{
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(out, "   %-10s %s\n", commands[i]->name, commands[i]->summary);
}

void cli_list(void)
{
	list_to(stdout);
}

void cli_suggest(const char *name)
{
	for (size_t i = 0; i < NCOMMANDS; i++) {
		const char *known = commands[i]->name;

		if (lk__edit_distance(name, known, false) <= 2 ||
		    strncmp(name, known, strlen(name)) == 0)
			fprintf(stderr, "hint: did you mean 'lowkey %s'?\n", known);
	}
}

/* Messages quote what traces, processes and /proc say: their control characters are escaped. */
void cli_error(const char *cmd, const char *hint, const char *fmt, ...)
{
	char msg[4096], shown[4 * sizeof(msg)];
	va_list ap;

	status_clear(); /* the message has the line to itself */
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "lowkey%s%s: %s\n", cmd ? " " : "", cmd ? cmd : "",
		lk__text_escape(msg, shown, sizeof(shown)));
	if (hint)
		fprintf(stderr, "hint: %s\n", hint);
}

bool cli_wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0)
			return false;
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return true;
	}
	return false;
}

static void usage(FILE *out)
{
	fprintf(out, "usage: lowkey [--version] [--help] COMMAND [ARGS]\n"
		     "\n"
		     "The Linux kernel's low-overhead instrumentation, for your programs.\n"
		     "\n"
		     "Commands:\n");
	if (out != stdout)
		fflush(stdout);
	list_to(out);
	fprintf(out,
		"\nSee 'lowkey help COMMAND' for a command's manual, 'lowkey COMMAND --help' for its options.\n");
}

int main(int argc, char **argv)
{
	const struct cli_command *cmd;

	if (argc < 2) {
		usage(stderr);
		return CLI_EXIT_USAGE;
	}
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
		printf("lowkey %s (library %s)\n", LK_VERSION_STRING, lk_version());
		return CLI_EXIT_OK;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(stdout);
		return CLI_EXIT_OK;
	}
	cmd = cli_find(argv[1]);
	if (!cmd && cli_left_out(argv[1])) {
		cli_error(argv[1], NULL, "not in this build of lowkey: %s", cli_left_out(argv[1]));
		return CLI_EXIT_FAIL;
	}
	if (!cmd) {
		cli_error(NULL, NULL, "'%s' is not a lowkey command. See 'lowkey help'.", argv[1]);
		cli_suggest(argv[1]);
		return CLI_EXIT_USAGE;
	}
	if (!(cmd->flags & CLI_OWN_HELP) && cli_wants_help(argc - 1, argv + 1)) {
		fputs(cmd->usage, stdout);
		return CLI_EXIT_OK;
	}
	return cmd->run(argc - 1, argv + 1);
}
