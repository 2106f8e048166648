/* SPDX-License-Identifier: MIT */
/*
 * The emit path of probes, included by lowkey/probe.h: the thread's write position, the record
 * header, and the inline fast path that writes an event into the thread's ring. Nothing here is
 * API.
 */
#ifndef LOWKEY_BITS_PROBE_EMIT_H
#define LOWKEY_BITS_PROBE_EMIT_H

#ifndef LOWKEY_PROBE_H
#error "include <lowkey/probe.h>, not <lowkey/bits/probe_emit.h>"
#endif

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <lowkey/bits/arch.h>
#include <lowkey/bits/compiler.h>

LK_BEGIN_DECLS

/*
 * The calling thread's write position, in initial-exec TLS so the fast path reaches it with one
 * %fs-relative access. All zero until the thread records its first event, which sends that
 * event to the slow path; the slow path allocates the thread's buffer and fills this in.
 */
struct lk__probe_tls {
	/*
	 * Where the next record goes, and where the records end for the consumer: the same place,
	 * since a record is committed before its emit ends and a nested emit never writes.
	 */
	uintptr_t committed;
	uintptr_t fast_end;   /* the fast path may write up to here */
	unsigned int nesting; /* emits in progress on this thread (signal handlers nest) */
	unsigned int spare;
};

extern __thread struct lk__probe_tls lk__probe_tls __attribute__((tls_model("initial-exec")));

/* Both return whether the event was recorded (false: no trace, or dropped and counted). */
LK_API bool lk__probe_emit_slow(struct lk_probe_site *site, unsigned int n, const uint64_t *vals);

/*
 * Whether a lowkey trace records: while it is false an event that the fast path cannot take (a
 * site on only for a USDT tracer) ends there, without calling the slow path. Written by the
 * registry as it applies rules (true before a trace's sites turn on); read on enabled paths only.
 */
LK_API extern bool lk__probe_recording;

static inline __attribute__((always_inline)) bool lk__probe_no_trace(void)
{
	return LK__UNLIKELY(!__atomic_load_n(&lk__probe_recording, __ATOMIC_RELAXED));
}

/* An event's timestamp: the cheapest counter read (why that one: lowkey/bits/arch.h). */
static inline __attribute__((always_inline)) uint64_t lk__probe_tsc(void)
{
	return lk__arch_counter();
}

/*
 * A record's header: one u64, the event id in its low 16 bits and the counter's low 48 bits above
 * (the shift drops the counter's top bits, no mask needed). The consumer and readers extend the
 * timestamp from the packet's; 48 bits wrap after 2^48 ticks (34 hours of a 2.3 GHz counter).
 */
#define LK__PROBE_HEADER 8
#define LK__PROBE_ID_BITS 16
#define LK__PROBE_TSC_BITS 48
#define LK__PROBE_TSC_MASK ((UINT64_C(1) << LK__PROBE_TSC_BITS) - 1)

static inline uint64_t lk__probe_header(uint64_t tsc, uint32_t id)
{
	return tsc << LK__PROBE_ID_BITS | id;
}

/*
 * The fast path for numeric arguments: claim the thread, reserve, stamp, copy, commit, release.
 * The claim (nesting 0 -> 1) is stored before the write position is read, so a signal handler
 * that interrupts this event and records one of its own sees the claim and takes the slow path,
 * which drops and counts its event rather than writing over this one. Anything unusual (no buffer
 * yet, the watermark or the end of the ring reached, CPU time requested, tracing stopped) goes
 * to the slow path too: fast_end routes it there.
 */
static inline __attribute__((always_inline)) bool
lk__probe_emit(struct lk_probe_site *site, unsigned int n, uint64_t a0, uint64_t a1, uint64_t a2,
	       uint64_t a3, uint64_t a4, uint64_t a5, uint64_t a6, uint64_t a7)
{
	struct lk__probe_tls *t = &lk__probe_tls;
	uint32_t size = LK__PROBE_HEADER + 8 * n;
	unsigned int nested = __atomic_load_n(&t->nesting, __ATOMIC_RELAXED);
	uintptr_t p;

	__atomic_store_n(&t->nesting, nested + 1, __ATOMIC_RELAXED); /* read by lk_trace_stop */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	p = __atomic_load_n(&t->committed, __ATOMIC_RELAXED);
	if (LK__LIKELY(nested == 0 &&
		       p + size <= __atomic_load_n(&t->fast_end, __ATOMIC_RELAXED))) {
		const uint64_t args[8] = { a0, a1, a2, a3, a4, a5, a6, a7 };
		uint64_t head = lk__probe_header(lk__probe_tsc(), site->id);

		memcpy(LK__REINTERPRET(void *, p), &head, 8);
		for (unsigned int i = 0; i < n; i++) /* n is a constant: unrolled, from registers */
			memcpy(LK__REINTERPRET(void *, p + LK__PROBE_HEADER + 8 * i), &args[i], 8);
		__atomic_store_n(&t->committed, p + size, __ATOMIC_RELEASE);
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		__atomic_store_n(&t->nesting, 0, __ATOMIC_RELAXED);
		return true;
	}
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(&t->nesting, nested, __ATOMIC_RELAXED);
	if (lk__probe_no_trace())
		return false;
	{
		const uint64_t args[8] = { a0, a1, a2, a3, a4, a5, a6, a7 };

		return lk__probe_emit_slow(site, n, args);
	}
}

#define lk__probe_emit0(site) lk__probe_emit((site), 0, 0, 0, 0, 0, 0, 0, 0, 0)

LK_END_DECLS

#endif
