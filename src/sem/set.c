// SPDX-License-Identifier: MIT
/*
 * Making, opening and closing sets; the region's layout; the waiter slots of shared sets.
 *
 * A shared set is created under O_EXCL, sized, mapped and filled in, and its magic number is
 * stored last (with release order): an opener that sees the magic sees the rest. An opener
 * checks every field of the header against what this build would have written before it
 * follows any offset in it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "sem/sem_internal.h"

#define WAITERS_SHIFT 20
#define WAITERS_MASK (0x1fu << WAITERS_SHIFT)
#define CREATE_FLAGS (0777u | LK_SEMSET_EXCL | WAITERS_MASK)
#define OPEN_PATIENCE_MS 1000

struct geometry {
	uint64_t sems_offset, waiters_offset, size;
};

static struct geometry geometry(unsigned int nsems, unsigned int nwaiters)
{
	struct geometry g;

	g.sems_offset = sizeof(struct semset_header);
	g.waiters_offset = g.sems_offset + (uint64_t)nsems * sizeof(struct sem);
	g.size = g.waiters_offset + (uint64_t)nwaiters * sizeof(struct waiter);
	return g;
}

static unsigned int waiter_slots(unsigned int flags, unsigned int nsems)
{
	unsigned int log = (flags & WAITERS_MASK) >> WAITERS_SHIFT, n;

	if (log)
		return log >= 16 ? MAX_WAITERS : 1u << log;
	for (n = 256; n < 2 * nsems && n < MAX_WAITERS; n <<= 1)
		;
	return n;
}

static void attach(struct lk_semset *s, void *region, size_t size, bool shared)
{
	struct semset_header *h = region;

	s->hdr = h;
	s->size = size;
	s->shared = shared;
	s->ref_base = shared ? (uintptr_t)region : 0;
	s->nsems = h->nsems;
	s->nwaiters = h->nwaiters;
	s->sems = (struct sem *)((char *)region + h->sems_offset);
	s->slots = shared ? (struct waiter *)((char *)region + h->waiters_offset) : NULL;
	/* thread ids name lock holders only among processes that see the same ones */
	s->owners = shared && h->pid_ns == lk__pid_ns();
}

/* Fill in a zeroed region (a free waiter slot is all zeroes); the magic number goes last. */
static void init_region(struct lk_semset *s, void *region, unsigned int nsems,
			unsigned int nwaiters, bool shared)
{
	struct geometry g = geometry(nsems, nwaiters);
	struct semset_header *h = region;

	h->version = SEMSET_VERSION;
	h->header_size = sizeof(struct semset_header);
	h->sem_size = sizeof(struct sem);
	h->waiter_size = sizeof(struct waiter);
	h->nsems = nsems;
	h->nwaiters = nwaiters;
	h->size = g.size;
	h->sems_offset = g.sems_offset;
	h->waiters_offset = g.waiters_offset;
	h->shared = shared;
	h->pid_ns = shared ? lk__pid_ns() : 0;
	h->created_ticks = lk__lock_ticks();
	attach(s, region, g.size, shared);
	list_init(s, &h->pending_alter);
	list_init(s, &h->pending_const);
	for (unsigned int i = 0; i < nsems; i++) {
		list_init(s, &s->sems[i].pending_alter);
		list_init(s, &s->sems[i].pending_const);
	}
	if (shared) {
		for (unsigned int i = 0; i < nwaiters; i++)
			s->slots[i].next_free = i + 1 < nwaiters ? i + 2 : 0;
		h->free_slots = 1; /* slot 0, tag 0 */
	}
	__atomic_store_n(&h->magic, SEMSET_MAGIC, __ATOMIC_RELEASE);
}

static int check_name(const char *name)
{
	size_t len = strnlen(name, 256);

	if (name[0] != '/' || len < 2 || len > 255 || strchr(name + 1, '/'))
		return lk__fail(
			-EINVAL,
			"semaphore set name '%s': a shared set is named \"/name\" (one slash, "
			"at most 255 bytes), as a POSIX shared memory object",
			name);
	return 0;
}

static int create_private(struct lk_semset **out, unsigned int nsems)
{
	struct geometry g = geometry(nsems, 0);
	struct lk_semset *s = calloc(1, sizeof(*s));
	void *region = aligned_alloc(64, g.size);

	if (!s || !region) {
		free(s);
		free(region);
		return lk__fail(-ENOMEM, "no memory for a set of %u semaphores (%lu bytes)", nsems,
				(unsigned long)g.size);
	}
	memset(region, 0, g.size);
	init_region(s, region, nsems, 0, false);
	*out = s;
	return 0;
}

static int shm_error(int err, const char *what, const char *name)
{
	switch (err) {
	case EACCES:
		return lk__fail(-EACCES, "%s %s: permission denied (its mode, or /dev/shm's)", what,
				name);
	case ENOENT:
		return lk__fail(-ENOENT, "%s %s: no such semaphore set (create it first)", what,
				name);
	case ENOSPC:
	case ENOMEM:
		return lk__fail(-ENOSPC, "%s %s: /dev/shm is full (see df /dev/shm)", what, name);
	default:
		return lk__fail(-err, "%s %s: %s", what, name, strerror(err));
	}
}

/* ---- opening ---- */

static const char *bad_header(const struct semset_header *h, size_t file_size)
{
	struct geometry g;

	if (h->version != SEMSET_VERSION)
		return "made by another version of lowkey";
	if (h->header_size != sizeof(struct semset_header) || h->sem_size != sizeof(struct sem) ||
	    h->waiter_size != sizeof(struct waiter))
		return "its layout is not this build's";
	if (h->nsems == 0 || h->nsems > LK_SEMMSL || h->nwaiters == 0 ||
	    h->nwaiters > MAX_WAITERS || !h->shared)
		return "its header is corrupted (semaphore or waiter count)";
	g = geometry(h->nsems, h->nwaiters);
	if (h->sems_offset != g.sems_offset || h->waiters_offset != g.waiters_offset ||
	    h->size != g.size)
		return "its header is corrupted (offsets)";
	if (g.size > file_size)
		return "it is shorter than its header says";
	return NULL;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { 0, ms * 1000000 };

	nanosleep(&ts, NULL);
}

/* Map name once its creator has published it. */
static int map_published(int fd, const char *name, void **region, size_t *size)
{
	for (int waited = 0;; waited++) {
		struct stat st;
		uint64_t magic;
		void *map;

		if (fstat(fd, &st) != 0)
			return shm_error(errno, "cannot open semaphore set", name);
		if ((size_t)st.st_size >= sizeof(struct semset_header)) {
			map = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
				   0);
			if (map == MAP_FAILED)
				return shm_error(errno, "cannot map semaphore set", name);
			magic = __atomic_load_n(&((struct semset_header *)map)->magic,
						__ATOMIC_ACQUIRE);
			if (magic == SEMSET_MAGIC) {
				*region = map;
				*size = (size_t)st.st_size;
				return 0;
			}
			munmap(map, (size_t)st.st_size);
			if (magic != 0)
				return lk__fail(
					-EINVAL,
					"%s is not a lowkey semaphore set (bad magic number)",
					name);
		}
		if (waited >= OPEN_PATIENCE_MS)
			return lk__fail(
				-ETIMEDOUT,
				"semaphore set %s is still being created after %d ms (its creator died?)",
				name, OPEN_PATIENCE_MS);
		sleep_ms(1);
	}
}

/* Map the set open in fd (closed here), check its header and make a handle for it. */
static int join(struct lk_semset **out, const char *name, int fd)
{
	struct lk_semset *s;
	const char *bad;
	void *region = NULL;
	size_t size = 0;
	int err;

	err = map_published(fd, name, &region, &size);
	close(fd);
	if (err)
		return err;
	bad = bad_header(region, size);
	if (bad) {
		munmap(region, size);
		return lk__fail(-EINVAL, "refusing semaphore set %s: %s", name, bad);
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		munmap(region, size);
		return lk__fail(-ENOMEM, "no memory for a semaphore set handle");
	}
	snprintf(s->name, sizeof(s->name), "%s", name);
	attach(s, region, size, true);
	*out = s;
	return 0;
}

/* Open name's object for reading and writing; it must be a regular file (/dev/shm may hold FIFOs). */
static int open_object(const char *name, struct stat *st)
{
	int fd = shm_open(name, O_RDWR | O_CLOEXEC | O_NONBLOCK, 0);

	if (fd < 0)
		return shm_error(errno, "cannot open semaphore set", name);
	if (fstat(fd, st) != 0) {
		int err = errno;

		close(fd);
		return shm_error(err, "cannot open semaphore set", name);
	}
	if (!S_ISREG(st->st_mode)) {
		close(fd);
		return lk__fail(-EINVAL, "%s is not a lowkey semaphore set (not a regular file)",
				name);
	}
	return fd;
}

/*
 * lk_semset_create met an existing name: open it only if it is the caller's own set, shared with
 * no one the caller did not ask for -- never another user's object, which its owner could keep
 * rewriting under us. lk_semset_open is the way to join someone else's set on purpose.
 */
static int reopen_own(struct lk_semset **out, const char *name, unsigned int nsems, mode_t mode)
{
	struct stat st;
	int fd = open_object(name, &st), err;

	if (fd < 0)
		return fd;
	if (st.st_uid != geteuid()) {
		close(fd);
		return lk__fail(
			-EEXIST,
			"semaphore set %s exists and belongs to uid %u, not to you (uid %u): refusing "
			"to take it over; lk_semset_open joins another user's set on purpose",
			name, (unsigned int)st.st_uid, (unsigned int)geteuid());
	}
	if (st.st_mode & 0777 & ~mode) {
		close(fd);
		return lk__fail(
			-EEXIST,
			"semaphore set %s exists with mode 0%03o, wider than the 0%03o asked for: "
			"refusing to share it with more users than asked; lk_semset_open joins it on purpose",
			name, (unsigned int)(st.st_mode & 0777), (unsigned int)mode);
	}
	err = join(out, name, fd);
	if (err == 0 && (*out)->nsems < nsems) {
		unsigned int has = (*out)->nsems;

		lk_semset_close(*out);
		*out = NULL;
		return lk__fail(-EINVAL,
				"semaphore set %s exists with %u semaphores, fewer than %u", name,
				has, nsems);
	}
	return err;
}

static int create_shared(struct lk_semset **out, const char *name, unsigned int nsems,
			 unsigned int flags)
{
	unsigned int nwaiters = waiter_slots(flags, nsems);
	struct geometry g = geometry(nsems, nwaiters);
	mode_t mode = (flags & 0777) ? (flags & 0777) : 0600;
	struct lk_semset *s;
	void *region;
	int fd, err;

	/* a set removed between our two opens: try again to create it */
	for (int tries = 0;; tries++) {
		fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode);
		if (fd >= 0 || errno != EEXIST)
			break;
		if (flags & LK_SEMSET_EXCL)
			return lk__fail(-EEXIST, "semaphore set %s exists (LK_SEMSET_EXCL)", name);
		err = reopen_own(out, name, nsems, mode);
		if (err != -ENOENT || tries == 3)
			return err;
	}
	if (fd < 0)
		return shm_error(errno, "cannot create semaphore set", name);
	if (fchmod(fd, mode) != 0 || ftruncate(fd, (off_t)g.size) != 0) {
		err = errno;
		close(fd);
		shm_unlink(name);
		return shm_error(err, "cannot size semaphore set", name);
	}
	region = mmap(NULL, g.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	err = errno;
	close(fd);
	s = calloc(1, sizeof(*s));
	if (region == MAP_FAILED || !s) {
		if (region != MAP_FAILED)
			munmap(region, g.size);
		free(s);
		shm_unlink(name);
		return region == MAP_FAILED ?
			       shm_error(err, "cannot map semaphore set", name) :
			       lk__fail(-ENOMEM, "no memory for a semaphore set handle");
	}
	snprintf(s->name, sizeof(s->name), "%s", name);
	init_region(s, region, nsems, nwaiters, true);
	*out = s;
	return 0;
}

LK_API int lk_semset_create(struct lk_semset **out, const char *name, unsigned int nsems,
			    unsigned int flags)
{
	int err;

	if (!out)
		return lk__fail(-EINVAL, "lk_semset_create: NULL out");
	*out = NULL;
	if (nsems == 0 || nsems > LK_SEMMSL)
		return lk__fail(-EINVAL, "a semaphore set has 1 to %u semaphores, not %u",
				LK_SEMMSL, nsems);
	if (flags & ~CREATE_FLAGS)
		return lk__fail(-EINVAL, "lk_semset_create: unknown flags 0x%x",
				flags & ~CREATE_FLAGS);
	if (!name)
		return create_private(out, nsems);
	err = check_name(name);
	return err ? err : create_shared(out, name, nsems, flags);
}

LK_API int lk_semset_open(struct lk_semset **out, const char *name)
{
	struct stat st;
	int fd, err;

	if (!out || !name)
		return lk__fail(-EINVAL, "lk_semset_open: NULL %s", out ? "name" : "out");
	*out = NULL;
	err = check_name(name);
	if (err)
		return err;
	fd = open_object(name, &st);
	return fd < 0 ? fd : join(out, name, fd);
}

LK_API int lk_semset_close(struct lk_semset *s)
{
	if (!s)
		return lk__fail(-EINVAL, "lk_semset_close: NULL set");
	if (s->shared)
		munmap(s->hdr, s->size);
	else
		free(s->hdr);
	free(s);
	return 0;
}

LK_API int lk_semset_unlink(const char *name)
{
	struct lk_semset *s;
	int err;

	if (!name)
		return lk__fail(-EINVAL, "lk_semset_unlink: NULL name");
	err = lk_semset_open(&s, name);
	if (err == -EINVAL || err == -ETIMEDOUT) {
		/* not a usable set: still take the name away, as asked */
		if (check_name(name) == 0 && shm_unlink(name) == 0)
			return 0;
		return err;
	}
	if (err)
		return err;
	err = lk_semctl(s, 0, LK_IPC_RMID);
	lk_semset_close(s);
	return err == -EIDRM ? 0 : err;
}

static int check(struct lk_semset *s, bool removing)
{
	const struct semset_header *h = s->hdr;

	if ((!removing && __atomic_load_n(&s->corrupt, __ATOMIC_RELAXED)) ||
	    h->magic != SEMSET_MAGIC || h->version != SEMSET_VERSION || h->nsems != s->nsems)
		return lk__fail(
			-EINVAL,
			"semaphore set %s is corrupted (its header or queues were overwritten)",
			s->shared ? s->name : "(private)");
	if (__atomic_load_n(&h->removed, __ATOMIC_ACQUIRE))
		return lk__fail(-EIDRM, "semaphore set %s was removed",
				s->shared ? s->name : "(private)");
	if (!removing && __atomic_load_n(&h->broken, __ATOMIC_ACQUIRE))
		return lk__fail(
			-ENOTRECOVERABLE,
			"semaphore set %s: a process died holding one of its locks, so it "
			"may be half-updated and cannot be used any more; remove it (lk_semset_unlink) and "
			"create it again",
			s->name);
	return 0;
}

/* Whether s can be used: 0, -EINVAL (corrupted), -EIDRM, -ENOTRECOVERABLE. */
int lk__semset_check(struct lk_semset *s)
{
	return check(s, false);
}

/*
 * Whether s can be removed: a set with corrupted queues, or broken by a dead lock holder, can, as
 * long as its header is still ours.
 */
int lk__semset_check_removable(struct lk_semset *s)
{
	return check(s, true);
}

/* ---- waiter slots of shared sets: a lock-free stack of index + 1, tagged against ABA ---- */

int lk__slot_alloc(struct lk_semset *s)
{
	uint64_t head = __atomic_load_n(&s->hdr->free_slots, __ATOMIC_ACQUIRE);

	for (;;) {
		uint32_t top = (uint32_t)head, next;
		uint64_t fresh;

		if (!top)
			return -1;
		if (top > s->nwaiters) {
			set_corrupt(s);
			return -1;
		}
		next = __atomic_load_n(&s->slots[top - 1].next_free, __ATOMIC_RELAXED);
		fresh = (((head >> 32) + 1) << 32) | next;
		if (__atomic_compare_exchange_n(&s->hdr->free_slots, &head, fresh, true,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			return (int)(top - 1);
	}
}

void lk__slot_free(struct lk_semset *s, unsigned int index)
{
	uint64_t head = __atomic_load_n(&s->hdr->free_slots, __ATOMIC_RELAXED), fresh;

	do {
		__atomic_store_n(&s->slots[index].next_free, (uint32_t)head, __ATOMIC_RELAXED);
		fresh = (((head >> 32) + 1) << 32) | (index + 1);
	} while (!__atomic_compare_exchange_n(&s->hdr->free_slots, &head, fresh, true,
					      __ATOMIC_RELEASE, __ATOMIC_RELAXED));
}
