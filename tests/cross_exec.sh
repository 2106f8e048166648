#!/bin/sh
# SPDX-License-Identifier: MIT
# cross_exec.sh PROBE EMULATOR... TEST: how a cross build's CTest runs a test that executes
# programs of the target itself (lk_test's EXECS: the CLI, helpers, itself again). Under the
# emulator the test runs, but whatever it executes is run by the host kernel, which can only do
# that where binfmt_misc has a handler for the target (qemu-user-static's). PROBE, a program of the
# target, is executed directly to find out: if it runs, so will the test's programs, and the test
# runs under the emulator; if not, the test is skipped (exit 77) with the reason.
probe=$1
shift
if "$probe" 2>/dev/null; then
	exec "$@"
fi
echo "SKIPPED: this test executes programs built for the target, and this $(uname -m) host cannot run them"
echo "(no binfmt_misc handler for qemu is registered): the emulator runs the test, not what it executes"
exit 77
