// SPDX-License-Identifier: MIT
/*
 * Runs the shared-region fuzz harness (fuzz_semset.c), built with the project's compiler and
 * sanitizers, over its corpus (tests/sem/corpus) and over a fixed series of random programs, so
 * every CI run attacks a shared set the ways the fuzzer found, whether or not libFuzzer is here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#define RANDOM_PROGRAMS 4000
#define MAX_LEN 400

#include "fuzz/corpus.h"

static void corpus_replays_cleanly(void **state)
{
	(void)state;
	assert_true(lkt_replay_corpus(CORPUS, NULL, NULL) >= 20);
}

/* xorshift64: the same programs on every run */
static uint64_t next(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static void random_programs_run_cleanly(void **state)
{
	static uint8_t buf[MAX_LEN];
	uint64_t x = 0x5eed5e7u;

	(void)state;
	for (int i = 0; i < RANDOM_PROGRAMS; i++) {
		size_t len = next(&x) % MAX_LEN;

		for (size_t j = 0; j < len; j++)
			buf[j] = (uint8_t)next(&x);
		LLVMFuzzerTestOneInput(buf, len);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(corpus_replays_cleanly),
		cmocka_unit_test(random_programs_run_cleanly),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
