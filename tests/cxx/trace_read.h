/* SPDX-License-Identifier: MIT */
/* For the C++ tests: a lowkey trace read through the library's (C) reader, see trace_read.c. */
#ifndef LKT_CXX_TRACE_READ_H
#define LKT_CXX_TRACE_READ_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Reads the trace at dir; 0, or the reader's error (its message in err). */
int lkt_trace_load(const char *dir, char *err, size_t errlen);
void lkt_trace_unload(void);
size_t lkt_trace_events(void);
/* Event i: its name (provider:event), kind (enum lk_probe_kind), thread, argument count. */
const char *lkt_trace_name(size_t i);
unsigned int lkt_trace_kind(size_t i);
int lkt_trace_tid(size_t i);
unsigned int lkt_trace_nargs(size_t i);
/* Argument a of event i: its raw 64 bits, and its text for a string (NULL otherwise). */
uint64_t lkt_trace_arg(size_t i, unsigned int a);
const char *lkt_trace_arg_string(size_t i, unsigned int a);
size_t lkt_trace_count(const char *name);
/* Checks every static-key site of the main program's table against its key's state: the 5-byte
 * NOP, or a jmp to the site's target. The number of sites, or -1 at the first wrong one. */
int lkt_check_all_sites(void);
/* Sites of key in the main program's table (checked as above), or -1. */
int lkt_check_key_sites(const void *key);
/* The addresses of the main program's static-key sites as in its file (for objdump), up to max;
 * how many there are. */
size_t lkt_site_file_addresses(uint64_t *out, size_t max);

#ifdef __cplusplus
}
#endif

#endif
