// SPDX-License-Identifier: MIT
/*
 * Probe sites from ELF files, with libelf.
 *
 * __lk_probe_sites holds one entry per copy of a site's code: the offset, from the entry, of a
 * slot holding the address of the site's struct lk_probe_site in .data (several entries may lead
 * to one descriptor); the descriptor holds pointers to its strings in .rodata. In a non-PIE executable those pointers are
 * stored as the linker resolved them. In a PIE executable or a shared object each has a dynamic
 * relocation: R_X86_64_RELATIVE (R_AARCH64_RELATIVE) whose addend is the address at load base 0,
 * which the file itself may store as 0; or, with -z pack-relative-relocs, a DT_RELR entry, which
 * keeps the address in the file. So: a pointer is the addend of a RELATIVE (or absolute)
 * relocation at its address when there is one, and what is stored there otherwise.
 *
 * The files of a running process are named by that process (its /proc/PID/maps), which may be
 * another user's, hostile to a root lowkey: they are opened through /proc/PID/map_files (the very
 * file mapped, whatever is at its name now) where this user may, and every file is opened only if
 * it is a regular file -- looked at through an O_PATH descriptor first, so no FIFO or device is
 * ever opened -- of bounded size.
 *
 * Their owner may also cut or rewrite them while lowkey reads: a mapped file kills its reader with
 * SIGBUS at a page past its new end. So nothing is mapped: libelf reads with pread (ELF_C_READ),
 * only the sections asked for, and a file whose size or change time differs after the reading
 * from before it is reported as changed, whatever was read.
 */
#include <errno.h>
#include <fcntl.h>
#ifdef LK_HAVE_LIBELF
#include <gelf.h>
#include <libelf.h>
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lowkey/probe.h>

#include "internal/failf.h"
#include "internal/proc.h"
#include "internal/utf8.h"
#include "internal/site_names.h"
#include "probe_elf.h"
#include "proc_files.h"

#define MAX_FILE ((off_t)4 << 30) /* larger than any program or library lowkey reads */

#ifdef LK_HAVE_LIBELF
#define MAX_RELOCS (1u << 24)

struct reloc {
	uint64_t at;
	uint64_t value;
};

/* An allocated section, read when first looked into. */
struct region {
	uint64_t addr, size;
	Elf_Scn *scn;	     /* NULL for SHT_NOBITS (reads as zeros) */
	const uint8_t *data; /* once read */
	bool unreadable;
};

struct image {
	Elf *elf;
	GElf_Ehdr eh;
	struct stat before; /* the file when opened */
	uint64_t budget;    /* bytes of sections still to be read: the file's size at most */
	struct region *regions;
	size_t nregions;
	struct reloc *relocs;
	size_t nrelocs;
};

/* The region's bytes, read now if not yet; NULL if it cannot be read (or is NOBITS). */
static const uint8_t *region_data(struct image *im, struct region *r)
{
	Elf_Data *d;

	if (r->data || r->unreadable || !r->scn)
		return r->data;
	d = r->size <= im->budget ? elf_rawdata(r->scn, NULL) : NULL;
	if (!d || !d->d_buf || d->d_size < r->size) {
		r->unreadable = true;
		return NULL;
	}
	im->budget -= r->size;
	return r->data = d->d_buf;
}

static struct region *region_at(struct image *im, uint64_t addr, uint64_t len)
{
	for (size_t i = 0; i < im->nregions; i++) {
		struct region *r = &im->regions[i];

		if (addr >= r->addr && addr - r->addr <= r->size &&
		    len <= r->size - (addr - r->addr) && (!r->scn || region_data(im, r)))
			return r;
	}
	return NULL;
}

static bool read_bytes(struct image *im, uint64_t addr, void *out, size_t len)
{
	const struct region *r = region_at(im, addr, len);

	if (!r)
		return false;
	if (r->data)
		memcpy(out, r->data + (addr - r->addr), len);
	else
		memset(out, 0, len);
	return true;
}

static int reloc_cmp(const void *a, const void *b)
{
	const struct reloc *x = a, *y = b;

	return x->at < y->at ? -1 : x->at > y->at;
}

static bool read_pointer(struct image *im, uint64_t addr, uint64_t *out)
{
	struct reloc key = { .at = addr }, *r;

	if (!read_bytes(im, addr, out, 8))
		return false;
	r = im->nrelocs ? bsearch(&key, im->relocs, im->nrelocs, sizeof(key), reloc_cmp) : NULL;
	if (r)
		*out = r->value;
	return true;
}

/* A copy of the NUL-terminated string at addr, or NULL if it runs out of its section. */
static char *read_string(struct image *im, uint64_t addr)
{
	const struct region *r = region_at(im, addr, 1);
	size_t room;
	const char *s;

	if (!addr)
		return strdup("");
	if (!r || !r->data)
		return NULL;
	s = (const char *)r->data + (addr - r->addr);
	room = r->size - (addr - r->addr);
	if (!memchr(s, 0, room))
		return NULL;
	return strdup(s);
}

/* ---- loading ---- */

static bool relative_type(const GElf_Ehdr *eh, unsigned int type)
{
	return (eh->e_machine == EM_X86_64 && type == R_X86_64_RELATIVE) ||
	       (eh->e_machine == EM_AARCH64 && type == R_AARCH64_RELATIVE) ||
	       (eh->e_machine == EM_RISCV && type == R_RISCV_RELATIVE);
}

static bool absolute_type(const GElf_Ehdr *eh, unsigned int type)
{
	return (eh->e_machine == EM_X86_64 && type == R_X86_64_64) ||
	       (eh->e_machine == EM_AARCH64 && type == R_AARCH64_ABS64) ||
	       (eh->e_machine == EM_RISCV && type == R_RISCV_64);
}

static int add_reloc(struct image *im, size_t *cap, uint64_t at, uint64_t value)
{
	if (im->nrelocs == MAX_RELOCS)
		return -EFBIG;
	if (im->nrelocs == *cap) {
		size_t n = *cap ? *cap * 2 : 256;
		struct reloc *grown = realloc(im->relocs, n * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		im->relocs = grown;
		*cap = n;
	}
	im->relocs[im->nrelocs++] = (struct reloc){ at, value };
	return 0;
}

/* The value of symbol index sym of the symbol table in section link; false when undefined. */
static bool symbol_value(struct image *im, size_t link, size_t sym, uint64_t *out)
{
	Elf_Scn *scn = elf_getscn(im->elf, link);
	Elf_Data *d = scn ? elf_getdata(scn, NULL) : NULL;
	GElf_Sym s;

	if (!d || !gelf_getsym(d, (int)sym, &s) || s.st_shndx == SHN_UNDEF)
		return false;
	*out = s.st_value;
	return true;
}

/* The dynamic relocations (allocated SHT_RELA sections) that give pointers their values. */
static int load_relocs(struct image *im, Elf_Scn *scn, const GElf_Shdr *sh)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	size_t cap = im->nrelocs, n = sh->sh_entsize ? sh->sh_size / sh->sh_entsize : 0;
	int rc = 0;

	for (size_t i = 0; d && i < n; i++) {
		GElf_Rela r;
		unsigned int type;
		uint64_t v;

		if (!gelf_getrela(d, (int)i, &r))
			break;
		type = (unsigned int)GELF_R_TYPE(r.r_info);
		if (relative_type(&im->eh, type))
			rc = add_reloc(im, &cap, r.r_offset, (uint64_t)r.r_addend);
		else if (absolute_type(&im->eh, type) &&
			 symbol_value(im, sh->sh_link, GELF_R_SYM(r.r_info), &v))
			rc = add_reloc(im, &cap, r.r_offset, v + (uint64_t)r.r_addend);
		if (rc)
			return rc;
	}
	return 0;
}

static int add_region(struct image *im, size_t *cap, Elf_Scn *scn, const GElf_Shdr *sh)
{
	if (im->nregions == *cap) {
		size_t n = *cap ? *cap * 2 : 32;
		struct region *grown = realloc(im->regions, n * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		im->regions = grown;
		*cap = n;
	}
	im->regions[im->nregions++] = (struct region){ sh->sh_addr, sh->sh_size,
						       sh->sh_type == SHT_NOBITS ? NULL : scn, NULL,
						       false };
	return 0;
}

static const char *object_type(Elf *elf, const GElf_Ehdr *eh)
{
	size_t nph = 0;

	if (eh->e_type == ET_EXEC)
		return "executable";
	elf_getphdrnum(elf, &nph);
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_INTERP)
			return "PIE executable";
	}
	return "shared object";
}

#endif /* LK_HAVE_LIBELF */

int open_regular_at(int pfd, const char *path, char *err, size_t errlen)
{
	char self[64];
	struct stat st;
	int rc;

	snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
	if (fstat(pfd, &st) != 0)
		rc = lk__failf(err, errlen, -errno, "cannot inspect %s: %s", path, strerror(errno));
	else if (!S_ISREG(st.st_mode))
		rc = lk__failf(err, errlen, -EINVAL,
			       "%s is not a regular file (a FIFO, a device or a directory): "
			       "not a program or library",
			       path);
	else if (st.st_size > MAX_FILE)
		rc = lk__failf(err, errlen, -EFBIG,
			       "%s is %lld bytes: larger than any program or library lowkey "
			       "reads (4 GiB)",
			       path, (long long)st.st_size);
	else if ((rc = open(self, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)) < 0)
		rc = lk__failf(err, errlen, -errno, "cannot open %s: %s", path, strerror(errno));
	return rc;
}

/*
 * Open path for reading if it is a regular file of at most MAX_FILE bytes: looked at through an
 * O_PATH descriptor first, so a FIFO or a device is never opened (nothing blocks, no driver runs),
 * then reopened through that descriptor -- the same file, whatever is at path by then.
 */
int open_regular_file(const char *path, char *err, size_t errlen)
{
	int rc, pfd = open(path, O_PATH | O_CLOEXEC);

	if (pfd < 0)
		return lk__failf(err, errlen, -errno, "cannot open %s: %s", path, strerror(errno));
	rc = open_regular_at(pfd, path, err, errlen);
	close(pfd);
	return rc;
}

#ifdef LK_HAVE_LIBELF
/* Whether the file is not as it was when opened (cut, grown, written to, replaced in place). */
static bool image_changed(int fd, const struct image *im)
{
	const struct stat *a = &im->before;
	struct stat b;

	return fstat(fd, &b) != 0 || b.st_size != a->st_size || b.st_ino != a->st_ino ||
	       b.st_mtim.tv_sec != a->st_mtim.tv_sec || b.st_mtim.tv_nsec != a->st_mtim.tv_nsec ||
	       b.st_ctim.tv_sec != a->st_ctim.tv_sec || b.st_ctim.tv_nsec != a->st_ctim.tv_nsec;
}

/* rc, or -EAGAIN with a message that says so where the file changed while being read. */
static int unless_changed(int rc, int fd, const struct image *im, const char *path, char *err,
			  size_t errlen)
{
	if (fd >= 0 && image_changed(fd, im))
		return lk__failf(err, errlen, -EAGAIN,
				 "%s changed while being read (something is "
				 "writing it): try again",
				 path);
	return rc;
}

static int check_image(const char *path, struct image *im, char *err, size_t errlen)
{
	if (!im->elf || elf_kind(im->elf) != ELF_K_ELF || !gelf_getehdr(im->elf, &im->eh))
		return lk__failf(err, errlen, -ENOEXEC, "%s is not an ELF program or library",
				 path);
	if (im->eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    (im->eh.e_machine != EM_X86_64 && im->eh.e_machine != EM_AARCH64 &&
	     im->eh.e_machine != EM_RISCV))
		return lk__failf(err, errlen, -ENOEXEC,
				 "%s is not a 64-bit x86-64, arm64 or riscv64 object", path);
	if (im->eh.e_type == ET_REL)
		return lk__failf(
			err, errlen, -ENOEXEC,
			"%s is an object file: list the program or library it is linked into",
			path);
	if (im->eh.e_type != ET_EXEC && im->eh.e_type != ET_DYN)
		return lk__failf(err, errlen, -ENOEXEC,
				 "%s is not an executable or a shared object", path);
	return 0;
}

/* The file at path, or the one open at from (>= 0: duplicated, path names it in messages). */
static int open_image(const char *path, int from, int *fd, struct image *im, char *err,
		      size_t errlen)
{
	memset(im, 0, sizeof(*im));
	elf_version(EV_CURRENT);
	*fd = from >= 0 ? fcntl(from, F_DUPFD_CLOEXEC, 0) : open_regular_file(path, err, errlen);
	if (*fd < 0 && from >= 0)
		return lk__failf(err, errlen, -errno, "cannot read %s: %s", path, strerror(errno));
	if (*fd < 0)
		return *fd;
	if (fstat(*fd, &im->before) != 0)
		return lk__failf(err, errlen, -errno, "cannot inspect %s: %s", path,
				 strerror(errno));
	im->budget = (uint64_t)im->before.st_size;
	im->elf = elf_begin(*fd, ELF_C_READ, NULL);
	return unless_changed(check_image(path, im, err, errlen), *fd, im, path, err, errlen);
}

static void close_image(int fd, struct image *im)
{
	if (im->elf)
		elf_end(im->elf);
	free(im->regions);
	free(im->relocs);
	if (fd >= 0)
		close(fd);
}

/* Regions and relocations; the site section's header in *sites (sh_type 0 when there is none). */
static int index_image(struct image *im, GElf_Shdr *sites)
{
	size_t shstrndx, cap = 0;
	Elf_Scn *scn = NULL;
	int rc = 0;

	memset(sites, 0, sizeof(*sites));
	if (elf_getshdrstrndx(im->elf, &shstrndx) != 0)
		return -ENOEXEC;
	while (!rc && (scn = elf_nextscn(im->elf, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh))
			continue;
		name = elf_strptr(im->elf, shstrndx, sh.sh_name);
		if (name && strcmp(name, "__lk_probe_sites") == 0)
			*sites = sh;
		if ((sh.sh_flags & SHF_ALLOC) && sh.sh_type == SHT_RELA)
			rc = load_relocs(im, scn, &sh);
		else if ((sh.sh_flags & SHF_ALLOC) && sh.sh_size)
			rc = add_region(im, &cap, scn, &sh);
	}
	if (!rc && im->nrelocs)
		qsort(im->relocs, im->nrelocs, sizeof(*im->relocs), reloc_cmp);
	return rc;
}

/* ---- sites ---- */

/*
 * Where the file holds the len bytes at addr (as linked): the offset in the file of a PT_LOAD
 * segment's bytes, or PROBE_ELF_NOWHERE (not in a segment's file part: .bss, or no such address).
 */
static uint64_t file_offset(struct image *im, uint64_t addr, uint64_t len)
{
	size_t nph = 0;

	if (elf_getphdrnum(im->elf, &nph) != 0)
		return PROBE_ELF_NOWHERE;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(im->elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (addr >= ph.p_vaddr && addr - ph.p_vaddr <= ph.p_filesz &&
		    len <= ph.p_filesz - (addr - ph.p_vaddr))
			return ph.p_offset + (addr - ph.p_vaddr);
	}
	return PROBE_ELF_NOWHERE;
}

static int read_site(struct image *im, uint64_t addr, struct probe_elf_site *out)
{
	struct lk_probe_site raw;
	uint64_t provider, event, file, names, function;
	char *written, *fn;

	if (!read_bytes(im, addr, &raw, sizeof(raw)))
		return -EINVAL;
	if (raw.magic != LK__PROBE_MAGIC || raw.abi != LK__PROBE_ABI ||
	    raw.nargs > LK_PROBE_MAX_ARGS || raw.kind < LK_PROBE_EVENT ||
	    raw.kind > LK_PROBE_COUNTER)
		return -EINVAL;
	if (!read_pointer(im, addr + offsetof(struct lk_probe_site, provider), &provider) ||
	    !read_pointer(im, addr + offsetof(struct lk_probe_site, event), &event) ||
	    !read_pointer(im, addr + offsetof(struct lk_probe_site, file), &file) ||
	    !read_pointer(im, addr + offsetof(struct lk_probe_site, arg_names), &names))
		return -EINVAL;
	written = read_string(im, names);
	fn = read_pointer(im, addr + offsetof(struct lk_probe_site, function), &function) ?
		     read_string(im, function) :
		     NULL;
	*out = (struct probe_elf_site){ read_string(im, provider),
					read_string(im, event),
					read_string(im, file),
					written ? lk__site_arg_names(written) : NULL,
					fn ? fn : strdup(""),
					raw.line,
					raw.kind,
					raw.nargs,
					lk__site_public_types(raw.arg_types, raw.nargs),
					raw.arg_types,
					addr,
					file_offset(im, addr, sizeof(raw)),
					NULL,
					0 };
	free(written);
	if (!out->provider || !out->event || !out->file || !out->arg_names || !out->function ||
	    !*out->provider || !*out->event) {
		free(out->provider), free(out->event), free(out->file), free(out->arg_names),
			free(out->function);
		return -EINVAL;
	}
	return 0;
}

static int addr_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* ---- USDT probes of other providers ---- */

#define SDT_NOTE_TYPE 3
#define SDT_MAX_PROBES 65536 /* more notes than any object has: the rest are not read */

/* The section named name (its header in *sh), or NULL. */
static Elf_Scn *section_named(struct image *im, const char *name, GElf_Shdr *sh)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(im->elf, &shstrndx) != 0)
		return NULL;
	while ((scn = elf_nextscn(im->elf, scn))) {
		const char *n;

		if (gelf_getshdr(scn, sh) && (n = elf_strptr(im->elf, shstrndx, sh->sh_name)) &&
		    strcmp(n, name) == 0)
			return scn;
	}
	return NULL;
}

/* A section's bytes, counted against what the image may read; NULL if none or too many. */
static Elf_Data *section_data(struct image *im, Elf_Scn *scn, const GElf_Shdr *sh)
{
	Elf_Data *d;

	if (sh->sh_type == SHT_NOBITS || sh->sh_size > im->budget)
		return NULL;
	d = elf_rawdata(scn, NULL);
	if (!d || !d->d_buf || d->d_size < sh->sh_size)
		return NULL;
	im->budget -= sh->sh_size;
	return d;
}

/*
 * The semaphores of lowkey's sites, sorted: each __lk_probe_sdt entry holds, 8 bytes in, the
 * offset from that field of the semaphore the site's note names. *n 0 when there is none.
 */
static int lowkey_semaphores(struct image *im, uint64_t **sems, size_t *n)
{
	GElf_Shdr sh;
	size_t entries;

	*sems = NULL;
	*n = 0;
	if (!section_named(im, "__lk_probe_sdt", &sh) || sh.sh_size > im->budget)
		return 0;
	entries = sh.sh_size / 16;
	*sems = calloc(entries ? entries : 1, sizeof(**sems));
	if (!*sems)
		return -ENOMEM;
	for (size_t i = 0; i < entries; i++) {
		uint64_t field = sh.sh_addr + 16 * i + 8;
		int64_t offset;

		if (read_bytes(im, field, &offset, sizeof(offset)))
			(*sems)[(*n)++] = field + (uint64_t)offset;
	}
	qsort(*sems, *n, sizeof(**sems), addr_cmp);
	return 0;
}

/* The note's three strings, each within the descriptor's end; false if one runs past it. */
static bool note_strings(const char *p, const char *end, const char **provider, const char **name,
			 const char **args)
{
	const char **out[3] = { provider, name, args };

	for (int i = 0; i < 3; i++) {
		const char *nul = p < end ? memchr(p, 0, (size_t)(end - p)) : NULL;

		if (!nul)
			return false;
		*out[i] = p;
		p = nul + 1;
	}
	return true;
}

static int add_usdt(struct probe_elf_sites *out, size_t *cap, const struct probe_elf_usdt *u)
{
	struct probe_elf_usdt *v;

	if (out->nusdt == *cap) {
		size_t grown = *cap ? *cap * 2 : 16;

		v = realloc(out->usdt, grown * sizeof(*v));
		if (!v)
			return -ENOMEM;
		out->usdt = v;
		*cap = grown;
	}
	v = &out->usdt[out->nusdt];
	*v = *u;
	v->provider = strdup(u->provider);
	v->name = strdup(u->name);
	v->args = strdup(u->args);
	if (!v->provider || !v->name || !v->args) {
		free(v->provider), free(v->name), free(v->args);
		return -ENOMEM;
	}
	out->nusdt++;
	return 0;
}

/*
 * One SDT note (desc: the probe point, .stapsdt.base as linked, the semaphore, then provider,
 * name and arguments), kept unless its semaphore is a lowkey site's. base_shift: where
 * .stapsdt.base is now less where the note says (prelink moves objects).
 */
static int take_note(struct probe_elf_sites *out, size_t *cap, const uint8_t *desc, size_t len,
		     uint64_t base_shift, const uint64_t *sems, size_t nsems)
{
	struct probe_elf_usdt u;
	const char *provider, *name, *args;
	uint64_t addr[3];

	if (len < sizeof(addr) || !note_strings((const char *)desc + sizeof(addr),
						(const char *)desc + len, &provider, &name, &args))
		return 0; /* not a note of this layout: not a probe */
	memcpy(addr, desc, sizeof(addr));
	if (addr[2])
		addr[2] += base_shift;
	if (addr[2] && nsems && bsearch(&addr[2], sems, nsems, sizeof(*sems), addr_cmp))
		return 0; /* a lowkey site's */
	u = (struct probe_elf_usdt){ (char *)provider, (char *)name, (char *)args,
				     addr[0] + base_shift, addr[2] != 0 };
	return add_usdt(out, cap, &u);
}

/* The object's USDT probes that are not lowkey's sites, into out->usdt. 0 or -ENOMEM. */
static int read_foreign_usdt(struct image *im, struct probe_elf_sites *out)
{
	GElf_Shdr sh, base_sh;
	GElf_Nhdr nh;
	size_t at = 0, name_at, desc_at, nsems, cap = 0;
	uint64_t *sems, base_shift = 0;
	Elf_Scn *scn = section_named(im, ".note.stapsdt", &sh);
	Elf_Data *d = scn && sh.sh_type == SHT_NOTE ? section_data(im, scn, &sh) : NULL;
	bool have_base = section_named(im, ".stapsdt.base", &base_sh) != NULL;
	int rc;

	if (!d)
		return 0;
	rc = lowkey_semaphores(im, &sems, &nsems);
	while (!rc && out->nusdt < SDT_MAX_PROBES &&
	       (at = gelf_getnote(d, at, &nh, &name_at, &desc_at)) != 0) {
		const uint8_t *desc = (const uint8_t *)d->d_buf + desc_at;
		uint64_t linked_base;

		if (nh.n_type != SDT_NOTE_TYPE || nh.n_namesz != sizeof("stapsdt") ||
		    memcmp((const char *)d->d_buf + name_at, "stapsdt", sizeof("stapsdt")) != 0)
			continue;
		if (have_base && nh.n_descsz >= 16) {
			memcpy(&linked_base, desc + 8, sizeof(linked_base));
			base_shift = base_sh.sh_addr - linked_base;
		}
		rc = take_note(out, &cap, desc, nh.n_descsz, base_shift, sems, nsems);
	}
	free(sems);
	return rc;
}

static int site_addr_cmp(const void *key, const void *site)
{
	uint64_t x = *(const uint64_t *)key, y = ((const struct probe_elf_site *)site)->addr;

	return (x > y) - (x < y);
}

static int add_semaphore(struct probe_elf_site *s, uint64_t at)
{
	uint64_t *grown;

	if (s->nsemaphores && (s->nsemaphores & (s->nsemaphores - 1)) == 0) {
		grown = realloc(s->semaphores, 2 * s->nsemaphores * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		s->semaphores = grown;
	} else if (!s->nsemaphores && !(s->semaphores = malloc(sizeof(*s->semaphores)))) {
		return -ENOMEM;
	}
	s->semaphores[s->nsemaphores++] = at;
	return 0;
}

/*
 * Each site's semaphores, from __lk_probe_sdt: an entry per note, the offset from its first field
 * of a slot holding the site's address, then the offset from its second of the semaphore. The
 * sites are sorted by address. 0 or -ENOMEM.
 */
static int read_site_semaphores(struct image *im, struct probe_elf_sites *out)
{
	GElf_Shdr sh;
	size_t entries;
	int rc = 0;

	if (!out->n || !section_named(im, "__lk_probe_sdt", &sh) ||
	    sh.sh_size > (uint64_t)im->before.st_size)
		return 0; /* a damaged size, larger than the file: not tried entry by entry */
	entries = sh.sh_size / 16;
	for (size_t i = 0; i < entries && !rc; i++) {
		uint64_t field = sh.sh_addr + 16 * i, site, at;
		int64_t slot, semaphore;
		struct probe_elf_site *s;

		if (!read_bytes(im, field, &slot, sizeof(slot)) ||
		    !read_bytes(im, field + 8, &semaphore, sizeof(semaphore)) ||
		    !read_pointer(im, field + (uint64_t)slot, &site))
			continue;
		s = bsearch(&site, out->sites, out->n, sizeof(*s), site_addr_cmp);
		at = file_offset(im, field + 8 + (uint64_t)semaphore, 2);
		if (s && at != PROBE_ELF_NOWHERE)
			rc = add_semaphore(s, at);
	}
	return rc;
}

static int read_sites(const char *path, int from, struct probe_elf_sites *out, char *err,
		      size_t errlen)
{
	struct image im;
	GElf_Shdr sh;
	uint64_t *seen = NULL;
	size_t slots, nseen = 0;
	int fd, rc;

	memset(out, 0, sizeof(*out));
	rc = open_image(path, from, &fd, &im, err, errlen);
	if (!rc && (rc = index_image(&im, &sh)) != 0)
		rc = unless_changed(lk__failf(err, errlen, rc,
					      rc == -EFBIG ?
						      "%s has more relocations than lowkey reads" :
						      "cannot read the sections of %s",
					      path),
				    fd, &im, path, err, errlen);
	else if (!rc && sh.sh_size > (uint64_t)im.before.st_size) /* a slot per 8 bytes: bounded */
		rc = unless_changed(lk__failf(err, errlen, -ENOEXEC,
					      "the probe site section of %s is larger "
					      "than the file",
					      path),
				    fd, &im, path, err, errlen);
	if (rc) {
		close_image(fd, &im);
		return rc;
	}
	out->path = strdup(path);
	out->type = object_type(im.elf, &im.eh);
	out->has_section = sh.sh_type != SHT_NULL;
	slots = out->has_section ? sh.sh_size / 8 : 0;
	out->sites = calloc(slots ? slots : 1, sizeof(*out->sites));
	seen = calloc(slots ? slots : 1, sizeof(*seen));
	if (!out->path || !out->sites || !seen) {
		free(seen);
		close_image(fd, &im);
		probe_elf_free_sites(out);
		return lk__failf(err, errlen, -ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < slots; i++) {
		uint64_t entry = sh.sh_addr + 8 * i;
		int64_t offset;

		if (read_bytes(&im, entry, &offset, sizeof(offset)) &&
		    read_pointer(&im, entry + (uint64_t)offset, &seen[nseen]))
			nseen++;
		else
			out->skipped++;
	}
	/* Several copies of a site's code lead to one descriptor: list it once. */
	qsort(seen, nseen, sizeof(*seen), addr_cmp);
	for (size_t i = 0; i < nseen; i++) {
		if (i > 0 && seen[i] == seen[i - 1])
			continue;
		if (read_site(&im, seen[i], &out->sites[out->n]) == 0)
			out->n++;
		else
			out->skipped++;
	}
	free(seen);
	rc = read_site_semaphores(&im, out);
	if (!rc)
		rc = read_foreign_usdt(&im, out);
	if (rc)
		rc = lk__failf(err, errlen, rc, "out of memory");
	rc = unless_changed(rc, fd, &im, path, err, errlen);
	close_image(fd, &im);
	if (rc)
		probe_elf_free_sites(out);
	return rc;
}

void probe_elf_free_sites(struct probe_elf_sites *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->sites[i].provider), free(s->sites[i].event);
		free(s->sites[i].file), free(s->sites[i].arg_names), free(s->sites[i].function);
		free(s->sites[i].semaphores);
	}
	free(s->sites);
	for (size_t i = 0; i < s->nusdt; i++)
		free(s->usdt[i].provider), free(s->usdt[i].name), free(s->usdt[i].args);
	free(s->usdt);
	free(s->path);
	memset(s, 0, sizeof(*s));
}

/* ---- does it use lowkey? ---- */

static bool needs_lowkey(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	size_t n = sh->sh_entsize ? sh->sh_size / sh->sh_entsize : 0;

	for (size_t i = 0; d && i < n; i++) {
		GElf_Dyn dyn;
		const char *name;

		if (!gelf_getdyn(d, (int)i, &dyn))
			break;
		name = dyn.d_tag == DT_NEEDED ? elf_strptr(elf, sh->sh_link, dyn.d_un.d_val) : NULL;
		if (name && strncmp(name, "liblowkey.so", 12) == 0)
			return true;
	}
	return false;
}

static bool has_lowkey_symbol(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	size_t n = sh->sh_entsize ? sh->sh_size / sh->sh_entsize : 0;

	for (size_t i = 0; d && i < n; i++) {
		GElf_Sym s;
		const char *name;

		if (!gelf_getsym(d, (int)i, &s))
			break;
		name = elf_strptr(elf, sh->sh_link, s.st_name);
		if (name && (strcmp(name, "lk_trace_start") == 0 ||
			     strcmp(name, "lk__probe_emit_slow") == 0))
			return true;
	}
	return false;
}

static bool uses_lowkey(const char *path, int from)
{
	char err[256];
	struct image im;
	size_t shstrndx;
	Elf_Scn *scn = NULL;
	bool uses = false;
	int fd;

	if (open_image(path, from, &fd, &im, err, sizeof(err)) != 0 ||
	    elf_getshdrstrndx(im.elf, &shstrndx) != 0) {
		close_image(fd, &im);
		return false;
	}
	while (!uses && (scn = elf_nextscn(im.elf, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh))
			continue;
		name = elf_strptr(im.elf, shstrndx, sh.sh_name);
		uses = (name && strcmp(name, "__lk_probe_sites") == 0) ||
		       (sh.sh_type == SHT_DYNAMIC && needs_lowkey(im.elf, scn, &sh)) ||
		       ((sh.sh_type == SHT_SYMTAB || sh.sh_type == SHT_DYNSYM) &&
			has_lowkey_symbol(im.elf, scn, &sh));
	}
	uses = uses && !image_changed(fd, &im); /* then it cannot be told */
	close_image(fd, &im);
	return uses;
}

int probe_elf_read_sites(const char *path, struct probe_elf_sites *out, char *err, size_t errlen)
{
	return read_sites(path, -1, out, err, errlen);
}

int probe_elf_read_sites_fd(int fd, const char *name, struct probe_elf_sites *out, char *err,
			    size_t errlen)
{
	return read_sites(name, fd, out, err, errlen);
}

bool probe_elf_uses_lowkey(const char *path)
{
	return uses_lowkey(path, -1);
}

bool probe_elf_uses_lowkey_fd(int fd, const char *name)
{
	return uses_lowkey(name, fd);
}
#else /* !LK_HAVE_LIBELF: built where the target has no libelf (tools/lowkey/CMakeLists.txt) */
int probe_elf_read_sites(const char *path, struct probe_elf_sites *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	return lk__failf(err, errlen, -ENOTSUP,
			 "cannot read %s: this lowkey was built without libelf", path);
}

int probe_elf_read_sites_fd(int fd, const char *name, struct probe_elf_sites *out, char *err,
			    size_t errlen)
{
	(void)fd;
	return probe_elf_read_sites(name, out, err, errlen);
}

void probe_elf_free_sites(struct probe_elf_sites *s)
{
	memset(s, 0, sizeof(*s));
}

bool probe_elf_uses_lowkey(const char *path)
{
	(void)path;
	return false;
}

bool probe_elf_uses_lowkey_fd(int fd, const char *name)
{
	(void)fd, (void)name;
	return false;
}
#endif

/* ---- processes ---- */

/* The file of mapping m, as process v sees it (proc_view_open_mapped); -errno, said once. */
static int object_fd(const struct proc_view *v, const struct proc_mapping *m)
{
	char err[4400], shown[4400];
	int fd = proc_view_open_mapped(v, m, err, sizeof(err));

	if (fd == -ESTALE) /* another build at that name: the user must know why it is missing */
		fprintf(stderr, "lowkey: %s\n", lk__text_escape(err, shown, sizeof(shown)));
	return fd;
}

int proc_objects(pid_t pid, int *fds, char **shown, int max)
{
	char file[64], line[8192], exe[4096];
	struct proc_mapping *m = malloc(sizeof(*m));
	struct proc_view v;
	int n = 0;
	ssize_t len;
	FILE *f;

	snprintf(file, sizeof(file), "/proc/%d/exe", (int)pid);
	len = readlink(file, exe, sizeof(exe) - 1);
	exe[len > 0 ? len : 0] = 0;
	snprintf(file, sizeof(file), "/proc/%d/maps", (int)pid);
	f = m ? fopen(file, "re") : NULL;
	if (!f) {
		n = !m ? -ENOMEM : errno == ENOENT ? -ESRCH : -errno;
		free(m);
		return n;
	}
	if (proc_view_open(pid, &v) != 0)
		v.root = -1;
	/* the main program first, then every other file mapped, once */
	for (int pass = 0; pass < 2; pass++) {
		rewind(f);
		while (n < max && fgets(line, sizeof(line), f)) {
			bool seen = false;

			if (!proc_mapping_parse(line, m) ||
			    m->offset || /* not where its header is */
			    (pass == 0) != (strcmp(m->name, exe) == 0))
				continue;
			for (int i = 0; i < n && !seen; i++)
				seen = strcmp(shown[i], m->name) == 0;
			if (seen)
				continue;
			shown[n] = strdup(m->name);
			if (!shown[n])
				break;
			fds[n++] = object_fd(&v, m);
		}
	}
	fclose(f);
	proc_view_close(&v);
	free(m);
	return n;
}

void proc_objects_free(int *fds, char **shown, int n)
{
	for (int i = 0; i < n; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
		free(shown[i]);
	}
}

int proc_uses_lowkey(pid_t pid)
{
	char *shown[512];
	int fds[512];
	int n = proc_objects(pid, fds, shown, 512), uses = 0;

	if (n < 0)
		return n;
	for (int i = 0; i < n && !uses; i++)
		uses = strstr(shown[i], "/liblowkey.so") ||
		       (fds[i] >= 0 && probe_elf_uses_lowkey_fd(fds[i], shown[i]));
	proc_objects_free(fds, shown, n);
	return uses;
}

void proc_name_of(pid_t pid, char *out, size_t len)
{
	char comm[64];

	/* a newline in the name is escaped */
	lk__text_escape(lk__proc_comm(pid, 0, comm, sizeof(comm)) > 0 ? comm : "?", out, len);
}

void site_arg_name(const char *names, unsigned int i, char *out, size_t len)
{
	const char *p = names ? names : "", *start = p;
	unsigned int arg = 0;
	int depth = 0;
	char quote = 0;

	out[0] = 0;
	for (;; p++) {
		if (quote) {
			if (*p == '\\' && p[1])
				p++;
			else if (*p == quote)
				quote = 0;
			else if (!*p)
				break;
			continue;
		}
		if (*p == '"' || *p == '\'')
			quote = *p;
		else if (*p == '(' || *p == '[' || *p == '{')
			depth++;
		else if ((*p == ')' || *p == ']' || *p == '}') && depth > 0)
			depth--;
		if (*p == 0 || (*p == ',' && depth == 0)) {
			if (arg == i) {
				const char *e = p;

				while (start < e && (*start == ' ' || *start == '\t'))
					start++;
				while (e > start && (e[-1] == ' ' || e[-1] == '\t'))
					e--;
				snprintf(out, len, "%.*s", (int)(e - start), start);
				return;
			}
			arg++;
			start = p + 1;
		}
		if (!*p)
			break;
	}
}
