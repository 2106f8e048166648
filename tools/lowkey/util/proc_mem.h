/* SPDX-License-Identifier: MIT */
/*
 * The state of a running process's lowkey sites, read from its memory (`lowkey list --pid` of a
 * process without a control socket): whether each site is on, and whether an outside tracer
 * (bpftrace, perf) holds one of its USDT semaphores.
 */
#ifndef LOWKEY_CLI_PROC_MEM_H
#define LOWKEY_CLI_PROC_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/probe_elf.h"

/* A file mapping of the process, from /proc/PID/maps. */
struct proc_mapping {
	uint64_t start, end, offset;
	uint64_t inode;
	unsigned int dev_major, dev_minor;
	bool writable;
	char *path; /* as maps names it */
};

struct proc_mem {
	pid_t pid;
	int fd;	 /* /proc/PID/mem, opened once for every read; -1 when it cannot be */
	int err; /* then why: -errno */
	struct proc_mapping *maps;
	size_t nmaps;
};

/*
 * proc_mem_open - open the memory of process pid for reading (the kernel's ptrace access check:
 * the process's user, or CAP_SYS_PTRACE, and what Yama or a security module allow) and read its
 * file mappings. Its memory not readable is no failure: m->fd is -1, m->err says why (-EACCES,
 * -EPERM, ...), and every state read from it is unknown. Returns 0, or -errno where its maps
 * cannot be read (-ESRCH: no such process, -ENOMEM). Not async-signal-safe (allocates).
 */
int proc_mem_open(struct proc_mem *m, pid_t pid);
void proc_mem_close(struct proc_mem *m);

/*
 * proc_mem_site_state - the state of site s (read by probe_elf_read_sites) of the object the
 * process maps as shown (the name in its maps): *enabled, whether the site records now (its key
 * is on), *tracer, whether one of its semaphores is above zero; each 1, 0, or -1 (unknown: the
 * memory cannot be read, the site's bytes are not in a writable mapping of that object, or the
 * descriptor there is not the one the file describes). Reads a few bytes at offsets the file
 * gives, each checked to lie in the object's writable mappings; follows no pointer of the
 * process's. Cost: a pread of the descriptor and one per semaphore.
 */
void proc_mem_site_state(const struct proc_mem *m, const char *shown,
			 const struct probe_elf_site *s, int *enabled, int *tracer);

/*
 * proc_mem_why - why the process's memory cannot be read (m->fd is -1), and what to do about it,
 * as one sentence into buf ("cannot read its memory: ...; run lowkey as root, or ...").
 */
void proc_mem_why(const struct proc_mem *m, char *buf, size_t len);

#endif
