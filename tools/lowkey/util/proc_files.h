/* SPDX-License-Identifier: MIT */
/*
 * The files of a running process as it sees them, for `lowkey list --pid` and `lowkey watch -p`.
 *
 * A process in a container names its files in its own root and mount namespace: the host's file of
 * the same name is another file, or another build of it. So a file a process maps is read through
 * /proc/PID/map_files (the very inode mapped; root may follow those links) or else by its name
 * inside /proc/PID/root, resolved with openat2(RESOLVE_IN_ROOT) so that no symbolic link inside the
 * container reaches a host file. A file found by name is checked to be the one mapped: the same
 * inode, or the same build-id as the one in the process's memory (/proc/PID/mem) where that can
 * be read.
 *
 * None of these functions is async-signal-safe (they allocate or use stdio).
 */
#ifndef LOWKEY_CLI_PROC_FILES_H
#define LOWKEY_CLI_PROC_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define BUILD_ID_MAX 64 /* longer than any build-id a linker writes (20 bytes for SHA-1) */

/* One line of /proc/PID/maps that maps a file. */
struct proc_mapping {
	uint64_t start, end, offset;
	dev_t dev;
	ino_t ino;
	char name[4096]; /* as the process names it; " (deleted)" when it was removed */
};

/* A process's root, to open the files it names. */
struct proc_view {
	pid_t pid;
	int root;	  /* /proc/PID/root opened O_PATH; -1 when this user may not */
	bool same_mounts; /* its root and mount namespace are lowkey's: a name means the same here */
};

/*
 * proc_view_open - the root of process pid. Cost: two opens and two stats. Returns 0 (v->root is
 * -1 when this user may not look into it: another user's process) or -ESRCH (no such process).
 */
int proc_view_open(pid_t pid, struct proc_view *v);
void proc_view_close(struct proc_view *v);

/*
 * proc_view_open_file - open name (absolute, as the process names it) for reading, resolved inside
 * the process's root: "..", absolute symbolic links and magic links stay in it (openat2 with
 * RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS). Only a regular file of at most 4 GiB is opened
 * (open_regular_file). Returns the fd, or -errno with err saying why: -EACCES (the root cannot be
 * looked into), -ENOSYS (a kernel without openat2, before Linux 5.6, for a process in another
 * root or mount namespace; in lowkey's own, name is opened as it is), or the open's error.
 */
int proc_view_open_file(const struct proc_view *v, const char *name, char *err, size_t errlen);

/* proc_mapping_parse - a line of /proc/PID/maps into m: false for one that maps no file by path. */
bool proc_mapping_parse(const char *line, struct proc_mapping *m);

/*
 * proc_mapping_at - the mapping of process pid that starts at start, from /proc/PID/maps. Returns
 * 0, -ENOENT (no file mapped there), or -errno from reading maps.
 */
int proc_mapping_at(pid_t pid, uint64_t start, struct proc_mapping *m);

/*
 * proc_view_open_mapped - open the file of mapping m (one that maps the file from offset 0, where
 * its ELF header is): /proc/PID/map_files where this user may follow it, else m->name in the
 * process's root, used only if it is the inode mapped or has the build-id the process has in
 * memory (where /proc/PID/mem can be read; else it is used unchecked). Returns the fd, or -errno
 * with err saying why: -ESTALE when the file at that name has another build-id than the one
 * mapped (another build: not read), or proc_view_open_file()'s errors.
 */
int proc_view_open_mapped(const struct proc_view *v, const struct proc_mapping *m, char *err,
			  size_t errlen);

/*
 * elf_build_id_of_file - the build-id (the NT_GNU_BUILD_ID note) of the 64-bit ELF file open at
 * fd, from its note sections, read with pread; into id. Returns its length, 0 when the file has
 * none, or -errno (-ENOEXEC: not a 64-bit ELF file).
 */
int elf_build_id_of_file(int fd, uint8_t id[BUILD_ID_MAX]);

/*
 * proc_mapped_build_id - the build-id of the ELF object process pid maps at start (the mapping of
 * its first page), read from its memory through /proc/PID/mem (ptrace access to the process).
 * Returns its length, 0 when it has none, or -errno (-EACCES, -EPERM: not readable).
 */
int proc_mapped_build_id(pid_t pid, uint64_t start, uint8_t id[BUILD_ID_MAX]);

#endif
