/* SPDX-License-Identifier: MIT */
/*
 * Internal: counter ticks into nanoseconds, the one rule every trace format times events by:
 * floor(ticks * 10^9 / hz), exact for any tick count and rate. The CTF reader (lk__reader_ns) and
 * the Perfetto writer convert with a scale set once per rate, by multiplication, and fall back to
 * the division where the scale does not apply: the same result either way.
 *
 * Never through a double: a counter's value may be past 2^53 (an aarch64 counter that counts from
 * the epoch, a TSC after weeks of uptime), where a double cannot hold every tick.
 */
#ifndef LK_INTERNAL_TICKS_H
#define LK_INTERNAL_TICKS_H

#include <stdbool.h>
#include <stdint.h>

#define LK__NS_PER_S 1000000000u

/* floor(ticks * 10^9 / hz), UINT64_MAX past its range; hz not 0. Two divisions. */
static inline uint64_t lk__ticks_ns(uint64_t ticks, uint64_t hz)
{
	uint64_t seconds = ticks / hz, rest = ticks % hz, part;

	if (hz <= UINT64_MAX / LK__NS_PER_S) /* any real counter: rest * 10^9 fits in 64 bits */
		part = rest * LK__NS_PER_S / hz;
	else
		part = (uint64_t)((unsigned __int128)rest * LK__NS_PER_S / hz);
	if (seconds > (UINT64_MAX - part) / LK__NS_PER_S)
		return UINT64_MAX;
	return seconds * LK__NS_PER_S + part;
}

/* ceil(ticks * 10^9 / hz): the same, rounded up (how far before a start a tick count reaches). */
static inline uint64_t lk__ticks_ns_up(uint64_t ticks, uint64_t hz)
{
	uint64_t ns = lk__ticks_ns(ticks, hz);

	/* the product and ns * hz differ by less than hz unless the division was exact */
	return ns != UINT64_MAX && ticks * LK__NS_PER_S != ns * hz ? ns + 1 : ns;
}

/* A rate as a scale: the counter's period in ns, whole and in 2^-64ths (rounded down). */
struct lk__ns_scale {
	uint64_t hz, whole, frac;
};

/* One 128-bit division: once per rate, not per value. hz not 0. */
static inline struct lk__ns_scale lk__ns_scale(uint64_t hz)
{
	return (struct lk__ns_scale){
		.hz = hz,
		.whole = LK__NS_PER_S / hz,
		.frac = (uint64_t)(((unsigned __int128)(LK__NS_PER_S % hz) << 64) / hz),
	};
}

/*
 * lk__ticks_ns(ticks, s->hz) into *ns: true, or false when it does not fit in 64 bits (the caller
 * divides). The period's fraction rounded down makes the product at most one below the exact
 * floor, which the remainder tells: it is less than twice hz, so exact modulo 2^64. Three
 * multiplications.
 */
static inline bool lk__ns_scale_apply(const struct lk__ns_scale *s, uint64_t ticks, uint64_t *ns)
{
	uint64_t whole, part = (uint64_t)((unsigned __int128)ticks * s->frac >> 64);

	if (__builtin_mul_overflow(ticks, s->whole, &whole) ||
	    __builtin_add_overflow(whole, part, ns) || *ns == UINT64_MAX)
		return false;
	*ns += ticks * LK__NS_PER_S - *ns * s->hz >= s->hz;
	return true;
}

#endif
