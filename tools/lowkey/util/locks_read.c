// SPDX-License-Identifier: MIT
/*
 * lowkey locks: reading the files liblowkey-locks.so leaves (include/internal/lock_file.h), one
 * per process image, into rows of figures in ns, and naming their call sites with libdw.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <lowkey/lock.h>

#include "builtin.h"
#include "internal/utf8.h"
#include "locks.h"
#include "probe_elf.h"
#include "symbolize.h"

/* _exit(), exec() and signals leave no mark in the file (LKL_F_EXITED is set by the destructor). */
enum lks_ending lks_ending_of(const struct lks_proc *p, const struct lks_proc *all, size_t n,
			      pid_t command, int status)
{
	if (p->h->flags & LKL_F_EXITED)
		return LKS_ENDED_EXIT;
	for (size_t i = 0; i < n; i++)
		if (all[i].h->pid == p->h->pid && all[i].h->start_ns > p->h->start_ns)
			return LKS_ENDED_EXEC;
	if (p->h->pid == (uint32_t)command)
		return WIFSIGNALED(status) ? LKS_ENDED_SIGNAL : LKS_ENDED_UNDER_EXIT;
	return LKS_ENDED_UNKNOWN;
}

static uint64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct lks_clock lks_clock_now(void)
{
	struct lks_clock best = { 0, 0, UINT64_MAX };

	for (int i = 0; i < 5; i++) {
		uint64_t before = lk__lock_ticks(), ns = monotonic_ns(), after = lk__lock_ticks();

		if (after - before < best.width)
			best = (struct lks_clock){ ns, before + (after - before) / 2,
						   after - before };
	}
	return best;
}

/* ---- a process's file ---- */

const char *lks_validate(const struct lkl_header *h, size_t size)
{
	if (size < LKL_HEADER_SIZE)
		return "shorter than its header";
	if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != LKL_MAGIC)
		return "no lowkey locks header (the process died while starting?)";
	if (h->version != LKL_VERSION)
		return "written by another version of liblowkey-locks.so";
	if (h->header_size != LKL_HEADER_SIZE || h->entry_size != LKL_ENTRY_SIZE)
		return "unexpected header or entry size";
	if (!h->capacity || (h->capacity & (h->capacity - 1)) || h->capacity > (1u << 24))
		return "bad table capacity";
	if (size < lkl_file_size(h->capacity) ||
	    h->modules_offset != LKL_HEADER_SIZE + (uint64_t)h->capacity * LKL_ENTRY_SIZE)
		return "truncated";
	return NULL;
}

/* Holes and data are found in units no finer than this (tmpfs: the page). */
#define EXTENT_UNIT 4096u

static void mark_present(struct lks_proc *p, uint64_t from, uint64_t to)
{
	for (uint64_t u = from / EXTENT_UNIT; u * EXTENT_UNIT < to; u++)
		p->present[u] = 1;
}

/* [at, end) into the buffer; how much was read (less: the file was cut meanwhile), or -1. */
ssize_t lks_pread_all(int fd, void *buf, size_t len, uint64_t at)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = pread(fd, (char *)buf + got, len - got, (off_t)(at + got));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

static ssize_t read_range(int fd, struct lks_proc *p, uint64_t at, uint64_t end)
{
	ssize_t got = lks_pread_all(fd, (char *)p->data + at, end - at, at);

	if (got < 0)
		return -1;
	mark_present(p, at, at + (uint64_t)got);
	return got;
}

/*
 * The file, read rather than mapped: a process that cut its file while lowkey had it mapped
 * would kill lowkey with SIGBUS. Only its data is read: the table is a sparse file whose untouched
 * pages are holes, so a process that took a few locks costs a few pages, not its whole table, and
 * the holes stay untouched zeroed memory here. Where the file system cannot tell holes
 * (SEEK_DATA fails), all of it is read. A file cut meanwhile is read as far as it goes (validate()
 * says it is truncated). NULL, or the reason why not.
 */
static const char *read_table(int fd, size_t size, struct lks_proc *p)
{
	uint64_t at = 0, end = size;
	struct stat st;

	if (size > lkl_file_size(1u << 24))
		return "larger than any table liblowkey-locks.so writes";
	p->data = calloc(1, size);
	p->present = calloc(size / EXTENT_UNIT + 1, 1);
	if (!p->data || !p->present)
		return "out of memory";
	while (at < end) {
		off_t data = lseek(fd, (off_t)at, SEEK_DATA), hole;
		ssize_t got;

		if (data < 0 && errno == ENXIO)
			break; /* holes to the end */
		hole = data < 0 ? -1 : lseek(fd, data, SEEK_HOLE);
		if (data < 0)
			data = (off_t)at; /* holes unknown here: read it all */
		if (hole < 0 || (uint64_t)hole > end)
			hole = (off_t)end;
		got = read_range(fd, p, (uint64_t)data, (uint64_t)hole);
		if (got < 0)
			return "cannot be read";
		if ((uint64_t)got < (uint64_t)(hole - data)) {
			end = (uint64_t)data + (uint64_t)got;
			break;
		}
		at = (uint64_t)hole;
	}
	if (fstat(fd, &st) == 0 && (uint64_t)st.st_size < end)
		end = (uint64_t)st.st_size;
	p->size = end;
	return NULL;
}

/* Whether entry i lies in data read from the file (not in a hole, all zero: no lock). */
static bool entry_present(const struct lks_proc *p, uint32_t i)
{
	uint64_t at = LKL_HEADER_SIZE + (uint64_t)i * LKL_ENTRY_SIZE;

	return p->present[at / EXTENT_UNIT] || p->present[(at + LKL_ENTRY_SIZE - 1) / EXTENT_UNIT];
}

static int load_proc(const char *path, struct lks_proc *p)
{
	const char *bad;
	struct stat st;
	int fd = open_regular_file(path, NULL, 0);

	memset(p, 0, sizeof(*p));
	snprintf(p->path, sizeof(p->path), "%s", path);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) != 0 || st.st_size <= 0) {
		close(fd);
		return -EINVAL;
	}
	bad = read_table(fd, (size_t)st.st_size, p);
	close(fd);
	p->h = p->data;
	if (!bad)
		bad = lks_validate(p->h, p->size);
	if (bad) {
		cli_error("locks", NULL, "skipping %s: %s", path, bad);
		return -EINVAL;
	}
	p->entries = (const struct lkl_entry *)((const char *)p->data + LKL_HEADER_SIZE);
	p->modules = (const struct lkl_module *)((const char *)p->data + p->h->modules_offset);
	p->nmodules = p->h->nmodules < LKL_MAX_MODULES ? p->h->nmodules : LKL_MAX_MODULES;
	return 0;
}

/* ---- its rows ---- */

static uint64_t to_ns(uint64_t ticks, double ticks_per_ns)
{
	return (uint64_t)((double)ticks / ticks_per_ns + 0.5);
}

static uint64_t mean(uint64_t total, uint64_t n)
{
	return n ? (total + n / 2) / n : 0;
}

/* sampled holds: mean x count, exact when every hold was timed */
static void holds(uint64_t samples, uint64_t total, uint64_t max, uint64_t count, double tpn,
		  uint64_t *total_ns, uint64_t *max_ns, uint64_t *mean_ns)
{
	double m = samples ? (double)total / (double)samples : 0;

	*mean_ns = to_ns((uint64_t)(m + 0.5), tpn);
	*max_ns = to_ns(max, tpn);
	*total_ns = samples >= count ? to_ns(total, tpn) :
				       to_ns((uint64_t)(m * (double)count), tpn);
}

const char lks_sort_names[] = "wait, wait-max, acquired, contended, owners, hold";

static const char *const sort_keys[] = {
	[LKS_SORT_WAIT] = "wait",	  [LKS_SORT_WAIT_MAX] = "wait-max",
	[LKS_SORT_ACQUIRED] = "acquired", [LKS_SORT_CONTENDED] = "contended",
	[LKS_SORT_OWNERS] = "owners",	  [LKS_SORT_HOLD] = "hold",
};

bool lks_sort_parse(const char *name, enum lks_sort *out)
{
	for (size_t i = 0; i < sizeof(sort_keys) / sizeof(sort_keys[0]); i++) {
		if (strcmp(name, sort_keys[i]) == 0) {
			*out = (enum lks_sort)i;
			return true;
		}
	}
	return false;
}

const char *lks_sort_name(enum lks_sort key)
{
	return sort_keys[key];
}

static uint64_t sort_value(const struct lks_row *r, enum lks_sort key)
{
	switch (key) {
	case LKS_SORT_WAIT_MAX:
		return r->wait_max_ns;
	case LKS_SORT_ACQUIRED:
		return r->acquisitions;
	case LKS_SORT_CONTENDED:
		return r->e->contended;
	case LKS_SORT_OWNERS:
		return r->e->owner_changes;
	case LKS_SORT_HOLD:
		return r->hold_ns;
	case LKS_SORT_WAIT:
	default:
		return r->wait_ns;
	}
}

/* Greatest first; ties by total wait, then acquisitions, then address, so the order is stable. */
static int by_key(const void *a, const void *b, void *arg)
{
	const struct lks_row *x = a, *y = b;
	enum lks_sort key = *(const enum lks_sort *)arg;
	uint64_t u = sort_value(x, key), v = sort_value(y, key);

	if (u != v)
		return u < v ? 1 : -1;
	if (x->wait_ns != y->wait_ns)
		return x->wait_ns < y->wait_ns ? 1 : -1;
	if (x->acquisitions != y->acquisitions)
		return x->acquisitions < y->acquisitions ? 1 : -1;
	return x->address < y->address ? -1 : x->address > y->address;
}

/* ---- naming call sites ---- */

static const char *module_path(const struct lkl_header *h, const struct lkl_module *m)
{
	return m->path[0] ? m->path : h->exe;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* Once per object: its file is not the build the process ran (it was replaced, or is the host's). */
static void say_other_build(const struct lks_proc *p, const char *path, bool other)
{
	char shown[LKL_PATH_MAX * 4];

	if (other)
		fprintf(stderr,
			"lowkey locks: %s is not the build process %u ran (another build-id): its "
			"call sites are named by object and offset only\n",
			lk__text_escape(path, shown, sizeof(shown)), (unsigned int)p->h->pid);
}

/* The objects the process wrote down, for libdw; NULL: no memory (then no symbols). */
static struct symbolizer *open_symbolizer(const struct lks_proc *p)
{
	struct symbol_object *objects = calloc(p->nmodules ? p->nmodules : 1, sizeof(*objects));
	struct symbolizer *s;

	if (!objects)
		return NULL;
	for (uint32_t i = 0; i < p->nmodules; i++) {
		const struct lkl_module *m = &p->modules[i];

		objects[i] = (struct symbol_object){ module_path(p->h, m), m->bias, m->build_id,
						     m->build_id_len < LKL_BUILD_ID_MAX ?
							     m->build_id_len :
							     LKL_BUILD_ID_MAX,
						     false };
	}
	s = symbolizer_open_objects(objects, p->nmodules);
	for (uint32_t i = 0; s && i < p->nmodules; i++)
		say_other_build(p, objects[i].path, objects[i].other_build);
	free(objects);
	return s;
}

/*
 * A call site by its return address: the object and offset from the process's own table (so
 * without libdw or debug information a site is still "libfoo.so.1+0x1a2b", for addr2line later),
 * the function and file:line from libdw where it knows them.
 */
void lks_name_site(const struct lks_proc *p, struct symbolizer *sym, uint64_t ra,
		   struct lks_site *out)
{
	/* a return address points after the call: look up the call itself */
	uint64_t addr = ra ? ra - 1 : 0;
	const struct lkl_module *m = NULL;
	struct symbol_place place;

	memset(out, 0, sizeof(*out));
	out->address = ra;
	if (!ra)
		return;
	for (uint32_t i = 0; i < p->nmodules; i++)
		if (addr >= p->modules[i].start && addr < p->modules[i].end)
			m = &p->modules[i];
	if (m) {
		snprintf(out->module, sizeof(out->module), "%.63s",
			 base_name(module_path(p->h, m)));
		out->offset = ra - m->bias;
	}
	if (!sym)
		return;
	symbolizer_place(sym, addr, false, &place);
	if (place.function)
		snprintf(out->function, sizeof(out->function), "%s", place.function);
	if (place.file) {
		snprintf(out->file, sizeof(out->file), "%s", base_name(place.file));
		out->line = place.line;
	}
}

bool lks_entry_used(const struct lkl_entry *e)
{
	return e->key && (e->acquisitions || e->read_acquisitions || e->try_fails || e->posts);
}

void lks_row_of(const struct lkl_entry *e, double tpn, struct lks_row *r)
{
	r->e = e;
	r->kind = (enum lkl_kind)(e->key & LKL_KIND_MASK);
	r->address = e->key & ~(LKL_KIND_MASK | LKL_RETIRED);
	r->destroyed = e->key & LKL_RETIRED;
	r->acquisitions = e->acquisitions + e->read_acquisitions;
	r->wait_ns = to_ns(e->wait_total, tpn);
	r->wait_max_ns = to_ns(e->wait_max, tpn);
	r->wait_mean_ns = mean(r->wait_ns, e->contended);
	holds(e->hold_samples, e->hold_total, e->hold_max, e->acquisitions, tpn, &r->hold_ns,
	      &r->hold_max_ns, &r->hold_mean_ns);
	holds(e->read_hold_samples, e->read_hold_total, e->read_hold_max, e->read_acquisitions, tpn,
	      &r->read_hold_ns, &r->read_hold_max_ns, &r->read_hold_mean_ns);
}

int lks_build_rows(struct lks_proc *p, double tpn, uint64_t end_ns, enum lks_sort key)
{
	const struct lkl_header *h = p->h;
	struct symbolizer *sym;
	size_t n = 0;

	p->duration_ns = (h->flags & LKL_F_EXITED) && h->end_ns > h->start_ns ?
				 h->end_ns - h->start_ns :
				 (end_ns > h->start_ns ? end_ns - h->start_ns : 0);
	for (uint32_t i = 0; i < h->capacity; i++)
		n += entry_present(p, i) && lks_entry_used(&p->entries[i]);
	p->rows = calloc(n ? n : 1, sizeof(*p->rows));
	if (!p->rows)
		return -ENOMEM;
	n = 0;
	for (uint32_t i = 0; i < h->capacity; i++) {
		const struct lkl_entry *e = &p->entries[i];
		struct lks_row *r;

		if (!entry_present(p, i) || !lks_entry_used(e))
			continue;
		r = &p->rows[n++];
		lks_row_of(e, tpn, r);
		p->acquisitions += r->acquisitions;
		p->contended += e->contended;
		p->wait_ns += r->wait_ns;
	}
	p->nrows = n;
	p->nlocks = n + h->folded_locks;
	p->acquisitions += h->folded_acquisitions;
	if (n)
		qsort_r(p->rows, n, sizeof(*p->rows), by_key, &key);
	sym = n ? open_symbolizer(p) : NULL;
	for (size_t i = 0; i < n; i++) {
		lks_name_site(p, sym, p->rows[i].e->site, &p->rows[i].site);
		lks_name_site(p, sym, p->rows[i].e->first_site, &p->rows[i].first_site);
	}
	symbolizer_close(sym);
	return 0;
}

/* ---- the directory ---- */

void lks_free_proc(struct lks_proc *p)
{
	free(p->rows);
	free(p->data);
	free(p->present);
}

static int by_start(const void *a, const void *b)
{
	const struct lks_proc *x = a, *y = b;

	return x->h->start_ns < y->h->start_ns ? -1 : x->h->start_ns > y->h->start_ns;
}

int lks_load_dir(const char *dir, struct lks_proc **out, size_t *count)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	struct lks_proc *v = NULL;
	size_t n = 0;

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char path[PATH_MAX];
		struct lks_proc *grown;
		size_t len = strlen(de->d_name);

		if (len < 5 || strcmp(de->d_name + len - 4, ".lkl") != 0)
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= (int)sizeof(path))
			continue;
		grown = realloc(v, (n + 1) * sizeof(*v));
		if (!grown)
			break;
		v = grown;
		if (load_proc(path, &v[n]) == 0)
			n++;
		else
			lks_free_proc(&v[n]);
		unlink(path);
	}
	closedir(d);
	if (n)
		qsort(v, n, sizeof(*v), by_start);
	*out = v;
	*count = n;
	return 0;
}
