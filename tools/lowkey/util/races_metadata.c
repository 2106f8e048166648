// SPDX-License-Identifier: MIT
/*
 * Clang's sanitizer metadata (-fexperimental-sanitize-metadata=atomics,covered): the compiler
 * lists the address of every atomic instruction it emitted, plain movs included, in section
 * sanmd_atomics, and the functions it compiled so in sanmd_covered. In a covered function the
 * list is exact: an access is atomic if and only if it is listed, wherever the atomic lives
 * (a global, the heap, through a pointer), which the debug information cannot say.
 *
 * Each entry starts with the address it names, as an offset from the entry itself (signed, 4
 * bytes, or 8 with the large code model). An atomics entry is that offset alone; a covered entry
 * adds the function's size and feature bits, as two 4-byte words (Clang 16) or two ULEB128
 * numbers (later versions, and a third, the stack arguments' size, where feature bit 2 says so).
 * The version is passed at run time to the runtime's hooks, not written in the file: each layout
 * is tried in turn, and the first whose every entry names code of an executable section is
 * taken. A section no layout reads is left aside, and the debug information decides there.
 */
#include <errno.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "probe_elf.h"
#include "races.h"

#define METADATA_MAX (64u << 20) /* bytes of one section read at most */
#define EXEC_MAX 64		 /* executable sections looked at */
#define FEATURE_ATOMICS 0x1u	 /* a covered entry's feature: its atomics are listed */
#define UAR_HAS_SIZE 0x4u	 /* a covered entry's feature: the stack arguments' size follows */

struct exec_range {
	uint64_t start, end;
};

struct metadata {
	struct exec_range exec[EXEC_MAX];
	size_t nexec;
	uint64_t *atomics; /* sorted */
	size_t natomics;
	struct exec_range *covered; /* sorted by start */
	size_t ncovered;
};

/* How a section's entries are laid out. */
struct layout {
	unsigned int offset_size; /* 4 or 8 */
	bool leb;		  /* covered: ULEB128 size and features, not two 4-byte words */
};

static bool in_exec(const struct metadata *m, uint64_t start, uint64_t end)
{
	for (size_t i = 0; i < m->nexec; i++)
		if (start >= m->exec[i].start && end <= m->exec[i].end && start < end)
			return true;
	return false;
}

static bool read_offset(const uint8_t **p, const uint8_t *end, unsigned int size, int64_t *off)
{
	if ((size_t)(end - *p) < size)
		return false;
	if (size == 4) {
		int32_t v;

		memcpy(&v, *p, 4);
		*off = v;
	} else {
		memcpy(off, *p, 8);
	}
	*p += size;
	return true;
}

static bool read_word(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	uint32_t w;

	if (end - *p < 4)
		return false;
	memcpy(&w, *p, 4);
	*p += 4;
	*v = w;
	return true;
}

static bool read_uleb(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	*v = 0;
	for (unsigned int shift = 0; *p < end && shift < 64; shift += 7) {
		uint8_t b = *(*p)++;

		*v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return true;
	}
	return false;
}

/* The address an entry at vaddr names, where off says. */
static uint64_t named(uint64_t vaddr, int64_t off)
{
	return vaddr + (uint64_t)off;
}

/* Read one covered entry at *p (section at vaddr base); false where the layout does not fit. */
static bool covered_entry(const struct metadata *m, const struct layout *l, const uint8_t *data,
			  uint64_t base, const uint8_t **p, const uint8_t *end,
			  struct exec_range *fn)
{
	uint64_t at = base + (uint64_t)(*p - data), size, features, stack_args;
	int64_t off;

	if (!read_offset(p, end, l->offset_size, &off))
		return false;
	if (l->leb) {
		if (!read_uleb(p, end, &size) || !read_uleb(p, end, &features))
			return false;
		if ((features & UAR_HAS_SIZE) && !read_uleb(p, end, &stack_args))
			return false;
	} else if (!read_word(p, end, &size) || !read_word(p, end, &features)) {
		return false;
	}
	fn->start = named(at, off);
	/* A function compiled without the atomics' list is covered for other sanitizers only. */
	fn->end = (features & FEATURE_ATOMICS) ? fn->start + size : fn->start;
	return size && in_exec(m, fn->start, fn->start + size);
}

/* The covered functions in layout l, or false (nothing kept) where an entry does not fit it. */
static bool read_covered(struct metadata *m, const struct layout *l, const uint8_t *data,
			 size_t len, uint64_t base)
{
	const uint8_t *p = data, *end = data + len;
	size_t n = 0, cap = 0;
	struct exec_range *fns = NULL;

	while (p < end) {
		struct exec_range fn;

		if (!covered_entry(m, l, data, base, &p, end, &fn))
			goto bad;
		if (n == cap) {
			struct exec_range *more;

			cap = cap ? 2 * cap : 64;
			more = realloc(fns, cap * sizeof(*fns));
			if (!more)
				goto bad;
			fns = more;
		}
		fns[n++] = fn;
	}
	m->covered = fns;
	m->ncovered = n;
	return n > 0;
bad:
	free(fns);
	return false;
}

/* The atomic instructions' addresses with offsets of offset_size bytes, or false. */
static bool read_atomics(struct metadata *m, unsigned int offset_size, const uint8_t *data,
			 size_t len, uint64_t base)
{
	size_t n = len / offset_size;
	uint64_t *pcs;
	const uint8_t *p = data;

	if (!n || len % offset_size)
		return false;
	pcs = malloc(n * sizeof(*pcs));
	if (!pcs)
		return false;
	for (size_t i = 0; i < n; i++) {
		uint64_t at = base + (uint64_t)(p - data);
		int64_t off = 0;

		read_offset(&p, data + len, offset_size, &off);
		pcs[i] = named(at, off);
		if (!in_exec(m, pcs[i], pcs[i] + 1)) {
			free(pcs);
			return false;
		}
	}
	m->atomics = pcs;
	m->natomics = n;
	return true;
}

static int by_value(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int by_start(const void *a, const void *b)
{
	const struct exec_range *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static void read_section(struct metadata *m, const char *name, Elf_Scn *scn, const GElf_Shdr *sh)
{
	static const struct layout layouts[] = {
		{ 4, false }, { 4, true }, { 8, false }, { 8, true }
	};
	Elf_Data *d;

	if (sh->sh_type != SHT_PROGBITS || sh->sh_size == 0 || sh->sh_size > METADATA_MAX)
		return;
	d = elf_getdata(scn, NULL);
	if (!d || !d->d_buf || d->d_size != sh->sh_size)
		return;
	if (strcmp(name, "sanmd_atomics") == 0) {
		if (!read_atomics(m, 4, d->d_buf, d->d_size, sh->sh_addr))
			read_atomics(m, 8, d->d_buf, d->d_size, sh->sh_addr);
		if (m->atomics)
			qsort(m->atomics, m->natomics, sizeof(*m->atomics), by_value);
		return;
	}
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
		if (read_covered(m, &layouts[i], d->d_buf, d->d_size, sh->sh_addr)) {
			qsort(m->covered, m->ncovered, sizeof(*m->covered), by_start);
			return;
		}
}

/* The executable sections first (the entries are checked against them), then the metadata. */
static void read_elf(struct metadata *m, Elf *elf)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	if (elf_kind(elf) != ELF_K_ELF || elf_getshdrstrndx(elf, &shstrndx) != 0)
		return;
	while ((scn = elf_nextscn(elf, scn)) && m->nexec < EXEC_MAX)
		if (gelf_getshdr(scn, &sh) && (sh.sh_flags & SHF_EXECINSTR) &&
		    sh.sh_type == SHT_PROGBITS)
			m->exec[m->nexec++] =
				(struct exec_range){ sh.sh_addr, sh.sh_addr + sh.sh_size };
	while ((scn = elf_nextscn(elf, scn))) {
		const char *name;

		if (!gelf_getshdr(scn, &sh))
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (name && (strcmp(name, "sanmd_atomics") == 0 ||
			     (strcmp(name, "sanmd_covered") == 0 && !m->covered)))
			read_section(m, name, scn, &sh);
	}
}

static bool listed(const struct metadata *m, uint64_t pc)
{
	return m->atomics && bsearch(&pc, m->atomics, m->natomics, sizeof(pc), by_value);
}

/* For bsearch: the function (functions do not overlap) whose code holds the address. */
static int holds(const void *key, const void *range)
{
	uint64_t pc = *(const uint64_t *)key;
	const struct exec_range *r = range;

	return pc < r->start ? -1 : pc >= r->end;
}

static bool covered(const struct metadata *m, uint64_t pc)
{
	return m->covered && bsearch(&pc, m->covered, m->ncovered, sizeof(*m->covered), holds);
}

static void mark(const struct metadata *m, uint8_t object, struct races_code *code)
{
	for (size_t i = 0; i < code->n; i++) {
		struct races_insn *ri = &code->insns[i];

		if (ri->plan.object != object || ri->atomic)
			continue;
		ri->covered = covered(m, ri->plan.vaddr);
		code->covered += ri->covered;
		if (!listed(m, ri->plan.vaddr))
			continue;
		ri->atomic_kind = RACES_ATOMIC_METADATA;
		code->atomic_debug[RACES_ATOMIC_METADATA]++;
		if (ri->sampled) {
			ri->sampled = false;
			code->sampled--;
		}
	}
}

int races_mark_metadata(const char *path, uint8_t object, struct races_code *code, char *err,
			size_t errlen)
{
	struct metadata m = { 0 };
	Elf *elf;
	int fd = open_regular_file(path, err, errlen);

	if (fd < 0)
		return fd;
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (elf) {
		read_elf(&m, elf);
		elf_end(elf);
	}
	close(fd);
	/* Without the atomics' list, a covered function says nothing the debug information cannot. */
	if (!m.atomics) {
		free(m.covered);
		m.covered = NULL;
		m.ncovered = 0;
	}
	mark(&m, object, code);
	free(m.atomics);
	free(m.covered);
	return 0;
}
