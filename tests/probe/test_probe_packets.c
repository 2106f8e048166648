// SPDX-License-Identifier: MIT
/*
 * A recording's packets are its rings' bytes as they stand, each written from the ring beside its
 * prefix; the consumer finds where a packet ends from the records' headers alone (ctf.c). The
 * boundaries that introduces, each checked through lowkey's reader, the stream files' packet
 * prefixes and babeltrace2:
 *   - records of every size (strings of every length: byte-granular records) in runs of one
 *     event and mixed, across ring wraps, growth into the reserve and 256 KiB packet limits that
 *     fall inside a run of one event;
 *   - a thread that exits with a packet's worth of records not yet drained;
 *   - a fork while the parent's records of a packet are in its ring;
 *   - loss accounting: what a fixed ring drops is counted exactly in events_discarded.
 */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <lowkey/lowkey.h>

#include "cli/run.h"
#include "consumer_hold.h"
#include "format/ctf/ctf.h"
#include "probe/probe_internal.h"
#include "trace_check.h"

#define PREFIX LK__CTF_PACKET_PREFIX

static struct lkt_run out;

static void start_with(char *dir, size_t len, const char *what, size_t buffer, unsigned int flags)
{
	struct lk_trace_config c = {
		.path = dir, .buffer_size = buffer, .flush_ms = 5, .flags = flags
	};

	lkt_path(dir, len, what);
	assert_int_equal(lk_trace_start(&c), 0);
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

/* What the prefixes of one stream file say. */
struct packets {
	unsigned int n;
	uint64_t largest;   /* bytes of records in the largest packet */
	uint64_t discarded; /* the last packet's events_discarded */
};

/*
 * Walk the packets of stream file `name` in dir: each whole, its sizes equal, its sequence
 * number the next, its time within [begin, end] and after the previous packet's end, its
 * events_discarded never smaller than the one before.
 */
static void check_packets(const char *dir, const char *name, struct packets *p)
{
	char path[512];
	struct stat st;
	uint8_t *data;
	uint64_t at = 0, prev_end = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	data = malloc((size_t)st.st_size + 1);
	assert_non_null(data);
	assert_int_equal(read(fd, data, (size_t)st.st_size), st.st_size);
	close(fd);
	memset(p, 0, sizeof(*p));
	while (at < (uint64_t)st.st_size) {
		const uint8_t *h = data + at;
		uint64_t size, begin, end, discarded;

		assert_true((uint64_t)st.st_size - at >= PREFIX);
		assert_int_equal(get64(h) & 0xffffffffu, 0xc1fc1fc1u);
		size = get64(h + 56) / 8;
		assert_int_equal(get64(h + 48) / 8, size); /* content_size */
		assert_true(size >= PREFIX && at + size <= (uint64_t)st.st_size);
		assert_int_equal(get64(h + 64), p->n); /* packet_seq_num */
		begin = get64(h + 32);
		end = get64(h + 40);
		discarded = get64(h + 72);
		assert_true(begin <= end);
		assert_true(begin >= prev_end);
		assert_true(discarded >= p->discarded);
		prev_end = end;
		p->discarded = discarded;
		if (size - PREFIX > p->largest)
			p->largest = size - PREFIX;
		p->n++;
		at += size;
	}
	free(data);
}

static bool have_babeltrace2(void)
{
	return lkt_sh(&out, "command -v babeltrace2") == 0;
}

/* babeltrace2 reads the whole trace without a complaint and prints `events` lines. */
static void babeltrace2_reads(const char *dir, uint64_t events)
{
	if (!have_babeltrace2())
		return;
	lkt_sh(&out, "babeltrace2 '%s' 2>&1 >/dev/null | grep -v 'discarded' | grep -c .", dir);
	assert_int_equal(atoi(out.out), 0);
	lkt_sh(&out, "babeltrace2 '%s' 2>/dev/null | wc -l", dir);
	assert_int_equal(strtoull(out.out, NULL, 10), events);
}

/* ---- records of every size ---- */

static const char text[] = "0123456789abcdefghijklmnopqrstuvwxyz0123";

/* Event i of the pattern: runs of one event, of lengths 1 to 50, each kind in turn. */
#define PATTERN 120000
static unsigned char kinds[PATTERN];

static unsigned int kind_of(long i)
{
	static bool made;

	if (!made) {
		long at = 0;

		for (long k = 0; at < PATTERN; k++)
			for (long n = 0; n < 1 + k % 50 && at < PATTERN; n++)
				kinds[at++] = (unsigned char)(k % 4);
		made = true;
	}
	assert_true(i >= 0 && i < PATTERN);
	return kinds[i];
}

static void emit(long i, unsigned int kind)
{
	switch (kind) {
	case 0:
		LK_PROBE(pk, two, i, i * 3);
		break;
	case 1:
		LK_PROBE(pk, one, i);
		break;
	case 2:
		LK_PROBE(pk, text, i, text + i % (long)(sizeof(text) - 1));
		break;
	default:
		LK_PROBE(pk, three, i, i + 1, i + 2);
		break;
	}
}

static void check_event(const struct lkt_event *e, long i, unsigned int kind)
{
	static const char *const names[] = { "pk:two", "pk:one", "pk:text", "pk:three" };

	assert_string_equal(e->name, names[kind]);
	assert_int_equal((long)e->v[0], i);
	if (kind == 0)
		assert_int_equal((long)e->v[1], i * 3);
	if (kind == 2)
		assert_string_equal(e->s[1], text + i % (long)(sizeof(text) - 1));
	if (kind == 3)
		assert_int_equal((long)e->v[2], i + 2);
}

/* Wait until the consumer has written n events (lk_trace_stats). */
static void drained(uint64_t n)
{
	struct lk_trace_stats st;

	for (int i = 0; i < 6000; i++) {
		assert_int_equal(lk_trace_stats(&st), 0);
		if (st.events >= n)
			return;
		usleep(10000);
	}
	fail_msg("the consumer wrote %llu events of %llu", (unsigned long long)st.events,
		 (unsigned long long)n);
}

/*
 * A 64 KiB ring, its consumer held through bursts of about 330 KiB (the ring grows into its
 * reserve: runs longer than a packet) and let go between them (the ring wraps): every event
 * arrives once, in order, and packets hold at most 256 KiB of records, the largest close to it.
 */
static void records_of_every_size_across_packets(void **state)
{
	enum { SIZE = 64 << 10, BURST = 12000, ROUNDS = 6 };
	struct lk_trace_stats st;
	struct lkt_trace t;
	struct packets p;
	char dir[256], name[32];
	long i = 0, next = 0;

	(void)state;
	assert_true(lk_probe_enable("pk") >= 0);
	start_with(dir, sizeof(dir), "packets", SIZE, 0);
	for (int round = 0; round < ROUNDS; round++) {
		lkt_hold_consumer(round % 2 == 0);
		for (long end = i + BURST; i < end; i++)
			emit(i, kind_of(i));
		lkt_hold_consumer(false);
		drained((uint64_t)i);
	}
	assert_int_equal(lk_trace_stop(), 0);
	assert_int_equal(lk_trace_stats(&st), 0);
	assert_int_equal(st.lost, 0);
	assert_int_equal(st.events, (uint64_t)i);

	assert_int_equal(lkt_read(&t, dir), 0);
	assert_int_equal(t.lost, 0);
	assert_int_equal(lkt_events(&t), (uint64_t)i);
	for (size_t k = 0; k < t.n; k++) {
		if (strcmp(t.ev[k].name, "lowkey:thread_name") == 0)
			continue;
		check_event(&t.ev[k], next, kind_of(next));
		next++;
	}
	assert_int_equal(next, i);
	lkt_free(&t);

	snprintf(name, sizeof(name), "stream-%d", (int)gettid());
	check_packets(dir, name, &p);
	assert_true(p.n > 2);
	assert_true(p.largest <= LK__CTF_MAX_PACKET);
	assert_true(p.largest > LK__CTF_MAX_PACKET - 64); /* a packet cut inside a run */
	assert_int_equal(p.discarded, 0);
	babeltrace2_reads(dir, (uint64_t)i + 1);
	assert_int_equal(lk_probe_reset_rules(), 0);
	lkt_rmrf(dir);
}

/* ---- a thread that exits mid-packet ---- */

static void *short_lived(void *arg)
{
	long n = *(long *)arg;

	for (long i = 0; i < n; i++)
		emit(i, i % 2 ? 2 : 0);
	return (void *)(long)gettid();
}

/*
 * Threads that record less than a packet and exit before the consumer drains them: each stream
 * holds all their events, in one packet.
 */
static void thread_exits_mid_packet(void **state)
{
	enum { THREADS = 3 };
	struct lk_trace_stats st;
	struct lkt_trace t;
	struct packets p;
	pthread_t th[THREADS];
	long n = 1000, tid[THREADS];
	char dir[256], name[32];

	(void)state;
	assert_true(lk_probe_enable("pk") >= 0);
	start_with(dir, sizeof(dir), "exits", 1 << 20, 0);
	lkt_hold_consumer(true);
	for (int k = 0; k < THREADS; k++)
		assert_int_equal(pthread_create(&th[k], NULL, short_lived, &n), 0);
	for (int k = 0; k < THREADS; k++) {
		void *ret;

		pthread_join(th[k], &ret);
		tid[k] = (long)ret;
	}
	lkt_hold_consumer(false);
	assert_int_equal(lk_trace_stop(), 0);
	assert_int_equal(lk_trace_stats(&st), 0);
	assert_int_equal(st.events, (uint64_t)(THREADS * n));
	assert_int_equal(st.lost, 0);

	assert_int_equal(lkt_read(&t, dir), 0);
	for (int k = 0; k < THREADS; k++) {
		long next = 0;

		for (size_t e = 0; e < t.n; e++)
			if (t.ev[e].tid == tid[k] && strcmp(t.ev[e].name, "lowkey:thread_name")) {
				check_event(&t.ev[e], next, next % 2 ? 2 : 0);
				next++;
			}
		assert_int_equal(next, n);
		snprintf(name, sizeof(name), "stream-%ld", tid[k]);
		check_packets(dir, name, &p);
		assert_int_equal(p.n, 1);
	}
	lkt_free(&t);
	babeltrace2_reads(dir, (uint64_t)(THREADS * (n + 1)));
	assert_int_equal(lk_probe_reset_rules(), 0);
	lkt_rmrf(dir);
}

/* ---- fork mid-packet ---- */

/*
 * A fork while the parent's records of a packet are in its ring, not yet written: the child's
 * events, before and after it exits, go nowhere near the parent's trace; the parent's packet and
 * those after it hold all its events, once, in order.
 */
static void fork_mid_packet(void **state)
{
	enum { HALF = 5000 };
	struct lk_trace_stats st;
	struct lkt_trace t;
	struct packets p;
	char dir[256], name[32];
	long next = 0;
	int status;
	pid_t pid;

	(void)state;
	assert_true(lk_probe_enable("pk") >= 0);
	start_with(dir, sizeof(dir), "fork", 1 << 20, 0);
	lkt_hold_consumer(true);
	for (long i = 0; i < HALF; i++)
		emit(i, kind_of(i));
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		for (long i = 0; i < HALF; i++)
			emit(-1 - i, kind_of(i));
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	lkt_hold_consumer(false);
	for (long i = HALF; i < 2 * HALF; i++)
		emit(i, kind_of(i));
	assert_int_equal(lk_trace_stop(), 0);
	assert_int_equal(lk_trace_stats(&st), 0);
	assert_int_equal(st.events, 2 * HALF);
	assert_int_equal(st.lost, 0);
	assert_int_equal(st.threads, 1);

	assert_int_equal(lkt_read(&t, dir), 0);
	assert_int_equal(t.streams, 1);
	for (size_t k = 0; k < t.n; k++) {
		if (strcmp(t.ev[k].name, "lowkey:thread_name") == 0)
			continue;
		assert_int_equal(t.ev[k].tid, gettid());
		check_event(&t.ev[k], next, kind_of(next));
		next++;
	}
	assert_int_equal(next, 2 * HALF);
	lkt_free(&t);
	snprintf(name, sizeof(name), "stream-%d", (int)gettid());
	check_packets(dir, name, &p);
	assert_int_equal(p.discarded, 0);
	babeltrace2_reads(dir, 2 * HALF + 1);
	assert_int_equal(lk_probe_reset_rules(), 0);
	lkt_rmrf(dir);
}

/* ---- losses ---- */

/*
 * A fixed 4 KiB ring overflowing in bursts while its consumer is held, the records of every size:
 * the last packet's events_discarded, the reader's and babeltrace2's counts and lk_trace_stats
 * agree exactly, and what was written arrived in order.
 */
static void losses_counted_exactly(void **state)
{
	struct lk_trace_stats st;
	struct lkt_trace t;
	struct packets p;
	char dir[256], name[32];
	long i = 0, last = -1;

	(void)state;
	assert_true(lk_probe_enable("pk") >= 0);
	start_with(dir, sizeof(dir), "losses", 4096, LK_TRACE_FIXED_BUFFER);
	for (int round = 0; round < 4; round++) {
		lkt_hold_consumer(true);
		for (long end = i + 3000; i < end; i++)
			emit(i, kind_of(i));
		lkt_hold_consumer(false);
	}
	assert_int_equal(lk_trace_stop(), 0);
	assert_int_equal(lk_trace_stats(&st), 0);
	assert_true(st.lost > 0);
	assert_int_equal(st.events + st.lost, (uint64_t)i);

	assert_int_equal(lkt_read(&t, dir), 0);
	assert_int_equal(t.lost, st.lost);
	assert_int_equal(lkt_events(&t), st.events);
	for (size_t k = 0; k < t.n; k++) {
		long v = (long)t.ev[k].v[0];

		if (strcmp(t.ev[k].name, "lowkey:thread_name") == 0)
			continue;
		assert_true(v > last);
		check_event(&t.ev[k], v, kind_of(v));
		last = v;
	}
	lkt_free(&t);
	snprintf(name, sizeof(name), "stream-%d", (int)gettid());
	check_packets(dir, name, &p);
	assert_int_equal(p.discarded, st.lost);
	if (have_babeltrace2()) {
		lkt_sh(&out,
		       "babeltrace2 '%s' 2>&1 >/dev/null | tr -s ' \\n' '  ' | "
		       "grep -o 'discarded [0-9]* events' | awk '{ n += $2 } END { print n + 0 }'",
		       dir);
		assert_int_equal(strtoull(out.out, NULL, 10), st.lost);
		lkt_sh(&out, "babeltrace2 '%s' 2>/dev/null | wc -l", dir);
		assert_int_equal(strtoull(out.out, NULL, 10), st.events + 1);
	}
	assert_int_equal(lk_probe_reset_rules(), 0);
	lkt_rmrf(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(records_of_every_size_across_packets),
		cmocka_unit_test(thread_exits_mid_packet),
		cmocka_unit_test(fork_mid_packet),
		cmocka_unit_test(losses_counted_exactly),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
