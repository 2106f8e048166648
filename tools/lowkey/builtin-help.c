// SPDX-License-Identifier: MIT
/*
 * lowkey help [COMMAND], lowkey version
 *
 * `lowkey help COMMAND` opens the manual page lowkey-COMMAND(1) with man(1), as `perf help` does,
 * and prints the command's built-in help where man or the page is missing.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lowkey/lowkey.h>

#include "builtin.h"

/* Where `cmake --install` puts the binary and the pages, relative to the prefix (CMakeLists.txt). */
#ifndef LK_INSTALL_BINDIR
#define LK_INSTALL_BINDIR "bin"
#endif
#ifndef LK_INSTALL_MANDIR
#define LK_INSTALL_MANDIR "share/man"
#endif

/*
 * The manual directory of the installation this binary belongs to, when it holds page: the
 * binary's directory less LK_INSTALL_BINDIR's components, then LK_INSTALL_MANDIR. false for a
 * binary in a build tree, or one installed without pages.
 */
static bool own_mandir(const char *page, char *dir, size_t size)
{
	static const char bindir[] = LK_INSTALL_BINDIR;
	char exe[PATH_MAX], path[PATH_MAX + 256];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	struct stat st;
	int up = 1; /* the binary's own name */

	if (len <= 0)
		return false;
	exe[len] = '\0';
	for (size_t i = 0; bindir[i]; i++)
		up += bindir[i] != '/' && (i == 0 || bindir[i - 1] == '/');
	while (up-- > 0) {
		char *slash = strrchr(exe, '/');

		if (!slash)
			return false;
		*slash = '\0';
	}
	if (LK_INSTALL_MANDIR[0] == '/')
		snprintf(dir, size, "%s", LK_INSTALL_MANDIR);
	else if ((size_t)snprintf(dir, size, "%s/%s", exe, LK_INSTALL_MANDIR) >= size)
		return false;
	if (snprintf(path, sizeof(path), "%s/man1/%s.1", dir, page) < (int)sizeof(path) &&
	    stat(path, &st) == 0)
		return true;
	return snprintf(path, sizeof(path), "%s/man1/%s.1.gz", dir, page) < (int)sizeof(path) &&
	       stat(path, &st) == 0;
}

/* Run man with argv, quiet when asked; its exit status, or -1 when it could not be run. */
static int run_man(char *const argv[], bool quiet)
{
	pid_t pid;
	int status;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		if (quiet) {
			int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

			if (null >= 0) {
				dup2(null, STDOUT_FILENO);
				dup2(null, STDERR_FILENO);
			}
		}
		execvp(argv[0], argv);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/*
 * Show lowkey-NAME(1) with man: 0, or -1 when man or the page is missing (nothing printed then).
 * Without a terminal on both ends no pager runs: a pager waiting for keys on a pipe would hang a
 * script that asked for help.
 */
static int open_manual(const char *name)
{
	char page[128], dir[PATH_MAX], manpath[2 * PATH_MAX];
	const char *old = getenv("MANPATH");

	snprintf(page, sizeof(page), "lowkey-%s", name);
	if (own_mandir(page, dir, sizeof(dir))) {
		/* A trailing ':' keeps man's own path after ours (manpath(1)). */
		snprintf(manpath, sizeof(manpath), "%s:%s", dir, old ? old : "");
		setenv("MANPATH", manpath, 1);
	}
	if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
		setenv("MANPAGER", "cat", 1);
		setenv("PAGER", "cat", 1);
	}
	if (run_man((char *const[]){ "man", "-w", page, NULL }, true) != 0)
		return -1;
	return run_man((char *const[]){ "man", page, NULL }, false) == 0 ? 0 : -1;
}

static void list_commands(void)
{
	printf("usage: lowkey [--version] [--help] COMMAND [ARGS]\n\nCommands:\n");
	cli_list();
	fputs(cli_conventions, stdout);
	printf("\nSee 'lowkey help COMMAND' for a command's manual, 'lowkey COMMAND --help' for its options.\n");
}

static const char help_usage[] =
	"usage: lowkey help [-t|--text] [COMMAND]\n"
	"\n"
	"Without COMMAND, list lowkey's commands. With it, open the command's manual page,\n"
	"lowkey-COMMAND(1), with man (no pager unless standard input and output are terminals), or\n"
	"print its built-in help where man or the page is missing.\n"
	"\n"
	"  -t, --text   print the built-in help, as `lowkey COMMAND --help` does\n";

static int help_run(int argc, char **argv)
{
	static const struct option options[] = {
		{ "text", no_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 },
	};
	const struct cli_command *cmd;
	bool text = false;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+t", options, NULL)) != -1) {
		if (c != 't') {
			fputs(help_usage, stderr);
			return CLI_EXIT_USAGE;
		}
		text = true;
	}
	if (optind == argc) {
		list_commands();
		return CLI_EXIT_OK;
	}
	cmd = cli_find(argv[optind]);
	if (!cmd && cli_left_out(argv[optind])) {
		cli_error("help", NULL, "'%s' is not in this build of lowkey: %s", argv[optind],
			  cli_left_out(argv[optind]));
		return CLI_EXIT_FAIL;
	}
	if (!cmd) {
		cli_error("help", NULL, "no such command '%s'", argv[optind]);
		cli_suggest(argv[optind]);
		return CLI_EXIT_USAGE;
	}
	if (text || open_manual(cmd->name) != 0)
		fputs(cmd->usage, stdout);
	return CLI_EXIT_OK;
}

const struct cli_command cmd_help = {
	.name = "help",
	.summary = "show the commands, or one command's manual",
	.usage = help_usage,
	.run = help_run,
};

static int version_run(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	printf("lowkey %s (library %s)\n", LK_VERSION_STRING, lk_version());
	return CLI_EXIT_OK;
}

const struct cli_command cmd_version = {
	.name = "version",
	.summary = "print lowkey's version",
	.usage = "usage: lowkey version\n"
		 "       lowkey --version\n",
	.run = version_run,
};
