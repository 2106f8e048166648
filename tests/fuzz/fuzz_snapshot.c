// SPDX-License-Identifier: MIT
/*
 * Stress harness (libFuzzer's interface) for the flight recorder's snapshots under fork/exit
 * churn: a program that records, forks children that exit() at once, and takes snapshots from
 * its own thread and from the trace's (as a signal handler asks), in any order.
 *
 * An input is a script. Its first byte picks the format (CTF, JSON, Perfetto: byte % 3); each
 * later byte is an operation (its low 3 bits) with an argument (the other 5):
 *   0 record (arg + 1) * 64 events          1 fork a child that exits, and wait for it
 *   2 start forking children without pause, on a thread of their own, until 3
 *   3 stop that                             4 request a snapshot and wait until it is written
 *   5 lk_trace_snapshot(NULL)               6 another thread records (arg + 1) * 32 events
 *   7 request a snapshot and go on at once
 * At most 64 operations are run.
 *
 * Properties checked, besides what the sanitizers check: every snapshot call and the trace's stop
 * succeed; afterwards every snapshot written is whole -- a JSON one parses (RFC 8259) and ends
 * with its otherData, a CTF one reads without damage, a Perfetto one is not empty. A child's
 * exit() must never put the parent's buffered output into a snapshot.
 *
 *   Replayed in CI (test_fuzz_snapshot_replay) from tests/fuzz/corpus/snapshot.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lowkey/lowkey.h>

#include "internal/json_read.h"
#include "internal/ctf_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_OPS 64

static int churning;
static pthread_t churner;

static pid_t parent;

/* LeakSanitizer asks this at exit: not in the children, which cannot see the parent's threads. */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
	return getpid() != parent;
}

/*
 * exit() flushes every stdio stream, the child's copies of the parent's buffers included (without
 * taking their locks, which another thread may have held at the fork: fflush(NULL) would wait for
 * them forever). libFuzzer's own exit handler takes any exit for a failed input: its build exits
 * without flushing.
 */
static void child_exit(void)
{
#ifdef LKT_LIBFUZZER
	_exit(0);
#else
	exit(0);
#endif
}

static void fork_one(void)
{
	pid_t pid = fork();

	if (pid == 0)
		child_exit();
	if (pid > 0)
		waitpid(pid, NULL, 0);
}

static void *churn_main(void *arg)
{
	(void)arg;
	while (__atomic_load_n(&churning, __ATOMIC_ACQUIRE))
		fork_one();
	return NULL;
}

static void churn(bool on)
{
	if (on == (__atomic_load_n(&churning, __ATOMIC_ACQUIRE) != 0))
		return;
	__atomic_store_n(&churning, on, __ATOMIC_RELEASE);
	if (on && pthread_create(&churner, NULL, churn_main, NULL) != 0)
		__atomic_store_n(&churning, 0, __ATOMIC_RELEASE);
	else if (!on)
		pthread_join(churner, NULL);
}

static void record(unsigned int n)
{
	static const char *const words[] = { "a", "bb", "ccc\xff", "dddd\"\\" };

	for (unsigned int i = 0; i < n; i++)
		LK_PROBE(fz, tick, (uint64_t)i, words[i % 4]);
}

static void *recorder_main(void *arg)
{
	record((unsigned int)(uintptr_t)arg);
	return NULL;
}

static void record_elsewhere(unsigned int n)
{
	pthread_t t;

	if (pthread_create(&t, NULL, recorder_main, (void *)(uintptr_t)n) == 0)
		pthread_join(t, NULL);
}

/* Request one and wait until the trace's thread has written it (its events are then counted). */
static void requested_snapshot(bool wait)
{
	struct lk_trace_stats st;
	uint64_t before;

	record(1); /* so that the snapshot counts an event */
	lk_trace_stats(&st);
	before = st.events;
	if (lk_trace_snapshot_request() != 0)
		__builtin_trap();
	for (int i = 0; wait && i < 100000 && st.events == before && !st.error; i++) {
		usleep(100);
		lk_trace_stats(&st);
	}
}

static void run(const uint8_t *ops, size_t n)
{
	for (size_t i = 0; i < n && i < MAX_OPS; i++) {
		unsigned int arg = ops[i] >> 3;

		switch (ops[i] & 7) {
		case 0:
			record((arg + 1) * 64);
			break;
		case 1:
			fork_one();
			break;
		case 2:
			churn(true);
			break;
		case 3:
			churn(false);
			break;
		case 4:
			requested_snapshot(true);
			break;
		case 5:
			if (lk_trace_snapshot(NULL) != 0)
				__builtin_trap();
			break;
		case 6:
			record_elsewhere((arg + 1) * 32);
			break;
		case 7:
			requested_snapshot(false);
			break;
		}
	}
	churn(false);
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *text = NULL;
	long size;

	*len = 0;
	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) > 0 && (text = malloc((size_t)size))) {
		rewind(f);
		*len = fread(text, 1, (size_t)size, f);
	}
	fclose(f);
	return text;
}

static bool json_whole(const char *path)
{
	char err[256];
	size_t len;
	char *text = slurp(path, &len);
	struct lk__jr_value *doc = text ? lk__jr_parse(text, len, err, sizeof(err)) : NULL;
	bool ok = doc && lk__jr_get(doc, "traceEvents") && lk__jr_get(doc, "otherData");

	if (!ok)
		fprintf(stderr, "%s: %s\n", path, text ? err : "empty");
	lk__jr_free(doc);
	free(text);
	return ok;
}

static int no_event(const struct lk__event *e, void *arg)
{
	(void)e;
	(void)arg;
	return 0;
}

static bool ctf_whole(const char *path)
{
	const struct lk__reader_ops ops = { NULL, no_event, NULL };
	struct lk__trace_reader r;
	char err[512];
	int rc = lk__reader_open(&r, path, err, sizeof(err));

	if (!rc) {
		rc = lk__reader_walk(&r, &ops, NULL, err, sizeof(err));
		lk__reader_close(&r);
	}
	if (rc)
		fprintf(stderr, "%s: %s\n", path, err);
	return rc == 0;
}

static bool pftrace_whole(const char *path)
{
	size_t len;
	char *text = slurp(path, &len);
	bool ok = text && len && text[0] == 0x0a; /* a Trace.packet first */

	free(text);
	return ok;
}

/* Every snapshot in dir (trace, trace.1, ...) whole; each removed. */
static bool check_and_remove(const char *dir, int format)
{
	struct dirent *e;
	bool ok = true;
	DIR *d = opendir(dir);
	char path[512], cmd[600];

	while (d && (e = readdir(d))) {
		if (strncmp(e->d_name, "trace", 5) != 0 || strstr(e->d_name, ".ctf-"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		ok = ok && (format == LK_TRACE_JSON ? json_whole(path) :
			    format == LK_TRACE_CTF  ? ctf_whole(path) :
						      pftrace_whole(path));
	}
	if (d)
		closedir(d);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		ok = false;
	return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const enum lk_trace_format formats[] = { LK_TRACE_CTF, LK_TRACE_JSON,
							LK_TRACE_PERFETTO };
	struct lk_trace_config c = { .buffer_size = 1 << 20,
				     .flags = LK_TRACE_OVERWRITE,
				     .flush_ms = 5 };
	char dir[] = "/tmp/lkt-fuzz-snapshot-XXXXXX", path[64];

	parent = getpid();
	if (!size || !mkdtemp(dir))
		return 0;
	c.format = formats[data[0] % 3];
	snprintf(path, sizeof(path), "%s/trace", dir);
	c.path = path;
	if (lk_probe_enable("fz") < 0 || lk_trace_start(&c) != 0)
		__builtin_trap();
	run(data + 1, size - 1);
	if (lk_trace_stop() != 0) {
		fprintf(stderr, "lk_trace_stop: %s\n", lk_last_error());
		__builtin_trap();
	}
	lk_probe_reset_rules();
	if (!check_and_remove(dir, (int)c.format))
		__builtin_trap();
	return 0;
}
