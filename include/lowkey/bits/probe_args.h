/* SPDX-License-Identifier: MIT */
/*
 * Probe arguments, included by lowkey/probe.h: counting them, finding each one's type at compile
 * time (_Generic in C, templates in C++) and converting it to its 64-bit record value. Nothing
 * here is API.
 */
#ifndef LOWKEY_BITS_PROBE_ARGS_H
#define LOWKEY_BITS_PROBE_ARGS_H

#ifndef LOWKEY_PROBE_H
#error "include <lowkey/probe.h>, not <lowkey/bits/probe_args.h>"
#endif

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <lowkey/bits/compiler.h>
#ifdef __cplusplus
#include <type_traits>
#if __cplusplus >= 201703L
#include <string_view>
#endif
#endif

LK_BEGIN_DECLS

/*
 * An argument type of arg_types only, never of a trace or of lk_probe_info: a C++ string view,
 * passed as the address of this pair and recorded as LK_PROBE_STR (up to its first NUL byte).
 */
#define LK__PROBE_VIEW 6
struct lk__probe_view {
	const char *ptr;
	size_t len;
};

/*
 * Argument counting, in standard C99 and C++11 (no GNU ", ##__VA_ARGS__"): LK__NARGS counts the
 * provider and the event too, 2 to 11 tokens, and picks LK__PROBE_<count>.
 */
#define LK__CAT_(a, b) a##b
#define LK__CAT(a, b) LK__CAT_(a, b)
#define LK__NARGS(...) LK__NARGS_(__VA_ARGS__, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define LK__NARGS_(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, n, ...) n

static inline uint64_t lk__u64_i(int64_t v)
{
	return LK__CAST(uint64_t, v);
}
static inline uint64_t lk__u64_u(uint64_t v)
{
	return v;
}
static inline uint64_t lk__u64_p(const volatile void *p)
{
	return LK__REINTERPRET(uintptr_t, p);
}
static inline uint64_t lk__u64_f(double v)
{
	uint64_t u;

	memcpy(&u, &v, sizeof(u));
	return u;
}

#ifndef __cplusplus
#define LK__ARG_TYPE(x)                           \
	(__extension__ _Generic((x),              \
		_Bool: LK_PROBE_U64,              \
		unsigned char: LK_PROBE_U64,      \
		unsigned short: LK_PROBE_U64,     \
		unsigned int: LK_PROBE_U64,       \
		unsigned long: LK_PROBE_U64,      \
		unsigned long long: LK_PROBE_U64, \
		char: LK_PROBE_I64,               \
		signed char: LK_PROBE_I64,        \
		short: LK_PROBE_I64,              \
		int: LK_PROBE_I64,                \
		long: LK_PROBE_I64,               \
		long long: LK_PROBE_I64,          \
		float: LK_PROBE_F64,              \
		double: LK_PROBE_F64,             \
		char *: LK_PROBE_STR,             \
		const char *: LK_PROBE_STR,       \
		default: LK_PROBE_PTR))
#define LK__ARG_DECL(i, x)                                     \
	const uint64_t lk__a##i = (__extension__ _Generic((x), \
		_Bool: lk__u64_u,                              \
		unsigned char: lk__u64_u,                      \
		unsigned short: lk__u64_u,                     \
		unsigned int: lk__u64_u,                       \
		unsigned long: lk__u64_u,                      \
		unsigned long long: lk__u64_u,                 \
		char: lk__u64_i,                               \
		signed char: lk__u64_i,                        \
		short: lk__u64_i,                              \
		int: lk__u64_i,                                \
		long: lk__u64_i,                               \
		long long: lk__u64_i,                          \
		float: lk__u64_f,                              \
		double: lk__u64_f,                             \
		default: lk__u64_p)(x));
#define LK__PROBE_TOO_MANY _Static_assert(0, "a probe takes at most 8 arguments")
#else
} /* extern "C" */
/*
 * What a C++ argument records as: integers, bool and enumerations (as their underlying type) as
 * integers, floating point as f64, char pointers and arrays as strings, whatever converts to
 * std::string_view (std::string too) as a string, any other pointer as its address.
 */
template <typename T, bool = std::is_enum<T>::value> struct lk__int_of {
	typedef T type;
};
template <typename T> struct lk__int_of<T, true> {
	typedef typename std::underlying_type<T>::type type;
};

/* Whether T has a c_str() returning a char pointer (std::string and its kind). */
template <typename T> struct lk__has_c_str {
	template <typename U>
	static char
	test(decltype(static_cast<const char *>(static_cast<const U *>(nullptr)->c_str())));
	template <typename U> static long test(...);
	static constexpr bool value = sizeof(test<T>(nullptr)) == 1;
};

/* How an argument is converted: its lk_probe_type, or one of these (recorded as strings). */
#define LK__ARG_C_STR 7 /* an object with c_str() */

template <typename T> struct lk__arg_kind {
	typedef typename std::decay<T>::type D;
	typedef typename lk__int_of<D>::type I;
	static constexpr bool is_cstr = std::is_same<D, char *>::value ||
					std::is_same<D, const char *>::value;
	static constexpr bool is_object = !std::is_pointer<D>::value &&
					  !std::is_same<D, std::nullptr_t>::value;
#if __cplusplus >= 201703L
	static constexpr bool is_view = is_object &&
					std::is_convertible<const D &, std::string_view>::value;
#else
	static constexpr bool is_view = false;
#endif
	static constexpr int how =
		std::is_same<I, char>::value ?
			LK_PROBE_I64 :
		std::is_integral<I>::value ?
			(std::is_signed<I>::value ? LK_PROBE_I64 : LK_PROBE_U64) :
		std::is_floating_point<D>::value     ? LK_PROBE_F64 :
		is_cstr				     ? LK_PROBE_STR :
		is_view				     ? LK__PROBE_VIEW :
		is_object && lk__has_c_str<D>::value ? LK__ARG_C_STR :
		std::is_pointer<D>::value || std::is_same<D, std::nullptr_t>::value ? LK_PROBE_PTR :
										      0;
	static constexpr int type = how == LK__ARG_C_STR ? LK_PROBE_STR : how;
	static_assert(how != 0,
		      "a lowkey probe argument is an integer, bool, enum, float, double, string "
		      "(char pointer or array, std::string_view, std::string) or pointer");
};

template <int Type> struct lk__arg_tag {};

template <typename T>
inline uint64_t lk__arg_value(T v, struct lk__probe_view &, lk__arg_tag<LK_PROBE_I64>)
{
	return static_cast<uint64_t>(static_cast<int64_t>(v));
}
template <typename T>
inline uint64_t lk__arg_value(T v, struct lk__probe_view &, lk__arg_tag<LK_PROBE_U64>)
{
	return static_cast<uint64_t>(v);
}
template <typename T>
inline uint64_t lk__arg_value(T v, struct lk__probe_view &, lk__arg_tag<LK_PROBE_F64>)
{
	return lk__u64_f(static_cast<double>(v));
}
template <typename T>
inline uint64_t lk__arg_value(T v, struct lk__probe_view &, lk__arg_tag<LK_PROBE_STR>)
{
	return reinterpret_cast<uintptr_t>(static_cast<const char *>(v));
}
template <typename T>
inline uint64_t lk__arg_value(T v, struct lk__probe_view &, lk__arg_tag<LK_PROBE_PTR>)
{
	return reinterpret_cast<uintptr_t>(v);
}
inline uint64_t lk__arg_value(std::nullptr_t, struct lk__probe_view &, lk__arg_tag<LK_PROBE_PTR>)
{
	return 0;
}
template <typename T>
inline uint64_t lk__arg_value(const T &v, struct lk__probe_view &, lk__arg_tag<LK__ARG_C_STR>)
{
	return reinterpret_cast<uintptr_t>(static_cast<const char *>(v.c_str()));
}
#if __cplusplus >= 201703L
/* Scalars go by value (a reference would keep the caller's variable in memory, on the hot path too).
 * The view lives in the caller's block until the event is recorded. */
template <typename T>
inline uint64_t lk__arg_value(const T &v, struct lk__probe_view &view, lk__arg_tag<LK__PROBE_VIEW>)
{
	std::string_view sv(v);

	view.ptr = sv.data();
	view.len = sv.size();
	return reinterpret_cast<uintptr_t>(&view);
}
#endif

#define LK__ARG_TYPE(x) (lk__arg_kind<decltype((x))>::type)
/*
 * The argument is bound to a reference first: a temporary (std::string(s), a returned view) then
 * lives to the end of the probe's block, past the copy of its bytes into the record.
 */
#define LK__ARG_DECL(i, x)                                                                        \
	auto &&lk__ref##i = (x);                                                                  \
	struct lk__probe_view lk__view##i;                                                        \
	const uint64_t lk__a##i = lk__arg_value(lk__ref##i, lk__view##i,                          \
						lk__arg_tag<lk__arg_kind<decltype((x))>::how>()); \
	LK__SDT_DECL(i, lk__arg_kind<decltype((x))>::how)
#define LK__PROBE_TOO_MANY static_assert(false, "a probe takes at most 8 arguments")

/* What an SDT note shows of an argument: its record value, but a string view's data pointer. */
template <int How> inline uint64_t lk__sdt_value(uint64_t a)
{
	return a;
}
template <> inline uint64_t lk__sdt_value<LK__PROBE_VIEW>(uint64_t a)
{
	return reinterpret_cast<uintptr_t>(reinterpret_cast<const struct lk__probe_view *>(a)->ptr);
}

extern "C" {
#endif

#define LK__TYPE(i, x) (LK__CAST(uint32_t, LK__ARG_TYPE(x)) << (4 * (i)))
#define LK__IS_STRING(types, i)                          \
	(((types) >> (4 * (i)) & 0xf) == LK_PROBE_STR || \
	 ((types) >> (4 * (i)) & 0xf) == LK__PROBE_VIEW)
#define LK__HAS_STRINGS(types)                                                            \
	(LK__IS_STRING(types, 0) || LK__IS_STRING(types, 1) || LK__IS_STRING(types, 2) || \
	 LK__IS_STRING(types, 3) || LK__IS_STRING(types, 4) || LK__IS_STRING(types, 5) || \
	 LK__IS_STRING(types, 6) || LK__IS_STRING(types, 7))

LK_END_DECLS

#endif
