// SPDX-License-Identifier: MIT
/*
 * Core serialization across the threads of the process (see sync.h).
 */
#include <linux/membarrier.h>
#include <string.h>
#include <sys/single_threaded.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/error.h"
#include "core/sync.h"

static int membarrier(int cmd, unsigned int flags, int cpu_id)
{
	return (int)syscall(__NR_membarrier, cmd, flags, cpu_id);
}

/* Registration belongs to the address space: redo it in a forked child (pid changed). */
static pid_t registered_pid;
static int registration_error;

static int register_sync_core(void)
{
	pid_t pid = getpid();
	int cmds;

	if (registered_pid == pid)
		return registration_error;
	registered_pid = pid;
	registration_error = 0;

	cmds = membarrier(MEMBARRIER_CMD_QUERY, 0, 0);
	if (cmds < 0) {
		registration_error = -errno;
	} else if (!(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE)) {
		registration_error = -ENOSYS;
	} else if (membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0) != 0) {
		registration_error = -errno;
	}
	return registration_error;
}

#if defined(__riscv)
/*
 * riscv: where the kernel has no membarrier SYNC_CORE for riscv (before 6.9), riscv_flush_icache
 * with no flags makes every hart of the process run FENCE.I before it runs this code again.
 */
static int flush_all_harts(void)
{
	return syscall(__NR_riscv_flush_icache, 0UL, 0UL, 0UL) == 0 ? 0 : -errno;
}

static int unavailable(int err)
{
	return lk__fail(
		-ENOSYS,
		"neither membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE) (%s; riscv has it from "
		"Linux 6.9) nor riscv_flush_icache (%s) is available: code cannot be rewritten safely "
		"while other threads run. Allow them in the seccomp filter, or build with "
		"-DLK_KEYS_PORTABLE=ON.",
		strerror(-err), strerror(-flush_all_harts()));
}
#else
static int flush_all_harts(void)
{
	return -ENOSYS;
}

static int unavailable(int err)
{
	return lk__fail(
		-ENOSYS,
		"membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE) is unavailable (%s): "
		"code cannot be rewritten safely while other threads run. It needs Linux >= 4.16 and "
		"no seccomp filter denying membarrier; otherwise build with -DLK_KEYS_PORTABLE=ON.",
		strerror(-err));
}
#endif

int lk__sync_cores_prepare(void)
{
	int err = register_sync_core();

	/* With one thread there is no other core to fetch stale code: x86 orders a thread's own
	 * stores with its instruction fetches; aarch64 and riscv64 sites maintain their caches. */
	if (err && !__libc_single_threaded && flush_all_harts() != 0)
		return unavailable(err);
	return 0;
}

/* Registered, and yet refused: the process has been sandboxed since (a seccomp filter). */
static int refused_since(int err)
{
	return lk__fail(
		-ENOSYS,
		"membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE) failed (%s) although it worked "
		"when this process registered for it: a seccomp filter installed since denies it, most "
		"likely. Code cannot be rewritten safely while other threads run without it. Allow "
		"membarrier in the filter, flip keys before sandboxing the process, or build with "
		"-DLK_KEYS_PORTABLE=ON.",
		strerror(-err));
}

int lk__sync_cores(void)
{
	int err = register_sync_core();

	if (err == 0) {
		if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0) == 0)
			return 0;
		if (__libc_single_threaded)
			return 0;
		return refused_since(-errno);
	}
	if (__libc_single_threaded || flush_all_harts() == 0)
		return 0;
	return unavailable(err);
}
