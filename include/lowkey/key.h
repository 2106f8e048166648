/* SPDX-License-Identifier: MIT */
/*
 * Static keys: branches that cost one NOP while off.
 *
 *	LK_DEFINE_KEY_FALSE(verbose);
 *
 *	void hot_path(void)
 *	{
 *		if (lk_branch_unlikely(&verbose))
 *			log_details();	// out of line; not reached while verbose is off
 *	}
 *
 *	lk_key_enable(&verbose);	// rewrites every site of verbose, in every loaded object
 *
 * While a key is in the direction its site expects, the site is a 5-byte NOP (0f 1f 44 00 00) and
 * reads no memory. Flipping the key rewrites each site into a `jmp rel32` (or back) while other
 * threads may run the sites: each of them goes one way or the other, never anywhere else, and none
 * is stopped, trapped or killed.
 *
 * How. No flip ever makes a thread trap, whatever the program does with its signal masks and
 * handlers. Where another thread exists, the flip writes copies of the pages holding the sites
 * and swaps them in with mremap(): no byte a thread may be executing is ever written, and a thread
 * in those pages runs the old page or the new one, each whole (one that faults meanwhile waits
 * for the swap). The pages stay mapped from their file in /proc/PID/maps, so profilers, debuggers
 * and uprobes (perf probe, bpftrace's usdt:) keep working. A file deleted or replaced since it was
 * loaded (an upgrade) is reached through the fd lowkey keeps from its first such flip, or through
 * /proc/self/map_files (CAP_CHECKPOINT_RESTORE or CAP_SYS_ADMIN); where neither can, the copy is
 * anonymous, which is refused where those pages hold changes lowkey cannot tell from a uprobe's
 * breakpoint (see -ESTALE). lowkey keeps one fd open (O_CLOEXEC) per file it remapped, up to 16. Where
 * the caller is the process's only thread (glibc and the kernel both count one), the sites are
 * written in place instead: nothing else can be running them. On aarch64 and riscv64 a site is
 * one aligned word, rewritten in place with one store in every case (the architectures allow it
 * while other threads run it). The calling thread holds its asynchronous signals while it flips,
 * so no handler runs on it.
 *
 * Sites work in the executable, in shared libraries and in dlopen()ed objects, PIE or not, and may
 * test a key defined in another object. A site must name its key by address (&name): the address
 * is recorded at build time.
 *
 * Where the system forbids code patching (PR_SET_MDWE, SELinux execmod, systemd's
 * MemoryDenyWriteExecute=), flipping returns -EPERM. Building with -DLK_KEYS_PORTABLE (CMake option
 * LK_KEYS_PORTABLE=ON) turns every site into a load + branch instead, which works everywhere; the
 * API does not change. Objects built either way can share keys. Sites are also load + branch in C
 * compiled without optimization (-O0: the site's constants reach the assembler only once inlined,
 * see below); -O1 and above in C, and C++ at any level, get patched sites. GCC >= 12 and
 * Clang >= 14 are tested, C99 to C17 and C++11 to C++20.
 *
 * None of the functions below is async-signal-safe: they take a process-wide mutex and may allocate.
 * lk_branch_likely()/lk_branch_unlikely() themselves are safe anywhere, signal handlers included.
 */
#ifndef LOWKEY_KEY_H
#define LOWKEY_KEY_H

#include <stdbool.h>
#include <stddef.h>
#include <lowkey/bits/compiler.h>
#include <lowkey/bits/dso.h>

LK_BEGIN_DECLS

/* A key. Its fields belong to the library: use the macros and functions below. */
struct lk_key {
	int lk__count; /* > 0: enabled. Read by portable sites. */
	unsigned int lk__flags;
	void *lk__state; /* the key's sites, owned by the library */
};

/* The two kinds of definition carry their initial direction in their type, so a site can be
 * emitted as a NOP or a jmp at compile time. Both start with a struct lk_key. */
struct lk_key_false {
	struct lk_key key;
};
struct lk_key_true {
	struct lk_key key;
};

#define LK__KEY_INIT_TRUE 0x1u

/* clang-format off */
#define LK_KEY_INIT_FALSE { { 0, 0, NULL } }
#define LK_KEY_INIT_TRUE { { 1, LK__KEY_INIT_TRUE, NULL } }
/* clang-format on */

/* Define a key, off (FALSE) or on (TRUE) at start. May be static. */
#define LK_DEFINE_KEY_FALSE(name) struct lk_key_false name = LK_KEY_INIT_FALSE
#define LK_DEFINE_KEY_TRUE(name) struct lk_key_true name = LK_KEY_INIT_TRUE

/*
 * Declare a key defined in another file or another shared object. LK_DECLARE_KEY is the usual,
 * off-at-start key; a key defined with LK_DEFINE_KEY_TRUE must be declared LK_DECLARE_KEY_TRUE.
 * (A site compiled against the wrong declaration is found when its object loads and rewritten to
 * the key's real direction where patching is allowed.)
 */
#define LK_DECLARE_KEY_FALSE(name) extern struct lk_key_false name
#define LK_DECLARE_KEY_TRUE(name) extern struct lk_key_true name
#define LK_DECLARE_KEY(name) LK_DECLARE_KEY_FALSE(name)

#ifndef __cplusplus
/* LK_KEY(&k): the struct lk_key inside any kind of key (or a struct lk_key * as it is). */
#define LK_KEY(k)                                                        \
	(__extension__ _Generic((k),                                     \
		struct lk_key_true *: (struct lk_key *)(k),              \
		struct lk_key_false *: (struct lk_key *)(k),             \
		const struct lk_key_true *: (const struct lk_key *)(k),  \
		const struct lk_key_false *: (const struct lk_key *)(k), \
		default: (k)))
#define LK__KEY_INIT_DIRECTION(k) \
	(__extension__ _Generic((k), struct lk_key_true *: 1, struct lk_key_false *: 0))
#else
} /* extern "C" */
static inline constexpr struct lk_key *LK_KEY(struct lk_key_true *k)
{
	return &k->key;
}
static inline constexpr struct lk_key *LK_KEY(struct lk_key_false *k)
{
	return &k->key;
}
static inline constexpr struct lk_key *LK_KEY(struct lk_key *k)
{
	return k;
}
static inline constexpr const struct lk_key *LK_KEY(const struct lk_key_true *k)
{
	return &k->key;
}
static inline constexpr const struct lk_key *LK_KEY(const struct lk_key_false *k)
{
	return &k->key;
}
static inline constexpr const struct lk_key *LK_KEY(const struct lk_key *k)
{
	return k;
}
static inline constexpr int lk__key_init_direction(const struct lk_key_true *)
{
	return 1;
}
static inline constexpr int lk__key_init_direction(const struct lk_key_false *)
{
	return 0;
}
#define LK__KEY_INIT_DIRECTION(k) lk__key_init_direction(k)
extern "C" {
#endif

/*
 * lk_branch_unlikely(&key) - true while key is enabled; the true branch is laid out of line.
 * lk_branch_likely(&key)   - true while key is enabled; the false branch is laid out of line.
 *
 * Cost: one 5-byte NOP and no memory access while the key is in its initial direction (FALSE key
 * with _unlikely, TRUE key with _likely); one jmp otherwise. In a portable build: a load and a
 * branch. Async-signal-safe. The argument must be &name of a defined or declared key.
 */
#define lk_branch_unlikely(k) LK__SITE_EXPECT(lk__branch((k), 1), 0)
#define lk_branch_likely(k) LK__SITE_EXPECT(lk__branch((k), 0), 1)

/*
 * Key state. Each returns 0 or a negative errno:
 *
 * lk_key_enable   - turn on; no effect if already on.
 * lk_key_disable  - turn off, whatever the reference count was.
 * lk_key_inc      - add a reference; on while the count is above zero (kernel static_key_slow_inc).
 * lk_key_dec      - drop a reference; off when it reaches zero.
 *
 * Errors (the key and its sites are unchanged after any of them; lk_last_error() says what
 * failed and what to change):
 *   -EINVAL     key is NULL; lk_key_dec on a key whose count is zero. Also: pages that cannot be
 *               remapped a page at a time (code in hugetlbfs pages).
 *   -EOVERFLOW  lk_key_inc past INT_MAX references.
 *   -EPERM      the system forbids making code writable or executable anew (PR_SET_MDWE, SELinux
 *               execmod or execmem, MemoryDenyWriteExecute=), or the code is sealed (mseal()), or
 *               a seccomp filter refuses mprotect(), mmap() or mremap() (with EPERM or EACCES).
 *   -ENOSYS     membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE) is unavailable (kernel before
 *               4.16, or a seccomp filter -- also one installed after earlier flips worked, even
 *               in the middle of this one) and the process has more than one thread.
 *   -ESTALE     another thread exists, the file the sites' pages were loaded from is deleted or
 *               replaced and cannot be reopened, and those pages hold changes of their own
 *               (breakpoints of a debugger or of uprobes, or sites written while the process had
 *               one thread): an anonymous copy would keep a uprobe's breakpoint after the tracer
 *               removed it, and the kernel would then kill a thread that reached it.
 *   -ENOMEM     out of memory (or of mappings: vm.max_map_count).
 * A seccomp filter that kills the process on one of these system calls kills it on a flip too;
 * the calls are listed below.
 *
 * Cost: when the direction does not change, one atomic operation (inc, dec) or an uncontended
 * mutex. When it does, the sites are rewritten. With another thread in the process (x86-64): per
 * run of pages holding sites, a read of /proc/self/maps, an open() and fstat() of the mapped file,
 * an mmap(), a copy of the pages, an mprotect() and an mremap(); then one membarrier() for the
 * whole change -- tens of microseconds, more the more mappings the process has. With one thread,
 * or on aarch64 and riscv64: a read of /proc/self/stat (x86-64), two mprotect() calls per run of
 * pages and one to three membarrier() calls. Other threads never wait except at a page being
 * swapped, where a page fault holds them for the swap. A swapped-in page is locked in memory only
 * under mlockall(MCL_FUTURE): pages locked by mlock() or MCL_CURRENT alone come back unlocked.
 * Thread-safe; not async-signal-safe. Safe in a fork()ed child.
 */
LK_API int(lk_key_enable)(struct lk_key *key);
LK_API int(lk_key_disable)(struct lk_key *key);
LK_API int(lk_key_inc)(struct lk_key *key);
LK_API int(lk_key_dec)(struct lk_key *key);

/*
 * lk_key_enabled - whether key is on now (its count is above zero). A relaxed load; false for NULL.
 * For slow paths: a site is the way to test a key on a hot path. Async-signal-safe.
 */
LK_API bool(lk_key_enabled)(const struct lk_key *key);

/*
 * lk_key_sites - how many patched sites of key are registered in the objects loaded now: one per
 * copy of the code (a site in a function inlined in three places counts three times); load +
 * branch sites are not counted. -EINVAL for NULL. Takes the process-wide mutex.
 */
LK_API int(lk_key_sites)(const struct lk_key *key);

#define lk_key_enable(k) (lk_key_enable)(LK_KEY(k))
#define lk_key_disable(k) (lk_key_disable)(LK_KEY(k))
#define lk_key_inc(k) (lk_key_inc)(LK_KEY(k))
#define lk_key_dec(k) (lk_key_dec)(LK_KEY(k))
#define lk_key_enabled(k) (lk_key_enabled)(LK_KEY(k))
#define lk_key_sites(k) (lk_key_sites)(LK_KEY(k))

/*
 * Batches: many keys flipped in one rewriting pass, sharing its system calls.
 *
 *	struct lk_key_change changes[] = {
 *		{ LK_KEY(&trace_open), LK_KEY_ENABLE },
 *		{ LK_KEY(&trace_close), LK_KEY_ENABLE },
 *	};
 *	lk_key_apply(changes, 2);
 *
 * The changes apply in order (the same key may appear several times) and all or none take effect:
 * an invalid change (NULL key, a DEC below zero, an INC past INT_MAX) or a failure to rewrite
 * returns its error with every key as it was. Errors and cost as for lk_key_enable(), with n
 * changes costing one pass. n == 0 does nothing; changes may be NULL then.
 */
enum lk_key_op {
	LK_KEY_ENABLE,
	LK_KEY_DISABLE,
	LK_KEY_INC,
	LK_KEY_DEC,
};

struct lk_key_change {
	struct lk_key *key;
	enum lk_key_op op;
};

LK_API int lk_key_apply(const struct lk_key_change *changes, size_t n);

LK_END_DECLS

/* The inline machinery of the sites; not API. */
#include <lowkey/bits/key_site.h>

#endif
