// SPDX-License-Identifier: MIT
/*
 * Runs the shared-region fuzz harness (fuzz_semset.c), built with the project's compiler and
 * sanitizers, over its corpus (tests/sem/corpus) and over a fixed series of random programs, so
 * every CI run attacks a shared set the ways the fuzzer found, whether or not libFuzzer is here.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#define RANDOM_PROGRAMS 4000
#define MAX_LEN 400

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
	char path[4096];
	struct dirent *e;
	size_t files = 0;
	DIR *d = opendir(CORPUS);

	(void)state;
	assert_non_null(d);
	while ((e = readdir(d))) {
		uint8_t *data;
		size_t size = 0;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", CORPUS, e->d_name);
		data = read_file(path, &size);
		assert_non_null(data);
		LLVMFuzzerTestOneInput(data, size);	/* traps on a broken property */
		free(data);
		files++;
	}
	closedir(d);
	print_message("%zu inputs replayed\n", files);
	assert_true(files >= 20);
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
