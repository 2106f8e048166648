// SPDX-License-Identifier: MIT
/*
 * The rules every lowkey command follows, printed once by `lowkey help` rather than in each
 * command's text.
 */
#include "builtin.h"

const char cli_conventions[] =
	"\n"
	"Event lists (-e, and the LOWKEY_TRACE variable):\n"
	"   comma-separated, blanks around an item ignored; -e repeats (-e a -e b is -e a,b).\n"
	"   stat: perf's event syntax; {a,b} is a group, counted together.\n"
	"   trace, LOWKEY_TRACE: provider:event globs (* ? [...]); a leading '-' excludes; no braces.\n"
	"\n"
	"Exit status:\n"
	"   Commands that run a COMMAND (stat, trace, locks, races) exit with its status: 128+N when\n"
	"   signal N ended it, 127 when it was not found, 126 when it could not be executed (races:\n"
	"   66 when it found races). lowkey's own:\n"
	"   0 done, 1 failed (nothing measured, or the output not written; the message says why),\n"
	"   2 bad usage.\n"
	"\n"
	"Signals:\n"
	"   While its COMMAND runs, a command that runs one (stat, trace, locks, races) ignores SIGINT\n"
	"   and SIGQUIT (the terminal sends them to COMMAND too) and passes SIGTERM and SIGHUP on to\n"
	"   it, then reports as usual; one lowkey was started ignoring (nohup) stays ignored and is not\n"
	"   passed on. COMMAND starts with the dispositions and signal mask lowkey was started with.\n"
	"   One of these four that comes while no COMMAND runs (before it starts, between the runs of\n"
	"   stat -r, during the report) ends lowkey only once it has removed its files and printed\n"
	"   what it has; a COMMAND that has not started does not. A second one acts at once.\n"
	"   With --pid PID (stat, trace, races, watch), SIGINT, SIGTERM and SIGHUP end the counting,\n"
	"   the trace, the sampling or the watch in PID, and lowkey reports as usual; one lowkey was\n"
	"   started ignoring stays ignored.\n"
	"\n"
	"Output:\n"
	"   -j is --json wherever JSON is offered. Long work (the benchmarks, reading or converting a\n"
	"   trace, a snapshot) shows a status line on standard error when it is a terminal, never in\n"
	"   the output or with --json; -q, --quiet hides it in every command that shows one (trace,\n"
	"   convert, report, snapshot, bench).\n";
