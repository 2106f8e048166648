/* SPDX-License-Identifier: MIT */
/*
 * Internal: how far long work inside the library is (the conversion of a trace at its stop, in
 * `lowkey convert` and when `lowkey trace` recovers a trace), told to whoever waits for it.
 *
 * The work runs on one thread: lk__progress_begin() names the sink for that thread, the reader
 * calls lk__progress_advance() after each packet (lk__reader_packet_hook), and lk__progress_end() reports the end. The
 * sink hears the beginning (done 0), the end (done == total), and in between at most one report
 * per LK__PROGRESS_MS, so a sink may send a message each time without flooding anyone.
 */
#ifndef LK_FORMAT_PROGRESS_H
#define LK_FORMAT_PROGRESS_H

#include <stdint.h>

#define LK__PROGRESS_MS 100

struct lk__progress_sink {
	/* done: bytes of the trace's streams read; total: their size when the work began */
	void (*report)(uint64_t done, uint64_t total, void *arg);
	void *arg;
};

/* The bytes of a CTF trace directory's stream files (what a conversion reads); 0 if unreadable. */
uint64_t lk__progress_ctf_bytes(const char *ctf_dir);

/* Start reporting this thread's work to sink (NULL: nowhere) out of total bytes. Not nested. */
void lk__progress_begin(const struct lk__progress_sink *sink, uint64_t total);

/* bytes more are done. Costs a thread-local load when no work is reported, a clock read otherwise. */
void lk__progress_advance(uint64_t bytes);

/* The work is over: the last report (done as total), and this thread reports nowhere again. */
void lk__progress_end(void);

/*
 * Where the conversion at a trace's stop reports: the sink the stopping thread set with
 * lk__progress_stop_sink_for_thread() (the control server, for the client whose STOP it serves),
 * else the one set for the process (tracing from the environment: its status socket), else NULL.
 */
const struct lk__progress_sink *lk__progress_stop_sink(void);

/* The sink this thread's caller set (NULL: none): a flight recorder's snapshot reports there only. */
const struct lk__progress_sink *lk__progress_thread_sink(void);
void lk__progress_stop_sink_for_process(const struct lk__progress_sink *sink);
void lk__progress_stop_sink_for_thread(const struct lk__progress_sink *sink);

#endif
