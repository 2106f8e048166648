/* SPDX-License-Identifier: MIT */
/*
 * The USDT notes of an ELF file, read by hand from its section headers (the layout of the SDT
 * note spec: https://sourceware.org/systemtap/wiki/UserSpaceProbeImplementation), and where a
 * uprobe goes for each: the file offsets of its probe point and of its semaphore.
 */
#ifndef LKT_USDT_NOTES_H
#define LKT_USDT_NOTES_H

#include <elf.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct usdt_note {
	uint64_t pc, base, semaphore; /* link-time addresses, as in the note */
	uint64_t pc_offset;	      /* in the file: where a uprobe goes */
	uint64_t semaphore_offset;    /* in the file: the uprobe's ref_ctr_offset */
	bool semaphore_in_probes;     /* in the .probes section, where perf looks */
	uint8_t first_byte;	      /* the instruction at the probe point */
	char provider[64], name[64], args[256];
};

struct usdt_file {
	struct usdt_note notes[256];
	unsigned int n;
	bool has_base;	    /* a .stapsdt.base section */
	uint64_t base_addr; /* its address */
};

static const Elf64_Shdr *usdt_section_at(const Elf64_Ehdr *eh, uint64_t addr)
{
	const Elf64_Shdr *sh = (const Elf64_Shdr *)((const char *)eh + eh->e_shoff);

	for (unsigned int i = 1; i < eh->e_shnum; i++)
		if ((sh[i].sh_flags & SHF_ALLOC) && sh[i].sh_type != SHT_NOBITS &&
		    addr >= sh[i].sh_addr && addr < sh[i].sh_addr + sh[i].sh_size)
			return &sh[i];
	return NULL;
}

static void usdt_copy(char *dst, size_t cap, const char **p, const char *end)
{
	size_t len = strnlen(*p, (size_t)(end - *p));

	snprintf(dst, cap, "%.*s", (int)len, *p);
	*p += len + 1;
}

static void usdt_take_note(struct usdt_file *f, const Elf64_Ehdr *eh, const char *desc, size_t size,
			   const Elf64_Shdr *probes)
{
	struct usdt_note *n = &f->notes[f->n];
	const char *p = desc + 24, *end = desc + size;
	const Elf64_Shdr *text;

	if (size < 27 || f->n == sizeof(f->notes) / sizeof(f->notes[0]))
		return;
	memcpy(&n->pc, desc, 8);
	memcpy(&n->base, desc + 8, 8);
	memcpy(&n->semaphore, desc + 16, 8);
	usdt_copy(n->provider, sizeof(n->provider), &p, end);
	usdt_copy(n->name, sizeof(n->name), &p, end);
	usdt_copy(n->args, sizeof(n->args), &p, end);
	/* prelink moves .stapsdt.base: the note's addresses move with it */
	if (f->has_base && n->base != f->base_addr) {
		n->pc += f->base_addr - n->base;
		if (n->semaphore)
			n->semaphore += f->base_addr - n->base;
	}
	text = usdt_section_at(eh, n->pc);
	if (text) {
		n->pc_offset = n->pc - text->sh_addr + text->sh_offset;
		n->first_byte = *((const uint8_t *)eh + n->pc_offset);
	}
	n->semaphore_in_probes = probes && n->semaphore >= probes->sh_addr &&
				 n->semaphore + 2 <= probes->sh_addr + probes->sh_size;
	if (n->semaphore_in_probes)
		n->semaphore_offset = n->semaphore - probes->sh_addr + probes->sh_offset;
	f->n++;
}

/* Read path's USDT notes into f: 0, or -1 when it cannot be read as a 64-bit ELF file. */
static int usdt_read(const char *path, struct usdt_file *f)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	const Elf64_Ehdr *eh;
	const Elf64_Shdr *sh, *probes = NULL;
	const char *names;
	struct stat st;
	void *map;

	memset(f, 0, sizeof(*f));
	if (fd < 0 || fstat(fd, &st) != 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return -1;
	eh = map;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64) {
		munmap(map, (size_t)st.st_size);
		return -1;
	}
	sh = (const Elf64_Shdr *)((const char *)map + eh->e_shoff);
	names = (const char *)map + sh[eh->e_shstrndx].sh_offset;
	for (unsigned int i = 1; i < eh->e_shnum; i++) {
		if (strcmp(names + sh[i].sh_name, ".stapsdt.base") == 0) {
			f->has_base = true;
			f->base_addr = sh[i].sh_addr;
		}
		if (strcmp(names + sh[i].sh_name, ".probes") == 0)
			probes = &sh[i];
	}
	for (unsigned int i = 1; i < eh->e_shnum; i++) {
		const char *p = (const char *)map + sh[i].sh_offset, *end = p + sh[i].sh_size;

		if (sh[i].sh_type != SHT_NOTE ||
		    strcmp(names + sh[i].sh_name, ".note.stapsdt") != 0)
			continue;
		while (p + sizeof(Elf64_Nhdr) <= end) {
			const Elf64_Nhdr *nh = (const Elf64_Nhdr *)p;
			const char *name = p + sizeof(*nh);
			const char *desc = name + ((nh->n_namesz + 3) & ~3u);

			if (desc + nh->n_descsz > end)
				break;
			if (nh->n_type == 3 && nh->n_namesz == 8 && memcmp(name, "stapsdt", 8) == 0)
				usdt_take_note(f, eh, desc, nh->n_descsz, probes);
			p = desc + ((nh->n_descsz + 3) & ~3u);
		}
	}
	munmap(map, (size_t)st.st_size);
	return 0;
}

/* The notes of provider:name, in file order: how many (up to max) into out. */
static unsigned int usdt_find(const struct usdt_file *f, const char *provider, const char *name,
			      const struct usdt_note **out, unsigned int max)
{
	unsigned int found = 0;

	for (unsigned int i = 0; i < f->n && found < max; i++)
		if (strcmp(f->notes[i].provider, provider) == 0 &&
		    strcmp(f->notes[i].name, name) == 0)
			out[found++] = &f->notes[i];
	return found;
}

#endif
