/* SPDX-License-Identifier: MIT */
/*
 * Naming code with libdw (elfutils), for `lowkey watch`, `lowkey locks` and `lowkey races`: an
 * address in a live process, or in objects loaded at known bases (a process that has exited), to
 * its object, function and offset, and source file:line. C++ names are demangled (GCC's and
 * Clang's manglings are the same Itanium ABI), with libstdc++'s __cxa_demangle.
 *
 * The objects may be another user's, who may cut them while lowkey reads: libdwfl maps what it
 * opens itself, and a file cut under a mapping kills the reader with SIGBUS. So every object is
 * opened here and read with pread (libelf's ELF_C_READ), never mapped, and separate debug files,
 * which libdwfl opens and maps itself, are looked for only where no other user can change them,
 * or copied first into memory only lowkey holds.
 *
 * A live process's files are read as it sees them (proc_files.h): a process in a container is read
 * from its own root, never from the host's file of the same name, and its debug files are looked
 * for in its root first.
 *
 * A symbolizer is one thread's. None of these functions is async-signal-safe (they allocate).
 */
#ifndef LOWKEY_CLI_SYMBOLIZE_H
#define LOWKEY_CLI_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct symbolizer;

/* Where an address is; a field libdw does not know is NULL or 0. */
struct symbol_place {
	const char *function; /* NULL when no symbol covers the address; demangled */
	const char *mangled;  /* the symbol as the object names it (function when not mangled) */
	uint64_t offset;      /* from the function's start */
	const char *module;   /* the object's name (a path for a process), or NULL */
	const char *file;     /* source file, NULL without debug info */
	int line;	      /* 0 without debug info */
};

/*
 * symbolizer_open_process - the code mapped in process pid (/proc/PID/maps), every object's ELF
 * and DWARF opened now, so that addresses still resolve after the process exits. Objects mapped
 * later (dlopen) are read when an address falls in none known. An object whose file at its name
 * is another build than the one mapped is left out, said on stderr in one line. Cost: reads every
 * mapped object's headers and symbol tables (and /proc/PID/maps once per object). Returns NULL
 * with the reason in err: the process does not exist, its mappings cannot be read (another user's
 * without the right to trace it), or no memory.
 */
struct symbolizer *symbolizer_open_process(pid_t pid, char *err, size_t errlen);

/* An object file and its load bias (ELF address + bias = run-time address). */
struct symbol_object {
	const char *path; /* absolute; others are left out */
	uint64_t bias;
	const uint8_t *build_id; /* the build-id of the object loaded, or NULL: not known */
	size_t build_id_len;
	bool other_build; /* set when the file at path has another build-id: it is left out */
};

/*
 * symbolizer_open_objects - the code of objects loaded at known bases, for a process that may be
 * gone. An object that cannot be read (missing, not ELF), or whose build-id is known and is not
 * its file's (other_build set), is left out: its addresses resolve to nothing. Returns NULL only
 * when libdw cannot start or there is no memory.
 */
struct symbolizer *symbolizer_open_objects(struct symbol_object *objects, size_t n);

/* Frees s and everything its places point into. NULL is ignored. */
void symbolizer_close(struct symbolizer *s);

/*
 * symbolizer_place - where addr is. With line_before, the source line is that of addr - 1: a data
 * watchpoint reports the instruction after the access, and the byte before lies inside the one
 * that made it (as does a return address: the call is before it). The strings stay valid until
 * symbolizer_close(). All fields zero when no object covers addr. Cost: a demangling (malloc) the
 * first time a symbol is named, a hash look-up after.
 */
void symbolizer_place(struct symbolizer *s, uint64_t addr, bool line_before,
		      struct symbol_place *out);

/*
 * symbolizer_object - the data symbol (a global or static variable) whose extent holds addr,
 * demangled, and addr's offset in it; NULL when none does (heap or stack memory, a stripped
 * object). Valid until symbolizer_close(). Cost: as symbolizer_place().
 */
const char *symbolizer_object(struct symbolizer *s, uint64_t addr, uint64_t *offset);

/*
 * symbolizer_frames - where addr is, with the functions inlined there: out[0] the innermost, named
 * as symbolizer_place() names it but for its function, which is the inlined one's; each next entry
 * the function it was inlined into, at the line of that call; the last the function the symbol
 * table names (with its offset). Up to max entries (max >= 1); how many: 1 where the debug
 * information shows nothing inlined at addr, or has no DWARF. The entries before the last have
 * offset 0. Strings as symbolizer_place()'s. Cost: the compile unit's scopes walked once a call.
 */
size_t symbolizer_frames(struct symbolizer *s, uint64_t addr, bool line_before,
			 struct symbol_place *out, size_t max);

/*
 * symbolizer_demangle - name as C++ source writes it ("Counter::bump()"), from its Itanium ABI
 * mangling (_Z...), or name itself if it is not one (C, or a mangling not understood). The string
 * stays valid until symbolizer_close(); name itself when there is no memory.
 */
const char *symbolizer_demangle(struct symbolizer *s, const char *name);

/*
 * symbolizer_dwarf - the DWARF of the object that covers addr: its own, or its separate debug
 * file's, found as symbolizer_place() finds it (by build-id, or by debuglink beside a file no
 * other user can change). *bias is what to add to the DWARF's addresses to get run-time ones.
 * NULL when no object covers addr or none has DWARF for it. Owned by s: valid until
 * symbolizer_close().
 */
struct Dwarf *symbolizer_dwarf(struct symbolizer *s, uint64_t addr, uint64_t *bias);

/*
 * symbolizer_lookup - a data (or function) symbol's run-time address and size, and its object's
 * name (valid until symbolizer_close()). Returns 0, -ENOENT when no object defines it, -EINVAL
 * for a thread-local variable (each thread has its own address).
 */
int symbolizer_lookup(struct symbolizer *s, const char *name, uint64_t *addr, uint64_t *size,
		      const char **module);

#endif
