// SPDX-License-Identifier: MIT
/*
 * Record boundaries that test_probe_packets and test_probe_overwrite leave out, each trace read
 * through lowkey's reader and, where it is installed, babeltrace2, with the loss accounting exact:
 *   - records that end exactly at a flight recorder's sub-buffer end, a byte short of it, and a
 *     byte past it (the record goes whole into the next sub-buffer), on the inline path and the
 *     slow one, over more sub-buffers than the ring holds; and at a streaming ring's end, where
 *     the one a byte past it is dropped (the ring full) and counted, and the next wraps;
 *   - snapshots taken while another thread fills the sub-buffer they read, records of many sizes:
 *     every event whole and in order, none committed before the snapshot began missing from it;
 *   - a fork while the parent's packet is being filled, the child recording a trace of its own:
 *     both traces whole.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <lowkey/lowkey.h>

#include "cli/run.h"
#include "consumer_hold.h"
#include "probe/probe_internal.h"
#include "trace_check.h"

#define RING (64 << 10) /* a flight recorder's: 8 sub-buffers of 8 KiB */
#define SUB_BUFFER (RING / LK__SLOTS)
#define TWO_INTS 24   /* header and two integers */
#define TEXT_FIXED 17 /* header, an integer and a string's NUL */
#define TEXT_MAX 40   /* the longest string the tests record */

static struct lkt_run out;

static const char text[] = "0123456789abcdefghijklmnopqrstuvwxyz0123";

static bool have_babeltrace2(void)
{
	return lkt_sh(&out, "command -v babeltrace2") == 0;
}

/*
 * babeltrace2 reads the whole trace without an error, prints `lines` events and reports
 * `discarded` events discarded in all ("discarded 1 event", "discarded 5 events").
 */
static void babeltrace2_reads(const char *dir, uint64_t lines, uint64_t discarded)
{
	if (!have_babeltrace2())
		return;
	lkt_sh(&out, "babeltrace2 '%s' 2>&1 >/dev/null | grep -v 'discarded' | grep -c .", dir);
	assert_int_equal(atoi(out.out), 0);
	lkt_sh(&out, "babeltrace2 '%s' 2>/dev/null | wc -l", dir);
	assert_int_equal(strtoull(out.out, NULL, 10), lines);
	lkt_sh(&out,
	       "babeltrace2 '%s' 2>&1 >/dev/null | tr -s ' \\n' '  ' | "
	       "grep -o 'discarded [0-9]* event' | awk '{ n += $2 } END { print n + 0 }'",
	       dir);
	assert_int_equal(strtoull(out.out, NULL, 10), discarded);
}

/* This thread's ring in the running trace. */
static struct lk__probe_buffer *my_ring(void)
{
	struct lk__probe_buffer *b;

	pthread_mutex_lock(&lk__probe_buffers_lock);
	for (b = lk__probe_buffers;
	     b && (b->tid != gettid() || __atomic_load_n(&b->dead, __ATOMIC_ACQUIRE)); b = b->next)
		;
	pthread_mutex_unlock(&lk__probe_buffers_lock);
	assert_non_null(b);
	return b;
}

/* Where this thread's next record goes, from the start of the sub-buffer it is in. */
static size_t sub_buffer_offset(const struct lk__probe_buffer *b)
{
	return (size_t)(__atomic_load_n(&lk__probe_tls.committed, __ATOMIC_RELAXED) -
			(uintptr_t)b->data) %
	       SUB_BUFFER;
}

/* ---- records at a sub-buffer's end ---- */

/* What the test recorded: event i's kind (0: two integers, 1: a string of len[i] bytes). */
#define BOUNDARY_EVENTS 40000
static unsigned char kind[BOUNDARY_EVENTS], len[BOUNDARY_EVENTS];

static void record_two(uint64_t i)
{
	kind[i] = 0;
	LK_PROBE(bd, two, i, i * 3 + 1);
}

static void record_text(uint64_t i, size_t n)
{
	kind[i] = 1;
	len[i] = (unsigned char)n;
	LK_PROBE(bd, text, i, text + TEXT_MAX - n);
}

static void check_boundary_event(const struct lkt_event *e, uint64_t i)
{
	assert_true(i < BOUNDARY_EVENTS);
	assert_int_equal(e->v[0], i);
	if (kind[i] == 0) {
		assert_string_equal(e->name, "bd:two");
		assert_int_equal(e->v[1], i * 3 + 1);
	} else {
		assert_string_equal(e->name, "bd:text");
		assert_string_equal(e->s[1], text + TEXT_MAX - len[i]);
	}
}

/*
 * Fill the rest of the sub-buffer the thread is in with records of two integers (the inline
 * path) but for 18 to 41 bytes, then end it with a string's record (the slow path) of that room
 * plus `over`: -1 leaves a byte free, 0 fills it exactly, 1 does not fit and goes whole into the
 * next sub-buffer. Returns the next event's number.
 */
static uint64_t end_sub_buffer(const struct lk__probe_buffer *b, uint64_t i, int over)
{
	size_t room = SUB_BUFFER - sub_buffer_offset(b), size;

	if (room < TEXT_FIXED + 1) {
		record_two(i++); /* does not fit: starts the next one */
		room = SUB_BUFFER - sub_buffer_offset(b);
	}
	while (room >= TEXT_FIXED + 1 + TWO_INTS) {
		record_two(i++);
		room -= TWO_INTS;
	}
	assert_int_equal(SUB_BUFFER - sub_buffer_offset(b), room);
	size = room + (size_t)over;
	record_text(i++, size - TEXT_FIXED);
	assert_int_equal(sub_buffer_offset(b), over < 0 ? SUB_BUFFER - 1 : over ? size : 0);
	return i;
}

/*
 * A sub-buffer filled by records of two integers (the inline path's own bound) up to `want` bytes
 * (0 to 23) before its end, after a string's record that sets where they fall; then one more,
 * which does not fit and goes whole into the next sub-buffer.
 */
static uint64_t end_sub_buffer_inline(const struct lk__probe_buffer *b, uint64_t i, size_t want)
{
	size_t room, first;

	i = end_sub_buffer(b, i, 0); /* the next record starts a sub-buffer */
	first = TEXT_FIXED + (SUB_BUFFER - want - TEXT_FIXED) % TWO_INTS;
	record_text(i++, first - TEXT_FIXED);
	for (room = SUB_BUFFER - first; room >= TWO_INTS; room -= TWO_INTS)
		record_two(i++);
	assert_int_equal(room, want);
	assert_int_equal(SUB_BUFFER - sub_buffer_offset(b), room ? room : SUB_BUFFER);
	record_two(i++);
	assert_int_equal(sub_buffer_offset(b), TWO_INTS);
	return i;
}

/*
 * A snapshot of the newest sub-buffers, up to event i - 1: every event from the first kept on,
 * whole and in order, the older ones counted as discarded, exactly.
 */
static void check_boundary_snapshot(const char *dir, uint64_t i)
{
	struct lk__snapshot_result r;
	uint64_t first = UINT64_MAX, next = UINT64_MAX;
	struct lkt_trace t;

	assert_int_equal(lk__trace_snapshot(dir, &r, NULL, 0), 0);
	assert_int_equal(lkt_read(&t, dir), 0);
	assert_int_equal(t.streams, 1);
	for (size_t k = 0; k < t.n; k++) {
		if (strcmp(t.ev[k].name, "lowkey:thread_name") == 0)
			continue;
		if (first == UINT64_MAX)
			first = next = t.ev[k].v[0];
		assert_int_equal(t.ev[k].v[0], next); /* every one, in order */
		check_boundary_event(&t.ev[k], next);
		next++;
	}
	assert_int_equal(next, i);	 /* up to the newest */
	assert_int_equal(t.lost, first); /* exactly the older ones */
	assert_int_equal(lkt_events(&t), i - first);
	assert_int_equal(r.events, i - first);
	assert_int_equal(r.discarded, first);
	lkt_free(&t);
	babeltrace2_reads(dir, i - first + 1, first);
	lkt_rmrf(dir);
}

static void records_at_sub_buffer_ends(void **state)
{
	struct lk_trace_config c = { .buffer_size = RING, .flags = LK_TRACE_OVERWRITE };
	struct lk__probe_buffer *b;
	char dir[256], snap[300];
	uint64_t i = 0;
	size_t want = 0;

	(void)state;
	assert_true(lk_probe_enable("bd") >= 0);
	lkt_path(dir, sizeof(dir), "bd-ends");
	c.path = dir;
	assert_int_equal(lk_trace_start(&c), 0);
	record_two(i++);
	b = my_ring();
	assert_int_equal(b->area_size, SUB_BUFFER);
	/*
	 * Rounds of up to 7 sub-buffers (the ring keeps 8), each round's snapshot holding them all:
	 * 5 rounds of 6 ended by a string's record a byte short, exactly, a byte over; then 8 rounds
	 * of 3 by the inline path, 0 to 23 bytes short (each after one ended exactly).
	 */
	for (int round = 0; round < 13; round++) {
		if (round < 5)
			for (int k = 0; k < 6; k++)
				i = end_sub_buffer(b, i, k % 3 - 1);
		else
			for (int k = 0; k < 3; k++)
				i = end_sub_buffer_inline(b, i, want++);
		record_two(i++);
		assert_true(i <= BOUNDARY_EVENTS);
		snprintf(snap, sizeof(snap), "%s-%d", dir, round);
		check_boundary_snapshot(snap, i);
	}
	assert_int_equal(want, TWO_INTS);
	assert_int_equal(lk_trace_stop(), 0);
	assert_int_equal(lk_probe_reset_rules(), 0);
}

/* ---- records at a streaming ring's end ---- */

#define FIXED_RING 4096
#define RING_LIMIT (FIXED_RING - LK__PROBE_HEADER) /* records end before: room for a pad */

/* Where this thread's next record goes in its ring. */
static size_t ring_offset(const struct lk__probe_buffer *b)
{
	return (size_t)(__atomic_load_n(&lk__probe_tls.committed, __ATOMIC_RELAXED) -
			(uintptr_t)b->data);
}

/* Wait until the consumer has written n events and read all that was committed. */
static void drained(const struct lk__probe_buffer *b, uint64_t n)
{
	uintptr_t committed = __atomic_load_n(&lk__probe_tls.committed, __ATOMIC_RELAXED);
	struct lk_trace_stats st;

	for (int k = 0; k < 6000; k++) {
		assert_int_equal(lk_trace_stats(&st), 0);
		if (st.events >= n &&
		    (uintptr_t)__atomic_load_n(&b->rp, __ATOMIC_ACQUIRE) == committed)
			return;
		usleep(1000);
	}
	fail_msg("the consumer wrote %llu events of %llu", (unsigned long long)st.events,
		 (unsigned long long)n);
}

/*
 * A fixed 4 KiB ring, its consumer held: records of two integers, then a string's record that
 * ends a byte short of the ring's last record end (`over` -1), exactly there (0), or a byte past
 * it (1: no room, the ring full, dropped and counted). Then the consumer drains it, and the next
 * records go on at the ring's start after a pad in its last bytes. Every event that was not
 * dropped is in the trace, in order; the one dropped is counted, exactly.
 */
static void record_at_ring_end(int over)
{
	struct lk_trace_config c = { .buffer_size = FIXED_RING,
				     .flush_ms = 5,
				     .flags = LK_TRACE_FIXED_BUFFER };
	uint64_t i = 0, next = 0, dropped = UINT64_MAX, lost = over > 0;
	struct lk__probe_buffer *b;
	struct lk_trace_stats st;
	struct lkt_trace t;
	size_t room, size;
	char dir[256];

	lkt_path(dir, sizeof(dir), "bd-ring");
	c.path = dir;
	assert_int_equal(lk_trace_start(&c), 0);
	lkt_hold_consumer(true);
	record_two(i++); /* after the thread's name */
	b = my_ring();
	room = RING_LIMIT - ring_offset(b);
	while (room >= TEXT_FIXED + 1 + TWO_INTS) {
		record_two(i++);
		room -= TWO_INTS;
	}
	size = room + (size_t)over;
	if (over > 0)
		dropped = i;
	record_text(i++, size - TEXT_FIXED);
	assert_int_equal(ring_offset(b), over > 0 ? RING_LIMIT - room : RING_LIMIT - (over < 0));
	lkt_hold_consumer(false);
	drained(b, i - lost);
	if (over > 0)
		record_text(i++, size - TEXT_FIXED); /* the same again: it fits at the start */
	record_two(i++);
	assert_int_equal(ring_offset(b), over > 0 ? size + TWO_INTS : TWO_INTS); /* wrapped */
	for (int k = 0; k < 50; k++)
		record_two(i++);
	assert_int_equal(lk_trace_stop(), 0);
	assert_int_equal(lk_trace_stats(&st), 0);
	assert_int_equal(st.events, i - lost);
	assert_int_equal(st.lost, lost);

	assert_int_equal(lkt_read(&t, dir), 0);
	assert_int_equal(t.lost, lost);
	for (size_t k = 0; k < t.n; k++) {
		if (strcmp(t.ev[k].name, "lowkey:thread_name") == 0)
			continue;
		next += next == dropped;
		check_boundary_event(&t.ev[k], next);
		next++;
	}
	assert_int_equal(next, i);
	lkt_free(&t);
	babeltrace2_reads(dir, i - lost + 1, lost);
	lkt_rmrf(dir);
}

static void records_at_a_ring_end(void **state)
{
	(void)state;
	assert_true(lk_probe_enable("bd") >= 0);
	for (int over = -1; over <= 1; over++)
		record_at_ring_end(over);
	assert_int_equal(lk_probe_reset_rules(), 0);
}

/* ---- a snapshot of the sub-buffer being filled ---- */

static int writer_stop;
static uint64_t writer_done; /* events committed, published every WRITER_BATCH */
static int writer_tid;

#define WRITER_BATCH 32
#define WRITER_RECORD_MAX (TEXT_FIXED + TEXT_MAX + 8) /* header, i, 40 bytes and a NUL, i * 3 + 1 */
/*
 * Events after which the sub-buffer holding an event may have been started anew: the rest of its
 * own and LK__SLOTS - 1 more, filled; a snapshot that took longer may have lost it, by design.
 */
#define WRITER_LAP ((LK__SLOTS - 1) * (SUB_BUFFER / WRITER_RECORD_MAX))

/*
 * Event i: a string of i % 41 bytes, then i * 3 + 1: the records' sizes vary by a byte. Batches
 * of WRITER_BATCH with a pause between them, so that a snapshot usually takes less time than the
 * writer takes to go round its ring.
 */
static void *writer_main(void *arg)
{
	uint64_t i = 0;

	(void)arg;
	__atomic_store_n(&writer_tid, gettid(), __ATOMIC_RELEASE);
	while (!__atomic_load_n(&writer_stop, __ATOMIC_ACQUIRE)) {
		for (int k = 0; k < WRITER_BATCH; k++, i++)
			LK_PROBE(bd, fill, i, text + TEXT_MAX - i % (TEXT_MAX + 1), i * 3 + 1);
		__atomic_store_n(&writer_done, i, __ATOMIC_RELEASE);
		usleep(100);
	}
	return NULL;
}

/*
 * The writer's stream in the snapshot in dir: whole, in order, written + discarded equal to what
 * it recorded up to its last written event. Unless the writer may have gone round its ring while
 * the snapshot was taken (done before and after it say), nothing it committed before the snapshot
 * began is missing: the sub-buffer it was filling is in the snapshot. Returns its last event + 1;
 * 0 if the stream is not there (a writer that went round its whole ring while a preempted
 * snapshot got to it leaves nothing of what it had).
 */
static uint64_t check_fill_stream(const char *dir, uint64_t done_before, uint64_t done_after)
{
	struct lkt_trace t;
	uint64_t next = 0, events = 0;

	assert_int_equal(lkt_read(&t, dir), 0);
	for (size_t k = 0; k < t.n; k++) {
		const struct lkt_event *e = &t.ev[k];
		uint64_t v = e->v[0];

		if (e->tid != __atomic_load_n(&writer_tid, __ATOMIC_ACQUIRE) ||
		    strcmp(e->name, "bd:fill"))
			continue;
		assert_true(v >= next); /* in order */
		assert_string_equal(e->s[1], text + TEXT_MAX - v % (TEXT_MAX + 1));
		assert_int_equal(e->v[2], v * 3 + 1); /* nothing torn */
		next = v + 1;
		events++;
	}
	if (events) {
		assert_int_equal(events + t.lost, next); /* the others counted, exactly */
		if (done_after + WRITER_BATCH - done_before < WRITER_LAP)
			assert_true(next >= done_before);
	}
	lkt_free(&t);
	if (events)
		babeltrace2_reads(dir, events + 1, next - events);
	return next;
}

static void snapshots_while_a_sub_buffer_fills(void **state)
{
	struct lk_trace_config c = { .buffer_size = RING, .flags = LK_TRACE_OVERWRITE };
	pthread_t writer;
	char dir[256], snap[300];
	uint64_t last = 0;
	int seen = 0;

	(void)state;
	assert_true(lk_probe_enable("bd") >= 0);
	lkt_path(dir, sizeof(dir), "bd-fill");
	c.path = dir;
	assert_int_equal(lk_trace_start(&c), 0);
	writer_stop = 0;
	writer_done = 0;
	assert_int_equal(pthread_create(&writer, NULL, writer_main, NULL), 0);
	while (__atomic_load_n(&writer_done, __ATOMIC_ACQUIRE) < 3 * RING / TEXT_FIXED)
		usleep(1000);
	for (int round = 0; round < 12; round++) {
		uint64_t before = __atomic_load_n(&writer_done, __ATOMIC_ACQUIRE), newest;

		snprintf(snap, sizeof(snap), "%s-%d", dir, round);
		assert_int_equal(lk_trace_snapshot(snap), 0);
		newest = check_fill_stream(snap, before,
					   __atomic_load_n(&writer_done, __ATOMIC_ACQUIRE));
		if (newest) {
			assert_true(newest >= last);
			last = newest;
			seen++;
		}
		lkt_rmrf(snap);
	}
	assert_true(seen > 0);
	/* and once the thread has exited inside a sub-buffer: up to its last event */
	__atomic_store_n(&writer_stop, 1, __ATOMIC_RELEASE);
	pthread_join(writer, NULL);
	assert_int_equal(lk_trace_snapshot(NULL), 0);
	assert_int_equal(check_fill_stream(dir, writer_done, writer_done), writer_done);
	assert_int_equal(lk_trace_stop(), 0);
	assert_int_equal(lk_probe_reset_rules(), 0);
	lkt_rmrf(dir);
}

/* ---- fork while a packet is being filled ---- */

static void record_half(int64_t from, int64_t n)
{
	for (int64_t i = from; i < from + n; i++)
		LK_PROBE(bd, half, i, text + TEXT_MAX - i % (TEXT_MAX + 1));
}

/* The trace in dir holds thread tid's events from..to-1 of record_half, once, in order. */
static void check_half_trace(const char *dir, int tid, int64_t from, int64_t to)
{
	struct lkt_trace t;
	int64_t next = from;

	assert_int_equal(lkt_read(&t, dir), 0);
	assert_int_equal(t.streams, 1);
	assert_int_equal(t.lost, 0);
	for (size_t k = 0; k < t.n; k++) {
		const struct lkt_event *e = &t.ev[k];

		assert_int_equal(e->tid, tid);
		if (strcmp(e->name, "lowkey:thread_name") == 0)
			continue;
		assert_int_equal((int64_t)e->v[0], next);
		assert_string_equal(e->s[1], text + TEXT_MAX - next % (TEXT_MAX + 1));
		next++;
	}
	assert_int_equal(next, to);
	lkt_free(&t);
	babeltrace2_reads(dir, (uint64_t)(to - from) + 1, 0);
}

/*
 * The child of a fork that came while the parent's records of a packet were in its ring: the
 * child's own trace, started after the fork, holds the child's events and none of the parent's.
 * Exits 0 if so; the parent checks the trace again with babeltrace2.
 */
static void child_records(const char *dir, int64_t from, int64_t n)
{
	struct lk_trace_config c = { .path = dir, .buffer_size = 1 << 20, .flush_ms = 5 };
	struct lk_trace_stats st;
	struct lkt_trace t;
	bool ok;

	record_half(-n, n); /* before its trace: recorded nowhere */
	ok = lk_trace_start(&c) == 0;
	record_half(from, n);
	ok = ok && lk_trace_stop() == 0 && lk_trace_stats(&st) == 0 && st.events == (uint64_t)n &&
	     st.lost == 0 && st.threads == 1;
	ok = ok && lkt_read(&t, dir) == 0 && lkt_events(&t) == (uint64_t)n && t.streams == 1;
	_exit(ok ? 0 : 1);
}

static void fork_mid_packet_both_traces(void **state)
{
	enum { HALF = 5000 };
	struct lk_trace_config c = { .buffer_size = 1 << 20, .flush_ms = 5 };
	struct lk_trace_stats st;
	char dir[256], child_dir[300];
	int status;
	pid_t pid;

	(void)state;
	assert_true(lk_probe_enable("bd") >= 0);
	lkt_path(dir, sizeof(dir), "bd-fork");
	snprintf(child_dir, sizeof(child_dir), "%s-child", dir);
	c.path = dir;
	assert_int_equal(lk_trace_start(&c), 0);
	lkt_hold_consumer(true);
	record_half(0, HALF); /* a packet's records, in the ring, not written */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
#ifdef __SANITIZE_THREAD__
		/* ThreadSanitizer cannot start threads (the consumer) after a multi-threaded fork */
		_exit(0);
#endif
		child_records(child_dir, 1000000, HALF);
	}
	record_half(HALF, HALF); /* the parent's packet goes on filling meanwhile */
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	lkt_hold_consumer(false);
	record_half(2 * HALF, HALF);
	assert_int_equal(lk_trace_stop(), 0);
	assert_int_equal(lk_trace_stats(&st), 0);
	assert_int_equal(st.events, 3 * HALF);
	assert_int_equal(st.lost, 0);
	check_half_trace(dir, gettid(), 0, 3 * HALF);
#ifndef __SANITIZE_THREAD__
	check_half_trace(child_dir, pid, 1000000, 1000000 + HALF);
#endif
	assert_int_equal(lk_probe_reset_rules(), 0);
	lkt_rmrf(dir);
	lkt_rmrf(child_dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(records_at_sub_buffer_ends),
		cmocka_unit_test(records_at_a_ring_end),
		cmocka_unit_test(snapshots_while_a_sub_buffer_fills),
		cmocka_unit_test(fork_mid_packet_both_traces),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
