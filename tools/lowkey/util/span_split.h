/* SPDX-License-Identifier: MIT */
/*
 * Where spans' wall time went, by the threads' context switches (lowkey trace --sched): on a CPU,
 * runnable (preempted, waiting for a CPU), blocked (sleeping, waiting for I/O or a lock). One
 * computation for `lowkey report`, its --json and its --html page, which print the same figures.
 *
 * Fed the trace's events in the reader's order (lowkey/trace_reader.h: a thread's probes, then its
 * context switches), it keeps each thread's closed spans and its intervals off the CPU, and splits
 * every span once all are read. Memory: 24 bytes a span and a switch. Not async-signal-safe.
 */
#ifndef LOWKEY_CLI_SPAN_SPLIT_H
#define LOWKEY_CLI_SPAN_SPLIT_H

#include <stddef.h>
#include <stdint.h>

#include <lowkey/trace_reader.h>

/* Time split by the context switches, ns: wall = on_cpu + runnable + blocked. */
struct split {
	double wall, on_cpu, runnable, blocked;
};

struct split_thread;

struct span_split {
	uint64_t tick_hz;
	unsigned int nthreads, nclasses;
	struct split_thread *threads; /* by the trace's thread index */
	struct split *by_class;	      /* each span event's spans (its begin's class), all depths */
	struct split *by_thread;      /* each thread's outermost spans */
};

/* For a trace of nthreads threads and nclasses classes, ticking at tick_hz. 0 or -ENOMEM. */
int span_split_init(struct span_split *s, uint64_t tick_hz, unsigned int nthreads,
		    unsigned int nclasses);
/*
 * One of the trace's events: a span's end the reader paired with its begin, or a context switch
 * (others are ignored). 0 or -ENOMEM.
 */
int span_split_event(struct span_split *s, const struct lk_trace_event *ev);
/* Once every event is read: by_class and by_thread. Linear in spans and switches (plus a log). */
void span_split_compute(struct span_split *s);
void span_split_free(struct span_split *s);

/* A duration as `lowkey report` prints it: "812 ns", "3.25 us", "1.20 ms", "2.50 s"; "-" for NaN. */
void span_split_fmt_ns(char *buf, size_t len, double ns);

#endif
