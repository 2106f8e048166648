// SPDX-License-Identifier: MIT
/*
 * The consumer thread: drains every thread's ring into the trace.
 *
 * It wakes every flush_ms, or when a producer's ring is a quarter full, goes through each ring
 * from rp to what the producer has committed, and writes the records as CTF packets of at most
 * 256 KiB: a run of contiguous records is one packet or more, so a wrap splits it. Nothing is
 * copied: each packet is one writev of its prefix and the ring's bytes, its bounds found from
 * the records' headers alone (ctf.c). Then it hands the space back (rp). Buffers of threads
 * that have exited are freed once drained.
 * A trace recorded as Perfetto is written the same way, but as Perfetto packets: the records are
 * encoded from the ring into the .pftrace (perfetto_live.c), and no CTF stream is written.
 *
 * A write error (a full disk) stops the trace: the sites are turned off, what was written stays
 * (a packet is written whole or truncated away), and later data is dropped.
 *
 * In overwrite mode (the flight recorder) nothing is drained: the consumer takes the snapshots
 * requested (lk_trace_snapshot_request: from signal handlers), counts the closed sub-buffers
 * ahead of the producers, frees the rings of exited threads once a snapshot has written them, and
 * takes the context switches the kernel recorded (LK_TRACE_SCHED) into the rings that keep them.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <lowkey/error.h>

#include "core/error.h"
#include "format/perfetto/perfetto.h"
#include "probe/probe_internal.h"

static int stop_requested;
int lk__consumer_hold, lk__consumer_held;

/*
 * A producer crossed its ring's watermark. The count always moves, so a wake-up that arrives
 * while the consumer is draining is not lost: the consumer compares the count it read before
 * draining, and does not sleep if it moved. The system call only when the consumer sleeps.
 */
void lk__consumer_wake(void)
{
	__atomic_fetch_add(&lk__trace.wake, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&lk__trace.consumer_sleeping, __ATOMIC_SEQ_CST))
		syscall(SYS_futex, &lk__trace.wake, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static uint64_t read_u64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static void fail_output(struct lk__trace *t, int err)
{
	if (t->error)
		return;
	if (lk__perfetto_direct())
		snprintf(
			t->error_msg, sizeof(t->error_msg),
			"writing the trace to %s failed (%s): tracing stopped there; what was written before "
			"is complete and readable",
			t->path, strerror(-err));
	else if (t->config.format != LK_TRACE_CTF)
		snprintf(
			t->error_msg, sizeof(t->error_msg),
			"writing the trace to %s failed (%s): tracing stopped there and %s was not written; "
			"the events recorded before are kept there as CTF (lowkey report reads it, lowkey "
			"convert writes it in another format)",
			t->ctf_dir, strerror(-err), t->path);
	else
		snprintf(
			t->error_msg, sizeof(t->error_msg),
			"writing the trace to %s failed (%s): tracing stopped there; what was written before "
			"is complete and readable",
			t->ctf_dir, strerror(-err));
	__atomic_store_n(&t->error, err, __ATOMIC_RELEASE); /* after the message */
	lk__registry_lock();
	lk__probe_apply_rules_locked(false);
	lk__registry_unlock();
}

/*
 * Records from rp to limit as a batch of Perfetto packets (perfetto_live.c). On an error those not
 * written are counted lost, and the trace fails. name: the first is the thread's name (drain_run).
 */
static uint8_t *drain_perfetto(struct lk__trace *t, struct lk__probe_buffer *b, uint8_t *rp,
			       uint8_t *limit, uint64_t now, bool name)
{
	const uint8_t *next, *after;
	uint64_t events, rest = 0;
	int err = lk__perfetto_direct_records(b, rp, limit, now, &next, &events);

	events -= name && next != rp;
	b->events += events;
	__atomic_fetch_add(&t->events, events, __ATOMIC_RELAXED);
	if (err) {
		fail_output(t, err);
		after = lk__walk_records(next, limit, t->cputime, &rest);
		rest -= name && next == rp && rest;
		__atomic_fetch_add(&b->lost, rest, __ATOMIC_RELAXED); /* recorded, never written */
		next = after;
	}
	if (next == rp) {
		fail_output(t, -EIO); /* not a record: cannot happen unless memory was corrupted */
		return limit;
	}
	return (uint8_t *)next;
}

/*
 * Records from rp as one packet (at most 256 KiB of them), unless the trace has failed: then they
 * are counted lost. Returns where the next run starts: after a pad, where it says (buffer.c). now:
 * a TSC read after committed was, to extend the records' 48-bit timestamps from.
 */
static uint8_t *drain_run(struct lk__trace *t, struct lk__probe_buffer *b, uint8_t *rp,
			  uint8_t *committed, uint64_t now)
{
	uint8_t *end = b->data + b->cap, *limit = committed >= rp ? committed : end;
	const uint8_t *next;
	uint64_t head, events;
	bool name;
	int err;

	if (end - rp < LK__PROBE_HEADER) {
		fail_output(t, -EIO); /* the producer always leaves room for a pad */
		return committed;
	}
	head = read_u64(rp);
	if (lk__header_id(head) == LK__PAD_ID) {
		if (b->data + (head >> 16) >= end) {
			fail_output(t, -EIO); /* cannot happen unless memory was corrupted */
			return committed;
		}
		return b->data + (head >> 16);
	}
	/*
	 * A thread's name is the first record its ring gets in a trace, so the first of the run that
	 * holds it. It is a record of the trace but not one of its events (lk_trace_stats): the
	 * counts below, written or lost, leave it out.
	 */
	name = lk__header_id(head) == LK__EVENT_THREAD_NAME;
	if (t->error) {
		next = lk__walk_records(rp, limit, t->cputime, &events);
		err = t->error;
		events -= name && events;
	} else if (lk__perfetto_direct()) {
		return drain_perfetto(t, b, rp, limit, now, name);
	} else {
		/* written, or (err) not written from next on */
		err = lk__ctf_write_records(t, b, rp, limit, now, &next, &events);
		events -= name && events && (!err || next == rp);
	}
	if (next == rp) {
		fail_output(t, -EIO); /* not a record: cannot happen unless memory was corrupted */
		return committed;
	}
	if (err) {
		fail_output(t, err);
		__atomic_fetch_add(&b->lost, events,
				   __ATOMIC_RELAXED); /* recorded, never written */
	} else {
		b->events += events;
		__atomic_fetch_add(&t->events, events, __ATOMIC_RELAXED);
	}
	return (uint8_t *)next;
}

static void drain_buffer(struct lk__trace *t, struct lk__probe_buffer *b)
{
	uint8_t *committed = (uint8_t *)lk__buffer_committed(b);
	uint64_t now = lk__probe_tsc();
	uint8_t *rp = b->rp;

	while (rp != committed) {
		rp = drain_run(t, b, rp, committed, now);
		lk__buffer_release(b, rp);
	}
}

/* A packet with no events that carries the final count of lost events. */
static void report_lost(struct lk__trace *t, struct lk__probe_buffer *b)
{
	uint64_t lost = __atomic_load_n(&b->lost, __ATOMIC_RELAXED);

	if (lost != b->lost_written && b->fd >= 0 && !t->error) {
		const uint8_t *next;
		uint64_t events;
		int err = lk__ctf_write_records(t, b, NULL, NULL, lk__probe_tsc(), &next, &events);

		if (err)
			fail_output(t, err);
	}
}

static void unlink_buffer(struct lk__probe_buffer *b)
{
	struct lk__probe_buffer *expected = b, **link;

	/* Threads only push at the head; if b is the head, a push may race us: use CAS there. */
	if (__atomic_compare_exchange_n(&lk__probe_buffers, &expected, b->next, false,
					__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return;
	for (link = &expected->next; *link && *link != b; link = &(*link)->next)
		;
	if (*link)
		*link = b->next;
}

static void unlink_and_free(struct lk__probe_buffer *b)
{
	pthread_mutex_lock(&lk__probe_buffers_lock);
	unlink_buffer(b);
	pthread_mutex_unlock(&lk__probe_buffers_lock);
	lk__buffer_free(b); /* no walker can hold it now: they walk under the lock */
}

/* The end of a buffer's part in this trace: its lost count goes to the total, its stream closes. */
static void retire_stream(struct lk__trace *t, struct lk__probe_buffer *b)
{
	if (!lk__perfetto_direct()) {
		report_lost(t, b);
	} else if (!t->error) {
		int err =
			lk__perfetto_direct_retire(b, __atomic_load_n(&b->lost, __ATOMIC_RELAXED));

		if (err)
			fail_output(t, err);
	}
	__atomic_fetch_add(&t->lost, __atomic_load_n(&b->lost, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
	if (b->fd >= 0)
		close(b->fd);
	b->fd = -1;
}

static void drain_all(struct lk__trace *t, bool final)
{
	struct lk__probe_buffer *b = __atomic_load_n(&lk__probe_buffers, __ATOMIC_ACQUIRE), *next;

	for (; b; b = next) {
		bool dead = __atomic_load_n(&b->dead, __ATOMIC_ACQUIRE);

		next = b->next;
		/*
		 * A dead thread's buffer is freed only once the thread is gone: between dead and
		 * gone its destructor still reads the buffer.
		 */
		if (__atomic_load_n(&b->trace_gen, __ATOMIC_ACQUIRE) != t->gen || b->retired) {
			if (dead && __atomic_load_n(&b->gone, __ATOMIC_ACQUIRE))
				unlink_and_free(b); /* an exited thread, its records written */
			continue;
		}
		drain_buffer(t, b);
		if (dead) {
			retire_stream(t, b); /* dead: nothing more will be committed */
			b->retired = true;
			if (__atomic_load_n(&b->gone, __ATOMIC_ACQUIRE))
				unlink_and_free(b);
		} else if (final) {
			retire_stream(t, b); /* alive, kept for the thread's next trace */
		}
	}
	if (t->sched_state) {
		int err =
			lk__sched_drain(t, final); /* context switches, LK_TRACE_SCHED (sched.c) */

		if (err)
			fail_output(t, err);
	}
	if (lk__perfetto_direct() && !t->error) {
		int err =
			lk__perfetto_direct_drained(); /* whole packets in the file after every drain */

		if (err)
			fail_output(t, err);
	}
}

/* ---- overwrite mode ---- */

#define MAX_DEAD_RINGS 64 /* exited threads' rings kept for the next snapshot */

/* The requested snapshots, as one: requests that arrive while it is taken are served by the next. */
static void take_requested(struct lk__trace *t, unsigned int *served)
{
	unsigned int asked = __atomic_load_n(&t->snapshot_requests, __ATOMIC_ACQUIRE);
	struct lk__snapshot_result r;
	int err;

	if (asked == *served)
		return;
	*served = asked;
	err = lk__snapshot(NULL, &r, NULL, 0);
	if (err && !t->snapshot_error) {
		snprintf(t->snapshot_error_msg, sizeof(t->snapshot_error_msg),
			 "a requested snapshot failed: %s", lk_last_error());
		__atomic_store_n(&t->snapshot_error, err, __ATOMIC_RELEASE);
	}
}

/*
 * Free the rings of exited threads that a snapshot has written, and the oldest beyond
 * MAX_DEAD_RINGS (the list holds the newest first). final: the trace ends; count what every ring
 * dropped.
 */
static void keep_recent(struct lk__trace *t, bool final)
{
	struct lk__probe_buffer *b = __atomic_load_n(&lk__probe_buffers, __ATOMIC_ACQUIRE), *next;
	unsigned int dead_kept = 0;

	for (; b; b = next) {
		bool ours = __atomic_load_n(&b->trace_gen, __ATOMIC_ACQUIRE) == t->gen;
		bool gone = __atomic_load_n(&b->dead, __ATOMIC_ACQUIRE) &&
			    __atomic_load_n(&b->gone, __ATOMIC_ACQUIRE);
		bool free_it = gone &&
			       (!ours || __atomic_load_n(&b->snapshotted, __ATOMIC_ACQUIRE) ||
				++dead_kept > MAX_DEAD_RINGS);

		next = b->next;
		if (ours &&
		    (free_it || final)) /* once: final comes last, and a freed ring is gone */
			__atomic_fetch_add(&t->lost, __atomic_load_n(&b->lost, __ATOMIC_RELAXED),
					   __ATOMIC_RELAXED);
		if (free_it)
			unlink_and_free(b);
	}
}

static void wait_while_held(void)
{
	struct timespec pause = { 0, 100000 };

	while (__atomic_load_n(&lk__consumer_hold, __ATOMIC_SEQ_CST) &&
	       !__atomic_load_n(&stop_requested, __ATOMIC_SEQ_CST)) {
		__atomic_store_n(&lk__consumer_held, 1, __ATOMIC_SEQ_CST);
		nanosleep(&pause, NULL);
	}
	__atomic_store_n(&lk__consumer_held, 0, __ATOMIC_SEQ_CST);
}

/* Sleep unless woken since `seen` (read before the drain that just ended). */
static void sleep_until_woken(struct lk__trace *t, unsigned int seen)
{
	struct timespec timeout = { t->config.flush_ms / 1000,
				    (long)(t->config.flush_ms % 1000) * 1000000 };

	__atomic_store_n(&t->consumer_sleeping, 1, __ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&stop_requested, __ATOMIC_SEQ_CST))
		syscall(SYS_futex, &t->wake, FUTEX_WAIT_PRIVATE, seen, &timeout, NULL, 0);
	__atomic_store_n(&t->consumer_sleeping, 0, __ATOMIC_SEQ_CST);
}

static void *consumer_main(void *arg)
{
	struct lk__trace *t = arg;

	unsigned int served = 0;

	pthread_setname_np(pthread_self(), "lowkey-trace");
	while (!__atomic_load_n(&stop_requested, __ATOMIC_SEQ_CST)) {
		unsigned int seen = __atomic_load_n(&t->wake, __ATOMIC_SEQ_CST);

		wait_while_held();
		if (t->overwrite) {
			take_requested(t, &served);
			lk__snapshot_count_ahead();
			keep_recent(t, false);
			if (t->sched_state)
				(void)lk__sched_drain(
					t, false); /* kept for the snapshots: writes nothing */
		} else {
			drain_all(t, false);
		}
		sleep_until_woken(t, seen);
	}
	if (t->overwrite) {
		take_requested(t, &served);
		keep_recent(t, true);
	} else {
		drain_all(t, true);
	}
	return NULL;
}

int lk__consumer_start(void)
{
	sigset_t all, old;
	int err;

	__atomic_store_n(&stop_requested, 0, __ATOMIC_SEQ_CST);
	/*
	 * The application's signals are not for this thread, from its first instruction: blocked
	 * in the thread itself, one that arrived before it did so could run the application's
	 * handler here (and its probes on lowkey's own thread).
	 */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&lk__trace.consumer, NULL, consumer_main, &lk__trace);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		return lk__fail(-err, "cannot start the trace's consumer thread: %s",
				strerror(err));
	return 0;
}

void lk__consumer_stop(void)
{
	__atomic_store_n(&stop_requested, 1, __ATOMIC_SEQ_CST);
	__atomic_fetch_add(&lk__trace.wake, 1, __ATOMIC_SEQ_CST);
	syscall(SYS_futex, &lk__trace.wake, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
	pthread_join(lk__trace.consumer, NULL);
}
