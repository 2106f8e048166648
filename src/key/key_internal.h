/* SPDX-License-Identifier: MIT */
/* Internal to the key module. */
#ifndef LK_KEY_INTERNAL_H
#define LK_KEY_INTERNAL_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <ucontext.h>

#include <lowkey/key.h>

#include "core/dso.h"
#include "internal/key.h"

/*
 * A site's length, and whether rewriting it in place may make a thread trap (x86-64's int3
 * protocol: patch.c then rewrites in place only where no other thread can run a site, and
 * remaps pages elsewhere). On aarch64 and riscv64 a site is one aligned 32-bit word that is
 * rewritten in place with one store: no thread ever traps.
 */
#if defined(__x86_64__)
#define LK__SITE_LEN 5
#define LK__ARCH_TRAPS 1
#else
#define LK__SITE_LEN 4
#define LK__ARCH_TRAPS 0
#endif

/* One site, as the registry knows it. */
struct lk__site_rt {
	uint8_t *code;
	uint8_t *target;
	struct lk__dso_rt *dso;
	bool jump_when_on;
};

/* What key->lk__state points to: every registered site of the key. */
struct lk__key_state {
	size_t n, cap;
	unsigned long filter_gen; /* see registry.c: unload */
	struct lk__site_rt *sites;
};

/* One instruction to rewrite. */
struct lk__patch {
	uint8_t *addr;
	uint8_t insn[LK__SITE_LEN]; /* the new instruction */
	uint8_t old[LK__SITE_LEN];  /* the instruction it replaces, to restore on failure */
	uintptr_t resume;	    /* where a thread trapping here goes: as the new insn would */
	int prot;		    /* the page protection to restore afterwards */
};

/* Pages holding sites of a batch, neighbours with the same protection merged. */
struct lk__page_run {
	uintptr_t start, end;
	int prot;
};

/* ---- key.c ---- */

/* lk_key_apply() for callers that hold the registry lock (other modules' DSO handlers). */
int lk__key_apply_locked(const struct lk_key_change *changes, size_t n);

/* ---- registry.c: sites of loaded objects (registry lock held) ---- */

/* Append to *patches the rewrites that bring key's sites to the direction `on`. */
int lk__key_collect(struct lk_key *key, bool on, struct lk__patch **patches, size_t *n,
		    size_t *cap);

/* ---- patch.c: rewriting code while threads run (registry lock held) ---- */

/*
 * Rewrite all n sites in one pass. 0 means every site holds its new instruction; an error, that
 * every site holds its old one (written back if need be -- should even that fail, the message says
 * so). Sorts patches; frees nothing.
 */
int lk__patch_run(struct lk__patch *patches, size_t n);

/* Publish the sorted addresses of every registered site (for late traps); takes ownership. */
void lk__patch_set_known(uintptr_t *addrs, size_t n);

/* The message for a refused mprotect() (or mremap()) of the pages at page; returns -EPERM or -err. */
int lk__patch_explain_mprotect(int err, const void *page);

/* From the trap handler (async-signal-safe): */
void lk__patch_trap_enter(void);
void lk__patch_trap_exit(void);
bool lk__patch_lookup(uintptr_t addr, uintptr_t *resume);
bool lk__patch_known(uintptr_t addr);

/* ---- remap.c: rewriting without a trap ---- */

/*
 * Write every patch's new instruction (or its old one, restore) into copies of the runs' pages,
 * then move the copies over the runs. No thread ever executes a page being written. An error
 * before the first move changes nothing; a failed move puts back the runs already moved.
 */
int lk__remap(const struct lk__page_run *runs, size_t nruns, const struct lk__patch *p, size_t n,
	      bool restore);

/* ---- arch/<arch>.c ---- */

/* The instruction a site holds when it jumps (to target) or falls through. */
void lk__arch_site_insn(uint8_t insn[LK__SITE_LEN], const uint8_t *code, const uint8_t *target,
			bool jump);

/* Whether code currently holds one of its two instructions; *jumping says which. */
bool lk__arch_site_decode(const uint8_t *code, const uint8_t *target, bool *jumping);

/* Where execution continues after insn at code. */
uintptr_t lk__arch_resume(const uint8_t *code, const uint8_t insn[LK__SITE_LEN]);

enum lk__rewrite {
	LK__REWRITE_DONE,   /* every site holds its new instruction */
	LK__REWRITE_UNDONE, /* a sync failed (*err); every site holds its old instruction again */
	LK__REWRITE_TORN,   /* a sync failed (*err) midway; only remapping can restore the sites */
};

/*
 * Write the sites in place (sorted, pages already writable): x86-64's int3 protocol, or one
 * store per site on the word architectures.
 */
enum lk__rewrite lk__arch_rewrite(const struct lk__patch *patches, size_t n, int *err);

/* Copy len bytes of code, unseen by sanitizers (their shadow of code pages is read-only). */
void lk__arch_copy_code(void *dst, const void *src, size_t len);

/* The SIGTRAP handler for threads that run into a site being rewritten. */
bool lk__arch_trap(siginfo_t *si, ucontext_t *uc);

#endif
