// SPDX-License-Identifier: MIT
/*
 * Replays the control protocol's fuzzing corpus (tests/fuzz/corpus/control) through the fuzz
 * harness, built with the project's compiler and sanitizers, so every CI run checks each input
 * that ever found new behaviour. Also checks the corpus holds an accepted message of every type.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include "probe/protocol.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t *read_file(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long len;

	*size = 0;
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	buf = malloc(len > 0 ? (size_t)len : 1);
	*size = buf && len > 0 ? fread(buf, 1, (size_t)len, f) : 0;
	fclose(f);
	return buf;
}

static void corpus_replays_cleanly(void **state)
{
	static const uint16_t types[] = { LK_CTL_RULE, LK_CTL_START, LK_CTL_STOP, LK_CTL_STATUS, LK_CTL_LIST,
					  LK_CTL_RESULT, LK_CTL_STATUS_REPLY, LK_CTL_SITE, LK_CTL_STATS, LK_CTL_EXIT,
					  LK_CTL_ENV_START, LK_CTL_ENV_RULE, LK_CTL_ENV_FINISH };
	bool seen[sizeof(types) / sizeof(types[0])] = { 0 };
	char path[4096], err[256];
	struct dirent *e;
	size_t files = 0, refused = 0;
	DIR *d = opendir(CORPUS);

	(void)state;
	assert_non_null(d);
	while ((e = readdir(d))) {
		struct lk__ctl_msg m;
		uint8_t *data;
		size_t size = 0;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", CORPUS, e->d_name);
		data = read_file(path, &size);
		assert_non_null(data);
		LLVMFuzzerTestOneInput(data, size);	/* traps on a broken property */
		if (lk__ctl_decode(data, size, &m, err, sizeof(err)) == 0) {
			for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
				seen[i] |= m.type == types[i];
		} else {
			refused++;
		}
		free(data);
		files++;
	}
	closedir(d);
	print_message("%zu inputs replayed, %zu of them refused\n", files, refused);
	assert_true(files >= 20);
	assert_true(refused > 0);
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		if (!seen[i])
			print_error("no accepted %s message in the corpus\n", lk__ctl_type_name(types[i]));
		assert_true(seen[i]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(corpus_replays_cleanly),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
