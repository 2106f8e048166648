// SPDX-License-Identifier: MIT
/*
 * lowkey help [COMMAND], lowkey version
 */
#include <stdio.h>

#include <lowkey/lowkey.h>

#include "cli.h"

static int help_run(int argc, char **argv)
{
	const struct lk_cli_command *cmd;

	if (argc < 2) {
		printf("usage: lowkey [--version] [--help] COMMAND [ARGS]\n\nCommands:\n");
		lk_cli_list();
		printf("\nSee 'lowkey help COMMAND' for a command's options.\n");
		return LK_EXIT_OK;
	}
	cmd = lk_cli_find(argv[1]);
	if (!cmd) {
		lk_cli_error("help", NULL, "no such command '%s'", argv[1]);
		lk_cli_suggest(argv[1]);
		return LK_EXIT_USAGE;
	}
	fputs(cmd->usage, stdout);
	return LK_EXIT_OK;
}

LK_CLI_COMMAND(help_command, "help", "show the commands, or one command's options",
	       "usage: lowkey help [COMMAND]\n"
	       "\n"
	       "Without COMMAND, list lowkey's commands; with it, show that command's options.\n",
	       help_run);

static int version_run(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	printf("lowkey %s (library %s)\n", LK_VERSION_STRING, lk_version());
	return LK_EXIT_OK;
}

LK_CLI_COMMAND(version_command, "version", "print lowkey's version",
	       "usage: lowkey version\n"
	       "       lowkey --version\n",
	       version_run);
