/* SPDX-License-Identifier: MIT */
/*
 * Internal: the pieces of the watch module.
 *
 *   arch/<arch>.c  how many debug registers a thread has, which lengths and alignments the CPU
 *                  takes, how to read the instruction pointer from a signal context
 *   table.c        every watchpoint lives in a table that is never freed, so a SIGTRAP that
 *                  arrives late can always look its watchpoint up and find it gone
 *   thread.c       per-thread state: the thread's lock, its thread-scope watchpoints, its exit
 *   slots.c        the slot accounting, as the kernel's hw_breakpoint.c: per-thread counts, a
 *                  per-CPU histogram of them, the process-scope count, and the per-CPU
 *                  reader-writer lock around them
 *   trap.c         the SIGTRAP handler: from a hit to a callback, or to the queue
 *   deliver.c      the deferred queue and the delivery thread
 *   watch.c        the public functions
 *   sampler.c      watching another process through perf ring buffers
 */
#ifndef LK_WATCH_INTERNAL_H
#define LK_WATCH_INTERNAL_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <ucontext.h>

#include <lowkey/watch.h>

#define LK__WATCH_ACCESS_MASK (LK_WATCH_WRITE | LK_WATCH_READWRITE | LK_WATCH_EXEC)
#define LK__WATCH_FLAGS_MASK \
	(LK__WATCH_ACCESS_MASK | LK_WATCH_PROCESS | LK_WATCH_DEFERRED | LK_WATCH_DISABLED)

/* The most debug registers any architecture gives a thread (arm64 has up to 16). */
#define LK__WATCH_MAX_SLOTS 16

/* ---- arch ---- */

/* The perf_event_attr breakpoint fields for one watchpoint. */
struct lk__watch_bp {
	uint32_t type; /* HW_BREAKPOINT_W, _RW, _X */
	uint64_t addr;
	uint64_t len;
};

/* Debug address registers per thread, shared by data and execute watchpoints, as the
 * architecture defines them (x86-64: 4); 0 where lowkey has no watchpoints for it. */
unsigned int lk__watch_arch_slots(void);

/*
 * 0 where a watchpoint may signal the thread that hit it (lk_watch_add()), else -EOPNOTSUPP with
 * the reason (arm64: the kernel's step over the access goes wrong with a signal). Makes no system
 * call.
 */
int lk__watch_arch_signals(void);

/* ---- slots.c ---- */

/*
 * The debug registers a thread has, as this system counts them: the kernel's own count, learned
 * once by opening disabled write breakpoints on the calling thread until it answers ENOSPC (arm64
 * has 2 to 16, the CPU says how many); lk__watch_arch_slots() where perf cannot tell (denied,
 * missing) and 0 where the architecture has no support. At most LK__WATCH_MAX_SLOTS.
 */
unsigned int lk__watch_slots(void);

/*
 * The architecture's rules for a watchpoint, each 0 or -EINVAL with a message that says what this
 * CPU accepts (-EOPNOTSUPP where lowkey has no watchpoints for it). None makes a system call.
 * lk__watch_arch_exec: an execute watchpoint at addr (len must be 1): the breakpoint's length
 * and the instruction's bytes that must lie in user space. lk__watch_arch_data: len bytes at addr
 * for a data watchpoint. lk__watch_arch_user_range: addr..addr+len-1 in user space.
 */
int lk__watch_arch_exec(uintptr_t addr, size_t len, uint64_t *bp_len, uint64_t *insn_len);
int lk__watch_arch_data(uintptr_t addr, size_t len);
int lk__watch_arch_user_range(uintptr_t addr, uint64_t len);

/* ---- check.c ---- */

/* Check addr/len for access (LK_WATCH_*) by the rules above and fill bp. */
int lk__watch_check(uintptr_t addr, size_t len, unsigned int access, struct lk__watch_bp *bp);

/* The instruction pointer in a signal context. Async-signal-safe. */
uintptr_t lk__watch_arch_ip(const ucontext_t *uc);

/*
 * Whether a SIGTRAP is a debug trap that names no breakpoint and was not asked for by the program
 * (on x86: TRAP_BRKPT, DR6 empty, and not after an INT1 instruction). Async-signal-safe.
 */
bool lk__watch_arch_unattributed_trap(const siginfo_t *si, const ucontext_t *uc);

/* ---- the table ---- */

struct lk__wthread;

struct lk_watch {
	/* Read by the signal handler. */
	uint32_t index;		/* position in the table: fixed */
	uint16_t gen;		/* bumped each time the entry is reused (atomic) */
	int live;		/* callbacks may run (atomic) */
	unsigned long inflight; /* handlers and deliveries inside (atomic) */
	unsigned int flags;
	uintptr_t addr; /* atomic: lk_watch_move() changes them */
	size_t len;
	lk_watch_fn fn;
	void *arg;
	uint64_t hits, delivered, dropped, ignored; /* atomic */

	/* Owned by whoever holds the entry (lk_watch_add .. lk_watch_remove). */
	struct lk__watch_bp bp;
	bool disabled; /* as the kernel event is now (LK_WATCH_DISABLED, lk_watch_disable()) */
	unsigned int fork_gen; /* lk__watch_fork_gen at add: another value means a fork()ed copy */
	struct lk__wthread *owner; /* thread scope: the thread; its lock guards the fields below */
	struct lk_watch *thread_next; /* in owner->watches */
	bool ended;		      /* thread scope: the owner exited and its fd is closed */
	int fd;			      /* thread scope */
	int *fds;		      /* process scope: one per thread that existed at add */
	unsigned int nfds;

	uint32_t free_next; /* in the shared free list: the next entry's index + 1, 0 at the end */
};

/* An entry from the calling thread's cache or the shared free list; NULL when out of memory. */
struct lk_watch *lk__watch_entry_alloc(void);

/* Give w back (a new generation makes any hit still in flight for it stale). */
void lk__watch_entry_free(struct lk_watch *w);

/* The entry at index, or NULL. Async-signal-safe, lock-free. */
struct lk_watch *lk__watch_entry_lookup(uint32_t index);

/* The perf sig_data that names w: a tag, w's generation and its index. */
uint64_t lk__watch_token(const struct lk_watch *w);

/* Whether sig_data is one of lowkey's tokens; if so its index and generation. */
bool lk__watch_token_decode(uint64_t sig_data, uint32_t *index, uint16_t *gen);

/* Return the calling thread's cached entries to the shared list (thread exit). */
void lk__watch_entry_cache_flush(struct lk_watch **cache, unsigned int *n);

/* ---- threads ---- */

#define LK__WATCH_ENTRY_CACHE 8

struct lk__wthread {
	pthread_mutex_t lock; /* guards nr_thread, watches, exited, and each watch's thread fields */
	pid_t tid;
	unsigned int nr_thread; /* slots this thread's thread-scope watchpoints use (or reserve) */
	struct lk_watch *watches; /* its thread-scope watchpoints */
	bool exited;		  /* freed when exited and watches is empty, by whoever sees that */
	unsigned int fork_gen;
	/* Only the thread itself touches these. */
	struct lk_watch *entry_cache[LK__WATCH_ENTRY_CACHE];
	unsigned int nr_cached;
};

/* Bumped in a fork()ed child: state from before belongs to threads that do not exist there. */
extern unsigned int lk__watch_fork_gen;

/* The calling thread's state, created on first use; NULL when out of memory. */
struct lk__wthread *lk__wthread_self(void);

/* The calling thread's state if it has one (never allocates). */
struct lk__wthread *lk__wthread_peek(void);

/*
 * Unlock t (locked by the caller), freeing it if its thread has exited and it has no watchpoint
 * left: the state lives as long as either.
 */
void lk__wthread_unlock(struct lk__wthread *t);

/* The calling thread's id, cached. Async-signal-safe. */
pid_t lk__watch_gettid(void);

/* Set up fork handling once (pthread_atfork). */
void lk__watch_fork_init(void);

/* ---- slots ---- */

/*
 * Reserve a slot for a thread-scope watchpoint of t (t->lock held): takes the process-wide state
 * as a reader. Returns 0, or -ENOSPC with the message.
 */
int lk__slots_reserve_thread(struct lk__wthread *t);

/* Give back one of t's thread-scope slots (t->lock held). */
void lk__slots_release_thread(struct lk__wthread *t);

/* Give back all of t's thread-scope slots (t->lock held): the thread is exiting. */
void lk__slots_release_thread_all(struct lk__wthread *t);

/* Reserve a slot in every thread for a process-scope watchpoint: takes the state as the writer. */
int lk__slots_reserve_process(void);
void lk__slots_release_process(void);

/* Counts for lk_watch_slots() and for messages. */
void lk__slots_read(unsigned int *process, unsigned int *max_thread);

/* Fork: keep the state still across fork(); start afresh in the child. */
void lk__slots_fork_prepare(void);
void lk__slots_fork_parent(void);
void lk__slots_fork_child(void);

/* ---- traps and delivery ---- */

/* Install the SIGTRAP handler (once) and make sure it is still SIGTRAP's handler. */
int lk__watch_trap_ensure(void);

/* Process-wide counters, for lk_watch_stats(NULL). */
extern uint64_t lk__watch_total_hits, lk__watch_total_delivered, lk__watch_total_dropped,
	lk__watch_total_ignored, lk__watch_total_unattributed;

/* Set once this process has had a watchpoint: from then on unattributed traps are lowkey's. */
extern bool lk__watch_armed;

/* Whether the calling thread is running a callback in the signal handler. */
bool lk__watch_in_callback(void);

/* Whether the calling thread is lowkey's delivery thread. Async-signal-safe. */
bool lk__watch_on_delivery_thread(void);

/* What a hit carries from the handler to the delivery thread. */
struct lk__watch_item {
	uint32_t index;
	uint16_t gen;
	bool late, has_value;
	pid_t tid;
	uintptr_t ip, addr;
	size_t len;
	uint64_t value;
	uint64_t time_ns;
};

/* Start the delivery thread if it is not running. Returns 0 or -EAGAIN/-ENOMEM with a message. */
int lk__watch_deliver_start(void);

/* Queue a hit; false (and nothing queued) when the queue is full. Async-signal-safe, lock-free. */
bool lk__watch_enqueue(const struct lk__watch_item *item);

/* The watchpoint whose deferred callback the calling thread is running, or NULL. */
struct lk_watch *lk__watch_delivering(void);

/* Forget the queue and the thread in a fork()ed child. */
void lk__watch_deliver_fork_child(void);

/* Wait until no handler or delivery is inside w (except the caller's own delivery of w). */
void lk__watch_quiesce(struct lk_watch *w);

/* The fields of a TRAP_PERF siginfo that glibc < 2.37 does not name. */
uint64_t lk__si_perf_data(const siginfo_t *si);
uint32_t lk__si_perf_type(const siginfo_t *si);
uint32_t lk__si_perf_flags(const siginfo_t *si);

#endif
