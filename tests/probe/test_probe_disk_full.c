// SPDX-License-Identifier: MIT
/*
 * A full disk (a 2 MiB tmpfs) stops the trace with -ENOSPC and a message; the program goes on;
 * what was written is complete: lowkey's reader and babeltrace2 read it without an error.
 * Needs root to mount the tmpfs; skipped otherwise.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <cmocka.h>

#include <lowkey/lowkey.h>

#include "trace_check.h"

static char mnt[] = "/tmp/lowkey-test-full-XXXXXX";
static bool mounted;

static int mount_small(void **state)
{
	(void)state;
	if (geteuid() != 0 || !mkdtemp(mnt))
		return 0;
	mounted = mount("lowkey-test", mnt, "tmpfs", 0, "size=2m") == 0;
	return 0;
}

static int unmount_small(void **state)
{
	(void)state;
	if (mounted)
		umount(mnt);
	rmdir(mnt);
	return 0;
}

/* Record up to n events, stopping at the first one after the trace says it failed. */
static void record_until_an_error(long n)
{
	struct lk_trace_stats st;

	for (long i = 0; i < n; i++) {
		LK_PROBE(full, ev, i, i);
		if (i % 1000 == 0) {
			lk_trace_stats(&st);
			if (st.error)
				break;
		}
	}
}

static void full_disk_stops_cleanly(void **state)
{
	struct lk_trace_config c = { .flush_ms = 5 };
	struct lk_trace_stats st;
	struct lkt_trace t;
	char dir[300], cmd[512];

	(void)state;
	if (!mounted)
		skip(); /* not root, or no tmpfs: cannot make a small disk */
	snprintf(dir, sizeof(dir), "%s/trace", mnt);
	c.path = dir;
	assert_true(lk_probe_enable("full") >= 0);
	assert_int_equal(lk_trace_start(&c), 0);
	record_until_an_error(2000000);
	lk_trace_stats(&st);
	assert_int_equal(st.error, -ENOSPC);
	assert_false(st.running); /* recording stopped at the error */
	assert_int_equal(lk_trace_stop(), -ENOSPC);
	assert_non_null(strstr(lk_last_error(), "No space left"));
	assert_non_null(strstr(lk_last_error(), "readable"));

	assert_int_equal(lkt_read(&t, dir), 0);
	assert_true(lkt_count(&t, "full:ev") > 1000);
	assert_int_equal(lkt_events(&t), st.events);
	if (system("command -v babeltrace2 >/dev/null") == 0) {
		snprintf(cmd, sizeof(cmd), "babeltrace2 '%s' >/dev/null 2>&1", dir);
		assert_int_equal(system(cmd), 0);
	}
	lkt_free(&t);
	lkt_rmrf(dir);

	/* the program traces again, elsewhere */
	lkt_path(dir, sizeof(dir), "after-full");
	c.path = dir;
	assert_int_equal(lk_trace_start(&c), 0);
	LK_PROBE(full, ev, 1L, 2L);
	assert_int_equal(lk_trace_stop(), 0);
	lkt_rmrf(dir);
}

/*
 * The same with a JSON output: the message does not call a file that was never written complete;
 * it says where the events recorded before the error are (the CTF directory beside it). Events
 * recorded but not written are counted as lost.
 */
static void full_disk_json_says_what_is_where(void **state)
{
	struct lk_trace_config c = { .flush_ms = 5, .format = LK_TRACE_JSON };
	struct lk_trace_stats st;
	char out[300], cmd[700];

	(void)state;
	if (!mounted)
		skip();
	snprintf(out, sizeof(out), "%s/trace.json", mnt);
	c.path = out;
	assert_true(lk_probe_enable("full") >= 0);
	assert_int_equal(lk_trace_start(&c), 0);
	record_until_an_error(4000000);
	assert_int_equal(lk_trace_stop(), -ENOSPC);
	assert_null(strstr(lk_last_error(), "complete and readable"));
	assert_non_null(strstr(lk_last_error(), "was not written"));
	assert_non_null(strstr(lk_last_error(), "trace.json.ctf-"));
	lk_trace_stats(&st);
	assert_false(st.running);
	assert_true(st.lost > 0); /* at least what sat in the ring when the disk filled */
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'.ctf-*", out, out);
	assert_int_equal(system(cmd), 0);
}

/* Whether path is Perfetto packets end to end (Trace.packet: field 1, length-delimited), none cut. */
static bool whole_packets(const char *path, size_t *packets)
{
	FILE *f = fopen(path, "rb");
	long at = 0, size;
	int c;

	*packets = 0;
	if (!f || fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0)
		return false;
	rewind(f);
	while (at < size) {
		unsigned long long len = 0;
		int shift = 0;

		if (fgetc(f) != 0x0a)
			break;
		do {
			c = fgetc(f);
			len |= (unsigned long long)(c & 0x7f) << shift;
			shift += 7;
		} while (c != EOF && (c & 0x80) && shift < 64);
		if (c == EOF || fseek(f, (long)len, SEEK_CUR) != 0)
			break;
		at = ftell(f);
		++*packets;
	}
	fclose(f);
	return at == size;
}

/*
 * The same with a Perfetto output, which the consumer writes as it records: the message calls the
 * file readable, and it is, whole packets to its end; no directory is left beside it.
 */
static void full_disk_perfetto_keeps_whole_packets(void **state)
{
	struct lk_trace_config c = { .flush_ms = 5, .format = LK_TRACE_PERFETTO };
	char out[300], cmd[700];
	size_t packets;

	(void)state;
	if (!mounted)
		skip();
	snprintf(out, sizeof(out), "%s/trace.pftrace", mnt);
	c.path = out;
	assert_true(lk_probe_enable("full") >= 0);
	assert_int_equal(lk_trace_start(&c), 0);
	record_until_an_error(4000000);
	assert_int_equal(lk_trace_stop(), -ENOSPC);
	assert_non_null(strstr(lk_last_error(), "trace.pftrace"));
	assert_non_null(strstr(lk_last_error(), "readable"));
	assert_true(whole_packets(out, &packets));
	assert_true(packets > 1000);
	snprintf(cmd, sizeof(cmd), "ls -d '%s'.ctf-* 2>/dev/null", out);
	assert_int_not_equal(system(cmd), 0); /* nothing beside it */
	unlink(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(full_disk_stops_cleanly),
		cmocka_unit_test(full_disk_json_says_what_is_where),
		cmocka_unit_test(full_disk_perfetto_keeps_whole_packets),
	};
	return cmocka_run_group_tests(tests, mount_small, unmount_small);
}
