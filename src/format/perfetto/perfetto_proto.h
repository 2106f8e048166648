/* SPDX-License-Identifier: MIT */
/*
 * Internal: the numbers of the Perfetto trace format's fields that lowkey writes (perfetto.c)
 * and reads back (read.c), from Perfetto's protos/perfetto/trace/ (trace
 * packet, track event and descriptors, debug annotations, clock snapshot, interned data), and
 * the ids lowkey chooses within them. One list, so that the writer and the reader cannot
 * disagree.
 */
#ifndef LK_FORMAT_PERFETTO_PROTO_H
#define LK_FORMAT_PERFETTO_PROTO_H

/* Trace and TracePacket */
#define TRACE_PACKET 1
#define PKT_TIMESTAMP 8
#define PKT_SEQUENCE_ID 10
#define PKT_TRACK_EVENT 11
#define PKT_INTERNED_DATA 12
#define PKT_SEQUENCE_FLAGS 13
#define PKT_CLOCK_SNAPSHOT 6
#define PKT_TIMESTAMP_CLOCK_ID 58
#define PKT_DEFAULTS 59
#define PKT_TRACK_DESCRIPTOR 60
#define PKT_FIRST_ON_SEQUENCE 87
#define SEQ_INCREMENTAL_STATE_CLEARED 1
#define SEQ_NEEDS_INCREMENTAL_STATE 2

/* TracePacketDefaults, TrackEventDefaults */
#define DEF_TIMESTAMP_CLOCK_ID 58
#define DEF_TRACK_EVENT 11
#define TED_TRACK_UUID 11
#define TED_EXTRA_COUNTER_TRACKS 31

/* ClockSnapshot, ClockSnapshot.Clock; builtin clock ids */
#define SNAP_CLOCKS 1
#define CLOCK_ID 1
#define CLOCK_TIMESTAMP 2
#define CLOCK_INCREMENTAL 3
#define BUILTIN_REALTIME 1
#define BUILTIN_MONOTONIC 3
#define BUILTIN_BOOTTIME 6
#define LK_CLOCK 64 /* sequence-scoped: 64 to 127 */

/* TrackDescriptor, ProcessDescriptor, ThreadDescriptor, CounterDescriptor */
#define TD_UUID 1
#define TD_NAME 2
#define TD_PROCESS 3
#define TD_THREAD 4
#define TD_PARENT_UUID 5
#define TD_COUNTER 8
#define PD_PID 1
#define PD_NAME 6
#define PD_LABELS 8
#define THD_PID 1
#define THD_TID 2
#define THD_NAME 5
#define CD_TYPE 1
#define CD_UNIT 3
#define COUNTER_THREAD_TIME_NS 1
#define UNIT_TIME_NS 1

/* TrackEvent */
#define TE_CATEGORY_IIDS 3
#define TE_DEBUG_ANNOTATIONS 4
#define TE_TYPE 9
#define TE_NAME_IID 10
#define TE_TRACK_UUID 11
#define TE_EXTRA_COUNTER_VALUES 12
#define TE_COUNTER_VALUE 30
#define TE_DOUBLE_COUNTER_VALUE 44
#define TYPE_SLICE_BEGIN 1
#define TYPE_SLICE_END 2
#define TYPE_INSTANT 3
#define TYPE_COUNTER 4

/* DebugAnnotation */
#define DA_NAME_IID 1
#define DA_UINT 3
#define DA_INT 4
#define DA_DOUBLE 5
#define DA_STRING 6
#define DA_POINTER 7

/*
 * Sequence ids: Perfetto's tracing service numbers its writers from 1, so lowkey's start at
 * 8192 (a file concatenated with a system trace keeps its sequences apart) and stay within
 * 16383 (two bytes each).
 */
#define SEQ_BASE 8192
#define SEQ_SPAN 8192

#endif
