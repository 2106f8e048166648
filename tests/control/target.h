/* SPDX-License-Identifier: MIT */
#ifndef LKT_CONTROL_TARGET_H
#define LKT_CONTROL_TARGET_H

/* In target_lib.c (the shared library lkt_ctl_lib): records lib:work(i, "from the library"). */
void lkt_lib_work(int i);

#endif
