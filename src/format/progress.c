// SPDX-License-Identifier: MIT
/*
 * Progress of long work inside the library (see progress.h). The state is the thread's own: a
 * conversion runs on the thread that asked for it, and the reader reports its packets without
 * knowing who listens.
 */
#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal/trace_progress.h"
#include "internal/ctf_reader.h"

struct progress {
	const struct lk__progress_sink *sink;
	uint64_t done, total;
	uint64_t next_ns; /* the earliest time of the next report */
};

static __thread struct progress current;
static __thread const struct lk__progress_sink *thread_stop_sink;
static const struct lk__progress_sink *process_stop_sink;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t lk__progress_ctf_bytes(const char *ctf_dir)
{
	DIR *d = opendir(ctf_dir);
	struct dirent *e;
	struct stat st;
	uint64_t sum = 0;

	while (d && (e = readdir(d)))
		if (strncmp(e->d_name, "stream-", 7) == 0 &&
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISREG(st.st_mode))
			sum += (uint64_t)st.st_size;
	if (d)
		closedir(d);
	return sum;
}

void lk__progress_begin(const struct lk__progress_sink *sink, uint64_t total)
{
	current = (struct progress){ sink, 0, total, now_ns() + LK__PROGRESS_MS * 1000000u };
	if (!sink)
		return;
	lk__reader_packet_hook = lk__progress_advance;
	sink->report(0, total, sink->arg);
}

void lk__progress_advance(uint64_t bytes)
{
	struct progress *p = &current;
	uint64_t now;

	if (!p->sink)
		return;
	p->done += bytes;
	now = now_ns();
	if (now < p->next_ns)
		return;
	p->next_ns = now + LK__PROGRESS_MS * 1000000u;
	p->sink->report(p->done, p->total, p->sink->arg);
}

void lk__progress_end(void)
{
	struct progress *p = &current;
	uint64_t end = p->done > p->total ? p->done :
					    p->total; /* the work is over, however far it got */

	if (p->sink)
		p->sink->report(end, end, p->sink->arg);
	*p = (struct progress){ 0 };
	lk__reader_packet_hook = NULL;
}

const struct lk__progress_sink *lk__progress_stop_sink(void)
{
	return thread_stop_sink ? thread_stop_sink :
				  __atomic_load_n(&process_stop_sink, __ATOMIC_ACQUIRE);
}

const struct lk__progress_sink *lk__progress_thread_sink(void)
{
	return thread_stop_sink;
}

void lk__progress_stop_sink_for_process(const struct lk__progress_sink *sink)
{
	__atomic_store_n(&process_stop_sink, sink, __ATOMIC_RELEASE);
}

void lk__progress_stop_sink_for_thread(const struct lk__progress_sink *sink)
{
	thread_stop_sink = sink;
}
