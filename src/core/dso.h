/* SPDX-License-Identifier: MIT */
/*
 * Internal: the loaded objects that carry lowkey sections, and the process-wide registry lock.
 *
 * The registry lock serializes everything that changes code or the tables describing it: object
 * (un)registration, key flips, probe enabling. It is never held across a call into the dynamic
 * loader (dl_iterate_phdr, dladdr, dlopen): a constructor running inside dlopen() holds the loader's
 * lock and then takes this one.
 */
#ifndef LK_CORE_DSO_H
#define LK_CORE_DSO_H

#include <stdbool.h>
#include <stdint.h>
#include <lowkey/bits/dso.h>

#define LK__DSO_MAX_SEGMENTS 8

enum lk__dso_slot {
	LK__DSO_SLOT_KEY,
	LK__DSO_SLOT_PROBE,
	LK__DSO_SLOTS,
};

struct lk__segment {
	uintptr_t start;
	uintptr_t end;
	int prot; /* PROT_* from the segment's p_flags: what to restore after patching */
};

struct lk__dso_rt {
	const struct lk__dso *desc;
	unsigned int refs; /* translation units whose constructor registered this object */
	char *path;	   /* "" for the main program */
	uintptr_t base;	   /* load bias */
	unsigned int nsegs;
	struct lk__segment segs[LK__DSO_MAX_SEGMENTS];
	void *state[LK__DSO_SLOTS]; /* owned by the module of each slot */
	int load_error; /* the first error a handler met loading it (lk__dso_load_failed) */
	struct lk__dso_rt *next;
};

/*
 * A module that builds state from objects' sections declares a handler; it is called with the
 * registry lock held when an object registers (load) and unregisters (unload).
 */
struct lk__dso_handler {
	const char *name;
	void (*load)(struct lk__dso_rt *dso);
	void (*unload)(struct lk__dso_rt *dso);
};

#define LK__DSO_HANDLER(ident, ...)                               \
	static const struct lk__dso_handler ident __attribute__(( \
		used, section("lk__dso_handlers"), aligned(sizeof(void *)))) = { __VA_ARGS__ }

void lk__registry_lock(void);
void lk__registry_unlock(void);

/*
 * A handler could not do its part for a loading object (lk_last_error() says why): noted in
 * dso->load_error, and once every handler has run, passed to lk__dso_on_load_error if a module
 * set it (tracing does: such an error means sites that should record cannot). Registry lock held.
 */
void lk__dso_load_failed(struct lk__dso_rt *dso, int err);
extern void (*lk__dso_on_load_error)(const struct lk__dso_rt *dso, int err);

/*
 * Register the registry's fork handlers now, if they are not yet. A module whose own fork
 * handlers take a lock that is held while taking the registry lock calls this first, so that its
 * prepare handler runs before the registry's (pthread_atfork runs prepare handlers in reverse).
 */
void lk__registry_fork_init(void);

/* The registered objects, newest first. Call with the registry lock held. */
struct lk__dso_rt *lk__dso_list(void);

/*
 * Run fn once the main program has registered its sections, if it will register them later than
 * now (a library's constructor calling this runs before the program's): returns true then, false
 * if the caller should run fn itself because the program is registered already or never will be.
 * fn runs without the registry lock, on the thread that runs the program's constructors.
 */
bool lk__dso_after_main_program(void (*fn)(void));

/* Whether the main program's dynamic relocations name lk__dso_register (main_program.c). */
bool lk__main_program_refers_to_register(void);

/* The protection of the segment holding addr in dso, or -1 if none does. */
int lk__dso_prot(const struct lk__dso_rt *dso, uintptr_t addr);

#endif
