// SPDX-License-Identifier: MIT
/*
 * lk_now_ns(): CLOCK_MONOTONIC from the cycle counter, and the counter's frequency.
 *
 * The mapping ns = anchor.ns + (cycles - anchor.at) * mult >> 32 is guarded by a seqcount: the
 * writer makes it odd, writes, makes it even again; a reader reads it before and after the fields
 * and retries when it moved or was odd. Readers never wait for the writer: after a few tries they
 * read CLOCK_MONOTONIC from the vDSO instead, so a signal handler can read while its own thread
 * is in the middle of writing.
 *
 * Every LK__RESYNC_NS of counter time the next reader becomes the writer (try-lock, no waiting):
 * it reads CLOCK_MONOTONIC next to the counter (three tries, the narrowest bracket wins) and
 * publishes a new slot whose rate is CLOCK_MONOTONIC's over the last interval (so NTP's frequency
 * changes are followed). No reader uses a slot past its interval, so the new slot may start on
 * CLOCK_MONOTONIC itself whenever that is at or above the last value the old slot could give; when
 * the old slot ran ahead, the new one starts where it ended and runs up to LK__SLEW_PPM slower
 * until CLOCK_MONOTONIC catches up. Only a jump of the counter (more than LK__STEP_NS ahead) is
 * stepped back, and each thread's floor keeps its own readings monotonic.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clock/clock_internal.h"
#include "core/counter_pair.h"
#include "internal/clock.h"

struct tb_slot {
	uint64_t at;
	uint64_t ns;
	uint64_t mult;
};

static struct {
	uint32_t seq;		/* odd while the slot is written */
	uint32_t writer;	/* 1 while a thread resyncs */
	uint64_t resync_cycles; /* 0 until the counter clock is ready: every read is slow */
	struct tb_slot slot;
	/* Writer only (under `writer`). */
	uint64_t ref_at, ref_ns; /* the last CLOCK_MONOTONIC pair */
	uint64_t raw_at, raw_ns; /* the first CLOCK_MONOTONIC_RAW pair, for the frequency */
	uint64_t raw_width;	 /* its bracket, cycles */
	bool hz_measured;
	uint32_t stale;	       /* a reader used the slot past its interval (writer busy) */
	uint64_t refine_every; /* cycles between refinements of a measured frequency */
	uint64_t refined_at;   /* atomic */
} tb __attribute__((aligned(64)));

uint64_t lk__vdso_ns(int clock)
{
	struct timespec ts;

	if (clock_gettime(clock, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * LK__NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

LK_API uint64_t lk_cycles(void)
{
	return LK_ARCH_HAVE_CYCLE_COUNTER ? lk__arch_counter() : 0;
}

uint64_t lk__ns_to_cycles(uint64_t ns)
{
	uint64_t hz = LK__LOAD(&lk__clock.hz);

	return (uint64_t)((unsigned __int128)ns * hz / LK__NSEC_PER_SEC);
}

static uint64_t pair(int clock, uint64_t *at, uint64_t *ns)
{
	return lk__counter_pair(clock, at, ns, 3);
}

/* A pair is trusted when its bracket is at most LK__PAIR_NS_MAX (a vDSO read takes ~25 ns). */
static bool pair_ok(uint64_t width)
{
	return width <= lk__ns_to_cycles(LK__PAIR_NS_MAX);
}

static uint64_t mult_from_hz(uint64_t hz)
{
	return (uint64_t)(((unsigned __int128)LK__NSEC_PER_SEC << LK__MULT_SHIFT) / hz);
}

static void set_hz(uint64_t hz, const char *source)
{
	__atomic_store_n(&lk__clock.hz, hz, __ATOMIC_RELAXED);
	__atomic_store_n(&lk__clock.cycle_mult, mult_from_hz(hz), __ATOMIC_RELAXED);
	__atomic_store_n(&lk__clock.hz_source, source, __ATOMIC_RELEASE);
}

static uint64_t slot_eval(const struct tb_slot *s, uint64_t cyc)
{
	uint64_t d = cyc - s->at;

	if ((int64_t)d < 0) /* a counter read that ran ahead of the slot's load */
		d = 0;
	return s->ns + lk__scale(d, s->mult);
}

/* ---- calibration ---- */

/* The kernel's clocksource: lk_now_ns() uses the counter only where the kernel does too. */
static bool kernel_uses_counter(const char *name, char *seen, size_t len)
{
	int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource",
		      O_RDONLY | O_CLOEXEC);
	ssize_t n;

	seen[0] = 0;
	if (fd < 0)
		return true; /* no sysfs (a container may hide it): trust the CPU's word */
	n = read(fd, seen, len - 1);
	close(fd);
	if (n <= 0)
		return true;
	seen[n] = 0;
	seen[strcspn(seen, "\n")] = 0;
	return strcmp(seen, name) == 0;
}

/* Frequency from the perf page's cyc2ns (cap_user_time): ns = cyc * mult >> shift. */
static uint64_t hz_from_page(const volatile struct perf_event_mmap_page *page)
{
	if (!page->cap_user_time || !page->time_mult)
		return 0;
	return (uint64_t)(((unsigned __int128)LK__NSEC_PER_SEC << page->time_shift) /
			  page->time_mult);
}

static uint64_t hz_from_perf_page(void)
{
	size_t len = (size_t)getpagesize();
	uint64_t hz = 0;
	void *page;
	int fd = lk__task_clock_open();

	if (fd < 0)
		return 0;
	page = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (page == MAP_FAILED)
		return 0;
	hz = hz_from_page(page);
	munmap(page, len);
	return hz;
}

/*
 * Measure against CLOCK_MONOTONIC_RAW for LK__CALIBRATE_NS, and on while the two pairs' brackets
 * leave the frequency less certain than LK__RATE_PPM_MAX / 4 (each pair's counter value is within
 * half its bracket of the clock's reading: relative error <= (w0 + w1) / 2 / span; vDSO brackets
 * of ~30 ns give 150 ppm at 200 µs), up to LK__CALIBRATE_MAX_NS. Refined every LK__RESYNC_NS after.
 */
static uint64_t hz_measured(void)
{
	uint64_t at, ns, width;

	do
		lk__counter_pair(CLOCK_MONOTONIC_RAW, &at, &ns, 1);
	while (ns - tb.raw_ns < LK__CALIBRATE_NS && ns >= tb.raw_ns);
	for (;;) {
		width = lk__counter_pair(CLOCK_MONOTONIC_RAW, &at, &ns, 8);
		if (at <= tb.raw_at || ns <= tb.raw_ns)
			return 0;
		if ((unsigned __int128)(tb.raw_width + width) * 2 * 1000000 <=
			    (unsigned __int128)(at - tb.raw_at) * LK__RATE_PPM_MAX ||
		    ns - tb.raw_ns >= LK__CALIBRATE_MAX_NS)
			break;
	}
	return (uint64_t)((unsigned __int128)(at - tb.raw_at) * LK__NSEC_PER_SEC /
			  (ns - tb.raw_ns));
}

static void choose_now_method(void)
{
	char seen[64];
	struct lk__str r = LK__STR(lk__clock.now_reason);

	if (lk__clock.forced_now == LK_NOW_VDSO) {
		lk__clock.now_method = LK_NOW_VDSO;
		lk__str_add(&r,
			    "LOWKEY_CLOCK_NOW=vdso: clock_gettime(CLOCK_MONOTONIC) on every call");
	} else if (!lk__clock.counter.usable || !LK__LOAD(&lk__clock.hz)) {
		lk__clock.now_method = LK_NOW_VDSO;
		lk__str_add(&r, "clock_gettime(CLOCK_MONOTONIC): ");
		lk__str_add(&r, lk__clock.counter.usable ? "the counter's frequency is unknown" :
							   lk__clock.counter.why_not);
	} else if (!kernel_uses_counter(lk__clock.counter.clocksource, seen, sizeof(seen)) &&
		   lk__clock.forced_now != LK_NOW_TSC) {
		lk__clock.now_method = LK_NOW_VDSO;
		lk__str_add(&r, "clock_gettime(CLOCK_MONOTONIC): the kernel's clocksource is ");
		lk__str_add(&r, seen);
		lk__str_add(&r, ", not ");
		lk__str_add(&r, lk__clock.counter.clocksource);
		lk__str_add(&r,
			    ": the kernel does not trust the counter here (LOWKEY_CLOCK_NOW=tsc "
			    "overrides)");
	} else {
		lk__clock.now_method = LK_NOW_TSC;
		lk__str_add(&r, lk__clock.forced_now == LK_NOW_TSC ? "LOWKEY_CLOCK_NOW=tsc: " : "");
		lk__str_add(&r, "the ");
		lk__str_add(&r, lk__clock.counter.name);
		lk__str_add(&r, " is invariant and is the kernel's clocksource: CLOCK_MONOTONIC is "
				"computed from it, resynchronized every 10 ms");
	}
}

void lk__timebase_init(void)
{
	uint64_t hz = 0, at, ns;
	const char *source = NULL;

	if (lk__clock.counter.usable) {
		tb.raw_width = lk__counter_pair(CLOCK_MONOTONIC_RAW, &tb.raw_at, &tb.raw_ns, 8);
		if (lk__clock.counter.hz) {
			hz = lk__clock.counter.hz;
			source = lk__clock.counter.hz_source;
		} else if ((hz = hz_from_perf_page()) != 0) {
			source =
				"the perf mmap page's time_mult/time_shift (the kernel's calibration)";
		} else if ((hz = hz_measured()) != 0) {
			source =
				"measured against CLOCK_MONOTONIC_RAW (200 µs at start, refined every "
				"10 ms over the time since)";
			tb.hz_measured = true;
		}
		if (hz)
			set_hz(hz, source);
		if (tb.hz_measured) {
			tb.refined_at = lk__arch_counter();
			__atomic_store_n(&tb.refine_every, lk__ns_to_cycles(LK__RESYNC_NS),
					 __ATOMIC_RELEASE);
		}
	}
	choose_now_method();
	if (lk__clock.now_method != LK_NOW_TSC)
		return;
	lk__counter_pair(CLOCK_MONOTONIC, &at, &ns, 8);
	tb.ref_at = at;
	tb.ref_ns = ns;
	tb.slot.at = at;
	tb.slot.ns = ns;
	tb.slot.mult = LK__LOAD(&lk__clock.cycle_mult);
	/* Published with a release: readers that see resync_cycles see the slot. */
	__atomic_store_n(&tb.resync_cycles, lk__ns_to_cycles(LK__RESYNC_NS), __ATOMIC_RELEASE);
}

/* ---- resynchronization ---- */

/* Under tb.writer: the frequency over the whole time since the first measurement. */
static void refine_hz(void)
{
	uint64_t at, ns, width;

	if (!tb.hz_measured)
		return;
	width = pair(CLOCK_MONOTONIC_RAW, &at, &ns);
	__atomic_store_n(&tb.refined_at, at, __ATOMIC_RELAXED);
	if (pair_ok(width) && at > tb.raw_at && ns > tb.raw_ns)
		set_hz((uint64_t)((unsigned __int128)(at - tb.raw_at) * LK__NSEC_PER_SEC /
				  (ns - tb.raw_ns)),
		       lk__clock.hz_source);
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

static void record_error(int64_t err, bool stepped)
{
	uint64_t mag = err < 0 ? (uint64_t)-err : (uint64_t)err;

	LK__COUNT(now_resyncs);
	if (stepped)
		LK__COUNT(now_steps);
	__atomic_store_n(&lk__clock.stats.now_last_error_ns, err, __ATOMIC_RELAXED);
	if (mag > LK__LOAD(&lk__clock.stats.now_max_error_ns))
		__atomic_store_n(&lk__clock.stats.now_max_error_ns, mag, __ATOMIC_RELAXED);
}

/*
 * Under tb.writer. Readers use a slot at most resync_cycles past its anchor (they come here
 * instead; only while a resync cannot be done do they read past it, and say so in tb.stale), so
 * the old mapping's values end there: the new anchor only has to be at or above that. Behind
 * CLOCK_MONOTONIC, the new mapping starts on it; ahead of it, the new mapping starts where the old
 * one ended and runs slower until it meets it.
 */
static void resync_locked(void)
{
	struct tb_slot old = tb.slot; /* only the writer writes it */
	const struct tb_slot *cur = &old;
	uint64_t every = tb.resync_cycles, at, mono, rate, mult, limit, now_at, truth_now, old_end;
	uint32_t seq = __atomic_load_n(&tb.seq, __ATOMIC_RELAXED);
	int64_t err, ahead = 0, cap;
	bool stale, step = false;

	if (!pair_ok(pair(CLOCK_MONOTONIC, &at, &mono)))
		return; /* preempted in every try: the next call tries again */
	stale = __atomic_exchange_n(&tb.stale, 0, __ATOMIC_RELAXED);
	rate = cur->mult;
	if (at - tb.ref_at >= every / 2 && at > tb.ref_at && mono > tb.ref_ns)
		rate = (uint64_t)(((unsigned __int128)(mono - tb.ref_ns) << LK__MULT_SHIFT) /
				  (at - tb.ref_at));
	/* The error of the last value the old mapping could have given. */
	limit = at - cur->at > every && at > cur->at ? cur->at + every : at;
	err = (int64_t)(mono - lk__scale(at - limit, rate) - slot_eval(cur, limit));

	now_at = lk__arch_counter();
	truth_now = mono + lk__scale(now_at - at, rate);
	/* What readers may have been given: up to the interval's end, or up to now if some read
	 * past it while a resync could not be done. */
	old_end = slot_eval(cur, now_at - cur->at > every && !stale ? cur->at + every : now_at);
	if (truth_now < old_end) {
		ahead = (int64_t)(old_end - truth_now);
		step = ahead > LK__STEP_NS; /* a counter jump: go back; each thread's floor holds */
	}
	mult = rate;
	if (ahead && !step) {
		cap = (int64_t)(rate / 1000000 * LK__SLEW_PPM);
		mult = rate -
		       (uint64_t)clamp64((int64_t)(((__int128)ahead << LK__MULT_SHIFT) / every), 0,
					 cap);
	}
	/* A reader that sees any new field sees the odd count (release stores), and reads the count
	 * again only after the fields (acquire loads): no fences, which ThreadSanitizer would not
	 * follow; on x86 all of these are plain moves. */
	__atomic_store_n(&tb.seq, seq + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&tb.slot.at, now_at, __ATOMIC_RELEASE);
	__atomic_store_n(&tb.slot.ns, ahead && !step ? old_end : truth_now, __ATOMIC_RELEASE);
	__atomic_store_n(&tb.slot.mult, mult, __ATOMIC_RELEASE);
	__atomic_store_n(&tb.seq, seq + 2, __ATOMIC_RELEASE);
	tb.ref_at = at;
	tb.ref_ns = mono;
	record_error(err, step);
	refine_hz();
}

static bool resync_due(void)
{
	uint64_t every = __atomic_load_n(&tb.resync_cycles, __ATOMIC_ACQUIRE);

	return every &&
	       lk__arch_counter() - __atomic_load_n(&tb.slot.at, __ATOMIC_RELAXED) >= every;
}

static void resync(void)
{
	if (__atomic_exchange_n(&tb.writer, 1, __ATOMIC_ACQUIRE))
		return; /* another thread (or the call this handler interrupted) is at it */
	if (resync_due())
		resync_locked();
	__atomic_store_n(&tb.writer, 0, __ATOMIC_RELEASE);
}

static bool refine_due(void)
{
	uint64_t every = __atomic_load_n(&tb.refine_every, __ATOMIC_ACQUIRE);

	return every &&
	       lk__arch_counter() - __atomic_load_n(&tb.refined_at, __ATOMIC_RELAXED) >= every;
}

void lk__timebase_tick(void)
{
	if (resync_due()) {
		resync();
	} else if (refine_due() && !__atomic_exchange_n(&tb.writer, 1, __ATOMIC_ACQUIRE)) {
		/* lk_now_ns() uses the vDSO, yet the CPU-time methods use the frequency. */
		if (refine_due())
			refine_hz();
		__atomic_store_n(&tb.writer, 0, __ATOMIC_RELEASE);
	}
}

/* A child made by _Fork() or clone() may have been forked while a parent thread held the lock. */
void lk__timebase_after_fork(void)
{
	__atomic_store_n(&tb.writer, 0, __ATOMIC_RELEASE);
}

/* ---- reading ---- */

/* One consistent read of the mapping; false if the writer was at it, or a resync is due and
 * !allow_stale. */
static inline __attribute__((always_inline)) bool read_tb(uint64_t *out, bool allow_stale)
{
	uint32_t seq = __atomic_load_n(&tb.seq, __ATOMIC_ACQUIRE);
	uint64_t at = __atomic_load_n(&tb.slot.at, __ATOMIC_ACQUIRE);
	uint64_t ns = __atomic_load_n(&tb.slot.ns, __ATOMIC_ACQUIRE);
	uint64_t mult = __atomic_load_n(&tb.slot.mult, __ATOMIC_ACQUIRE);
	uint64_t every = __atomic_load_n(&tb.resync_cycles, __ATOMIC_ACQUIRE);
	uint64_t d;

	if (LK__UNLIKELY(!every))
		return false; /* not initialized, or the vDSO method: skip the counter read */
	d = lk__arch_counter() - at;
	if (LK__UNLIKELY(__atomic_load_n(&tb.seq, __ATOMIC_RELAXED) != seq || (seq & 1)))
		return false;
	if ((int64_t)d < 0)
		d = 0;
	if (LK__UNLIKELY(d >= every)) {
		if (!allow_stale)
			return false;
		__atomic_store_n(&tb.stale, 1, __ATOMIC_RELAXED);
	}
	*out = ns + lk__scale(d, mult);
	return true;
}

static inline uint64_t floor_now(struct lk__cputime_thread *t, uint64_t v)
{
	if (v < t->now_last)
		v = t->now_last;
	t->now_last = v;
	return v;
}

LK_API uint64_t lk_now_ns(void)
{
	struct lk__cputime_thread *t = &lk__cputime_tls;
	uint64_t v;

	if (LK__LIKELY(read_tb(&v, false)))
		return floor_now(t, v);
	return lk__now_slow(t);
}

extern __typeof__(lk_now_ns) lk__now_ns __attribute__((alias("lk_now_ns"), visibility("hidden")));

uint64_t lk__now_slow(struct lk__cputime_thread *t)
{
	int saved_errno = errno;
	uint64_t v = 0;
	bool ok = false;

	if (lk__clock_init() && lk__clock.now_method == LK_NOW_TSC) {
		lk__clock_cookie(); /* in a forked child, frees the writer's lock a parent held */
		resync();
		/* A stale slot is still right to within the slew: use it when another thread (or
		 * the call this handler interrupted) holds the writer's lock. */
		for (int i = 0; i < 3 && !ok; i++)
			ok = read_tb(&v, true);
	}
	if (!ok)
		v = lk__vdso_ns(CLOCK_MONOTONIC);
	errno = saved_errno;
	return floor_now(t, v);
}
