// SPDX-License-Identifier: MIT
/*
 * lowkey agent: one process followed, from its trace as its consumer writes it.
 *
 * The agent attaches as `lowkey trace --pid` does: session rules, and a CTF trace started "stop on
 * close" into a directory the agent made (handed over with the request, given to the process's
 * user when root follows another user's process). The process's consumer appends whole packets to
 * one file per thread, each with one writev; the agent reads each file up to its last whole
 * packet (the project's CTF cursor, told the file grew: lk__ctf_cursor_follow) and punches holes
 * behind what it has read, so the directory holds no more than the packets not yet read. The
 * traced process pays what any trace costs it and never waits for the agent: its consumer writes
 * into a file, never to the agent. Losses are the packets' lost-event counts.
 *
 * If the agent dies, its connection closes: the process stops the trace and drops the session's
 * rules by itself, and its sites are as they were.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <lowkey/probe.h>

#include "agent.h"
#include "internal/proc.h"
#include "internal/trace_classes.h"

#define REPLY_TIMEOUT_MS 10000 /* a process that does not answer a request in that time is left */
#define STOP_TIMEOUT_MS 5000
#define PAGE 4096u /* holes are punched in whole pages of this size (or larger ones) */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

bool agent_proc_env(pid_t pid, const char *name, char *out, size_t len)
{
	size_t lname = strlen(name);
	char file[64], *buf = malloc(65536);
	size_t n = 0;
	bool found = false;
	FILE *f;

	snprintf(file, sizeof(file), "/proc/%d/environ", (int)pid);
	f = buf ? fopen(file, "re") : NULL;
	if (f) {
		n = fread(buf, 1, 65535, f);
		fclose(f);
	}
	if (buf)
		buf[n] = 0;
	for (size_t i = 0; i < n && !found; i += strlen(buf + i) + 1) {
		if (strncmp(buf + i, name, lname) == 0 && buf[i + lname] == '=' &&
		    buf[i + lname + 1]) {
			snprintf(out, len, "%s", buf + i + lname + 1);
			found = true;
		}
	}
	free(buf);
	return found;
}

static int send_rules(struct agent *a, struct agent_proc *p, char *err, size_t errlen)
{
	for (int i = 0; i < a->o->nglobs; i++) {
		const char *g = a->o->globs[i];
		bool enable = g[0] != '-';
		struct lk__ctl_msg req = { .type = LK_CTL_RULE }, reply;
		int rc;

		req.rule = (struct lk__ctl_rule){ enable, LK_CTL_RULE_SESSION, enable ? g : g + 1 };
		rc = lk__ctl_call(p->ctl, &req, LK_CTL_RESULT, &reply, REPLY_TIMEOUT_MS, err,
				  errlen);
		if (rc)
			return rc;
	}
	return 0;
}

/* The process's trace directory in the spool, its user's if root follows another user. */
static int make_dir(struct agent *a, struct agent_proc *p, char *err, size_t errlen)
{
	struct stat st;

	/* numbered: the directory of an earlier trace of the same process may still be there */
	snprintf(p->dir, sizeof(p->dir), "%d-%llu-%llu", (int)p->pid, p->start,
		 (unsigned long long)++a->traces);
	if (mkdirat(a->spool_fd, p->dir, 0700) != 0) {
		int rc = -errno;

		snprintf(err, errlen, "cannot create %s/%s: %s", a->spool, p->dir, strerror(-rc));
		p->dir[0] = 0; /* not ours to remove */
		return rc;
	}
	p->dir_fd = openat(a->spool_fd, p->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (p->dir_fd < 0 || fstat(p->dir_fd, &st) != 0 || st.st_uid != geteuid()) {
		snprintf(err, errlen, "cannot open %s/%s: %s", a->spool, p->dir,
			 p->dir_fd < 0 ? strerror(errno) : "not the directory made here");
		return -EEXIST;
	}
	if (geteuid() == 0 && p->ctl->uid != 0 && p->ctl->uid != (uid_t)-1 &&
	    fchown(p->dir_fd, p->ctl->uid, p->ctl->gid) != 0) {
		snprintf(err, errlen, "cannot give %s/%s to uid %u: %s", a->spool, p->dir,
			 (unsigned int)p->ctl->uid, strerror(errno));
		return -errno;
	}
	return 0;
}

static int start_trace(struct agent *a, struct agent_proc *p, char *err, size_t errlen)
{
	struct lk__ctl_msg req = { .type = LK_CTL_START }, reply;
	char path[PATH_MAX + 64];

	snprintf(path, sizeof(path), "%s/%s", a->spool, p->dir);
	req.start = (struct lk__ctl_start){
		.format = LK_TRACE_CTF,
		.ctl_flags = LK_CTL_START_STOP_ON_CLOSE,
		.flags = a->o->cputime ? LK_TRACE_CPUTIME : 0,
		.flush_ms = a->o->flush_ms,
		.buffer_size = a->o->buffer,
		.path = path,
		.output = LK_CTL_OUT_DIR,
	};
	return lk__ctl_call_fd(p->ctl, &req, p->dir_fd, LK_CTL_RESULT, &reply, REPLY_TIMEOUT_MS,
			       err, errlen);
}

/* The span pairing for the reader's classes (again after the metadata grew). */
static int init_pairs(struct agent_proc *p)
{
	uint32_t *first = calloc(p->r.nclasses + 1, sizeof(*first)), *rows = NULL;
	size_t nrows = 0;
	int rc = -ENOMEM;

	if (first)
		rows = lk__group_classes(&p->r, first, &nrows);
	if (rows)
		rc = lk__pair_init(&p->pairs, &p->r, rows, nrows);
	free(rows);
	free(first);
	return rc;
}

static int open_reader(struct agent_proc *p, char *err, size_t errlen)
{
	char name[PATH_MAX + 64];
	int rc;

	snprintf(name, sizeof(name), "process %d's trace", (int)p->pid);
	rc = lk__reader_openat(&p->r, p->dir_fd, name, err, errlen);
	if (rc)
		return rc;
	p->have_reader = true;
	rc = init_pairs(p);
	if (rc)
		snprintf(err, errlen, "out of memory");
	return rc;
}

struct agent_proc *agent_attach(struct agent *a, pid_t pid, char *err, size_t errlen)
{
	struct agent_proc *p = calloc(1, sizeof(*p));
	int rc;

	if (!p || !(p->ctl = calloc(1, sizeof(*p->ctl)))) {
		free(p);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	p->pid = pid;
	p->dir_fd = -1;
	p->other = -1;
	rc = lk__ctl_connect(p->ctl, pid, err, errlen);
	if (rc) {
		free(p->ctl);
		free(p);
		return NULL;
	}
	p->start = p->ctl->pin.start;
	p->has_service = agent_proc_env(pid, "OTEL_SERVICE_NAME", p->name, sizeof(p->name));
	if (!p->has_service && lk__proc_comm(pid, 0, p->name, sizeof(p->name)) < 0)
		snprintf(p->name, sizeof(p->name), "%d", (int)pid);
	/* what was read of /proc/PID counts only if it is still the process pinned */
	rc = lk__ctl_check(p->ctl, err, errlen);
	if (!rc)
		rc = send_rules(a, p, err, errlen);
	if (!rc)
		rc = make_dir(a, p, err, errlen);
	if (!rc)
		rc = start_trace(a, p, err, errlen);
	if (!rc)
		rc = open_reader(p, err, errlen);
	if (rc) {
		agent_proc_free(a, p, false);
		return NULL;
	}
	agent_otlp_attach(a, p);
	return p;
}

/* ---- reading ---- */

static void span_end(struct agent *a, struct agent_proc *p, struct agent_stream *st,
		     struct agent_site *s, const struct lk__event *e)
{
	const struct lk__pair_open *o;
	size_t k;
	uint32_t *top = lk__pair_match(&p->pairs, &st->open, e->cls->id, &k);

	if (!top)
		return;
	o = &st->open.v[k];
	if (p->r.tsc_hz) {
		s->has_spans = true;
		agent_hist_add(a->o, &s->wall,
			       (double)(e->tsc >= o->tsc ? e->tsc - o->tsc : 0) /
				       (double)p->r.tsc_hz);
		if (p->r.cputime)
			agent_hist_add(a->o, &s->cpu,
				       (double)(e->cputime_ns >= o->cpu ? e->cputime_ns - o->cpu :
									  0) /
					       1e9);
	}
	agent_otlp_end(a, p, st, k, e);
	lk__pair_close(&p->pairs, &st->open, k, top);
}

static void on_event(struct agent *a, struct agent_proc *p, struct agent_stream *st,
		     const struct lk__event *e)
{
	struct agent_site *s;

	if (!e->cls->kind) { /* lowkey's own records: thread names */
		agent_otlp_event(a, p, st, e);
		return;
	}
	s = agent_site_of(a, p, e->cls);
	if (!s)
		return;
	s->events++;
	switch (e->cls->kind) {
	case LK_PROBE_EVENT:
		agent_otlp_event(a, p, st, e);
		break;
	case LK_PROBE_COUNTER:
		s->is_counter = true;
		s->value = lk__event_counter(e);
		break;
	case LK_PROBE_SPAN_BEGIN:
		agent_otlp_begin(a, st);
		lk__pair_open(&p->pairs, &st->open, e); /* out of memory: the span is not timed */
		break;
	case LK_PROBE_SPAN_END:
		span_end(a, p, st, s, e);
		break;
	}
}

static int add_stream(struct agent_proc *p, const char *name)
{
	struct agent_stream *grown = realloc(p->streams, (p->nstreams + 1) * sizeof(*grown)), *st;
	char err[256];
	struct stat sb;

	if (!grown)
		return -ENOMEM;
	p->streams = grown;
	st = &p->streams[p->nstreams];
	*st = (struct agent_stream){ .fd = -1 };
	st->name = strdup(name);
	if (!st->name)
		return -ENOMEM;
	st->fd = openat(p->dir_fd, name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (st->fd < 0 || fstat(st->fd, &sb) != 0 || !S_ISREG(sb.st_mode) ||
	    lk__ctf_cursor_open(&st->cur, &p->r, name, false, err, sizeof(err)) != 0) {
		if (st->fd >= 0)
			close(st->fd);
		free(st->name);
		return -EINVAL;
	}
	p->nstreams++;
	return 0;
}

static bool known_stream(const struct agent_proc *p, const char *name)
{
	for (size_t i = 0; i < p->nstreams; i++)
		if (strcmp(p->streams[i].name, name) == 0)
			return true;
	return false;
}

/* Streams of threads that started recording since the last look. */
static void find_streams(struct agent_proc *p)
{
	char **names = NULL;
	int n = lk__reader_streams(&p->r, &names);

	for (int i = 0; i < n; i++) {
		/* context switches are not asked for; a name is taken once */
		if (!strstr(names[i], "-sched") && !known_stream(p, names[i]))
			add_stream(p, names[i]);
		free(names[i]);
	}
	free(names);
}

/* The metadata describes classes of objects loaded since: read it again, spans re-paired. */
static int reload_metadata(struct agent_proc *p)
{
	char err[256];

	lk__pair_free(&p->pairs);
	lk__reader_close(&p->r);
	p->have_reader = false;
	for (size_t i = 0; i < p->nstreams; i++) {
		p->streams[i].open.depth = 0; /* spans open across a dlopen are not timed */
		p->streams[i].open.serial = 0;
	}
	return open_reader(p, err, sizeof(err));
}

/* Holes behind what the cursor has read, in whole pages: the file keeps its size and offsets. */
static void punch(struct agent_stream *st)
{
	uint64_t upto = st->cur.at / PAGE * PAGE;

	if (upto > st->punched && fallocate(st->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					    (off_t)st->punched, (off_t)(upto - st->punched)) == 0)
		st->punched = upto;
}

static void read_stream(struct agent *a, struct agent_proc *p, struct agent_stream *st,
			bool *reloaded)
{
	struct lk__event e;
	struct stat sb;
	int rc;

	if (st->damaged || !p->have_reader || fstat(st->fd, &sb) != 0)
		return;
	lk__ctf_cursor_follow(&st->cur, (uint64_t)sb.st_size);
	for (;;) {
		while ((rc = lk__ctf_cursor_next(&st->cur, &e)) == 1)
			on_event(a, p, st, &e);
		if (rc != -EINVAL || *reloaded || !p->have_reader)
			break;
		*reloaded = true; /* an event of a class the metadata did not have yet */
		if (reload_metadata(p) != 0)
			break;
	}
	if (rc < 0) {
		char err[512];

		lk__ctf_cursor_error(&st->cur, rc, err, sizeof(err));
		fprintf(stderr, "lowkey agent: process %d: %s\n", (int)p->pid, err);
		st->damaged = true;
	}
	punch(st);
}

/* Notifications from the process: its exit, or its connection closing. */
static void read_socket(struct agent_proc *p)
{
	struct lk__ctl_msg m;
	int rc;

	while (p->ctl && !p->exiting) {
		rc = lk__ctl_recv(p->ctl, &m, 0, NULL, 0);
		if (rc == -ETIMEDOUT)
			break;
		if (rc == -ECONNRESET || (rc == 0 && m.type == LK_CTL_EXIT))
			p->exiting = true; /* its trace is finished, or ended: read what is left */
		else if (rc != 0)
			break;
	}
	if (p->ctl && !p->exiting && lk__ctl_check(p->ctl, NULL, 0) != 0)
		p->exiting = true;
}

void agent_read(struct agent *a, struct agent_proc *p)
{
	bool reloaded = false, exiting;
	uint64_t lost = 0;

	if (p->exited || !p->have_reader)
		return;
	read_socket(p);
	exiting = p->exiting; /* seen before the last read: everything it wrote is there */
	find_streams(p);
	for (size_t i = 0; i < p->nstreams; i++) {
		read_stream(a, p, &p->streams[i], &reloaded);
		lost += p->streams[i].cur.s.lost;
	}
	p->lost = lost;
	if (exiting) {
		p->exited = true;
		p->exited_at = now_s();
		lk__ctl_disconnect(p->ctl);
		free(p->ctl);
		p->ctl = NULL;
	}
}

void agent_check(struct agent_proc *p)
{
	struct lk__ctl_msg req = { .type = LK_CTL_STATUS }, reply;
	char err[256];
	int rc;

	if (!p->ctl || p->exiting)
		return;
	rc = lk__ctl_call(p->ctl, &req, LK_CTL_STATUS_REPLY, &reply, REPLY_TIMEOUT_MS, err,
			  sizeof(err));
	if (rc == -ECONNRESET || rc == -ETIMEDOUT || (rc == 0 && !reply.status.running))
		p->exiting =
			true; /* read what is left; a process still running is attached again */
}

/* ---- the end ---- */

static void stop_trace(struct agent_proc *p)
{
	struct lk__ctl_msg req = { .type = LK_CTL_STOP }, reply;
	char err[256];

	lk__ctl_call(p->ctl, &req, LK_CTL_STATS, &reply, STOP_TIMEOUT_MS, err, sizeof(err));
}

/* The trace directory's files (only unlinked: nothing in it is followed) and the directory. */
static void remove_dir(struct agent *a, struct agent_proc *p)
{
	int fd = p->dir_fd >= 0 ? dup(p->dir_fd) : -1;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;

	while (d && (e = readdir(d)))
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			unlinkat(p->dir_fd, e->d_name, 0);
	if (d)
		closedir(d);
	else if (fd >= 0)
		close(fd);
	if (p->dir[0])
		unlinkat(a->spool_fd, p->dir, AT_REMOVEDIR);
}

void agent_proc_free(struct agent *a, struct agent_proc *p, bool stop)
{
	if (p->ctl) {
		if (stop)
			stop_trace(p);
		lk__ctl_disconnect(p->ctl);
		free(p->ctl);
	}
	for (size_t i = 0; i < p->nstreams; i++) {
		lk__ctf_cursor_close(&p->streams[i].cur);
		lk__pair_stack_free(&p->streams[i].open);
		agent_otlp_stream_free(&p->streams[i]);
		close(p->streams[i].fd);
		free(p->streams[i].name);
	}
	free(p->streams);
	if (p->have_reader) {
		lk__pair_free(&p->pairs);
		lk__reader_close(&p->r);
	}
	agent_otlp_detach(a, p);
	remove_dir(a, p);
	if (p->dir_fd >= 0)
		close(p->dir_fd);
	agent_sites_free(p);
	agent_figures_free(p);
	free(p);
}
