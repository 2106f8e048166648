// SPDX-License-Identifier: MIT
/* Running a command with a preload library (preload_run.h). */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "builtin.h"
#include "preload_run.h"
#include "signal_forward.h"

static bool readable(const char *path)
{
	return path && access(path, R_OK) == 0;
}

static const char *find_lib(const struct preload_lib *lib, char *buf, size_t len)
{
	const char *env = getenv(lib->env);
	char exe[PATH_MAX];
	ssize_t n;

	if (env)
		return readable(env) ? env : NULL;
	/* installed next to us: BINDIR/../LIBDIR */
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		char *slash;

		exe[n] = 0;
		slash = strrchr(exe, '/');
		if (slash) {
			*slash = 0;
			if (snprintf(buf, len, "%s/../%s/%s", exe, lib->libdir, lib->file) <
				    (int)len &&
			    readable(buf))
				return buf;
		}
	}
	if (readable(lib->build))
		return lib->build;
	if (readable(lib->install))
		return lib->install;
	return NULL;
}

const char *preload_find(const char *name, const struct preload_lib *lib, char *buf, size_t len)
{
	const char *path = find_lib(lib, buf, len);
	char hint[128];

	if (!path) {
		snprintf(hint, sizeof(hint), "reinstall lowkey, or point %s at the library",
			 lib->env);
		if (getenv(lib->env))
			cli_error(name, hint, "cannot find %s at $%s", lib->file, lib->env);
		else
			cli_error(name, hint, "cannot find %s", lib->file);
	}
	return path;
}

/* The file execvp() would run, or NULL. */
static bool which(const char *cmd, char *out, size_t len)
{
	const char *path = getenv("PATH");

	if (strchr(cmd, '/')) {
		snprintf(out, len, "%s", cmd);
		return access(out, X_OK) == 0;
	}
	for (const char *p = path ? path : "/usr/local/bin:/usr/bin:/bin"; p && *p;) {
		const char *colon = strchr(p, ':');
		size_t n = colon ? (size_t)(colon - p) : strlen(p);

		snprintf(out, len, "%.*s/%s", (int)n, n ? p : ".", cmd);
		if (access(out, X_OK) == 0)
			return true;
		p = colon ? colon + 1 : NULL;
	}
	return false;
}

/* Whether path is an ELF executable without a program interpreter: LD_PRELOAD cannot reach it. */
static bool statically_linked(const char *path)
{
	Elf64_Ehdr eh;
	bool is_static = false;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	if (pread(fd, &eh, sizeof(eh), 0) == (ssize_t)sizeof(eh) &&
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 && eh.e_ident[EI_CLASS] == ELFCLASS64 &&
	    eh.e_phentsize == sizeof(Elf64_Phdr)) {
		is_static = true;
		for (unsigned int i = 0; i < eh.e_phnum; i++) {
			Elf64_Phdr ph;

			if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))) !=
			    (ssize_t)sizeof(ph))
				break;
			if (ph.p_type == PT_INTERP)
				is_static = false;
		}
	}
	close(fd);
	return is_static;
}

int preload_check_command(const char *name, const char *cmd, const char *lost, char *exe,
			  size_t len)
{
	if (!which(cmd, exe, len)) {
		if (strchr(cmd, '/') && access(cmd, F_OK) == 0) {
			cli_error(name, NULL, "%s: cannot execute: %s", cmd, strerror(EACCES));
			return 126; /* as a shell, and lowkey stat and trace */
		}
		cli_error(name, "check the command's name and $PATH", "%s: command not found", cmd);
		return 127;
	}
	if (statically_linked(exe)) {
		cli_error(name, "rebuild it without -static; LD_PRELOAD needs the dynamic loader",
			  "'%s' is statically linked: %s", exe, lost);
		return CLI_EXIT_FAIL;
	}
	return 0;
}

static void child_environment(const char *lib, char *const env[])
{
	const char *old = getenv("LD_PRELOAD");
	char *preload;

	if (old && *old) {
		if (asprintf(&preload, "%s:%s", lib, old) < 0)
			_exit(127);
		setenv("LD_PRELOAD", preload, 1);
	} else {
		setenv("LD_PRELOAD", lib, 1);
	}
	for (size_t i = 0; env && env[i]; i++)
		putenv(env[i]);
}

int preload_run(char **argv, const char *lib, char *const env[], pid_t *child)
{
	int pipefd[2], status = 0, exec_errno = 0;
	struct signal_forward sf;
	pid_t pid;

	if (pipe2(pipefd, O_CLOEXEC) != 0)
		return -errno;
	if (!signal_forward_start(&sf)) {
		close(pipefd[0]);
		close(pipefd[1]);
		return -EINTR;
	}
	pid = fork();
	if (pid < 0) {
		exec_errno = errno;
		signal_forward_end(&sf);
		close(pipefd[0]);
		close(pipefd[1]);
		return -exec_errno;
	}
	if (pid == 0) {
		close(pipefd[0]);
		signal_forward_child(&sf);
		child_environment(lib, env);
		execvp(argv[0], argv);
		exec_errno = errno;
		if (write(pipefd[1], &exec_errno, sizeof(exec_errno)) < 0)
			_exit(127);
		_exit(127);
	}
	*child = pid;
	signal_forward_to(&sf, pid);
	close(pipefd[1]);
	if (read(pipefd[0], &exec_errno, sizeof(exec_errno)) != (ssize_t)sizeof(exec_errno))
		exec_errno = 0;
	close(pipefd[0]);
	signal_forward_wait(pid, true, &status);
	signal_forward_end(&sf);
	return exec_errno ? -exec_errno : status;
}

int preload_make_dir(const char *prefix, char *dir, size_t len)
{
	const char *bases[] = { "/dev/shm", getenv("TMPDIR"), "/tmp" };

	for (size_t i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
		if (!bases[i] || access(bases[i], W_OK) != 0)
			continue;
		snprintf(dir, len, "%s/%s.XXXXXX", bases[i], prefix);
		if (mkdtemp(dir))
			return 0;
	}
	return -errno;
}
