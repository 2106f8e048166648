/* SPDX-License-Identifier: MIT */
/*
 * lowkey: the Linux kernel's low-overhead instrumentation for user programs.
 * This header includes every module's header. Link with -llowkey (pkg-config lowkey).
 */
#ifndef LOWKEY_LOWKEY_H
#define LOWKEY_LOWKEY_H

#include <lowkey/version.h>
#include <lowkey/error.h>
#include <lowkey/key.h>
#include <lowkey/clock.h>
#include <lowkey/lock.h>
#include <lowkey/probe.h>
#include <lowkey/counter.h>
#include <lowkey/watch.h>
#include <lowkey/sem.h>
#include <lowkey/trace_reader.h>

#endif
