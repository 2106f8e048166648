/* SPDX-License-Identifier: MIT */
/* lowkey list with no argument: the counter events this machine offers (list_events.c). */
#ifndef LOWKEY_LIST_EVENTS_H
#define LOWKEY_LIST_EVENTS_H

#include <stdbool.h>

/*
 * Print every counter event lowkey can name here, each tried on this thread, marking those it
 * cannot count with the reason; JSON when json. Returns an exit status (CLI_EXIT_*).
 */
int cli_list_events(bool json);

#endif
