// SPDX-License-Identifier: MIT
/*
 * The libdw symbolizer of `lowkey watch`, `lowkey locks` and `lowkey races` (symbolize.h): one
 * Dwfl session, over a live process's mappings or over objects at known bases, every file read so
 * that no other user can kill lowkey by cutting it.
 */
#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal/utf8.h"
#include "probe_elf.h"
#include "proc_files.h"
#include "symbolize.h"

/* The Itanium C++ ABI's demangler (libstdc++), extern "C" by the ABI. */
char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

/* A name demangled: the symbol's string in libdw (stable until dwfl_end) to malloc'ed text. */
struct demangled {
	const char *mangled;
	char *name;
};

/* An object's ELF, opened when it is reported, until libdwfl asks for it (find_opened). */
struct opened {
	Elf *elf;
	int fd;
	char *path;
};

struct symbolizer {
	Dwfl *dwfl;
	Dwfl_Callbacks callbacks;
	char *debuginfo_path;
	pid_t pid; /* the process whose mappings are reported; 0: objects at known bases */
	struct proc_view view; /* its root */
	unsigned int reports;  /* of the process's mappings */
	struct opened *opened; /* objects at known bases: one each */
	size_t nopened;
	struct demangled *names;  /* open addressing by the mangled string's address */
	size_t nnames, names_cap; /* names_cap: 0 or a power of two */
};

/* ---- the files: read, never mapped ---- */

/* The ELF file open at fd, read as open_elf() reads; NULL (fd closed) if it is not ELF. */
static Elf *elf_of(int fd)
{
	Elf *elf;

	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (elf && elf_kind(elf) == ELF_K_ELF)
		return elf;
	elf_end(elf);
	close(fd);
	return NULL;
}

/*
 * The ELF file at path (a regular file: no FIFO or device is opened), read with pread as libdw
 * asks, never mapped. Its descriptor in *fd: the Elf reads through it, close it after elf_end().
 * NULL if it cannot be opened or is not ELF.
 */
static Elf *open_elf(const char *path, int *fd)
{
	Elf *elf;

	*fd = open_regular_file(path, NULL, 0);
	elf = *fd >= 0 ? elf_of(*fd) : NULL;
	if (!elf)
		*fd = -1;
	return elf;
}

static bool trusted_inode(const char *path, uid_t me)
{
	struct stat st;

	return stat(path, &st) == 0 && (st.st_uid == 0 || st.st_uid == me) &&
	       !(st.st_mode & (S_IWGRP | S_IWOTH));
}

/*
 * Whether no user but root and this one can change the file at path or put another in its place:
 * path is canonical (no symbolic link, no . or ..), and it and every directory above it belong to
 * root or to this user and are writable by no group and no other user.
 */
static bool trusted(const char *path)
{
	char *real = realpath(path, NULL);
	bool ok = real && strcmp(real, path) == 0 && trusted_inode("/", geteuid());

	for (size_t i = 1; ok && real[i - 1]; i++) {
		char c = real[i];

		if (c != '/' && c)
			continue;
		real[i] = 0;
		ok = trusted_inode(real, geteuid());
		real[i] = c;
	}
	free(real);
	return ok;
}

/*
 * For find_elf over process pid's mappings: the file mapped at base as the process sees it
 * (proc_view_open_mapped: the very file mapped through /proc/PID/map_files where this user may,
 * else its name in the process's root, checked to be that build), read as open_elf() reads. Names
 * that are no path ([vdso]) are read from the process's memory by libdwfl.
 */
static int proc_find_elf(struct symbolizer *s, Dwfl_Module *mod, void **userdata, const char *name,
			 Dwarf_Addr base, char **file_name, Elf **elfp)
{
	struct proc_mapping *m;
	char err[4400], shown[4400];
	int fd = -1;

	if (name[0] != '/')
		return dwfl_linux_proc_find_elf(mod, userdata, name, base, file_name, elfp);
	m = malloc(sizeof(*m));
	if (m && proc_mapping_at(s->pid, base, m) == 0)
		fd = proc_view_open_mapped(&s->view, m, err, sizeof(err));
	free(m);
	if (fd == -ESTALE) /* once per object: find_elf is asked once */
		fprintf(stderr, "lowkey: %s\n", lk__text_escape(err, shown, sizeof(shown)));
	*elfp = fd >= 0 ? elf_of(fd) : NULL;
	if (!*elfp)
		return -1;
	*file_name = strdup(name); /* where its debug files are looked for, in its root */
	return fd;
}

/*
 * Dwfl_Callbacks.find_debuginfo: by build ID in the system's debug directories for any object;
 * libdwfl's whole search (beside the object, its .debug, /usr/lib/debug, debuginfod) only for an
 * object trusted() trusts, as the files found there could otherwise be another user's.
 */
static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
			  const char *file_name, const char *debuglink_file,
			  GElf_Word debuglink_crc, char **debuginfo_file_name)
{
	int fd = dwfl_build_id_find_debuginfo(mod, userdata, modname, base, file_name,
					      debuglink_file, debuglink_crc, debuginfo_file_name);

	if (fd >= 0 || !file_name || !trusted(file_name))
		return fd;
	return dwfl_standard_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file,
					    debuglink_crc, debuginfo_file_name);
}

/*
 * A copy of the file open at fd in memory no one else can change (a sealed memfd), for libdwfl to
 * map: a file in a process's root may be another user's, who could cut it under the mapping.
 * Closes fd; -1 if it cannot be copied.
 */
static int private_copy(int fd)
{
	struct stat st;
	off_t at = 0;
	int copy = fstat(fd, &st) == 0 ?
			   memfd_create("lowkey-debuginfo", MFD_CLOEXEC | MFD_ALLOW_SEALING) :
			   -1;

	while (copy >= 0 && at < st.st_size)
		if (sendfile(copy, fd, &at, (size_t)(st.st_size - at)) <= 0)
			break;
	close(fd);
	if (copy >= 0 &&
	    (at != st.st_size ||
	     fcntl(copy, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) != 0)) {
		close(copy);
		return -1;
	}
	return copy;
}

/* The debug file name in process s's root, if it has the build-id wanted (n bytes; 0: any). */
static int debug_file_in_root(struct symbolizer *s, const char *name, const uint8_t *want, int n,
			      char **found)
{
	uint8_t id[BUILD_ID_MAX];
	int fd = proc_view_open_file(&s->view, name, NULL, 0);

	if (fd < 0)
		return -1;
	if (n > 0 && (elf_build_id_of_file(fd, id) != n || memcmp(id, want, (size_t)n) != 0)) {
		close(fd);
		return -1;
	}
	fd = private_copy(fd);
	*found = fd >= 0 ? strdup(name) : NULL;
	return fd;
}

/*
 * Where libdwfl's search looks, in the process's root: by build-id under /usr/lib/debug, then the
 * .gnu_debuglink name beside the object, in its .debug, and under /usr/lib/debug.
 */
static int debug_in_root(struct symbolizer *s, Dwfl_Module *mod, const char *file_name,
			 const char *debuglink, char **found)
{
	const unsigned char *bits;
	GElf_Addr at;
	char name[3][PATH_MAX + 256];
	int n = dwfl_module_build_id(mod, &bits, &at), fd = -1, len, dir;
	const char *slash = file_name ? strrchr(file_name, '/') : NULL;

	if (n > 0) {
		len = snprintf(name[0], sizeof(name[0]), "/usr/lib/debug/.build-id/%02x/", bits[0]);
		for (int i = 1; i < n && len < (int)sizeof(name[0]) - 8; i++)
			len += snprintf(name[0] + len, sizeof(name[0]) - (size_t)len, "%02x",
					bits[i]);
		snprintf(name[0] + len, sizeof(name[0]) - (size_t)len, ".debug");
		fd = debug_file_in_root(s, name[0], bits, n, found);
	}
	if (fd >= 0 || !debuglink || !slash || strchr(debuglink, '/'))
		return fd;
	dir = (int)(slash - file_name);
	snprintf(name[0], sizeof(name[0]), "%.*s/%s", dir, file_name, debuglink);
	snprintf(name[1], sizeof(name[1]), "%.*s/.debug/%s", dir, file_name, debuglink);
	snprintf(name[2], sizeof(name[2]), "/usr/lib/debug%.*s/%s", dir, file_name, debuglink);
	for (int i = 0; fd < 0 && i < 3; i++)
		fd = debug_file_in_root(s, name[i], bits, n > 0 ? n : 0, found);
	return fd;
}

/*
 * Dwfl_Callbacks.find_debuginfo for a process: find_debuginfo() where the process sees the files
 * as lowkey does (its root and mount namespace are lowkey's); else in its root first, then by
 * build-id in the system's debug directories here (a file of that build-id is of that build), and
 * never beside the host's file of the object's name.
 */
static int find_process_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
				  Dwarf_Addr base, const char *file_name,
				  const char *debuglink_file, GElf_Word debuglink_crc,
				  char **debuginfo_file_name)
{
	struct symbolizer *s = *userdata;
	int fd;

	if (!s || s->view.same_mounts)
		return find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file,
				      debuglink_crc, debuginfo_file_name);
	fd = debug_in_root(s, mod, file_name, debuglink_file, debuginfo_file_name);
	if (fd >= 0)
		return fd;
	return dwfl_build_id_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file,
					    debuglink_crc, debuginfo_file_name);
}

/* ---- source lines ---- */

/*
 * The source line of addr, for objects without .debug_aranges: libdwfl (elfutils 0.188, Debian
 * 12's) finds an address's compile unit through that table only, and Clang does not emit it (GCC
 * does), so dwfl_module_getsrc() finds no line in code Clang built. The units' own address ranges
 * say it too.
 */
static const char *line_from_units(Dwfl_Module *mod, uint64_t addr, int *lineno)
{
	Dwarf_Addr bias;

	for (Dwarf_Die *cu = NULL; (cu = dwfl_module_nextcu(mod, cu, &bias));) {
		Dwarf_Line *line;

		if (dwarf_haspc(cu, addr - bias) != 1)
			continue;
		line = dwarf_getsrc_die(cu, addr - bias);
		if (!line || dwarf_lineno(line, lineno) != 0)
			return NULL;
		return dwarf_linesrc(line, NULL, NULL);
	}
	return NULL;
}

/* The source file of the run-time address addr in mod, its line in *line; NULL when none is known. */
static const char *source_line(Dwfl_Module *mod, uint64_t addr, int *line)
{
	Dwfl_Line *l = dwfl_module_getsrc(mod, addr);
	const char *file = l ? dwfl_lineinfo(l, NULL, line, NULL, NULL, NULL) : NULL;

	return file ? file : line_from_units(mod, addr, line);
}

/* ---- a live process ---- */

static int load_module(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr start,
		       void *arg)
{
	GElf_Addr bias;

	(void)name, (void)start;
	*userdata = arg;		/* for find_elf: the process */
	dwfl_module_getelf(mod, &bias); /* open the ELF now, while /proc/PID exists */
	return DWARF_CB_OK;
}

static int find_process_elf(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base,
			    char **file_name, Elf **elfp)
{
	struct symbolizer *s = *userdata;

	return s ? proc_find_elf(s, mod, userdata, name, base, file_name, elfp) : -1;
}

/* 0, an errno value (dwfl_linux_proc_report's), or -1 (libdw's own error: dwfl_errmsg). */
static int report_process(struct symbolizer *s)
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

static struct symbolizer *symbolizer_new(Dwfl_Callbacks *callbacks)
{
	struct symbolizer *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->callbacks = *callbacks;
	if (!s->callbacks.find_debuginfo)
		s->callbacks.find_debuginfo = find_debuginfo;
	s->view.root = -1;
	s->callbacks.debuginfo_path = &s->debuginfo_path;
	s->dwfl = dwfl_begin(&s->callbacks);
	if (!s->dwfl) {
		free(s);
		return NULL;
	}
	return s;
}

struct symbolizer *symbolizer_open_process(pid_t pid, char *err, size_t errlen)
{
	Dwfl_Callbacks callbacks = { .find_elf = find_process_elf,
				     .find_debuginfo = find_process_debuginfo };
	struct symbolizer *s = symbolizer_new(&callbacks);
	int rc;

	if (!s) {
		snprintf(err, errlen, "cannot start libdw: out of memory"); /* its only failure */
		return NULL;
	}
	s->pid = pid;
	rc = proc_view_open(pid, &s->view);
	if (rc == 0)
		rc = report_process(s);
	else
		rc = ESRCH;
	if (rc == ENOENT || rc == ESRCH)
		snprintf(err, errlen, "process %d does not exist (it may have exited)", (int)pid);
	else if (rc > 0)
		snprintf(err, errlen, "cannot read the mappings of process %d: %s", (int)pid,
			 strerror(rc));
	else if (rc < 0)
		snprintf(err, errlen, "cannot read the mappings of process %d: %s", (int)pid,
			 dwfl_errmsg(-1));
	if (rc) {
		symbolizer_close(s);
		return NULL;
	}
	return s;
}

/* ---- objects at known bases ---- */

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

/* Dwfl_Callbacks.find_elf: the object's ELF opened when it was reported, now libdwfl's to close. */
static int find_opened(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base,
		       char **file_name, Elf **elfp)
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

	if (!gelf_getehdr(elf, &eh) || (eh.e_type != ET_DYN && eh.e_type != ET_EXEC) ||
	    elf_getphdrnum(elf, &n))
		return false;
	for (size_t i = 0; i < n && !found; i++)
		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD)
			vaddr = ph.p_vaddr & -ph.p_align, found = true;
	*start = eh.e_type == ET_EXEC ? vaddr : base;
	*end = 0;
	for (size_t i = n; i-- > 0 && !*end;)
		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD &&
		    ph.p_vaddr + ph.p_memsz > 0)
			*end = *start - vaddr + ph.p_vaddr + ph.p_memsz;
	return found && *end > *start;
}

/*
 * Whether the file open at fd is another build than the one obj says was loaded: its build-id,
 * read, is another or none. (One that cannot be read is no build at all: it is cut, and libelf
 * finds so too.)
 */
static bool other_build(int fd, const struct symbol_object *obj)
{
	uint8_t id[BUILD_ID_MAX];
	int n;

	if (!obj->build_id || !obj->build_id_len)
		return false;
	n = elf_build_id_of_file(fd, id);
	return n >= 0 && (n != (int)obj->build_id_len || memcmp(id, obj->build_id, (size_t)n) != 0);
}

static void report_object(struct symbolizer *s, struct opened *o, struct symbol_object *obj)
{
	const char *path = obj->path;
	Dwfl_Module *mod = NULL;
	uint64_t start, end;
	void **slot;

	o->elf = open_elf(path, &o->fd);
	obj->other_build = o->elf && other_build(o->fd, obj);
	o->path = o->elf && !obj->other_build ? strdup(path) : NULL;
	if (o->path && elf_range(o->elf, obj->bias, &start, &end))
		mod = dwfl_report_module(s->dwfl, base_name(path), start, end);
	if (mod && dwfl_module_info(mod, &slot, NULL, NULL, NULL, NULL, NULL, NULL))
		*slot = o;
	else
		close_opened(o);
}

struct symbolizer *symbolizer_open_objects(struct symbol_object *objects, size_t n)
{
	Dwfl_Callbacks callbacks = { .find_elf = find_opened,
				     .section_address = dwfl_offline_section_address };
	struct symbolizer *s = symbolizer_new(&callbacks);

	if (!s)
		return NULL;
	s->opened = calloc(n ? n : 1, sizeof(*s->opened));
	if (!s->opened) {
		symbolizer_close(s);
		return NULL;
	}
	s->nopened = n;
	for (size_t i = 0; i < n; i++)
		s->opened[i].fd = -1;
	dwfl_report_begin(s->dwfl);
	for (size_t i = 0; i < n; i++)
		if (objects[i].path && objects[i].path[0] == '/')
			report_object(s, &s->opened[i], &objects[i]);
	dwfl_report_end(s->dwfl, NULL, NULL);
	return s;
}

/* ---- C++ names ---- */

static size_t name_slot(const struct symbolizer *s, const char *mangled)
{
	size_t h = (size_t)(uintptr_t)mangled * 0x9e3779b97f4a7c15ull;

	for (h >>= 7;; h++) {
		const struct demangled *d = &s->names[h & (s->names_cap - 1)];

		if (!d->mangled || d->mangled == mangled)
			return h & (s->names_cap - 1);
	}
}

/* Room for one more name, the table kept at most half full; false when there is no memory. */
static bool names_room(struct symbolizer *s)
{
	size_t cap = s->names_cap ? 2 * s->names_cap : 64;
	struct demangled *old = s->names, *grown;

	if (2 * (s->nnames + 1) <= s->names_cap)
		return true;
	grown = calloc(cap, sizeof(*grown));
	if (!grown)
		return false;
	s->names = grown;
	s->names_cap = cap;
	for (size_t i = 0; old && i < cap / 2; i++)
		if (old[i].mangled)
			s->names[name_slot(s, old[i].mangled)] = old[i];
	free(old);
	return true;
}

const char *symbolizer_demangle(struct symbolizer *s, const char *name)
{
	struct demangled *d;
	int status = -1;
	char *text;

	if (!name || name[0] != '_' || name[1] != 'Z' || !names_room(s))
		return name;
	d = &s->names[name_slot(s, name)];
	if (d->mangled)
		return d->name ? d->name : name;
	text = __cxa_demangle(name, NULL, NULL, &status);
	*d = (struct demangled){ name, status == 0 ? text : NULL };
	if (status != 0)
		free(text);
	s->nnames++;
	return d->name ? d->name : name;
}

/* ---- either ---- */

void symbolizer_close(struct symbolizer *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->names_cap; i++)
		free(s->names[i].name);
	free(s->names);
	dwfl_end(s->dwfl);
	proc_view_close(&s->view);
	for (size_t i = 0; s->opened && i < s->nopened; i++)
		close_opened(&s->opened[i]);
	free(s->opened);
	free(s);
}

static Dwfl_Module *module_of(struct symbolizer *s, uint64_t addr)
{
	Dwfl_Module *mod = dwfl_addrmodule(s->dwfl, addr);

	/* An object mapped since the last look (bounded: a stray address must not loop on /proc). */
	if (!mod && s->pid && s->reports < 64 && report_process(s) == 0)
		mod = dwfl_addrmodule(s->dwfl, addr);
	return mod;
}

Dwarf *symbolizer_dwarf(struct symbolizer *s, uint64_t addr, uint64_t *bias)
{
	Dwfl_Module *mod = module_of(s, addr);
	Dwarf_Addr b = 0;
	Dwarf *dw = mod ? dwfl_module_getdwarf(mod, &b) : NULL;

	*bias = b;
	return dw;
}

void symbolizer_place(struct symbolizer *s, uint64_t addr, bool line_before,
		      struct symbol_place *out)
{
	Dwfl_Module *mod = module_of(s, addr);
	GElf_Off offset = 0;
	GElf_Sym sym;

	memset(out, 0, sizeof(*out));
	if (!mod)
		return;
	out->module = dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
	out->mangled = dwfl_module_addrinfo(mod, addr, &offset, &sym, NULL, NULL, NULL);
	out->function = symbolizer_demangle(s, out->mangled);
	out->offset = offset;
	out->file = source_line(mod, line_before ? addr - 1 : addr, &out->line);
}

const char *symbolizer_object(struct symbolizer *s, uint64_t addr, uint64_t *offset)
{
	Dwfl_Module *mod = module_of(s, addr);
	GElf_Off off = 0;
	GElf_Sym sym;
	const char *name = mod ? dwfl_module_addrinfo(mod, addr, &off, &sym, NULL, NULL, NULL) :
				 NULL;

	if (!name || GELF_ST_TYPE(sym.st_info) != STT_OBJECT || off >= sym.st_size)
		return NULL;
	*offset = off;
	return symbolizer_demangle(s, name);
}

/* The compile unit of the run-time address addr in mod (its bias in *bias), with or without
 * .debug_aranges (line_from_units() says why). */
static Dwarf_Die *unit_of(Dwfl_Module *mod, uint64_t addr, Dwarf_Addr *bias)
{
	Dwarf_Die *cu = dwfl_module_addrdie(mod, addr, bias);

	if (cu)
		return cu;
	while ((cu = dwfl_module_nextcu(mod, cu, bias)))
		if (dwarf_haspc(cu, addr - *bias) == 1)
			return cu;
	return NULL;
}

/* An inlined function's name: its linkage name demangled where it has one, as the symbols are. */
static const char *inlined_name(struct symbolizer *s, Dwarf_Die *die, const char **mangled)
{
	Dwarf_Attribute attr;
	const char *linkage =
		dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &attr));

	if (!linkage)
		linkage =
			dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr));
	*mangled = linkage ? linkage : dwarf_diename(die);
	return linkage ? symbolizer_demangle(s, linkage) : *mangled;
}

/* The file and line an inlined function was called from (its DW_AT_call_file, _line). */
static void call_site(Dwarf_Die *cu, Dwarf_Die *inlined, struct symbol_place *out)
{
	Dwarf_Attribute attr;
	Dwarf_Word file, line;
	Dwarf_Files *files;
	size_t nfiles;

	if (dwarf_formudata(dwarf_attr(inlined, DW_AT_call_file, &attr), &file) == 0 &&
	    dwarf_getsrcfiles(cu, &files, &nfiles) == 0 && file < nfiles)
		out->file = dwarf_filesrc(files, file, NULL, NULL);
	if (dwarf_formudata(dwarf_attr(inlined, DW_AT_call_line, &attr), &line) == 0)
		out->line = (int)line;
}

size_t symbolizer_frames(struct symbolizer *s, uint64_t addr, bool line_before,
			 struct symbol_place *out, size_t max)
{
	uint64_t at = line_before ? addr - 1 : addr;
	Dwfl_Module *mod = module_of(s, addr);
	Dwarf_Die *cu, *scopes = NULL, *inner = NULL;
	struct symbol_place outer;
	Dwarf_Addr bias;
	size_t n = 0;
	int nscopes;

	symbolizer_place(s, addr, line_before, &outer);
	cu = mod && max > 1 ? unit_of(mod, at, &bias) : NULL;
	nscopes = cu ? dwarf_getscopes(cu, at - bias, &scopes) : 0;
	for (int i = 0; i < nscopes && n + 1 < max; i++) {
		if (dwarf_tag(&scopes[i]) != DW_TAG_inlined_subroutine)
			continue;
		out[n] = (struct symbol_place){ .module = outer.module };
		out[n].function = inlined_name(s, &scopes[i], &out[n].mangled);
		if (inner) { /* at the line that called the one inlined in it */
			call_site(cu, inner, &out[n]);
		} else {
			out[n].file = outer.file;
			out[n].line = outer.line;
		}
		inner = &scopes[i];
		n++;
	}
	out[n] = outer;
	if (inner) {
		out[n].file = NULL;
		out[n].line = 0;
		call_site(cu, inner, &out[n]);
	}
	free(scopes);
	return n + 1;
}

struct lookup {
	const char *name;
	uint64_t addr, size;
	const char *module;
	int found; /* 1 found, -1 thread-local */
};

static int lookup_in_module(Dwfl_Module *mod, void **userdata, const char *modname,
			    Dwarf_Addr start, void *arg)
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

int symbolizer_lookup(struct symbolizer *s, const char *name, uint64_t *addr, uint64_t *size,
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
