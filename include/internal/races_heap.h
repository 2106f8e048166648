/* SPDX-License-Identifier: MIT */
/*
 * Internal API: the heap blocks `lowkey races --heap` names. liblowkey-races-heap.so, preloaded
 * before liblowkey-races.so only when the command asks for it, interposes the allocator and
 * records each live block in a table of its own (src/races/heap.c); liblowkey-races.so finds the
 * block a race's address is in by the function the heap library exports (LKR_HEAP_FIND_SYMBOL),
 * looked up with dlsym() at start: without the heap library there is none, and no allocation is
 * seen.
 *
 * The table (src/races/heap_table.c) is keyed by the block's start, as the allocator returned it:
 * blocks are never changed, no header is put in front of them. It lives in memory mapped for it
 * (never malloc's), has a fixed number of slots, and is lock-free: a slot is claimed with a
 * compare-and-swap on its key, written, then published; a reader checks a sequence number around
 * what it read. A block that finds no free slot among the LKR_HEAP_PROBES after its hash is not
 * recorded, and counted.
 */
#ifndef LK_RACES_HEAP_H
#define LK_RACES_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LKR_HEAP_PROBES 64u		  /* slots looked at from a block's hash */
#define LKR_HEAP_SLOTS_DEFAULT (1u << 18) /* 8 MiB of slots, reserved, touched as used */

/* A live block, as the allocator returned it, and where it was allocated. */
struct lkr_heap_block {
	uint64_t start, size;
	uint64_t site; /* the return address into the allocator's caller */
	uint32_t tid;  /* the thread that allocated it */
};

/* One slot of the table; key: a block's start, or one of the values below (never a block's). */
struct lkr_heap_slot {
	uint64_t key;
	uint64_t size;
	uint64_t site;
	uint32_t tid;
	uint32_t seq; /* odd while its fields are written */
};

#define LKR_HEAP_EMPTY 0u /* never used: a search ends here */
#define LKR_HEAP_FREED 1u /* used, then freed: a search goes on past it */
#define LKR_HEAP_BUSY 2u  /* claimed by a writer */

struct lkr_heap_table {
	struct lkr_heap_slot *slots;
	uint64_t mask; /* slots - 1: a power of two */
	/* blocks that found no free slot, on a line of its own: the slots' fields are read always */
	_Alignas(64) uint64_t dropped;
};

/* The bytes of memory a table of n slots (a power of two) maps. */
static inline size_t lkr_heap_table_bytes(uint64_t n)
{
	return (size_t)n * sizeof(struct lkr_heap_slot);
}

/*
 * lkr_heap_insert - record block b (b->start not 0, 1 or 2), replacing a record of the same start
 * (a block realloc() kept in place, or whose free was not seen). Returns false, having counted it
 * in t->dropped, when its slots are all taken. Lock-free, allocates nothing, async-signal-safe;
 * cost: a hash and a few slots read, at most LKR_HEAP_PROBES.
 */
bool lkr_heap_insert(struct lkr_heap_table *t, const struct lkr_heap_block *b);

/*
 * lkr_heap_remove - forget the block that starts at start (freed), into *b when b is not NULL.
 * Returns whether it was recorded. Lock-free, async-signal-safe; the cost of a search.
 */
bool lkr_heap_remove(struct lkr_heap_table *t, uint64_t start, struct lkr_heap_block *b);

/*
 * lkr_heap_get - the block that starts at start, into *b. Returns whether it is recorded.
 * Lock-free, async-signal-safe; the cost of a search.
 */
bool lkr_heap_get(const struct lkr_heap_table *t, uint64_t start, struct lkr_heap_block *b);

/* lkr_heap_count - the blocks recorded now. Cost: every slot read (the table's size). */
uint64_t lkr_heap_count(const struct lkr_heap_table *t);

/*
 * lkr_heap_find - the recorded block addr is in, into *b: the nearest block starting at or below
 * addr and not below lowest (the start of the mapping addr is in, or 0), looked for at every 16
 * bytes (malloc's alignment on x86-64) up to 1 MiB below, then at every page (where large blocks
 * are mapped) up to 64 MiB below. A block found that ends before addr ends the search (blocks do
 * not overlap). Returns whether one was found. Lock-free, async-signal-safe; cost: up to about
 * 100,000 searches for an address in no block: made once per race recorded, never on the
 * program's path.
 */
bool lkr_heap_find(const struct lkr_heap_table *t, uint64_t addr, uint64_t lowest,
		   struct lkr_heap_block *b);

/* What liblowkey-races-heap.so exports for liblowkey-races.so (dlsym, by these names). */
#define LKR_HEAP_FIND_SYMBOL "lowkey_races_heap_find"
#define LKR_HEAP_COUNTS_SYMBOL "lowkey_races_heap_counts"
typedef bool (*lkr_heap_find_fn)(uint64_t addr, struct lkr_heap_block *b);
typedef void (*lkr_heap_counts_fn)(uint64_t *recorded, uint64_t *dropped);

/*
 * lkr_heap_find() on the library's table, if addr is in a mapping that may hold heap blocks
 * (anonymous, or the [heap]; not a file's, nor the main thread's [stack]), searched from the
 * mapping's start up (/proc/self/maps, read without allocating); false until it has a table.
 */
bool lowkey_races_heap_find(uint64_t addr, struct lkr_heap_block *b);
/* Blocks recorded now, and those that had no room, since the program started. */
void lowkey_races_heap_counts(uint64_t *recorded, uint64_t *dropped);

#endif
