// SPDX-License-Identifier: MIT
/*
 * The table of watchpoints.
 *
 * A watchpoint's perf event carries a token in sig_data (a tag, the entry's generation, its
 * index), and the SIGTRAP handler finds the entry from it. A hit can reach its handler after the
 * watchpoint was removed (the signal was already on its way), so entries are never freed: they
 * live in chunks that stay allocated, and removing a watchpoint bumps its entry's generation, which
 * makes such late hits stale. Lookups are two loads and no lock.
 *
 * Free entries sit on a lock-free stack (index + ABA tag in one 64-bit word), with a small cache per
 * thread in front of it so a thread that adds and removes in a loop touches no shared line.
 * Growing the table takes a mutex, only when every entry is in use.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "watch/watch_internal.h"

#define CHUNK_SHIFT 8
#define CHUNK_SIZE (1u << CHUNK_SHIFT)
#define MAX_CHUNKS 4096u /* a million watchpoints at once */

#define TOKEN_TAG 0x6c6bull /* "lk" */
#define TOKEN_TAG_SHIFT 48
#define TOKEN_GEN_SHIFT 32

static struct lk_watch *chunks[MAX_CHUNKS]; /* published with release, never freed */
static unsigned int nr_chunks;		    /* guarded by grow_mutex */
static pthread_mutex_t grow_mutex = PTHREAD_MUTEX_INITIALIZER;

/* The shared free stack: (ABA tag << 32) | (index + 1); 0 in the low half when empty. */
static uint64_t free_head;

struct lk_watch *lk__watch_entry_lookup(uint32_t index)
{
	struct lk_watch *chunk;

	if ((index >> CHUNK_SHIFT) >= MAX_CHUNKS)
		return NULL;
	chunk = __atomic_load_n(&chunks[index >> CHUNK_SHIFT], __ATOMIC_ACQUIRE);
	return chunk ? &chunk[index & (CHUNK_SIZE - 1)] : NULL;
}

uint64_t lk__watch_token(const struct lk_watch *w)
{
	return TOKEN_TAG << TOKEN_TAG_SHIFT |
	       (uint64_t)__atomic_load_n(&w->gen, __ATOMIC_RELAXED) << TOKEN_GEN_SHIFT | w->index;
}

bool lk__watch_token_decode(uint64_t sig_data, uint32_t *index, uint16_t *gen)
{
	if (sig_data >> TOKEN_TAG_SHIFT != TOKEN_TAG)
		return false;
	*gen = (uint16_t)(sig_data >> TOKEN_GEN_SHIFT);
	*index = (uint32_t)sig_data;
	return true;
}

static void push_shared(struct lk_watch *w)
{
	uint64_t head = __atomic_load_n(&free_head, __ATOMIC_RELAXED), next;

	do {
		__atomic_store_n(&w->free_next, (uint32_t)head, __ATOMIC_RELAXED);
		next = ((head >> 32) + 1) << 32 | (w->index + 1);
	} while (!__atomic_compare_exchange_n(&free_head, &head, next, true, __ATOMIC_RELEASE,
					      __ATOMIC_RELAXED));
}

static struct lk_watch *pop_shared(void)
{
	uint64_t head = __atomic_load_n(&free_head, __ATOMIC_ACQUIRE), next;
	struct lk_watch *w;

	do {
		if (!(uint32_t)head)
			return NULL;
		w = lk__watch_entry_lookup((uint32_t)head - 1);
		/* w may be popped and pushed again meanwhile: the tag makes the CAS fail then. */
		next = ((head >> 32) + 1) << 32 | __atomic_load_n(&w->free_next, __ATOMIC_RELAXED);
	} while (!__atomic_compare_exchange_n(&free_head, &head, next, true, __ATOMIC_ACQUIRE,
					      __ATOMIC_ACQUIRE));
	return w;
}

/* Add a chunk; keep its first entry for the caller and put the rest on the free stack. */
static struct lk_watch *grow(void)
{
	struct lk_watch *chunk, *w;

	pthread_mutex_lock(&grow_mutex);
	w = pop_shared(); /* another thread may have grown the table meanwhile */
	if (w || nr_chunks == MAX_CHUNKS) {
		pthread_mutex_unlock(&grow_mutex);
		return w;
	}
	chunk = calloc(CHUNK_SIZE, sizeof(*chunk));
	if (!chunk) {
		pthread_mutex_unlock(&grow_mutex);
		return NULL;
	}
	for (uint32_t i = 0; i < CHUNK_SIZE; i++) {
		chunk[i].index = nr_chunks << CHUNK_SHIFT | i;
		chunk[i].fd = -1;
	}
	__atomic_store_n(&chunks[nr_chunks], chunk, __ATOMIC_RELEASE);
	nr_chunks++;
	for (uint32_t i = CHUNK_SIZE - 1; i > 0; i--)
		push_shared(&chunk[i]);
	pthread_mutex_unlock(&grow_mutex);
	return &chunk[0];
}

struct lk_watch *lk__watch_entry_alloc(void)
{
	struct lk__wthread *t = lk__wthread_peek();
	struct lk_watch *w;

	if (t && t->nr_cached)
		return t->entry_cache[--t->nr_cached];
	w = pop_shared();
	return w ? w : grow();
}

/* Reset what lk_watch_add() expects to find; index and gen survive. */
static void reset(struct lk_watch *w)
{
	w->flags = 0;
	__atomic_store_n(&w->addr, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&w->len, 0, __ATOMIC_RELAXED);
	w->fn = NULL;
	w->arg = NULL;
	memset(&w->bp, 0, sizeof(w->bp));
	w->disabled = false;
	w->owner = NULL;
	w->thread_next = NULL;
	w->ended = false;
	w->fd = -1;
	w->fds = NULL;
	w->nfds = 0;
	__atomic_store_n(&w->hits, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&w->delivered, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&w->dropped, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&w->ignored, 0, __ATOMIC_RELAXED);
}

void lk__watch_entry_free(struct lk_watch *w)
{
	struct lk__wthread *t = lk__wthread_peek();

	/* Hits still in flight carry the old generation: from now on they are stale. */
	__atomic_store_n(&w->gen, (uint16_t)(w->gen + 1), __ATOMIC_RELEASE);
	reset(w);
	if (t && t->nr_cached < LK__WATCH_ENTRY_CACHE)
		t->entry_cache[t->nr_cached++] = w;
	else
		push_shared(w);
}

void lk__watch_entry_cache_flush(struct lk_watch **cache, unsigned int *n)
{
	while (*n)
		push_shared(cache[--*n]);
}
