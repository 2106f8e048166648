/* SPDX-License-Identifier: MIT */
/* Internal API: what `lowkey bench` needs of the key module beyond <lowkey/key.h>. */
#ifndef LK_INTERNAL_KEY_H
#define LK_INTERNAL_KEY_H

#include <stdbool.h>

/*
 * For `lowkey bench branch` alone: while set, x86-64 rewrites every batch in place with the trap
 * protocol, in any process, as flips did before remapping became the rule where other threads
 * run -- to measure both protocols in one run. A thread that blocks SIGTRAP and meets a site being
 * rewritten then kills the process: never set it in a program. Set it with no flip under way.
 */
extern bool lk__patch_traps_for_bench;

#endif
