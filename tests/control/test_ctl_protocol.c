// SPDX-License-Identifier: MIT
/*
 * The control protocol's encoder and decoder: every message type round-trips, and every way a
 * message can be malformed or out of range is refused with its own error, control characters in
 * its text too.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "internal/control_protocol.h"

static uint8_t buf[LK_CTL_MAX_MSG + 64];
static char err[256];

static int encode(const struct lk__ctl_msg *m)
{
	int n = lk__ctl_encode(m, buf, sizeof(buf));

	assert_true(n >= LK_CTL_HEADER);
	return n;
}

static int decode(size_t n, struct lk__ctl_msg *m)
{
	err[0] = 0;
	return lk__ctl_decode(buf, n, m, err, sizeof(err));
}

static void put32(size_t at, uint32_t v)
{
	memcpy(buf + at, &v, 4);
}

static void every_type_round_trips(void **state)
{
	struct lk__ctl_msg in[] = {
		{ .type = LK_CTL_RULE, .seq = 1, .rule = { 1, LK_CTL_RULE_SESSION, "db:*" } },
		{ .type = LK_CTL_START,
		  .seq = 2,
		  .start = { 1, LK_CTL_START_STOP_ON_CLOSE, 1, 50, 1 << 20, "/t/x.json" } },
		{ .type = LK_CTL_START,
		  .seq = 2,
		  .start = { 0, 0, 0, 0, 0, "/t/x.ctf", LK_CTL_OUT_DIR } },
		{ .type = LK_CTL_SNAPSHOT, .seq = 2, .snapshot = { "", LK_CTL_OUT_PATH } },
		{ .type = LK_CTL_SNAPSHOT, .seq = 2, .snapshot = { "/t/s.ctf", LK_CTL_OUT_DIR } },
		{ .type = LK_CTL_STOP, .seq = 3 },
		{ .type = LK_CTL_STATUS, .seq = 4 },
		{ .type = LK_CTL_LIST, .seq = 5 },
		{ .type = LK_CTL_RESULT, .seq = 6, .result = { -13, -5, "no" } },
		{ .type = LK_CTL_STATUS_REPLY,
		  .seq = 7,
		  .status = { 99, 2, 3, 4, 5, 6, 1, 7, 8, 9, 10, -28, "/p", "0.1.0" } },
		{ .type = LK_CTL_SITE,
		  .seq = 8,
		  .site = { 16, 2, 2, 1, 0x45, 12, "a", "b", "f.c", "x, y", "/lib.so", "f" } },
		{ .type = LK_CTL_STATS, .seq = 9, .stats = { 0, 1, 2, 3, 4, "/p", "" } },
		{ .type = LK_CTL_EXIT, .seq = 10, .stats = { -5, 1, 2, 3, 4, "/p", "m" } },
		{ .type = LK_CTL_ENV_START,
		  .seq = 11,
		  .env_start = { -17, "exists", "/o", "/o.ctf-1" } },
		{ .type = LK_CTL_ENV_RULE, .seq = 12, .env_rule = { 1, 3, "x*" } },
		{ .type = LK_CTL_ENV_FINISH, .seq = 13, .stats = { 0, 11, 0, 12, 1, "/o", "" } },
		{ .type = LK_CTL_PROGRESS, .seq = 14, .progress = { 1 << 20, 3 << 20 } },
		{ .type = LK_CTL_LOCKS, .seq = 15 },
		{ .type = LK_CTL_COUNTERS, .seq = 16 },
		{ .type = LK_CTL_LOCK, .seq = 15, .lock = { 2, 10, 20, 3, 400, 500, 600, "table" } },
		{ .type = LK_CTL_LOCK, .seq = 15, .lock = { 1, 0, 0, 0, 0, 0, 0, "" } },
		{ .type = LK_CTL_PERF, .seq = 16, .perf = { 3, 1, 7, 8, 4, "cycles:u" } },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		struct lk__ctl_msg out;
		uint8_t copy[LK_CTL_MAX_MSG];
		int n = encode(&in[i]);

		assert_int_equal(decode((size_t)n, &out), 0);
		assert_int_equal(out.type, in[i].type);
		assert_int_equal(out.seq, in[i].seq);
		memcpy(copy, buf, (size_t)n);
		assert_int_equal(lk__ctl_encode(&out, buf, sizeof(buf)), n);
		assert_memory_equal(copy, buf, (size_t)n);
		assert_int_equal(lk__ctl_is_request(in[i].type), in[i].type < LK_CTL_RESULT);
	}
}

static void fields_decode_to_their_values(void **state)
{
	struct lk__ctl_msg in = { .type = LK_CTL_SITE,
				  .seq = 0xabcdef01,
				  .site = { 4000000000u, 4, 8, 0, 0x55555555, 77, "prov", "ev",
					    "file.c", "a,b", "", "fn" } };
	struct lk__ctl_msg out;
	int n;

	(void)state;
	n = encode(&in);
	assert_int_equal(decode((size_t)n, &out), 0);
	assert_int_equal(out.seq, 0xabcdef01);
	assert_int_equal(out.site.id, 4000000000u);
	assert_int_equal(out.site.kind, 4);
	assert_int_equal(out.site.nargs, 8);
	assert_int_equal(out.site.arg_types, 0x55555555);
	assert_int_equal(out.site.line, 77);
	assert_string_equal(out.site.provider, "prov");
	assert_string_equal(out.site.event, "ev");
	assert_string_equal(out.site.object, "");
	assert_string_equal(out.site.function, "fn");
	/* strings point into the buffer */
	assert_true((const uint8_t *)out.site.file > buf &&
		    (const uint8_t *)out.site.file < buf + n);

	in = (struct lk__ctl_msg){ .type = LK_CTL_LOCK,
				   .lock = { 3, UINT64_MAX, 1, 2, 3, UINT64_MAX - 1, 5,
					     "a lock's name, UTF-8: \xc3\xa9" } };
	n = encode(&in);
	assert_int_equal(decode((size_t)n, &out), 0);
	assert_int_equal(out.lock.kind, 3);
	assert_true(out.lock.acquisitions == UINT64_MAX);
	assert_true(out.lock.read_acquisitions == 1 && out.lock.contended == 2);
	assert_true(out.lock.wait_ns == 3 && out.lock.hold_ns == UINT64_MAX - 1);
	assert_true(out.lock.read_hold_ns == 5);
	assert_string_equal(out.lock.name, "a lock's name, UTF-8: \xc3\xa9");

	in = (struct lk__ctl_msg){ .type = LK_CTL_PERF,
				   .perf = { 4000000000u, 255, UINT64_MAX, 2, 1, "msr/tsc/" } };
	n = encode(&in);
	assert_int_equal(decode((size_t)n, &out), 0);
	assert_int_equal(out.perf.set, 4000000000u);
	assert_int_equal(out.perf.index, 255);
	assert_true(out.perf.value == UINT64_MAX);
	assert_true(out.perf.time_enabled == 2 && out.perf.time_running == 1);
	assert_string_equal(out.perf.event, "msr/tsc/");

	in = (struct lk__ctl_msg){ .type = LK_CTL_RESULT, .result = { -4095, INT64_MIN, "" } };
	n = encode(&in);
	assert_int_equal(decode((size_t)n, &out), 0);
	assert_int_equal(out.result.err, -4095);
	assert_true(out.result.value == INT64_MIN);
}

/* A valid RULE, then one change; the decoder must refuse it with want. */
static void refuse(void (*spoil)(int *n), int want, const char *what)
{
	struct lk__ctl_msg m = { .type = LK_CTL_RULE, .seq = 3, .rule = { 1, 0, "app:*" } };
	int n = encode(&m);

	spoil(&n);
	assert_int_equal(decode((size_t)n, &m), want);
	if (!strstr(err, what))
		print_error("message '%s' does not say '%s'\n", err, what);
	assert_non_null(strstr(err, what));
}

static void spoil_short(int *n)
{
	*n = LK_CTL_HEADER - 1;
}
static void spoil_magic(int *n)
{
	(void)n;
	buf[3] ^= 1;
}
static void spoil_version(int *n)
{
	(void)n;
	buf[4] = 9;
}
static void spoil_length(int *n)
{
	put32(8, (uint32_t)*n + 1);
}
static void spoil_truncate(int *n)
{
	put32(8, (uint32_t)(*n - 3));
	*n -= 3;
}
static void spoil_trailing(int *n)
{
	buf[*n] = 0;
	put32(8, (uint32_t)*n + 1);
	(*n)++;
}
static void spoil_type(int *n)
{
	(void)n;
	buf[6] = 0x7f;
}
static void spoil_nul(int *n)
{
	buf[*n - 1] = '!';
}
static void spoil_inner_nul(int *n)
{
	buf[*n - 3] = 0;
}
static void spoil_bool(int *n)
{
	(void)n;
	buf[LK_CTL_HEADER] = 2;
}
static void spoil_scope(int *n)
{
	(void)n;
	buf[LK_CTL_HEADER + 1] = 9;
}
static void spoil_strlen(int *n)
{
	(void)n;
	buf[LK_CTL_HEADER + 2] = 0xff;
	buf[LK_CTL_HEADER + 3] = 0xff;
}
static void spoil_empty(int *n)
{
	buf[LK_CTL_HEADER + 2] = 0;
	buf[LK_CTL_HEADER + 4] = 0;
	*n = LK_CTL_HEADER + 5;
	put32(8, (uint32_t)*n);
}
static void spoil_huge(int *n)
{
	*n = LK_CTL_MAX_MSG + 1;
	put32(8, (uint32_t)*n);
}

static void malformed_messages_are_refused(void **state)
{
	(void)state;
	refuse(spoil_short, -EBADMSG, "shorter than");
	refuse(spoil_magic, -EBADMSG, "magic");
	refuse(spoil_version, -EPROTONOSUPPORT, "version 9");
	refuse(spoil_length, -EBADMSG, "header says");
	refuse(spoil_truncate, -EBADMSG, "past the message's end");
	refuse(spoil_trailing, -EBADMSG, "after the last field");
	refuse(spoil_type, -EOPNOTSUPP, "unknown message type 127");
	refuse(spoil_nul, -EBADMSG, "NUL-terminated");
	refuse(spoil_inner_nul, -EBADMSG, "NUL-terminated");
	refuse(spoil_bool, -EINVAL, "enable");
	refuse(spoil_scope, -EINVAL, "scope");
	refuse(spoil_strlen, -EBADMSG, "over the limit");
	refuse(spoil_empty, -EINVAL, "empty");
	refuse(spoil_huge, -EMSGSIZE, "limit");
	assert_int_equal(lk__ctl_decode(NULL, 0, &(struct lk__ctl_msg){ 0 }, err, sizeof(err)),
			 -EBADMSG);
}

static void values_out_of_range_are_refused(void **state)
{
	struct lk__ctl_msg bad[] = {
		{ .type = LK_CTL_START,
		  .start = { LK_CTL_FORMAT_MAX + 1, 0, 0, 0, 0, "/x" } },	/* format */
		{ .type = LK_CTL_START, .start = { 0, 2, 0, 0, 0, "/x" } },	/* ctl_flags */
		{ .type = LK_CTL_START, .start = { 0, 0, 2, 0, 0, "/x" } },	/* flags */
		{ .type = LK_CTL_START, .start = { 0, 0, 0, 60001, 0, "/x" } }, /* flush_ms */
		{ .type = LK_CTL_START, .start = { 0, 0, 0, 0, (1ull << 30) + 1, "/x" } },
		{ .type = LK_CTL_START, .start = { 0, 0, 0, 0, 0, "relative" } },
		{ .type = LK_CTL_START, .start = { 0, 0, 0, 0, 0, "/x", LK_CTL_OUT_DIR + 1 } },
		{ .type = LK_CTL_SNAPSHOT, .snapshot = { "/x", LK_CTL_OUT_DIR + 1 } }, /* output */
		{ .type = LK_CTL_RESULT, .result = { 1, 0, "" } },		       /* err > 0 */
		{ .type = LK_CTL_RESULT, .result = { -4096, 0, "" } },
		{ .type = LK_CTL_SITE,
		  .site = { 1, 0, 0, 0, 0, 1, "a", "b", "", "", "", "" } }, /* kind 0 */
		{ .type = LK_CTL_SITE,
		  .site = { 1, 5, 0, 0, 0, 1, "a", "b", "", "", "", "" } }, /* kind 5 */
		{ .type = LK_CTL_SITE,
		  .site = { 1, 1, 9, 0, 0, 1, "a", "b", "", "", "", "" } }, /* nargs 9 */
		{ .type = LK_CTL_SITE,
		  .site = { 1, 1, 1, 0, 0x6, 1, "a", "b", "", "", "", "" } }, /* type 6 */
		{ .type = LK_CTL_SITE,
		  .site = { 1, 1, 1, 0, 0x10 | 1, 1, "a", "b", "", "", "",
			    "" } }, /* beyond nargs */
		{ .type = LK_CTL_SITE,
		  .site = { 1, 1, 0, 0, 0, 1, "", "b", "", "", "", "" } }, /* no provider */
		{ .type = LK_CTL_SITE,
		  .site = { 1, 1, 0, 2, 0, 1, "a", "b", "", "", "", "" } },    /* enabled 2 */
		{ .type = LK_CTL_LOCK, .lock = { 0, 1, 0, 0, 0, 0, 0, "x" } }, /* kind 0 */
		{ .type = LK_CTL_LOCK,
		  .lock = { LK_CTL_LOCK_KIND_MAX + 1, 1, 0, 0, 0, 0, 0, "x" } }, /* kind 4 */
		{ .type = LK_CTL_PERF, .perf = { 1, 0, 1, 1, 1, "" } },		 /* no event */
	};
	struct lk__ctl_msg out;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int n = encode(&bad[i]);

		assert_int_equal(decode((size_t)n, &out), -EINVAL);
		assert_true(err[0] != 0);
		assert_int_equal(out.type, bad[i].type); /* the type is kept, the fields are not */
		assert_null(out.start.path);
	}
}

static void encoder_refuses_what_cannot_be_sent(void **state)
{
	static char long_glob[LK_CTL_MAX_GLOB + 2];
	struct lk__ctl_msg m = { .type = LK_CTL_RULE, .rule = { 1, 0, long_glob } };

	(void)state;
	memset(long_glob, 'a', LK_CTL_MAX_GLOB + 1);
	assert_int_equal(lk__ctl_encode(&m, buf, sizeof(buf)), -EMSGSIZE);
	long_glob[LK_CTL_MAX_GLOB] = 0;
	assert_true(lk__ctl_encode(&m, buf, sizeof(buf)) > 0);
	assert_int_equal(lk__ctl_encode(&m, buf, 20), -EMSGSIZE); /* does not fit */
	m.rule.glob = NULL;
	assert_int_equal(lk__ctl_encode(&m, buf, sizeof(buf)), -EINVAL);
	m.type = 999;
	assert_int_equal(lk__ctl_encode(&m, buf, sizeof(buf)), -EINVAL);
	assert_string_equal(lk__ctl_type_name(999), "unknown");
	assert_string_equal(lk__ctl_type_name(LK_CTL_START), "start");
}

/*
 * A peer's text holds no control character: both sides print what they receive, and a terminal
 * acts on C0 (ESC's sequences retitle or clear it), DEL and C1 (UTF-8, or a lone byte 0x80..0x9f)
 * instead of showing them. Other bytes pass, UTF-8 or not.
 */
static void control_characters_are_refused(void **state)
{
	static const char *const hostile[] = { "\x1b]0;PWN\x07\x1b[2J",
					       "a\nb",
					       "a\tb",
					       "del\x7f",
					       "\x01",
					       "csi \xc2\x9b"
					       "2J",
					       "raw \x9b"
					       "2J",
					       "nel \xc2\x85" };
	static const char *const fine[] = { "caf\xc3\xa9", "\xe2\x80\x94 \xf0\x9f\x94\x91",
					    "latin-1 \xe9\xa0", "" };
	struct lk__ctl_msg out;

	(void)state;
	for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++) {
		struct lk__ctl_msg in[] = {
			{ .type = LK_CTL_RESULT, .result = { -1, 0, hostile[i] } },
			{ .type = LK_CTL_SITE,
			  .site = { 1, 1, 0, 0, 0, 1, "a", hostile[i], "", "", "", "" } },
			{ .type = LK_CTL_STATS, .stats = { 0, 1, 2, 3, 4, hostile[i], "" } },
			{ .type = LK_CTL_RULE, .rule = { 1, 0, hostile[i] } },
		};

		for (size_t k = 0; k < sizeof(in) / sizeof(in[0]); k++) {
			int n = encode(&in[k]);

			assert_int_equal(decode((size_t)n, &out), -EBADMSG);
			assert_non_null(strstr(err, "control character"));
			assert_null(out.result.message);
		}
	}
	for (size_t i = 0; i < sizeof(fine) / sizeof(fine[0]); i++) {
		struct lk__ctl_msg in = { .type = LK_CTL_RESULT, .result = { -1, 0, fine[i] } };
		int n = encode(&in);

		assert_int_equal(decode((size_t)n, &out), 0);
		assert_string_equal(out.result.message, fine[i]);
	}
}

/*
 * A peer of another protocol version (an older lowkey, a newer one) is refused at its first
 * message, with both versions named, never read as if it were this one's: the version changed
 * with the lock and counter messages.
 */
static void other_versions_are_refused(void **state)
{
	struct lk__ctl_msg m = { .type = LK_CTL_STATUS, .seq = 1 }, out;
	int n = encode(&m);

	(void)state;
	assert_int_equal(LK_CTL_VERSION, 4);
	buf[4] = 3;
	assert_int_equal(decode((size_t)n, &out), -EPROTONOSUPPORT);
	assert_non_null(strstr(err, "protocol version 3; this side speaks version 4"));
	m = (struct lk__ctl_msg){ .type = LK_CTL_LOCKS, .seq = 2 };
	n = encode(&m);
	buf[4] = 5;
	assert_int_equal(decode((size_t)n, &out), -EPROTONOSUPPORT);
	assert_non_null(strstr(err, "protocol version 5"));
}

/* A lock's name is the program's: a control character in it is refused, as in any text. */
static void lock_names_are_text(void **state)
{
	struct lk__ctl_msg m = { .type = LK_CTL_LOCK, .lock = { 1, 1, 0, 0, 0, 0, 0, "a\nb" } },
			   out;
	int n = encode(&m);

	(void)state;
	assert_int_equal(decode((size_t)n, &out), -EBADMSG);
	assert_non_null(strstr(err, "control character"));
	m.lock.name = "a\\x0ab"; /* as the server escapes it */
	n = encode(&m);
	assert_int_equal(decode((size_t)n, &out), 0);
	assert_string_equal(out.lock.name, "a\\x0ab");
}

/* Every prefix of a valid message is refused, and never read past. */
static void every_truncation_is_refused(void **state)
{
	struct lk__ctl_msg m = { .type = LK_CTL_SITE,
				 .site = { 1, 1, 2, 1, 0x21, 9, "p", "e", "f", "a, b", "/o",
					   "g" } };
	int n = encode(&m);

	(void)state;
	for (int len = 0; len < n; len++) {
		put32(8, (uint32_t)len);
		assert_true(decode((size_t)len, &m) < 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(every_type_round_trips),
		cmocka_unit_test(fields_decode_to_their_values),
		cmocka_unit_test(malformed_messages_are_refused),
		cmocka_unit_test(values_out_of_range_are_refused),
		cmocka_unit_test(encoder_refuses_what_cannot_be_sent),
		cmocka_unit_test(every_truncation_is_refused),
		cmocka_unit_test(control_characters_are_refused),
		cmocka_unit_test(other_versions_are_refused),
		cmocka_unit_test(lock_names_are_text),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
