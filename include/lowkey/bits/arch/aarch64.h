/* SPDX-License-Identifier: MIT */
/*
 * aarch64: the virtual counter CNTVCT_EL0, TPIDR_EL0, a 4-byte NOP or branch. Included by
 * lowkey/bits/arch.h, which says what each definition is for. Nothing here is API.
 */
#ifndef LOWKEY_BITS_ARCH_AARCH64_H
#define LOWKEY_BITS_ARCH_AARCH64_H

#define LK_ARCH_HAVE_CYCLE_COUNTER 1
#define LK_ARCH_HAVE_PATCHED_SITES 1
#define LK_ARCH_HAVE_SDT 1

static inline __attribute__((always_inline)) uint64_t lk__arch_counter(void)
{
	uint64_t v;

	__asm__ __volatile__("mrs %0, cntvct_el0" : "=r"(v));
	return v;
}

static inline __attribute__((always_inline)) uint64_t lk__arch_counter_ordered(void)
{
	uint64_t v;

	__asm__ __volatile__("isb\n\tmrs %0, cntvct_el0" : "=r"(v) : : "memory");
	return v;
}

/* Not volatile: the same value for the whole thread, so the compiler may reuse a read. */
static inline uintptr_t lk__arch_thread_pointer(void)
{
	uintptr_t tp;

	__asm__("mrs %0, tpidr_el0" : "=r"(tp));
	return tp;
}

/* "S": a symbolic address; "i" refuses one in position-independent code. */
#define LK__SYM(n) "%c" #n
#define LK__SYMBOL "S"

/* The site's instruction, per operand 2: `b lk__jumped` or `nop`. */
#define LK__ARCH_SITE_CODE     \
	"1:\n\t"               \
	".if %c2\n\t"          \
	"b %l[lk__jumped]\n\t" \
	".else\n\t"            \
	"nop\n\t"              \
	".endif\n\t"

/* USDT: BTI's landing pad, the stub that returns the end's descriptor, and its address. */
#if defined(__ARM_FEATURE_BTI_DEFAULT) && __ARM_FEATURE_BTI_DEFAULT
#define LK__ARCH_SDT_LANDING "hint 34\n" /* bti c */
#else
#define LK__ARCH_SDT_LANDING ""
#endif
#define LK__ARCH_SDT_STUB_CODE                                          \
	"990: nop\n\t"                                                  \
	"adrp x0, " LK__SYM(2) "\n\t"                                   \
			       "ldr x0, [x0, :lo12:" LK__SYM(2) "]\n\t" \
								"ret\n\t"
#define LK__ARCH_SDT_STUB_ADDRESS "adrp %0, 988b\n\tadd %0, %0, :lo12:988b"
#define LK__ARCH_SDT_JUMP_OVER "b 987f\n\t"
/* The stub's frame: a leaf's, its return address in x30, every callee-saved register untouched. */
#define LK__ARCH_SDT_STUB_CFI                                                   \
	".cfi_def_cfa sp, 0\n\t"                                                \
	".cfi_same_value x30\n\t.cfi_same_value x29\n\t"                        \
	".cfi_same_value x19\n\t.cfi_same_value x20\n\t.cfi_same_value x21\n\t" \
	".cfi_same_value x22\n\t.cfi_same_value x23\n\t.cfi_same_value x24\n\t" \
	".cfi_same_value x25\n\t.cfi_same_value x26\n\t.cfi_same_value x27\n\t" \
	".cfi_same_value x28\n\t"
#define LK__ARCH_SDT_OPERAND "r"

#endif
