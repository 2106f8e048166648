// SPDX-License-Identifier: MIT
/*
 * The files of a running process as it sees them (proc_files.h): its root, the files it maps, and
 * the build-ids that tell one build of a file from another.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "internal/failf.h"
#include "probe_elf.h"
#include "proc_files.h"

#define MAX_NOTES (64u << 10) /* bytes of notes read from one segment or section */
#define MAX_HEADERS 4096u     /* program or section headers: more than any object has */

/* ---- the root ---- */

static bool same_inode(const char *a, const char *b)
{
	struct stat x, y;

	return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

int proc_view_open(pid_t pid, struct proc_view *v)
{
	char root[64], ns[64];

	*v = (struct proc_view){ pid, -1, false };
	snprintf(root, sizeof(root), "/proc/%d/root", (int)pid);
	snprintf(ns, sizeof(ns), "/proc/%d/ns/mnt", (int)pid);
	v->root = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (v->root < 0 && errno == ENOENT)
		return -ESRCH;
	v->same_mounts = v->root >= 0 && same_inode(root, "/") &&
			 same_inode(ns, "/proc/self/ns/mnt");
	return 0;
}

void proc_view_close(struct proc_view *v)
{
	if (v->root >= 0)
		close(v->root);
	v->root = -1;
}

int proc_view_open_file(const struct proc_view *v, const char *name, char *err, size_t errlen)
{
	struct open_how how = { .flags = O_PATH | O_CLOEXEC,
				.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	int rc, pfd;

	if (v->root < 0)
		return lk__failf(err, errlen, -EACCES,
				 "cannot look into the root of process %d (/proc/%d/root)",
				 (int)v->pid, (int)v->pid);
	pfd = (int)syscall(SYS_openat2, v->root, name, &how, sizeof(how));
	if (pfd < 0 && errno == ENOSYS && v->same_mounts) /* its names are ours */
		return open_regular_file(name, err, errlen);
	if (pfd < 0 && errno == ENOSYS)
		return lk__failf(err, errlen, -ENOSYS,
				 "cannot open %s as process %d sees it: this kernel has no "
				 "openat2 (Linux 5.6)",
				 name, (int)v->pid);
	if (pfd < 0)
		return lk__failf(err, errlen, -errno,
				 "cannot open %s in the root of process %d: %s", name, (int)v->pid,
				 strerror(errno));
	rc = open_regular_at(pfd, name, err, errlen);
	close(pfd);
	return rc;
}

/* ---- the files it maps ---- */

bool proc_mapping_parse(const char *line, struct proc_mapping *m)
{
	unsigned long long start, end, offset, inode;
	unsigned int major, minor;
	int at = 0;

	if (sscanf(line, "%llx-%llx %*s %llx %x:%x %llu %n", &start, &end, &offset, &major, &minor,
		   &inode, &at) != 6 ||
	    !at || !inode || line[at] != '/')
		return false;
	*m = (struct proc_mapping){ start, end, offset, makedev(major, minor), (ino_t)inode, "" };
	snprintf(m->name, sizeof(m->name), "%.*s", (int)strcspn(line + at, "\n"), line + at);
	return true;
}

int proc_mapping_at(pid_t pid, uint64_t start, struct proc_mapping *m)
{
	char path[64], line[8192];
	int rc = -ENOENT;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	while (rc && fgets(line, sizeof(line), f))
		if (proc_mapping_parse(line, m) && m->start == start)
			rc = 0;
	fclose(f);
	return rc;
}

static bool same_build(const struct proc_view *v, const struct proc_mapping *m, int fd, char *err,
		       size_t errlen, int *rc)
{
	uint8_t mapped[BUILD_ID_MAX], found[BUILD_ID_MAX];
	int nm = proc_mapped_build_id(v->pid, m->start, mapped);
	int nf = elf_build_id_of_file(fd, found);

	*rc = 0;
	if (nm <= 0) /* nothing to compare with: the process's memory cannot be read */
		return true;
	if (nf == nm && memcmp(mapped, found, (size_t)nm) == 0)
		return true;
	*rc = lk__failf(err, errlen, -ESTALE,
			"%s in the root of process %d has %s build-id than the file it mapped: "
			"another build of it, not read",
			m->name, (int)v->pid, nf > 0 ? "another" : "no");
	return false;
}

int proc_view_open_mapped(const struct proc_view *v, const struct proc_mapping *m, char *err,
			  size_t errlen)
{
	char path[128];
	struct stat st;
	int fd, rc;

	/* the very inode mapped, where this user may follow the link (root) */
	snprintf(path, sizeof(path), "/proc/%d/map_files/%llx-%llx", (int)v->pid,
		 (unsigned long long)m->start, (unsigned long long)m->end);
	fd = open_regular_file(path, NULL, 0);
	if (fd >= 0)
		return fd;
	fd = proc_view_open_file(v, m->name, err, errlen);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) == 0 && st.st_dev == m->dev && st.st_ino == m->ino)
		return fd;
	if (same_build(v, m, fd, err, errlen, &rc))
		return fd;
	close(fd);
	return rc;
}

/* ---- build-ids ---- */

static int read_at(int fd, uint64_t at, void *buf, size_t len)
{
	ssize_t n = pread(fd, buf, len, (off_t)at);

	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

/*
 * The NT_GNU_BUILD_ID note among the len bytes of notes at at, aligned to align bytes (8: padded
 * to 8), into id: its length, 0, or -errno.
 */
static int build_id_in_notes(int fd, uint64_t at, uint64_t len, uint64_t align,
			     uint8_t id[BUILD_ID_MAX])
{
	uint8_t *notes;
	size_t n = len < MAX_NOTES ? (size_t)len : MAX_NOTES, pos = 0, pad = align == 8 ? 7 : 3;
	int rc;

	notes = malloc(n ? n : 1);
	if (!notes)
		return -ENOMEM;
	rc = read_at(fd, at, notes, n);
	while (!rc && pos + sizeof(Elf64_Nhdr) <= n) {
		Elf64_Nhdr nh;
		size_t name = pos + sizeof(nh), desc;

		memcpy(&nh, notes + pos, sizeof(nh));
		desc = name + ((nh.n_namesz + pad) & ~pad);
		if (desc > n || nh.n_descsz > n - desc)
			break;
		if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
		    memcmp(notes + name, "GNU", 4) == 0 && nh.n_descsz &&
		    nh.n_descsz <= BUILD_ID_MAX) {
			memcpy(id, notes + desc, nh.n_descsz);
			rc = (int)nh.n_descsz;
			break;
		}
		pos = desc + ((nh.n_descsz + pad) & ~pad);
	}
	free(notes);
	return rc;
}

static int read_ehdr(int fd, uint64_t at, Elf64_Ehdr *eh)
{
	int rc = read_at(fd, at, eh, sizeof(*eh));

	if (rc)
		return rc;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64)
		return -ENOEXEC;
	return 0;
}

int elf_build_id_of_file(int fd, uint8_t id[BUILD_ID_MAX])
{
	Elf64_Ehdr eh;
	int rc = read_ehdr(fd, 0, &eh);

	if (rc)
		return rc;
	if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum > MAX_HEADERS)
		return 0;
	/* sections, not segments: a separate debug file keeps the notes, not their offsets */
	for (unsigned int i = 0; i < eh.e_shnum; i++) {
		Elf64_Shdr sh;

		rc = read_at(fd, eh.e_shoff + (uint64_t)i * sizeof(sh), &sh, sizeof(sh));
		if (rc)
			return rc;
		if (sh.sh_type != SHT_NOTE)
			continue;
		rc = build_id_in_notes(fd, sh.sh_offset, sh.sh_size, sh.sh_addralign, id);
		if (rc)
			return rc;
	}
	return 0;
}

int proc_mapped_build_id(pid_t pid, uint64_t start, uint8_t id[BUILD_ID_MAX])
{
	char path[64];
	Elf64_Ehdr eh;
	uint64_t bias = 0;
	bool have_bias = false;
	int fd, rc;

	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	rc = read_ehdr(fd, start, &eh);
	if (!rc && (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > MAX_HEADERS))
		rc = -ENOEXEC;
	/* the first page maps the file from offset 0: its program headers are there */
	for (int pass = 0; pass < 2; pass++)
		for (unsigned int i = 0; !rc && i < eh.e_phnum; i++) {
			Elf64_Phdr ph;

			rc = read_at(fd, start + eh.e_phoff + (uint64_t)i * sizeof(ph), &ph,
				     sizeof(ph));
			if (!rc && pass == 0 && ph.p_type == PT_LOAD && !have_bias) {
				bias = start - (ph.p_vaddr - ph.p_offset);
				have_bias = true;
			}
			if (!rc && pass == 1 && ph.p_type == PT_NOTE && have_bias)
				rc = build_id_in_notes(fd, ph.p_vaddr + bias, ph.p_filesz,
						       ph.p_align, id);
		}
	close(fd);
	return rc;
}
