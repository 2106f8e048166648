// SPDX-License-Identifier: MIT
/*
 * Sites a C++ program typically has, in a header included from several translation units (tu_a,
 * tu_b), a shared library (shared.cpp) and a dlopen()ed plugin (plugin.cpp): function templates
 * with several instantiations, inline functions kept out of line (one COMDAT copy per unit, all
 * but one discarded at link time) and inlined (one copy of the code per caller), class members,
 * lambdas, static keys in templates, and a span that an exception leaves.
 */
#ifndef LKT_CXX_SITES_HPP
#define LKT_CXX_SITES_HPP

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include <lowkey/lowkey.h>

/* One copy of the function's code per program: no clone (GCC's IPA clones are local copies). */
#if defined(__clang__)
#define LKT_ONE_COPY __attribute__((noinline))
#else
#define LKT_ONE_COPY __attribute__((noinline, noipa))
#endif

LK_DECLARE_KEY(cxx_key);	 /* defined in test_cxx_sites.cpp */
LK_DECLARE_KEY_TRUE(cxx_key_on); /* likewise */

enum class color : std::uint8_t { red = 1, green = 2 };
enum class delta : int { down = -3 };

/* One descriptor per instantiation: the argument's type differs. */
template <typename T> LKT_ONE_COPY T twice(T v)
{
	LK_PROBE(cxx, twice, v);
	return v + v;
}

/* Two sites with an initialized variable between them (what Clang before 17 rejected). */
inline LKT_ONE_COPY int out_of_line(int x)
{
	LK_PROBE(cxx, out_of_line, x);
	int y = x + 1;
	LK_PROBE(cxx, out_of_line_after, y);
	return y;
}

/* Inlined into each caller: several copies of the code, one descriptor. */
inline int inlined(int x)
{
	LK_PROBE(cxx, inlined, x);
	return x * 3;
}

/* Static keys in templates, unlikely and likely, with a declaration between them. */
template <typename T> LKT_ONE_COPY int keyed(T v)
{
	int r = 0;

	if (lk_branch_unlikely(&cxx_key))
		r += 1;
	T w = v;
	if (lk_branch_likely(&cxx_key_on))
		r += 2;
	return r + static_cast<int>(w - v);
}

struct widget {
	int n = 0;

	LKT_ONE_COPY int member(std::string_view name, color c, bool flag)
	{
		LK_PROBE(cxx, member, name, c, flag, n);
		return n++;
	}

	static int static_member(const char *s, delta d)
	{
		LK_PROBE(cxx, static_member, s, d, std::string(s));
		return 1;
	}
};

inline int with_lambda(int x)
{
	auto twice_it = [](int v) {
		LK_PROBE(cxx, lambda, v);
		return v * 2;
	};
	return twice_it(x);
}

/* The span's end is recorded when the exception leaves the scope. */
inline LKT_ONE_COPY int risky(bool fail)
{
	LK_SPAN(cxx, risky);
	if (fail)
		throw std::runtime_error("risky failed");
	return 1;
}

/* Each calls every site above once (risky: without throwing), with i in the arguments. */
int tu_a_run(int i);
int tu_b_run(int i);
extern "C" int lkt_shared_run(int i);

#endif
