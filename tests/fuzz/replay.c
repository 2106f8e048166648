// SPDX-License-Identifier: MIT
/*
 * Replays a fuzzing corpus (CORPUS, at least MIN_INPUTS files) through its harness, built with the
 * project's compiler and sanitizers, so every CI run checks each input that ever found new
 * behaviour. The harness traps on a broken property.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "corpus.h"

static void corpus_replays_cleanly(void **state)
{
	(void)state;
	assert_true(lkt_replay_corpus(CORPUS, NULL, NULL) >= MIN_INPUTS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(corpus_replays_cleanly),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
