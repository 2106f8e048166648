/* SPDX-License-Identifier: MIT */
/* Internal API: what `lowkey locks` shares with the lock module's report (lk_lockstat_report). */
#ifndef LK_INTERNAL_LOCK_H
#define LK_INTERNAL_LOCK_H

#include <stddef.h>
#include <stdint.h>

/*
 * lk__lock_duration - ns as the lock reports print it, into buf (len bytes; 16 are enough):
 * "812ns" below a microsecond, microseconds and milliseconds with `decimals` digits after the
 * point ("4.2us" with 1, "4.21us" with 2), seconds with two ("2.50s"). Returns buf. One
 * snprintf; not async-signal-safe (it formats a double).
 */
const char *lk__lock_duration(char *buf, size_t len, uint64_t ns, int decimals);

#endif
