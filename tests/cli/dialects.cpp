// SPDX-License-Identifier: MIT
/*
 * Keys and probes as users write them in C++, every case users meet: two sites with an
 * initialized variable between them, function templates (several instantiations), inline
 * functions, class members, lambdas, keys in templates, C++ argument types (enum class, bool,
 * std::string_view, std::string, nullptr), a span an exception leaves, lk_mutex under the
 * standard lock holders. Compiled warning-free by test_header_hygiene (tests/hygiene.sh) in
 * C++11, 14, 17, 20 and GNU++17 with every compiler at hand; never run.
 */
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#if __cplusplus >= 201703L
#include <string_view>
#endif

#include <lowkey/lock.hpp>
#include <lowkey/lowkey.h>

LK_DEFINE_KEY_FALSE(cxx_dialect_key);
LK_DEFINE_KEY_TRUE(cxx_dialect_key_on);

namespace dialect
{

enum class color : std::uint8_t { red = 1 };
enum class delta : long { down = -1 };
enum plain { plain_one = 1 };

int two_probes(int x);
int two_keys(int x);
int with_lambda(int x);
int instantiate();
int types(const char *s, const std::string &str);
int risky(bool fail);
int locked(int x);

int two_probes(int x)
{
	LK_PROBE(a, b, x);
	int y = x + 1;
	LK_PROBE(a, c, y);
	LK_PROBE(a, d);
	return y;
}

int two_keys(int x)
{
	if (lk_branch_unlikely(&cxx_dialect_key))
		x++;
	int y = x + 1;
	if (lk_branch_likely(&cxx_dialect_key_on))
		y++;
	return y;
}

template <typename T> T twice(T v)
{
	LK_PROBE(tmpl, twice, v);
	if (lk_branch_unlikely(&cxx_dialect_key))
		v = v + v;
	return v + v;
}

inline int inline_function(int x)
{
	LK_PROBE(inl, fn, x);
	int y = x * 2;
	LK_PROBE(inl, fn_after, y);
	return y;
}

struct widget {
	int n = 0;

	int member(bool flag)
	{
		LK_SPAN(widget, member);
		LK_PROBE(widget, member, flag, n);
		return n++;
	}
	static int static_member(color c, delta d, plain p)
	{
		LK_PROBE(widget, static_member, c, d, p);
		return 0;
	}
};

int with_lambda(int x)
{
	auto f = [](int v) {
		LK_PROBE(lambda, called, v);
		return v + 1;
	};
	return f(x);
}

int instantiate()
{
	widget w;

	return twice(1) + static_cast<int>(twice(2.0)) + static_cast<int>(twice(3L)) +
	       inline_function(4) + w.member(true) +
	       widget::static_member(color::red, delta::down, plain_one);
}

int types(const char *s, const std::string &str)
{
	char buf[4] = "buf";
	const int *none = nullptr;

	LK_PROBE(types, strings, s, buf, str, str.c_str());
	LK_PROBE(types, pointers, none, nullptr, &buf[0] + 1);
#if __cplusplus >= 201703L
	std::string_view view(str);

	LK_PROBE(types, view, view, view.substr(1));
#endif
	LK_PROBE(types, numbers, 'c', true, 1.5f, 2.5, std::uint64_t{ 3 }, std::int8_t{ -4 });
	return static_cast<int>(str.size());
}

int risky(bool fail)
{
	LK_SPAN(risky, scope);
	if (fail)
		throw std::runtime_error("failed");
	return 1;
}

static lowkey::mutex dialect_mutex{ "dialect" };

int locked(int x)
{
	std::lock_guard<lowkey::mutex> hold(dialect_mutex);

	return x + (lk_key_enabled(&cxx_dialect_key) ? 1 : 0) + lk_key_enable(&cxx_dialect_key);
}

} // namespace dialect
