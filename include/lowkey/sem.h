/* SPDX-License-Identifier: MIT */
/*
 * Semaphore sets with System V semantics that do not serialize on one lock.
 *
 *	struct lk_semset *s;
 *	struct lk_sembuf wait_job = { 0, -1, 0 }, take_two[2] = { { 0, -1, 0 }, { 1, -1, 0 } };
 *
 *	lk_semset_create(&s, "/jobs", 2, 0600);	// or NULL for a set private to this process
 *	lk_semctl(s, 0, LK_SETVAL, 5);
 *	lk_semop(s, &wait_job, 1, NULL);		// one semaphore: only its own lock
 *	lk_semop(s, take_two, 2, NULL);			// both or neither, atomically
 *
 * Semantics are semop(2)/semctl(2)'s: the operations of one call happen all together or not at
 * all; an operation is a decrement (waits while the value would go negative), an increment, or a
 * wait for zero (sem_op 0); values run from 0 to LK_SEMVMX; LK_IPC_NOWAIT on an operation that
 * would wait fails the call with -EAGAIN; a waiting call that a signal handler interrupts fails
 * with -EINTR (whether or not the handler has SA_RESTART, as semop). Waiting operations are served
 * in the order the kernel serves them, so the same sequence of calls gives the same results as
 * SysV semaphores. Two differences: a timeout gives -ETIMEDOUT (semtimedop says -EAGAIN), and
 * SEM_UNDO is not implemented: an operation with LK_SEM_UNDO is refused with -ENOTSUP (an undo
 * that a crashed process never runs would be worse than none).
 *
 * How it avoids the one big lock (ipc/sem.c since Linux 4.x, the line of work that Manfred Spraul's
 * "ipc/sem.c: Optimization for reducing spinlock contention" started): a call on one semaphore
 * takes only that semaphore's lock; a call on several takes the set's lock and waits until no
 * single-semaphore call is inside, and the set stays in that mode until ten set-lock sections in a
 * row had no complex operation waiting. Beyond the kernel: a call on several semaphores that can
 * complete at once, while the set is not in that mode, takes only its semaphores' locks (in order),
 * so a bulk wake-up does not push every other call onto the set lock. Sleepers are queued per
 * semaphore; an operation that frees some wakes only the sleepers of the semaphores it increased,
 * in order, and stops at the first that cannot go on -- no rescans. The operations of the woken are
 * done by the waker, under the lock; the wake-ups themselves (futex system calls) after it is
 * released. Each semaphore has its own 128-byte, cache-line aligned slot. Every lock acquisition is
 * counted (free or contended, and the wait timed): lk_semset_stats().
 *
 * Shared sets live in POSIX shared memory (shm_open(3)), named "/name"; other processes
 * lk_semset_open() them. Waiting in a shared set needs one of its waiter slots (see
 * LK_SEMSET_WAITERS); in a private set, none.
 *
 * Processes that die. One that dies while sleeping in lk_semop is dropped from the queue: its
 * operations are not done on its behalf (the kernel marks its waiter slot when it dies, see
 * set_robust_list(2)). One that dies holding no lock leaves the set consistent. One that dies
 * inside the few instructions that hold one of the set's locks may leave it half-updated: a call
 * that waits a millisecond for that lock looks at the holder the lock names (its thread id) and,
 * finding it gone (or a zombie), marks the set broken -- from then on every call fails with
 * -ENOTRECOVERABLE and only removal works: remove the set and create it again. A holder that is
 * alive but does not let go (stopped, traced, hostile) is waited for only as long as a call may
 * wait: lk_semop with a timeout returns -ETIMEDOUT by it, removal goes ahead without the lock
 * after a second, lk_semop without a timeout and lk_semctl wait on. Holders are named only among
 * processes in the PID namespace of the set's creator; a holder in another namespace, or one whose
 * thread id a new thread took before anyone looked, can only make callers time out.
 *
 * Other users. Whoever can open a shared set can rewrite any of its bytes: the mode is the trust
 * boundary. Nothing read from a shared region is used before it is checked against the set's
 * geometry (which each process keeps in its own memory): a corrupted set makes calls fail, it
 * never makes them read or write outside the region; lk_semset_unlink and LK_IPC_RMID still
 * remove it. But one who can write the object can also shrink it (ftruncate(2)), and then every
 * process that has the set mapped is killed by SIGBUS at its next access to the lost pages: the
 * kernel offers no way to forbid that to another process with write access (seals are for memfd
 * objects only), and the library installs no SIGBUS handler of its own.
 *
 * Errors common to the functions below: -EINVAL for a NULL set or a shared set found corrupted
 * (bad magic, version or geometry in its header; or, met by a call, a queue link that is not
 * where a list head or waiter is, a waiter whose operations or owner make no sense, a value out
 * of range; from then on every call through that handle fails so), -EIDRM once the set has been
 * removed, -ENOTRECOVERABLE once a process died holding one of a shared set's locks.
 */
#ifndef LOWKEY_SEM_H
#define LOWKEY_SEM_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <lowkey/bits/compiler.h>

struct timespec; /* <time.h> declares it from C11 (or with POSIX): C99 sees this one */

LK_BEGIN_DECLS

#define LK_SEMVMX 32767 /* largest value of a semaphore (SEMVMX) */
#define LK_SEMOPM 128	/* most operations in one lk_semop call */
#define LK_SEMMSL 65535 /* most semaphores in a set */

/* sem_flg bits: the same values as <sys/sem.h>'s */
#define LK_IPC_NOWAIT 04000
#define LK_SEM_UNDO 0x1000 /* not implemented: -ENOTSUP */

/* One operation; the same layout as struct sembuf. */
struct lk_sembuf {
	unsigned short sem_num;
	short sem_op;
	short sem_flg;
};

struct lk_semset;

/* lk_semset_create flags, or-ed with the permission bits of a shared set (0: 0600) */
#define LK_SEMSET_EXCL 0x10000u /* fail with -EEXIST if the name exists */
/* waiter slots of a shared set: at least n (rounded up to a power of two, up to 65536); the
 * default is max(256, 2 x nsems) */
#define LK_SEMSET_WAITERS(n) \
	(LK__CAST(unsigned int, 32 - __builtin_clz((LK__CAST(unsigned int, n) - 1u) | 1u)) << 20)

/*
 * lk_semset_create - make a set of nsems semaphores, all 0.
 * @name: NULL for a set private to this process; "/name" for a shared one (a POSIX shared memory
 *	object). If the shared one exists, it is opened instead, unless LK_SEMSET_EXCL -- but only if
 *	it is the caller's own (owned by the effective uid) and its mode grants no more than the
 *	permission bits asked for: another user's set, or one shared more widely, is refused with
 *	-EEXIST (lk_semset_open joins such a set on purpose).
 * @flags: permission bits (shared sets; 0 means 0600), LK_SEMSET_EXCL, LK_SEMSET_WAITERS(n).
 * Returns 0 and *out, or: -EINVAL (nsems 0 or > LK_SEMMSL, a bad name, an existing set with fewer
 * than nsems semaphores, a name that is not a semaphore set), -EEXIST (the name exists and
 * LK_SEMSET_EXCL; or it is not the caller's, or its mode is wider than asked), -EACCES, -ENOMEM,
 * -ENOSPC (/dev/shm full), or what shm_open(3) gives. Allocates; makes system calls; not
 * async-signal-safe.
 */
LK_API int lk_semset_create(struct lk_semset **out, const char *name, unsigned int nsems,
			    unsigned int flags);

/*
 * lk_semset_open - open the shared set name, made by lk_semset_create in any process.
 * Returns 0, -ENOENT, -EACCES, -EINVAL (not a lowkey semaphore set -- not even a regular file --,
 * another version, corrupted header), -ETIMEDOUT (its creator has not finished making it after a second), -ENOMEM.
 * Costs shm_open, fstat and mmap (and up to a second's wait for a set being created); allocates;
 * not async-signal-safe.
 */
LK_API int lk_semset_open(struct lk_semset **out, const char *name);

/*
 * lk_semset_close - let go of s: unmap a shared set (it lives on for the other processes), free a
 * private one. No thread may use s any more; with threads still waiting in it, the result is
 * undefined. Returns 0 or -EINVAL. Costs a munmap or a free; not async-signal-safe.
 */
LK_API int lk_semset_close(struct lk_semset *s);

/*
 * lk_semset_unlink - remove the shared set name: every process's calls on it fail with -EIDRM
 * from now on, its sleepers wake with -EIDRM, and the name is gone. Memory is freed when the last
 * process closes it. Works on a corrupted or broken set too. Returns 0, -ENOENT, -EACCES, -EINVAL.
 * Opens the set, takes its set lock, wakes every sleeper (futex calls) and calls shm_unlink. A
 * lock it cannot have within a second (its holder died, or does not let go) is passed over: the
 * set is marked removed without it, and its sleepers see that within a second. Not
 * async-signal-safe.
 */
LK_API int lk_semset_unlink(const char *name);

/*
 * lk_semop - do ops[0..nops) atomically, waiting until they can all be done.
 * @timeout: NULL to wait without limit, or the longest wait (relative, as semtimedop): for the
 *	set's locks as well as for the operations. A call that gives up leaves the queue under the
 *	lock, waiting for it at most a millisecond more; in a shared set whose lock is stuck it
 *	leaves without it (its operations are then never done).
 * Cost: uncontended, on one semaphore, one lock and one unlock of that semaphore's own cache line
 * and no system call; waking sleepers costs a futex wake each, after the lock is released; a call
 * on several semaphores takes the set lock.
 * Returns 0, or: -EINVAL (nops 0, ops NULL, bad timeout), -E2BIG (nops > LK_SEMOPM), -EFBIG (a
 * sem_num past the set), -ENOTSUP (LK_SEM_UNDO), -ERANGE (a value would pass LK_SEMVMX), -EAGAIN
 * (LK_IPC_NOWAIT on an operation that would wait), -ETIMEDOUT, -EINTR (a signal handler ran),
 * -EIDRM (removed, before or while waiting), -ENOSPC (a shared set whose waiter slots are all in
 * use, after the dead and departed sleepers were reaped), -ENOTRECOVERABLE (a process died
 * holding one of the set's locks). Not async-signal-safe.
 */
LK_API int lk_semop(struct lk_semset *s, struct lk_sembuf *ops, size_t nops,
		    const struct timespec *timeout);

/* lk_semctl commands; the values of <sys/sem.h>'s */
#define LK_IPC_RMID 0
#define LK_GETNCNT 14
#define LK_GETVAL 12
#define LK_GETALL 13
#define LK_GETZCNT 15
#define LK_SETVAL 16
#define LK_SETALL 17

/*
 * lk_semctl - as semctl(2):
 *	LK_GETVAL	the value of semaphore semnum
 *	LK_SETVAL	set it to the int argument (sleepers it satisfies are woken)
 *	LK_GETALL	copy every value into the unsigned short * argument
 *	LK_SETALL	set every value from the const unsigned short * argument
 *	LK_GETNCNT	how many sleepers wait for semnum to increase
 *	LK_GETZCNT	how many sleepers wait for semnum to become zero
 *	LK_IPC_RMID	remove the set (as lk_semset_unlink; for a private set, every later call fails
 *			with -EIDRM until it is closed)
 * Returns the value or count (>= 0), 0 for the others, or: -EINVAL (semnum past the set, as
 * semctl; unknown cmd; NULL array), -ERANGE (a value < 0 or > LK_SEMVMX), -EIDRM,
 * -ENOTRECOVERABLE (not for LK_IPC_RMID, which removes a broken set as lk_semset_unlink does).
 * GETVAL/SETVAL/GETNCNT/GETZCNT take the semaphore's lock (GETNCNT/GETZCNT walk its sleepers);
 * GETALL/SETALL/IPC_RMID the set lock, and wait out every semaphore lock. SETVAL, SETALL and
 * IPC_RMID may wake sleepers (system calls, after the lock). Not async-signal-safe.
 */
LK_API int lk_semctl(struct lk_semset *s, unsigned int semnum, int cmd, ...);

/* Contention figures of a set: every lock acquisition any lk_semop/lk_semctl made on it. */
struct lk_semset_stats {
	uint64_t free;	      /* acquisitions that found the lock free */
	uint64_t contended;   /* acquisitions that had to wait */
	uint64_t wait_ns;     /* total time waited for the locks */
	uint64_t wait_avg_ns; /* wait_ns / contended */
	uint64_t lifetime_ns; /* since the set was created */
	/* wait_ns x 1000 / (lifetime x online CPUs): the "1/1000 cpu time" of ipc/sem.c's figures */
	double wait_per_mille;
	uint64_t simple_ops;	      /* lk_semop calls on one semaphore that took only its lock */
	uint64_t multi_ops;	      /* calls on several semaphores that took only their locks */
	uint64_t global_ops;	      /* calls that took the set lock */
	uint64_t global_mode_entries; /* switches to set-lock mode (each waits out every semaphore lock) */
	uint64_t sleeps;	      /* calls that had to sleep */
	uint64_t wakeups;	      /* sleepers whose operations another call completed */
	unsigned int nsems;
	unsigned int waiter_slots; /* shared sets; 0 for private ones */
};

/*
 * lk_semset_stats - sum the figures of every semaphore and of the set lock. Lock-free (relaxed
 * loads: a snapshot taken while others use the set may be off by the operations in flight):
 * a few loads per semaphore, and once per process a clock calibration that may sleep 20 ms.
 * Returns 0 or -EINVAL. Not async-signal-safe.
 */
LK__SAME_NAME_BEGIN
LK_API int lk_semset_stats(struct lk_semset *s, struct lk_semset_stats *out);
LK__SAME_NAME_END

LK_END_DECLS

#endif
