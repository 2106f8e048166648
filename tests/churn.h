/* SPDX-License-Identifier: MIT */
/*
 * For tests of lowkey reading files that another user changes meanwhile: a peer process that maps
 * an ELF file, then cuts it before its section headers (which every reader looks at) and writes
 * the rest back, over and over. The peer is nobody where the test runs as root, a child of the
 * test's user otherwise; the file must be theirs (lkt_churn_own).
 */
#ifndef LKT_CHURN_H
#define LKT_CHURN_H

#include <elf.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define LKT_NOBODY 65534

/* Give file to the peer's user: 0 or -1. */
static inline int lkt_churn_own(const char *file)
{
	return geteuid() == 0 ? chown(file, LKT_NOBODY, LKT_NOBODY) : 0;
}

/* The peer's loop, counting its rounds in *rounds. Never returns. */
static inline void lkt_churn_loop(const char *file, int ready, volatile unsigned long *rounds)
{
	struct stat st;
	char *copy;
	size_t cut;
	int fd;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (geteuid() == 0 && (setresgid(LKT_NOBODY, LKT_NOBODY, LKT_NOBODY) != 0 ||
			       setresuid(LKT_NOBODY, LKT_NOBODY, LKT_NOBODY) != 0))
		_exit(2);
	fd = open(file, O_RDWR | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0 || st.st_size < 3 * 4096)
		_exit(3);
	copy = malloc((size_t)st.st_size);
	if (!copy || pread(fd, copy, (size_t)st.st_size, 0) != st.st_size ||
	    mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0) == MAP_FAILED)
		_exit(4);
	cut = ((const Elf64_Ehdr *)copy)->e_shoff & ~(size_t)4095;
	if (cut < 4096 || cut >= (size_t)st.st_size || write(ready, "r", 1) != 1)
		_exit(5);
	for (;;) {
		if (ftruncate(fd, (off_t)cut) != 0 ||
		    pwrite(fd, copy + cut, (size_t)st.st_size - cut, (off_t)cut) !=
			    st.st_size - (off_t)cut)
			_exit(6);
		(*rounds)++;
	}
}

/* Start the peer on file; its pid once it churns, or -1. */
static inline pid_t lkt_churn_start(const char *file, volatile unsigned long *rounds)
{
	int p[2];
	pid_t pid;
	char c;

	if (pipe2(p, O_CLOEXEC) != 0)
		return -1;
	pid = fork();
	if (pid == 0)
		lkt_churn_loop(file, p[1], rounds);
	close(p[1]);
	if (pid > 0 && read(p[0], &c, 1) != 1) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		pid = -1;
	}
	close(p[0]);
	return pid;
}

static inline void lkt_churn_stop(pid_t pid)
{
	if (pid > 0 && kill(pid, SIGKILL) == 0)
		waitpid(pid, NULL, 0);
}

#endif
