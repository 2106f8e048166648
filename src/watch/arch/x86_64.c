// SPDX-License-Identifier: MIT
/*
 * x86-64 debug registers: DR0-DR3 hold four addresses per thread, shared by data and execute
 * breakpoints. A data breakpoint watches 1, 2, 4 or 8 bytes at an address aligned to its length
 * (Intel SDM vol. 3, 18.2.5); AMD CPUs with the address-mask extension (BPEXT, CPUID
 * 0x80000001 ECX[26]) also mask low address bits, so any power of two aligned to itself works.
 * Execute breakpoints are faults on the instruction's first byte; perf wants bp_len sizeof(long)
 * for them. Data breakpoints are traps: the saved RIP is the instruction after the access.
 *
 * In a KVM guest a data breakpoint's #DB sometimes reaches the guest kernel with DR6 empty (the
 * hypervisor lost the status bits). The kernel then cannot tell which breakpoint fired and sends
 * a plain SIGTRAP with si_code TRAP_BRKPT, as for an INT1 instruction; seen here about once in
 * 10^5 hits under load. Left to the application's default action it would kill the program.
 */
#include <cpuid.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/error.h"
#include "watch/watch_internal.h"

#define X86_DEBUG_REGISTERS 4
#define PAGE_SIZE_4K 4096ull

unsigned int lk__watch_arch_slots(void)
{
	return X86_DEBUG_REGISTERS;
}

int lk__watch_arch_signals(void)
{
	return 0;
}

/*
 * CPUID is read once: in a virtual machine every CPUID instruction exits to the hypervisor, which
 * costs tens of microseconds on some hosts, more than the perf_event_open() it would guard.
 */
static struct {
	bool bpext; /* AMD breakpoint address-mask extension: CPUID 0x80000001 ECX[26] */
	bool la57;  /* 5-level paging: CPUID 7.0 ECX[16] */
} features;
static pthread_once_t features_once = PTHREAD_ONCE_INIT;

static void read_features(void)
{
	unsigned int eax, ebx, ecx, edx;

	if (__get_cpuid(0x80000001, &eax, &ebx, &ecx, &edx))
		features.bpext = ecx & (1u << 26);
	if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx))
		features.la57 = ecx & (1u << 16);
}

static bool cpu_has_bpext(void)
{
	pthread_once(&features_once, read_features);
	return features.bpext;
}

static bool cpu_has_la57(void)
{
	pthread_once(&features_once, read_features);
	return features.la57;
}

/* The first address above user space: TASK_SIZE_MAX for 4- or 5-level paging. */
static uint64_t user_space_end(void)
{
	return (cpu_has_la57() ? 1ull << 56 : 1ull << 47) - PAGE_SIZE_4K;
}

static const char *accepted_lengths(void)
{
	return cpu_has_bpext() ?
		       "1, 2, 4 or 8 bytes, or a larger power of two (AMD address-mask extension), at an "
		       "address that is a multiple of the length" :
		       "1, 2, 4 or 8 bytes at an address that is a multiple of the length";
}

static bool is_power_of_2(uint64_t v)
{
	return v && !(v & (v - 1));
}

int lk__watch_arch_user_range(uintptr_t addr, uint64_t len)
{
	uint64_t end = user_space_end();

	if (addr >= end || len > end - addr)
		return lk__fail(-EINVAL,
				"cannot watch %#lx..%#lx: not a user-space address (user space "
				"ends at %#llx here)",
				(unsigned long)addr, (unsigned long)(addr + len - 1),
				(unsigned long long)end);
	return 0;
}

int lk__watch_arch_data(uintptr_t addr, size_t len)
{
	bool short_len = len == 1 || len == 2 || len == 4 || len == 8;

	if (!short_len && !(cpu_has_bpext() && is_power_of_2(len) && len <= (1ull << 31)))
		return lk__fail(-EINVAL,
				"cannot watch %zu bytes: this CPU's debug registers watch %s", len,
				accepted_lengths());
	if (addr & (len - 1))
		return lk__fail(
			-EINVAL,
			"cannot watch %zu bytes at %#lx: the address is not a multiple "
			"of %zu. This CPU watches %s: watch a smaller aligned piece (or two)",
			len, (unsigned long)addr, len, accepted_lengths());
	return 0;
}

int lk__watch_arch_exec(uintptr_t addr, size_t len, uint64_t *bp_len, uint64_t *insn_len)
{
	(void)addr;
	if (len != 1)
		return lk__fail(-EINVAL,
				"an execute watchpoint takes len 1 (the address of the "
				"instruction's first byte), not %zu",
				len);
	*bp_len = sizeof(long);
	*insn_len = 1;
	return 0;
}

uintptr_t lk__watch_arch_ip(const ucontext_t *uc)
{
	return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
}

#define INSN_INT1 0xf1
#ifndef TRAP_BRKPT
#define TRAP_BRKPT 1
#endif

/* One byte of this process's memory, or -1 where it is not readable (read without faulting). */
static int peek_byte(uintptr_t addr)
{
	unsigned char byte;
	struct iovec local = { &byte, 1 }, remote = { (void *)addr, 1 };

	if (syscall(SYS_process_vm_readv, getpid(), &local, 1, &remote, 1, 0) != 1)
		return -1;
	return byte;
}

bool lk__watch_arch_unattributed_trap(const siginfo_t *si, const ucontext_t *uc)
{
	uintptr_t ip = lk__watch_arch_ip(uc);

	if (si->si_code != TRAP_BRKPT || (uintptr_t)si->si_addr != ip)
		return false;
	/*
	 * An INT1 the program executed itself. Intel CPUs (and their KVM guests) report it as a
	 * trap, RIP after the 0xf1; AMD KVM guests report it at the 0xf1 itself. A watchpoint's
	 * trap lands after the writing instruction, and no writing instruction is an INT1.
	 */
	if (peek_byte(ip - 1) == INSN_INT1 || peek_byte(ip) == INSN_INT1)
		return false;
	return true;
}
