/* SPDX-License-Identifier: MIT */
/*
 * Probe sites, included by lowkey/probe.h: what LK_PROBE, LK_COUNTER and LK_SPAN expand to -- the
 * site's descriptor and table entries, its static key, its USDT note, and the call of the emit
 * path. Nothing here is API.
 */
#ifndef LOWKEY_BITS_PROBE_SITE_H
#define LOWKEY_BITS_PROBE_SITE_H

#ifndef LOWKEY_PROBE_H
#error "include <lowkey/probe.h>, not <lowkey/bits/probe_site.h>"
#endif

#include <stdint.h>
#include <lowkey/bits/arch.h>
#include <lowkey/bits/compiler.h>
#include <lowkey/bits/probe_args.h>
#include <lowkey/bits/probe_emit.h>

LK_BEGIN_DECLS

#define LK__PROBE_MAGIC 0x6c6b7072u /* "lkpr" */
#define LK__SITE_TRACER 0x100u	    /* flags: on for a USDT tracer (set and read atomically) */
#define LK__PROBE_ABI 3		    /* 2: 8-byte record header; 3: string views */

/*
 * A site is its descriptor (in .data, next to its key), a slot holding the descriptor's address,
 * and an entry in section __lk_probe_sites: the slot's offset from the entry. The entry comes
 * from an asm statement in the function, not a variable's section attribute, which g++ drops in
 * templates; like a key site's entry, it belongs to the function's section group, and is repeated
 * in every copy of the code (the registry counts each descriptor once). The slot must have
 * internal linkage, for its address to be a constant in position-independent code: a static of
 * the function in C, key.h's lk__slot of a class local to the site in C++.
 */
#define LK__PROBE_ENTRY_ASM                                     \
	".pushsection __lk_probe_sites, \"aR?\", @progbits\n\t" \
	".balign 8\n\t"                                         \
	".quad " LK__SYM(0) " - .\n\t"                          \
			    ".popsection"

#ifdef __cplusplus
#define LK__FUNCTION __PRETTY_FUNCTION__
#else
#define LK__FUNCTION __func__
#endif
#define LK__PROBE_DESCRIPTOR(var, provider, event, kind, nargs, types, names) \
	static struct lk_probe_site var = { LK_KEY_INIT_FALSE,                \
					    LK__PROBE_MAGIC,                  \
					    LK__PROBE_ABI,                    \
					    (kind),                           \
					    (nargs),                          \
					    (types),                          \
					    __LINE__,                         \
					    0,                                \
					    0,                                \
					    #provider,                        \
					    #event,                           \
					    __FILE__,                         \
					    names,                            \
					    LK__FUNCTION }

#ifndef __cplusplus
#define LK__PROBE_SITE(var, provider, event, kind, nargs, types, names)        \
	LK__PROBE_DESCRIPTOR(var, provider, event, kind, nargs, types, names); \
	static struct lk_key *const var##_slot = &var.key.key
#define LK__PROBE_SLOT(var) (&var##_slot)
#define LK__PROBE_ENTRY(var) __asm__ __volatile__(LK__PROBE_ENTRY_ASM : : LK__SYMBOL(&var##_slot))
#define LK__PROBE_ON(var) LK__SITE_EXPECT(lk__branch_slot(&var##_slot, 0, 1), 0)
#else
#define LK__PROBE_SITE(var, provider, event, kind, nargs, types, names)        \
	LK__PROBE_DESCRIPTOR(var, provider, event, kind, nargs, types, names); \
	struct var##_tag {                                                     \
		static constexpr struct lk_key *key()                          \
		{                                                              \
			return &var.key.key;                                   \
		}                                                              \
	}
#define LK__PROBE_SLOT(var) (&lk__slot<var##_tag>::value)
#define LK__PROBE_ENTRY(var) \
	__asm__ __volatile__(LK__PROBE_ENTRY_ASM : : LK__SYMBOL(&lk__slot<var##_tag>::value))
#define LK__PROBE_ON(var) LK__SITE_EXPECT(lk__branch_tag(var##_tag, 0, 1), 0)
#endif

/*
 * USDT: each site also describes itself to perf, bpftrace, SystemTap and other readers of SDT
 * notes. On the path that runs while the site is on, where its arguments are in registers, a
 * `nop` is the probe point; an ELF note (.note.stapsdt, type 3, owner "stapsdt") names it
 * provider:event (spans: event_begin and event_end), gives its address, a semaphore and the
 * arguments' places ("-8@%rax": 8 bytes, signed, in %rax); .stapsdt.base lets a reader find where
 * the object was loaded. The semaphore is a 2-byte counter in .probes that the kernel increments
 * while a uprobe with its ref_ctr_offset is attached; an entry in __lk_probe_sdt (the slot's
 * offset, then the semaphore's) lets the library find the site of each semaphore (see
 * lk_probe_usdt_poll). Every copy of the code has its own note and semaphore, in the function's
 * section group like the other entries. Arguments are their 64-bit record values: integers
 * widened (signed ones -8, others 8), a double's bits, a string's or a pointer's address.
 * -DLK_NO_SDT leaves all this out. The site itself is unchanged: while off, one NOP.
 */
#if !defined(LK_NO_SDT) && LK_ARCH_HAVE_SDT
#define LK__SDT 1
#endif

#ifdef LK__SDT
#define LK__SDT_SUFFIX_LK_PROBE_EVENT ""
#define LK__SDT_SUFFIX_LK_PROBE_COUNTER ""
#define LK__SDT_SUFFIX_LK_PROBE_SPAN_BEGIN "_begin"
#define LK__SDT_SUFFIX_LK_PROBE_SPAN_END "_end"

/* Argument i: operand 3 + i; operand 1 is the packed types, operand 2 the count. */
/* clang-format off */
#define LK__SDT_ARG(i, op, sep)                                                               \
	".if " LK__SYM(2) " > " #i "\n\t"                                                     \
	".ascii \"" sep "\"\n\t"                                                              \
	".if ((" LK__SYM(1) " >> (" #i " * 4)) & 15) == 1\n\t"                                \
	".ascii \"-\"\n\t"                                                                    \
	".endif\n\t"                                                                          \
	".ascii \"8@%" #op "\"\n\t"                                                           \
	".endif\n\t"

/*
 * The note of the probe point at label 990, its semaphore and its __lk_probe_sdt entry, whose
 * site is operand slot (an LK__SYM). args: the arguments' places, "" for none.
 */
#define LK__SDT_NOTE(provider, name, args, slot)                                              \
	".pushsection .probes, \"aw?\", @progbits\n\t"                                        \
	".balign 2\n"                                                                          \
	"991: .2byte 0\n\t"                                                                   \
	".popsection\n\t"                                                                     \
	".pushsection .note.stapsdt, \"?\", @note\n\t"                                        \
	".balign 4\n\t"                                                                       \
	".4byte 993f - 992f, 995f - 994f, 3\n"                                                 \
	"992: .asciz \"stapsdt\"\n"                                                            \
	"993: .balign 4\n"                                                                     \
	"994: .8byte 990b, _.stapsdt.base, 991b\n\t"                                          \
	".asciz \"" provider "\"\n\t"                                                         \
	".asciz \"" name "\"\n\t"                                                             \
	args                                                                                  \
	".byte 0\n"                                                                            \
	"995: .balign 4\n\t"                                                                  \
	".popsection\n\t"                                                                     \
	".ifndef _.stapsdt.base\n\t"                                                          \
	".pushsection .stapsdt.base, \"aG\", @progbits, .stapsdt.base, comdat\n\t"           \
	".weak _.stapsdt.base\n\t"                                                            \
	".hidden _.stapsdt.base\n"                                                             \
	"_.stapsdt.base: .space 1\n\t"                                                        \
	".size _.stapsdt.base, 1\n\t"                                                         \
	".popsection\n\t"                                                                     \
	".endif\n\t"                                                                          \
	".pushsection __lk_probe_sdt, \"aR?\", @progbits\n\t"                                 \
	".balign 8\n\t"                                                                       \
	".quad " slot " - .\n\t"                                                              \
	".quad 991b - .\n\t"                                                                  \
	".popsection"

#define LK__SDT_ARGS                                                                          \
	LK__SDT_ARG(0, 3, "") LK__SDT_ARG(1, 4, " ") LK__SDT_ARG(2, 5, " ")                  \
	LK__SDT_ARG(3, 6, " ") LK__SDT_ARG(4, 7, " ") LK__SDT_ARG(5, 8, " ")                 \
	LK__SDT_ARG(6, 9, " ") LK__SDT_ARG(7, 10, " ")

#define LK__SDT_ASM(provider, name) "990: nop\n\t" LK__SDT_NOTE(provider, name, LK__SDT_ARGS, LK__SYM(0))

/*
 * The end of LK_SPAN's scope runs lk__span_close, one function for every span, where no asm can
 * name a site. Its probe point is therefore a stub of the site's own, called from lk__span_close:
 * `nop` (the probe point), then it returns the end's descriptor, read from the end's slot
 * (operand 2). Operand 0 receives the stub's address (label 988), 4-aligned; operand 1 is the
 * begin's slot, which the end's semaphore turns on (a scoped span is one site for a tracer). An
 * indirect call lands on the stub: it starts with the landing pad the build asks for (x86-64 CET,
 * aarch64 BTI), before the probe point.
 *
 * The stub lies in the body of the function that opens the span, jumped over (on the path taken
 * only while a tracer has the span on), so that it has the function's debug information: its
 * compile unit, line and function, which perf probe looks up for every probe point. Its own
 * call frame is described between .cfi_remember_state and .cfi_restore_state where the compiler
 * writes CFI as directives: a frame of its own, which saves nothing.
 */
#ifdef __GCC_HAVE_DWARF2_CFI_ASM
#define LK__SDT_STUB_CFI_BEGIN ".cfi_remember_state\n\t" LK__ARCH_SDT_STUB_CFI
#define LK__SDT_STUB_CFI_END ".cfi_restore_state\n"
#else
#define LK__SDT_STUB_CFI_BEGIN ""
#define LK__SDT_STUB_CFI_END ""
#endif
#define LK__SDT_STUB_ASM(provider, name)                                                      \
	LK__ARCH_SDT_JUMP_OVER                                                                \
	".balign 4\n"                                                                          \
	"988:\n\t"                                                                             \
	LK__SDT_STUB_CFI_BEGIN                                                                \
	LK__ARCH_SDT_LANDING                                                                  \
	LK__ARCH_SDT_STUB_CODE                                                                \
	LK__SDT_STUB_CFI_END                                                                  \
	"987:\n\t"                                                                             \
	LK__SDT_NOTE(provider, name, "", LK__SYM(1)) "\n\t"                                    \
	LK__ARCH_SDT_STUB_ADDRESS

/*
 * Operands: used arguments in registers (or as the architecture's readers also take them:
 * LK__ARCH_SDT_OPERAND), unused ones as constants the note never names.
 */
#define LK__SDT_R(i) LK__ARCH_SDT_OPERAND(LK__SDT_VAL(i))
#define LK__SDT_Z "n"(0)
#define LK__SDT_OPS_0 LK__SDT_Z, LK__SDT_Z, LK__SDT_Z, LK__SDT_Z, LK__SDT_Z, LK__SDT_Z, LK__SDT_Z, LK__SDT_Z
#define LK__SDT_OPS_1 LK__SDT_R(0), LK__SDT_Z, LK__SDT_Z, LK__SDT_Z, LK__SDT_Z, LK__SDT_Z, LK__SDT_Z, LK__SDT_Z
#define LK__SDT_OPS_2 LK__SDT_R(0), LK__SDT_R(1), LK__SDT_Z, LK__SDT_Z, LK__SDT_Z, LK__SDT_Z, LK__SDT_Z, LK__SDT_Z
#define LK__SDT_OPS_3 LK__SDT_R(0), LK__SDT_R(1), LK__SDT_R(2), LK__SDT_Z, LK__SDT_Z, LK__SDT_Z, LK__SDT_Z, LK__SDT_Z
#define LK__SDT_OPS_4 LK__SDT_R(0), LK__SDT_R(1), LK__SDT_R(2), LK__SDT_R(3), LK__SDT_Z, LK__SDT_Z, LK__SDT_Z, LK__SDT_Z
#define LK__SDT_OPS_5                                                                         \
	LK__SDT_R(0), LK__SDT_R(1), LK__SDT_R(2), LK__SDT_R(3), LK__SDT_R(4), LK__SDT_Z, LK__SDT_Z, LK__SDT_Z
#define LK__SDT_OPS_6                                                                         \
	LK__SDT_R(0), LK__SDT_R(1), LK__SDT_R(2), LK__SDT_R(3), LK__SDT_R(4), LK__SDT_R(5), LK__SDT_Z, LK__SDT_Z
#define LK__SDT_OPS_7                                                                         \
	LK__SDT_R(0), LK__SDT_R(1), LK__SDT_R(2), LK__SDT_R(3), LK__SDT_R(4), LK__SDT_R(5), LK__SDT_R(6), LK__SDT_Z
#define LK__SDT_OPS_8                                                                         \
	LK__SDT_R(0), LK__SDT_R(1), LK__SDT_R(2), LK__SDT_R(3), LK__SDT_R(4), LK__SDT_R(5), LK__SDT_R(6), \
		LK__SDT_R(7)
/* clang-format on */

#ifdef __cplusplus
#define LK__SDT_VAL(i) lk__s##i
#define LK__SDT_DECL(i, how) const uint64_t lk__s##i = lk__sdt_value<how>(lk__a##i);
#else
#define LK__SDT_VAL(i) lk__a##i
#endif
#define LK__PROBE_SDT(var, provider, event, kind, nargs, types)                         \
	__asm__ __volatile__(LK__SDT_ASM(#provider, #event LK__SDT_SUFFIX_##kind)       \
			     : /* no outputs */                                         \
			     : LK__SYMBOL(LK__PROBE_SLOT(var)), "i"(types), "i"(nargs), \
			       LK__SDT_OPS_##nargs)
#else
#define LK__SDT_DECL(i, how)
#define LK__PROBE_SDT(var, provider, event, kind, nargs, types) \
	do {                                                    \
	} while (0)
#endif

#define LK__ZEROS_0 LK__ZEROS_1 const uint64_t lk__a0 = 0;
#define LK__ZEROS_1 LK__ZEROS_2 const uint64_t lk__a1 = 0;
#define LK__ZEROS_2 LK__ZEROS_3 const uint64_t lk__a2 = 0;
#define LK__ZEROS_3 LK__ZEROS_4 const uint64_t lk__a3 = 0;
#define LK__ZEROS_4 LK__ZEROS_5 const uint64_t lk__a4 = 0;
#define LK__ZEROS_5 LK__ZEROS_6 const uint64_t lk__a5 = 0;
#define LK__ZEROS_6 LK__ZEROS_7 const uint64_t lk__a6 = 0;
#define LK__ZEROS_7 LK__ZEROS_8 const uint64_t lk__a7 = 0;
#define LK__ZEROS_8
#define LK__ARGS8 lk__a0, lk__a1, lk__a2, lk__a3, lk__a4, lk__a5, lk__a6, lk__a7

/*
 * One site with nargs arguments: while on, each argument is converted once into a 64-bit local
 * and the fast path stores them from registers. types is a constant, so the string test folds.
 */
#define LK__PROBE_DO(var, kind, provider, event, nargs, types, names, decls)                     \
	do {                                                                                     \
		LK__PROBE_SITE(var, provider, event, kind, nargs, types, names);                 \
		LK__PROBE_ENTRY(var);                                                            \
		if (LK__PROBE_ON(var)) {                                                         \
			decls LK__ZEROS_##nargs LK__PROBE_SDT(var, provider, event, kind, nargs, \
							      types);                            \
			if (LK__HAS_STRINGS(types)) {                                            \
				const uint64_t lk__vals[8] = { LK__ARGS8 };                      \
				if (!lk__probe_no_trace())                                       \
					lk__probe_emit_slow(&var, nargs, lk__vals);              \
			} else {                                                                 \
				lk__probe_emit(&var, nargs, LK__ARGS8);                          \
			}                                                                        \
		}                                                                                \
	} while (0)

/*
 * The site's names must not depend on where the translation unit is (no __COUNTER__): an inline
 * function's static has one name in every unit that defines it, so that all its copies share one
 * descriptor. A probe's block is its own scope, where a fixed name does.
 */
#define LK__PROBE_AT(kind, names, ...) \
	LK__CAT(LK__PROBE_, LK__NARGS(__VA_ARGS__))(lk__probe_site, kind, names, __VA_ARGS__)
#define LK__PROBE_1(v, k, names, p) LK__PROBE_TOO_MANY /* a provider without an event */
#define LK__PROBE_2(v, k, names, p, e) LK__PROBE_DO(v, k, p, e, 0, 0u, names, )
#define LK__PROBE_3(v, k, names, p, e, a0) \
	LK__PROBE_DO(v, k, p, e, 1, LK__TYPE(0, a0), names, LK__ARG_DECL(0, a0))
#define LK__PROBE_4(v, k, names, p, e, a0, a1)                                \
	LK__PROBE_DO(v, k, p, e, 2, LK__TYPE(0, a0) | LK__TYPE(1, a1), names, \
		     LK__ARG_DECL(0, a0) LK__ARG_DECL(1, a1))
#define LK__PROBE_5(v, k, names, p, e, a0, a1, a2)                                              \
	LK__PROBE_DO(v, k, p, e, 3, LK__TYPE(0, a0) | LK__TYPE(1, a1) | LK__TYPE(2, a2), names, \
		     LK__ARG_DECL(0, a0) LK__ARG_DECL(1, a1) LK__ARG_DECL(2, a2))
#define LK__PROBE_6(v, k, names, p, e, a0, a1, a2, a3)                                             \
	LK__PROBE_DO(v, k, p, e, 4,                                                                \
		     LK__TYPE(0, a0) | LK__TYPE(1, a1) | LK__TYPE(2, a2) | LK__TYPE(3, a3), names, \
		     LK__ARG_DECL(0, a0) LK__ARG_DECL(1, a1) LK__ARG_DECL(2, a2)                   \
			     LK__ARG_DECL(3, a3))
#define LK__PROBE_7(v, k, names, p, e, a0, a1, a2, a3, a4)                                   \
	LK__PROBE_DO(v, k, p, e, 5,                                                          \
		     LK__TYPE(0, a0) | LK__TYPE(1, a1) | LK__TYPE(2, a2) | LK__TYPE(3, a3) | \
			     LK__TYPE(4, a4),                                                \
		     names,                                                                  \
		     LK__ARG_DECL(0, a0) LK__ARG_DECL(1, a1) LK__ARG_DECL(2, a2)             \
			     LK__ARG_DECL(3, a3) LK__ARG_DECL(4, a4))
#define LK__PROBE_8(v, k, names, p, e, a0, a1, a2, a3, a4, a5)                               \
	LK__PROBE_DO(v, k, p, e, 6,                                                          \
		     LK__TYPE(0, a0) | LK__TYPE(1, a1) | LK__TYPE(2, a2) | LK__TYPE(3, a3) | \
			     LK__TYPE(4, a4) | LK__TYPE(5, a5),                              \
		     names,                                                                  \
		     LK__ARG_DECL(0, a0) LK__ARG_DECL(1, a1) LK__ARG_DECL(2, a2)             \
			     LK__ARG_DECL(3, a3) LK__ARG_DECL(4, a4) LK__ARG_DECL(5, a5))
#define LK__PROBE_9(v, k, names, p, e, a0, a1, a2, a3, a4, a5, a6)                           \
	LK__PROBE_DO(v, k, p, e, 7,                                                          \
		     LK__TYPE(0, a0) | LK__TYPE(1, a1) | LK__TYPE(2, a2) | LK__TYPE(3, a3) | \
			     LK__TYPE(4, a4) | LK__TYPE(5, a5) | LK__TYPE(6, a6),            \
		     names,                                                                  \
		     LK__ARG_DECL(0, a0) LK__ARG_DECL(1, a1) LK__ARG_DECL(2, a2)             \
			     LK__ARG_DECL(3, a3) LK__ARG_DECL(4, a4) LK__ARG_DECL(5, a5)     \
				     LK__ARG_DECL(6, a6))
#define LK__PROBE_10(v, k, names, p, e, a0, a1, a2, a3, a4, a5, a6, a7)                      \
	LK__PROBE_DO(v, k, p, e, 8,                                                          \
		     LK__TYPE(0, a0) | LK__TYPE(1, a1) | LK__TYPE(2, a2) | LK__TYPE(3, a3) | \
			     LK__TYPE(4, a4) | LK__TYPE(5, a5) | LK__TYPE(6, a6) |           \
			     LK__TYPE(7, a7),                                                \
		     names,                                                                  \
		     LK__ARG_DECL(0, a0) LK__ARG_DECL(1, a1) LK__ARG_DECL(2, a2)             \
			     LK__ARG_DECL(3, a3) LK__ARG_DECL(4, a4) LK__ARG_DECL(5, a5)     \
				     LK__ARG_DECL(6, a6) LK__ARG_DECL(7, a7))
#define LK__PROBE_11(...) LK__PROBE_TOO_MANY

/*
 * The guard LK_SPAN leaves for its scope's end: 0 (nothing to do), the end's descriptor (record
 * the end), or, while the span is on for a USDT tracer (LK__SITE_TRACER), the address of the
 * end's SDT stub | LK__SPAN_STUB, and LK__SPAN_RECORDED when the begin was recorded.
 */
#define LK__SPAN_RECORDED 1u
#define LK__SPAN_STUB 2u

static inline void lk__span_close_stub(uintptr_t guard)
{
	typedef struct lk_probe_site *(*lk__sdt_stub)(void);
	struct lk_probe_site *end =
		LK__REINTERPRET(lk__sdt_stub, guard & ~LK__CAST(uintptr_t, 3))();

	if (guard & LK__SPAN_RECORDED)
		lk__probe_emit0(end);
}

static inline __attribute__((always_inline)) void lk__span_close(uintptr_t *guard)
{
	if (LK__UNLIKELY(*guard != 0)) {
		if (LK__UNLIKELY(*guard & LK__SPAN_STUB))
			lk__span_close_stub(*guard);
		else
			lk__probe_emit0(LK__REINTERPRET(struct lk_probe_site *, *guard));
	}
}

#ifdef LK__SDT
/* The guard of a span on for a tracer: the end's stub, with the begin's outcome. */
#define LK__SPAN_FOR_TRACER(g, begin, end, provider, name)                             \
	do {                                                                           \
		if (LK__UNLIKELY(__atomic_load_n(&begin.flags, __ATOMIC_RELAXED) &     \
				 LK__SITE_TRACER)) {                                   \
			uintptr_t lk__stub;                                            \
			__asm__ __volatile__(LK__SDT_STUB_ASM(#provider, #name "_end") \
					     : "=r"(lk__stub)                          \
					     : LK__SYMBOL(LK__PROBE_SLOT(begin)),      \
					       LK__SYMBOL(LK__PROBE_SLOT(end)));       \
			g = lk__stub | LK__SPAN_STUB | (g ? LK__SPAN_RECORDED : 0u);   \
		}                                                                      \
	} while (0)
#else
#define LK__SPAN_FOR_TRACER(g, begin, end, provider, name) \
	do {                                               \
	} while (0)
#endif

#define LK__SPAN_AT(n, provider, name)                                      \
	LK__SPAN_DO(LK__CAT(lk__span_begin_, n), LK__CAT(lk__span_end_, n), \
		    LK__CAT(lk__span_guard_, n), provider, name)
#define LK__SPAN_DO(begin, end, guard, provider, name)                                     \
	LK__PROBE_SITE(begin, provider, name, LK_PROBE_SPAN_BEGIN, 0, 0u, "");             \
	LK__PROBE_SITE(end, provider, name, LK_PROBE_SPAN_END, 0, 0u, "");                 \
	uintptr_t guard __attribute__((cleanup(lk__span_close), unused)) = __extension__({ \
		uintptr_t lk__g = 0;                                                       \
		LK__PROBE_ENTRY(begin);                                                    \
		LK__PROBE_ENTRY(end);                                                      \
		if (LK__PROBE_ON(begin)) {                                                 \
			LK__PROBE_SDT(begin, provider, name, LK_PROBE_SPAN_BEGIN, 0, 0u);  \
			if (lk__probe_emit0(&begin))                                       \
				lk__g = LK__REINTERPRET(uintptr_t, &end);                  \
			LK__SPAN_FOR_TRACER(lk__g, begin, end, provider, name);            \
		}                                                                          \
		lk__g;                                                                     \
	})

LK_END_DECLS

#endif
