// SPDX-License-Identifier: MIT
/*
 * Replays a fuzzing corpus (CORPUS, at least MIN_INPUTS files) through its harness, built with the
 * project's compiler and sanitizers, so every CI run checks each input that ever found new
 * behaviour. The harness traps on a broken property.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t *read_input(const char *path, size_t *size)
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
	char path[4096];
	struct dirent *e;
	size_t inputs = 0;
	DIR *d = opendir(CORPUS);

	(void)state;
	assert_non_null(d);
	while ((e = readdir(d))) {
		uint8_t *data;
		size_t size;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", CORPUS, e->d_name);
		data = read_input(path, &size);
		assert_non_null(data);
		LLVMFuzzerTestOneInput(data, size);
		free(data);
		inputs++;
	}
	closedir(d);
	print_message("%zu inputs replayed\n", inputs);
	assert_true(inputs >= MIN_INPUTS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(corpus_replays_cleanly),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
