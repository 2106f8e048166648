// SPDX-License-Identifier: MIT
/*
 * `lowkey locks` lists every lock when asked, and says how many it leaves out when not.
 *
 * locks_victim's "every" mode takes 13 locks: the mutex its constructor's thread takes 501 times,
 * one mutex contended once, 6 never contended and left alive (taken 3, 6, ... 18 times) and 5
 * never contended and destroyed (taken 100 ... 104 times). The default view lists 10 and says
 * that 3 are left out, all never contended; --all lists the 13 with their exact acquisitions, in
 * text and JSON, the destroyed ones marked; --sort orders them; and the rate the figures were
 * converted with is the one this library's clock calibration finds.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <lowkey/clock.h>

#define LOCKS 13
#define LIVE 6
#define GONE 5

struct run {
	int status;
	char out[8192];	   /* the victim's stdout: its locks' addresses */
	char err[1 << 16]; /* and stderr: the report */
};

static void read_all(int fd, char *buf, size_t len)
{
	size_t used = 0;
	ssize_t n;

	while (used + 1 < len && (n = read(fd, buf + used, len - 1 - used)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		used += (size_t)n;
	}
	buf[used] = 0;
	while (read(fd, (char[256]){ 0 }, 256) > 0)
		;
}

/* lowkey locks OPTIONS -- VICTIM every, its output captured; options end with NULL. */
static struct run *run_locks(const char *first, ...)
{
	static struct run r;
	char *argv[16] = { LOWKEY, "locks" };
	int argc = 2, out[2], err[2];
	va_list ap;
	pid_t pid;

	va_start(ap, first);
	for (const char *a = first; a; a = va_arg(ap, const char *))
		argv[argc++] = (char *)a;
	va_end(ap);
	argv[argc++] = "--";
	argv[argc++] = VICTIM;
	argv[argc++] = "every";
	argv[argc] = NULL;
	assert_int_equal(pipe(out), 0);
	assert_int_equal(pipe(err), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(out[1], 1);
		dup2(err[1], 2);
		close(out[0]);
		close(err[0]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(out[1]);
	close(err[1]);
	/* the victim's stdout is short and written before it ends: read it, then the report */
	read_all(out[0], r.out, sizeof(r.out));
	read_all(err[0], r.err, sizeof(r.err));
	close(out[0]);
	close(err[0]);
	assert_int_equal(waitpid(pid, &r.status, 0), pid);
	assert_true(WIFEXITED(r.status));
	assert_int_equal(WEXITSTATUS(r.status), 0);
	return &r;
}

/* The address the victim printed as "name=0x...", as the report writes it. */
static void address_of(const struct run *r, const char *name, char *buf, size_t len)
{
	char key[32];
	const char *p;

	snprintf(key, sizeof(key), "%s=", name);
	for (p = r->out; (p = strstr(p, key)); p++) {
		if (p == r->out || p[-1] == '\n') {
			unsigned long long a = strtoull(p + strlen(key), NULL, 16);

			snprintf(buf, len, "%#llx", a);
			return;
		}
	}
	fail_msg("no address for %s in:\n%s", name, r->out);
}

static long long json_number_after(const char *from, const char *key)
{
	char needle[64];
	const char *at;

	snprintf(needle, sizeof(needle), "\"%s\": ", key);
	at = strstr(from, needle);
	if (!at)
		fail_msg("no \"%s\" in:\n%s", key, from);
	return strtoll(at + strlen(needle), NULL, 10);
}

static size_t count(const char *text, const char *needle)
{
	size_t n = 0;

	for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* Each lock the victim named, its expected acquisitions and whether it was destroyed. */
struct expected {
	char name[16];
	long long acquisitions;
	bool gone;
};

static void expected_locks(struct expected *e)
{
	for (int i = 0; i < LIVE; i++)
		e[i] = (struct expected){ "", 3 * (i + 1), false };
	for (int i = 0; i < LIVE; i++)
		snprintf(e[i].name, sizeof(e[i].name), "live%d", i);
	for (int i = 0; i < GONE; i++) {
		e[LIVE + i] = (struct expected){ "", 100 + i, true };
		snprintf(e[LIVE + i].name, sizeof(e[LIVE + i].name), "gone%d", i);
	}
}

static void default_view_counts_what_it_leaves_out(void **state)
{
	struct run *r;

	(void)state;
	r = run_locks(NULL);
	/* by total wait: the contended mutex, the rest by acquisitions; the 3 least taken stay out */
	assert_non_null(strstr(r->err, " 13 locks, "));
	assert_non_null(strstr(r->err, "    3 more locks not listed, 3 of them never contended: "
				       "--all lists every lock\n"));
	assert_int_equal(count(r->err, "\n  1 mutex 0x"), 1);
	assert_int_equal(count(r->err, "\n 10 mutex 0x"), 1);
	assert_int_equal(count(r->err, "\n 11 mutex 0x"), 0);

	r = run_locks("--json", NULL);
	assert_int_equal(json_number_after(r->err, "locks"), LOCKS);
	assert_int_equal(json_number_after(r->err, "listed"), 10);
	assert_int_equal(json_number_after(r->err, "left_out"), 3);
	assert_int_equal(json_number_after(r->err, "left_out_uncontended"), 3);
	assert_int_equal(json_number_after(r->err, "destroyed_uncontended_locks"), 0);
	assert_int_equal(count(r->err, "\"kind\": "), 10);
}

/* The text row of the lock at address: its acquisitions, and whether it is marked gone. */
static long long text_row(const char *report, const char *address, bool *gone)
{
	char label[48];
	const char *at;

	snprintf(label, sizeof(label), " mutex %s", address);
	at = strstr(report, label);
	if (!at)
		fail_msg("no row for %s in:\n%s", address, report);
	at += strlen(label);
	*gone = strncmp(at, " (gone)", 7) == 0;
	return strtoll(at + (*gone ? 7 : 0), NULL, 10);
}

static void all_lists_every_lock_in_text(void **state)
{
	struct expected e[LIVE + GONE];
	struct run *r;

	(void)state;
	expected_locks(e);
	r = run_locks("--all", NULL);
	assert_int_equal(count(r->err, " mutex 0x"), LOCKS);
	assert_null(strstr(r->err, "not listed"));
	for (int i = 0; i < LIVE + GONE; i++) {
		char address[32];
		bool gone;

		address_of(r, e[i].name, address, sizeof(address));
		assert_int_equal(text_row(r->err, address, &gone), e[i].acquisitions);
		assert_int_equal(gone, e[i].gone);
	}
	/* --top 0 is the same list */
	r = run_locks("--top", "0", NULL);
	assert_int_equal(count(r->err, " mutex 0x"), LOCKS);
}

static void all_lists_every_lock_in_json(void **state)
{
	struct expected e[LIVE + GONE];
	struct run *r;

	(void)state;
	expected_locks(e);
	r = run_locks("--all", "--json", NULL);
	assert_int_equal(json_number_after(r->err, "locks"), LOCKS);
	assert_int_equal(json_number_after(r->err, "listed"), LOCKS);
	assert_int_equal(json_number_after(r->err, "left_out"), 0);
	assert_int_equal(count(r->err, "\"kind\": "), LOCKS);
	for (int i = 0; i < LIVE + GONE; i++) {
		char address[32], needle[64];
		const char *row;

		address_of(r, e[i].name, address, sizeof(address));
		snprintf(needle, sizeof(needle), "\"address\": \"%s\"", address);
		row = strstr(r->err, needle);
		assert_non_null(row);
		assert_int_equal(json_number_after(row, "acquisitions"), e[i].acquisitions);
		assert_int_equal(json_number_after(row, "contended"), 0);
		assert_non_null(
			strstr(row, e[i].gone ? "\"destroyed\": true" : "\"destroyed\": false"));
	}
}

static void sort_orders_the_list(void **state)
{
	long long last = -1, n = 0;
	struct run *r;
	int status;

	(void)state;
	r = run_locks("--all", "--json", "--sort", "acquired", NULL);
	assert_non_null(strstr(r->err, "\"sort\": \"acquired\""));
	for (const char *p = strstr(r->err, "\"top\""); (p = strstr(p, "\"acquisitions\": "));
	     p++, n++) {
		long long v = strtoll(p + strlen("\"acquisitions\": "), NULL, 10);

		assert_true(last < 0 || v <= last);
		last = v;
	}
	assert_int_equal(n, LOCKS);
	assert_int_equal(last, 2); /* the contended mutex, taken twice */

	/* a key there is not is bad usage, before the command runs */
	status = system(LOWKEY " locks --sort nosuch -- /bin/echo ran 2>/dev/null >/dev/null");
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 2);
}

/*
 * The figures are in counter ticks: lowkey locks converts them with the counter's rate, measured
 * over the command's run. It must agree with this library's calibration, measured here over the
 * whole test (the library refines its own over the time since its first read, or takes the rate
 * from CPUID or the kernel), to 0.1%: twenty times the error the command allows itself, and room
 * for a nominal CPUID rate's distance from the counter's real one.
 */
static void clock_rate_is_the_librarys(void **state)
{
	struct lk_clock_info info;
	long long hz;
	struct run *r;

	(void)state;
	(void)lk_now_ns(); /* the library's calibration starts here */
	r = run_locks("--json", NULL);
	r = run_locks("--json", NULL);
	(void)lk_now_ns(); /* and is refined over the time since */
	assert_int_equal(lk_clock_info(&info), 0);
	hz = json_number_after(r->err, "counter_hz");
	assert_true(hz > 0);
	if (!info.counter_usable || !info.tsc_hz)
		return; /* no cycle counter: the figures are nanoseconds */
	if (llabs(hz - (long long)info.tsc_hz) * 1000 > (long long)info.tsc_hz)
		fail_msg("lowkey locks used %lld Hz, the library finds %llu Hz (%s)", hz,
			 (unsigned long long)info.tsc_hz, info.tsc_hz_source);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(default_view_counts_what_it_leaves_out),
		cmocka_unit_test(all_lists_every_lock_in_text),
		cmocka_unit_test(all_lists_every_lock_in_json),
		cmocka_unit_test(sort_orders_the_list),
		cmocka_unit_test(clock_rate_is_the_librarys),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
