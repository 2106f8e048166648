// SPDX-License-Identifier: MIT
/*
 * Whether the main program registers its own lowkey sections, read from its dynamic relocations.
 *
 * A library's constructors run before the program's: when liblowkey's constructor opens the
 * control socket, the program's sites are not registered yet, and a tracer that connects at that
 * moment would see a process without them. A program that registers refers to lk__dso_register
 * from its own code, so a relocation names that symbol; one that does not will never register.
 */
#include <link.h>
#include <stdbool.h>
#include <string.h>

#include "core/dso.h"

#if __ELF_NATIVE_CLASS == 64
#define REL_SYM(info) ELF64_R_SYM(info)
#else
#define REL_SYM(info) ELF32_R_SYM(info)
#endif

struct dynamic_tables {
	const ElfW(Sym) * symtab;
	const char *strtab;
	size_t strsz;
	const ElfW(Rela) * rela;
	size_t relasz;
	const ElfW(Rel) * rel;
	size_t relsz;
	const void *jmprel;
	size_t pltrelsz;
	bool plt_is_rela;
};

/* glibc relocates the dynamic section's addresses in place on most targets, not on RISC-V or MIPS. */
static uintptr_t dynamic_address(const struct dl_phdr_info *info, ElfW(Addr) value)
{
	return value < info->dlpi_addr ? info->dlpi_addr + value : value;
}

static void read_dynamic(const struct dl_phdr_info *info, const ElfW(Dyn) * d,
			 struct dynamic_tables *t)
{
	for (; d->d_tag != DT_NULL; d++) {
		switch (d->d_tag) {
		case DT_SYMTAB:
			t->symtab = (const void *)dynamic_address(info, d->d_un.d_ptr);
			break;
		case DT_STRTAB:
			t->strtab = (const void *)dynamic_address(info, d->d_un.d_ptr);
			break;
		case DT_STRSZ:
			t->strsz = d->d_un.d_val;
			break;
		case DT_RELA:
			t->rela = (const void *)dynamic_address(info, d->d_un.d_ptr);
			break;
		case DT_RELASZ:
			t->relasz = d->d_un.d_val;
			break;
		case DT_REL:
			t->rel = (const void *)dynamic_address(info, d->d_un.d_ptr);
			break;
		case DT_RELSZ:
			t->relsz = d->d_un.d_val;
			break;
		case DT_JMPREL:
			t->jmprel = (const void *)dynamic_address(info, d->d_un.d_ptr);
			break;
		case DT_PLTRELSZ:
			t->pltrelsz = d->d_un.d_val;
			break;
		case DT_PLTREL:
			t->plt_is_rela = d->d_un.d_val == DT_RELA;
			break;
		}
	}
}

static bool names_register(const struct dynamic_tables *t, size_t sym)
{
	static const char wanted[] = "lk__dso_register";
	size_t name;

	if (sym == 0)
		return false;
	name = t->symtab[sym].st_name;
	return t->symtab[sym].st_shndx == SHN_UNDEF && name < t->strsz &&
	       strncmp(t->strtab + name, wanted, t->strsz - name) == 0;
}

static bool rela_refers(const struct dynamic_tables *t, const ElfW(Rela) * r, size_t bytes)
{
	for (size_t i = 0; r && i < bytes / sizeof(*r); i++)
		if (names_register(t, REL_SYM(r[i].r_info)))
			return true;
	return false;
}

static bool rel_refers(const struct dynamic_tables *t, const ElfW(Rel) * r, size_t bytes)
{
	for (size_t i = 0; r && i < bytes / sizeof(*r); i++)
		if (names_register(t, REL_SYM(r[i].r_info)))
			return true;
	return false;
}

static int inspect_main_program(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct dynamic_tables t = { 0 };
	bool *refers = arg;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
			read_dynamic(info,
				     (const void *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr),
				     &t);
	if (t.symtab && t.strtab)
		*refers = rela_refers(&t, t.rela, t.relasz) || rel_refers(&t, t.rel, t.relsz) ||
			  (t.plt_is_rela ? rela_refers(&t, t.jmprel, t.pltrelsz) :
					   rel_refers(&t, t.jmprel, t.pltrelsz));
	return 1; /* the main program is always the first object */
}

bool lk__main_program_refers_to_register(void)
{
	bool refers = false;

	dl_iterate_phdr(inspect_main_program, &refers);
	return refers;
}
