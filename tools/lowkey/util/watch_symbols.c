// SPDX-License-Identifier: MIT
/*
 * Symbols for `lowkey watch`, with libdwfl: one Dwfl session over the target's mappings, the
 * objects' ELF and DWARF opened up front (so samples that arrive after the process exited still
 * resolve), and reported again when an address falls in no known object (a dlopen() since).
 */
#include <errno.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dwfl_files.h"
#include "dwfl_lines.h"
#include "watch_symbols.h"

struct watch_symbols {
	Dwfl *dwfl;
	pid_t pid;
	Dwfl_Callbacks callbacks;
	char *debuginfo_path;
	unsigned int reports;
};

static int load_module(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr start, void *arg)
{
	GElf_Addr bias;

	(void)name, (void)start;
	*userdata = arg;	/* for find_elf: the process */
	dwfl_module_getelf(mod, &bias);	/* open the ELF now, while /proc/PID exists */
	return DWARF_CB_OK;
}

/* The target's files are its user's: read, never mapped (dwfl_files.h). */
static int find_elf(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base, char **file_name,
		    Elf **elfp)
{
	const struct watch_symbols *s = *userdata;

	return s ? lk_dwfl_proc_find_elf(s->pid, mod, userdata, name, base, file_name, elfp) : -1;
}

/* 0, an errno value (dwfl_linux_proc_report's), or -1 (libdw's own error: dwfl_errmsg). */
static int report(struct watch_symbols *s)
{
	int rc;

	dwfl_report_begin_add(s->dwfl);
	rc = dwfl_linux_proc_report(s->dwfl, s->pid);
	if (rc != 0)
		return rc;
	if (dwfl_report_end(s->dwfl, NULL, NULL) != 0)
		return -1;
	dwfl_getmodules(s->dwfl, load_module, s, 0);
	s->reports++;
	return 0;
}

struct watch_symbols *watch_symbols_open(pid_t pid, char *err, size_t errlen)
{
	struct watch_symbols *s = calloc(1, sizeof(*s));
	int rc;

	if (!s) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->pid = pid;
	s->callbacks.find_elf = find_elf;
	s->callbacks.find_debuginfo = lk_dwfl_find_debuginfo;
	s->callbacks.debuginfo_path = &s->debuginfo_path;
	s->dwfl = dwfl_begin(&s->callbacks);
	rc = s->dwfl ? report(s) : -1;
	if (rc == ENOENT || rc == ESRCH)
		snprintf(err, errlen, "process %d does not exist (it may have exited)", (int)pid);
	else if (rc > 0)
		snprintf(err, errlen, "cannot read the mappings of process %d: %s", (int)pid, strerror(rc));
	else if (rc < 0)
		snprintf(err, errlen, "cannot read the mappings of process %d: %s", (int)pid, dwfl_errmsg(-1));
	if (rc) {
		watch_symbols_close(s);
		return NULL;
	}
	return s;
}

void watch_symbols_close(struct watch_symbols *s)
{
	if (!s)
		return;
	if (s->dwfl)
		dwfl_end(s->dwfl);
	free(s);
}

static Dwfl_Module *module_of(struct watch_symbols *s, uint64_t ip)
{
	Dwfl_Module *mod = dwfl_addrmodule(s->dwfl, ip);

	/* An object mapped since the last look (bounded: a stray address must not loop on /proc). */
	if (!mod && s->reports < 64 && report(s) == 0)
		mod = dwfl_addrmodule(s->dwfl, ip);
	return mod;
}

void watch_symbols_place(struct watch_symbols *s, uint64_t ip, int line_of_previous,
			 struct watch_place *out)
{
	Dwfl_Module *mod = module_of(s, ip);
	uint64_t at = line_of_previous ? ip - 1 : ip;
	GElf_Off offset = 0;
	GElf_Sym sym;

	memset(out, 0, sizeof(*out));
	if (!mod)
		return;
	out->module = dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
	out->function = dwfl_module_addrinfo(mod, ip, &offset, &sym, NULL, NULL, NULL);
	out->offset = offset;
	out->file = lk_dwfl_source_line(mod, at, &out->line);
}

struct lookup {
	const char *name;
	uint64_t addr, size;
	const char *module;
	int found;	/* 1 found, -1 thread-local */
};

static int lookup_in_module(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr start,
			    void *arg)
{
	struct lookup *l = arg;
	int n = dwfl_module_getsymtab(mod);

	(void)userdata, (void)start;
	for (int i = 1; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		const char *name = dwfl_module_getsym_info(mod, i, &sym, &addr, NULL, NULL, NULL);

		if (!name || strcmp(name, l->name) != 0 || sym.st_shndx == SHN_UNDEF)
			continue;
		if (GELF_ST_TYPE(sym.st_info) == STT_TLS) {
			l->found = -1;
			continue;
		}
		l->addr = addr;
		l->size = sym.st_size;
		l->module = modname;
		l->found = 1;
		return DWARF_CB_ABORT;
	}
	return DWARF_CB_OK;
}

int watch_symbols_lookup(struct watch_symbols *s, const char *name, uint64_t *addr, uint64_t *size,
			 const char **module)
{
	struct lookup l = { name, 0, 0, NULL, 0 };

	dwfl_getmodules(s->dwfl, lookup_in_module, &l, 0);
	if (l.found == 1) {
		*addr = l.addr;
		*size = l.size;
		*module = l.module;
		return 0;
	}
	return l.found < 0 ? -EINVAL : -ENOENT;
}
