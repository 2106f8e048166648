// SPDX-License-Identifier: MIT
/*
 * lowkey: dispatch to a subcommand.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <lowkey/lowkey.h>

#include "cli.h"
#include "internal/edit_distance.h"
#include "internal/utf8.h"
#include "status.h"

extern const struct lk_cli_command __start_lk_cli_commands[];
extern const struct lk_cli_command __stop_lk_cli_commands[];

const struct lk_cli_command *lk_cli_find(const char *name)
{
	for (const struct lk_cli_command *c = __start_lk_cli_commands; c < __stop_lk_cli_commands; c++)
		if (strcmp(c->name, name) == 0)
			return c;
	return NULL;
}

void lk_cli_list(void)
{
	/* Sorted by name, without allocating: pick the next name up each round. */
	const char *last = "";

	for (;;) {
		const struct lk_cli_command *next = NULL;

		for (const struct lk_cli_command *c = __start_lk_cli_commands; c < __stop_lk_cli_commands; c++)
			if (strcmp(c->name, last) > 0 && (!next || strcmp(c->name, next->name) < 0))
				next = c;
		if (!next)
			return;
		printf("   %-10s %s\n", next->name, next->summary);
		last = next->name;
	}
}

void lk_cli_suggest(const char *name)
{
	for (const struct lk_cli_command *c = __start_lk_cli_commands; c < __stop_lk_cli_commands; c++)
		if (lk__edit_distance(name, c->name, false) <= 2 || strncmp(name, c->name, strlen(name)) == 0)
			fprintf(stderr, "hint: did you mean 'lowkey %s'?\n", c->name);
}

/* Messages quote what traces, processes and /proc say: their control characters are escaped. */
void lk_cli_error(const char *cmd, const char *hint, const char *fmt, ...)
{
	char msg[4096], shown[4 * sizeof(msg)];
	va_list ap;

	lk_status_clear();	/* the message has the line to itself */
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "lowkey%s%s: %s\n", cmd ? " " : "", cmd ? cmd : "", lk__text_escape(msg, shown, sizeof(shown)));
	if (hint)
		fprintf(stderr, "hint: %s\n", hint);
}

bool lk_cli_wants_help(int argc, char **argv)
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
	fprintf(out,
		"usage: lowkey [--version] [--help] COMMAND [ARGS]\n"
		"\n"
		"The Linux kernel's low-overhead instrumentation, for your programs.\n"
		"\n"
		"Commands:\n");
	if (out == stdout) {
		lk_cli_list();
	} else {
		fflush(stdout);
		for (const struct lk_cli_command *c = __start_lk_cli_commands; c < __stop_lk_cli_commands; c++)
			fprintf(out, "   %-10s %s\n", c->name, c->summary);
	}
	fprintf(out, "\nSee 'lowkey help COMMAND' for a command's manual, 'lowkey COMMAND --help' for its options.\n");
}

int main(int argc, char **argv)
{
	const struct lk_cli_command *cmd;

	if (argc < 2) {
		usage(stderr);
		return LK_EXIT_USAGE;
	}
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
		printf("lowkey %s (library %s)\n", LK_VERSION_STRING, lk_version());
		return LK_EXIT_OK;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(stdout);
		return LK_EXIT_OK;
	}
	cmd = lk_cli_find(argv[1]);
	if (!cmd) {
		lk_cli_error(NULL, NULL, "'%s' is not a lowkey command. See 'lowkey help'.", argv[1]);
		lk_cli_suggest(argv[1]);
		return LK_EXIT_USAGE;
	}
	if (!(cmd->flags & LK_CLI_OWN_HELP) && lk_cli_wants_help(argc - 1, argv + 1)) {
		fputs(cmd->usage, stdout);
		return LK_EXIT_OK;
	}
	return cmd->run(argc - 1, argv + 1);
}
