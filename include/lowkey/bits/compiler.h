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

#define LK__LIKELY(x) __builtin_expect(!!(x), 1)
#define LK__UNLIKELY(x) __builtin_expect(!!(x), 0)

#endif
