/* SPDX-License-Identifier: MIT */
/*
 * lowkey report --html: which line of its counter's chart each thread's samples go to. A map of
 * (counter, thread) to that pair's samples and line, memory linear in the pairs that occur (not
 * counters x threads, which a trace of many of both would make huge); a lookup is O(1) expected.
 * Not async-signal-safe.
 */
#ifndef LK_CLI_COUNTER_LINES_H
#define LK_CLI_COUNTER_LINES_H

#include <stddef.h>
#include <stdint.h>

struct counter_thread {
	uint32_t cls, thread; /* the key; thread UINT32_MAX: a free slot */
	uint64_t count;	      /* the counter's samples from the thread */
	unsigned int line;    /* its line on the chart */
};

struct counter_lines {
	struct counter_thread *slot;
	size_t cap, n;		     /* cap: a power of two, at least twice n */
	struct counter_thread *last; /* the latest found: a thread's samples come in runs */
};

/* The pair's entry, added (count 0, line 0) if new; NULL: out of memory. */
struct counter_thread *counter_lines_get(struct counter_lines *m, uint32_t cls, uint32_t thread);
/* The pair's entry, or NULL if it has no sample. */
struct counter_thread *counter_lines_find(struct counter_lines *m, uint32_t cls, uint32_t thread);
/*
 * Every entry, ordered by counter and thread, in *out (n of them; freed by the caller): each
 * counter's threads in the trace's order. 0 or -ENOMEM.
 */
int counter_lines_sorted(const struct counter_lines *m, struct counter_thread ***out, size_t *n);
void counter_lines_free(struct counter_lines *m);

#endif
