/* SPDX-License-Identifier: MIT */
/*
 * x86-64: the TSC, %fs, the 5-byte NOP. Included by lowkey/bits/arch.h, which says what each
 * definition is for. Nothing here is API.
 */
#ifndef LOWKEY_BITS_ARCH_X86_64_H
#define LOWKEY_BITS_ARCH_X86_64_H

#define LK_ARCH_HAVE_CYCLE_COUNTER 1
#define LK_ARCH_HAVE_PATCHED_SITES 1
#define LK_ARCH_HAVE_SDT 1

static inline __attribute__((always_inline)) uint64_t lk__arch_counter(void)
{
	uint32_t lo, hi;

	__asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
	return LK__CAST(uint64_t, hi) << 32 | lo;
}

static inline __attribute__((always_inline)) uint64_t lk__arch_counter_ordered(void)
{
	uint32_t lo, hi;

	__asm__ __volatile__("lfence\n\trdtsc" : "=a"(lo), "=d"(hi) : : "memory");
	return LK__CAST(uint64_t, hi) << 32 | lo;
}

/* Not volatile: the same value for the whole thread, so the compiler may reuse a read. */
static inline uintptr_t lk__arch_thread_pointer(void)
{
	uintptr_t tp;

	__asm__("mov %%fs:0, %0" : "=r"(tp));
	return tp;
}

#define LK__SYM(n) "%c" #n
#define LK__SYMBOL "i"

/* The site's instruction, per operand 2: `jmp rel32` to lk__jumped, or the NOP 0f 1f 44 00 00. */
#define LK__ARCH_SITE_CODE                       \
	"1:\n\t"                                 \
	".if %c2\n\t"                            \
	".byte 0xe9\n\t"                         \
	".long %l[lk__jumped] - 2f\n\t"          \
	".else\n\t"                              \
	".byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n\t" \
	".endif\n"                               \
	"2:\n\t"

/* USDT: CET's landing pad, the stub that returns the end's descriptor, and its address. */
#if defined(__CET__) && (__CET__ & 1)
#define LK__ARCH_SDT_LANDING "endbr64\n"
#else
#define LK__ARCH_SDT_LANDING ""
#endif
#define LK__ARCH_SDT_STUB_CODE                  \
	"990: nop\n\t"                          \
	"movq " LK__SYM(2) "(%%rip), %%rax\n\t" \
			   "ret\n\t"
#define LK__ARCH_SDT_STUB_ADDRESS "leaq 988b(%%rip), %0"
#define LK__ARCH_SDT_JUMP_OVER "jmp 987f\n\t"
/* The stub's frame: the return address at the CFA's top, every callee-saved register untouched. */
#define LK__ARCH_SDT_STUB_CFI                                \
	".cfi_def_cfa %%rsp, 8\n\t"                          \
	".cfi_offset %%rip, -8\n\t"                          \
	".cfi_same_value %%rbx\n\t.cfi_same_value %%rbp\n\t" \
	".cfi_same_value %%r12\n\t.cfi_same_value %%r13\n\t" \
	".cfi_same_value %%r14\n\t.cfi_same_value %%r15\n\t"
/* An argument's operand: its readers also parse a constant ("$5"). */
#define LK__ARCH_SDT_OPERAND "nr"

#endif
