/* SPDX-License-Identifier: MIT */
/* The shape of html_counters.c's trace, which test_html_counters.c checks. */
#ifndef LKT_HTML_COUNTERS_H
#define LKT_HTML_COUNTERS_H

#define THREADS 12   /* more than a chart's 10 lines */
#define SAMPLES 3000 /* more than a line's 2000 points drawn one by one */

#endif
