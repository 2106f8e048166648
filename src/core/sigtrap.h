/* SPDX-License-Identifier: MIT */
/*
 * Internal: one SIGTRAP handler for the whole library, shared by static keys (int3 during a
 * rewrite) and watchpoints (perf sigtrap). It offers each trap to the registered handlers and hands
 * every trap none of them claims to the handler the application had, exactly as if lowkey were not
 * there (SIG_DFL terminates with a core dump, SIG_IGN ignores, a handler is called with its mask
 * and flags honoured).
 */
#ifndef LK_CORE_SIGTRAP_H
#define LK_CORE_SIGTRAP_H

#include <signal.h>
#include <stdbool.h>
#include <ucontext.h>

/*
 * A handler returns true when the trap was its own (and it has dealt with it). It runs in signal
 * context, possibly nested inside another SIGTRAP (SA_NODEFER), and must be async-signal-safe.
 */
typedef bool (*lk__trap_handler)(siginfo_t *si, ucontext_t *uc);

/*
 * lk__sigtrap_add - offer traps to fn from now on; installs the dispatcher on first use.
 * Returns 0, -ENOSPC (too many handlers) or -errno from sigaction(). Idempotent per fn.
 */
int lk__sigtrap_add(lk__trap_handler fn);

/*
 * lk__sigtrap_ensure - make sure the dispatcher is still SIGTRAP's handler. An application that
 * installed its own handler after lowkey's gets it chained behind the dispatcher again. Call
 * before anything that may trap. Returns 0 or -errno.
 */
int lk__sigtrap_ensure(void);

/*
 * lk__sigtrap_hold_async - block every signal but the synchronous ones (SIGTRAP, SIGSEGV, SIGBUS,
 * SIGILL, SIGFPE, which keep the caller's setting) in the calling thread, saving its mask in
 * *saved: no handler, and so no code of the application, runs on it until the mask is restored.
 */
void lk__sigtrap_hold_async(sigset_t *saved);

#endif
