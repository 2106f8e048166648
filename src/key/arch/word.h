/* SPDX-License-Identifier: MIT */
/*
 * Architectures whose site is one aligned 32-bit word, a NOP or a jump, rewritten with a single
 * store and no trap (aarch64, riscv64): word.c has what they share, arch/<arch>.c the encodings
 * and the cache maintenance.
 */
#ifndef LK_KEY_ARCH_WORD_H
#define LK_KEY_ARCH_WORD_H

#include <stdbool.h>
#include <stdint.h>

#include "key/key_internal.h"

/* The architecture's NOP. */
extern const uint32_t lk__word_nop;

/* The jump from code to target, whether one reaches, and where a jump goes from its site. */
uint32_t lk__word_jump(const uint8_t *code, const uint8_t *target);
bool lk__word_jump_reaches(const uint8_t *code, const uint8_t *target);
long lk__word_jump_offset(uint32_t word);

/* One single-copy atomic store of an instruction word, and one byte load of code, both unseen by
 * sanitizers (code is not data they track). */
void lk__word_store(uint8_t *p, uint32_t word);
uint8_t lk__word_load_byte(const uint8_t *p);

/* After the stores of a batch: what makes this thread fetch them (the other threads are the
 * sync's). */
void lk__word_written(const struct lk__patch *p, size_t n);

#endif
