// SPDX-License-Identifier: MIT
/*
 * The public trace reader (lowkey/trace_reader.h): one recording, made here with lk_trace_start
 * (two named threads; nested spans, a span left open, an end without a begin; counters of an
 * integer and a double; events with numbers and a string), read from its CTF directory and from
 * its JSON and Perfetto conversions: the same events in the same order, spans paired alike with
 * the same durations, counters alike, the same threads and names (but for the end without a
 * begin, nameless in Perfetto, whose slice ends carry no name). The trace recorded in each
 * format by lk_trace_start itself reads as the same kinds of events. And what is not a trace, or
 * is cut short, is -EINVAL (or the system's error for a path that is not there), never a crash.
 * The reader streams: an event's strings, which point into its packet, hold until the next call
 * (the last event of each packet too), and a CTF stream damaged in its second packet gives the
 * merge's events up to its last good one, then -EINVAL; a trace of many streams is read with
 * fewer file descriptors than it has streams. A CTF trace is counted by the reading (its counts 0
 * until the end) or on demand, before or amid the reading, to the same counts; every event has its
 * thread's name, from the first.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include <lowkey/lowkey.h>

#include "internal/trace_convert.h"
#include "probe/trace_check.h"

static void inner(int i)
{
	LK_SPAN(rd, inner);
	LK_PROBE(rd, step, i, -i, "inner");
}

static void outer(int i)
{
	LK_SPAN(rd, outer);
	inner(i);
	LK_COUNTER(rd, level, i * 10 - 20);
	LK_COUNTER(rd, ratio, i / 4.0);
}

static void *second_thread(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "rd-second");
	for (int i = 0; i < 5; i++)
		outer(100 + i);
	LK_SPAN_END(rd, orphan); /* an end without a begin */
	return NULL;
}

static void record(const char *path, enum lk_trace_format format)
{
	struct lk_trace_config c = { .path = path, .format = format };
	pthread_t t;

	assert_true(lk_probe_enable("rd") >= 0);
	assert_int_equal(lk_trace_start(&c), 0);
	pthread_setname_np(pthread_self(), "rd-main");
	pthread_create(&t, NULL, second_thread, NULL);
	for (int i = 0; i < 5; i++)
		outer(i);
	LK_SPAN_BEGIN(rd, left_open); /* never ended */
	pthread_join(t, NULL);
	assert_int_equal(lk_trace_stop(), 0);
}

/* What an event is, without its time on the file's own clock. */
struct seen {
	enum lk_trace_event_type type;
	enum lk_probe_kind kind;
	int tid;
	char thread[32], name[64];
	unsigned int depth;
	bool paired;
	uint64_t begin_seq, duration_ns;
	double value;
	unsigned int class_id, begin_class_id;
};

struct reading {
	struct seen *v;
	size_t n;
	struct lk_trace_file_info info;
};

/* The threads add up to the trace, and each has the events read from it. */
static void check_threads(const struct lk_trace_file *tf, const struct reading *r)
{
	struct lk_trace_thread th;
	uint64_t events = 0, lost = 0;
	bool main_seen = false;

	for (unsigned int i = 0; i < r->info.threads; i++) {
		size_t n = 0;

		assert_int_equal(lk_trace_file_thread(tf, i, &th), 0);
		for (size_t k = 0; k < r->n; k++)
			n += r->v[k].tid == th.tid;
		assert_int_equal(th.events, n);
		events += th.events;
		lost += th.lost;
		main_seen |= strcmp(th.name, "rd-main") == 0;
	}
	assert_int_equal(lk_trace_file_thread(tf, r->info.threads, &th), -ERANGE);
	assert_int_equal(events, r->info.events);
	assert_int_equal(lost, r->info.lost);
	assert_true(main_seen);
}

/* The event's class, thread and time on the trace's own clock agree with the event. */
static void check_class_thread_ticks(const struct lk_trace_file *tf,
				     const struct lk_trace_event *ev)
{
	const struct lk_trace_file_info *in = lk_trace_file_get_info(tf);
	struct lk_trace_class cls;
	struct lk_trace_thread th;

	assert_int_equal(lk_trace_file_class(tf, ev->class_id, &cls), 0);
	assert_string_equal(cls.provider, ev->provider);
	assert_string_equal(cls.name, ev->name);
	if (ev->type == LK_TRACE_EV_PROBE)
		assert_int_equal(cls.kind, ev->kind);
	assert_int_equal(lk_trace_file_thread(tf, ev->thread, &th), 0);
	assert_int_equal(th.tid, ev->tid);
	assert_true(ev->thread_name[0] != '\0'); /* the recording's threads are named */
	assert_string_equal(th.name, ev->thread_name);
	if (ev->paired) {
		double ns = (double)(ev->ticks - ev->begin_ticks) * 1e9 / (double)in->tick_hz;

		assert_true(ev->ticks >= ev->begin_ticks);
		assert_true(ns > (double)ev->duration_ns - 1.5 &&
			    ns < (double)ev->duration_ns + 1.5);
	}
}

/* Class ids run by provider, name and kind, one per such triple. */
static void check_class_order(const struct lk_trace_file *tf)
{
	const struct lk_trace_file_info *in = lk_trace_file_get_info(tf);
	struct lk_trace_class a, b;

	assert_true(in->classes > 0);
	assert_true(in->tick_hz > 0);
	for (unsigned int i = 1; i < in->classes; i++) {
		int c;

		assert_int_equal(lk_trace_file_class(tf, i - 1, &a), 0);
		assert_int_equal(lk_trace_file_class(tf, i, &b), 0);
		c = strcmp(a.provider, b.provider);
		if (!c)
			c = strcmp(a.name, b.name);
		assert_true(c < 0 || (c == 0 && a.kind < b.kind));
	}
	assert_int_equal(lk_trace_file_class(tf, in->classes, &a), -ERANGE);
}

/* rd:left_open, on the main thread, is the one span the trace never closes. */
static void check_open_spans(struct lk_trace_file *tf)
{
	const struct lk_trace_file_info *in = lk_trace_file_get_info(tf);
	struct lk_trace_thread th;
	uint64_t open = 0;

	for (unsigned int i = 0; i < in->threads; i++) {
		assert_int_equal(lk_trace_file_thread(tf, i, &th), 0);
		if (th.open_spans)
			assert_string_equal(th.name, "rd-main");
		open += th.open_spans;
	}
	assert_int_equal(open, 1);
	assert_int_equal(in->nonfinite_counters, 0);
	lk_trace_file_rewind(tf);
	for (unsigned int i = 0; i < in->threads; i++) {
		assert_int_equal(lk_trace_file_thread(tf, i, &th), 0);
		assert_int_equal(th.open_spans, 0);
	}
}

/* The counts of a and b, the trace's and each thread's, are the same. */
static void same_counts(const struct lk_trace_file *a, const struct lk_trace_file *b)
{
	const struct lk_trace_file_info *x = lk_trace_file_get_info(a),
					*y = lk_trace_file_get_info(b);
	struct lk_trace_thread s, t;

	assert_int_equal(x->events, y->events);
	assert_int_equal(x->thread_names, y->thread_names);
	assert_int_equal(x->lost, y->lost);
	assert_int_equal(x->truncated_streams, y->truncated_streams);
	assert_int_equal(x->threads, y->threads);
	for (unsigned int i = 0; i < x->threads; i++) {
		assert_int_equal(lk_trace_file_thread(a, i, &s), 0);
		assert_int_equal(lk_trace_file_thread(b, i, &t), 0);
		assert_int_equal(s.tid, t.tid);
		assert_string_equal(s.name, t.name);
		assert_int_equal(s.events, t.events);
		assert_int_equal(s.lost, t.lost);
		assert_int_equal(s.truncated, t.truncated);
	}
}

/*
 * The counts made on demand -- before the first event, or halfway through -- are those the
 * reading of `done` made at its end, and the reading goes on after them as it would have.
 */
static void check_counts_on_demand(const char *path, const struct lk_trace_file *done)
{
	uint64_t events = lk_trace_file_get_info(done)->events;

	for (int halfway = 0; halfway < 2; halfway++) {
		struct lk_trace_file *tf;
		struct lk_trace_event ev;
		uint64_t n = 0;
		int rc;

		assert_int_equal(lk_trace_file_open(path, &tf), 0);
		while (halfway && n < events / 2 && lk_trace_file_next(tf, &ev) == 1)
			n++;
		assert_int_equal(lk_trace_file_count(tf), 0);
		same_counts(tf, done);
		assert_int_equal(lk_trace_file_count(tf), 0); /* once counted, nothing more */
		while ((rc = lk_trace_file_next(tf, &ev)) == 1) {
			assert_int_equal(ev.seq, n);
			n++;
		}
		assert_int_equal(rc, 0);
		assert_int_equal(n, events);
		same_counts(tf, done);
		lk_trace_file_close(tf);
	}
}

static void read_all(const char *path, struct reading *out)
{
	struct lk_trace_file *tf;
	struct lk_trace_event ev;
	size_t cap = 0;
	uint64_t last_ns = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = lk_trace_file_open(path, &tf);
	if (rc)
		fail_msg("%s: %s", path, lk_last_error());
	out->info = *lk_trace_file_get_info(tf);
	/* a CTF trace is counted by reading it; a file read whole at open, there */
	if (out->info.format == LK_TRACE_CTF)
		assert_true(out->info.events == 0 && out->info.thread_names == 0);
	else
		assert_true(out->info.events > 0 && out->info.thread_names > 0);
	while ((rc = lk_trace_file_next(tf, &ev)) == 1) {
		struct seen *s;

		assert_true(ev.ns >= last_ns); /* in time order */
		last_ns = ev.ns;
		assert_int_equal(ev.seq, out->n);
		if (out->n == cap) {
			cap = cap ? cap * 2 : 256;
			out->v = realloc(out->v, cap * sizeof(*out->v));
			assert_non_null(out->v);
		}
		s = &out->v[out->n++];
		*s = (struct seen){ ev.type,   ev.kind,	     ev.tid,	     "",      "", ev.depth,
				    ev.paired, ev.begin_seq, ev.duration_ns, ev.value };
		s->class_id = ev.class_id;
		s->begin_class_id = ev.begin_class_id;
		snprintf(s->thread, sizeof(s->thread), "%s", ev.thread_name);
		snprintf(s->name, sizeof(s->name), "%s:%s", ev.provider, ev.name);
		if (ev.paired)
			assert_int_equal(ev.ns - ev.begin_ns, ev.duration_ns);
		check_class_thread_ticks(tf, &ev);
	}
	assert_int_equal(rc, 0);
	/* a paired end names its begin's class: the event at begin_seq */
	for (size_t k = 0; k < out->n; k++) {
		const struct seen *e = &out->v[k];

		if (e->kind != LK_PROBE_SPAN_END || !e->paired)
			continue;
		assert_true(e->begin_seq < k);
		assert_int_equal(out->v[e->begin_seq].kind, LK_PROBE_SPAN_BEGIN);
		assert_int_equal(out->v[e->begin_seq].class_id, e->begin_class_id);
	}
	assert_int_equal(lk_trace_file_next(tf, &ev), 0); /* and stays at the end */
	out->info = *lk_trace_file_get_info(tf);	  /* the counts complete */
	assert_int_equal((uint64_t)out->n, out->info.events);
	assert_int_equal(out->info.thread_names, 2); /* a name record for each thread */
	check_threads(tf, out);
	check_counts_on_demand(path, tf);
	check_class_order(tf);
	check_open_spans(tf);
	lk_trace_file_close(tf);
}

/* Event i's position among its thread's events. */
static size_t on_thread(const struct reading *r, size_t i)
{
	size_t n = 0;

	for (size_t k = 0; k < i; k++)
		n += r->v[k].tid == r->v[i].tid;
	return n;
}

/* The index of thread tid's event number nth; r->n if none. */
static size_t nth_on_thread(const struct reading *r, int tid, size_t nth)
{
	for (size_t k = 0; k < r->n; k++)
		if (r->v[k].tid == tid && nth-- == 0)
			return k;
	return r->n;
}

static void same_event(const struct reading *a, size_t i, const struct reading *b, size_t k)
{
	const struct seen *x = &a->v[i], *y = &b->v[k];

	if (b->info.format == LK_TRACE_PERFETTO && y->kind == LK_PROBE_SPAN_END && !y->paired)
		assert_string_equal(y->name, "?:?"); /* a slice end has no name there */
	else
		assert_string_equal(x->name, y->name);
	assert_int_equal(x->type, y->type);
	assert_int_equal(x->kind, y->kind);
	assert_int_equal(x->tid, y->tid);
	assert_string_equal(x->thread, y->thread);
	assert_int_equal(x->depth, y->depth);
	assert_int_equal(x->paired, y->paired);
	if (x->paired)
		assert_int_equal(on_thread(a, x->begin_seq), on_thread(b, y->begin_seq));
	assert_int_equal(x->duration_ns, y->duration_ns);
	assert_true(x->value == y->value);
}

/*
 * The same events: in the same order for JSON, whose times are the CTF reader's; for Perfetto
 * in the same order on each thread (two threads' events at the same nanosecond may swap there).
 */
static void same_events(const struct reading *a, const struct reading *b)
{
	assert_int_equal(a->n, b->n);
	for (size_t i = 0; i < a->n; i++) {
		bool by_thread = b->info.format == LK_TRACE_PERFETTO;
		size_t k = by_thread ? nth_on_thread(b, a->v[i].tid, on_thread(a, i)) : i;

		assert_true(k < b->n);
		same_event(a, i, b, k);
	}
	assert_int_equal(a->info.threads, b->info.threads);
	assert_int_equal(a->info.lost, b->info.lost);
	assert_int_equal(a->info.pid, b->info.pid);
}

static size_t count(const struct reading *r, const char *name, enum lk_probe_kind kind, bool paired)
{
	size_t n = 0;

	for (size_t i = 0; i < r->n; i++)
		n += strcmp(r->v[i].name, name) == 0 && r->v[i].kind == kind &&
		     r->v[i].paired == paired;
	return n;
}

/* What the recording holds, whatever the format. */
static void check_recording(const struct reading *r)
{
	const char *orphan = r->info.format == LK_TRACE_PERFETTO ? "?:?" : "rd:orphan";

	assert_int_equal(count(r, "rd:outer", LK_PROBE_SPAN_END, true), 10);
	assert_int_equal(count(r, "rd:inner", LK_PROBE_SPAN_END, true), 10);
	assert_int_equal(count(r, orphan, LK_PROBE_SPAN_END, false), 1);
	assert_int_equal(count(r, "rd:left_open", LK_PROBE_SPAN_BEGIN, false), 1);
	assert_int_equal(count(r, "rd:step", LK_PROBE_EVENT, false), 10);
	for (size_t i = 0; i < r->n; i++) {
		const struct seen *s = &r->v[i];

		if (strcmp(s->name, "rd:inner") == 0 && s->kind == LK_PROBE_SPAN_END) {
			assert_int_equal(s->depth, 1); /* inside outer */
			assert_string_equal(r->v[s->begin_seq].name, "rd:inner");
			assert_int_equal(r->v[s->begin_seq].kind, LK_PROBE_SPAN_BEGIN);
			assert_int_equal(r->v[s->begin_seq].tid, s->tid);
		}
		if (strcmp(s->name, "rd:level") == 0) /* i * 10 - 20, an integer */
			assert_int_equal(((int64_t)s->value + 20) % 10, 0);
		if (strcmp(s->name, "rd:ratio") == 0) /* i / 4.0, a double */
			assert_true(s->value * 4 == (double)(int64_t)(s->value * 4));
		if (strcmp(s->name, "rd:step") == 0 || strcmp(s->name, "rd:outer") == 0)
			assert_true(strcmp(s->thread, "rd-main") == 0 ||
				    strcmp(s->thread, "rd-second") == 0);
	}
}

static void free_reading(struct reading *r)
{
	free(r->v);
	memset(r, 0, sizeof(*r));
}

/*
 * The arguments by index and by name, with their types (JSON keeps a number's sign only), decoded
 * from the event's record on demand: again from a copy of the event, none past the last.
 */
static void check_arguments(const char *path, enum lk_probe_type positive)
{
	struct lk_trace_file *tf;
	struct lk_trace_event ev;
	size_t steps = 0;

	assert_int_equal(lk_trace_file_open(path, &tf), 0);
	while (lk_trace_file_next(tf, &ev) == 1) {
		struct lk_trace_arg a[3], named, again;
		struct lk_trace_event copy = ev;

		if (ev.nargs == 0)
			assert_int_equal(lk_trace_event_arg(&ev, 0, &again), -ERANGE);
		if (strcmp(ev.name, "step") != 0)
			continue;
		steps++;
		assert_int_equal(ev.nargs, 3);
		for (unsigned int i = 0; i < 3; i++)
			assert_int_equal(lk_trace_event_arg(&ev, i, &a[i]), 0);
		assert_int_equal(lk_trace_event_arg(&ev, 3, &again), -ERANGE);
		assert_int_equal(a[0].type, positive);
		assert_int_equal(a[1].type, a[0].v.i64 == 0 ? positive : LK_PROBE_I64);
		assert_int_equal(a[0].v.i64, -a[1].v.i64);
		assert_int_equal(a[2].type, LK_PROBE_STR);
		assert_string_equal(a[2].v.str, "inner");
		assert_string_not_equal(a[1].name, a[2].name);
		assert_int_equal(lk_trace_event_arg_named(&ev, a[2].name, &named), 0);
		assert_string_equal(named.name, a[2].name);
		assert_ptr_equal(named.v.str, a[2].v.str);
		assert_int_equal(lk_trace_event_arg_named(&copy, a[1].name, &named), 0);
		assert_int_equal(named.type, a[1].type);
		assert_int_equal(named.v.i64, a[1].v.i64);
		assert_int_equal(lk_trace_event_arg_named(&ev, "no such argument", &named),
				 -ENOENT);
	}
	assert_int_equal(steps, 10);
	lk_trace_file_close(tf);
}

static void one_recording_in_three_formats(void **state)
{
	char base[256], ctf[300], json[300], pft[300], err[512];
	struct reading r[3];

	(void)state;
	lkt_path(base, sizeof(base), "trace-reader");
	snprintf(ctf, sizeof(ctf), "%s.ctf", base);
	snprintf(json, sizeof(json), "%s.json", base);
	snprintf(pft, sizeof(pft), "%s.pftrace", base);
	record(ctf, LK_TRACE_CTF);
	assert_int_equal(lk__trace_convert(ctf, json, LK_TRACE_JSON, err, sizeof(err)), 0);
	assert_int_equal(lk__trace_convert(ctf, pft, LK_TRACE_PERFETTO, err, sizeof(err)), 0);
	read_all(ctf, &r[0]);
	read_all(json, &r[1]);
	read_all(pft, &r[2]);
	assert_int_equal(r[0].info.format, LK_TRACE_CTF);
	assert_int_equal(r[1].info.format, LK_TRACE_JSON);
	assert_int_equal(r[2].info.format, LK_TRACE_PERFETTO);
	check_recording(&r[0]);
	same_events(&r[0], &r[1]);
	same_events(&r[0], &r[2]);
	check_arguments(ctf, LK_PROBE_I64);
	check_arguments(pft, LK_PROBE_I64);
	check_arguments(json, LK_PROBE_U64); /* JSON keeps no type: i is not negative */
	for (int i = 0; i < 3; i++)
		free_reading(&r[i]);
	lkt_rmrf(ctf);
	unlink(json);
	unlink(pft);
}

static void each_format_as_recorded(void **state)
{
	static const enum lk_trace_format formats[] = {
		LK_TRACE_CTF,
		LK_TRACE_JSON,
		LK_TRACE_PERFETTO,
	};
	char path[256];

	(void)state;
	for (int i = 0; i < 3; i++) {
		struct reading r;

		lkt_path(path, sizeof(path), "trace-reader-own");
		record(path, formats[i]);
		read_all(path, &r);
		assert_int_equal(r.info.format, formats[i]);
		check_recording(&r);
		free_reading(&r);
		lkt_rmrf(path);
	}
}

static void write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
}

static uint8_t *file_bytes(const char *path, size_t *len)
{
	struct stat st;
	uint8_t *data;
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0 && fstat(fd, &st) == 0);
	data = malloc((size_t)st.st_size + 1);
	assert_non_null(data);
	assert_int_equal(read(fd, data, (size_t)st.st_size), st.st_size);
	close(fd);
	*len = (size_t)st.st_size;
	return data;
}

static void refused(const char *path, int expected)
{
	struct lk_trace_file *tf = NULL;

	assert_int_equal(lk_trace_file_open(path, &tf), expected);
	assert_null(tf);
	assert_true(strlen(lk_last_error()) > 0);
}

static void damaged_input_is_refused(void **state)
{
	char base[256], ctf[300], json[300], pft[300], bad[300], err[512];
	static const char garbage[] = "\x7f"
				      "ELF not a trace at all";
	size_t len;
	uint8_t *data;

	(void)state;
	lkt_path(base, sizeof(base), "trace-reader-bad");
	snprintf(ctf, sizeof(ctf), "%s.ctf", base);
	snprintf(json, sizeof(json), "%s.json", base);
	snprintf(pft, sizeof(pft), "%s.pftrace", base);
	snprintf(bad, sizeof(bad), "%s.bad", base);
	record(ctf, LK_TRACE_CTF);
	assert_int_equal(lk__trace_convert(ctf, json, LK_TRACE_JSON, err, sizeof(err)), 0);
	assert_int_equal(lk__trace_convert(ctf, pft, LK_TRACE_PERFETTO, err, sizeof(err)), 0);

	refused(base, -ENOENT);
	write_file(bad, garbage, sizeof(garbage) - 1);
	refused(bad, -EINVAL);
	write_file(bad, "", 0);
	refused(bad, -EINVAL);
	data = file_bytes(json, &len);
	write_file(bad, data, len / 2); /* cut short */
	refused(bad, -EINVAL);
	free(data);
	data = file_bytes(pft, &len);
	data[len / 2] ^= 0xff; /* one byte damaged: refused, or read as what it now says */
	write_file(bad, data, len);
	{
		struct lk_trace_file *tf;
		struct lk_trace_event ev;
		int rc = lk_trace_file_open(bad, &tf);

		assert_true(rc == 0 || rc == -EINVAL);
		while (rc == 0 && lk_trace_file_next(tf, &ev) == 1)
			;
		if (rc == 0)
			lk_trace_file_close(tf);
	}
	write_file(bad, data, len - 3); /* the last packet cut short */
	refused(bad, -EINVAL);
	free(data);
	unlink(bad);
	lkt_rmrf(ctf);
	unlink(json);
	unlink(pft);
}

/* A path that is not there cannot be opened; one that is there and is no trace is not a trace. */
static void missing_trace_is_not_called_a_bad_one(void **state)
{
	char dir[256], missing[300], want[400];

	(void)state;
	lkt_path(dir, sizeof(dir), "trace-reader-missing");
	snprintf(missing, sizeof(missing), "%s/nosuch.ctf", dir);
	assert_int_equal(mkdir(dir, 0700), 0);

	refused(missing, -ENOENT);
	snprintf(want, sizeof(want), "cannot open %s: %s", missing, strerror(ENOENT));
	assert_non_null(strstr(lk_last_error(), want));
	assert_null(strstr(lk_last_error(), "not a lowkey trace"));

	refused(dir, -EINVAL); /* a directory that exists but holds no trace */
	assert_non_null(strstr(lk_last_error(), "not a CTF trace"));
	assert_null(strstr(lk_last_error(), "cannot open"));
	assert_int_equal(rmdir(dir), 0);
}

/* ---- streaming: an event's strings while the merge goes on, a stream damaged in its middle ---- */

#define BIG_EVENTS 30000 /* per thread: a few of lowkey's 256 KiB packets, strings and all */

static void *big_thread(void *arg)
{
	long base = (long)arg;
	char label[64];

	for (long i = 0; i < BIG_EVENTS; i++) {
		long n = base + i;

		snprintf(label, sizeof(label), "row-%ld-of-a-label-long-enough-to-fill-packets", n);
		LK_PROBE(rd, big, n, label);
	}
	return NULL;
}

/* Two threads recording at once, each over several packets: their events interleave in time. */
static void record_big(const char *path)
{
	struct lk_trace_config c = { .path = path, .buffer_size = 16u << 20 };
	pthread_t t[2];

	assert_true(lk_probe_enable("rd") >= 0);
	assert_int_equal(lk_trace_start(&c), 0);
	for (long i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, big_thread, (void *)(i * 1000000));
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(lk_trace_stop(), 0);
}

/* What a read of the big trace gave: each rd:big event's tid, time and number. */
struct big_reading {
	struct {
		int tid;
		uint64_t ns;
		int64_t n;
	} *v;
	size_t n, cap;
	int rc; /* what ended it */
};

/*
 * Read the big trace: every rd:big event's string, as given, says the number its other argument
 * has -- including the last event of each packet, whose stream moves on to its next packet only at
 * the next call.
 */
static void read_big(const char *path, struct big_reading *out)
{
	struct lk_trace_file *tf;
	struct lk_trace_event ev;
	char want[64];

	memset(out, 0, sizeof(*out));
	assert_int_equal(lk_trace_file_open(path, &tf), 0);
	while ((out->rc = lk_trace_file_next(tf, &ev)) == 1) {
		struct lk_trace_arg row, label;

		if (strcmp(ev.name, "big") != 0)
			continue;
		assert_int_equal(ev.nargs, 2);
		assert_int_equal(lk_trace_event_arg(&ev, 0, &row), 0);
		assert_int_equal(lk_trace_event_arg(&ev, 1, &label), 0);
		snprintf(want, sizeof(want),
			 "row-%" PRId64 "-of-a-label-long-enough-to-fill-packets", row.v.i64);
		assert_string_equal(label.v.str, want);
		if (out->n == out->cap) {
			out->cap = out->cap ? 2 * out->cap : 4096;
			out->v = realloc(out->v, out->cap * sizeof(*out->v));
			assert_non_null(out->v);
		}
		out->v[out->n].tid = ev.tid;
		out->v[out->n].ns = ev.ns;
		out->v[out->n++].n = row.v.i64;
	}
	if (out->rc == -EINVAL) {
		assert_non_null(strstr(lk_last_error(), "is damaged at byte"));
		assert_int_equal(lk_trace_file_next(tf, &ev), -EINVAL); /* and stays so */
	}
	lk_trace_file_close(tf);
}

static void strings_live_until_the_next_call(void **state)
{
	char path[256];
	struct big_reading r;
	size_t per_thread[2] = { 0, 0 };

	(void)state;
	lkt_path(path, sizeof(path), "trace-reader-big");
	record_big(path);
	read_big(path, &r);
	assert_int_equal(r.rc, 0);
	assert_int_equal(r.n, 2 * BIG_EVENTS);
	for (size_t i = 0; i < r.n; i++) {
		per_thread[r.v[i].n >= 1000000]++;
		if (i)
			assert_true(r.v[i].ns >= r.v[i - 1].ns);
	}
	assert_int_equal(per_thread[0], BIG_EVENTS);
	assert_int_equal(per_thread[1], BIG_EVENTS);
	free(r.v);
	lkt_rmrf(path);
}

/* The largest probe stream of the trace at dir: its path into file. */
static void largest_stream(const char *dir, char *file, size_t len)
{
	char name[512];
	off_t best = -1;
	struct stat st;
	struct dirent *e;
	DIR *d = opendir(dir);

	assert_non_null(d);
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, "stream-", 7) != 0 || strstr(e->d_name, "-sched"))
			continue;
		snprintf(name, sizeof(name), "%s/%s", dir, e->d_name);
		if (stat(name, &st) == 0 && st.st_size > best) {
			best = st.st_size;
			snprintf(file, len, "%s", name);
		}
	}
	closedir(d);
	assert_true(best > 0);
}

/*
 * A damaged trace never reaches its end: counted on demand, it counts each stream's events up to
 * its damage (want: the big trace has only rd:big events), and the reading still gives the same
 * events, then -EINVAL.
 */
static void check_count_of_damaged(const char *path, size_t given, uint64_t want)
{
	uint64_t counted = 0, n = 0;
	struct lk_trace_file *tf;
	struct lk_trace_event ev;
	struct lk_trace_thread th;
	int rc;

	assert_int_equal(lk_trace_file_open(path, &tf), 0);
	while ((rc = lk_trace_file_next(tf, &ev)) == 1)
		n++;
	assert_int_equal(rc, -EINVAL);
	assert_int_equal(lk_trace_file_get_info(tf)->events, 0); /* no end: not counted */
	lk_trace_file_rewind(tf);
	assert_int_equal(lk_trace_file_count(tf), 0);
	for (unsigned int i = 0; i < lk_trace_file_get_info(tf)->threads; i++) {
		assert_int_equal(lk_trace_file_thread(tf, i, &th), 0);
		counted += th.events;
	}
	assert_int_equal(counted, lk_trace_file_get_info(tf)->events);
	assert_int_equal(counted, want);
	n = 0;
	while ((rc = lk_trace_file_next(tf, &ev)) == 1)
		n++;
	assert_int_equal(rc, -EINVAL);
	assert_int_equal(n, given);
	lk_trace_file_close(tf);
}

static void damaged_stream_errs_after_earlier_events(void **state)
{
	char path[256], stream[512];
	struct big_reading whole, cut;
	uint64_t packet, header = UINT64_MAX; /* event id 0xffff: no class has it */
	size_t k = 0, from_damaged = 0, total_damaged = 0;
	int fd, tid;

	(void)state;
	lkt_path(path, sizeof(path), "trace-reader-damaged");
	record_big(path);
	read_big(path, &whole);
	largest_stream(path, stream, sizeof(stream));
	tid = atoi(strrchr(stream, '-') + 1);
	/* the first record of the stream's second packet: the packet_size of the first says where */
	fd = open(stream, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &packet, 8, 56), 8);
	packet /= 8;
	assert_int_equal(pwrite(fd, &header, 8, (off_t)packet + 80), 8);
	close(fd);
	read_big(path, &cut);
	assert_int_equal(cut.rc, -EINVAL);
	/* the events given are the undamaged merge's up to the damaged stream's last good one */
	for (size_t i = 0; i < whole.n; i++)
		total_damaged += whole.v[i].tid == tid;
	for (k = 0; k < cut.n; k++) {
		assert_int_equal(cut.v[k].tid, whole.v[k].tid);
		assert_int_equal(cut.v[k].n, whole.v[k].n);
		from_damaged += cut.v[k].tid == tid;
	}
	assert_true(from_damaged > 0 && from_damaged < total_damaged);
	assert_int_equal(cut.v[cut.n - 1].tid, tid); /* no later event of the other thread */
	/* counted: the damaged stream's events before the damage, all of the other's */
	check_count_of_damaged(path, cut.n, whole.n - total_damaged + from_damaged);
	free(whole.v);
	free(cut.v);
	lkt_rmrf(path);
}

#define MANY 100 /* streams: more than a reader keeps open at once */

static void copy_file(const char *from, const char *to)
{
	size_t len;
	uint8_t *data = file_bytes(from, &len);

	write_file(to, data, len);
	free(data);
}

/*
 * A trace of MANY threads (one recorded stream copied MANY times, as threads 1 to MANY) reads
 * whole with fewer file descriptors than streams: a stream's file is open only while a packet of
 * it is read.
 */
static void many_streams_few_descriptors(void **state)
{
	char path[256], many[256], from[512], to[512];
	struct lk_trace_file *tf;
	struct lk_trace_event ev;
	struct rlimit was, few;
	uint64_t per_stream, n = 0;
	int rc;

	(void)state;
	lkt_path(path, sizeof(path), "trace-reader-one");
	lkt_path(many, sizeof(many), "trace-reader-many");
	record_big(path);
	largest_stream(path, from, sizeof(from));
	assert_int_equal(mkdir(many, 0700), 0);
	for (int i = 1; i <= MANY; i++) {
		snprintf(to, sizeof(to), "%s/stream-%d", many, i);
		copy_file(from, to);
	}
	snprintf(from, sizeof(from), "%s/metadata", path);
	snprintf(to, sizeof(to), "%s/metadata", many);
	copy_file(from, to);
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &was), 0);
	few = was;
	few.rlim_cur = MANY / 2;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &few), 0);
	rc = lk_trace_file_open(many, &tf);
	assert_int_equal(rc, 0);
	assert_int_equal(lk_trace_file_get_info(tf)->threads, MANY);
	while ((rc = lk_trace_file_next(tf, &ev)) == 1)
		n++;
	assert_int_equal(rc, 0);
	per_stream = lk_trace_file_get_info(tf)->events / MANY;
	lk_trace_file_rewind(tf);
	assert_int_equal(lk_trace_file_next(tf, &ev), 1);
	assert_int_equal(lk_trace_file_count(tf), 0); /* the counting pass too, file by file */
	assert_int_equal(lk_trace_file_get_info(tf)->events, n);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &was), 0);
	assert_true(per_stream > 0);
	assert_int_equal(n, per_stream * MANY);
	lk_trace_file_close(tf);
	lkt_rmrf(path);
	lkt_rmrf(many);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(one_recording_in_three_formats),
		cmocka_unit_test(each_format_as_recorded),
		cmocka_unit_test(damaged_input_is_refused),
		cmocka_unit_test(missing_trace_is_not_called_a_bad_one),
		cmocka_unit_test(strings_live_until_the_next_call),
		cmocka_unit_test(damaged_stream_errs_after_earlier_events),
		cmocka_unit_test(many_streams_few_descriptors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
