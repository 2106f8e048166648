// SPDX-License-Identifier: MIT
/*
 * lowkey locks: naming call sites. A site is a return address in the profiled process; the
 * process wrote down where each object was loaded (include/internal/lock_file.h), so the address maps to an object
 * and an offset, and elfutils' libdwfl turns that into a function and a file:line.
 *
 * libdw is opened at run time: without it (or without debug information) a site is still named by
 * its object and offset, "libfoo.so.1+0x1a2b", which addr2line or `eu-addr2line` can resolve
 * later.
 *
 * The objects may be another user's, who may cut them while lowkey reads: libdwfl is handed each
 * one opened here, read and never mapped, and looks for separate debug files only where no other
 * user can change them (dwfl_files.h).
 */
#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dwfl_files.h"
#include "dwfl_lines.h"
#include "internal/utf8.h"
#include "locks.h"

static struct {
	bool tried, ok;
	__typeof__(dwfl_begin) *begin;
	__typeof__(dwfl_end) *end;
	__typeof__(dwfl_report_begin) *report_begin;
	__typeof__(dwfl_report_module) *report_module;
	__typeof__(dwfl_module_info) *module_info;
	__typeof__(dwfl_report_end) *report_end;
	__typeof__(dwfl_addrmodule) *addrmodule;
	__typeof__(dwfl_module_addrname) *addrname;
	__typeof__(dwfl_offline_section_address) *section_address;
} dw;

static bool load_libdw(void)
{
	void *h;

	if (dw.tried)
		return dw.ok;
	dw.tried = true;
	h = dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return false;
#define SYM(field, name) dw.field = (__typeof__(dw.field))dlsym(h, name)
	SYM(begin, "dwfl_begin");
	SYM(end, "dwfl_end");
	SYM(report_begin, "dwfl_report_begin");
	SYM(report_module, "dwfl_report_module");
	SYM(module_info, "dwfl_module_info");
	SYM(report_end, "dwfl_report_end");
	SYM(addrmodule, "dwfl_addrmodule");
	SYM(addrname, "dwfl_module_addrname");
	SYM(section_address, "dwfl_offline_section_address");
#undef SYM
	dw.ok = dw.begin && dw.end && dw.report_begin && dw.report_module && dw.module_info && dw.report_end &&
		dw.addrmodule && dw.addrname && dw.section_address;
	return dw.ok;
}

/* A module's ELF, opened when it is reported, until libdwfl asks for it (find_opened). */
struct opened {
	Elf *elf;
	int fd;
	char *path;
};

struct lks_symbolizer {
	const struct lkl_module *modules;
	uint32_t nmodules;
	const char *exe;
	Dwfl *dwfl;
	Dwfl_Callbacks callbacks;
	struct opened *opened;	/* one per module */
};

static const char *module_path(const struct lks_symbolizer *s, const struct lkl_module *m)
{
	return m->path[0] ? m->path : s->exe;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

static void close_opened(struct opened *o)
{
	if (o->elf)
		elf_end(o->elf);
	if (o->fd >= 0)
		close(o->fd);
	free(o->path);
	*o = (struct opened){ NULL, -1, NULL };
}

/* Dwfl_Callbacks.find_elf: the module's ELF opened when it was reported, now libdwfl's to close. */
static int find_opened(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base, char **file_name,
		       Elf **elfp)
{
	struct opened *o = *userdata;
	int fd;

	(void)mod, (void)name, (void)base;
	if (!o || !o->elf)
		return -1;
	*elfp = o->elf;
	*file_name = o->path;
	fd = o->fd;
	*o = (struct opened){ NULL, -1, NULL };
	return fd;
}

/*
 * The addresses dwfl_report_elf(dwfl, name, path, -1, base, false) would give the object: from
 * base, or from its first segment's if its addresses are fixed (ET_EXEC), to its last segment's end.
 */
static bool elf_range(Elf *elf, uint64_t base, uint64_t *start, uint64_t *end)
{
	uint64_t vaddr = 0;
	bool found = false;
	GElf_Ehdr eh;
	GElf_Phdr ph;
	size_t n;

	if (!gelf_getehdr(elf, &eh) || (eh.e_type != ET_DYN && eh.e_type != ET_EXEC) || elf_getphdrnum(elf, &n))
		return false;
	for (size_t i = 0; i < n && !found; i++)
		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD)
			vaddr = ph.p_vaddr & -ph.p_align, found = true;
	*start = eh.e_type == ET_EXEC ? vaddr : base;
	*end = 0;
	for (size_t i = n; i-- > 0 && !*end;)
		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && ph.p_vaddr + ph.p_memsz > 0)
			*end = *start - vaddr + ph.p_vaddr + ph.p_memsz;
	return found && *end > *start;
}

static void report(struct lks_symbolizer *s, struct opened *o, const char *path, uint64_t bias)
{
	Dwfl_Module *mod = NULL;
	uint64_t start, end;
	void **slot;

	o->elf = lk_dwfl_open_elf(path, &o->fd);
	o->path = o->elf ? strdup(path) : NULL;
	if (o->path && elf_range(o->elf, bias, &start, &end))
		mod = dw.report_module(s->dwfl, base_name(path), start, end);
	if (mod && dw.module_info(mod, &slot, NULL, NULL, NULL, NULL, NULL, NULL))
		*slot = o;
	else
		close_opened(o);
}

struct lks_symbolizer *lks_symbolizer_new(const struct lkl_header *h, const struct lkl_module *modules, uint32_t n)
{
	struct lks_symbolizer *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->modules = modules;
	s->nmodules = n;
	s->exe = h->exe;
	if (!load_libdw() || !(s->opened = calloc(n ? n : 1, sizeof(*s->opened))))
		return s;
	for (uint32_t i = 0; i < n; i++)
		s->opened[i].fd = -1;
	s->callbacks.find_elf = find_opened;
	s->callbacks.find_debuginfo = lk_dwfl_find_debuginfo;
	s->callbacks.section_address = dw.section_address;
	s->dwfl = dw.begin(&s->callbacks);
	if (!s->dwfl)
		return s;
	dw.report_begin(s->dwfl);
	for (uint32_t i = 0; i < n; i++) {
		const char *path = module_path(s, &modules[i]);

		if (path[0] == '/')
			report(s, &s->opened[i], path, modules[i].bias);
	}
	dw.report_end(s->dwfl, NULL, NULL);
	return s;
}

void lks_symbolizer_free(struct lks_symbolizer *s)
{
	if (!s)
		return;
	if (s->dwfl)
		dw.end(s->dwfl);
	for (uint32_t i = 0; s->opened && i < s->nmodules; i++)
		close_opened(&s->opened[i]);
	free(s->opened);
	free(s);
}

void lks_symbolize(struct lks_symbolizer *s, uint64_t ra, struct lks_site *out)
{
	/* a return address points after the call: look up the call itself */
	uint64_t addr = ra ? ra - 1 : 0;
	const struct lkl_module *m = NULL;

	memset(out, 0, sizeof(*out));
	out->address = ra;
	if (!ra)
		return;
	for (uint32_t i = 0; i < s->nmodules; i++)
		if (addr >= s->modules[i].start && addr < s->modules[i].end)
			m = &s->modules[i];
	if (m) {
		snprintf(out->module, sizeof(out->module), "%.63s", base_name(module_path(s, m)));
		out->offset = ra - m->bias;
	}
	if (s->dwfl) {
		Dwfl_Module *mod = dw.addrmodule(s->dwfl, addr);
		const char *fn = mod ? dw.addrname(mod, addr) : NULL;
		int lineno = 0;
		const char *file = mod ? lk_dwfl_source_line(mod, addr, &lineno) : NULL;

		if (fn)
			snprintf(out->function, sizeof(out->function), "%s", fn);
		if (file) {
			snprintf(out->file, sizeof(out->file), "%s", base_name(file));
			out->line = lineno;
		}
	}
}

/* The names come from the program's files: escaped (lk__text_escape). */
const char *lks_site_string(const struct lks_site *site, char *buf, size_t len)
{
	char raw[1024];

	if (!site->address)
		snprintf(raw, sizeof(raw), "?");
	else if (site->function[0] && site->file[0])
		snprintf(raw, sizeof(raw), "%s (%s:%d)", site->function, site->file, site->line);
	else if (site->function[0])
		snprintf(raw, sizeof(raw), "%s (%s)", site->function, site->module);
	else if (site->module[0])
		snprintf(raw, sizeof(raw), "%s+0x%lx", site->module, (unsigned long)site->offset);
	else
		snprintf(raw, sizeof(raw), "0x%lx", (unsigned long)site->address);
	return lk__text_escape(raw, buf, len);
}
