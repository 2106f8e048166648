/* SPDX-License-Identifier: MIT */
/* Shared by the counter tests: deterministic work, privileges, seccomp. */
#ifndef LK_TEST_COUNTER_HELPERS_H
#define LK_TEST_COUNTER_HELPERS_H

#include <errno.h>
#include <grp.h>
#include <linux/filter.h>
#include <linux/perf_event.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOBODY 65534

/*
 * Exit 77 (CTest: skipped) where perf_event_open() answers ENOSYS and this process has no seccomp
 * filter: the system call does not exist for the program, as under qemu-user, and every test here
 * needs it. (A seccomp filter's ENOSYS is for the tests to explain, not to skip.)
 */
static inline void lkt_perf_require(void)
{
	struct perf_event_attr attr;
	char line[256];
	int fd, seccomp = 0;
	FILE *f;

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_SOFTWARE;
	attr.config = PERF_COUNT_SW_TASK_CLOCK;
	attr.exclude_kernel = 1;
	fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
	if (fd >= 0) {
		close(fd);
		return;
	}
	if (errno != ENOSYS)
		return;
	f = fopen("/proc/self/status", "re");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Seccomp: %d", &seccomp) == 1)
			break;
	if (f)
		fclose(f);
	if (seccomp == 2)
		return;
	printf("SKIPPED: perf_event_open() answers ENOSYS and no seccomp filter is on this process: "
	       "an emulator (qemu-user) runs it without perf events\n");
	exit(77);
}

/* cmocka's skip(), saying why first. */
#define skip_because(...)                                   \
	do {                                                \
		print_message("[  SKIP    ] " __VA_ARGS__); \
		print_message("\n");                        \
		skip();                                     \
	} while (0)

/*
 * Touch n fresh pages once each: n minor page faults (huge pages off, so one fault per page). Not
 * instrumented: a sanitizer's shadow memory would fault too (ASan one page per 8, TSan one per page).
 */
__attribute__((no_sanitize("address", "thread", "undefined"))) static inline int
touch_pages(size_t n)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	volatile char *p =
		mmap(NULL, n * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return -errno;
	madvise((void *)p, n * page, MADV_NOHUGEPAGE);
	for (size_t i = 0; i < n; i++)
		p[i * page] = 1;
	munmap((void *)p, n * page);
	return 0;
}

/*
 * Pin the calling thread to one CPU, so a pipe ping-pong switches contexts every time: the nth
 * CPU it may run on (counting from 0, wrapping), not CPU n, which a container's cpuset may lack.
 */
static inline int pin_to_cpu(int nth)
{
	cpu_set_t allowed, set;
	int count, cpu;

	if (sched_getaffinity(0, sizeof(allowed), &allowed))
		return -errno;
	count = CPU_COUNT(&allowed);
	nth %= count;
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, &allowed) && nth-- == 0)
			break;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set) ? -errno : 0;
}

/* Become nobody with no capabilities (the effective set empties on leaving uid 0). */
static inline int become_nobody(void)
{
	if (geteuid() != 0)
		return 0; /* already unprivileged */
	if (setgroups(0, NULL) || setresgid(NOBODY, NOBODY, NOBODY) ||
	    setresuid(NOBODY, NOBODY, NOBODY))
		return -errno;
	return 0;
}

/* Deny perf_event_open with errno err for the rest of this process and what it execs. */
static inline int deny_perf_event_open(int err)
{
	struct sock_filter filter[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_perf_event_open, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (unsigned)err),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(filter) / sizeof(filter[0]), filter };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -errno;
	return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) ? -errno : 0;
}

static inline int perf_paranoid(void)
{
	FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "re");
	int level = -100;

	if (f) {
		if (fscanf(f, "%d", &level) != 1)
			level = -100;
		fclose(f);
	}
	return level;
}

/* Run fn in a forked child; returns its exit status (fn's return value), or -1 if it crashed. */
static inline int in_child(int (*fn)(void *), void *arg)
{
	int status;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid == 0)
		_exit(fn(arg));
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

#endif
