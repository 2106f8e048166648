/* SPDX-License-Identifier: MIT */
/* The LTTng-UST tracepoint lowkey's probe benchmark compares with: two integers, like its own. */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER lkbench

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "./lk_tp.h"

#if !defined(LK_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define LK_TP_H

#include <lttng/tracepoint.h>

LTTNG_UST_TRACEPOINT_EVENT(lkbench, two_ints, LTTNG_UST_TP_ARGS(long, a, long, b),
			   LTTNG_UST_TP_FIELDS(lttng_ust_field_integer(long, a, a)
						       lttng_ust_field_integer(long, b, b)))

#endif

#include <lttng/tracepoint-event.h>
