// SPDX-License-Identifier: MIT
/*
 * Replays the corpus of the --pid client's wait (fuzz_attach_wait.c), which needs root and pid
 * namespaces: skipped where they are missing, rather than replayed without checking anything.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "corpus.h"

bool lkt_attach_wait_possible(void);

static void corpus_replays_cleanly(void **state)
{
	(void)state;
	if (!lkt_attach_wait_possible())
		skip(); /* not root, or no pid namespaces here */
	assert_true(lkt_replay_corpus(CORPUS, NULL, NULL) >= MIN_INPUTS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(corpus_replays_cleanly),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
