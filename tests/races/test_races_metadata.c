// SPDX-License-Identifier: MIT
/*
 * The reader of Clang's sanitizer metadata (tools/lowkey/util/races_metadata.c) on a program built
 * with it (races_metadata.c): every address its sanmd_atomics lists is an instruction marked
 * atomic, and the functions sanmd_covered lists mark theirs covered. Then on damaged copies: each
 * byte of both sections, and of their section headers, flipped two ways, under the sanitizers in
 * CI. Each read returns 0 and marks no more than the file lists, or nothing.
 */
#include <fcntl.h>
#include <gelf.h>
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

#include "races.h"

static char copy[] = "/tmp/lkt-races-metadata-XXXXXX";
static int fd = -1;

/* Where a section is in the file: its bytes, and its header's. */
struct place {
	size_t data, size, header, header_size;
	uint64_t addr;
};

struct program {
	uint8_t *bytes;
	size_t size;
	struct place atomics, covered;
	uint64_t text_start, text_end;
};

static struct program prog;

static void find_sections(struct program *p)
{
	int in = open(FIXTURE_METADATA, O_RDONLY | O_CLOEXEC);
	Elf *elf;
	Elf_Scn *scn = NULL;
	GElf_Ehdr eh;
	GElf_Shdr sh;
	size_t shstrndx;

	assert_true(in >= 0);
	elf_version(EV_CURRENT);
	elf = elf_begin(in, ELF_C_READ, NULL);
	assert_non_null(elf);
	assert_non_null(gelf_getehdr(elf, &eh));
	assert_int_equal(elf_getshdrstrndx(elf, &shstrndx), 0);
	while ((scn = elf_nextscn(elf, scn))) {
		const char *name;
		struct place *at = NULL;

		assert_non_null(gelf_getshdr(scn, &sh));
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (name && strcmp(name, "sanmd_atomics") == 0)
			at = &p->atomics;
		else if (name && strcmp(name, "sanmd_covered") == 0)
			at = &p->covered;
		else if (name && strcmp(name, ".text") == 0) {
			p->text_start = sh.sh_addr;
			p->text_end = sh.sh_addr + sh.sh_size;
		}
		if (!at)
			continue;
		*at = (struct place){ .data = sh.sh_offset,
				      .size = sh.sh_size,
				      .header = eh.e_shoff + elf_ndxscn(scn) * eh.e_shentsize,
				      .header_size = eh.e_shentsize,
				      .addr = sh.sh_addr };
	}
	elf_end(elf);
	close(in);
	assert_true(p->atomics.size > 0 && p->covered.size > 0 && p->text_end > p->text_start);
}

static int setup(void **state)
{
	struct stat st;
	int in = open(FIXTURE_METADATA, O_RDONLY | O_CLOEXEC);

	(void)state;
	assert_true(in >= 0);
	assert_int_equal(fstat(in, &st), 0);
	prog.size = (size_t)st.st_size;
	prog.bytes = malloc(prog.size);
	assert_non_null(prog.bytes);
	assert_int_equal(pread(in, prog.bytes, prog.size, 0), (ssize_t)prog.size);
	close(in);
	find_sections(&prog);
	fd = mkstemp(copy);
	assert_true(fd >= 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	close(fd);
	unlink(copy);
	free(prog.bytes);
	return 0;
}

/* One instruction at every byte of .text, as races_decode() would leave them: all sampled. */
static void every_byte(struct races_code *code)
{
	size_t n = prog.text_end - prog.text_start;

	memset(code, 0, sizeof(*code));
	code->insns = calloc(n, sizeof(*code->insns));
	assert_non_null(code->insns);
	for (size_t i = 0; i < n; i++) {
		code->insns[i].plan.vaddr = prog.text_start + i;
		code->insns[i].plan.size = 4;
		code->insns[i].sampled = true;
	}
	code->n = code->sampled = n;
}

/* Write bytes to the copy and read it; returns how many instructions it marked atomic. */
static size_t read_copy(const uint8_t *bytes, struct races_code *code)
{
	char err[512];

	assert_int_equal(ftruncate(fd, 0), 0);
	assert_int_equal(pwrite(fd, bytes, prog.size, 0), (ssize_t)prog.size);
	every_byte(code);
	assert_int_equal(races_mark_metadata(copy, 0, code, err, sizeof(err)), 0);
	assert_int_equal(code->sampled + code->atomic_debug[RACES_ATOMIC_METADATA], code->n);
	return code->atomic_debug[RACES_ATOMIC_METADATA];
}

static void the_list_is_read_whole(void **state)
{
	struct races_code code;
	size_t listed = prog.atomics.size / 4, marked = 0;

	(void)state;
	assert_int_equal(read_copy(prog.bytes, &code), listed);
	for (size_t i = 0; i < listed; i++) {
		int32_t off;
		uint64_t entry = prog.atomics.addr + 4 * i, pc;

		memcpy(&off, prog.bytes + prog.atomics.data + 4 * i, 4);
		pc = entry + (uint64_t)(int64_t)off;
		assert_true(pc >= prog.text_start && pc < prog.text_end);
		marked += code.insns[pc - prog.text_start].atomic_kind == RACES_ATOMIC_METADATA;
	}
	assert_int_equal(marked, listed);
	assert_true(code.covered > 0 && code.covered < code.n);
	free(code.insns);
}

/* Flip each byte of [start, start + len) two ways; each read marks at most max instructions. */
static void flip_each_byte(size_t start, size_t len, size_t max)
{
	uint8_t *bytes = malloc(prog.size);

	assert_non_null(bytes);
	memcpy(bytes, prog.bytes, prog.size);
	for (size_t i = start; i < start + len; i++) {
		static const uint8_t flips[] = { 0xff, 0x80 };

		for (size_t f = 0; f < sizeof(flips); f++) {
			struct races_code code;

			bytes[i] ^= flips[f];
			assert_true(read_copy(bytes, &code) <= max);
			free(code.insns);
			bytes[i] = prog.bytes[i];
		}
	}
	free(bytes);
}

/*
 * A flipped entry may name other code, but the list keeps its length; a flipped header may make
 * the section longer, up to the end of the file.
 */
static void damaged_sections_are_read_or_left(void **state)
{
	size_t listed = prog.atomics.size / 4, all = prog.text_end - prog.text_start;

	(void)state;
	flip_each_byte(prog.atomics.data, prog.atomics.size, listed);
	flip_each_byte(prog.covered.data, prog.covered.size, listed);
	flip_each_byte(prog.atomics.header, prog.atomics.header_size, all);
	flip_each_byte(prog.covered.header, prog.covered.header_size, listed);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(the_list_is_read_whole),
		cmocka_unit_test(damaged_sections_are_read_or_left),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
