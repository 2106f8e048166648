/* SPDX-License-Identifier: MIT */
/*
 * Running a command with one of lowkey's LD_PRELOAD libraries (`lowkey locks`, `lowkey races`):
 * finding the library, finding the command's file, refusing what the loader cannot preload into,
 * and running it as time(1) does.
 */
#ifndef LOWKEY_CLI_PRELOAD_RUN_H
#define LOWKEY_CLI_PRELOAD_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Where a preload library may be, in the order looked at after $env. */
struct preload_lib {
	const char *env;     /* a variable that names it (used alone when set) */
	const char *file;    /* its file name, looked for in BINDIR/../libdir */
	const char *libdir;  /* relative to the prefix */
	const char *build;   /* the build tree's copy */
	const char *install; /* the installed copy */
};

/*
 * The library's path (buf or a constant), or NULL after saying on stderr, as `lowkey NAME`, that
 * none is readable and what to do. Reads the file system.
 */
const char *preload_find(const char *name, const struct preload_lib *lib, char *buf, size_t len);

/*
 * preload_check_command - whether cmd can be run with a preload library: its file found in $PATH
 * as execvp() would (into exe), and dynamically linked. 0, or the exit status after saying why
 * on stderr as `lowkey NAME`: 127 not found, 126 not executable, 1 statically linked (what is
 * lost is said with lost, "its locks cannot be intercepted").
 */
int preload_check_command(const char *name, const char *cmd, const char *lost, char *exe,
			  size_t len);

/*
 * preload_run - run argv with LD_PRELOAD=lib prepended and the variables in env ("NAME=VALUE",
 * NULL-terminated), and wait for it. Meanwhile SIGINT and SIGQUIT are ignored (the terminal sends
 * them to the command too), and SIGTERM and SIGHUP, unless ignored already, are sent on to the
 * command, which is still waited for: a caller killed or hung up on reports and cleans up as for a
 * command killed by that signal. The command starts with the signal dispositions and mask the
 * caller had (not signal_forward_defer()'s). Returns its wait status, or -errno when it could not
 * be started (exec's errno through a pipe), -EINTR when the caller's signal_forward_defer() held a
 * signal back and the command was not started; *child is its pid.
 */
int preload_run(char **argv, const char *lib, char *const env[], pid_t *child);

/*
 * preload_make_dir - a new private directory PREFIX.XXXXXX (mkdtemp, mode 0700) for the files the
 * library and the command share: in /dev/shm, else $TMPDIR, else /tmp. 0, or -errno.
 */
int preload_make_dir(const char *prefix, char *dir, size_t len);

#endif
