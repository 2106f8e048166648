/* SPDX-License-Identifier: MIT */
/*
 * Handing libdwfl the files of processes that may be other users' (`lowkey watch`, `lowkey locks`).
 * libdwfl maps every file it opens itself, and a file its owner cuts meanwhile kills the reader
 * with SIGBUS. So the objects are opened here and read with pread (libelf's ELF_C_READ), and
 * separate debug files, which libdwfl opens and maps itself, are looked for only where no other
 * user can change them.
 */
#ifndef LOWKEY_CLI_DWFL_FILES_H
#define LOWKEY_CLI_DWFL_FILES_H

#include <elfutils/libdwfl.h>
#include <stdbool.h>
#include <sys/types.h>

/*
 * The ELF file at path (a regular file: no FIFO or device is opened), read with pread as libdw
 * asks, never mapped. Its descriptor in *fd: the Elf reads through it, close it after elf_end().
 * NULL if it cannot be opened or is not ELF.
 */
Elf *lk_dwfl_open_elf(const char *path, int *fd);

/*
 * Whether no user but root and this one can change the file at path or put another in its place:
 * path is canonical (no symbolic link, no . or ..), and it and every directory above it belong to
 * root or to this user and are writable by no group and no other user.
 */
bool lk_dwfl_trusted(const char *path);

/*
 * For a Dwfl_Callbacks.find_elf over process pid's mappings (dwfl_linux_proc_report): the file
 * mapped at base, through /proc/PID/map_files where this user may (the very file mapped), else by
 * its name; read as lk_dwfl_open_elf() reads. Names that are no path ([vdso]) are read from the
 * process's memory by libdwfl.
 */
int lk_dwfl_proc_find_elf(pid_t pid, Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base,
			  char **file_name, Elf **elfp);

/*
 * A Dwfl_Callbacks.find_debuginfo: by build ID in the system's debug directories for any object;
 * libdwfl's whole search (beside the object, its .debug, /usr/lib/debug, debuginfod) only for an
 * object lk_dwfl_trusted() trusts, as the files found there could otherwise be another user's.
 */
int lk_dwfl_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
			   const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
			   char **debuginfo_file_name);

#endif
