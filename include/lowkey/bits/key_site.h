/* SPDX-License-Identifier: MIT */
/*
 * The inline machinery of static key sites, included by lowkey/key.h: the site table, the asm goto
 * that makes a site, and the load + branch form of portable builds. Nothing here is API.
 */
#ifndef LOWKEY_BITS_KEY_SITE_H
#define LOWKEY_BITS_KEY_SITE_H

#ifndef LOWKEY_KEY_H
#error "include <lowkey/key.h>, not <lowkey/bits/key_site.h>"
#endif

#include <stdbool.h>
#include <stdint.h>
#include <lowkey/bits/arch.h>
#include <lowkey/bits/compiler.h>

LK_BEGIN_DECLS

/*
 * A site's entry in section __lk_key_sites (16 bytes, position-independent, no relocation at load):
 *   code   - the site's 5 bytes, relative to this field
 *   target - where the jmp goes, relative to this field
 *   ref    - a static slot holding the key's address, relative to this field, ORed with flags.
 * The slot is what lets a site in a shared library name a key in another object: the slot gets an
 * ordinary dynamic relocation while this table stays read-only.
 */
struct lk__key_site {
	int32_t code;
	int32_t target;
	int64_t ref;
};

#define LK__SITE_JUMP_WHEN_ON 0x1 /* the site jumps while the key is on (unlikely sites) */
#define LK__SITE_INIT_JMP 0x2	  /* the compiled instruction is the jmp */
#define LK__SITE_FLAGS 0x7

/*
 * Where a site is patched code. The asm goto that makes a site lives in a function of its own, as
 * in the kernel's arch_static_branch(): its labels are then that function's, so no compiler sees
 * a jump from one site to another's label past the caller's declarations (Clang before 17 checks
 * every asm goto against every asm goto label of a function, and rejects the caller in C++ as
 * soon as an initialized variable sits between two sites). The key is passed as the address of a
 * slot holding it, which must reach the assembler as a constant:
 *  - C: the slot is a static of the caller and the function is inlined; the address is a
 *    constant only once it is, so an unoptimized C build (no __OPTIMIZE__) gets load + branch
 *    sites, which share keys with patched ones;
 *  - C++: the slot is a static member of a class template of an unnamed namespace, instantiated
 *    with a class local to the site, and the function a template of that class, at every
 *    optimization level. Internal linkage is what makes the slot's address a link-time constant
 *    in position-independent code: a static of an inline function or template would be a
 *    preemptible symbol there.
 */
#if !defined(LK_KEYS_PORTABLE) && LK_ARCH_HAVE_PATCHED_SITES && \
	(defined(__cplusplus) || defined(__OPTIMIZE__))
#define LK__PATCHED_SITES 1
#endif

#ifdef LK__PATCHED_SITES
/*
 * The site: a NOP or a jump (the key's initial direction decides which is compiled: the
 * architecture's LK__ARCH_SITE_CODE, label 1) and its table entry. Operands: 0 the slot, 1 the
 * entry's flags, 2 whether the compiled instruction is the jump; label lk__jumped. "?" puts the
 * entry in the section group of the code around it, so a copy of an inline function or template
 * that the linker discards (a duplicate COMDAT group) takes its entries along.
 */
/* clang-format off */
#define LK__SITE_ENTRY                                                                        \
	".pushsection __lk_key_sites, \"aR?\", @progbits\n\t"                                 \
	".balign 8\n\t"                                                                       \
	".long 1b - .\n\t"                                                                    \
	".long %l[lk__jumped] - .\n\t"                                                        \
	".quad " LK__SYM(0) " + " LK__SYM(1) " - .\n\t"                                         \
	".popsection"
#define LK__SITE_ASM LK__ARCH_SITE_CODE LK__SITE_ENTRY

#define LK__SITE_ENTRY_FLAGS(init_direction, jump_when_on)                                    \
	((jump_when_on) | ((init_direction) == (jump_when_on) ? LK__SITE_INIT_JMP : 0))
/* clang-format on */
#endif

#ifdef __cplusplus
} /* extern "C" */
namespace
{
/*
 * The slot of a site in this translation unit, named by a local class Tag whose static key()
 * returns the key (see lk__branch): one per site, of internal linkage.
 */
template <typename Tag> struct lk__slot {
	static struct lk_key *const value;
};
template <typename Tag> struct lk_key *const lk__slot<Tag>::value = Tag::key();
} /* namespace */
extern "C" {
#endif

/*
 * A patched site says itself which path is expected (lk__site_jumped): a __builtin_expect around
 * it as well would make Clang lay the site out worse.
 */
#if !defined(LK__PATCHED_SITES)
#define LK__SITE_EXPECT(x, expected) __builtin_expect(!!(x), (expected))
#else
#define LK__SITE_EXPECT(x, expected) (x)
#endif

#if !defined(LK__PATCHED_SITES)
#define lk__branch(k, jump_when_on) (__atomic_load_n(&LK_KEY(k)->lk__count, __ATOMIC_RELAXED) > 0)
#define lk__branch_slot(slot, init_direction, jump_when_on) \
	(__atomic_load_n(&(*(slot))->lk__count, __ATOMIC_RELAXED) > 0)
#define lk__branch_tag(tag, init_direction, jump_when_on) \
	(__atomic_load_n(&tag::key()->lk__count, __ATOMIC_RELAXED) > 0)
#elif !defined(__cplusplus)
/*
 * Whether the site jumped. Inlined, so that the slot's address is a constant for the asm. The
 * jump always leaves the expected path, and each return says so: Clang keeps a caller's
 * __builtin_expect off the asm goto's edges once this is inlined, and would lay the site out
 * with an extra jmp in a loop.
 */
static inline __attribute__((always_inline)) bool
lk__site_jumped(struct lk_key *const *slot, const unsigned int flags, const int init_jmp)
{
	__asm__ goto(LK__SITE_ASM : : LK__SYMBOL(slot), "i"(flags), "i"(init_jmp) : : lk__jumped);
	return __builtin_expect(0, 0);
lk__jumped:
	return __builtin_expect(1, 0);
}

/*
 * lk__branch_slot(slot, init_direction, jump_when_on) is true while the key in *slot is on. The
 * jump leaves the fall-through path: towards the key-on code for unlikely sites
 * (jump_when_on = 1), towards the key-off code for likely ones (jump_when_on = 0).
 */
#define lk__branch_slot(slot, init_direction, jump_when_on)                          \
	(lk__site_jumped((slot), LK__SITE_ENTRY_FLAGS(init_direction, jump_when_on), \
			 (init_direction) == (jump_when_on)) == (jump_when_on))
#define lk__branch(k, jump_when_on)                                                  \
	__extension__({                                                              \
		static struct lk_key *const lk__slot = LK_KEY(k);                    \
		lk__branch_slot(&lk__slot, LK__KEY_INIT_DIRECTION(k), jump_when_on); \
	})
#else
} /* extern "C" */
namespace
{
/* True while the key of Tag's slot is on; see the C form above (the jump is the unexpected path). */
template <typename Tag, int InitDirection, int JumpWhenOn>
__attribute__((always_inline)) inline bool lk__branch_site() noexcept
{
	__asm__ goto(LK__SITE_ASM
		     : /* no outputs */
		     : LK__SYMBOL(&lk__slot<Tag>::value),
		       "i"(LK__SITE_ENTRY_FLAGS(InitDirection, JumpWhenOn)),
		       "i"(InitDirection == JumpWhenOn)
		     : /* no clobbers */
		     : lk__jumped);
	return __builtin_expect(!JumpWhenOn, !JumpWhenOn);
lk__jumped:
	return __builtin_expect(JumpWhenOn, !JumpWhenOn);
}
} /* namespace */
extern "C" {
#define lk__branch_tag(tag, init_direction, jump_when_on) \
	(lk__branch_site<tag, (init_direction), (jump_when_on)>())
#endif

#if defined(__cplusplus) && defined(LK__PATCHED_SITES)
/* The site's own class names its slot: a template argument of every C++ standard, at -O0 too. */
#define lk__branch(k, jump_when_on)                                                   \
	__extension__({                                                               \
		struct lk__key_tag {                                                  \
			static constexpr struct lk_key *key()                         \
			{                                                             \
				return LK_KEY(k);                                     \
			}                                                             \
		};                                                                    \
		lk__branch_tag(lk__key_tag, LK__KEY_INIT_DIRECTION(k), jump_when_on); \
	})
#endif

LK_END_DECLS

#endif
