/* SPDX-License-Identifier: MIT */
/*
 * `lowkey watch`'s view of the target's code: instruction pointers to function+offset and source
 * line, and symbol names to addresses, with libdw (elfutils) from the target's /proc/PID/maps.
 */
#ifndef LOWKEY_CLI_WATCH_SYMBOLS_H
#define LOWKEY_CLI_WATCH_SYMBOLS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct watch_symbols;

struct watch_place {
	const char *function;	/* NULL when no symbol covers the address */
	uint64_t offset;	/* from the function's start */
	const char *module;	/* the object's path, or NULL */
	const char *file;	/* source file, NULL without debug info */
	int line;		/* 0 without debug info */
};

/* Read the process's mappings. Returns NULL (with a message in err) on failure. */
struct watch_symbols *watch_symbols_open(pid_t pid, char *err, size_t errlen);
void watch_symbols_close(struct watch_symbols *s);

/*
 * Where ip is. For the source line, the byte before ip is looked up: a data watchpoint reports
 * the instruction after the access, and ip - 1 lies inside the instruction that made it.
 * The strings stay valid until watch_symbols_close().
 */
void watch_symbols_place(struct watch_symbols *s, uint64_t ip, int line_of_previous,
			 struct watch_place *out);

/*
 * A data (or function) symbol's run-time address and size. Returns 0, -ENOENT when no object has
 * it, -EINVAL for a thread-local variable (each thread has its own address).
 */
int watch_symbols_lookup(struct watch_symbols *s, const char *name, uint64_t *addr, uint64_t *size,
			 const char **module);

#endif
