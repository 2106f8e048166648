// SPDX-License-Identifier: MIT
/*
 * Replays the control protocol's fuzzing corpus (tests/fuzz/corpus/control) through the fuzz
 * harness, built with the project's compiler and sanitizers, so every CI run checks each input
 * that ever found new behaviour. Also checks the corpus holds an accepted message of every type.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <cmocka.h>

#include "corpus.h"
#include "internal/control_protocol.h"

static const uint16_t types[] = { LK_CTL_RULE,	       LK_CTL_START,	 LK_CTL_STOP,
				  LK_CTL_STATUS,       LK_CTL_LIST,	 LK_CTL_RESULT,
				  LK_CTL_STATUS_REPLY, LK_CTL_SITE,	 LK_CTL_STATS,
				  LK_CTL_EXIT,	       LK_CTL_ENV_START, LK_CTL_ENV_RULE,
				  LK_CTL_ENV_FINISH,   LK_CTL_LOCKS,	 LK_CTL_COUNTERS,
				  LK_CTL_LOCK,	       LK_CTL_PERF };

struct decoded {
	bool seen[sizeof(types) / sizeof(types[0])];
	size_t refused;
};

/* Which message types the corpus holds accepted, and how many of its inputs are refused. */
static void decode(const uint8_t *data, size_t size, void *arg)
{
	struct decoded *d = arg;
	struct lk__ctl_msg m;
	char err[256];

	if (lk__ctl_decode(data, size, &m, err, sizeof(err)) != 0) {
		d->refused++;
		return;
	}
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		d->seen[i] |= m.type == types[i];
}

static void corpus_replays_cleanly(void **state)
{
	struct decoded d = { 0 };

	(void)state;
	assert_true(lkt_replay_corpus(CORPUS, decode, &d) >= 20);
	print_message("%zu of them refused\n", d.refused);
	assert_true(d.refused > 0);
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		if (!d.seen[i])
			print_error("no accepted %s message in the corpus\n",
				    lk__ctl_type_name(types[i]));
		assert_true(d.seen[i]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(corpus_replays_cleanly),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
