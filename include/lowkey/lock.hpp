// SPDX-License-Identifier: MIT
/*
 * C++ wrappers for lowkey's named locks (lowkey/lock.h), so that they work with the standard
 * library's lock holders:
 *
 *	lowkey::mutex		lk_mutex_t	Lockable: std::lock_guard, std::unique_lock, std::scoped_lock,
 *						std::condition_variable_any
 *	lowkey::spinlock	lk_spinlock_t	Lockable: the same (a condition variable works, but its
 *						waiters sleep in the kernel anyway: use a mutex there)
 *	lowkey::shared_mutex	lk_rwlock_t	Lockable and shared: also std::shared_lock
 *	lowkey::pcpu_shared_mutex lk_pcpu_rwlock_t  lock/unlock and lock_shared/unlock_shared, no try_:
 *						std::lock_guard, std::unique_lock, std::shared_lock
 *
 *	#include <lowkey/lock.hpp>
 *
 *	lowkey::mutex table_lock{"table"};		// constant-initialized: usable from any
 *	std::map<int, row> table;			// constructor, no static-init order
 *
 *	void put(int k, row r)
 *	{
 *		std::lock_guard<lowkey::mutex> hold(table_lock);
 *		table[k] = r;
 *	}
 *
 *	lowkey::shared_mutex config_lock{"config"};
 *	std::shared_lock<lowkey::shared_mutex> reading(config_lock);	// lk_rwlock_read_lock
 *
 *	lk_lockstat_report(stderr, 0);			// "table" and "config" are listed with the C locks
 *
 * Each wrapper holds its C lock by value (same size and 64-byte alignment), is neither copyable
 * nor movable (the lock's address is its identity, in the registry too), and gives the C lock to C
 * code through native_handle(). Every member is inline and calls the C function or the C inline
 * fast path directly: a lock or unlock costs exactly what the C call costs (see lock.h); nothing
 * is virtual, allocated or checked beyond what the C call does.
 *
 * Construction is constexpr: a wrapper with static storage is initialized before any code runs
 * (constant initialization, as with LK_MUTEX_INIT), so another translation unit's constructor can
 * lock it. As a statically initialized C lock, it appears in lk_lockstat_foreach() and
 * lk_lockstat_report() from its first acquisition on, under the name it was given (the string is
 * not copied: give one that outlives the lock, a literal as a rule).
 *
 * Destruction calls lk_*_destroy, which takes the lock off the registry (one pthread mutex lock
 * and unlock): a wrapper on the stack or on the heap may go away without leaving a dangling entry.
 * Destroying a lock that is held is undefined, as for std::mutex (the C destroy then refuses with
 * -EBUSY and leaves it registered). A lock is still usable after its destructor has run (it is
 * only off the registry; a pcpu_shared_mutex allocates its slots again), so a global one that
 * another global's destructor uses during exit is safe.
 *
 * Errors: none of the members can fail. The C lock calls return nothing, the try_ calls' only
 * failure is "held" (false), and lk_*_stat() fails only for a NULL argument. So every member is
 * noexcept; none throws std::system_error. Misuse (unlocking a lock the thread does not hold,
 * locking a mutex twice in one thread) is undefined, as with the C calls: a second lock of a
 * lowkey::mutex by its holder deadlocks.
 *
 * Needs C++11 (std::lock_guard and std::unique_lock; std::shared_lock needs C++14,
 * std::scoped_lock C++17). Compiles warning-free with -Wall -Wextra -pedantic -Wold-style-cast
 * -Wzero-as-null-pointer-constant under g++ and clang++ (test_header_hygiene_lock).
 */
#ifndef LOWKEY_LOCK_HPP
#define LOWKEY_LOCK_HPP

#ifndef __cplusplus
#error "lowkey/lock.hpp is for C++; C code includes lowkey/lock.h"
#endif
#if __cplusplus < 201103L
#error "lowkey/lock.hpp needs C++11 or later"
#endif

#include <lowkey/lock.h>

namespace lowkey
{

/*
 * lowkey::mutex - lk_mutex_t: spins briefly, then sleeps in futex(2) when contended. Not recursive.
 * lock/unlock: one compare-and-swap / one exchange uncontended, no system call.
 */
class mutex {
    public:
	using native_handle_type = lk_mutex_t *;

	constexpr mutex() noexcept
		: m_ LK_MUTEX_INIT(LK__NULL)
	{
	}
	/* name: listed under it by the lock statistics; not copied. */
	constexpr explicit mutex(const char *name) noexcept
		: m_ LK_MUTEX_INIT(name)
	{
	}
	~mutex()
	{
		(void)lk_mutex_destroy(&m_);
	}

	mutex(const mutex &) = delete;
	mutex &operator=(const mutex &) = delete;

	/* lk_mutex_lock: waits as long as it takes; the wait is timed and counted as contention. */
	void lock() noexcept
	{
		lk_mutex_lock(&m_);
	}
	/* lk_mutex_trylock: one compare-and-swap, never waits; false (not counted) when held. */
	bool try_lock() noexcept
	{
		return lk_mutex_trylock(&m_) == 0;
	}
	/* lk_mutex_unlock: one exchange, a futex wake-up only when someone may sleep. */
	void unlock() noexcept
	{
		lk_mutex_unlock(&m_);
	}

	native_handle_type native_handle() noexcept
	{
		return &m_;
	}

	/* lk_mutex_stat: this lock's figures (a few dozen relaxed loads). */
	struct lk_lockstat stat() const noexcept
	{
		struct lk_lockstat s {};

		(void)lk_mutex_stat(&m_, &s);
		return s;
	}

    private:
	lk_mutex_t m_;
};

/*
 * lowkey::spinlock - lk_spinlock_t: spins (pause, then sched_yield) when contended, never sleeps
 * in the kernel. For very short holds. Costs as lowkey::mutex uncontended; unlock is one store.
 */
class spinlock {
    public:
	using native_handle_type = lk_spinlock_t *;

	constexpr spinlock() noexcept
		: s_ LK_SPINLOCK_INIT(LK__NULL)
	{
	}
	constexpr explicit spinlock(const char *name) noexcept
		: s_ LK_SPINLOCK_INIT(name)
	{
	}
	~spinlock()
	{
		(void)lk_spinlock_destroy(&s_);
	}

	spinlock(const spinlock &) = delete;
	spinlock &operator=(const spinlock &) = delete;

	void lock() noexcept
	{
		lk_spin_lock(&s_);
	}
	bool try_lock() noexcept
	{
		return lk_spin_trylock(&s_) == 0;
	}
	void unlock() noexcept
	{
		lk_spin_unlock(&s_);
	}

	native_handle_type native_handle() noexcept
	{
		return &s_;
	}

	struct lk_lockstat stat() const noexcept
	{
		struct lk_lockstat s {};

		(void)lk_spinlock_stat(&s_, &s);
		return s;
	}

    private:
	lk_spinlock_t s_;
};

/*
 * lowkey::shared_mutex - lk_rwlock_t: readers share, a writer excludes, and a waiting writer holds
 * new readers back (so a thread that reads twice while a writer waits deadlocks, as with any
 * writer-preferring lock). lock_shared: one compare-and-swap and one atomic add uncontended;
 * unlock_shared: one atomic subtract. lock/unlock: as lowkey::mutex.
 */
class shared_mutex {
    public:
	using native_handle_type = lk_rwlock_t *;

	constexpr shared_mutex() noexcept
		: l_ LK_RWLOCK_INIT(LK__NULL)
	{
	}
	constexpr explicit shared_mutex(const char *name) noexcept
		: l_ LK_RWLOCK_INIT(name)
	{
	}
	~shared_mutex()
	{
		(void)lk_rwlock_destroy(&l_);
	}

	shared_mutex(const shared_mutex &) = delete;
	shared_mutex &operator=(const shared_mutex &) = delete;

	void lock() noexcept
	{
		lk_rwlock_write_lock(&l_);
	}
	/* false when held in either mode; never waits. */
	bool try_lock() noexcept
	{
		return lk_rwlock_write_trylock(&l_) == 0;
	}
	void unlock() noexcept
	{
		lk_rwlock_write_unlock(&l_);
	}

	void lock_shared() noexcept
	{
		lk_rwlock_read_lock(&l_);
	}
	/* false when a writer holds the lock or waits for it; never waits. */
	bool try_lock_shared() noexcept
	{
		return lk_rwlock_read_trylock(&l_) == 0;
	}
	void unlock_shared() noexcept
	{
		lk_rwlock_read_unlock(&l_);
	}

	native_handle_type native_handle() noexcept
	{
		return &l_;
	}

	struct lk_lockstat stat() const noexcept
	{
		struct lk_lockstat s {};

		(void)lk_rwlock_stat(&l_, &s);
		return s;
	}

    private:
	lk_rwlock_t l_;
};

/*
 * lowkey::pcpu_shared_mutex - lk_pcpu_rwlock_t: readers touch only their CPU's cache line (one
 * atomic add, no contention between readers); a writer shuts readers out and waits for every CPU's
 * readers to leave. For data read everywhere and written rarely. It keeps no statistics and has
 * no name, and no try_ calls (the C lock has none): std::lock_guard, std::unique_lock and
 * std::shared_lock work, their try_lock members do not compile. The first use of a
 * default-constructed one allocates its per-CPU slots (one cache line per CPU; with memory short
 * it still works, on one shared slot); the destructor frees them (lk_pcpu_rwlock_destroy).
 */
class pcpu_shared_mutex {
    public:
	using native_handle_type = lk_pcpu_rwlock_t *;

	constexpr pcpu_shared_mutex() noexcept
		: l_ LK_PCPU_RWLOCK_INIT
	{
	}
	~pcpu_shared_mutex()
	{
		lk_pcpu_rwlock_destroy(&l_);
	}

	pcpu_shared_mutex(const pcpu_shared_mutex &) = delete;
	pcpu_shared_mutex &operator=(const pcpu_shared_mutex &) = delete;

	void lock() noexcept
	{
		lk_pcpu_write_lock(&l_);
	}
	void unlock() noexcept
	{
		lk_pcpu_write_unlock(&l_);
	}
	void lock_shared() noexcept
	{
		lk_pcpu_read_lock(&l_);
	}
	void unlock_shared() noexcept
	{
		lk_pcpu_read_unlock(&l_);
	}

	native_handle_type native_handle() noexcept
	{
		return &l_;
	}

    private:
	lk_pcpu_rwlock_t l_;
};

} // namespace lowkey

#endif
