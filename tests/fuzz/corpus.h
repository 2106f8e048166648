/* SPDX-License-Identifier: MIT */
/*
 * Replaying a fuzzing corpus in a cmocka test: every file of a directory, read whole and handed
 * to the harness's LLVMFuzzerTestOneInput (which traps on a broken property), and to an optional
 * check of the test's own. Include after <cmocka.h>.
 */
#ifndef LKT_FUZZ_CORPUS_H
#define LKT_FUZZ_CORPUS_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static inline uint8_t *lkt_read_input(const char *path, size_t *size)
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

/* Replay every input of dir; each(data, size, arg) after the harness, if not NULL. Returns the count. */
static inline size_t lkt_replay_corpus(const char *dir,
				       void (*each)(const uint8_t *, size_t, void *), void *arg)
{
	char path[4096];
	struct dirent *e;
	size_t inputs = 0;
	DIR *d = opendir(dir);

	assert_non_null(d);
	while ((e = readdir(d))) {
		uint8_t *data;
		size_t size;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		data = lkt_read_input(path, &size);
		assert_non_null(data);
		LLVMFuzzerTestOneInput(data, size);
		if (each)
			each(data, size, arg);
		free(data);
		inputs++;
	}
	closedir(d);
	print_message("%zu inputs replayed\n", inputs);
	return inputs;
}

#endif
