// SPDX-License-Identifier: MIT
/*
 * The trace reader on traces it did not write: an index whose event ids or fields are out of
 * range is refused before anything is allocated for it; FIFOs and links named like the trace's
 * files are refused, not waited on or followed; a stream cut inside its last packet (a program
 * killed mid-write) gives its whole packets and says how much it left out; damage elsewhere is
 * still an error.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <cmocka.h>

#include <lowkey/lowkey.h>

#include "cli/run.h"
#include "trace_check.h"

#define PACKET_PREFIX 88

static char dir[256];
static uint64_t all_events; /* in the trace as written */

static void emit(int n)
{
	for (int i = 0; i < n; i++)
		LK_PROBE(rdr, tick, i);
}

static bool written(void *arg)
{
	struct lk_trace_stats st;

	lk_trace_stats(&st);
	return st.events >= *(uint64_t *)arg;
}

/* A trace of one thread with at least two packets: 50 ticks written before 50 more. */
static int setup(void **state)
{
	struct lk_trace_config c = { .flush_ms = 5 };
	struct lkt_trace t;
	uint64_t first = 50;

	(void)state;
	lkt_path(dir, sizeof(dir), "reader");
	c.path = dir;
	if (lk_probe_enable("rdr:*") < 0 || lk_trace_start(&c) != 0)
		return -1;
	emit(50);
	for (int i = 0; i < 6000 && !written(&first); i++)
		usleep(10000);
	emit(50);
	if (lk_trace_stop() != 0 || lkt_read(&t, dir) != 0)
		return -1;
	all_events = t.n;
	lkt_free(&t);
	return all_events == 101 ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	lkt_rmrf(dir);
	return 0;
}

/* A copy of the trace, to damage; its stream's path in stream (PATH_MAX). */
static void copy_trace(const char *name, char *copy, size_t len, char *stream)
{
	struct lkt_run out;
	char cmd[1024];

	lkt_path(copy, len, name);
	snprintf(cmd, sizeof(cmd), "cp -r '%s' '%s' && ls '%s' | grep '^stream-'", dir, copy, copy);
	assert_int_equal(lkt_sh(&out, "%s", cmd), 0);
	out.out[strcspn(out.out, "\n")] = 0;
	snprintf(stream, 4096, "%s/%.64s", copy, out.out);
}

static int open_index(const char *text, char *err, size_t errlen)
{
	struct lk__trace_reader r;
	char copy[256], stream[4096], path[4200];
	FILE *f;
	int rc;

	copy_trace("index", copy, sizeof(copy), stream);
	snprintf(path, sizeof(path), "%s/.lowkey-index", copy);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	rc = lk__reader_open(&r, copy, err, errlen);
	if (rc == 0)
		lk__reader_close(&r);
	lkt_rmrf(copy);
	return rc;
}

#define HEAD "lowkey-trace 2\ntsc_hz 1000000000\n"

static void index_lines_out_of_range_are_refused(void **state)
{
	char err[512];

	(void)state;
	assert_int_equal(open_index(HEAD "event\t16\t1\t1\t1\tp\te\tf.c:1\tx\n", err, sizeof(err)),
			 0);
	assert_int_equal(
		open_index(HEAD "event\t65534\t1\t0\t0\tp\te\tf.c:1\t\n", err, sizeof(err)), 0);
	/* this one line once made the reader allocate 800 MB */
	assert_int_equal(open_index(HEAD "event\t99999999\t1\t0\t0\tp\te\tf.c:1\t\n", err,
				    sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "line 3 of the trace index"));
	assert_int_equal(open_index(HEAD "event\t65535\t1\t0\t0\tp\te\tf.c:1\t\n", err,
				    sizeof(err)),
			 -EINVAL);
	assert_int_equal(open_index(HEAD "event\t1\t1\t0\t0\tp\te\tf.c:1\t\n", err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(open_index(HEAD "event\t-16\t1\t0\t0\tp\te\tf.c:1\t\n", err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(open_index(HEAD "event\t16\t9\t0\t0\tp\te\tf.c:1\t\n", err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(open_index(HEAD "event\t16\t1\t9\t0\tp\te\tf.c:1\t\n", err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(open_index(HEAD "event\t16\t1\t1\t7\tp\te\tf.c:1\tx\n", err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(open_index(HEAD "event\t16\t1\t1\t11\tp\te\tf.c:1\tx\n", err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(open_index(HEAD "event\t16\t1\n", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "fewer than 8 fields"));
	assert_int_equal(
		open_index(HEAD
			   "event\t16\t1\t0\t0\tp\te\tf.c:1\t\nevent\t16\t1\t0\t0\tq\te\tf.c:2\t\n",
			   err, sizeof(err)),
		-EINVAL);
	assert_non_null(strstr(err, "same id"));
	assert_int_equal(open_index("lowkey-trace 2\nevent\t16\t1\t0\t0\tp\te\tf.c:1\t\n", err,
				    sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "no tsc_hz"));
	assert_int_equal(open_index("", err, sizeof(err)), -EINVAL);
}

/* A parse of the index alone, from memory: what the fuzzer calls. */
static void an_index_in_memory(void **state)
{
	char text[] = HEAD "pid 42\nprocname srv\nevent\t20\t2\t2\t41\tdb\tq\tdb.c:9\tid, name";
	struct lk__trace_reader r;
	char err[256];

	(void)state;
	assert_int_equal(lk__reader_parse_index(&r, text, strlen(text), err, sizeof(err)), 0);
	assert_int_equal(r.pid, 42);
	assert_string_equal(r.procname, "srv");
	assert_non_null(r.classes[20]);
	assert_string_equal(r.classes[20]->arg_names, "id, name");
	assert_string_equal(r.classes[20]->arg_name[1], "name");
	assert_true(r.nclasses <= 0xffff);
	lk__reader_close(&r);
}

static void on_alarm(int sig)
{
	(void)sig;
	fail_msg("the reader waits on a FIFO");
}

static void fifos_and_links_are_refused(void **state)
{
	char copy[256], stream[4096], path[4200];
	struct lkt_trace t;

	(void)state;
	signal(SIGALRM, on_alarm);
	alarm(120); /* a hang guard: the reader used to wait on the FIFO forever */
	copy_trace("fifo", copy, sizeof(copy), stream);
	snprintf(path, sizeof(path), "%s/stream-99999999", copy);
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_int_equal(lkt_read(&t, copy), -EINVAL);
	assert_non_null(strstr(t.err, "stream-99999999 is not a regular file"));
	lkt_free(&t);
	unlink(path);

	assert_int_equal(symlink("/etc/passwd", path), 0);
	assert_int_equal(lkt_read(&t, copy), -ELOOP);
	assert_non_null(strstr(t.err, "symbolic link"));
	lkt_free(&t);
	unlink(path);

	snprintf(path, sizeof(path), "%s/.lowkey-index", copy);
	unlink(path);
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_int_equal(lkt_read(&t, copy), -EINVAL);
	assert_non_null(strstr(t.err, "is not a regular file"));
	lkt_free(&t);
	alarm(0);
	lkt_rmrf(copy);
}

/* Where the stream's last packet starts; its size in *size. */
static off_t last_packet(const char *stream, off_t *size)
{
	uint8_t prefix[PACKET_PREFIX];
	off_t at = 0, last = -1;
	struct stat st;
	int fd = open(stream, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	while (at < st.st_size) {
		uint64_t bits;

		assert_int_equal(pread(fd, prefix, sizeof(prefix), at), sizeof(prefix));
		memcpy(&bits, prefix + 56, 8);
		last = at;
		*size = (off_t)(bits / 8);
		at += *size;
	}
	close(fd);
	assert_int_equal(at, st.st_size);
	return last;
}

static uint64_t truncated_bytes;

static int on_stream_end(const struct lk__stream_info *s, void *arg)
{
	(void)arg;
	truncated_bytes += s->truncated;
	return lkt_on_stream_end(s, arg);
}

/* Read the trace at path: the events, the bytes left out; the walk's result in *rc. */
static size_t read_events(const char *path, int *rc)
{
	const struct lk__reader_ops ops = { NULL, lkt_on_event, on_stream_end };
	struct lkt_trace t;
	size_t n;

	memset(&t, 0, sizeof(t));
	truncated_bytes = 0;
	assert_int_equal(lk__reader_open(&t.r, path, t.err, sizeof(t.err)), 0);
	*rc = lk__reader_walk(&t.r, &ops, &t, t.err, sizeof(t.err));
	if (*rc)
		print_message("%s\n", t.err);
	assert_int_equal(t.r.truncated_streams, truncated_bytes ? 1 : 0);
	n = t.n;
	lkt_free(&t);
	return n;
}

static void a_stream_cut_inside_its_last_packet_keeps_its_prefix(void **state)
{
	char copy[256], stream[4096];
	off_t last, size, cuts[5];
	size_t whole;
	int rc;

	(void)state;
	copy_trace("cut", copy, sizeof(copy), stream);
	last = last_packet(stream, &size);
	assert_true(last > 0);		       /* at least two packets */
	assert_true(size > PACKET_PREFIX + 1); /* the last has events */

	/* cut at the last packet's start: a clean end, the events of the packets before */
	assert_int_equal(truncate(stream, last), 0);
	whole = read_events(copy, &rc);
	assert_int_equal(rc, 0);
	assert_int_equal(truncated_bytes, 0);
	assert_true(whole > 0 && whole < all_events);
	lkt_rmrf(copy);

	/* cut inside its records, after its prefix, inside it, after the magic, inside the magic */
	cuts[0] = size - 1, cuts[1] = PACKET_PREFIX + 1, cuts[2] = 40, cuts[3] = 5, cuts[4] = 1;
	for (int i = 0; i < 5; i++) {
		copy_trace("cut", copy, sizeof(copy), stream);
		assert_int_equal(truncate(stream, last + cuts[i]), 0);
		assert_int_equal(read_events(copy, &rc), whole);
		assert_int_equal(rc, 0);
		assert_int_equal(truncated_bytes, (uint64_t)cuts[i]);
		lkt_rmrf(copy);
	}
}

static void damage_before_the_end_is_an_error(void **state)
{
	char copy[256], stream[4096];
	struct lkt_trace t;
	off_t last, size;
	int fd;

	(void)state;
	copy_trace("damaged", copy, sizeof(copy), stream);
	last = last_packet(stream, &size);
	fd = open(stream, O_WRONLY);
	assert_int_equal(pwrite(fd, "XXXX", 4, last), 4); /* the last packet's magic */
	close(fd);
	assert_int_equal(lkt_read(&t, copy), -EINVAL);
	assert_non_null(strstr(t.err, "is damaged at byte"));
	lkt_free(&t);
	lkt_rmrf(copy);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(index_lines_out_of_range_are_refused),
		cmocka_unit_test(an_index_in_memory),
		cmocka_unit_test(fifos_and_links_are_refused),
		cmocka_unit_test(a_stream_cut_inside_its_last_packet_keeps_its_prefix),
		cmocka_unit_test(damage_before_the_end_is_an_error),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
