// SPDX-License-Identifier: MIT
/*
 * Rewriting sites without a trap: each run of pages is built anew and swapped in.
 *
 * The trap protocol (arch/) sends a thread that meets a half-written site through SIGTRAP. Where a
 * thread that may run a site blocks SIGTRAP, the kernel forces that trap with SIG_DFL and the
 * process dies; where the application may own SIGTRAP's handler when the trap comes, its handler
 * returns into the middle of an instruction. Writing the instruction in place with one wide store
 * instead is not safe either: Intel's SDM (Vol. 3, 8.1.3, cross-modifying code) and AMD's APM leave
 * code modified while another processor executes it undefined unless that processor waits for the
 * modification and then serializes -- whatever the store's width or alignment -- and user space
 * cannot stop a thread; the int3 protocol is the one exception the vendors allow.
 *
 * So here no byte that a thread may execute is ever written. Each run is copied into a new private
 * mapping -- of the same file at the same offset where that file can be opened, so that
 * /proc/PID/maps, profilers and uprobes still see the object -- its sites are written there while
 * nothing can execute it, and mremap(MREMAP_FIXED) moves the copy over the run. The kernel
 * replaces the page table entries under the mmap lock and flushes every TLB that held the old ones
 * before the new ones exist: a thread in the run executes the old pages or the new ones, each whole
 * and each consistent, and a thread that faults in between waits for the lock. Instruction
 * boundaries are the same in both, and a site never straddles two runs, so no thread decodes a mix.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "core/error.h"
#include "key/key_internal.h"

/* pagemap(5) entry bits */
#define LK__PM_PRESENT (1ull << 63)
#define LK__PM_SWAP (1ull << 62)
#define LK__PM_FILE (1ull << 61)

struct copy {
	void *addr;
	size_t len;
};

struct maps_line {
	uintptr_t start, end;
	unsigned long long offset, inode;
	unsigned int major, minor;
	char *path;
};

static bool parse_maps_line(char *line, struct maps_line *m)
{
	int path_at = 0;

	if (sscanf(line, "%lx-%lx %*s %llx %x:%x %llu %n", &m->start, &m->end, &m->offset,
		   &m->major, &m->minor, &m->inode, &path_at) < 6 ||
	    !path_at)
		return false;
	m->path = line + path_at;
	m->path[strcspn(m->path, "\n")] = '\0';
	return true;
}

/* Whether next continues the mapping of first's file up to next->start. */
static bool continues(const struct maps_line *first, const struct maps_line *prev,
		      const struct maps_line *next)
{
	return next->start == prev->end && next->inode == first->inode &&
	       next->major == first->major && next->minor == first->minor &&
	       next->offset == first->offset + (next->start - first->start);
}

static bool same_file(int fd, const struct maps_line *m)
{
	struct stat st;

	return fstat(fd, &st) == 0 && st.st_ino == m->inode &&
	       st.st_dev == makedev(m->major, m->minor);
}

/*
 * The files opened before, kept open (the registry lock guards them): a file deleted or replaced
 * since, by an upgrade say, is still reached through its fd. Checked against the mapping each time:
 * a program may close every fd it did not open itself, and the number may be reused.
 */
#define KEPT_MAX 16
static struct kept {
	dev_t dev;
	ino_t ino;
	int fd;
} kept[KEPT_MAX];
static size_t nkept;

/* The entry for m's file, or NKEPT; *valid says whether its fd still is that file. */
static size_t kept_entry(const struct maps_line *m, bool *valid)
{
	size_t i;

	for (i = 0; i < nkept; i++)
		if (kept[i].ino == m->inode && kept[i].dev == makedev(m->major, m->minor))
			break;
	*valid = i < nkept && same_file(kept[i].fd, m);
	return i;
}

static int kept_fd(const struct maps_line *m)
{
	bool valid;
	size_t i = kept_entry(m, &valid);

	return valid ? fcntl(kept[i].fd, F_DUPFD_CLOEXEC, 0) : -1;
}

/* A kept fd found closed or reused is replaced, never closed: its number may be the program's. */
static void keep(int fd, const struct maps_line *m)
{
	bool valid;
	size_t i = kept_entry(m, &valid);
	int dup;

	if (valid || (i == nkept && nkept == KEPT_MAX) || (dup = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0)
		return;
	kept[i] = (struct kept){ makedev(m->major, m->minor), (ino_t)m->inode, dup };
	if (i == nkept)
		nkept++;
}

/*
 * Open the file of first: by its path if that is still the file mapped, else (deleted or replaced
 * since) through the fd kept from an earlier flip, or through /proc/self/map_files, which needs
 * CAP_CHECKPOINT_RESTORE or CAP_SYS_ADMIN. -1 where none works.
 */
static int open_mapped(const struct maps_line *first)
{
	char path[64];
	int fd;

	if (first->inode == 0)
		return -1;
	if (first->path[0] == '/') {
		fd = open(first->path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0 && same_file(fd, first)) {
			keep(fd, first);
			return fd;
		}
		if (fd >= 0)
			close(fd);
	}
	fd = kept_fd(first);
	if (fd >= 0)
		return fd;
	snprintf(path, sizeof(path), "/proc/self/map_files/%lx-%lx", (unsigned long)first->start,
		 (unsigned long)first->end);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && !same_file(fd, first)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/*
 * An fd of the file mapped contiguously over all of [start, end) and the offset of start in it; -1
 * where there is none (anonymous memory, several files, a file that cannot be opened). *in_file
 * says whether start lies in a mapping of a file, opened or not.
 */
static int find_file(uintptr_t start, uintptr_t end, off_t *offset, bool *in_file)
{
	struct maps_line first = { 0 }, prev = { 0 }, m;
	FILE *maps = fopen("/proc/self/maps", "re");
	char *line = NULL;
	size_t cap = 0;
	int fd = -1;

	if (!maps)
		return -1;
	while (getline(&line, &cap, maps) > 0 && parse_maps_line(line, &m)) {
		if (m.end <= start)
			continue;
		if (fd < 0) {
			*in_file = m.start <= start && m.inode != 0;
			if (m.start > start || (fd = open_mapped(&m)) < 0)
				break;
			first = prev = m; /* its path dies with the next line: opened already */
		} else if (continues(&first, &prev, &m)) {
			prev = m;
		} else {
			break;
		}
		if (prev.end >= end) {
			*offset = (off_t)(first.offset + (start - first.start));
			free(line);
			fclose(maps);
			return fd;
		}
	}
	if (fd >= 0)
		close(fd);
	free(line);
	fclose(maps);
	return -1;
}

static int explain_mmap(int err, const struct lk__page_run *run)
{
	return lk__fail(
		err == EACCES ? -EPERM : -err,
		"cannot map a copy of the code at %#lx to rewrite static-key sites in: mmap: %s%s",
		(unsigned long)run->start, strerror(err),
		err == EPERM || err == EACCES ?
			" (a seccomp filter or a security module refuses "
			"it: allow mmap, mprotect and mremap, or build with -DLK_KEYS_PORTABLE=ON)" :
			"");
}

/*
 * Whether a page of the run, in a mapping of a file, holds bytes of its own: a private copy made
 * when it was written (pagemap: present and not a file page, or swapped out). Such a page may hold
 * a uprobe's breakpoint, which the kernel removes from the file's mappings only: in an anonymous
 * copy it would stay after the tracer removed the uprobe, and a thread reaching it would be sent a
 * SIGTRAP it cannot survive. True where pagemap cannot be read.
 */
static bool holds_own_bytes(const struct lk__page_run *run)
{
	size_t pagesz = (size_t)sysconf(_SC_PAGESIZE);
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	bool own = fd < 0;

	for (uintptr_t a = run->start; !own && a < run->end; a += pagesz) {
		uint64_t e;

		if (pread(fd, &e, sizeof(e), (off_t)(a / pagesz * sizeof(e))) != (ssize_t)sizeof(e))
			own = true;
		else if (e & LK__PM_SWAP || ((e & LK__PM_PRESENT) && !(e & LK__PM_FILE)))
			own = true;
	}
	if (fd >= 0)
		close(fd);
	return own;
}

static int refuse_anonymous(const struct lk__page_run *run)
{
	return lk__fail(
		-ESTALE,
		"cannot rewrite the static-key sites at %#lx: the file those pages were loaded from "
		"has been deleted or replaced since (an upgrade?), so the rewritten copy would be "
		"anonymous memory, and the pages hold changes of their own (breakpoints of a debugger "
		"or of a uprobe, or sites written while the process had one thread) that such a copy "
		"would keep after their owner removed them. Restart the program to load the new file, "
		"or flip with CAP_CHECKPOINT_RESTORE (or as root), which reopens the old one through "
		"/proc/self/map_files.",
		(unsigned long)run->start);
}

/*
 * A private copy of the run, still writable: of its file where possible, else anonymous where that
 * is safe; NULL (with the error in *err) where it is not.
 */
static void *map_copy(const struct lk__page_run *run, bool *file_backed, int *err)
{
	size_t len = run->end - run->start;
	void *addr = MAP_FAILED;
	bool in_file = false;
	off_t offset;
	int fd = find_file(run->start, run->end, &offset, &in_file);

	if (fd >= 0) {
		addr = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, offset);
		close(fd);
	}
	*file_backed = addr != MAP_FAILED;
	if (addr != MAP_FAILED)
		return addr;
	if (in_file && holds_own_bytes(run)) {
		*err = refuse_anonymous(run);
		return NULL;
	}
	addr = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (addr == MAP_FAILED) {
		*err = explain_mmap(errno, run);
		return NULL;
	}
	return addr;
}

static int fill_copy(void *addr, const struct lk__page_run *run, const struct lk__patch *p,
		     size_t n, bool restore)
{
	lk__arch_copy_code(addr, (const void *)run->start, run->end - run->start);
	for (size_t i = 0; i < n; i++) {
		if ((uintptr_t)p[i].addr < run->start || (uintptr_t)p[i].addr >= run->end)
			continue;
		memcpy((uint8_t *)addr + ((uintptr_t)p[i].addr - run->start),
		       restore ? p[i].old : p[i].insn, LK__SITE_LEN);
	}
	return mprotect(addr, run->end - run->start, run->prot) == 0 ? 0 : errno;
}

/* The run's new pages, ready to move into place. */
static int prepare(const struct lk__page_run *run, const struct lk__patch *p, size_t n,
		   bool restore, struct copy *c)
{
	size_t len = run->end - run->start;
	bool file_backed;
	int err = 0;

	c->len = len;
	c->addr = map_copy(run, &file_backed, &err);
	if (!c->addr)
		return err;
	err = fill_copy(c->addr, run, p, n, restore);
	if (err && file_backed && !holds_own_bytes(run)) {
		/* A file on a noexec mount, or a policy that allows only anonymous code: retry. */
		munmap(c->addr, len);
		c->addr =
			mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		err = c->addr == MAP_FAILED ? errno : fill_copy(c->addr, run, p, n, restore);
	}
	if (err) {
		if (c->addr != MAP_FAILED)
			munmap(c->addr, len);
		c->addr = NULL;
		return lk__patch_explain_mprotect(err, (const void *)run->start);
	}
	return 0;
}

static void discard(struct copy *copies, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (copies[i].addr)
			munmap(copies[i].addr, copies[i].len);
}

static int move_into_place(struct copy *c, const struct lk__page_run *run)
{
	int err;

	if (mremap(c->addr, c->len, c->len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)run->start) !=
	    MAP_FAILED) {
		c->addr = NULL;
		return 0;
	}
	err = errno;
	return lk__fail(
		err == EACCES ? -EPERM : -err,
		"cannot move the rewritten copy of the code at %#lx into place: mremap: %s%s",
		(unsigned long)run->start, strerror(err),
		err == EPERM || err == EACCES ?
			" (the code is sealed with mseal(), or a seccomp filter "
			"refuses mremap: allow it, or build with -DLK_KEYS_PORTABLE=ON)" :
		err == EINVAL ?
			" (code in hugetlbfs pages cannot be rewritten a page at a time: "
			"load it into ordinary pages, or build with -DLK_KEYS_PORTABLE=ON)" :
		err == ENOMEM ? " (out of memory, or of mappings: vm.max_map_count)" :
				"");
}

int lk__remap(const struct lk__page_run *runs, size_t nruns, const struct lk__patch *p, size_t n,
	      bool restore)
{
	struct copy *copies = calloc(nruns ? nruns : 1, sizeof(*copies));
	size_t moved = 0;
	int err = 0;

	if (!copies)
		return lk__fail(-ENOMEM, "out of memory preparing to rewrite %zu static-key sites",
				n);
	for (size_t i = 0; i < nruns && !err; i++)
		err = prepare(&runs[i], p, n, restore, &copies[i]);
	while (moved < nruns && !err) {
		err = move_into_place(&copies[moved], &runs[moved]);
		if (!err)
			moved++;
	}
	discard(copies, nruns);
	free(copies);
	if (err && moved > 0 && !restore)
		lk__remap(runs, moved, p, n, true); /* put back what moved; its own error is lost */
	return err;
}
