/* SPDX-License-Identifier: MIT */
/*
 * The LTTng-UST tracepoints of lttng_target.c: a span by the _begin/_end convention lowkey reads
 * in foreign CTF, and an event with an integer, a pointer and a string.
 */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER lkforeign

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "./lttng_tp.h"

#if !defined(LK_LTTNG_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define LK_LTTNG_TP_H

#include <lttng/tracepoint.h>

LTTNG_UST_TRACEPOINT_EVENT(lkforeign, work_begin, LTTNG_UST_TP_ARGS(int, item),
			   LTTNG_UST_TP_FIELDS(lttng_ust_field_integer(int, item, item)))
LTTNG_UST_TRACEPOINT_EVENT(lkforeign, work_end, LTTNG_UST_TP_ARGS(int, item),
			   LTTNG_UST_TP_FIELDS(lttng_ust_field_integer(int, item, item)))
LTTNG_UST_TRACEPOINT_EVENT(
	lkforeign, note, LTTNG_UST_TP_ARGS(long, n, void *, where, const char *, text),
	LTTNG_UST_TP_FIELDS(lttng_ust_field_integer(long, n, n) lttng_ust_field_integer_hex(
		unsigned long, where, (unsigned long)where) lttng_ust_field_string(text, text)))

#endif

#include <lttng/tracepoint-event.h>
