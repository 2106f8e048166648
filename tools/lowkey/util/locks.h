/* SPDX-License-Identifier: MIT */
/*
 * lowkey locks: internal to the command. builtin-locks.c runs the command with
 * liblowkey-locks.so; locks_read.c reads the files it leaves and names the call sites (libdw);
 * locks_print.c prints the report as text and JSON, locks_html.c as a page.
 */
#ifndef LOWKEY_CLI_LOCKS_H
#define LOWKEY_CLI_LOCKS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "internal/lock_file.h"

struct lks_site {
	uint64_t address; /* the return address; 0: none */
	uint64_t offset;  /* in its object */
	char module[64];
	char function[160];
	char file[128];
	int line;
};

struct lks_row {
	const struct lkl_entry *e;
	enum lkl_kind kind;
	uint64_t address;
	bool destroyed;
	uint64_t acquisitions; /* all kinds of acquisition */
	uint64_t wait_ns, wait_max_ns, wait_mean_ns;
	uint64_t hold_ns, hold_max_ns, hold_mean_ns;
	uint64_t read_hold_ns, read_hold_max_ns, read_hold_mean_ns;
	struct lks_site site, first_site;
};

/* How a process image ended, as far as its file and the command's wait status tell. */
enum lks_ending {
	LKS_ENDED_EXIT,	      /* exit() or a return from main: the library's destructor ran */
	LKS_ENDED_EXEC,	      /* it exec()ed: a later file has its pid */
	LKS_ENDED_UNDER_EXIT, /* _exit(): the command's own process, which exited without destructors */
	LKS_ENDED_SIGNAL,     /* the command's own process, killed */
	LKS_ENDED_UNKNOWN, /* another process without the mark: _exit() or a signal */
};

struct lks_proc {
	char path[PATH_MAX];
	void *data;	  /* the file, read: its holes are zeros */
	uint8_t *present; /* per 4 KiB of it: 1 where data was read, 0 in a hole */
	size_t size;
	const struct lkl_header *h;
	const struct lkl_entry *entries;
	const struct lkl_module *modules;
	uint32_t nmodules;
	struct lks_row *rows;
	size_t nrows;
	uint64_t nlocks; /* rows, and destroyed locks folded into the header */
	uint64_t duration_ns;
	uint64_t acquisitions, contended, wait_ns;
	enum lks_ending ended;
};

/* The orders the rows can be listed in, each greatest first (--sort). */
enum lks_sort {
	LKS_SORT_WAIT,	    /* total time waited: the default */
	LKS_SORT_WAIT_MAX,  /* longest single wait */
	LKS_SORT_ACQUIRED,  /* acquisitions */
	LKS_SORT_CONTENDED, /* contended acquisitions */
	LKS_SORT_OWNERS,    /* owner changes */
	LKS_SORT_HOLD,	    /* total time held */
};

/* CLOCK_MONOTONIC and the lock counter at one moment, and how wide the moment is (ticks). */
struct lks_clock {
	uint64_t ns, ticks, width;
};

/* ---- locks_read.c ---- */

/* len bytes of fd from offset at, through EINTR and short reads: the count (less at the end), -1. */
ssize_t lks_pread_all(int fd, void *buf, size_t len, uint64_t at);

/* The counter at the middle of the narrowest of five brackets around a CLOCK_MONOTONIC read. */
struct lks_clock lks_clock_now(void);

/* Why the file's header h (size bytes of file) is not one to read, or NULL when it is. */
const char *lks_validate(const struct lkl_header *h, size_t size);

/* A lock that was taken, or tried, or posted: one to list. */
bool lks_entry_used(const struct lkl_entry *e);

/* The figures of entry e in ns (tpn: ticks per ns) into r; its call sites are left alone. */
void lks_row_of(const struct lkl_entry *e, double tpn, struct lks_row *r);

struct symbolizer;

/*
 * The call site at return address ra into out: object and offset from p's table of objects
 * (p->h, p->modules, p->nmodules), function and file:line from sym where it knows them (sym may be
 * NULL).
 */
void lks_name_site(const struct lks_proc *p, struct symbolizer *sym, uint64_t ra,
		   struct lks_site *out);

/* The key called name ("wait", "acquired", ...); false if there is none. */
bool lks_sort_parse(const char *name, enum lks_sort *out);
const char *lks_sort_name(enum lks_sort key);

/* Every key's name, separated by ", ", for messages. */
extern const char lks_sort_names[];

/*
 * Every valid file in dir, loaded in the order the processes started (a file that is not valid is
 * skipped with a message); the files are removed as they are read. 0 or -errno (dir unreadable).
 */
int lks_load_dir(const char *dir, struct lks_proc **out, size_t *count);

/* Free what lks_load_dir() and lks_build_rows() allocated for p. */
void lks_free_proc(struct lks_proc *p);

/* How process p ended, among all n, the command's own process being command, its wait status status. */
enum lks_ending lks_ending_of(const struct lks_proc *p, const struct lks_proc *all, size_t n,
			      pid_t command, int status);

/*
 * p's rows, sorted by key, with their figures in ns (tpn: ticks per ns) and call sites named;
 * end_ns: when the command ended, for a process that did not exit. 0 or -ENOMEM.
 */
int lks_build_rows(struct lks_proc *p, double tpn, uint64_t end_ns, enum lks_sort key);

/* ---- locks_print.c ---- */

/* A call site as the report prints it ("worker (server.c:88)", "libfoo.so+0x1a2b"), escaped. */
const char *lks_site_string(const struct lks_site *site, char *buf, size_t len);

/* "mutex", "rwlock", "spinlock" or "semaphore". */
const char *lks_kind_name(enum lkl_kind k);

/* How the report was asked for. */
struct lks_view {
	long top; /* rows listed per process; 0: every one */
	enum lks_sort sort;
	uint64_t counter_hz; /* the lock counter's rate, as every figure used it */
};

/* p's report as text: its first rows, and how many it leaves out. */
void lks_print_text(FILE *out, const struct lks_proc *p, const struct lks_view *v);

/* The report of every process as one JSON document, with the command's name and wait status. */
void lks_write_json(FILE *out, const struct lks_proc *procs, size_t n, const struct lks_view *v,
		    int status, const char *cmd);

#endif
