// SPDX-License-Identifier: MIT
/*
 * The per-process table: a file in $LOWKEY_LOCKS_DIR mapped shared, an open-addressing hash of
 * lock address -> figures (include/internal/lock_file.h).
 *
 * Start-up is a state machine moved by compare-and-swap: the first thread to need the table
 * creates it while every other thread passes straight through, so no thread ever waits here.
 * Creating it uses only system calls (open, ftruncate, mmap, readlink), no stdio and no malloc,
 * so it is safe from inside any wrapper, however early: before main, inside a constructor,
 * inside an allocator.
 *
 * A fork child starts over with a fresh file of its own at its first lock (the parent's figures
 * stay in the parent's file); the atfork handler only forgets the parent's mapping. An exec()ed
 * image keeps the environment and so starts its own file too.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "preload.h"

int lkl_state = LKL_UNINIT;
uint64_t lkl_hold_threshold = UINT64_MAX / 16;

static struct lkl_header *header;
static struct lkl_entry *entries;
static uint64_t capacity_mask;

/* shared holds being timed by this thread */
static __thread struct {
	struct lkl_entry *e;
	uint64_t start;
} read_samples[4] __attribute__((tls_model("initial-exec")));

#define DEFAULT_CAPACITY (1u << 16)
#define MIN_CAPACITY (1u << 10)
#define MAX_CAPACITY (1u << 24)

/* ---- small helpers that need neither stdio nor malloc ---- */

static uint64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static char *append(char *dst, const char *end, const char *s)
{
	while (*s && dst < end)
		*dst++ = *s++;
	return dst;
}

static char *append_uint(char *dst, const char *end, unsigned long v)
{
	char digits[24];
	int n = 0;

	do
		digits[n++] = (char)('0' + v % 10);
	while ((v /= 10) && n < 23);
	while (n && dst < end)
		*dst++ = digits[--n];
	return dst;
}

static unsigned long parse_uint(const char *s, unsigned long fallback)
{
	unsigned long v = 0;

	if (!s || !*s)
		return fallback;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || v > (1ul << 40))
			return fallback;
		v = v * 10 + (unsigned long)(*s - '0');
	}
	return v;
}

static uint32_t capacity_from_env(void)
{
	unsigned long want = parse_uint(getenv("LOWKEY_LOCKS_MAX"), DEFAULT_CAPACITY);
	uint32_t cap = MIN_CAPACITY;

	while (cap < want && cap < MAX_CAPACITY)
		cap <<= 1;
	return cap;
}

/* ---- the loaded objects, for symbolizing call sites later ---- */

struct module_walk {
	struct lkl_module *v;
	uint32_t n;
};

/* Whether [at, at + len) of the object lies in one of its loaded segments (is mapped). */
static bool loaded(const struct dl_phdr_info *info, ElfW(Addr) at, ElfW(Word) len)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_LOAD && at >= ph->p_vaddr && len <= ph->p_filesz &&
		    at - ph->p_vaddr <= ph->p_filesz - len)
			return true;
	}
	return false;
}

/* The object's build-id, from its notes in memory, into m: so that lowkey locks reads no other build. */
static void note_build_id(const struct dl_phdr_info *info, struct lkl_module *m)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr),
			   *end = p + ph->p_filesz;
		size_t pad = ph->p_align == 8 ? 7 : 3; /* notes of 8-byte alignment pad to 8 */

		if (ph->p_type != PT_NOTE || !loaded(info, ph->p_vaddr, ph->p_filesz))
			continue;
		while ((size_t)(end - p) >= sizeof(ElfW(Nhdr))) {
			const ElfW(Nhdr) *nh = (const void *)p;
			const char *name = p + sizeof(*nh);
			const char *desc = name + ((nh->n_namesz + pad) & ~pad);

			if (desc > end || nh->n_descsz > (size_t)(end - desc))
				break;
			if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
			    memcmp(name, "GNU", 4) == 0 && nh->n_descsz <= LKL_BUILD_ID_MAX) {
				memcpy(m->build_id, desc, nh->n_descsz);
				m->build_id_len = nh->n_descsz;
				return;
			}
			p = desc + ((nh->n_descsz + pad) & ~pad);
		}
	}
}

static int add_module(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct module_walk *w = arg;
	struct lkl_module *m;
	uint64_t lo = UINT64_MAX, hi = 0;

	(void)size;
	if (w->n >= LKL_MAX_MODULES)
		return 1;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type != PT_LOAD)
			continue;
		if (ph->p_vaddr < lo)
			lo = ph->p_vaddr;
		if (ph->p_vaddr + ph->p_memsz > hi)
			hi = ph->p_vaddr + ph->p_memsz;
	}
	if (lo >= hi)
		return 0;
	m = &w->v[w->n];
	m->start = info->dlpi_addr + lo;
	m->end = info->dlpi_addr + hi;
	m->bias = info->dlpi_addr;
	m->build_id_len = 0;
	note_build_id(info, m);
	/* the executable has no name here: header->exe holds its path */
	*append(m->path, m->path + LKL_PATH_MAX - 1, info->dlpi_name ? info->dlpi_name : "") = 0;
	w->n++;
	return 0;
}

static void write_modules(void)
{
	struct module_walk w = { (struct lkl_module *)((char *)header + header->modules_offset),
				 0 };

	dl_iterate_phdr(add_module, &w);
	__atomic_store_n(&header->nmodules, w.n, __ATOMIC_RELEASE);
}

/* ---- creating the table ---- */

static void forget_table(void);

static void after_fork_in_child(void)
{
	memset(read_samples, 0, sizeof(read_samples));
	forget_table();
	__atomic_store_n(&lkl_state, LKL_UNINIT, __ATOMIC_RELEASE);
}

static int open_file(const char *dir, char *path, size_t len)
{
	char *end = path + len - 1;

	for (unsigned int n = 0; n < 1000; n++) {
		char *p = append(path, end, dir);
		int fd;

		p = append(p, end, "/");
		p = append_uint(p, end, (unsigned long)getpid());
		p = append(p, end, "-");
		p = append_uint(p, end, n);
		p = append(p, end, ".lkl");
		*p = 0;
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd >= 0 || errno != EEXIST)
			return fd;
	}
	return -1;
}

static void fill_header(struct lkl_header *h, uint32_t cap)
{
	extern char *program_invocation_name;
	ssize_t n;

	h->version = LKL_VERSION;
	h->header_size = LKL_HEADER_SIZE;
	h->entry_size = LKL_ENTRY_SIZE;
	h->capacity = cap;
	h->pid = (uint32_t)getpid();
	h->ppid = (uint32_t)getppid();
	h->hold_period = (uint32_t)parse_uint(getenv("LOWKEY_LOCK_HOLD_SAMPLING"), 16);
	if (h->hold_period == 0)
		h->hold_period = 1;
	h->cpus = (uint32_t)get_nprocs();
#if !defined(__x86_64__) && !defined(__i386__) && !defined(__aarch64__)
	h->flags |= LKL_F_TICKS_NS;
#endif
	h->modules_offset = LKL_HEADER_SIZE + (uint64_t)cap * LKL_ENTRY_SIZE;
	*append(h->comm, h->comm + sizeof(h->comm) - 1,
		program_invocation_name ? program_invocation_name : "") = 0;
	n = readlink("/proc/self/exe", h->exe, sizeof(h->exe) - 1);
	h->exe[n > 0 ? n : 0] = 0;
	h->start_ns = monotonic_ns();
	h->start_ticks = lk__lock_ticks();
	__atomic_store_n(&h->magic, LKL_MAGIC, __ATOMIC_RELEASE);
}

static bool create_table(void)
{
	const char *dir = getenv("LOWKEY_LOCKS_DIR");
	uint32_t cap = capacity_from_env();
	uint64_t size = lkl_file_size(cap);
	char path[4096];
	void *map;
	int fd;

	/* never steer a set-user-ID program into writing files */
	if (!dir || !*dir || getauxval(AT_SECURE))
		return false;
	fd = open_file(dir, path, sizeof(path));
	if (fd < 0)
		return false;
	if (ftruncate(fd, (off_t)size) != 0) {
		close(fd);
		unlink(path);
		return false;
	}
	map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (map == MAP_FAILED) {
		unlink(path);
		return false;
	}
	header = map;
	entries = (struct lkl_entry *)((char *)map + LKL_HEADER_SIZE);
	capacity_mask = cap - 1;
	fill_header(header, cap);
	lkl_hold_threshold = header->hold_period == 1 ? UINT64_MAX :
							UINT64_MAX / header->hold_period;
	return true;
}

static void forget_table(void)
{
	if (header)
		munmap(header, lkl_file_size(header->capacity));
	header = NULL;
	entries = NULL;
}

void lkl_start(void)
{
	int expected = LKL_UNINIT, saved_errno = errno;

	if (!__atomic_compare_exchange_n(&lkl_state, &expected, LKL_STARTING, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return; /* another thread is at it, or it is done: pass through meanwhile */
	lkl_resolve();
	if (!create_table()) {
		__atomic_store_n(&lkl_state, LKL_OFF, __ATOMIC_RELEASE);
		errno = saved_errno;
		return;
	}
	write_modules();
	__atomic_store_n(&lkl_state, LKL_READY, __ATOMIC_RELEASE);
	errno = saved_errno;
}

/*
 * The fork handler is registered here and not in lkl_start(): glibc runs fork handlers holding the
 * lock pthread_atfork() takes, and a lazy start can happen inside a handler. It is inherited by
 * children, so once per image.
 */
__attribute__((constructor(101))) static void lkl_constructor(void)
{
	pthread_atfork(NULL, NULL, after_fork_in_child);
	lkl_ready();
}

__attribute__((destructor)) static void lkl_destructor(void)
{
	if (__atomic_load_n(&lkl_state, __ATOMIC_ACQUIRE) != LKL_READY)
		return;
	/* the table stays mapped: other threads and later destructors may still take locks */
	write_modules();
	header->end_ns = monotonic_ns();
	header->end_ticks = lk__lock_ticks();
	__atomic_fetch_or(&header->flags, LKL_F_EXITED, __ATOMIC_RELEASE);
}

/* ---- lookups ---- */

static inline uint64_t slot_of(uint64_t key)
{
	return ((key >> 3) * 0x9E3779B97F4A7C15ull) >> 20;
}

/* Entries may be taken up to here: a quarter stays free so that probe chains stay short. */
static bool table_full(void)
{
	return LD(header->used) >= (capacity_mask + 1) / 4 * 3;
}

struct lkl_entry *lkl_find(const void *addr, enum lkl_kind kind, bool create)
{
	uint64_t key = (uint64_t)(uintptr_t)addr | kind, mask = capacity_mask;
	struct lkl_entry *table = entries;

	if (!table)
		return NULL;
	for (uint64_t i = slot_of(key) & mask, probes = 0; probes <= mask;
	     i = (i + 1) & mask, probes++) {
		struct lkl_entry *e = &table[i];
		uint64_t k = __atomic_load_n(&e->key, __ATOMIC_ACQUIRE);

		if (k == key)
			return e;
		if (k != 0)
			continue;
		if (!create)
			return NULL;
		if (table_full()) {
			__atomic_fetch_add(&header->untracked, 1, __ATOMIC_RELAXED);
			__atomic_fetch_or(&header->flags, LKL_F_FULL, __ATOMIC_RELAXED);
			return NULL;
		}
		if (__atomic_compare_exchange_n(&e->key, &k, key, false, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE)) {
			__atomic_fetch_add(&header->used, 1, __ATOMIC_RELAXED);
			return e;
		}
		if (k == key)
			return e; /* another thread claimed this slot for the same lock */
	}
	return NULL;
}

/*
 * A free entry for the figures of a destroyed lock, claimed under its key marked retired. It is
 * looked for from a slot of its own, not from the lock's: a lock made again and again at one
 * address (on the stack, in memory malloc hands out again) would otherwise leave every earlier
 * one in the probe chain that each lookup of the address walks. NULL once half the table is
 * taken: the quarter left before it is full stays for live locks, however many are destroyed.
 */
static struct lkl_entry *claim_retired(uint64_t key)
{
	static uint64_t retired;
	uint64_t n = __atomic_add_fetch(&retired, 1, __ATOMIC_RELAXED), mask = capacity_mask;

	for (uint64_t i = slot_of(key + (n << 24)) & mask, probes = 0; probes <= mask;
	     i = (i + 1) & mask, probes++) {
		struct lkl_entry *e = &entries[i];
		uint64_t free_key = 0;

		if (LD(header->used) >= (mask + 1) / 2)
			return NULL;
		if (!LD(e->key) &&
		    __atomic_compare_exchange_n(&e->key, &free_key, key | LKL_RETIRED, false,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
			__atomic_fetch_add(&header->used, 1, __ATOMIC_RELAXED);
			return e;
		}
	}
	return NULL;
}

/* The figures of an entry: all of it but its key. */
#define FIGURES(e) ((char *)(e) + sizeof((e)->key))
#define FIGURES_SIZE (sizeof(struct lkl_entry) - sizeof(uint64_t))

/*
 * The lock's figures move to an entry of their own, marked retired, and its entry starts over
 * for the next lock at the address. Without room for that, a lock never contended is summed in
 * the header, and a contended one kept where it is, marked retired.
 */
void lkl_retire(const void *addr, enum lkl_kind kind)
{
	struct lkl_entry *e = lkl_find(addr, kind, false), *copy;
	uint64_t key;

	if (!e)
		return;
	key = LD(e->key);
	if (!LD(e->acquisitions) && !LD(e->read_acquisitions) && !LD(e->try_fails) && !LD(e->posts))
		return; /* never used since it was (re)made: nothing to count, none counted twice */
	copy = claim_retired(key);
	if (copy) {
		memcpy(FIGURES(copy), FIGURES(e), FIGURES_SIZE);
	} else if (LD(e->contended) == 0 && LD(e->try_fails) == 0) {
		__atomic_fetch_add(&header->folded_locks, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&header->folded_acquisitions,
				   LD(e->acquisitions) + LD(e->read_acquisitions),
				   __ATOMIC_RELAXED);
	} else {
		__atomic_compare_exchange_n(&e->key, &key, key | LKL_RETIRED, false,
					    __ATOMIC_RELEASE, __ATOMIC_RELAXED);
		return;
	}
	memset(FIGURES(e), 0, FIGURES_SIZE);
}

/* ---- bookkeeping ---- */

static void note_wait(struct lkl_entry *e, uint64_t waited, uintptr_t ra)
{
	uint64_t none = 0;

	__atomic_fetch_add(&e->contended, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&e->wait_total, waited, __ATOMIC_RELAXED);
	lkl_max(&e->wait_max, waited);
	if (!LD(e->site))
		__atomic_compare_exchange_n(&e->site, &none, ra, false, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED);
}

void lkl_exclusive_acquired(struct lkl_entry *e, uint64_t waited, uintptr_t ra, bool recursive_kind)
{
	uint64_t me = lk__lock_self(), last, n;

	if (recursive_kind && LD(e->owner) == me) {
		ST(e->depth, LD(e->depth) + 1); /* a recursive mutex, re-locked by its owner */
		return;
	}
	n = LD(e->acquisitions);
	ST(e->acquisitions, n + 1);
	if (n == 0)
		ST(e->first_site, ra);
	last = LD(e->last_owner);
	if (last != me) {
		if (last)
			ST(e->owner_changes, LD(e->owner_changes) + 1);
		ST(e->last_owner, me);
	}
	ST(e->owner, me);
	if (waited != LKL_NO_WAIT)
		note_wait(e, waited, ra);
	if (lkl_sampled(n))
		ST(e->hold_start, lk__lock_ticks());
}

void lkl_exclusive_released(struct lkl_entry *e, bool checks_owner)
{
	uint64_t me = lk__lock_self(), owner = LD(e->owner), start;

	if (owner == 0 || (owner != me && checks_owner))
		return; /* not held as far as we know, or the real unlock will refuse (EPERM) */
	if (owner == me && LD(e->depth)) {
		ST(e->depth, LD(e->depth) - 1);
		return;
	}
	start = LD(e->hold_start);
	if (start) {
		uint64_t held = lk__lock_ticks() - start;

		ST(e->hold_samples, LD(e->hold_samples) + 1);
		ST(e->hold_total, LD(e->hold_total) + held);
		if (held > LD(e->hold_max))
			ST(e->hold_max, held);
		ST(e->hold_start, 0);
	}
	ST(e->owner, 0);
}

void lkl_shared_acquired(struct lkl_entry *e, uint64_t waited, uintptr_t ra, bool time_hold)
{
	uint64_t n = __atomic_fetch_add(&e->read_acquisitions, 1, __ATOMIC_RELAXED);

	if (n == 0 && !LD(e->first_site))
		ST(e->first_site, ra);
	if (waited != LKL_NO_WAIT)
		note_wait(e, waited, ra);
	if (time_hold && lkl_sampled(n)) {
		for (int i = 0; i < 4; i++) {
			if (!read_samples[i].e) {
				__atomic_fetch_add(&e->read_timing, 1, __ATOMIC_RELAXED);
				read_samples[i].e = e;
				read_samples[i].start = lk__lock_ticks();
				return;
			}
		}
	}
}

void lkl_shared_released(struct lkl_entry *e)
{
	if (!LD(e->read_timing))
		return;
	for (int i = 0; i < 4; i++) {
		if (read_samples[i].e == e) {
			uint64_t held = lk__lock_ticks() - read_samples[i].start;

			__atomic_fetch_add(&e->read_hold_samples, 1, __ATOMIC_RELAXED);
			__atomic_fetch_add(&e->read_hold_total, held, __ATOMIC_RELAXED);
			lkl_max(&e->read_hold_max, held);
			read_samples[i].e = NULL;
			__atomic_fetch_sub(&e->read_timing, 1, __ATOMIC_RELAXED);
			return;
		}
	}
}

void lkl_try_failed(struct lkl_entry *e)
{
	__atomic_fetch_add(&e->try_fails, 1, __ATOMIC_RELAXED);
}
