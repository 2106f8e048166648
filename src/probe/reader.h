/* SPDX-License-Identifier: MIT */
/*
 * Internal: reading lowkey's own CTF traces back (for the JSON conversion and `lowkey report`).
 * It reads the `index` file for the event classes and walks each stream file's packets.
 */
#ifndef LK_PROBE_READER_H
#define LK_PROBE_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct lk__event_class {
	uint32_t id;
	uint8_t kind;		/* enum lk_probe_kind; 0 for lowkey's own events */
	uint8_t nargs;
	uint32_t arg_types;
	char *provider, *event, *where, *arg_names;
	char arg_name[8][64];	/* field names, as in the metadata */
};

struct lk__trace_reader {
	char *dir;
	uint64_t tsc_hz, tsc0, monotonic0_ns, realtime0_ns;
	bool cputime;
	int pid;
	char procname[64];
	struct lk__event_class **classes;	/* by id; NULL where none */
	size_t nclasses;
};

struct lk__event {
	int tid;
	uint64_t tsc;
	uint64_t cputime_ns;	/* 0 unless the trace records CPU time */
	const struct lk__event_class *cls;
	const uint8_t *payload;
	size_t payload_len;
};

struct lk__stream_info {
	int tid;
	const char *file;
	uint64_t packets, events, lost;
};

struct lk__reader_ops {
	/* called per stream before its events; may be NULL */
	int (*stream_begin)(const struct lk__stream_info *s, void *arg);
	int (*event)(const struct lk__event *e, void *arg);
	/* called after a stream's events, with its totals; may be NULL */
	int (*stream_end)(const struct lk__stream_info *s, void *arg);
};

/* Open a trace directory; 0 or -errno with a message in err. */
int lk__reader_open(struct lk__trace_reader *r, const char *dir, char *err, size_t errlen);
void lk__reader_close(struct lk__trace_reader *r);

/* Visit every stream and its events in order. Returns 0, a callback's non-zero value, or -errno. */
int lk__reader_walk(struct lk__trace_reader *r, const struct lk__reader_ops *ops, void *arg, char *err,
		    size_t errlen);

/* Argument i of e as raw 8 bytes or a string; returns the next offset, or 0 past the end. */
size_t lk__event_arg(const struct lk__event *e, size_t offset, unsigned int i, uint64_t *value, const char **str);

/* Nanoseconds on CLOCK_MONOTONIC for a TSC value of this trace. */
uint64_t lk__reader_ns(const struct lk__trace_reader *r, uint64_t tsc);

#endif
