// SPDX-License-Identifier: MIT
/*
 * `lowkey report` (text, --json, --html) of traces with 100,000 threads and 100,000 spans never
 * closed -- 100,000 begins, then 100,000 ends of another name on the same thread: as Chrome JSON,
 * and as CTF with a stream file per thread. Every path must be linear or n log n in events,
 * threads, streams and open spans. Each run is under a timeout far above what such a path takes
 * even under the sanitizers; a path that searches the threads per stream, or the open spans per
 * end, does 10^10 steps here and is killed.
 */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <cmocka.h>

#include <lowkey/lowkey.h>

#include "cli/run.h"

/*
 * Under AddressSanitizer, which looks for bad accesses (they show at any size), a tenth: the plain
 * build is the one that finds a quadratic path.
 */
#if defined(__SANITIZE_ADDRESS__)
#define LKT_SCALE 10000
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LKT_SCALE 10000
#endif
#endif
#ifndef LKT_SCALE
#define LKT_SCALE 100000
#endif
#define THREADS LKT_SCALE
#define UNMATCHED LKT_SCALE
#define LIMIT_S 120	  /* per run */
#define ROOM (1ull << 30) /* the traces and reports take about 460 MiB */

/*
 * In memory where there is a tmpfs: 100,000 files made, read and removed on a disk file system
 * wait on its journal, and on whatever else writes to the disk meanwhile (builds beside the tests).
 */
static char scratch[64];
static struct lkt_run r;

static int setup(void **state)
{
	struct statvfs fs;

	(void)state;
	snprintf(scratch, sizeof(scratch), "/dev/shm/lkt-report-scale-XXXXXX");
	if (statvfs("/dev/shm", &fs) == 0 && (uint64_t)fs.f_bavail * fs.f_frsize >= ROOM &&
	    mkdtemp(scratch))
		return 0;
	snprintf(scratch, sizeof(scratch), "/tmp/lkt-report-scale-XXXXXX");
	return mkdtemp(scratch) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	return lkt_sh(&r, "rm -rf '%s'", scratch);
}

/* The three reports of path, each under the timeout; the text one must count what is unmatched. */
static void report_all(const char *path, const char *threads_line)
{
	char want[128];

	snprintf(want, sizeof(want),
		 "(%d spans still open at the end of the trace, %d ends without a begin)",
		 UNMATCHED, UNMATCHED);
	lkt_sh(&r,
	       "timeout %d %s report -q '%s' > '%s/text' && grep -F '%s' '%s/text' && grep -F '%s' '%s/text'",
	       LIMIT_S, LOWKEY, path, scratch, want, scratch, threads_line, scratch);
	lkt_expect(&r, 0, want);
	lkt_sh(&r,
	       "timeout %d %s report -q --json '%s' > '%s/json' && grep -c '\"tid\":' '%s/json'",
	       LIMIT_S, LOWKEY, path, scratch, scratch);
	lkt_expect(&r, 0, NULL);
	lkt_sh(&r,
	       "timeout %d %s report -q --html '%s/page.html' '%s' && grep -c '</html>' '%s/page.html'",
	       LIMIT_S, LOWKEY, scratch, path, scratch);
	lkt_expect(&r, 0, "1");
}

static void json_threads_and_unmatched_spans(void **state)
{
	char path[256], line[64];
	FILE *f;

	(void)state;
	snprintf(path, sizeof(path), "%s/trace.json", scratch);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("{\"traceEvents\":[\n"
	      "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":\"scale\"}}",
	      f);
	for (int i = 1; i <= THREADS; i++)
		fprintf(f,
			",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"args\":{\"name\":\"t%d\"}}"
			",\n{\"name\":\"work\",\"cat\":\"scale\",\"ph\":\"B\",\"ts\":%d.000,\"pid\":1,\"tid\":%d}"
			",\n{\"name\":\"work\",\"cat\":\"scale\",\"ph\":\"E\",\"ts\":%d.500,\"pid\":1,\"tid\":%d}",
			i, i, i, i, i, i);
	for (int i = 0; i < UNMATCHED; i++)
		fprintf(f,
			",\n{\"name\":\"open\",\"cat\":\"scale\",\"ph\":\"B\",\"ts\":%d.000,\"pid\":1,\"tid\":1}",
			THREADS + i);
	for (int i = 0; i < UNMATCHED; i++)
		fprintf(f,
			",\n{\"name\":\"close\",\"cat\":\"scale\",\"ph\":\"E\",\"ts\":%d.000,\"pid\":1,\"tid\":1}",
			THREADS + UNMATCHED + i);
	fputs("\n],\"otherData\":{\"tracer\":\"lowkey\"}}\n", f);
	assert_int_equal(fclose(f), 0);
	snprintf(line, sizeof(line), "%d threads", THREADS);
	report_all(path, line);
}

static void *small_stream(void *arg)
{
	(void)arg;
	LK_PROBE(scale, tick);
	return NULL;
}

/* A copy of the file from under the name to: a hard link would meet a file system's link limit. */
static void copy_file(const char *from, const char *to)
{
	static char buf[1 << 16];
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_EXCL, 0600);
	ssize_t n;

	assert_true(in >= 0 && out >= 0);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		assert_int_equal(write(out, buf, (size_t)n), n);
	assert_int_equal(n, 0);
	close(in);
	assert_int_equal(close(out), 0);
}

/*
 * A CTF trace recorded here: this thread's unmatched spans, and another thread's one event, whose
 * stream file is then copied under THREADS - 2 more names (stream-TID: the reader takes the tid
 * from the name).
 */
static void ctf_streams_and_unmatched_spans(void **state)
{
	struct lk_trace_config c = { .buffer_size = 16u << 20, .flush_ms = 5 };
	char dir[256], small[512], name[512], line[64], other[64];
	struct lk_trace_stats st;
	pthread_t t;
	pid_t me = gettid();
	int copied = 0;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/ctf", scratch);
	c.path = dir;
	assert_true(lk_probe_enable("scale") >= 0);
	assert_int_equal(lk_trace_start(&c), 0);
	for (int i = 0; i < UNMATCHED; i++)
		LK_SPAN_BEGIN(scale, open);
	for (int i = 0; i < UNMATCHED; i++)
		LK_SPAN_END(scale, close);
	assert_int_equal(pthread_create(&t, NULL, small_stream, NULL), 0);
	pthread_join(t, NULL);
	assert_int_equal(lk_trace_stop(), 0);
	lk_trace_stats(&st);
	assert_int_equal(st.lost, 0);

	assert_int_equal(lkt_sh(&r, "cd '%s' && ls stream-* | grep -vx 'stream-%d'", dir, (int)me),
			 0);
	r.out[strcspn(r.out, "\n")] = 0;
	snprintf(other, sizeof(other), "%.63s", r.out);
	snprintf(small, sizeof(small), "%s/%s", dir, other);
	for (int tid = 1; copied < THREADS - 2; tid++) {
		if (tid == me || tid == atoi(other + 7))
			continue;
		snprintf(name, sizeof(name), "%s/stream-%d", dir, tid);
		copy_file(small, name);
		copied++;
	}
	snprintf(line, sizeof(line), "%d threads", THREADS);
	report_all(dir, line);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(json_threads_and_unmatched_spans),
		cmocka_unit_test(ctf_streams_and_unmatched_spans),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
