// SPDX-License-Identifier: MIT
/*
 * `lowkey report`'s readers of JSON and Perfetto traces on every cut and every damaged byte of
 * real traces: the seeds of corpus/report (seed_report.c wrote them; lowkey's own output), each
 * cut at every length and with every byte flipped two ways, through the fuzzing harness
 * (fuzz_report.c, which traps on a broken property), under the sanitizers in CI. Besides:
 *   - the seeds themselves read cleanly, with events;
 *   - a JSON trace cut anywhere before its closing brace is an error, with a message;
 *   - a Perfetto trace cut short is an error, or (cut between two packets: the format has no end
 *     marker) a trace of no more events than the whole one.
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "corpus.h"
#include "internal/trace_file.h"

static int count_event(const struct lk__event *e, void *arg)
{
	(void)e;
	++*(uint64_t *)arg;
	return 0;
}

/* The events of a trace's bytes, or -1 if they do not read. */
static int64_t events_of(const uint8_t *data, size_t size, char *err, size_t errlen)
{
	const struct lk__reader_ops ops = { NULL, count_event, NULL };
	struct lk__trace_file t;
	uint64_t n = 0;

	if (lk__trace_file_parse(&t, data, size, "input", err, errlen) != 0)
		return -1;
	assert_int_equal(lk__trace_file_walk(&t, &ops, &n, err, errlen), 0);
	lk__trace_file_close(&t);
	return (int64_t)n;
}

static void cuts(const uint8_t *data, size_t size, int64_t whole, bool json)
{
	size_t closing = size;
	char err[512];

	while (json && closing > 0 && data[closing - 1] != '}')
		closing--;
	for (size_t len = 0; len < size; len++) {
		int64_t n;

		err[0] = 0;
		n = events_of(data, len, err, sizeof(err));
		if (n >= 0)
			LLVMFuzzerTestOneInput(data, len); /* what it read, checked */
		if (json && len < closing) {
			if (n >= 0)
				print_error("a JSON trace cut at %zu of %zu bytes read\n", len,
					    size);
			assert_true(n < 0 && err[0] != 0);
		}
		assert_true(n <= whole);
		if (n < 0)
			assert_true(err[0] != 0);
	}
}

static void flips(uint8_t *data, size_t size)
{
	static const uint8_t masks[] = {
		0x01, 0xff
	}; /* a digit or a varint's value; any byte's meaning */

	for (size_t i = 0; i < size; i++)
		for (size_t m = 0; m < sizeof(masks); m++) {
			data[i] ^= masks[m];
			LLVMFuzzerTestOneInput(data, size);
			data[i] ^= masks[m];
		}
}

static void every_cut_and_flip_of_each_seed(void **state)
{
	DIR *d = opendir(CORPUS);
	unsigned int seeds = 0, json = 0, perfetto = 0;
	struct dirent *e;
	char path[4096], err[512];

	(void)state;
	assert_non_null(d);
	while ((e = readdir(d))) {
		uint8_t *data;
		size_t size;
		int64_t whole;
		bool is_json;

		if (strncmp(e->d_name, "seed-", 5) != 0)
			continue; /* what the fuzzer found: replayed by test_fuzz_report_replay */
		snprintf(path, sizeof(path), "%s/%s", CORPUS, e->d_name);
		data = lkt_read_input(path, &size);
		assert_non_null(data);
		whole = events_of(data, size, err, sizeof(err));
		if (whole <= 0)
			print_error("%s: %s\n", path, whole < 0 ? err : "no events");
		assert_true(whole > 0);
		is_json = data[0] == '{';
		json += is_json;
		perfetto += !is_json;
		cuts(data, size, whole, is_json);
		flips(data, size);
		free(data);
		seeds++;
	}
	closedir(d);
	assert_true(json >= 1 && perfetto >= 1 && seeds >= MIN_INPUTS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(every_cut_and_flip_of_each_seed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
