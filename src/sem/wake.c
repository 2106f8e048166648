// SPDX-License-Identifier: MIT
/*
 * Waking the sleepers a call served, after its lock is released: in one system call.
 *
 * A futex wake-up is one system call per sleeper. The kernel's semop wakes every sleeper it
 * served inside one system call (wake_q), and the difference is not only the calls: with the
 * default preemption model (none, or voluntary) the kernel switches to a woken thread only when
 * the waker returns to user space -- so a waker making 64 futex calls may be switched out 64
 * times, against once for semop. We do what semop does with io_uring: one IORING_OP_FUTEX_WAKE
 * per sleeper, all submitted by one io_uring_enter(). Each waking thread has its own small ring,
 * made on its first batch and closed when it exits (a fork child makes its own).
 *
 * Where io_uring or its futex operations are missing (kernel < 6.7, kernel.io_uring_disabled,
 * a seccomp filter, ENOMEM), or for a single sleeper, the wake-ups are futex calls as before;
 * the choice is made once per process.
 */
#include <errno.h>
#include <linux/io_uring.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sem/sem_internal.h"

#define OP_FUTEX_WAKE 52 /* IORING_OP_FUTEX_WAKE (Linux 6.7), not in older headers */
#define FUTEX2_SIZE_U32 0x02
#define FUTEX2_PRIVATE 128

struct ring {
	int fd;
	unsigned int entries;
	void *sq_map, *cq_map;
	size_t sq_map_size, cq_map_size;
	struct io_uring_sqe *sqes;
	size_t sqes_size;
	unsigned int *sq_tail, *sq_mask, *sq_array;
	unsigned int *cq_head, *cq_tail, *cq_mask;
	struct io_uring_cqe *cqes;
};

static int usable; /* 0 not tried yet, 1 yes, -1 no */
static pthread_key_t ring_key;
static pthread_once_t ring_once = PTHREAD_ONCE_INIT;
static __thread struct ring *my_ring;

static void ring_free(struct ring *r)
{
	if (!r)
		return;
	if (r->sqes && r->sqes != MAP_FAILED)
		munmap(r->sqes, r->sqes_size);
	if (r->cq_map && r->cq_map != MAP_FAILED && r->cq_map != r->sq_map)
		munmap(r->cq_map, r->cq_map_size);
	if (r->sq_map && r->sq_map != MAP_FAILED)
		munmap(r->sq_map, r->sq_map_size);
	if (r->fd >= 0)
		close(r->fd);
	free(r);
}

static void ring_destructor(void *r)
{
	ring_free(r);
}

/* The child does not share its parent's rings: it forgets them (they stay the parent's). */
static void forget_ring_in_child(void)
{
	if (my_ring) {
		close(my_ring->fd);
		my_ring = NULL; /* the mappings are left: unmapping is the parent's business */
	}
	pthread_setspecific(ring_key, NULL);
}

static void ring_init_once(void)
{
	pthread_key_create(&ring_key, ring_destructor);
	pthread_atfork(NULL, NULL, forget_ring_in_child);
}

static bool supports_futex_wake(int fd)
{
	size_t size = sizeof(struct io_uring_probe) + 256 * sizeof(struct io_uring_probe_op);
	struct io_uring_probe *probe = calloc(1, size);
	bool ok;

	if (!probe)
		return false;
	ok = syscall(SYS_io_uring_register, fd, IORING_REGISTER_PROBE, probe, 256) == 0 &&
	     probe->last_op >= OP_FUTEX_WAKE &&
	     (probe->ops[OP_FUTEX_WAKE].flags & IO_URING_OP_SUPPORTED);
	free(probe);
	return ok;
}

static struct ring *ring_new(void)
{
	struct io_uring_params p;
	struct ring *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_SINGLE_ISSUER;
	r->fd = (int)syscall(SYS_io_uring_setup, WAKE_BATCH, &p);
	if (r->fd < 0 && errno == EINVAL) {
		memset(&p, 0, sizeof(p));
		r->fd = (int)syscall(SYS_io_uring_setup, WAKE_BATCH, &p);
	}
	if (r->fd < 0 || !supports_futex_wake(r->fd))
		goto fail;
	r->entries = p.sq_entries;
	r->sq_map_size = p.sq_off.array + p.sq_entries * sizeof(unsigned int);
	r->cq_map_size = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	if (p.features & IORING_FEAT_SINGLE_MMAP) {
		if (r->cq_map_size > r->sq_map_size)
			r->sq_map_size = r->cq_map_size;
		r->cq_map_size = r->sq_map_size;
	}
	r->sq_map = mmap(NULL, r->sq_map_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
			 r->fd, IORING_OFF_SQ_RING);
	if (r->sq_map == MAP_FAILED)
		goto fail;
	r->cq_map = (p.features & IORING_FEAT_SINGLE_MMAP) ?
			    r->sq_map :
			    mmap(NULL, r->cq_map_size, PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_CQ_RING);
	if (r->cq_map == MAP_FAILED)
		goto fail;
	r->sqes_size = p.sq_entries * sizeof(struct io_uring_sqe);
	r->sqes = mmap(NULL, r->sqes_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd,
		       IORING_OFF_SQES);
	if (r->sqes == MAP_FAILED)
		goto fail;
	r->sq_tail = (unsigned int *)((char *)r->sq_map + p.sq_off.tail);
	r->sq_mask = (unsigned int *)((char *)r->sq_map + p.sq_off.ring_mask);
	r->sq_array = (unsigned int *)((char *)r->sq_map + p.sq_off.array);
	r->cq_head = (unsigned int *)((char *)r->cq_map + p.cq_off.head);
	r->cq_tail = (unsigned int *)((char *)r->cq_map + p.cq_off.tail);
	r->cq_mask = (unsigned int *)((char *)r->cq_map + p.cq_off.ring_mask);
	r->cqes = (struct io_uring_cqe *)((char *)r->cq_map + p.cq_off.cqes);
	return r;
fail:
	ring_free(r);
	return NULL;
}

/* This thread's ring; NULL if io_uring cannot wake futexes here (then never tried again). */
static struct ring *ring_get(void)
{
	struct ring *r = my_ring;

	if (__atomic_load_n(&usable, __ATOMIC_RELAXED) < 0)
		return NULL;
	if (r)
		return r;
	pthread_once(&ring_once, ring_init_once);
	r = ring_new();
	if (!r) {
		__atomic_store_n(&usable, -1, __ATOMIC_RELAXED);
		return NULL;
	}
	__atomic_store_n(&usable, 1, __ATOMIC_RELAXED);
	pthread_setspecific(ring_key, r);
	my_ring = r;
	return r;
}

/* Submit one wake per word; how many the kernel took (the rest are woken by the caller). */
static unsigned int ring_wake(struct ring *r, uint32_t **words, unsigned int n, bool shared)
{
	unsigned int tail = *r->sq_tail, mask = *r->sq_mask, head, ctail;
	long submitted;

	if (n > r->entries)
		n = r->entries;
	for (unsigned int i = 0; i < n; i++) {
		unsigned int index = (tail + i) & mask;
		struct io_uring_sqe *sqe = &r->sqes[index];

		memset(sqe, 0, sizeof(*sqe));
		sqe->opcode = OP_FUTEX_WAKE;
		sqe->flags = IOSQE_CQE_SKIP_SUCCESS;
		sqe->fd = FUTEX2_SIZE_U32 | (shared ? 0 : FUTEX2_PRIVATE);
		sqe->addr = (uint64_t)(uintptr_t)words[i];
		sqe->off = 1;			     /* addr2: wake one */
		sqe->addr3 = FUTEX_BITSET_MATCH_ANY; /* mask */
		sqe->user_data = i;
		r->sq_array[index] = index;
	}
	__atomic_store_n(r->sq_tail, tail + n, __ATOMIC_RELEASE);
	submitted = syscall(SYS_io_uring_enter, r->fd, n, 0, 0, NULL, 0);
	if (submitted < 0) {
		/* refused after all (a seccomp filter, say): futex calls from now on, in every thread */
		__atomic_store_n(&usable, -1, __ATOMIC_RELAXED);
		pthread_setspecific(ring_key, NULL);
		my_ring = NULL;
		ring_free(r);
		return 0;
	}
	/* only failures post completions: wake those the plain way */
	head = *r->cq_head;
	ctail = __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE);
	for (; head != ctail; head++) {
		const struct io_uring_cqe *cqe = &r->cqes[head & *r->cq_mask];

		if (cqe->res < 0 && cqe->user_data < n)
			lk__futex_wake(words[cqe->user_data], 1, shared);
	}
	__atomic_store_n(r->cq_head, head, __ATOMIC_RELEASE);
	return (unsigned int)submitted;
}

void lk__wake_all(struct lk_semset *s, struct wakelist *wl)
{
	unsigned int done = 0;

	if (wl->n >= 2) {
		struct ring *r = ring_get();

		if (r)
			done = ring_wake(r, wl->status, wl->n, s->shared);
	}
	for (unsigned int i = done; i < wl->n; i++)
		lk__futex_wake(wl->status[i], 1, s->shared);
	wl->n = 0;
}
