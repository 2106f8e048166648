/* SPDX-License-Identifier: MIT */
/* Internal: the clock module's shared state. */
#ifndef LK_CLOCK_INTERNAL_H
#define LK_CLOCK_INTERNAL_H

#include <linux/perf_event.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include <lowkey/clock.h>

#include "clock/arch/counter.h"

#define LK__NSEC_PER_SEC 1000000000ull

/* Defaults and limits (the header and docs/clock.md quote them). */
#define LK__REBASE_NS_DEFAULT 1000000ull /* 1 ms */
#define LK__REBASE_US_MIN 10
#define LK__REBASE_US_MAX 1000000
#define LK__REBASE_TRIES 4		/* then the system call's value, no base */
#define LK__BRACKET_NS_MAX 10000ull	/* a base's clock_gettime() must take less */
#define LK__SETUP_RETRY_NS 100000000ull /* after EMFILE & co., try again 100 ms later */
#define LK__RESYNC_NS 10000000ull	/* lk_now_ns() re-reads CLOCK_MONOTONIC every 10 ms */
#define LK__STEP_NS 100000ll		/* a larger error is stepped, not slewed */
#define LK__SLEW_PPM 500		/* the largest rate change used to slew */
#define LK__CALIBRATE_NS 200000ull	/* first measurement of the counter's frequency */
#define LK__PAIR_NS_MAX 2000ull		/* a counter/clock pair must be read within this */
/* The counter's frequency is known to within this: a CPU-time base extrapolated over one rebase
 * interval is below the thread's CPU time by at most rebase interval * this (a measured frequency:
 * LK__CALIBRATE_NS at least, longer until its two brackets leave a quarter of this, then refined). */
#define LK__RATE_PPM_MAX 1000
#define LK__CALIBRATE_MAX_NS 10000000ull /* the first measurement gives up being that sure */

/* Fixed point: ns = (cycles * mult) >> 32. */
#define LK__MULT_SHIFT 32

static inline uint64_t lk__scale(uint64_t cycles, uint64_t mult)
{
	return (uint64_t)(((unsigned __int128)cycles * mult) >> LK__MULT_SHIFT);
}

/* A compiler barrier: orders memory accesses against a signal handler of this thread. */
#define lk__barrier() asm volatile("" ::: "memory")

/* A string builder that only copies bytes: usable where snprintf is not (signal handlers). */
struct lk__str {
	char *buf;
	size_t len, cap;
};
#define LK__STR(array) ((struct lk__str){ (array), 0, sizeof(array) })
void lk__str_add(struct lk__str *s, const char *text);
void lk__str_u64(struct lk__str *s, uint64_t v);

/* ---- per-thread CPU time ---- */

/*
 * A base: the thread's CPU time `ns` at counter value `at` (seq: cycles; page: the page's task
 * clock in ns). `tag` is (rebase generation << 32) | the page seqcount the base is valid for (seq
 * method; 0 for page). A rebase first sets the low half to LK__TAG_INVALID, writes the fields,
 * then the new tag with the next generation: a reader that reads the tag before and after the
 * fields and sees it unchanged has a whole base, even when a signal handler of its own thread
 * rebased in between.
 */
struct lk__cputime_base {
	uint64_t tag;
	uint64_t at;
	uint64_t ns;
	uint64_t mult; /* seq: ns per cycle << 32; page: unused */
};

#define LK__TAG_INVALID 0xffffffffu /* odd: never a seqcount the owner sees */

/* `ready` = cookie ^ one of these (see the fork cookie in clock.c). */
#define LK__READY_SEQ 1u
#define LK__READY_PAGE 3u

enum lk__thread_state {
	LK__T_NEW = 0, /* nothing set up yet (zeroed TLS) */
	LK__T_FAST,    /* page mapped; method page or seq */
	LK__T_SYSCALL, /* set-up failed or syscall forced; retry_at says when to try again */
	LK__T_EXITED,  /* thread is exiting: system call, no set-up */
};

/*
 * The calling thread's state, in initial-exec TLS: the fast path reaches every field with one
 * %fs-relative load, and reads only the first cache line.
 *
 * Aligned to a cache line on x86-64 only: glibc lets a dlopen()ed library have initial-exec TLS
 * only if its alignment is at most the static TLS block's, which is the TCB's -- 64 on x86-64,
 * 16 on aarch64 and riscv64, where a 64-byte aligned block makes dlopen() of liblowkey fail
 * ("cannot allocate memory in static TLS block"). There the hot fields may straddle two lines.
 */
#if defined(__x86_64__)
#define LK__CPUTIME_TLS_ALIGN 64
#else
#define LK__CPUTIME_TLS_ALIGN 16
#endif
struct lk__cputime_thread {
	uint64_t ready; /* process cookie ^ LK__READY_<method> while set up, else 0 */
	const volatile struct perf_event_mmap_page *page;
	uint32_t method;  /* enum lk_cputime_method */
	uint32_t gen;	  /* rebase generation */
	uint64_t max_age; /* cycles (seq) or ns (page) */
	uint64_t last;	  /* the largest value returned: keeps the clock monotonic */
	struct lk__cputime_base base;
	/* lk_now_ns()'s floor, and the slow path's. */
	uint64_t now_last;
	volatile sig_atomic_t busy; /* in the slow path: a nested call must not touch the state */
	uint32_t state;		    /* enum lk__thread_state */
	int err;		    /* the set-up's errno, 0 if none */
	bool err_mmap;		    /* ... from mmap, not perf_event_open */
	bool based;		    /* a base has been published since set-up */
	bool switch_check;	    /* lock0 and switches0 were read together */
	uint32_t lock0;		    /* the seqcount at set-up */
	uint64_t switches0;	    /* the thread's context switches at set-up */
	uint64_t retry_at;	    /* CLOCK_MONOTONIC ns before which set-up is not tried again */
	uint64_t cookie;	    /* the process cookie this state belongs to */
	size_t page_len;
} __attribute__((aligned(LK__CPUTIME_TLS_ALIGN)));

extern __thread struct lk__cputime_thread lk__cputime_tls
	__attribute__((tls_model("initial-exec")));

/* ---- process-wide state ---- */

enum lk__init_state { LK__INIT_NONE = 0, LK__INIT_RUNNING, LK__INIT_DONE };

struct lk__clock_stats {
	uint64_t threads_set_up, thread_setup_failures;
	uint64_t rebases_switch, rebases_age, rebase_retries, syscall_reads, pages_reopened;
	uint64_t now_resyncs, now_steps, now_max_error_ns;
	int64_t now_last_error_ns;
};

struct lk__clock {
	int init; /* enum lk__init_state */
	/* Set once by the init, read-only after it. */
	struct lk__counter_info counter;
	int forced_cputime; /* -1: auto, else enum lk_cputime_method */
	int forced_now;	    /* -1: auto, else enum lk_now_method */
	uint64_t rebase_ns;
	char env_note[192];
	enum lk_now_method now_method;
	char now_reason[256];
	bool perf_denied; /* a permanent perf_event_open failure: no thread tries */
	bool no_counter;  /* no cap_user_time and no usable counter: no thread tries */
	int perf_errno;
	bool cap_user_time;
	int cputime_seen; /* method the last successful set-up chose, -1 none */
	/* Set by the timebase: the counter's frequency, refined over time. */
	uint64_t hz;		      /* atomic */
	uint64_t cycle_mult;	      /* atomic: ns per cycle << 32, from hz */
	const char *hz_source;	      /* atomic (pointer to a static string) */
	struct lk__clock_stats stats; /* atomic counters */
};

extern struct lk__clock lk__clock;

/* Points to the process cookie, in a page the kernel zeroes in a forked child. */
extern const volatile uint64_t *lk__cookie_ptr;

/* Relaxed atomic helpers. */
#define LK__LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define LK__STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define LK__COUNT(field) __atomic_fetch_add(&lk__clock.stats.field, 1, __ATOMIC_RELAXED)

/*
 * The public clocks, for liblowkey's own modules (probes): hidden aliases, called directly rather
 * than through the PLT.
 */
uint64_t lk__thread_cputime_ns(void);
/* lk_thread_cputime_ns() for a counter value the caller read just before (one read for both). */
uint64_t lk__thread_cputime_at(uint64_t cycles);
uint64_t lk__now_ns(void);

/* clock.c: process-wide init, at most once; false while it runs (the caller falls back). */
bool lk__clock_init(void);
/* The current process cookie, after a fork makes a new one. */
uint64_t lk__clock_cookie(void);

/* timebase.c */
void lk__timebase_init(void);
uint64_t lk__vdso_ns(int clock);
uint64_t lk__now_slow(struct lk__cputime_thread *t);
/* Resynchronize if due (from any slow path, so the frequency is refined even without lk_now_ns). */
void lk__timebase_tick(void);
void lk__timebase_after_fork(void);
uint64_t lk__ns_to_cycles(uint64_t ns);

/* thread.c: a thread's page (the slow path calls these with t->busy set). */
void lk__thread_init(void);
void lk__thread_setup(struct lk__cputime_thread *t);
void lk__thread_reopen(struct lk__cputime_thread *t);
void lk__thread_forget_parent(struct lk__cputime_thread *t);
bool lk__thread_page_follows(const struct lk__cputime_thread *t);

/* cputime.c */
uint64_t lk__cputime_slow(struct lk__cputime_thread *t);
uint64_t lk__syscall_cputime(void);
/* The page's task clock at counter value cyc (cap_user_time), false if the page cannot say. */
bool lk__page_task_clock(const volatile struct perf_event_mmap_page *page, uint64_t cyc,
			 uint64_t *task_clock);
const char *lk__cputime_method_name(int method);

#endif
