// SPDX-License-Identifier: MIT
/*
 * The probe point of an LK_SPAN scope's end (a stub of the site's own) has debug information, as
 * every other probe point: a compile unit, a line and a function cover it, which perf probe looks
 * up for each probe it adds or lists ("Failed to find debug information" otherwise), and its call
 * frame information is the stub's own frame, not that of the function around it. Read from this
 * program's own file with libdw.
 */
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <gelf.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <dwarf.h>

#include <lowkey/probe.h>

volatile int lkt_sink;
void lkt_spanned(int i);

__attribute__((noinline)) void lkt_spanned(int i)
{
	LK_SPAN(lkt_stub, work);
	lkt_sink += i;
}

/* The probe point of provider:name's USDT note in elf, as linked; 0 if there is none. */
static uint64_t note_pc(Elf *elf, const char *provider, const char *name)
{
	size_t shstrndx, at = 0, name_at, desc_at;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	GElf_Nhdr nh;

	assert_int_equal(elf_getshdrstrndx(elf, &shstrndx), 0);
	while ((scn = elf_nextscn(elf, scn))) {
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE ||
		    strcmp(elf_strptr(elf, shstrndx, sh.sh_name), ".note.stapsdt") != 0)
			continue;
		d = elf_getdata(scn, NULL);
		while (d && (at = gelf_getnote(d, at, &nh, &name_at, &desc_at)) != 0) {
			const char *desc = (const char *)d->d_buf + desc_at;
			uint64_t pc;

			if (nh.n_type != 3 || nh.n_descsz < 24 + strlen(provider) + 1)
				continue;
			memcpy(&pc, desc, sizeof(pc));
			if (strcmp(desc + 24, provider) == 0 &&
			    strcmp(desc + 24 + strlen(provider) + 1, name) == 0)
				return pc;
		}
	}
	return 0;
}

/* The DWARF register that holds the stack pointer, and the CFA's offset from it at entry. */
#if defined(__x86_64__)
#define SP_REG 7
#define CFA_AT_ENTRY 8 /* the return address pushed */
#elif defined(__aarch64__)
#define SP_REG 31
#define CFA_AT_ENTRY 0
#elif defined(__riscv)
#define SP_REG 2
#define CFA_AT_ENTRY 0
#endif

static void check_frame(Elf *elf, uint64_t pc)
{
#ifdef SP_REG
	Dwarf_CFI *cfi = dwarf_getcfi_elf(elf);
	Dwarf_Frame *frame = NULL;
	Dwarf_Op *ops;
	size_t nops;

	assert_non_null(cfi);
	assert_int_equal(dwarf_cfi_addrframe(cfi, pc, &frame), 0);
	assert_int_equal(dwarf_frame_cfa(frame, &ops, &nops), 0);
	/* CFA = SP + CFA_AT_ENTRY, whatever the frame of the function the stub lies in */
	assert_int_equal(nops, 1);
	assert_int_equal(ops[0].atom, DW_OP_bregx);
	assert_int_equal(ops[0].number, SP_REG);
	assert_int_equal(ops[0].number2, CFA_AT_ENTRY);
	free(frame);
	dwarf_cfi_end(cfi);
#else
	(void)elf;
	(void)pc;
#endif
}

/*
 * The compile unit whose ranges hold pc. Not dwarf_addrdie(), which looks in .debug_aranges:
 * Clang writes none unless asked (-gdwarf-aranges), and the libdw of Debian 12 builds no table of
 * its own without it; perf probe looks at each unit's ranges as this does.
 */
static bool unit_holding(Dwarf *dw, uint64_t pc, Dwarf_Die *cu)
{
	Dwarf_Off off = 0, next;
	size_t header;

	while (dwarf_nextcu(dw, off, &next, &header, NULL, NULL, NULL) == 0) {
		if (dwarf_offdie(dw, off + header, cu) && dwarf_haspc(cu, pc) > 0)
			return true;
		off = next;
	}
	return false;
}

static void span_end_stub_has_debug_information(void **state)
{
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	Dwarf_Die cu, *scopes = NULL;
	bool in_function = false;
	Dwarf_Line *line;
	uint64_t pc;
	Dwarf *dw;
	Elf *elf;
	int line_no = 0, n;

	(void)state;
	lkt_spanned(1);
	assert_true(fd >= 0);
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	assert_non_null(elf);
	pc = note_pc(elf, "lkt_stub", "work_end");
	assert_true(pc != 0);
	assert_true(note_pc(elf, "lkt_stub", "work_begin") != 0);
	dw = dwarf_begin_elf(elf, DWARF_C_READ, NULL);
	assert_non_null(dw);

	/* the compile unit, the line and the function perf probe looks for */
	assert_true(unit_holding(dw, pc, &cu));
	line = dwarf_getsrc_die(&cu, pc);
	assert_non_null(line);
	assert_int_equal(dwarf_lineno(line, &line_no), 0);
	assert_true(line_no > 0);
	n = dwarf_getscopes(&cu, pc, &scopes);
	for (int i = 0; i < n; i++)
		in_function |= dwarf_tag(&scopes[i]) == DW_TAG_subprogram &&
			       strcmp(dwarf_diename(&scopes[i]), "lkt_spanned") == 0;
	free(scopes);
	assert_true(in_function);

	check_frame(elf, pc);
	dwarf_end(dw);
	elf_end(elf);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(span_end_stub_has_debug_information),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
