// SPDX-License-Identifier: MIT
/*
 * Progress while a benchmark works: a status line on standard error, only when it is a terminal.
 *
 * The line is drawn by a helper process, not a thread: a thread of the bench would be one more
 * thread for a key flip to inspect and would share its CPU time, and a timer signal would interrupt
 * the timed loops. The helper redraws every 250 ms with the time spent, so a bench is never silent
 * for a second even inside a long measurement or while it waits for another program. It shares a
 * page with the bench: the step the bench is at, and a robust process-shared mutex that keeps a
 * redraw from landing in the middle of a row. It exits when the bench closes its pipe, or dies.
 *
 * Where standard output is the same terminal, every write to it goes through a stdio cookie stream
 * that erases the status line first, and the helper draws only at the start of a line: benches
 * print with printf() as they always did and no row ever shares a line with the status.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define REDRAW_MS 250
#define ERASE "\r\033[K"
/* Set for the programs a bench runs: a nested `lowkey bench` draws nothing. */
#define NESTED_ENV "LOWKEY_BENCH_PROGRESS"

struct progress_page {
	pthread_mutex_t lock;
	char bench[32];
	char step[160];
	uint64_t start_ns;
	bool drawn;	    /* a status line is on the terminal */
	bool same_terminal; /* standard output is the terminal standard error is */
	bool mid_line;	    /* ...and the last byte written to it was not a newline */
};

static struct progress_page *page;
static pid_t helper = -1;
static int hangup = -1;	   /* write end: closed to stop the helper */
static FILE *plain_stdout; /* stdout before the cookie stream replaced it */

static void lock_page(void)
{
	if (pthread_mutex_lock(&page->lock) == EOWNERDEAD)
		pthread_mutex_consistent(&page->lock);
}

static void erase_locked(void)
{
	if (page->drawn && write(STDERR_FILENO, ERASE, sizeof(ERASE) - 1) < 0)
		return;
	page->drawn = false;
}

static void draw_locked(void)
{
	char line[256];
	double seconds = (double)(lkb_now_ns() - page->start_ns) / 1e9;
	int n = snprintf(line, sizeof(line), ERASE "lowkey bench %s: %s (%.0f s)", page->bench,
			 page->step[0] ? page->step : "working", seconds);

	if (n > 0 &&
	    write(STDERR_FILENO, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1) > 0)
		page->drawn = true;
}

static void __attribute__((noreturn)) helper_main(int hup)
{
	struct pollfd pfd = { .fd = hup, .events = POLLIN };

	for (;;) {
		lock_page();
		if (!page->mid_line)
			draw_locked();
		pthread_mutex_unlock(&page->lock);
		if (poll(&pfd, 1, REDRAW_MS) > 0)
			break; /* the bench closed the pipe, or died */
	}
	lock_page();
	erase_locked();
	pthread_mutex_unlock(&page->lock);
	_exit(0);
}

static bool same_terminal(void)
{
	struct stat out, err;

	return fstat(STDOUT_FILENO, &out) == 0 && fstat(STDERR_FILENO, &err) == 0 &&
	       S_ISCHR(out.st_mode) && out.st_rdev == err.st_rdev;
}

/* Standard output on the status line's terminal: erase the status, write, note where the line is. */
static ssize_t write_stdout(void *cookie, const char *buf, size_t size)
{
	size_t done = 0;

	(void)cookie;
	lock_page();
	erase_locked();
	while (done < size) {
		ssize_t n = write(STDOUT_FILENO, buf + done, size - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		done += (size_t)n;
	}
	if (done)
		page->mid_line = buf[done - 1] != '\n';
	pthread_mutex_unlock(&page->lock);
	return done || !size ? (ssize_t)done : -1;
}

static void take_stdout(void)
{
	cookie_io_functions_t io = { .write = write_stdout };
	FILE *f;

	fflush(stdout);
	f = fopencookie(NULL, "w", io);
	if (!f)
		return;
	setvbuf(f, NULL, _IOLBF, BUFSIZ);
	plain_stdout = stdout;
	stdout = f;
}

static void give_back_stdout(void)
{
	FILE *f = stdout;

	if (!plain_stdout)
		return;
	fflush(f);
	stdout = plain_stdout;
	plain_stdout = NULL;
	fclose(f);
}

static bool init_page(const char *bench)
{
	pthread_mutexattr_t attr;

	page = mmap(NULL, sizeof(*page), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED) {
		page = NULL;
		return false;
	}
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&page->lock, &attr);
	pthread_mutexattr_destroy(&attr);
	snprintf(page->bench, sizeof(page->bench), "%s", bench);
	page->start_ns = lkb_now_ns();
	page->same_terminal = same_terminal();
	return true;
}

void lkb_progress_start(const char *bench, bool quiet)
{
	int fds[2];

	if (quiet || page || getenv(NESTED_ENV) || !isatty(STDERR_FILENO))
		return;
	setenv(NESTED_ENV, "1", 1);
	if (!init_page(bench) || pipe2(fds, O_CLOEXEC) != 0)
		goto off;
	fflush(NULL);
	helper = fork();
	if (helper == 0) {
		close(fds[1]);
		helper_main(fds[0]);
	}
	close(fds[0]);
	if (helper < 0) {
		close(fds[1]);
		goto off;
	}
	hangup = fds[1];
	if (page->same_terminal)
		take_stdout();
	return;
off:
	if (page)
		munmap(page, sizeof(*page));
	page = NULL;
}

void lkb_progress_stop(void)
{
	if (!page)
		return;
	give_back_stdout();
	close(hangup);
	while (waitpid(helper, NULL, 0) < 0 && errno == EINTR)
		;
	munmap(page, sizeof(*page));
	page = NULL;
	helper = -1;
	hangup = -1;
}

void lkb_progress(const char *fmt, ...)
{
	va_list ap;

	if (!page)
		return;
	lock_page();
	va_start(ap, fmt);
	vsnprintf(page->step, sizeof(page->step), fmt, ap);
	va_end(ap);
	draw_locked();
	pthread_mutex_unlock(&page->lock);
}

void lkb_row(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap); /* through write_stdout() on the status line's terminal */
	va_end(ap);
	fflush(stdout);
}

struct section {
	char *text;
	size_t len;
};

static struct section open_section;

FILE *lkb_section_begin(void)
{
	FILE *f = open_memstream(&open_section.text, &open_section.len);

	return f ? f : stdout;
}

void lkb_section_end(FILE *section)
{
	if (section == stdout) {
		fflush(stdout);
		return;
	}
	fclose(section);
	lkb_row("%s", open_section.text);
	free(open_section.text);
	open_section.text = NULL;
}
