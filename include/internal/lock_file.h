/* SPDX-License-Identifier: MIT */
/*
 * Internal API: the file liblowkey-locks.so writes for each profiled process, and `lowkey locks` reads.
 *
 * One file per process image, "<pid>-<n>.lkl" in $LOWKEY_LOCKS_DIR, mapped MAP_SHARED: the
 * figures are in the file as they are counted, so they survive the process dying by a signal,
 * _exit() or exec() without a word. Layout: the header page, `capacity` entries (an open-addressing
 * hash table keyed by lock address), then the table of loaded objects used to symbolize call
 * sites. All integers are native-endian; ticks are the CPU's time-stamp counter unless
 * LKL_F_TICKS_NS says nanoseconds.
 */
#ifndef LK_LOCK_PRELOAD_FORMAT_H
#define LK_LOCK_PRELOAD_FORMAT_H

#include <stdint.h>

#define LKL_MAGIC 0x31736b636f6c6b6cull /* "lklocks1" */
#define LKL_VERSION 2u
#define LKL_HEADER_SIZE 4096u
#define LKL_ENTRY_SIZE 192u
#define LKL_MAX_MODULES 512u
#define LKL_PATH_MAX 240u
#define LKL_BUILD_ID_MAX 40u /* SHA-1 build-ids are 20 bytes; longer ones are left out */

enum lkl_kind {
	LKL_MUTEX = 0,
	LKL_RWLOCK = 1,
	LKL_SPIN = 2,
	LKL_SEM = 3,
};

#define LKL_KIND_MASK 3ull
#define LKL_RETIRED \
	(1ull << 63) /* the lock was destroyed; its figures stay, in an entry of their own */

/* header flags */
#define LKL_F_EXITED 0x1u   /* the process ran its exit handlers */
#define LKL_F_TICKS_NS 0x2u /* ticks are nanoseconds (no usable TSC) */
#define LKL_F_FULL 0x4u	    /* the table filled up: see untracked */

struct lkl_module {
	uint64_t start, end;   /* mapped address range */
	uint64_t bias;	       /* load bias (ELF addresses + bias = run-time addresses) */
	uint32_t build_id_len; /* 0: no build-id note (or a longer one than LKL_BUILD_ID_MAX) */
	uint8_t build_id[LKL_BUILD_ID_MAX]; /* as loaded: the file at path may be another build by now */
	char path[LKL_PATH_MAX];
};

struct lkl_header {
	uint64_t magic;
	uint32_t version;
	uint32_t header_size;
	uint32_t entry_size;
	uint32_t capacity; /* entries, a power of two */
	uint32_t pid, ppid;
	uint32_t flags;
	uint32_t hold_period;		/* one exclusive hold in hold_period is timed */
	uint64_t start_ticks, start_ns; /* CLOCK_MONOTONIC ns */
	uint64_t end_ticks, end_ns;	/* at exit, if LKL_F_EXITED */
	uint64_t used;			/* entries taken */
	uint64_t untracked;		/* acquisitions of locks the full table had no room for */
	uint64_t folded_locks;		/* destroyed locks never contended, the table half full, */
	uint64_t folded_acquisitions;	/* and their acquisitions: counted here, entry reused */
	uint32_t nmodules;
	uint32_t cpus;		 /* online CPUs at start */
	uint64_t modules_offset; /* from the start of the file */
	char comm[256];		 /* argv[0] */
	char exe[LKL_PATH_MAX];	 /* /proc/self/exe */
};

struct lkl_entry {
	/* written on every acquisition and release */
	uint64_t key;	/* lock address | kind; 0 free; | LKL_RETIRED once destroyed */
	uint64_t owner; /* thread pointer of the exclusive holder; 0 none */
	uint64_t last_owner;
	uint32_t depth;	       /* re-locks of a recursive mutex by its owner */
	uint32_t read_timing;  /* shared holds being timed now */
	uint64_t acquisitions; /* exclusive acquisitions; sem_wait/trywait successes */
	uint64_t contended;    /* acquisitions that had to wait */
	uint64_t wait_total;   /* ticks */
	uint64_t hold_start;   /* ticks, while the current exclusive hold is timed */
	/* second line */
	uint64_t wait_max;
	uint64_t hold_samples, hold_total, hold_max;
	uint64_t owner_changes;
	uint64_t read_acquisitions;
	uint64_t cond_reacquires; /* re-acquisitions inside pthread_cond_*wait */
	uint64_t site;		  /* return address of the first contended acquisition */
	/* third line */
	uint64_t first_site; /* return address of the first acquisition */
	uint64_t try_fails;  /* trylock/trywait calls that found it taken */
	uint64_t posts;	     /* sem_post */
	uint64_t read_hold_samples, read_hold_total, read_hold_max;
	uint64_t spare[2];
};

_Static_assert(sizeof(struct lkl_entry) == LKL_ENTRY_SIZE, "entry size");
_Static_assert(sizeof(struct lkl_header) <= LKL_HEADER_SIZE, "header size");

static inline uint64_t lkl_file_size(uint32_t capacity)
{
	return LKL_HEADER_SIZE + (uint64_t)capacity * LKL_ENTRY_SIZE +
	       LKL_MAX_MODULES * sizeof(struct lkl_module);
}

#endif
