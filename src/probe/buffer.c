// SPDX-License-Identifier: MIT
/*
 * Per-thread ring buffers and the slow path of recording.
 *
 * A thread's first event while a trace runs gets it a buffer (mmap, so this works in a signal
 * handler too) that it pushes, lock-free, onto the global list. The producer owns its write
 * position (wp: the TLS committed field, where the records end) and the
 * space up to the consumer's rp; the consumer owns rp. Records never straddle the end of the ring:
 * the producer leaves a pad there (see probe_internal.h) and continues at the start. Two
 * invariants keep "empty" and "full" apart: a record ends strictly before the end of the ring, so
 * wp (and committed) never point there; and a byte stays free between wp and rp. So wp == rp
 * always means empty.
 *
 * fast_end is where the inline fast path must stop and call in here: the end of the contiguous
 * free space, or earlier, at the watermark where a quarter of the ring is used and the consumer
 * should be woken; or zero, when every event must come here (CPU time recorded, no trace running, the
 * buffer belonging to an older trace).
 *
 * In overwrite mode (the flight recorder) the ring is sub-buffers that the producer fills in turn
 * and starts anew, oldest first, with no consumer to wait for; see "overwrite mode" below.
 */
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <lowkey/clock.h>

#include "clock/clock_internal.h"
#include "probe/probe_internal.h"

LK_API __thread struct lk__probe_tls lk__probe_tls __attribute__((tls_model("initial-exec")));

/*
 * This thread's buffer; BUFFER_GONE once the thread is exiting. Initial-exec like the fast path's
 * state: the slow path (every event with strings or CPU time) should not pay __tls_get_addr.
 */
#define LK__TLS_IE __attribute__((tls_model("initial-exec")))
static __thread struct lk__probe_buffer *my_buffer LK__TLS_IE;

/* Events this thread dropped before it had a buffer for the running trace (a signal handler
 * recording during its first event); added to the buffer's count once it has one. */
static __thread unsigned long pending_lost LK__TLS_IE;
#define BUFFER_GONE ((struct lk__probe_buffer *)1)

struct lk__probe_buffer *lk__probe_buffers;
pthread_mutex_t lk__probe_buffers_lock = PTHREAD_MUTEX_INITIALIZER;

static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;

static void thread_exit(void *arg);

static void exit_key_init(void)
{
	pthread_key_create(&exit_key, thread_exit);
}

/* ---- the ring ---- */

/*
 * A thread's ring is `size` bytes kept resident (the configured buffer size) at the start of a
 * mapping GROWTH times larger that costs nothing until written. While the consumer keeps up the
 * producer laps the first `size` bytes. When it lags (a host that deschedules its virtual CPU, a
 * busy machine, a slow disk), the producer uses the rest of the mapping instead of dropping
 * events, and the pages past size are given back once the consumer has caught up:
 *
 *  - A lap that reaches size with the consumer more than a quarter ring behind does not wrap: it
 *    goes on into the rest of the mapping, looking every quarter ring whether the consumer has
 *    caught up, and wraps then (to the start, pad at the lap's end: lap_end).
 *  - After a wrap the producer writes between the start and rp. If it reaches rp there, it
 *    jumps past the previous lap's end (a pad saying where to go on) and continues up to the
 *    end of the mapping; it wraps again only once the consumer has followed it there.
 *
 * So the consumer reads runs of records each ended by a pad that says where the next starts; it
 * never has to know which of these happened. Whatever the consumer does, the producer drops
 * events only once nearly all of the mapping holds records the consumer has not read.
 *
 * Every record ends at least a header's length before the mapping's end, and before rp when
 * the producer is behind the consumer, so that wherever the producer leaves a run there is room
 * for its pad.
 */
#define GROWTH 8
#define WAKE_FRACTION 4

static uint8_t *ring_end(const struct lk__probe_buffer *b)
{
	return b->data + b->cap;
}

/* The last byte a run may reach in the mapping, and in the resident part. */
static uint8_t *grown_limit(const struct lk__probe_buffer *b)
{
	return ring_end(b) - LK__PROBE_HEADER;
}

static uint8_t *size_limit(const struct lk__probe_buffer *b)
{
	return b->data + b->size - LK__PROBE_HEADER;
}

static void set_fast_end(struct lk__probe_tls *t, uintptr_t end)
{
	__atomic_store_n(&t->fast_end, end, __ATOMIC_RELAXED);
}

static void put_pad(uint8_t *at, const struct lk__probe_buffer *b, const uint8_t *next)
{
	uint64_t pad = lk__pad((size_t)(next - b->data));

	memcpy(at, &pad, sizeof(pad));
}

/* The consumer has followed a jump: the producer's records are one run again (rp <= wp). */
static void settle(struct lk__probe_buffer *b, const uint8_t *rp)
{
	if (b->jumped_to && rp >= b->jumped_to)
		b->jumped_to = NULL;
}

/* Unread bytes; after a jump, as good as full until the consumer follows. */
static size_t ring_used(const struct lk__probe_buffer *b, const uint8_t *rp, const uint8_t *wp)
{
	if (b->jumped_to)
		return b->cap;
	return wp >= rp ? (size_t)(wp - rp) : (size_t)(b->lap_end - rp) + (size_t)(wp - b->data);
}

/*
 * The pages past size, once the consumer has read them: the producer is back in the first
 * `size` bytes with the consumer behind it in the same run, so neither side is past size.
 */
static void release_growth(struct lk__probe_buffer *b, const uint8_t *rp, const uint8_t *wp)
{
	if (!b->grown || b->jumped_to || wp < rp || wp >= b->data + b->size)
		return;
	madvise(b->data + b->size, b->cap - b->size, MADV_DONTNEED);
	b->grown = false;
}

/* Where records may go without a decision: the end of the run the producer is in. */
static uint8_t *run_limit(const struct lk__probe_buffer *b, const uint8_t *rp, const uint8_t *wp,
			  size_t used)
{
	if (b->jumped_to)
		return grown_limit(b);
	if (wp < rp) /* room stays for a pad, and a byte more: wp == rp means empty */
		return (uint8_t *)rp - LK__PROBE_HEADER - 1;
	if (used >= b->size / WAKE_FRACTION)
		return grown_limit(b); /* lagging: the lap may grow */
	if (wp < size_limit(b))
		return size_limit(b);
	return (uint8_t *)wp; /* caught up past size: the next record wraps */
}

/* ---- overwrite mode ---- */

/*
 * The flight recorder's ring: LK__SLOTS sub-buffers in sequence (0, 1, 2, ...; sub-buffer s is in
 * slot s % LK__SLOTS) held in LK__SLOTS + 1 areas of area_size bytes, one of them spare. The
 * producer fills its current area with the inline fast path as in streaming mode (fast_end is the
 * area's end), and when a record does not fit, it closes the area and starts the next sub-buffer
 * in the area of the oldest one, which leaves the ring. One producer (the thread) and one reader
 * at a time (the snapshot lock: a snapshot, or the consumer counting ahead) share it:
 *
 *  - A reader holds an area by setting READING in its state (fetch_or, acq_rel), and lets it go
 *    by clearing it (release). While it holds one, the producer never starts that area anew:
 *    starting takes WRITING by a CAS from 0 (acq_rel), which fails on READING, and the producer
 *    then takes the spare instead (the held area becomes the spare). The reader holds one area at
 *    a time, so the spare is free whenever the slot's area is not. The reader's reads of the area
 *    happen before its release of READING, which happens before the producer's CAS that later
 *    starts the area anew: nothing is overwritten under a reader.
 *  - A held area the producer is still in (WRITING) is read up to the producer's committed
 *    position, loaded with acquire after the fetch_or, if the area is still WRITING after that
 *    load (the producer leaves an area before it commits in the next, whose start is this one's
 *    end): the records below it are complete (the commit is a release after the record's
 *    stores), and the producer only appends after it; it cannot leave and start the area anew
 *    while it is held.
 *  - A closed area's used bytes (and seq) were stored before the producer cleared WRITING with a
 *    release; the reader's fetch_or reads that clear or a later value, so it sees them.
 *
 * Counting what is overwritten exactly, without counting on the fast path: when sub-buffer s
 * leaves the ring, the producer adds its events to `left` and stores that in the next oldest
 * sub-buffer's `first` (events recorded before it) -- before the CAS that starts the new
 * sub-buffer, so a reader that sees the new one (through that CAS, or a later release on the same
 * state word) sees `first` too. An area's events are counted by the consumer in the background
 * (lk__snapshot_count_ahead, woken every half ring), and by the producer itself only when the
 * consumer has not got to it before it leaves the ring.
 */
static uint8_t *area_start(const struct lk__probe_buffer *b, unsigned int a)
{
	return b->data + (size_t)a * b->area_size;
}

static void rearm_overwrite(struct lk__probe_buffer *b, struct lk__probe_tls *t)
{
	if (lk__trace.cputime || __atomic_load_n(&lk__trace.stopping, __ATOMIC_ACQUIRE))
		set_fast_end(t, 0);
	else
		set_fast_end(t, b->slow_end);
}

/* The events of area a's sub-buffer, counting them if no one has (its records are the producer's own). */
static uint64_t area_events(struct lk__probe_buffer *b, unsigned int a)
{
	struct lk__area *ar = &b->areas[a];
	uint64_t n = __atomic_load_n(&ar->count, __ATOMIC_ACQUIRE), none = LK__NONE;
	const uint8_t *start = area_start(b, a);

	if (n != LK__NONE)
		return n;
	n = lk__count_records(start, start + __atomic_load_n(&ar->used, __ATOMIC_RELAXED),
			      lk__trace.cputime);
	__atomic_compare_exchange_n(&ar->count, &none, n, false, __ATOMIC_RELAXED,
				    __ATOMIC_RELAXED);
	return n;
}

/* Sub-buffer s - LK__SLOTS leaves the ring: what came before the next oldest is known now. */
static void retire_oldest(struct lk__probe_buffer *b, uint64_t s)
{
	unsigned int k = (unsigned int)(s % LK__SLOTS);

	b->left += area_events(b, b->slot_area[k]);
	__atomic_store_n(&b->areas[b->slot_area[(k + 1) % LK__SLOTS]].first, b->left,
			 __ATOMIC_RELEASE);
}

/* The area for slot k: its own, or the spare while a reader holds its own. LK__SLOTS + 1: none. */
static unsigned int claim_area(struct lk__probe_buffer *b, unsigned int k)
{
	unsigned int a = b->slot_area[k], spare = b->spare, free_state = 0;

	if (__atomic_compare_exchange_n(&b->areas[a].state, &free_state, LK__AREA_WRITING, false,
					__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return a;
	free_state = 0;
	if (!__atomic_compare_exchange_n(&b->areas[spare].state, &free_state, LK__AREA_WRITING,
					 false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return LK__SLOTS +
		       1; /* one reader holds one area: not expected; the event is dropped */
	__atomic_store_n(&b->slot_area[k], spare, __ATOMIC_RELEASE);
	b->spare = a;
	return spare;
}

/*
 * Close the current sub-buffer and start the next one; returns where the record goes (NULL: it
 * cannot, counted as lost). The caller writes and commits it.
 */
static uint8_t *switch_area(struct lk__probe_buffer *b, struct lk__probe_tls *t)
{
	uint64_t s = b->seq == LK__NONE ? 0 : b->seq + 1;
	unsigned int k = (unsigned int)(s % LK__SLOTS), a;
	struct lk__area *ar;

	if (b->seq != LK__NONE) {
		ar = &b->areas[b->cur];
		__atomic_store_n(&ar->used,
				 (uint32_t)(t->committed - (uintptr_t)area_start(b, b->cur)),
				 __ATOMIC_RELAXED);
		__atomic_fetch_and(&ar->state, ~LK__AREA_WRITING, __ATOMIC_RELEASE);
	}
	/* once per s: after a start that failed, the next record tries the same s again */
	if (s >= LK__SLOTS && b->left_at != s) {
		retire_oldest(b, s);
		b->left_at = s;
	}
	a = claim_area(b, k);
	if (a > LK__SLOTS) {
		b->slow_end = 0;
		return NULL;
	}
	ar = &b->areas[a];
	__atomic_store_n(&ar->count, LK__NONE, __ATOMIC_RELAXED);
	__atomic_store_n(&ar->first, s ? LK__NONE : 0, __ATOMIC_RELAXED);
	__atomic_store_n(&ar->used, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&ar->seq, s, __ATOMIC_RELAXED); /* published by the commit's release */
	b->cur = a;
	__atomic_store_n(&b->seq, s, __ATOMIC_RELEASE);
	__atomic_store_n(&t->committed, (uintptr_t)area_start(b, a), __ATOMIC_RELEASE);
	b->slow_end = (uintptr_t)(area_start(b, a) + b->area_size);
	if (s % (LK__SLOTS / 2) == 0)
		lk__consumer_wake(); /* count the closed sub-buffers before they come round */
	return area_start(b, a);
}

/* A ring of sub-buffers for the running overwrite-mode trace (the mapping is set up). */
static void attach_overwrite(struct lk__probe_buffer *b)
{
	b->area_size = b->size / LK__SLOTS;
	b->max_record = b->area_size;
	for (unsigned int a = 0; a <= LK__SLOTS; a++)
		b->areas[a] = (struct lk__area){ 0, 0, LK__NONE, LK__NONE, LK__NONE };
	for (unsigned int k = 0; k < LK__SLOTS; k++)
		b->slot_area[k] = k;
	b->spare = LK__SLOTS;
	b->cur = 0;
	b->left = 0;
	b->left_at = LK__NONE;
	b->snapshotted = false;
	__atomic_store_n(&b->seq, LK__NONE, __ATOMIC_RELAXED);
	prctl(PR_GET_NAME, b->name, 0, 0, 0); /* snapshots write it; the ring would lose it */
}

/*
 * Recompute slow_end and fast_end from the consumer's latest rp, and wake the consumer once a
 * quarter of the ring is used: the rest is the time it has to wake up, which in a virtual machine
 * whose other CPU is idle can take a millisecond. slow_end stops at the watermark, at size (where
 * the lap wraps or grows), and every quarter ring past size, so that each comes here; with CPU
 * time on, the inline path always calls the slow path (fast_end 0), which writes up to slow_end
 * without reading rp, a line the consumer writes.
 */
static void rearm(struct lk__probe_buffer *b, struct lk__probe_tls *t)
{
	uint8_t *rp, *wp = (uint8_t *)t->committed, *limit, *stop;
	size_t used, mark = b->size / WAKE_FRACTION;

	if (b->overwrite) {
		rearm_overwrite(b, t);
		return;
	}
	rp = __atomic_load_n(&b->rp, __ATOMIC_ACQUIRE);
	settle(b, rp);
	used = ring_used(b, rp, wp);
	release_growth(b, rp, wp);
	/*
	 * Once per drain, not once per event: while rp has not moved since our last wake-up the
	 * consumer has not drained this ring yet, and that wake-up is still pending (it compares
	 * the wake count it read before draining, so a wake-up is never lost).
	 */
	if (used >= mark && rp != b->woke_at_rp) {
		b->woke_at_rp = rp;
		lk__consumer_wake();
	}
	limit = run_limit(b, rp, wp, used);
	stop = used >= mark ? limit : wp + (mark - used);
	if (wp < size_limit(b) && stop > size_limit(b))
		stop = size_limit(b); /* wrap or grow: decided at size */
	else if (wp >= size_limit(b) && stop > wp + mark)
		stop = wp + mark; /* past size: look at rp again a quarter ring on */
	if (stop > limit)
		stop = limit;
	if (stop > b->data + b->size)
		b->grown = true; /* the inline path may write there now */
	b->slow_end = (uintptr_t)stop;
	if (lk__trace.cputime || __atomic_load_n(&lk__trace.stopping, __ATOMIC_ACQUIRE))
		set_fast_end(t, 0);
	else
		set_fast_end(t, b->slow_end);
}

/*
 * Room for size contiguous bytes: in the run the producer is in, at the start after a pad, or
 * past the last lap's end after a pad (see above); NULL when the ring is full. A pad it writes
 * is committed with the record.
 */
static uint8_t *reserve(struct lk__probe_buffer *b, struct lk__probe_tls *t, uint32_t size)
{
	uint8_t *rp, *wp = (uint8_t *)t->committed, *next;

	if (b->overwrite)
		return switch_area(b, t);
	rp = __atomic_load_n(&b->rp, __ATOMIC_ACQUIRE);
	settle(b, rp);
	if (wp + size <= run_limit(b, rp, wp, ring_used(b, rp, wp))) {
		if (wp + size > b->data + b->size)
			b->grown = true;
		return wp;
	}
	if (wp < rp && !b->jumped_to) {
		/* wrapped and full: go on past the last lap, if it left room */
		next = b->lap_end + LK__PROBE_HEADER;
		if (next + size > grown_limit(b))
			return NULL;
		put_pad(wp, b, next);
		b->jumped_to = next;
		b->grown = true;
		return next;
	}
	/* wrap: the record goes at the start, if it stays short of rp by a pad and a byte */
	if (b->jumped_to || b->data + size + LK__PROBE_HEADER >= rp)
		return NULL;
	put_pad(wp, b, b->data); /* wp <= the mapping's end - a header: see grown_limit */
	b->lap_end = wp;
	return b->data;
}

/* A string argument's bytes, up to LK_PROBE_STRING_MAX - 1, and up to its first NUL. */
static size_t arg_string(uint32_t types, unsigned int i, uint64_t v, const char **s)
{
	const struct lk__probe_view *view = (const struct lk__probe_view *)(uintptr_t)v;
	const char *p = (const char *)(uintptr_t)v;

	if (lk__arg_type(types, i) == LK__PROBE_VIEW) {
		*s = view->ptr ? view->ptr : "";
		return view->ptr ? strnlen(view->ptr, view->len < LK_PROBE_STRING_MAX - 1 ?
							      view->len :
							      LK_PROBE_STRING_MAX - 1) :
				   0;
	}
	*s = p ? p : "(null)";
	return strnlen(*s, LK_PROBE_STRING_MAX - 1);
}

static bool arg_is_string(uint32_t types, unsigned int i)
{
	return lk__arg_type(types, i) == LK_PROBE_STR || lk__arg_type(types, i) == LK__PROBE_VIEW;
}

static size_t arg_size(uint32_t types, unsigned int i, uint64_t v)
{
	const char *s;

	return arg_is_string(types, i) ? arg_string(types, i, v, &s) + 1 : 8;
}

static uint8_t *put_args(uint8_t *p, uint32_t types, unsigned int n, const uint64_t *vals)
{
	for (unsigned int i = 0; i < n; i++) {
		if (arg_is_string(types, i)) {
			const char *s;
			size_t len = arg_string(types, i, vals[i], &s);

			memcpy(p, s, len);
			p[len] = 0;
			p += len + 1;
		} else {
			memcpy(p, &vals[i], 8);
			p += 8;
		}
	}
	return p;
}

static void count_lost(struct lk__probe_buffer *b)
{
	if (b && b != BUFFER_GONE &&
	    __atomic_load_n(&b->trace_gen, __ATOMIC_RELAXED) == lk__trace.gen)
		__atomic_fetch_add(&b->lost, 1, __ATOMIC_RELAXED);
	else if (b != BUFFER_GONE)
		pending_lost++;
}

/* Size of a record with these arguments (strings: NUL-terminated, capped). */
static size_t record_size(uint32_t types, bool strings, unsigned int n, const uint64_t *vals)
{
	size_t size = LK__PROBE_HEADER + (lk__trace.cputime ? 8 : 0);

	if (!strings)
		return size + 8 * n;
	for (unsigned int i = 0; i < n; i++)
		size += arg_size(types, i, vals[i]);
	return size;
}

/*
 * Write one record: id, optional CPU time, arguments. The thread is claimed. *quick: it fit below
 * slow_end, so rp was not read (records with CPU time or strings take this path every time).
 */
static bool write_record(struct lk__probe_buffer *b, struct lk__probe_tls *t, uint32_t id,
			 uint32_t types, bool strings, unsigned int n, const uint64_t *vals,
			 bool *quick)
{
	size_t size = record_size(types, strings, n, vals);
	uint64_t tsc, head;
	uint8_t *p, *args;

	*quick = t->committed + size <= b->slow_end;
	if (size > b->max_record ||
	    !(p = *quick ? (uint8_t *)t->committed : reserve(b, t, (uint32_t)size))) {
		count_lost(b);
		return false;
	}
	tsc = lk__probe_tsc();
	head = lk__probe_header(tsc, id);
	memcpy(p, &head, 8);
	args = p + LK__PROBE_HEADER;
	if (lk__trace.cputime) {
		uint64_t cpu = lk__thread_cputime_at(tsc); /* one counter read for both */

		memcpy(args, &cpu, 8);
		args += 8;
	}
	if (strings)
		put_args(args, types, n, vals);
	else if (n)
		memcpy(args, vals, 8 * n); /* vals is NULL when there are none */
	__atomic_store_n(&t->committed, (uintptr_t)(p + size), __ATOMIC_RELEASE);
	return true;
}

/* ---- buffer lifetime ---- */

static void push(struct lk__probe_buffer *b)
{
	struct lk__probe_buffer *head = __atomic_load_n(&lk__probe_buffers, __ATOMIC_RELAXED);

	do
		b->next = head;
	while (!__atomic_compare_exchange_n(&lk__probe_buffers, &head, b, true, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED));
}

static size_t trace_buffer_size(void)
{
	size_t want = lk__trace.config.buffer_size, size = 4096;

	while (size < want)
		size <<= 1;
	return size;
}

/*
 * A ring of `size` resident bytes in a mapping GROWTH times larger that costs nothing until the
 * ring grows into it (MAP_NORESERVE: it is not charged against overcommit either).
 */
static uint8_t *map_ring(size_t size, size_t cap)
{
	uint8_t *data = mmap(NULL, cap, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (data == MAP_FAILED)
		return NULL;
#ifdef MADV_POPULATE_WRITE
	if (madvise(data, size, MADV_POPULATE_WRITE) == 0)
		return data;
#endif
	for (size_t off = 0; off < size; off += 4096) /* kernels before 5.14 */
		data[off] = 0;
	return data;
}

/* Point this thread at an empty ring of the running trace's size, reallocating if needed. */
static int attach(struct lk__probe_buffer *b, struct lk__probe_tls *t)
{
	size_t size = trace_buffer_size();
	bool overwrite = lk__trace.overwrite;
	size_t cap = overwrite					    ? size + size / LK__SLOTS :
		     lk__trace.config.flags & LK_TRACE_FIXED_BUFFER ? size :
								      GROWTH * size;

	/* Counted from here: a handler's event dropped while this runs belongs to the new trace. */
	__atomic_store_n(&b->lost, 0, __ATOMIC_RELAXED);
	if (b->cap != cap || b->size != size) {
		uint8_t *data = map_ring(overwrite ? cap : size,
					 cap); /* a flight recorder's is all in use */

		if (!data)
			return -1;
		if (b->data)
			munmap(b->data, b->cap);
		b->data = data;
		b->cap = cap;
		b->size = size;
	} else if (b->grown) {
		madvise(b->data + b->size, b->cap - b->size, MADV_DONTNEED);
	}
	b->grown = false;
	b->rp = b->data;
	b->lap_end = b->data + b->size;
	b->jumped_to = NULL;
	b->slow_end = 0; /* the first record finds its place through reserve() and rearm() */
	b->woke_at_rp = NULL;
	b->lost_written = b->events = b->packets = 0;
	b->fd = -1;
	b->overwrite = overwrite;
	b->max_record = b->size / 4;
	if (overwrite)
		attach_overwrite(b);
	__atomic_store_n(&t->committed, (uintptr_t)b->data, __ATOMIC_RELEASE);
	__atomic_store_n(&b->trace_gen, lk__trace.gen, __ATOMIC_RELEASE);
	return 0;
}

static void record_thread_name(struct lk__probe_buffer *b, struct lk__probe_tls *t)
{
	uint64_t name = (uintptr_t)b->name;
	bool quick;

	if (b->overwrite)
		return; /* snapshots write the name (attach_overwrite read it) */
	prctl(PR_GET_NAME, b->name, 0, 0, 0);
	write_record(b, t, LK__EVENT_THREAD_NAME, LK_PROBE_STR, true, 1, &name, &quick);
}

static struct lk__probe_buffer *create(struct lk__probe_tls *t)
{
	struct lk__probe_buffer *b =
		mmap(NULL, sizeof(*b), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (b == MAP_FAILED)
		return NULL;
	memset(b, 0, sizeof(*b));
	b->tls = t;
	b->tid = gettid();
	b->fd = -1;
	if (attach(b, t) != 0) {
		munmap(b, sizeof(*b));
		return NULL;
	}
	pthread_once(&exit_key_once, exit_key_init);
	pthread_setspecific(exit_key, b);
	push(b);
	return b;
}

/* The buffer to record into now, set up for the running trace; NULL if none can be. */
static struct lk__probe_buffer *current_buffer(struct lk__probe_tls *t)
{
	struct lk__probe_buffer *b = my_buffer;

	if (b == BUFFER_GONE)
		return NULL;
	if (!b) {
		b = create(t);
		if (!b)
			return NULL;
		my_buffer = b;
		record_thread_name(b, t);
	} else if (__atomic_load_n(&b->trace_gen, __ATOMIC_ACQUIRE) != lk__trace.gen) {
		if (attach(b, t) != 0)
			return NULL;
		record_thread_name(b, t);
	}
	if (pending_lost) {
		__atomic_fetch_add(&b->lost, pending_lost, __ATOMIC_RELAXED);
		pending_lost = 0;
	}
	return b;
}

LK_API bool lk__probe_emit_slow(struct lk_probe_site *site, unsigned int n, const uint64_t *vals)
{
	struct lk__probe_tls *t = &lk__probe_tls;
	unsigned int nested = __atomic_load_n(&t->nesting, __ATOMIC_RELAXED);
	struct lk__probe_buffer *b;
	bool recorded = false;

	__atomic_store_n(&t->nesting, nested + 1, __ATOMIC_RELAXED); /* read by lk_trace_stop */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&lk__trace.running, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(&lk__trace.stopping, __ATOMIC_ACQUIRE)) {
		set_fast_end(t, 0);
	} else if (nested) {
		count_lost(my_buffer); /* a signal handler interrupted an event on this thread */
	} else if ((b = current_buffer(t))) {
		bool quick;

		/* flags: site.c sets LK__SITE_TRACER in it while sites record */
		bool strings = __atomic_load_n(&site->flags, __ATOMIC_RELAXED) & LK__SITE_STRINGS;

		recorded = write_record(b, t, site->id, site->arg_types, strings, n, vals, &quick);
		if (!quick || t->committed >= b->slow_end)
			rearm(b, t); /* past the watermark or out of room: look at rp */
	} else {
		count_lost(NULL);
	}
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(&t->nesting, nested, __ATOMIC_RELAXED);
	return recorded;
}

/* ---- the consumer's side ---- */

uintptr_t lk__buffer_committed(struct lk__probe_buffer *b)
{
	uintptr_t c;

	__atomic_store_n(&b->reading, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&b->dead, __ATOMIC_SEQ_CST))
		c = __atomic_load_n(&b->final_committed, __ATOMIC_ACQUIRE);
	else
		c = __atomic_load_n(&b->tls->committed, __ATOMIC_ACQUIRE);
	__atomic_store_n(&b->reading, 0, __ATOMIC_RELEASE);
	return c;
}

void lk__buffer_release(struct lk__probe_buffer *b, uint8_t *rp)
{
	__atomic_store_n(&b->rp, rp, __ATOMIC_RELEASE);
}

/*
 * The thread is exiting: hand the consumer its last commit, and stop looking at its TLS (which
 * goes away with the thread). Events from later TLS destructors on this thread are not recorded.
 */
static void thread_exit(void *arg)
{
	struct lk__probe_buffer *b = arg;
	struct lk__probe_tls *t = &lk__probe_tls;

	my_buffer = BUFFER_GONE;
	set_fast_end(t, 0);
	__atomic_store_n(&b->final_committed, __atomic_load_n(&t->committed, __ATOMIC_RELAXED),
			 __ATOMIC_RELEASE);
	__atomic_store_n(&b->dead, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&b->reading, __ATOMIC_SEQ_CST))
		sched_yield();
	__atomic_store_n(&b->gone, 1, __ATOMIC_RELEASE); /* the consumer may free b from here */
	lk__consumer_wake();
}

void lk__buffer_free(struct lk__probe_buffer *b)
{
	if (b->data)
		munmap(b->data, b->cap);
	munmap(b, sizeof(*b));
}

/*
 * After the keys are off: wait until every live thread has left the emit it may have been in.
 * A thread stopped inside one (a debugger) is given up on after a second.
 */
void lk__probe_buffers_quiesce(void)
{
	pthread_mutex_lock(&lk__probe_buffers_lock);
	for (struct lk__probe_buffer *b = __atomic_load_n(&lk__probe_buffers, __ATOMIC_ACQUIRE); b;
	     b = b->next) {
		for (int spins = 0; spins < 100000; spins++) {
			unsigned int nesting;

			__atomic_store_n(&b->reading, 1, __ATOMIC_SEQ_CST);
			nesting = __atomic_load_n(&b->dead, __ATOMIC_SEQ_CST) ?
					  0 :
					  __atomic_load_n(&b->tls->nesting, __ATOMIC_RELAXED);
			__atomic_store_n(&b->reading, 0, __ATOMIC_RELEASE);
			if (nesting == 0)
				break;
			sched_yield();
		}
	}
	pthread_mutex_unlock(&lk__probe_buffers_lock);
}

/* Send every live thread's next event to the slow path (trace flags changed or stopping). */
void lk__probe_buffers_retarget(void)
{
	pthread_mutex_lock(&lk__probe_buffers_lock);
	for (struct lk__probe_buffer *b = __atomic_load_n(&lk__probe_buffers, __ATOMIC_ACQUIRE); b;
	     b = b->next) {
		__atomic_store_n(&b->reading, 1, __ATOMIC_SEQ_CST);
		if (!__atomic_load_n(&b->dead, __ATOMIC_SEQ_CST))
			set_fast_end(b->tls, 0);
		__atomic_store_n(&b->reading, 0, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&lk__probe_buffers_lock);
}

void lk__probe_forget_thread(void)
{
	my_buffer = NULL;
	memset(&lk__probe_tls, 0, sizeof(lk__probe_tls));
}
