// SPDX-License-Identifier: MIT
/*
 * lowkey's own threads (the trace consumer, the control service, the watchpoint delivery thread)
 * run only liblowkey's code and the C library's. liblowkey holds no static-key site and no probe
 * site -- no __lk_key_sites or __lk_probe_sites section -- so none of those threads can ever meet a
 * site being rewritten, whatever signals they block.
 */
#include <elf.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

/* The names of the file's sections, one after the other, or NULL. */
static const Elf64_Shdr *section_headers(const unsigned char *image, size_t size, size_t *n,
					 const char **names)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)image;
	const Elf64_Shdr *sh;

	if (size < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_shentsize != sizeof(*sh) ||
	    eh->e_shoff + (size_t)eh->e_shnum * sizeof(*sh) > size || eh->e_shstrndx >= eh->e_shnum)
		return NULL;
	sh = (const Elf64_Shdr *)(image + eh->e_shoff);
	if (sh[eh->e_shstrndx].sh_offset + sh[eh->e_shstrndx].sh_size > size)
		return NULL;
	*names = (const char *)image + sh[eh->e_shstrndx].sh_offset;
	*n = eh->e_shnum;
	return sh;
}

static void liblowkey_has_no_sites(void **state)
{
	const Elf64_Shdr *sh;
	const char *names;
	unsigned char *image;
	struct stat st;
	size_t n = 0;
	int fd;

	(void)state;
	fd = open(LIBLOWKEY, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	image = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	assert_true(image != MAP_FAILED);
	sh = section_headers(image, (size_t)st.st_size, &n, &names);
	assert_non_null(sh);
	assert_true(n > 10); /* a real library, with .text, .data, ... */
	for (size_t i = 0; i < n; i++) {
		const char *name = names + sh[i].sh_name;

		if (strcmp(name, "__lk_key_sites") == 0 || strcmp(name, "__lk_probe_sites") == 0)
			fail_msg("%s has a %s section: lowkey's own threads might run a site",
				 LIBLOWKEY, name);
	}
	munmap(image, (size_t)st.st_size);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(liblowkey_has_no_sites),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
