/* SPDX-License-Identifier: MIT */
/*
 * Compiler plumbing shared by the public headers. Nothing here is API.
 */
#ifndef LOWKEY_BITS_COMPILER_H
#define LOWKEY_BITS_COMPILER_H

#if !defined(__GNUC__)
#error "lowkey needs GCC >= 12 or Clang >= 14 (asm goto, section attributes, statement expressions)"
#endif

#define LK_API __attribute__((visibility("default")))

#ifdef __cplusplus
#define LK_BEGIN_DECLS extern "C" {
#define LK_END_DECLS }
#else
#define LK_BEGIN_DECLS
#define LK_END_DECLS
#endif

/*
 * A function named like its struct (lk_clock_info, as C's stat) hides the struct's implicit
 * constructor in C++, which g++ -Wshadow reports; the header must not warn in users' builds.
 */
#ifdef __cplusplus
#define LK__SAME_NAME_BEGIN \
	_Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wshadow\"")
#define LK__SAME_NAME_END _Pragma("GCC diagnostic pop")
#else
#define LK__SAME_NAME_BEGIN
#define LK__SAME_NAME_END
#endif

/*
 * Casts in inline code: C++ users build with -Wold-style-cast. LK__CAST converts values
 * (static_cast), LK__REINTERPRET converts between pointers and integers or pointer types.
 */
#ifdef __cplusplus
#define LK__CAST(T, v) (static_cast<T>(v))
#define LK__REINTERPRET(T, v) (reinterpret_cast<T>(v))
#else
#define LK__CAST(T, v) ((T)(v))
#define LK__REINTERPRET(T, v) ((T)(v))
#endif

#define LK__LIKELY(x) __builtin_expect(!!(x), 1)
#define LK__UNLIKELY(x) __builtin_expect(!!(x), 0)

#endif
