// SPDX-License-Identifier: MIT
/*
 * lowkey locks: naming call sites. A site is a return address in the profiled process; the
 * process wrote down where each object was loaded (format.h), so the address maps to an object
 * and an offset, and elfutils' libdwfl turns that into a function and a file:line.
 *
 * libdw is opened at run time: without it (or without debug information) a site is still named by
 * its object and offset, "libfoo.so.1+0x1a2b", which addr2line or `eu-addr2line` can resolve
 * later.
 */
#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "locks.h"

static struct {
	bool tried, ok;
	__typeof__(dwfl_begin) *begin;
	__typeof__(dwfl_end) *end;
	__typeof__(dwfl_report_begin) *report_begin;
	__typeof__(dwfl_report_elf) *report_elf;
	__typeof__(dwfl_report_end) *report_end;
	__typeof__(dwfl_addrmodule) *addrmodule;
	__typeof__(dwfl_module_addrname) *addrname;
	__typeof__(dwfl_module_getsrc) *getsrc;
	__typeof__(dwfl_lineinfo) *lineinfo;
	__typeof__(dwfl_build_id_find_elf) *find_elf;
	__typeof__(dwfl_standard_find_debuginfo) *find_debuginfo;
	__typeof__(dwfl_offline_section_address) *section_address;
	/* for line_from_units (optional) */
	__typeof__(dwfl_module_nextcu) *nextcu;
	__typeof__(dwarf_haspc) *haspc;
	__typeof__(dwarf_getsrc_die) *getsrc_die;
	__typeof__(dwarf_lineno) *lineno;
	__typeof__(dwarf_linesrc) *linesrc;
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
	SYM(report_elf, "dwfl_report_elf");
	SYM(report_end, "dwfl_report_end");
	SYM(addrmodule, "dwfl_addrmodule");
	SYM(addrname, "dwfl_module_addrname");
	SYM(getsrc, "dwfl_module_getsrc");
	SYM(lineinfo, "dwfl_lineinfo");
	SYM(find_elf, "dwfl_build_id_find_elf");
	SYM(find_debuginfo, "dwfl_standard_find_debuginfo");
	SYM(section_address, "dwfl_offline_section_address");
	SYM(nextcu, "dwfl_module_nextcu");
	SYM(haspc, "dwarf_haspc");
	SYM(getsrc_die, "dwarf_getsrc_die");
	SYM(lineno, "dwarf_lineno");
	SYM(linesrc, "dwarf_linesrc");
#undef SYM
	dw.ok = dw.begin && dw.end && dw.report_begin && dw.report_elf && dw.report_end && dw.addrmodule &&
		dw.addrname && dw.getsrc && dw.lineinfo && dw.find_elf && dw.find_debuginfo && dw.section_address;
	return dw.ok;
}

struct lks_symbolizer {
	const struct lkl_module *modules;
	uint32_t nmodules;
	const char *exe;
	Dwfl *dwfl;
	Dwfl_Callbacks callbacks;
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

struct lks_symbolizer *lks_symbolizer_new(const struct lkl_header *h, const struct lkl_module *modules, uint32_t n)
{
	struct lks_symbolizer *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->modules = modules;
	s->nmodules = n;
	s->exe = h->exe;
	if (!load_libdw())
		return s;
	s->callbacks.find_elf = dw.find_elf;
	s->callbacks.find_debuginfo = dw.find_debuginfo;
	s->callbacks.section_address = dw.section_address;
	s->dwfl = dw.begin(&s->callbacks);
	if (!s->dwfl)
		return s;
	dw.report_begin(s->dwfl);
	for (uint32_t i = 0; i < n; i++) {
		const char *path = module_path(s, &modules[i]);

		if (path[0] == '/' && access(path, R_OK) == 0)
			dw.report_elf(s->dwfl, base_name(path), path, -1, modules[i].bias, false);
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
	free(s);
}

/*
 * The source line of addr, for objects without .debug_aranges: libdwfl (elfutils 0.188, Debian
 * 12's) finds an address's compile unit through that table only, and Clang does not emit it (GCC
 * does), so dwfl_module_getsrc() finds no line in code Clang built. The units' own address ranges
 * say it too.
 */
static const char *line_from_units(Dwfl_Module *mod, uint64_t addr, int *lineno)
{
	Dwarf_Addr bias;

	if (!dw.nextcu || !dw.haspc || !dw.getsrc_die || !dw.lineno || !dw.linesrc)
		return NULL;
	for (Dwarf_Die *cu = NULL; (cu = dw.nextcu(mod, cu, &bias));) {
		Dwarf_Line *line;

		if (dw.haspc(cu, addr - bias) != 1)
			continue;
		line = dw.getsrc_die(cu, addr - bias);
		if (!line || dw.lineno(line, lineno) != 0)
			return NULL;
		return dw.linesrc(line, NULL, NULL);
	}
	return NULL;
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
		Dwfl_Line *line = mod ? dw.getsrc(mod, addr) : NULL;
		int lineno = 0;
		const char *file = line ? dw.lineinfo(line, NULL, &lineno, NULL, NULL, NULL) : NULL;

		if (mod && !file)
			file = line_from_units(mod, addr, &lineno);

		if (fn)
			snprintf(out->function, sizeof(out->function), "%s", fn);
		if (file) {
			snprintf(out->file, sizeof(out->file), "%s", base_name(file));
			out->line = lineno;
		}
	}
}

const char *lks_site_string(const struct lks_site *site, char *buf, size_t len)
{
	if (!site->address)
		snprintf(buf, len, "?");
	else if (site->function[0] && site->file[0])
		snprintf(buf, len, "%s (%s:%d)", site->function, site->file, site->line);
	else if (site->function[0])
		snprintf(buf, len, "%s (%s)", site->function, site->module);
	else if (site->module[0])
		snprintf(buf, len, "%s+0x%lx", site->module, (unsigned long)site->offset);
	else
		snprintf(buf, len, "0x%lx", (unsigned long)site->address);
	return buf;
}
