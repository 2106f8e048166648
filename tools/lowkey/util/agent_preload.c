// SPDX-License-Identifier: MIT
/*
 * lowkey agent: the lock figures of processes run with liblowkey-locks.so preloaded (--locks-dir).
 *
 * The library keeps a table per process image in a file of $LOWKEY_LOCKS_DIR
 * (include/internal/lock_file.h), counted in place as the program's threads take their locks. At
 * each scan the agent reads the tables there of the live processes it may follow; the programs
 * never know. Anyone who may write to the directory may put a file there, so each is checked
 * before a figure of it counts:
 *  - opened without following a link, and only if it is a regular file (nothing blocks, no device
 *    is opened), then read, never mapped (a file cut meanwhile would kill the agent with SIGBUS),
 *    a bounded chunk at a time and only where the file has data (the table is a sparse file);
 *  - its header validated as `lowkey locks` validates it, its pid the one its name gives;
 *  - that process alive, started before the table was made (not a later process given the pid
 *    again), taken by --process, and its owner the file's: a user's agent reads only that user's
 *    files of that user's processes; root's reads any user's, and takes a file of root's for any
 *    process (a daemon that made its table before it gave up root's rights);
 *  - of the files of one pid, only the latest image's (a process that exec()ed makes another).
 *
 * Each lock is named as `lowkey locks` shows it: a global or static variable by its symbol
 * ("queue_lock", or "server+0x40" inside a structure), any other by its kind and the call site
 * that first took it ("mutex at worker (server.c:88)"), one never taken by its kind and address.
 * Locks are then summed by name as named locks are, under --max-locks: the names met at a scan are
 * placed busiest first (longest total wait, then most acquisitions), the rest summed under
 * lock="other". A name keeps its place for the process's life, and a lock its name: a call site or
 * a variable is named once, when first met, with the one symbolizer (symbolize.h) opened on the
 * process for the scans that meet new ones.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "internal/proc.h"
#include "locks.h"
#include "probe_elf.h"
#include "symbolize.h"

#define CHUNK_ENTRIES 512u	    /* entries read at a time: 96 KiB */
#define MAX_NAMED (1u << 16)	    /* entries and call sites named per table; the rest: "other" */
#define BY_SITE (1ull << 62)	    /* a name's key by call site: kind | BY_SITE, the site */
#define MIN_CLOCK_NS (20 * 1000000) /* the lock counter's rate measured over at least this */

/* A name found for a lock: by its address (a variable), or by its kind and first call site. */
struct agent_entry_name {
	uint64_t key, site; /* key 0: an empty slot */
	uint32_t lock;	    /* index + 1 into the table's locks; 0: "other" */
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- the names met: (key, site) -> lock ---- */

static size_t name_hash(uint64_t key, uint64_t site)
{
	return (size_t)(((key * 0x9E3779B97F4A7C15ull) ^ site) * 0xC2B2AE3D27D4EB4Full >> 17);
}

static struct agent_entry_name *name_slot(const struct agent_table *t, uint64_t key, uint64_t site)
{
	size_t mask = t->names_size - 1;

	for (size_t i = name_hash(key, site) & mask;; i = (i + 1) & mask) {
		struct agent_entry_name *n = &t->names[i];

		if (!n->key || (n->key == key && n->site == site))
			return n;
	}
}

static const struct agent_entry_name *name_find(const struct agent_table *t, uint64_t key,
						uint64_t site)
{
	const struct agent_entry_name *n = t->names_size ? name_slot(t, key, site) : NULL;

	return n && n->key ? n : NULL;
}

/* Room for one more name, the table kept at most half full: false when full or out of memory. */
static bool names_room(struct agent_table *t)
{
	size_t size = t->names_size ? 2 * t->names_size : 64;
	struct agent_entry_name *old = t->names;

	if (2 * (t->nnames + 1) <= t->names_size)
		return true;
	if (t->nnames >= MAX_NAMED)
		return false;
	t->names = calloc(size, sizeof(*t->names));
	if (!t->names) {
		t->names = old;
		return false;
	}
	t->names_size = size;
	for (size_t i = 0; old && i < size / 2; i++)
		if (old[i].key)
			*name_slot(t, old[i].key, old[i].site) = old[i];
	free(old);
	return true;
}

/* ---- a table's file ---- */

/* What one scan reads of a table. */
struct reading {
	struct lkl_header h;
	struct lkl_module *modules; /* read when a lock is to be named */
	uint32_t nmodules;
	double tpn;		 /* ticks per ns */
	struct agent_lock *sums; /* per lock of the table, as named before; [nlocks]: "other" */
	size_t nsums;
	struct fresh *fresh; /* entries with no name yet */
	size_t nfresh, fresh_cap;
	uint32_t *fresh_index; /* open addressing on (key, site): index + 1 into fresh, 0 empty */
	size_t fresh_index_size;
	uint64_t unnamed; /* entries past MAX_NAMED, summed under "other" */
};

/* An entry met with no name yet, its figures, and the name it gets. */
struct fresh {
	uint64_t key, site; /* as in struct agent_entry_name */
	enum lkl_kind kind;
	uint64_t address, first_site;
	struct agent_lock fig;
	char name[256];
};

static bool parse_file_name(const char *name, pid_t *pid)
{
	char *end;
	long v = strtol(name, &end, 10);

	if (v <= 0 || v > 1 << 30 || *end != '-' || name[0] < '0' || name[0] > '9')
		return false;
	*pid = (pid_t)v;
	strtoul(end + 1, &end, 10);
	return strcmp(end, ".lkl") == 0;
}

/* The file name in dir_fd opened for reading if it is a regular file; *st its status. -1: not. */
static int open_file(int dir_fd, const char *name, struct stat *st)
{
	int pfd = openat(dir_fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC), fd = -1;

	if (pfd < 0)
		return -1;
	if (fstat(pfd, st) == 0 && S_ISREG(st->st_mode))
		fd = open_regular_at(pfd, name, NULL, 0);
	close(pfd);
	return fd < 0 ? -1 : fd;
}

/* The file's owner may stand for the process's (see the top of the file). */
static bool owner_fits(uid_t file_uid, pid_t pid)
{
	struct lk__proc_ids ids;

	if (lk__proc_ids(pid, &ids) != 0)
		return false;
	if (geteuid() != 0)
		return file_uid == geteuid() && ids.euid == geteuid();
	return file_uid == ids.euid || file_uid == 0;
}

/*
 * Whether the process that started at start (clock ticks after boot, /proc/PID/stat) was there when
 * the table was made (h->start_ns, CLOCK_MONOTONIC): a process given the pid later was not.
 */
static bool started_before(unsigned long long start, const struct lkl_header *h)
{
	struct timespec boot, mono;
	double tick = 1e9 / (double)sysconf(_SC_CLK_TCK), offset;

	clock_gettime(CLOCK_BOOTTIME, &boot);
	clock_gettime(CLOCK_MONOTONIC, &mono);
	offset = (double)(boot.tv_sec - mono.tv_sec) * 1e9 + (double)(boot.tv_nsec - mono.tv_nsec);
	return (double)start * tick <= (double)h->start_ns + offset + tick;
}

/* The header, validated, its strings ended. false: not a table to read. */
static bool read_header(int fd, const struct stat *st, pid_t pid, struct lkl_header *h)
{
	if (lks_pread_all(fd, h, sizeof(*h), 0) != (ssize_t)sizeof(*h) ||
	    lks_validate(h, (size_t)st->st_size) || h->pid != (uint32_t)pid)
		return false;
	h->comm[sizeof(h->comm) - 1] = 0;
	h->exe[sizeof(h->exe) - 1] = 0;
	return true;
}

/* The objects the process wrote down, their paths ended; false when none could be read. */
static bool read_modules(int fd, struct reading *rd)
{
	uint32_t n = rd->h.nmodules < LKL_MAX_MODULES ? rd->h.nmodules : LKL_MAX_MODULES;
	ssize_t got;

	if (rd->modules)
		return true;
	rd->modules = calloc(n ? n : 1, sizeof(*rd->modules));
	if (!rd->modules)
		return false;
	got = lks_pread_all(fd, rd->modules, n * sizeof(*rd->modules), rd->h.modules_offset);
	rd->nmodules = got > 0 ? (uint32_t)((size_t)got / sizeof(*rd->modules)) : 0;
	for (uint32_t i = 0; i < rd->nmodules; i++)
		rd->modules[i].path[LKL_PATH_MAX - 1] = 0;
	return true;
}

static bool in_module(const struct reading *rd, uint64_t address)
{
	for (uint32_t i = 0; i < rd->nmodules; i++)
		if (address >= rd->modules[i].start && address < rd->modules[i].end)
			return true;
	return false;
}

static void add_figures(struct agent_lock *to, const struct agent_lock *from)
{
	to->acq += from->acq;
	to->read_acq += from->read_acq;
	to->contended += from->contended;
	to->wait_ns += from->wait_ns;
	to->hold_ns += from->hold_ns;
	to->read_hold_ns += from->read_hold_ns;
	to->shared |= from->shared;
	to->present = true;
}

static struct agent_lock figures_of(const struct lkl_entry *e, double tpn)
{
	struct lks_row r;

	lks_row_of(e, tpn, &r);
	return (struct agent_lock){ .acq = e->acquisitions,
				    .read_acq = e->read_acquisitions,
				    .contended = e->contended,
				    .wait_ns = r.wait_ns,
				    .hold_ns = r.hold_ns,
				    .read_hold_ns = r.read_hold_ns,
				    .shared = r.kind == LKL_RWLOCK,
				    .present = true };
}

/* The slot of (key, site) in the index of rd's fresh entries: index + 1 into them, or 0. */
static uint32_t *fresh_slot(const struct reading *rd, uint64_t key, uint64_t site)
{
	size_t mask = rd->fresh_index_size - 1;

	for (size_t i = name_hash(key, site) & mask;; i = (i + 1) & mask) {
		uint32_t *k = &rd->fresh_index[i];

		if (!*k || (rd->fresh[*k - 1].key == key && rd->fresh[*k - 1].site == site))
			return k;
	}
}

/* Room for one more fresh entry, and its index at most half full: false when there is none. */
static bool fresh_room(struct reading *rd)
{
	if (rd->nfresh == rd->fresh_cap) {
		size_t cap = rd->fresh_cap ? 2 * rd->fresh_cap : 16;
		struct fresh *grown = realloc(rd->fresh, cap * sizeof(*grown));

		if (!grown)
			return false;
		rd->fresh = grown;
		rd->fresh_cap = cap;
	}
	if (2 * (rd->nfresh + 1) > rd->fresh_index_size) {
		size_t size = rd->fresh_index_size ? 2 * rd->fresh_index_size : 64;
		uint32_t *old = rd->fresh_index;

		rd->fresh_index = calloc(size, sizeof(*rd->fresh_index));
		if (!rd->fresh_index) {
			rd->fresh_index = old;
			return false;
		}
		rd->fresh_index_size = size;
		for (size_t i = 0; i < rd->nfresh; i++)
			*fresh_slot(rd, rd->fresh[i].key, rd->fresh[i].site) = (uint32_t)i + 1;
		free(old);
	}
	return true;
}

/* An entry's figures: to the lock its name has, or kept for naming. */
static void take_entry(struct agent_table *t, int fd, struct reading *rd, const struct lkl_entry *e)
{
	enum lkl_kind kind = (enum lkl_kind)(e->key & LKL_KIND_MASK);
	uint64_t address = e->key & ~(LKL_KIND_MASK | LKL_RETIRED), key, site;
	struct agent_lock fig = figures_of(e, rd->tpn);
	const struct agent_entry_name *n;
	struct fresh *f;
	uint32_t *slot;

	read_modules(fd, rd);
	/* a variable is named by its address; anything else by where it was first taken */
	if (!e->first_site || in_module(rd, address))
		key = address | kind, site = 0;
	else
		key = kind | BY_SITE, site = e->first_site;
	n = name_find(t, key, site);
	if (n) {
		add_figures(&rd->sums[n->lock ? n->lock - 1 : rd->nsums - 1], &fig);
		return;
	}
	slot = rd->fresh_index_size ? fresh_slot(rd, key, site) : NULL;
	if (slot && *slot) {
		add_figures(&rd->fresh[*slot - 1].fig, &fig);
		return;
	}
	if (t->nnames + rd->nfresh >= MAX_NAMED || !fresh_room(rd)) {
		add_figures(&rd->sums[rd->nsums - 1], &fig);
		rd->unnamed++;
		return;
	}
	f = &rd->fresh[rd->nfresh++];
	f->key = key;
	f->site = site;
	f->kind = kind;
	f->address = address;
	f->first_site = e->first_site;
	f->fig = fig;
	f->name[0] = 0;
	*fresh_slot(rd, key, site) = (uint32_t)rd->nfresh;
}

/*
 * The entries where the file has data (SEEK_DATA; all of it where the file system cannot tell),
 * CHUNK_ENTRIES at a time. An entry across the end of a data extent is read whole, holes as zeros,
 * and once. false when the file cannot be read.
 */
static bool read_entries(struct agent_table *t, int fd, struct reading *rd)
{
	struct lkl_entry *buf = malloc(CHUNK_ENTRIES * sizeof(*buf));
	uint64_t next = 0, cap = rd->h.capacity;
	bool ok = buf != NULL;

	while (ok && next < cap) {
		uint64_t at = LKL_HEADER_SIZE + next * LKL_ENTRY_SIZE, end = rd->h.modules_offset;
		off_t data = lseek(fd, (off_t)at, SEEK_DATA), hole;
		uint64_t first, last;

		if (data < 0 && errno == ENXIO)
			break;
		hole = data < 0 ? (off_t)end : lseek(fd, data, SEEK_HOLE);
		if (data < 0)
			data = (off_t)at;
		if ((uint64_t)data >= end)
			break;
		if (hole < 0 || (uint64_t)hole > end)
			hole = (off_t)end;
		first = ((uint64_t)data - LKL_HEADER_SIZE) / LKL_ENTRY_SIZE;
		last = ((uint64_t)hole - LKL_HEADER_SIZE + LKL_ENTRY_SIZE - 1) / LKL_ENTRY_SIZE;
		for (uint64_t i = first > next ? first : next; ok && i < last && i < cap;
		     i += CHUNK_ENTRIES) {
			uint64_t n = last - i < CHUNK_ENTRIES ? last - i : CHUNK_ENTRIES;
			ssize_t got = lks_pread_all(fd, buf, n * LKL_ENTRY_SIZE,
						    LKL_HEADER_SIZE + i * LKL_ENTRY_SIZE);

			ok = got >= 0;
			for (uint64_t k = 0; ok && k < (uint64_t)got / LKL_ENTRY_SIZE; k++)
				if (lks_entry_used(&buf[k]))
					take_entry(t, fd, rd, &buf[k]);
			if (ok && (uint64_t)got < n * LKL_ENTRY_SIZE)
				next = cap; /* cut meanwhile: read as far as it goes */
		}
		next = last > next ? last : next + 1;
	}
	free(buf);
	return ok;
}

/* ---- naming ---- */

/* Busiest first: longest total wait, then most acquisitions, then lowest key. */
static int busiest_first(const void *x, const void *y)
{
	const struct fresh *a = x, *b = y;

	if (a->fig.wait_ns != b->fig.wait_ns)
		return a->fig.wait_ns < b->fig.wait_ns ? 1 : -1;
	if (a->fig.acq + a->fig.read_acq != b->fig.acq + b->fig.read_acq)
		return a->fig.acq + a->fig.read_acq < b->fig.acq + b->fig.read_acq ? 1 : -1;
	return a->key < b->key ? -1 : a->key > b->key;
}

static void name_fresh(const struct reading *rd, struct symbolizer *sym, struct fresh *f)
{
	struct lks_proc shell = { .h = &rd->h, .modules = rd->modules, .nmodules = rd->nmodules };
	struct lks_site site;
	char text[512];
	const char *var;
	uint64_t offset = 0;

	var = f->site || !sym ? NULL : symbolizer_object(sym, f->address, &offset);
	if (var && offset)
		snprintf(f->name, sizeof(f->name), "%s+0x%llx", var, (unsigned long long)offset);
	else if (var)
		snprintf(f->name, sizeof(f->name), "%s", var);
	else if (f->first_site) {
		lks_name_site(&shell, sym, f->first_site, &site);
		snprintf(f->name, sizeof(f->name), "%s at %s", lks_kind_name(f->kind),
			 lks_site_string(&site, text, sizeof(text)));
	} else {
		snprintf(f->name, sizeof(f->name), "%s %#llx", lks_kind_name(f->kind),
			 (unsigned long long)f->address);
	}
}

static void name_all(struct agent_table *t, struct reading *rd)
{
	char err[256];
	struct symbolizer *sym = symbolizer_open_process(t->pid, err, sizeof(err));

	/* no symbolizer (the process just ended): objects and offsets, from the table */
	qsort(rd->fresh, rd->nfresh, sizeof(*rd->fresh), busiest_first);
	for (size_t i = 0; i < rd->nfresh; i++)
		name_fresh(rd, sym, &rd->fresh[i]);
	symbolizer_close(sym);
}

/* ---- a scan's figures into the table (under a->lock) ---- */

static void commit(struct agent *a, struct agent_table *t, struct reading *rd)
{
	size_t before = t->locks.nlocks;
	uint64_t folded = 0;

	agent_lockset_clear(&t->locks);
	for (size_t i = 0; i < before; i++)
		if (rd->sums[i].present)
			add_figures(&t->locks.locks[i], &rd->sums[i]);
	if (rd->sums[rd->nsums - 1].present)
		add_figures(&t->locks.other, &rd->sums[rd->nsums - 1]);
	for (size_t i = 0; i < rd->nfresh; i++) {
		struct fresh *f = &rd->fresh[i];
		bool fold = false;
		struct agent_lock *l = agent_place_lock(a, &t->locks, f->name, &fold);
		struct agent_entry_name *n;

		if (!l)
			l = &t->locks.other; /* out of memory */
		add_figures(l, &f->fig);
		if (!names_room(t))
			continue; /* named again at the next scan */
		n = name_slot(t, f->key, f->site);
		*n = (struct agent_entry_name){ f->key, f->site,
						l == &t->locks.other ?
							0 :
							(uint32_t)(l - t->locks.locks) + 1 };
		t->nnames++;
	}
	/* names under "other" are not kept apart: they are counted again from the names' map */
	for (size_t i = 0; i < t->names_size; i++)
		folded += t->names[i].key && !t->names[i].lock;
	if (rd->h.folded_acquisitions) {
		/* destroyed locks the library itself summed once its table was half full */
		t->locks.other.acq += rd->h.folded_acquisitions;
		t->locks.other.present = true;
		folded += rd->h.folded_locks;
	}
	t->locks.folded = folded + rd->unnamed;
}

static void reading_free(struct reading *rd)
{
	free(rd->modules);
	free(rd->sums);
	free(rd->fresh);
	free(rd->fresh_index);
}

/* Read t's file (fd) now, and show what it holds. false: it could not be read. */
static bool read_table(struct agent *a, struct agent_table *t, int fd, const struct stat *st,
		       double tpn)
{
	struct reading rd = { .tpn = tpn };
	bool ok;

	if (!read_header(fd, st, t->pid, &rd.h) || rd.h.start_ns != t->image_ns)
		return false;
	if (rd.h.flags & LKL_F_TICKS_NS)
		rd.tpn = 1;
	rd.nsums = t->locks.nlocks + 1;
	rd.sums = calloc(rd.nsums, sizeof(*rd.sums));
	ok = rd.sums && read_entries(t, fd, &rd);
	if (ok && rd.nfresh)
		name_all(t, &rd);
	if (ok) {
		pthread_mutex_lock(&a->lock);
		commit(a, t, &rd);
		pthread_mutex_unlock(&a->lock);
	}
	reading_free(&rd);
	return ok;
}

/* ---- the directory ---- */

static struct agent_table *find_table(const struct agent *a, const char *file)
{
	for (size_t i = 0; i < a->ntables; i++)
		if (strcmp(a->tables[i]->file, file) == 0)
			return a->tables[i];
	return NULL;
}

/* A table of pid's made at image_ns or after: that one counts (a later one: the process exec()ed). */
static struct agent_table *later_image(const struct agent *a, pid_t pid, uint64_t image_ns)
{
	for (size_t i = 0; i < a->ntables; i++)
		if (a->tables[i]->pid == pid && a->tables[i]->image_ns >= image_ns)
			return a->tables[i];
	return NULL;
}

static void gone(struct agent_table *t, bool shown_again)
{
	t->gone = true;
	t->gone_at = now_s();
	t->scrapes_since_gone = shown_again ? 0 : 1;
}

static void add_table(struct agent *a, struct agent_table *t)
{
	struct agent_table **grown;

	pthread_mutex_lock(&a->lock);
	grown = realloc(a->tables, (a->ntables + 1) * sizeof(*grown));
	if (grown) {
		a->tables = grown;
		a->tables[a->ntables++] = t;
	}
	for (size_t i = 0; grown && i + 1 < a->ntables; i++)
		if (a->tables[i]->pid == t->pid && !a->tables[i]->gone)
			gone(a->tables[i], false); /* an image before an exec() */
	pthread_mutex_unlock(&a->lock);
	if (!grown)
		agent_table_free(t);
}

/* A file not met before: a table to read if everything checks (the top of the file). */
static void try_file(struct agent *a, int dir_fd, const char *file, double tpn)
{
	struct agent_table *t;
	struct lkl_header h;
	unsigned long long start;
	struct stat st;
	pid_t pid;
	int fd;

	if (!parse_file_name(file, &pid) || strlen(file) >= sizeof(t->file))
		return;
	start = agent_start_time(pid);
	if (!start) /* the process is gone: its file stays, its figures are not shown */
		return;
	fd = open_file(dir_fd, file, &st);
	if (fd < 0)
		return;
	t = NULL;
	if (owner_fits(st.st_uid, pid) && agent_named(a, pid) && read_header(fd, &st, pid, &h) &&
	    started_before(start, &h) && !later_image(a, pid, h.start_ns))
		t = calloc(1, sizeof(*t));
	if (t) {
		*t = (struct agent_table){ .pid = pid,
					   .start = start,
					   .dev = st.st_dev,
					   .ino = st.st_ino,
					   .image_ns = h.start_ns };
		snprintf(t->file, sizeof(t->file), "%s", file);
		if (!agent_proc_env(pid, "OTEL_SERVICE_NAME", t->name, sizeof(t->name)) &&
		    lk__proc_comm(pid, 0, t->name, sizeof(t->name)) < 0)
			snprintf(t->name, sizeof(t->name), "%d", (int)pid);
		/* what was read of /proc/PID counts only if it is still the process */
		if (agent_start_time(pid) == start && read_table(a, t, fd, &st, tpn))
			add_table(a, t);
		else
			agent_table_free(t);
	}
	close(fd);
}

/* A table met before: read again, or a last time once its process ended. */
static void again(struct agent *a, int dir_fd, struct agent_table *t, double tpn)
{
	bool alive = agent_start_time(t->pid) == t->start, same;
	struct stat st;
	int fd;

	if (t->gone)
		return;
	fd = open_file(dir_fd, t->file, &st);
	/* the same file (its owner checked when it was found), and its process still its owner */
	same = fd >= 0 && st.st_dev == t->dev && st.st_ino == t->ino;
	if (same && (!alive || owner_fits(st.st_uid, t->pid)))
		read_table(a, t, fd, &st, tpn);
	if (fd >= 0)
		close(fd);
	if (!alive || !same) {
		pthread_mutex_lock(&a->lock);
		gone(t, true);
		pthread_mutex_unlock(&a->lock);
	}
}

/*
 * The lock counter's ticks per ns, measured against CLOCK_MONOTONIC since the agent began (over
 * MIN_CLOCK_NS at least: the first scan waits for it), as `lowkey locks` measures it over its
 * command's run.
 */
static double ticks_per_ns(struct agent *a)
{
	struct lks_clock now = lks_clock_now();

	if (!a->clock_ns) {
		a->clock_ns = now.ns;
		a->clock_ticks = now.ticks;
	}
	if (now.ns < a->clock_ns + MIN_CLOCK_NS) {
		uint64_t left = a->clock_ns + MIN_CLOCK_NS - now.ns;

		nanosleep(&(struct timespec){ 0, (long)left }, NULL);
		now = lks_clock_now();
	}
	if (now.ns <= a->clock_ns || now.ticks <= a->clock_ticks)
		return 1; /* no counter: the library's fallback counts ns */
	return (double)(now.ticks - a->clock_ticks) / (double)(now.ns - a->clock_ns);
}

void agent_preload_scan(struct agent *a)
{
	int dir_fd = open(a->o->locks_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = dir_fd >= 0 ? fdopendir(dir_fd) : NULL;
	double tpn = ticks_per_ns(a);
	struct dirent *e;

	if (!d) {
		if (dir_fd >= 0)
			close(dir_fd);
		for (size_t i = 0; i < a->ntables; i++)
			again(a, -1, a->tables[i], tpn); /* every file went with it */
		return;
	}
	for (size_t i = 0; i < a->ntables; i++)
		again(a, dir_fd, a->tables[i], tpn);
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && !find_table(a, e->d_name))
			try_file(a, dir_fd, e->d_name, tpn);
	closedir(d);
}
