// SPDX-License-Identifier: MIT
/*
 * The flight recorder (LK_TRACE_OVERWRITE): each thread's ring keeps exactly its newest events,
 * the count of the others is exact, snapshots can be taken again and again, while several threads
 * record at full speed (every event whole, in order, and per thread "written + discarded" equal
 * to what it recorded up to its last written event), from a signal, and from threads that exited.
 * Errors: a snapshot of a streaming trace, of no trace, to a path in use or unwritable.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <lowkey/lowkey.h>

#include "consumer_hold.h"
#include "probe/probe_internal.h"
#include "trace_check.h"

#define RING (64 << 10) /* 8 sub-buffers of 8 KiB */

static void start_overwrite(char *dir, size_t len, const char *what, unsigned int flags)
{
	struct lk_trace_config c = {
		.path = dir, .buffer_size = RING, .flush_ms = 5, .flags = LK_TRACE_OVERWRITE | flags
	};

	lkt_path(dir, len, what);
	assert_int_equal(lk_trace_start(&c), 0);
}

/* Per stream: its thread, events in order, and its discarded count. */
struct fr_stream {
	int tid;
	char name[32];
	uint64_t events, lost, first, last; /* values of argument 0 */
	bool in_order, whole;
};

struct fr_trace {
	struct fr_stream s[64];
	int n;
	const char *event; /* provider:event of the sequence */
	bool overwrite;	   /* the metadata says: a flight recorder's snapshot */
	uint64_t dropped;
};

static int fr_begin(const struct lk__stream_info *si, void *arg)
{
	struct fr_trace *t = arg;
	struct fr_stream *s = &t->s[t->n];

	if (t->n == 64)
		return -1;
	memset(s, 0, sizeof(*s));
	s->tid = si->tid;
	s->first = UINT64_MAX;
	s->in_order = s->whole = true;
	return 0;
}

static int fr_event(const struct lk__event *e, void *arg)
{
	struct fr_trace *t = arg;
	struct fr_stream *s = &t->s[t->n];
	char name[128];
	uint64_t v[2] = { 0, 0 };
	const char *str;
	size_t off = 0;

	snprintf(name, sizeof(name), "%s:%s", e->cls->provider, e->cls->event);
	if (e->cls->kind == 0 && e->cls->nargs == 1) { /* lowkey:thread_name */
		lk__event_arg(e, 0, 0, v, &str);
		snprintf(s->name, sizeof(s->name), "%s", str ? str : "");
		return 0;
	}
	if (strcmp(name, t->event) != 0)
		return 0;
	for (unsigned int i = 0; i < e->cls->nargs && i < 2; i++) {
		off = lk__event_arg(e, off, i, &v[i], &str);
		if (!off)
			return -2;
	}
	if (v[1] != v[0] * 3 + 1)
		s->whole = false; /* a torn event */
	if (s->first == UINT64_MAX)
		s->first = v[0];
	else if (v[0] <= s->last)
		s->in_order = false;
	s->last = v[0];
	s->events++;
	return 0;
}

static int fr_end(const struct lk__stream_info *si, void *arg)
{
	struct fr_trace *t = arg;

	t->s[t->n].lost = si->lost;
	t->n++;
	return 0;
}

static void fr_read(struct fr_trace *t, const char *dir, const char *event)
{
	const struct lk__reader_ops ops = { fr_begin, fr_event, fr_end };
	struct lk__trace_reader r;
	char err[512];
	int rc;

	memset(t, 0, sizeof(*t));
	t->event = event;
	rc = lk__reader_open(&r, dir, err, sizeof(err));
	if (rc == 0)
		rc = lk__reader_walk(&r, &ops, t, err, sizeof(err));
	t->overwrite = r.overwrite;
	t->dropped = r.dropped;
	if (rc)
		fail_msg("reading %s: %s", dir, err);
	lk__reader_close(&r);
}

static struct fr_stream *stream_of(struct fr_trace *t, int tid)
{
	for (int i = 0; i < t->n; i++)
		if (t->s[i].tid == tid)
			return &t->s[i];
	return NULL;
}

/* ---- one thread: exactly the newest events, exactly counted ---- */

static void record_sequence(uint64_t from, uint64_t to)
{
	for (uint64_t i = from; i < to; i++)
		LK_PROBE(fr, seq, i, i * 3 + 1);
}

/* The stream holds from..to-1 with nothing missing, and says the from before it were discarded. */
static void check_newest(struct fr_stream *s, uint64_t to)
{
	assert_non_null(s);
	assert_true(s->whole);
	assert_true(s->in_order);
	assert_int_equal(s->last, to - 1);		     /* the newest is there */
	assert_int_equal(s->last - s->first + 1, s->events); /* contiguous */
	assert_int_equal(s->lost, s->first);		     /* exactly the older ones */
	/* at least the 7 sub-buffers before the current one: 7 * 8 KiB of 24-byte records */
	assert_true(s->events >= 7 * (RING / 8 / 24));
	assert_true(s->events * 24 <= RING);
}

static void keeps_exactly_the_newest(void **state)
{
	char dir[256], snap[300], own_name[16 + 1] = "";
	struct fr_trace t;
	struct stat st;

	(void)state;
	assert_true(lk_probe_enable("fr") >= 0);
	start_overwrite(dir, sizeof(dir), "fr-newest", 0);
	record_sequence(0, 100000);
	assert_int_equal(stat(dir, &st), -1); /* nothing written before a snapshot */
	assert_int_equal(lk_trace_snapshot(NULL), 0);
	fr_read(&t, dir, "fr:seq");
	assert_int_equal(t.n, 1);
	check_newest(&t.s[0], 100000);
	assert_true(t.overwrite);	/* its losses: overwritten, */
	assert_int_equal(t.dropped, 0); /* none dropped */
	/* the thread's name, kept (under qemu-user without binfmt_misc it is the emulator's) */
	assert_int_equal(prctl(PR_GET_NAME, own_name), 0);
	assert_string_equal(t.s[0].name, own_name);

	/* again, further on, to a path of our own */
	record_sequence(100000, 100500);
	snprintf(snap, sizeof(snap), "%s-mine", dir);
	assert_int_equal(lk_trace_snapshot(snap), 0);
	fr_read(&t, snap, "fr:seq");
	check_newest(&t.s[0], 100500);

	/* and to the next default name */
	record_sequence(100500, 100501);
	assert_int_equal(lk_trace_snapshot(NULL), 0);
	snprintf(snap, sizeof(snap), "%s.1", dir);
	fr_read(&t, snap, "fr:seq");
	check_newest(&t.s[0], 100501);
	assert_int_equal(lk_trace_stop(), 0);
	assert_int_equal(stat(snap, &st), 0);
	snprintf(snap, sizeof(snap), "%s.2", dir);
	assert_int_equal(stat(snap, &st), -1); /* stopping writes nothing */
	lkt_rmrf(dir);
	snprintf(snap, sizeof(snap), "%s.1", dir);
	lkt_rmrf(snap);
	snprintf(snap, sizeof(snap), "%s-mine", dir);
	lkt_rmrf(snap);
	lk_probe_reset_rules();
}

/* Fewer events than the ring holds: all of them, none discarded; then strings and CPU time. */
/* ---- a sub-buffer that cannot start: its one event dropped, the older one retired once ---- */

#define PER_AREA (8192 / 24) /* fr:seq records in a sub-buffer of RING */

static struct lk__probe_buffer *my_ring(void)
{
	for (struct lk__probe_buffer *b = lk__probe_buffers; b; b = b->next)
		if (b->tid == gettid() && !b->dead && b->trace_gen == lk__trace.gen)
			return b;
	return NULL;
}

/*
 * Both areas a new sub-buffer may take (its slot's and the spare) held by readers, as the
 * protocol's one reader never does: the event that needed it is dropped and counted, and the
 * sub-buffer that left the ring at that start is not counted again when the next event starts it.
 */
static void a_refused_start_is_counted_once(void **state)
{
	uint64_t next = (uint64_t)PER_AREA * 10, end = next + (uint64_t)PER_AREA * 12;
	struct lk__probe_buffer *b;
	unsigned int held[2];
	char dir[256];
	struct fr_trace t;

	(void)state;
	assert_true(lk_probe_enable("fr") >= 0);
	start_overwrite(dir, sizeof(dir), "fr-refused", 0);
	record_sequence(0, next); /* sub-buffers 0..9, full: the next event starts 10 */
	lkt_hold_consumer(true);  /* its counting holds areas too */
	b = my_ring();
	assert_non_null(b);
	assert_int_equal(b->seq, 9);
	held[0] = b->slot_area[10 % LK__SLOTS];
	held[1] = b->spare;
	for (int i = 0; i < 2; i++)
		__atomic_fetch_or(&b->areas[held[i]].state, LK__AREA_READING, __ATOMIC_ACQ_REL);
	LK_PROBE(fr, seq, next, next * 3 + 1); /* no room: dropped */
	assert_int_equal(b->seq, 9);
	for (int i = 0; i < 2; i++)
		__atomic_fetch_and(&b->areas[held[i]].state, ~LK__AREA_READING, __ATOMIC_RELEASE);
	lkt_hold_consumer(false);
	record_sequence(next + 1, end); /* 10 starts now; the dropped one is overwritten since */
	assert_int_equal(lk_trace_snapshot(NULL), 0);
	fr_read(&t, dir, "fr:seq");
	assert_int_equal(t.n, 1);
	assert_int_equal(t.dropped, 1);
	/* lost: the one dropped and those overwritten, which are one fewer than the first value */
	assert_int_equal(t.s[0].lost, t.s[0].first);
	assert_int_equal(t.s[0].last, end - 1);
	assert_int_equal(t.s[0].last - t.s[0].first + 1, t.s[0].events);
	assert_int_equal(lk_trace_stop(), 0);
	lkt_rmrf(dir);
}

static void short_run_and_variable_records(void **state)
{
	char dir[256];
	struct fr_trace t;

	(void)state;
	assert_true(lk_probe_enable("fr") >= 0);
	start_overwrite(dir, sizeof(dir), "fr-short", LK_TRACE_CPUTIME);
	record_sequence(0, 100);
	assert_int_equal(lk_trace_snapshot(NULL), 0);
	fr_read(&t, dir, "fr:seq");
	assert_int_equal(t.s[0].events, 100);
	assert_int_equal(t.s[0].first, 0);
	assert_int_equal(t.s[0].lost, 0);
	lkt_rmrf(dir);

	/* records of many sizes: the count of what was overwritten stays exact */
	for (uint64_t i = 100; i < 30000; i++) {
		char s[64];

		snprintf(s, sizeof(s), "%.*s", (int)(i % 50),
			 "0123456789012345678901234567890123456789012345678901");
		LK_PROBE(fr, seq, i, i * 3 + 1, s);
	}
	assert_int_equal(lk_trace_snapshot(NULL), 0);
	snprintf(dir + strlen(dir), sizeof(dir) - strlen(dir), ".1");
	fr_read(&t, dir, "fr:seq");
	assert_true(t.s[0].whole && t.s[0].in_order);
	assert_int_equal(t.s[0].last, 29999);
	assert_int_equal(t.s[0].last - t.s[0].first + 1, t.s[0].events);
	assert_int_equal(t.s[0].lost, t.s[0].first);
	assert_int_equal(lk_trace_stop(), 0);
	lkt_rmrf(dir);
	dir[strlen(dir) - 2] = 0;
	lkt_rmrf(dir);
	lk_probe_reset_rules();
}

/* The packets of a stream file: how many, and the largest (bytes, prefix included). */
static void packet_sizes(const char *dir, int tid, unsigned int *n, uint64_t *largest)
{
	char path[512];
	uint8_t prefix[LK__CTF_PACKET_PREFIX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/stream-%d", dir, tid);
	f = fopen(path, "rb");
	assert_non_null(f);
	*n = 0;
	*largest = 0;
	while (fread(prefix, 1, sizeof(prefix), f) == sizeof(prefix)) {
		uint64_t bits;

		memcpy(&bits, prefix + 56,
		       sizeof(bits)); /* packet_size, after the header's 32 bytes */
		assert_true(bits % 8 == 0 && bits >= 8 * sizeof(prefix));
		if (bits / 8 > *largest)
			*largest = bits / 8;
		++*n;
		assert_int_equal(fseek(f, (long)(bits / 8 - sizeof(prefix)), SEEK_CUR), 0);
	}
	fclose(f);
}

/*
 * Sub-buffers larger than a packet: each is written as several, split wherever the records of
 * many sizes (strings) reach 256 KiB, with every event whole, in order, and counted once.
 */
static void packets_split_inside_large_sub_buffers(void **state)
{
	struct lk_trace_config c = { .buffer_size = 4 << 20,
				     .flags = LK_TRACE_OVERWRITE | LK_TRACE_CPUTIME };
	const uint64_t events = 300000; /* about 11 MiB of records: the 4 MiB ring laps */
	char dir[256], cmd[600];
	struct fr_trace t;
	uint64_t largest;
	unsigned int packets;

	(void)state;
	assert_true(lk_probe_enable("fr") >= 0);
	lkt_path(dir, sizeof(dir), "fr-split");
	c.path = dir;
	assert_int_equal(lk_trace_start(&c), 0);
	for (uint64_t i = 0; i < events; i++) {
		char s[64];

		snprintf(s, sizeof(s), "%.*s", (int)(i % 41),
			 "01234567890123456789012345678901234567890");
		LK_PROBE(fr, seq, i, i * 3 + 1, s);
	}
	assert_int_equal(lk_trace_snapshot(NULL), 0);
	fr_read(&t, dir, "fr:seq");
	assert_int_equal(t.n, 1);
	assert_true(t.s[0].whole && t.s[0].in_order);
	assert_int_equal(t.s[0].last, events - 1); /* the ring's last event */
	assert_int_equal(t.s[0].last - t.s[0].first + 1, t.s[0].events);
	assert_int_equal(t.s[0].lost, t.s[0].first);
	packet_sizes(dir, t.s[0].tid, &packets, &largest);
	assert_true(packets > 2 * 7); /* the name's, then 2 or more for each 512 KiB sub-buffer */
	assert_true(largest <= (256 << 10) + LK__CTF_PACKET_PREFIX);
	if (system("command -v babeltrace2 >/dev/null") == 0) {
		snprintf(cmd, sizeof(cmd),
			 "test $(babeltrace2 '%s' 2>/dev/null | grep -c 'fr:seq:') = %llu", dir,
			 (unsigned long long)t.s[0].events);
		assert_int_equal(system(cmd), 0);
	}
	assert_int_equal(lk_trace_stop(), 0);
	lkt_rmrf(dir);
	lk_probe_reset_rules();
}

/* A JSON trace's snapshots are JSON files, converted from the CTF written beside them. */
static void json_snapshots(void **state)
{
	struct lk_trace_config c = { .format = LK_TRACE_JSON,
				     .buffer_size = RING,
				     .flags = LK_TRACE_OVERWRITE };
	char path[256], text[4096];
	size_t n;
	FILE *f;

	(void)state;
	assert_true(lk_probe_enable("fr") >= 0);
	lkt_path(path, sizeof(path), "fr-json");
	c.path = path;
	assert_int_equal(lk_trace_start(&c), 0);
	record_sequence(0, 100000);
	assert_int_equal(lk_trace_snapshot(NULL), 0);
	assert_int_equal(lk_trace_stop(), 0);
	f = fopen(path, "r");
	assert_non_null(f);
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = 0;
	assert_non_null(strstr(text, "\"name\":\"seq\",\"cat\":\"fr\""));
	assert_null(strstr(text, "\"i\":0,")); /* not the oldest event */
	f = fopen(path, "r");
	n = fread(text, 1, sizeof(text) - 1, (fseek(f, -(long)sizeof(text) + 1, SEEK_END), f));
	fclose(f);
	text[n] = 0;
	assert_non_null(strstr(text, "\"i\":99999,")); /* the newest, near the end */
	snprintf(text, sizeof(text), "ls -d '%s'.ctf-* 2>/dev/null | grep -q .", path);
	assert_int_equal(system(text), 256); /* no CTF directory left beside it */
	lkt_rmrf(path);
	lk_probe_reset_rules();
}

/* ---- several threads at full speed, snapshots meanwhile ---- */

#define WRITERS 4

static int writers_stop;

struct writer {
	pthread_t thread;
	int tid;
	uint64_t done;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	uint64_t i = 0;

	__atomic_store_n(&w->tid, gettid(), __ATOMIC_RELEASE);
	while (!__atomic_load_n(&writers_stop, __ATOMIC_ACQUIRE)) {
		for (int k = 0; k < 256; k++, i++)
			LK_PROBE(fr, par, i, i * 3 + 1);
		__atomic_store_n(&w->done, i, __ATOMIC_RELEASE);
	}
	return NULL;
}

static void snapshots_while_threads_record(void **state)
{
	struct writer w[WRITERS];
	int seen[WRITERS] = { 0 };
	char dir[256], snap[300];
	struct fr_trace t;

	(void)state;
	memset(w, 0, sizeof(w));
	assert_true(lk_probe_enable("fr") >= 0);
	start_overwrite(dir, sizeof(dir), "fr-par", 0);
	writers_stop = 0;
	for (int i = 0; i < WRITERS; i++)
		assert_int_equal(pthread_create(&w[i].thread, NULL, writer_main, &w[i]), 0);
	for (int i = 0; i < WRITERS; i++)
		while (__atomic_load_n(&w[i].done, __ATOMIC_ACQUIRE) < 100000)
			usleep(1000);
	for (int round = 0; round < 20; round++) {
		snprintf(snap, sizeof(snap), "%s-%d", dir, round);
		assert_int_equal(lk_trace_snapshot(snap), 0);
		fr_read(&t, snap, "fr:par");
		for (int i = 0; i < WRITERS; i++) {
			struct fr_stream *s = stream_of(&t, w[i].tid);

			/*
			 * A writer may be missing from a round: one that went round its whole ring
			 * several times while the snapshot got to it (a preempted snapshot) left
			 * nothing of what it had.
			 */
			if (!s)
				continue;
			seen[i]++;
			assert_true(s->whole); /* no torn event */
			assert_true(s->in_order);
			assert_true(s->events > 0);
			/* written + discarded == what it recorded up to its last written event */
			assert_int_equal(s->events + s->lost, s->last + 1);
		}
		lkt_rmrf(snap);
	}
	for (int i = 0; i < WRITERS; i++)
		assert_true(seen[i] > 0);
	__atomic_store_n(&writers_stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < WRITERS; i++)
		pthread_join(w[i].thread, NULL);

	/* still, and exited: every thread's newest events, exactly */
	assert_int_equal(lk_trace_snapshot(NULL), 0);
	fr_read(&t, dir, "fr:par");
	for (int i = 0; i < WRITERS; i++) {
		struct fr_stream *s = stream_of(&t, w[i].tid);

		assert_non_null(s);
		assert_int_equal(s->last + 1, w[i].done);
		assert_int_equal(s->last - s->first + 1, s->events);
		assert_int_equal(s->lost, s->first);
	}
	assert_int_equal(lk_trace_stop(), 0);
	lkt_rmrf(dir);
	lk_probe_reset_rules();
}

/* ---- a snapshot on a signal ---- */

static void snapshot_on_signal(void **state)
{
	char dir[256], meta[300];
	struct fr_trace t;
	struct stat st;

	(void)state;
	assert_true(lk_probe_enable("fr") >= 0);
	start_overwrite(dir, sizeof(dir), "fr-signal", 0);
	assert_int_equal(lk_trace_snapshot_signal(SIGUSR2), 0);
	record_sequence(0, 50000);
	raise(SIGUSR2);
	snprintf(meta, sizeof(meta), "%s/metadata", dir);
	for (int i = 0; i < 10000 && stat(meta, &st) != 0; i++)
		usleep(1000);
	assert_int_equal(lk_trace_stop(), 0); /* waits for the snapshot the consumer was taking */
	assert_int_equal(lk_trace_snapshot_signal(0), 0);
	fr_read(&t, dir, "fr:seq");
	check_newest(&t.s[0], 50000);
	lkt_rmrf(dir);
	assert_int_equal(lk_trace_snapshot_request(), -ENOENT); /* no trace */
	lk_probe_reset_rules();
}

/* ---- fork ---- */

/* A child has no flight recorder of its parent's; it may start its own, and snapshot it. */
static void a_forked_child(void **state)
{
	char dir[256], child_dir[300];
	struct fr_trace t;
	int status;
	pid_t pid;

	(void)state;
	assert_true(lk_probe_enable("fr") >= 0);
	start_overwrite(dir, sizeof(dir), "fr-fork", 0);
	record_sequence(0, 1000);
	snprintf(child_dir, sizeof(child_dir), "%s-child", dir);
	pid = fork();
	if (pid == 0) {
		struct lk_trace_config c = { .path = child_dir,
					     .buffer_size = RING,
					     .flags = LK_TRACE_OVERWRITE };
		int ok = lk_trace_snapshot(NULL) == -ENOENT; /* the parent's is not ours */

#ifdef __SANITIZE_THREAD__
		/* ThreadSanitizer cannot start threads (the consumer) after a multi-threaded fork */
		_exit(ok ? 0 : 1);
#endif
		ok = ok && lk_trace_start(&c) == 0;
		record_sequence(0, 10);
		ok = ok && lk_trace_snapshot(NULL) == 0 && lk_trace_stop() == 0;
		_exit(ok ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(status, 0);
#ifndef __SANITIZE_THREAD__
	fr_read(&t, child_dir, "fr:seq");
	assert_int_equal(t.n, 1);
	assert_int_equal(t.s[0].events, 10);
#endif
	record_sequence(1000, 1010);
	assert_int_equal(lk_trace_snapshot(NULL), 0);
	fr_read(&t, dir, "fr:seq");
	assert_int_equal(t.s[0].last, 1009);
	assert_int_equal(t.s[0].first, 0);
	assert_int_equal(lk_trace_stop(), 0);
	lkt_rmrf(dir);
	lkt_rmrf(child_dir);
	lk_probe_reset_rules();
}

/* ---- errors ---- */

/*
 * A signal the kernel sends to the thread that faults comes back each time its handler returns:
 * as the snapshot signal, a snapshot per fault. Refused, like those that cannot be caught, and
 * the handler there was is left alone.
 */
static void synchronous_snapshot_signals(void **state)
{
	static const int refused[] = { SIGSEGV, SIGBUS, SIGILL,	 SIGFPE,
				       SIGTRAP, SIGSYS, SIGKILL, SIGSTOP };
	char dir[256];

	(void)state;
	start_overwrite(dir, sizeof(dir), "fr-sync-signal", 0);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		struct sigaction before, after;

		sigaction(refused[i], NULL, &before);
		assert_int_equal(lk_trace_snapshot_signal(refused[i]), -EINVAL);
		assert_non_null(strstr(lk_last_error(), "cannot take snapshots"));
		sigaction(refused[i], NULL, &after);
		assert_true(before.sa_handler == after.sa_handler);
	}
	assert_non_null(strstr(lk_last_error(), "SIGSTOP (19)"));
	assert_int_equal(lk_trace_snapshot_signal(SIGSEGV), -EINVAL);
	assert_non_null(
		strstr(lk_last_error(), "SIGSEGV (11) cannot take snapshots: the kernel sends it"));
	assert_int_equal(lk_trace_snapshot_signal(SIGUSR2), 0); /* one that can */
	assert_int_equal(lk_trace_snapshot_signal(0), 0);
	assert_int_equal(lk_trace_stop(), 0);
	lkt_rmrf(dir);
}

static void snapshot_errors(void **state)
{
	struct lk_trace_config c = { .buffer_size = RING };
	char dir[256], other[300];

	(void)state;
	assert_int_equal(lk_trace_snapshot(NULL), -ENOENT);
	assert_int_equal(lk_trace_snapshot_signal(SIGKILL), -EINVAL);
	assert_int_equal(lk_trace_snapshot_signal(NSIG), -EINVAL);

	/* a streaming trace has nothing to snapshot */
	lkt_path(dir, sizeof(dir), "fr-stream");
	c.path = dir;
	assert_int_equal(lk_trace_start(&c), 0);
	assert_int_equal(lk_trace_snapshot(NULL), -EINVAL);
	assert_non_null(strstr(lk_last_error(), "LK_TRACE_OVERWRITE"));
	assert_int_equal(lk_trace_snapshot_request(), -ENOENT);
	assert_int_equal(lk_trace_stop(), 0);
	lkt_rmrf(dir);

	start_overwrite(dir, sizeof(dir), "fr-errors", 0);
	record_sequence(0, 10);
	/* a path in use, and one that cannot be created */
	snprintf(other, sizeof(other), "%s-file", dir);
	fclose(fopen(other, "w"));
	assert_int_equal(lk_trace_snapshot(other), -EEXIST);
	unlink(other);
	assert_true(lk_trace_snapshot("/proc/no/such/place") < 0);
	assert_non_null(strstr(lk_last_error(), "/proc/no/such/place"));
	assert_int_equal(lk_trace_snapshot(NULL), 0); /* and the next one works */
	assert_int_equal(lk_trace_stop(), 0);
	lkt_rmrf(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(keeps_exactly_the_newest),
		cmocka_unit_test(a_refused_start_is_counted_once),
		cmocka_unit_test(short_run_and_variable_records),
		cmocka_unit_test(packets_split_inside_large_sub_buffers),
		cmocka_unit_test(json_snapshots),
		cmocka_unit_test(snapshots_while_threads_record),
		cmocka_unit_test(snapshot_on_signal),
		cmocka_unit_test(a_forked_child),
		cmocka_unit_test(snapshot_errors),
		cmocka_unit_test(synchronous_snapshot_signals),
	};

#ifdef LK__SNAPSHOT_HOLD_WINDOW_US
	/* test_probe_overwrite_window: snapshot.c's race widened, where writers switch sub-buffers */
	cmocka_set_test_filter("snapshots_while_threads_record");
#endif
	return cmocka_run_group_tests(tests, NULL, NULL);
}
