/* SPDX-License-Identifier: MIT */
/*
 * riscv64: the time CSR, tp, a 4-byte NOP or jump. Included by lowkey/bits/arch.h, which says
 * what each definition is for. Nothing here is API.
 */
#ifndef LOWKEY_BITS_ARCH_RISCV64_H
#define LOWKEY_BITS_ARCH_RISCV64_H

#define LK_ARCH_HAVE_CYCLE_COUNTER 1
#define LK_ARCH_HAVE_PATCHED_SITES 1
#define LK_ARCH_HAVE_SDT 1

/*
 * The time CSR: the platform's constant-rate timebase, readable from U-mode on Linux (the kernel
 * sets scounteren.TM). Not the cycle CSR, which Linux 6.6 and later no longer let U-mode read.
 */
static inline __attribute__((always_inline)) uint64_t lk__arch_counter(void)
{
	uint64_t v;

	__asm__ __volatile__("rdtime %0" : "=r"(v));
	return v;
}

/* The same read, which the compiler keeps in its place among memory accesses: why no fence,
 * see lowkey/bits/arch.h. */
static inline __attribute__((always_inline)) uint64_t lk__arch_counter_ordered(void)
{
	uint64_t v;

	__asm__ __volatile__("rdtime %0" : "=r"(v) : : "memory");
	return v;
}

/* Not volatile: the same value for the whole thread, so the compiler may reuse a read. */
static inline uintptr_t lk__arch_thread_pointer(void)
{
	uintptr_t tp;

	__asm__("mv %0, tp" : "=r"(tp));
	return tp;
}

/* GCC's riscv has no "c" modifier and prints a bare symbol for "%". */
#define LK__SYM(n) "%" #n
#define LK__SYMBOL "i"

/*
 * The site's instruction, per operand 2: `j lk__jumped` (jal zero) or `nop`, 4 bytes, 4-byte
 * aligned (one aligned word to rewrite), never compressed (norvc) nor relaxed by the linker
 * (norelax). The alignment comes first, where relaxation is still on: the assembler then marks it
 * for the linker (R_RISCV_ALIGN), which keeps it when relaxing the code before shrinks it; inside
 * norelax it would not.
 */
#define LK__ARCH_SITE_CODE     \
	".balign 4\n\t"        \
	".option push\n\t"     \
	".option norelax\n\t"  \
	".option norvc\n"      \
	"1:\n\t"               \
	".if %2\n\t"           \
	"j %l[lk__jumped]\n\t" \
	".else\n\t"            \
	"nop\n\t"              \
	".endif\n\t"           \
	".option pop\n\t"

/* USDT: the stub that returns the end's descriptor, and its address (no landing pad). */
#define LK__ARCH_SDT_LANDING ""
#define LK__ARCH_SDT_STUB_CODE                                                    \
	"990: nop\n"                                                              \
	"989: auipc a0, %%pcrel_hi(" LK__SYM(2) ")\n\t"                           \
						"ld a0, %%pcrel_lo(989b)(a0)\n\t" \
						"ret\n\t"
#define LK__ARCH_SDT_STUB_ADDRESS "lla %0, 988b"
#define LK__ARCH_SDT_JUMP_OVER "j 987f\n\t"
/* The stub's frame: a leaf's, its return address in ra, every callee-saved register untouched. */
#define LK__ARCH_SDT_STUB_CFI                                                 \
	".cfi_def_cfa sp, 0\n\t"                                              \
	".cfi_same_value ra\n\t.cfi_same_value s0\n\t.cfi_same_value s1\n\t"  \
	".cfi_same_value s2\n\t.cfi_same_value s3\n\t.cfi_same_value s4\n\t"  \
	".cfi_same_value s5\n\t.cfi_same_value s6\n\t.cfi_same_value s7\n\t"  \
	".cfi_same_value s8\n\t.cfi_same_value s9\n\t.cfi_same_value s10\n\t" \
	".cfi_same_value s11\n\t"
#define LK__ARCH_SDT_OPERAND "r"

#endif
