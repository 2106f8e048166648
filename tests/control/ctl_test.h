/* SPDX-License-Identifier: MIT */
/* Helpers for the control tests: scratch directories, reading traces back, waiting for a state. */
#ifndef LKT_CTL_TEST_H
#define LKT_CTL_TEST_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal/ctf_reader.h"

/* Events of a trace: how many of provider:event, and the sum of their first integer argument. */
struct lkt_count {
	const char *name; /* "provider:event" */
	long events;
	long long arg0_sum;
	bool arg1_is_twice_arg0; /* every event's second argument was twice its first */
	long threads;		 /* streams */
	long lost;
};

static inline int lkt_count_event(const struct lk__event *e, void *arg)
{
	struct lkt_count *c = arg;
	char name[256];
	uint64_t v0 = 0, v1 = 0;
	const char *s;
	size_t off;

	snprintf(name, sizeof(name), "%s:%s", e->cls->provider, e->cls->event);
	if (strcmp(name, c->name) != 0 || e->cls->kind != 1)
		return 0;
	c->events++;
	off = lk__event_arg(e, 0, 0, &v0, &s);
	c->arg0_sum += (long long)v0;
	if (e->cls->nargs >= 2 && off && lk__event_arg(e, off, 1, &v1, &s) && v1 != 2 * v0)
		c->arg1_is_twice_arg0 = false;
	return 0;
}

static inline int lkt_count_stream(const struct lk__stream_info *s, void *arg)
{
	struct lkt_count *c = arg;

	c->threads++;
	c->lost += (long)s->lost;
	return 0;
}

/* Count name's events in the CTF trace at dir; -1 events when it cannot be read. */
static inline struct lkt_count lkt_count(const char *dir, const char *name)
{
	const struct lk__reader_ops ops = { NULL, lkt_count_event, lkt_count_stream };
	struct lkt_count c = { .name = name, .arg1_is_twice_arg0 = true };
	struct lk__trace_reader r;
	char err[512];

	if (lk__reader_open(&r, dir, err, sizeof(err)) != 0) {
		fprintf(stderr, "reading %s: %s\n", dir, err);
		c.events = -1;
		return c;
	}
	if (lk__reader_walk(&r, &ops, &c, err, sizeof(err)) != 0) {
		fprintf(stderr, "walking %s: %s\n", dir, err);
		c.events = -1;
	}
	lk__reader_close(&r);
	return c;
}

static inline void lkt_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Wait (up to a minute: a generous bound, not a measurement) until cond(arg) holds. */
static inline bool lkt_wait_for(bool (*cond)(void *), void *arg)
{
	for (int i = 0; i < 6000; i++) {
		if (cond(arg))
			return true;
		lkt_sleep_ms(10);
	}
	return cond(arg);
}

static inline bool lkt_file_exists(const char *path)
{
	return access(path, F_OK) == 0;
}

#endif
