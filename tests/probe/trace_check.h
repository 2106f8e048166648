/* SPDX-License-Identifier: MIT */
/*
 * For tests: read a whole lowkey trace into memory through the library's reader, and make
 * per-test trace directories.
 */
#ifndef LKT_TRACE_CHECK_H
#define LKT_TRACE_CHECK_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <lowkey/error.h>
#include <lowkey/probe.h>

#include "internal/ctf_reader.h"

struct lkt_event {
	int tid;
	uint64_t tsc, cputime;
	char name[64]; /* provider:event */
	unsigned int kind, nargs;
	uint64_t v[8];
	char *s[8]; /* string arguments (strdup'ed), NULL for the others */
	size_t slen[8];
};

struct lkt_trace {
	struct lk__trace_reader r;
	struct lkt_event *ev;
	size_t n, cap;
	uint64_t lost; /* events_discarded, summed over streams */
	int streams;
	char err[512];
};

static int lkt_on_event(const struct lk__event *e, void *arg)
{
	struct lkt_trace *t = arg;
	struct lkt_event *x;
	size_t off = 0;

	if (t->n == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 1024;
		t->ev = realloc(t->ev, t->cap * sizeof(*t->ev));
		if (!t->ev)
			return -1;
	}
	x = &t->ev[t->n++];
	memset(x, 0, sizeof(*x));
	x->tid = e->tid;
	x->tsc = e->tsc;
	x->cputime = e->cputime_ns;
	x->kind = e->cls->kind;
	x->nargs = e->cls->nargs;
	snprintf(x->name, sizeof(x->name), "%s:%s", e->cls->provider, e->cls->event);
	for (unsigned int i = 0; i < e->cls->nargs; i++) {
		const char *s;

		off = lk__event_arg(e, off, i, &x->v[i], &s);
		if (!off)
			return -2;
		if (s) {
			x->s[i] = strdup(s);
			x->slen[i] = strlen(s);
		}
	}
	return 0;
}

static int lkt_on_stream_end(const struct lk__stream_info *s, void *arg)
{
	struct lkt_trace *t = arg;

	t->lost += s->lost;
	t->streams++;
	return 0;
}

/* 0, or the reader's error (its message in t->err). */
static inline int lkt_read(struct lkt_trace *t, const char *dir)
{
	const struct lk__reader_ops ops = { NULL, lkt_on_event, lkt_on_stream_end };
	int rc;

	memset(t, 0, sizeof(*t));
	rc = lk__reader_open(&t->r, dir, t->err, sizeof(t->err));
	if (rc == 0)
		rc = lk__reader_walk(&t->r, &ops, t, t->err, sizeof(t->err));
	return rc;
}

static inline void lkt_free(struct lkt_trace *t)
{
	for (size_t k = 0; k < t->n; k++)
		for (int i = 0; i < 8; i++)
			free(t->ev[k].s[i]);
	lk__reader_close(&t->r);
	free(t->ev);
	memset(t, 0, sizeof(*t));
}

/* Events named name (provider:event), in trace order. */
static inline size_t lkt_count(const struct lkt_trace *t, const char *name);

/* The trace's events as lk_trace_stats counts them: its records but the threads' names. */
static inline uint64_t lkt_events(const struct lkt_trace *t)
{
	return t->n - lkt_count(t, "lowkey:thread_name");
}

/* Events named name (provider:event), in trace order. */
static inline size_t lkt_count(const struct lkt_trace *t, const char *name)
{
	size_t n = 0;

	for (size_t i = 0; i < t->n; i++)
		n += strcmp(t->ev[i].name, name) == 0;
	return n;
}

/*
 * A fresh, unique trace path under /tmp; removed by lkt_rmrf. Random as well as numbered: what a
 * failed run left behind stays, and a later process may get the same pid.
 */
static inline void lkt_path(char *buf, size_t len, const char *what)
{
	static int seq;
	unsigned int nonce = 0;

	if (getrandom(&nonce, sizeof(nonce), 0) != (ssize_t)sizeof(nonce))
		nonce = (unsigned int)time(NULL);
	snprintf(buf, len, "/tmp/lowkey-test-%s-%d-%d-%08x", what, (int)getpid(), seq++, nonce);
}

#ifdef assert_non_null /* cmocka's, included first */
/* The whole file at path (free it), its length in *len; a test failure if it cannot be read. */
static inline char *lkt_slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *text;
	long size;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	size = ftell(f);
	assert_true(size > 0);
	rewind(f);
	text = malloc((size_t)size);
	assert_non_null(text);
	assert_int_equal(fread(text, 1, (size_t)size, f), (size_t)size);
	fclose(f);
	*len = (size_t)size;
	return text;
}
#endif

static inline void lkt_rmrf(const char *path)
{
	char cmd[4200];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", path);
}

/* This thread's CPU time, from the kernel's clock (CLOCK_THREAD_CPUTIME_ID), in ns. */
static inline uint64_t lkt_thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Compute for ns of this thread's CPU time. */
static inline void lkt_spin_cpu(uint64_t ns)
{
	uint64_t end = lkt_thread_cpu_ns() + ns;

	while (lkt_thread_cpu_ns() < end)
		;
}

/* Whether this process may record context switches (LK_TRACE_SCHED); says why not if not. */
static inline bool lkt_sched_allowed(void)
{
	struct lk_trace_config c = { .flags = LK_TRACE_SCHED };
	char dir[256];
	bool ok;

	lkt_path(dir, sizeof(dir), "sched-probe");
	c.path = dir;
	ok = lk_trace_start(&c) == 0;
	if (ok)
		lk_trace_stop();
	else
		printf("[  SKIP    ] context switches cannot be recorded here: %s\n",
		       lk_last_error());
	lkt_rmrf(dir);
	return ok;
}

#endif
