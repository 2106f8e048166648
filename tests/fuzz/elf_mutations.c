// SPDX-License-Identifier: MIT
/*
 * The ELF reader of `lowkey list` and `lowkey trace --pid` (tools/lowkey/util/probe_elf.c) on cuts of
 * real programs and on every damaged byte of their headers: a program and a shared object with
 * probe sites, each cut at every length within its first and last 8 KiB (the ELF and program
 * headers; the section headers and their names) and at every 97th between, and with each byte of
 * its first and last 4 KiB flipped two ways, under the sanitizers in CI. Each read gives sites (no
 * more than the whole file has) or an error with a message; whether the object uses lowkey is
 * answered without a fault, and so is its build-id (proc_files.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "probe_elf.h"
#include "proc_files.h"

static char copy[] = "/tmp/lkt-elf-mutations-XXXXXX";
static int fd = -1;

static int teardown(void **state)
{
	(void)state;
	if (fd >= 0)
		close(fd);
	unlink(copy);
	return 0;
}

/* The whole file into memory; its size in *size. */
static uint8_t *slurp(const char *path, size_t *size)
{
	struct stat st;
	uint8_t *data;
	int in = open(path, O_RDONLY | O_CLOEXEC);

	assert_true(in >= 0);
	assert_int_equal(fstat(in, &st), 0);
	data = malloc((size_t)st.st_size);
	assert_non_null(data);
	assert_int_equal(pread(in, data, (size_t)st.st_size, 0), st.st_size);
	close(in);
	*size = (size_t)st.st_size;
	return data;
}

/* Read the copy: sites (at most max) or an error that says why. Returns the sites, or -1. */
static long read_copy(size_t max, const char *what, size_t at)
{
	struct probe_elf_sites s;
	char err[512] = "";
	long n;
	int rc = probe_elf_read_sites(copy, &s, err, sizeof(err));
	int in = open(copy, O_RDONLY | O_CLOEXEC);
	uint8_t id[BUILD_ID_MAX];

	(void)probe_elf_uses_lowkey(copy);
	assert_true(in >= 0);
	assert_true(elf_build_id_of_file(in, id) <= BUILD_ID_MAX); /* a length, 0 or -errno */
	close(in);
	if (rc) {
		if (rc > 0 || !err[0])
			print_error("%s at %zu: %d without a message\n", what, at, rc);
		assert_true(rc < 0 && err[0]);
		return -1;
	}
	if (s.n > max)
		print_error("%s at %zu: %zu sites, more than the whole file's %zu\n", what, at, s.n,
			    max);
	assert_true(s.n <= max);
	n = (long)s.n;
	probe_elf_free_sites(&s);
	return n;
}

static void put(const uint8_t *data, size_t size)
{
	assert_int_equal(ftruncate(fd, 0), 0);
	assert_int_equal(pwrite(fd, data, size, 0), (ssize_t)size);
}

static void mutate(const char *path)
{
	size_t size, whole;
	uint8_t *data = slurp(path, &size);
	long n;

	if (fd < 0) {
		fd = mkstemp(copy);
		assert_true(fd >= 0);
	}
	put(data, size);
	n = read_copy(SIZE_MAX, "whole", 0);
	assert_true(n > 0); /* the premise: a program with sites, read */
	whole = (size_t)n;
	for (size_t len = size; len-- > 0;) {
		if (len > 8192 && size - len > 8192 && len % 97)
			continue;
		assert_int_equal(ftruncate(fd, (off_t)len), 0);
		read_copy(whole, "cut", len);
	}
	put(data, size);
	for (size_t i = 0; i < size; i++) {
		static const uint8_t flips[] = { 0x80, 0xff };

		if (i == 4096 && size > 8192)
			i = size - 4096;
		for (size_t f = 0; f < sizeof(flips); f++) {
			uint8_t b = data[i] ^ flips[f];

			assert_int_equal(pwrite(fd, &b, 1, (off_t)i), 1);
			read_copy(SIZE_MAX, "flipped", i);
		}
		assert_int_equal(pwrite(fd, &data[i], 1, (off_t)i), 1);
	}
	free(data);
}

static void a_pie_program(void **state)
{
	(void)state;
	mutate(TARGET);
}

static void a_shared_object(void **state)
{
	(void)state;
	mutate(TARGET_LIB);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_pie_program),
		cmocka_unit_test(a_shared_object),
	};

	return cmocka_run_group_tests(tests, NULL, teardown);
}
