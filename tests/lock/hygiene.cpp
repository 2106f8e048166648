// SPDX-License-Identifier: MIT
/*
 * Header hygiene in C++ (test_header_hygiene_lock): hygiene.c's uses of the C headers, then
 * lowkey/lock.hpp under every standard lock holder the standard in use has. Never run.
 */
#include "hygiene.c"

#include <condition_variable>
#include <mutex>
#if __cplusplus >= 201402L
#include <shared_mutex>
#endif
#include <lowkey/lock.hpp>

#if __cplusplus >= 202002L
#define HYG_CONSTINIT constinit /* the wrappers' constructors are constant expressions */
#else
#define HYG_CONSTINIT
#endif

static HYG_CONSTINIT lowkey::mutex hyg_cxx_mutex{ "hygiene-cxx" };
static HYG_CONSTINIT lowkey::spinlock hyg_cxx_spin{ "hygiene-cxx-spin" };
static HYG_CONSTINIT lowkey::shared_mutex hyg_cxx_rw{ "hygiene-cxx-rw" };
static HYG_CONSTINIT lowkey::pcpu_shared_mutex hyg_cxx_pcpu;
static HYG_CONSTINIT lowkey::mutex hyg_cxx_unnamed;

int hyg_cxx(void);

int hyg_cxx(void)
{
	std::condition_variable_any cv;
	int n = 0;

	{
		std::lock_guard<lowkey::mutex> g(hyg_cxx_mutex);
		n++;
	}
	{
		std::unique_lock<lowkey::mutex> u(hyg_cxx_unnamed, std::defer_lock);
		if (u.try_lock())
			u.unlock();
		u.lock();
		cv.wait(u, [] { return true; });
	}
	{
		std::unique_lock<lowkey::spinlock> u(hyg_cxx_spin, std::try_to_lock);
		n += u.owns_lock();
	}
	{
		std::unique_lock<lowkey::shared_mutex> w(hyg_cxx_rw);
		std::lock_guard<lowkey::pcpu_shared_mutex> pw(hyg_cxx_pcpu);
	}
#if __cplusplus >= 201402L
	{
		std::shared_lock<lowkey::shared_mutex> r(hyg_cxx_rw, std::try_to_lock);
		std::shared_lock<lowkey::pcpu_shared_mutex> pr(hyg_cxx_pcpu);
		n += r.owns_lock();
	}
#endif
#if __cplusplus >= 201703L
	{
		std::scoped_lock both(hyg_cxx_mutex, hyg_cxx_spin);
	}
#endif
	cv.notify_all();
	n += hyg_cxx_mutex.native_handle() != nullptr;
	n += hyg_cxx_spin.native_handle() != nullptr;
	n += hyg_cxx_rw.native_handle() != nullptr;
	n += hyg_cxx_pcpu.native_handle() != nullptr;
	n += static_cast<int>(hyg_cxx_mutex.stat().acquisitions + hyg_cxx_spin.stat().contended +
			      hyg_cxx_rw.stat().read_acquisitions);
	return n + hyg_locks() + hyg_modules();
}
