// SPDX-License-Identifier: MIT
/* A command's status line on its terminal (status.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal/trace_progress.h"
#include "status.h"

#define ERASE "\r\033[K"

static struct {
	const char *cmd; /* NULL: status lines are off */
	bool drawn;
} status;

void status_begin(const char *cmd, bool wanted)
{
	status.cmd = wanted && isatty(STDERR_FILENO) ? cmd : NULL;
	status.drawn = false;
}

static void put(const char *s, size_t len)
{
	while (len) {
		ssize_t n = write(STDERR_FILENO, s, len);

		if (n <= 0)
			return; /* the terminal went away: nothing to do about a status line */
		s += n;
		len -= (size_t)n;
	}
}

/*
 * The bytes of line (ERASE, then text) that fit on one line of the terminal: a line that wrapped
 * would leave its first part behind when erased. Cut between UTF-8 characters.
 */
static size_t visible_length(const char *line, size_t len)
{
	struct winsize ws;
	size_t cols = 0, at = sizeof(ERASE) - 1;

	if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) != 0 || ws.ws_col < 2)
		return len;
	for (; at < len; at++)
		if (((unsigned char)line[at] & 0xc0) != 0x80 && ++cols == ws.ws_col)
			break; /* the last column stays free: some terminals wrap on writing it */
	return at;
}

void status_show(const char *fmt, ...)
{
	char line[256];
	va_list ap;
	int n, m;

	if (!status.cmd)
		return;
	fflush(stderr); /* what the command printed comes first */
	n = snprintf(line, sizeof(line), ERASE "lowkey %s: ", status.cmd);
	va_start(ap, fmt);
	m = vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	if (m < 0)
		return;
	put(line, visible_length(line, strnlen(line, sizeof(line) - 1)));
	status.drawn = true;
}

void status_clear(void)
{
	if (!status.drawn)
		return;
	put(ERASE, sizeof(ERASE) - 1);
	status.drawn = false;
}

static const char *format_label(const char *format)
{
	return strcmp(format, "json") == 0     ? "JSON" :
	       strcmp(format, "perfetto") == 0 ? "Perfetto" :
	       strcmp(format, "ctf") == 0      ? "CTF" :
						 format;
}

void status_progress(const char *what, uint64_t done, uint64_t total)
{
	double mib = 1024.0 * 1024.0;

	if (done >= total) {
		status_clear(); /* the end: whatever is printed next has the line to itself */
		return;
	}
	status_show("%s: %.0f%% (%.1f of %.1f MiB)", what, 100.0 * (double)done / (double)total,
		    (double)done / mib, (double)total / mib);
}

void status_progress_sink(uint64_t done, uint64_t total, void *what)
{
	status_progress(what, done, total);
}

void status_conversion(const char *format, uint64_t done, uint64_t total)
{
	char what[64];

	snprintf(what, sizeof(what), "converting the trace to %s", format_label(format));
	status_progress(what, done, total);
}

void status_conversion_sink(uint64_t done, uint64_t total, void *arg)
{
	status_conversion(arg, done, total);
}

/*
 * A JSON or Perfetto file, of size bytes, counted twice (src/format/trace_file.c): read into memory, then
 * parsed. Reading it is quick from the page cache; parsing is most of the work.
 */
static void file_progress(uint64_t done, uint64_t total, void *arg)
{
	uint64_t size = total / 2;

	(void)arg;
	if (done >= total)
		status_clear();
	else if (done < size)
		status_progress("reading the trace", done, size);
	else
		status_progress("parsing the trace", done - size, size);
}

void status_reading_begin(const char *path, unsigned int walks)
{
	static char what[64];
	static struct lk__progress_sink reading = { status_progress_sink, what };
	static const struct lk__progress_sink file = { file_progress, NULL };
	uint64_t bytes = lk__progress_ctf_bytes(path); /* 0 for a file */
	struct stat st;

	status_show("reading %s", path);
	if (!status.cmd)
		return;
	if (!bytes) {
		/* a file is read and parsed once, however often the report walks what it holds */
		if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
			lk__progress_begin(&file, 2 * (uint64_t)st.st_size);
		return;
	}
	if (walks > 1)
		snprintf(what, sizeof(what), "reading the trace (%u passes)", walks);
	else
		snprintf(what, sizeof(what), "reading the trace");
	lk__progress_begin(&reading, bytes * walks);
}

void status_reading_end(void)
{
	lk__progress_end();
	status_clear();
}
