/* SPDX-License-Identifier: MIT */
/*
 * The application's own breakpoint instruction, for the tests of SIGTRAP handlers, on each
 * architecture lowkey builds for:
 *   x86-64   int3     SIGTRAP, si_code SI_KERNEL; the saved PC is already after the instruction
 *   aarch64  brk #0   SIGTRAP, si_code TRAP_BRKPT; the saved PC is the brk itself
 *   riscv64  ebreak   SIGTRAP, si_code TRAP_BRKPT; the saved PC is the ebreak itself (its 4-byte
 *                     form, written as data: with the C extension the assembler would emit the
 *                     2-byte c.ebreak)
 * A handler that returns must call lkt_breakpoint_resume(ctx) first: on aarch64 and riscv64 it
 * steps the saved PC over the instruction, which would otherwise trap again forever.
 */
#ifndef LKT_BREAKPOINT_H
#define LKT_BREAKPOINT_H

#include <signal.h>
#include <ucontext.h>

#if defined(__x86_64__)
#define LKT_BREAKPOINT() __asm__ __volatile__("int3" ::: "memory")
#define LKT_BREAKPOINT_CODE SI_KERNEL
#elif defined(__aarch64__)
#define LKT_BREAKPOINT() __asm__ __volatile__("brk #0" ::: "memory")
#define LKT_BREAKPOINT_CODE TRAP_BRKPT
#elif defined(__riscv) && __riscv_xlen == 64
#define LKT_BREAKPOINT() __asm__ __volatile__(".4byte 0x00100073" ::: "memory") /* ebreak */
#define LKT_BREAKPOINT_CODE TRAP_BRKPT
#else
#error "tests/breakpoint.h: no breakpoint instruction for this architecture"
#endif

static inline void lkt_breakpoint_resume(void *ctx)
{
	ucontext_t *uc = ctx;

#if defined(__aarch64__)
	uc->uc_mcontext.pc += 4;
#elif defined(__riscv)
	uc->uc_mcontext.__gregs[REG_PC] += 4;
#else
	(void)uc;
#endif
}

#endif
