/* SPDX-License-Identifier: MIT */
/*
 * Per-DSO registration of lowkey's sections. Nothing here is API.
 *
 * Static-key sites (and later probe sites) are described by tables the compiler and assembler place
 * in named sections. Their names start with "__": the assembler makes a symbol of a section's name,
 * which would capture a C function of the same name (lk_key_sites) in the same object. Each shared object -- the executable, every library, a dlopen()ed plugin --
 * has its own copy of each section, bounded by linker-made __start_/__stop_ symbols. Declared weak
 * and hidden, those symbols resolve to the bounds inside the object that references them (or to
 * NULL when it has none), so every object describes exactly its own sites.
 *
 * lk__this_dso is weak and hidden: one instance per object however many translation units include
 * this header. Every such unit gets a constructor that registers it; registration is idempotent,
 * and the destructors that run at dlclose() and exit unregister it, so the library never touches
 * an unmapped table.
 */
#ifndef LOWKEY_BITS_DSO_H
#define LOWKEY_BITS_DSO_H

#include <stdint.h>
#include <lowkey/bits/compiler.h>

LK_BEGIN_DECLS

#define LK__DSO_MAGIC 0x6c6b6473u /* "lkds" */
#define LK__DSO_ABI 3u /* 2: __lk_probe_sites holds offsets to slots; 3: __lk_probe_sdt */

struct lk__section {
	const void *start;
	const void *stop;
};

struct lk__dso {
	uint32_t magic;
	uint32_t abi;
	struct lk__section key_sites;
	struct lk__section probe_sites;
	struct lk__section sdt_sites; /* USDT semaphores: see lowkey/probe.h */
};

LK_API void lk__dso_register(const struct lk__dso *dso);
LK_API void lk__dso_unregister(const struct lk__dso *dso);

#define LK__SECTION_BOUNDS(name)                                                        \
	extern const char __start_##name[] __attribute__((weak, visibility("hidden"))); \
	extern const char __stop_##name[] __attribute__((weak, visibility("hidden")))

LK__SECTION_BOUNDS(__lk_key_sites);
LK__SECTION_BOUNDS(__lk_probe_sites);
LK__SECTION_BOUNDS(__lk_probe_sdt);

#ifdef __cplusplus
extern /* a namespace-scope const would otherwise have internal linkage */
#endif
	__attribute__((weak, visibility("hidden"))) const struct lk__dso lk__this_dso = {
		LK__DSO_MAGIC,
		LK__DSO_ABI,
		{ __start___lk_key_sites, __stop___lk_key_sites },
		{ __start___lk_probe_sites, __stop___lk_probe_sites },
		{ __start___lk_probe_sdt, __stop___lk_probe_sdt },
	};

/*
 * Priority 101 runs these before the object's ordinary constructors and after its ordinary
 * destructors, so code in those may already flip keys and run sites.
 */
__attribute__((constructor(101), used)) static void lk__dso_ctor(void)
{
	lk__dso_register(&lk__this_dso);
}

__attribute__((destructor(101), used)) static void lk__dso_dtor(void)
{
	lk__dso_unregister(&lk__this_dso);
}

LK_END_DECLS

#endif
