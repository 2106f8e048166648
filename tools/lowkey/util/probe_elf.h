/* SPDX-License-Identifier: MIT */
/*
 * Reading probe sites from an ELF file without running it (`lowkey list BINARY`), and finding
 * whether a program or a running process uses liblowkey (for `lowkey trace`'s messages).
 */
#ifndef LOWKEY_CLI_PROBE_ELF_H
#define LOWKEY_CLI_PROBE_ELF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A file offset for what the file does not hold (NOBITS, outside every PT_LOAD segment). */
#define PROBE_ELF_NOWHERE UINT64_MAX

struct probe_elf_site {
	char *provider, *event, *file, *arg_names;
	char *function; /* "" when the file does not say */
	unsigned int line, kind, nargs;
	uint32_t arg_types; /* 4 bits per argument, as in struct lk_probe_site */
	uint32_t raw_types; /* arg_types as the descriptor holds them */
	uint64_t addr;	    /* the descriptor, as linked */
	uint64_t at;	    /* its offset in the file, or PROBE_ELF_NOWHERE */
	/* The file offsets of its USDT semaphores (one per copy of its code; a scoped span's end's
	 * too), where the file holds them; what a process maps there is the live counter. */
	uint64_t *semaphores;
	unsigned int nsemaphores;
};

/* A USDT probe of another provider: a SystemTap SDT note (<sys/sdt.h>) that is no lowkey site's. */
struct probe_elf_usdt {
	char *provider, *name;
	char *args;	    /* the note's argument spec, as "-4@%eax 8@%rdx"; "" when none */
	uint64_t pc;	    /* the probe point, as the object was linked */
	bool has_semaphore; /* it has a USDT semaphore (a tracer raises it to turn the probe on) */
};

struct probe_elf_sites {
	char *path;
	const char *type; /* "executable", "PIE executable", "shared object" */
	bool has_section; /* the object has a __lk_probe_sites section */
	struct probe_elf_site *sites;
	size_t n;
	unsigned int skipped;	     /* descriptors that are not lowkey probe sites of this ABI */
	struct probe_elf_usdt *usdt; /* in the order of the object's notes */
	size_t nusdt;
};

/*
 * probe_elf_read_sites - the probe sites of the ELF object at path (an executable, PIE or not, or a
 * shared object). Pointers are read as the dynamic loader would set them at a load address of 0:
 * through R_*_RELATIVE and absolute relocations where the object has them, as stored otherwise.
 * The file is read with pread, never mapped (whoever writes it may cut it meanwhile), only the
 * sections looked into. The object's USDT probes of other providers (SDT notes whose semaphore
 * is none of lowkey's sites') come in usdt. Returns 0 (n is 0 when the object has no sites), -ENOEXEC (not an ELF
 * object of this machine, a relocatable .o, or a site section larger than the file), -EAGAIN (the
 * file's size or change time differs after the reading: it changed while being read) or -errno;
 * err says which.
 */
int probe_elf_read_sites(const char *path, struct probe_elf_sites *out, char *err, size_t errlen);
/* probe_elf_read_sites_fd - the same, from the file open at fd (left open); name it by name. */
int probe_elf_read_sites_fd(int fd, const char *name, struct probe_elf_sites *out, char *err,
			    size_t errlen);
void probe_elf_free_sites(struct probe_elf_sites *s);

/*
 * Whether the ELF object at path uses liblowkey: probe sites, liblowkey in DT_NEEDED, or its
 * symbols. Read as probe_elf_read_sites() reads; false for a file that changed while being read.
 */
bool probe_elf_uses_lowkey(const char *path);
bool probe_elf_uses_lowkey_fd(int fd, const char *name); /* fd is left open */

/*
 * open_regular_file - open path for reading if it is a regular file of at most 4 GiB; a FIFO or a
 * device is never opened. Returns the fd, or -errno with err saying why.
 */
int open_regular_file(const char *path, char *err, size_t errlen);

/*
 * open_regular_at - as open_regular_file(), for the file an O_PATH descriptor pfd (left open) is
 * on; path names it in messages.
 */
int open_regular_at(int pfd, const char *path, char *err, size_t errlen);

/*
 * The files process pid has mapped, the main program first, each once: shown, as the process
 * names them; fds, each open for reading as the process sees it (proc_view_open_mapped():
 * /proc/PID/map_files where this user may follow it, else the name in the process's root, never
 * the host's file of that name), or -errno where it cannot be (a file of that name with another
 * build-id than the one mapped, said on stderr once). Returns how many (up to max), or -errno
 * (-ESRCH: no such process, -EACCES: not ours to read). Free them with proc_objects_free().
 */
int proc_objects(pid_t pid, int *fds, char **shown, int max);
void proc_objects_free(int *fds, char **shown, int n);

/* Whether process pid uses liblowkey in any object it has mapped: 1, 0, or -errno. */
int proc_uses_lowkey(pid_t pid);

/*
 * The process's name (/proc/PID/comm), or "?"; its control characters escaped (lk__text_escape):
 * the process chose it. 64 bytes hold any.
 */
void proc_name_of(pid_t pid, char *out, size_t len);

/* Split a probe's argument text ("id, f(a, b)") at its top-level commas; the i-th, trimmed. */
void site_arg_name(const char *names, unsigned int i, char *out, size_t len);

#endif
