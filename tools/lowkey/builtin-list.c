// SPDX-License-Identifier: MIT
/*
 * lowkey list BINARY... | --pid PID: the probe sites of programs and libraries, read from their
 * ELF files without running them, or of a running process. Without an argument, the counter
 * events this machine offers (list_events.c).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lowkey/probe.h>

#include "builtin.h"
#include "internal/failf.h"
#include "internal/json.h"
#include "internal/probe.h"
#include "internal/utf8.h"
#include "util/list_events.h"
#include "internal/control.h"
#include "util/probe_elf.h"
#include "util/proc_mem.h"

/*
 * What a process may send for LIST: a site per event id (16 bits), so many bytes, so long.
 * Anything claiming more is not a lowkey process answering, and is not read on.
 */
#define MAX_SITES 65536
#define MAX_LIST_BYTES (64u << 20)
#define LIST_TIMEOUT_MS 30000

static const char list_usage[] =
	"usage: lowkey list [-j|--json]\n"
	"       lowkey list [-j|--json] BINARY...\n"
	"       lowkey list [-j|--json] --pid PID\n"
	"\n"
	"Without an argument, lists the counter events lowkey can open here for `lowkey stat -e` and\n"
	"lk_counters_open(): the kernel's software events, perf's hardware and cache events and the\n"
	"CPU's own (libpfm4), the kernel PMUs' events (/sys/bus/event_source/devices), and the\n"
	"tracepoints by subsystem. Each is tried on this machine: one it cannot count is marked\n"
	"<not supported> with the reason (a virtual machine without a PMU, perf_event_paranoid, ...).\n"
	"\n"
	"Lists the probe sites (LK_PROBE, LK_SPAN, LK_COUNTER) of programs and shared libraries, read\n"
	"from their ELF section __lk_probe_sites without running them; or of a running process: when\n"
	"its control socket is open (LOWKEY_CONTROL=1 or lk_control_open()), what the process has\n"
	"registered, dlopen()ed objects included, whether each site is on, and \"tracer\" where an\n"
	"outside tracer (bpftrace, perf) holds the site's USDT semaphore; otherwise the sites of every\n"
	"object it has mapped, read from their files, and both from its memory where this user may\n"
	"read it (the process's user without Yama's ptrace_scope, or root); else they are unknown,\n"
	"and lowkey says why.\n"
	"\n"
	"Each site: provider:event, its kind (event, span-begin, span-end, counter), file:line, and\n"
	"its arguments as written, with their types (i64, u64, f64, string, pointer). The globs of\n"
	"`lowkey trace -e` match \"provider:event\" (or the provider alone when they have no ':').\n"
	"\n"
	"A program or library may also have USDT probes of other providers (<sys/sdt.h>, DTrace):\n"
	"BINARY's are listed after lowkey's sites, each provider:name, its address, whether it has a\n"
	"semaphore, and its argument spec; perf, bpftrace and SystemTap trace them, not lowkey.\n"
	"\n"
	"Options:\n"
	"  -p, --pid PID   list the sites of a running process\n"
	"  -j, --json      print {\"sites\": [{\"object\", \"provider\", \"event\", \"kind\", \"file\",\n"
	"                  \"line\", \"args\": [{\"name\", \"type\"}], \"enabled\", \"tracer\"}]} (\"enabled\"\n"
	"                  and \"tracer\" only when known); for --pid, also \"pid\" and \"source\":\n"
	"                  \"control\", \"memory\" (sites from the files, their state from its\n"
	"                  memory) or \"elf\" (state unknown); for BINARY..., also \"usdt\": [{\"object\",\n"
	"                  \"provider\", \"name\", \"args\", \"address\", \"semaphore\"}]: the USDT\n"
	"                  probes of other providers\n"
	"                  without an argument {\"events\": [{\"name\", \"section\", \"pmu\", \"supported\",\n"
	"                  \"user_only\", \"why\"}], \"libpfm4\", \"tracepoints\": {\"supported\", \"count\",\n"
	"                  \"root\", \"why\", \"subsystems\"}}\n"
	"  -h, --help      this text\n"
	"\n"
	"Examples:\n"
	"  lowkey list\n"
	"  lowkey list ./server\n"
	"  lowkey list --json build/libdb.so\n"
	"  lowkey list --pid $(pidof server)\n";

struct row {
	char *object, *provider, *event, *file, *arg_names;
	char *function;		 /* "" when not known */
	const char *object_type; /* NULL for a live process's sites */
	unsigned int line, kind, nargs;
	uint32_t arg_types;
	int enabled;		   /* 1, 0, or -1: unknown */
	int tracer;		   /* an outside tracer holds its semaphore: 1, 0, or -1: unknown */
	size_t object_rank, order; /* for sorting: objects as met, then by name and line */
};

/* A USDT probe of another provider in an object listed from its file. */
struct foreign {
	const char *object; /* as given on the command line */
	const char *object_type;
	struct probe_elf_usdt u;
};

struct rows {
	struct row *v;
	size_t n, cap;
	struct foreign *usdt; /* files only: the probes of other providers, as met */
	size_t nusdt, capusdt;
};

/* Take s's USDT probes of other providers (now r's to free) for the object shown as object. */
static int take_foreign(struct rows *r, struct probe_elf_sites *s, const char *object)
{
	if (r->nusdt + s->nusdt > r->capusdt) {
		size_t cap = (r->nusdt + s->nusdt) * 2;
		struct foreign *grown = realloc(r->usdt, cap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		r->usdt = grown;
		r->capusdt = cap;
	}
	for (size_t i = 0; i < s->nusdt; i++)
		r->usdt[r->nusdt++] = (struct foreign){ object, s->type, s->usdt[i] };
	s->nusdt = 0; /* taken */
	return 0;
}

static int add_row(struct rows *r, const struct row *row)
{
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 64;
		struct row *grown = realloc(r->v, cap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		r->v = grown;
		r->cap = cap;
	}
	r->v[r->n] = *row;
	r->v[r->n].object = strdup(row->object);
	r->v[r->n].provider = strdup(row->provider);
	r->v[r->n].event = strdup(row->event);
	r->v[r->n].file = strdup(row->file);
	r->v[r->n].arg_names = strdup(row->arg_names);
	r->v[r->n].function = strdup(row->function ? row->function : "");
	if (!r->v[r->n].object || !r->v[r->n].provider || !r->v[r->n].event || !r->v[r->n].file ||
	    !r->v[r->n].arg_names || !r->v[r->n].function) {
		free(r->v[r->n].object), free(r->v[r->n].provider), free(r->v[r->n].event);
		free(r->v[r->n].file), free(r->v[r->n].arg_names), free(r->v[r->n].function);
		return -ENOMEM;
	}
	r->n++;
	return 0;
}

static void free_rows(struct rows *r)
{
	for (size_t i = 0; i < r->n; i++) {
		free(r->v[i].object), free(r->v[i].provider), free(r->v[i].event);
		free(r->v[i].file), free(r->v[i].arg_names), free(r->v[i].function);
	}
	free(r->v);
	for (size_t i = 0; i < r->nusdt; i++)
		free(r->usdt[i].u.provider), free(r->usdt[i].u.name), free(r->usdt[i].u.args);
	free(r->usdt);
}

static const char *arg_type(const struct row *s, unsigned int i)
{
	return lk_probe_type_name((enum lk_probe_type)((s->arg_types >> (4 * i)) & 0xf));
}

static int row_cmp(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	int c;

	if (x->object_rank != y->object_rank)
		return x->object_rank < y->object_rank ? -1 : 1;
	if ((c = strcmp(x->provider, y->provider)) || (c = strcmp(x->event, y->event)))
		return c;
	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

/* Each object's sites together, in the order the objects came, sorted by provider:event, line. */
static void sort_rows(struct rows *r)
{
	if (r->n < 2)
		return;
	for (size_t i = 0; i < r->n; i++) {
		r->v[i].order = i;
		r->v[i].object_rank = i;
		for (size_t j = 0; j < i; j++) {
			if (strcmp(r->v[j].object, r->v[i].object) == 0) {
				r->v[i].object_rank = r->v[j].object_rank;
				break;
			}
		}
	}
	qsort(r->v, r->n, sizeof(*r->v), row_cmp);
}

/* ---- output ---- */

static void print_site_json(struct lk__json *j, const struct row *s)
{
	char name[256];

	lk__json_object_line(j, NULL);
	lk__json_str_or_null(j, "object", s->object);
	if (s->object_type)
		lk__json_str(j, "object_type", s->object_type);
	lk__json_str_or_null(j, "provider", s->provider);
	lk__json_str_or_null(j, "event", s->event);
	lk__json_str(j, "kind", lk__probe_kind_name(s->kind));
	lk__json_str_or_null(j, "file", s->file);
	lk__json_uint(j, "line", s->line);
	lk__json_str_or_null(j, "function", s->function);
	lk__json_array(j, "args");
	for (unsigned int a = 0; a < s->nargs; a++) {
		site_arg_name(s->arg_names, a, name, sizeof(name));
		lk__json_object(j, NULL);
		lk__json_str(j, "name", name);
		lk__json_str(j, "type", arg_type(s, a));
		lk__json_close(j);
	}
	lk__json_close(j);
	if (s->enabled >= 0)
		lk__json_bool(j, "enabled", s->enabled);
	if (s->tracer >= 0)
		lk__json_bool(j, "tracer", s->tracer);
	lk__json_close(j);
}

static void print_foreign_json(struct lk__json *j, const struct foreign *f)
{
	lk__json_object_line(j, NULL);
	lk__json_str_or_null(j, "object", f->object);
	lk__json_str_or_null(j, "provider", f->u.provider);
	lk__json_str_or_null(j, "name", f->u.name);
	lk__json_str_or_null(j, "args", f->u.args);
	lk__json_uint(j, "address", f->u.pc);
	lk__json_bool(j, "semaphore", f->u.has_semaphore);
	lk__json_close(j);
}

static void print_json(const struct rows *r, pid_t pid, const char *source)
{
	struct lk__json j;

	lk__json_begin(&j, stdout, false);
	if (pid) {
		lk__json_int(&j, "pid", pid);
		lk__json_str(&j, "source", source);
	}
	lk__json_array(&j, "sites");
	for (size_t i = 0; i < r->n; i++)
		print_site_json(&j, &r->v[i]);
	lk__json_close(&j);
	if (!pid) {
		lk__json_array(&j, "usdt");
		for (size_t i = 0; i < r->nusdt; i++)
			print_foreign_json(&j, &r->usdt[i]);
		lk__json_close(&j);
	}
	lk__json_end(&j);
}

static void print_args(const struct row *s)
{
	char name[256], shown[4 * sizeof(name)];

	for (unsigned int a = 0; a < s->nargs; a++) {
		site_arg_name(s->arg_names, a, name, sizeof(name));
		printf("%s%s: %s", a ? ", " : "", lk__text_escape(name, shown, sizeof(shown)),
		       arg_type(s, a));
	}
}

static bool same_place(const struct row *a, const struct row *b)
{
	return a->line == b->line && a->kind == b->kind && strcmp(a->object, b->object) == 0 &&
	       strcmp(a->provider, b->provider) == 0 && strcmp(a->event, b->event) == 0 &&
	       strcmp(a->file, b->file) == 0;
}

/*
 * Whether another site is written at the same place: a C++ template's instantiations, which only
 * their function tells apart. Rows are sorted by object, name and line.
 */
static bool shares_its_place(const struct rows *r, size_t i)
{
	for (size_t j = i; j-- > 0 && strcmp(r->v[j].object, r->v[i].object) == 0;)
		if (same_place(&r->v[j], &r->v[i]))
			return true;
	for (size_t j = i + 1; j < r->n && strcmp(r->v[j].object, r->v[i].object) == 0; j++)
		if (same_place(&r->v[j], &r->v[i]))
			return true;
	return false;
}

/* Text a process or its files hold is printed escaped (lk__text_escape): it is theirs to choose. */
static void print_text(const struct rows *r)
{
	int wname = 12, wwhere = 10;
	bool on_column = false, tracer_column = false;
	char buf[1024], shown[4 * sizeof(buf)];

	/* a column where one site's state is known: "?" for the others' */
	for (size_t i = 0; i < r->n; i++) {
		on_column |= r->v[i].enabled >= 0;
		tracer_column |= r->v[i].tracer >= 0;
	}

	for (size_t i = 0; i < r->n; i++) {
		int a = snprintf(buf, sizeof(buf), "%s:%s", r->v[i].provider, r->v[i].event);
		int b = snprintf(buf, sizeof(buf), "%s:%u", r->v[i].file, r->v[i].line);

		wname = a > wname ? (a > 40 ? 40 : a) : wname;
		wwhere = b > wwhere ? (b > 50 ? 50 : b) : wwhere;
	}
	for (size_t i = 0; i < r->n; i++) {
		const struct row *s = &r->v[i];
		size_t count = 0;

		if (i == 0 || strcmp(s->object, r->v[i - 1].object) != 0) {
			for (size_t j = i; j < r->n && strcmp(r->v[j].object, s->object) == 0; j++)
				count++;
			printf("%s%s", i ? "\n" : "",
			       lk__text_escape(s->object, shown, sizeof(shown)));
			if (s->object_type)
				printf(" (%s)", s->object_type);
			printf(": %zu site%s\n", count, count == 1 ? "" : "s");
		}
		snprintf(buf, sizeof(buf), "%s:%s", s->provider, s->event);
		printf("  %-*s  %-10s", wname, lk__text_escape(buf, shown, sizeof(shown)),
		       lk__probe_kind_name(s->kind));
		if (on_column)
			printf("  %-3s", s->enabled < 0 ? "?" : s->enabled ? "on" : "off");
		if (tracer_column)
			printf("  %-6s", s->tracer < 0 ? "?" : s->tracer ? "tracer" : "");
		snprintf(buf, sizeof(buf), "%s:%u", s->file, s->line);
		printf("  %-*s  ", wwhere, lk__text_escape(buf, shown, sizeof(shown)));
		print_args(s);
		if (*s->function && shares_its_place(r, i))
			printf("%sin %s", s->nargs ? "  " : "",
			       lk__text_escape(s->function, shown, sizeof(shown)));
		printf("\n");
	}
}

/* The USDT probes of other providers, an object at a time, after lowkey's sites. */
static void print_foreign(const struct rows *r)
{
	char buf[1024], shown[4 * sizeof(buf)];
	int wname = 12;

	for (size_t i = 0; i < r->nusdt; i++) {
		int a = snprintf(buf, sizeof(buf), "%s:%s", r->usdt[i].u.provider,
				 r->usdt[i].u.name);

		wname = a > wname ? (a > 40 ? 40 : a) : wname;
	}
	for (size_t i = 0; i < r->nusdt; i++) {
		const struct foreign *f = &r->usdt[i];
		size_t count = 0;

		if (i == 0 || strcmp(f->object, r->usdt[i - 1].object) != 0) {
			for (size_t j = i;
			     j < r->nusdt && strcmp(r->usdt[j].object, f->object) == 0; j++)
				count++;
			printf("%s%s", i || r->n ? "\n" : "",
			       lk__text_escape(f->object, shown, sizeof(shown)));
			if (f->object_type)
				printf(" (%s)", f->object_type);
			printf(": %zu USDT probe%s of other providers\n", count,
			       count == 1 ? "" : "s");
		}
		snprintf(buf, sizeof(buf), "%s:%s", f->u.provider, f->u.name);
		printf("  %-*s  0x%-8llx  %-9s  ", wname,
		       lk__text_escape(buf, shown, sizeof(shown)), (unsigned long long)f->u.pc,
		       f->u.has_semaphore ? "semaphore" : "");
		printf("%s\n", *f->u.args ? lk__text_escape(f->u.args, shown, sizeof(shown)) :
					    "(no arguments)");
	}
}

/* ---- from files ---- */

/*
 * The sites of the file at path, or of the one open at fd (>= 0) when path is NULL, shown as shown.
 * mem: the process that maps it as shown, whose memory gives each site's state; NULL for a file
 * named on the command line.
 */
static int rows_from_file(struct rows *r, const char *path, int fd, const char *shown,
			  bool quiet_if_none, const struct proc_mem *mem)
{
	struct probe_elf_sites sites;
	char err[512], name[1024];
	int rc = path ? probe_elf_read_sites(path, &sites, err, sizeof(err)) :
			probe_elf_read_sites_fd(fd, shown, &sites, err, sizeof(err));

	if (rc) {
		if (!quiet_if_none)
			cli_error("list", NULL, "%s", err);
		return rc;
	}
	if (!sites.n && !quiet_if_none && sites.nusdt)
		fprintf(stderr,
			"lowkey list: %s has no lowkey probe sites%s; %zu USDT probe%s of other "
			"providers\n",
			lk__text_escape(shown, name, sizeof(name)),
			sites.has_section ? " of this lowkey version" : "", sites.nusdt,
			sites.nusdt == 1 ? "" : "s");
	else if (!sites.n && !quiet_if_none)
		fprintf(stderr, "lowkey list: %s has no lowkey probe sites%s\n",
			lk__text_escape(shown, name, sizeof(name)),
			sites.has_section ? " of this lowkey version" : "");
	if (sites.skipped && sites.n)
		fprintf(stderr,
			"lowkey list: %s: %u entries are not probe sites of this lowkey version\n",
			lk__text_escape(shown, name, sizeof(name)), sites.skipped);
	for (size_t i = 0; i < sites.n && !rc; i++) {
		const struct probe_elf_site *s = &sites.sites[i];
		struct row row = { (char *)shown, s->provider, s->event, s->file, s->arg_names,
				   s->function,	  sites.type,  s->line,	 s->kind, s->nargs,
				   s->arg_types,  -1,	       -1 };

		if (mem)
			proc_mem_site_state(mem, shown, s, &row.enabled, &row.tracer);
		rc = add_row(r, &row);
	}
	if (!rc && !quiet_if_none) /* a file named, not each object a process maps */
		rc = take_foreign(r, &sites, shown);
	probe_elf_free_sites(&sites);
	return rc;
}

/* ---- from a live process ---- */

/* One message of the process's answer to LIST, into r: 1 when it was the last, 0, or -errno. */
static int take_list_message(struct rows *r, const struct lk__ctl_msg *m, uint32_t seq,
			     const char *exe, size_t *bytes, char *err, size_t errlen)
{
	if (m->type == LK_CTL_RESULT && (m->seq == seq || (m->seq == 0 && m->result.err))) {
		if (m->result.err)
			snprintf(err, errlen, "%s", m->result.message); /* seq 0: refused */
		return m->result.err ? m->result.err : 1;
	}
	if (m->type == LK_CTL_SITE && m->seq == seq) {
		struct row row = { (char *)(*m->site.object ? m->site.object : exe),
				   (char *)m->site.provider,
				   (char *)m->site.event,
				   (char *)m->site.file,
				   (char *)m->site.arg_names,
				   (char *)m->site.function,
				   NULL,
				   m->site.line,
				   m->site.kind,
				   m->site.nargs,
				   m->site.arg_types,
				   m->site.enabled,
				   m->site.tracer };

		*bytes += strlen(row.object) + strlen(row.provider) + strlen(row.event) +
			  strlen(row.file) + strlen(row.arg_names) + strlen(row.function) +
			  sizeof(row);
		if (r->n == MAX_SITES || *bytes > MAX_LIST_BYTES)
			return -E2BIG;
		return add_row(r, &row);
	}
	return 0;
}

/* Over the control socket: 0, or -errno when the process cannot be asked or answers out of bounds. */
static int rows_from_control(struct rows *r, pid_t pid, char *err, size_t errlen)
{
	struct lk__ctl_msg req = { .type = LK_CTL_LIST }, m;
	int64_t deadline = lk__ctl_deadline(LIST_TIMEOUT_MS);
	struct lk__ctl_client c;
	char exe[4096], link[64];
	size_t bytes = 0;
	ssize_t len;
	int rc = lk__ctl_connect(&c, pid, err, errlen);

	if (rc)
		return rc;
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
	len = readlink(link, exe, sizeof(exe) - 1);
	exe[len > 0 ? len : 0] = 0;
	rc = lk__ctl_check(&c, err, errlen); /* the exe read is the connected process's */
	if (!rc)
		rc = lk__ctl_send(&c, &req);
	while (!rc) {
		rc = lk__ctl_recv(&c, &m, lk__ctl_left_ms(deadline), err, errlen);
		if (!rc)
			rc = take_list_message(r, &m, req.seq, exe, &bytes, err, errlen);
	}
	lk__ctl_disconnect(&c);
	if (rc == -E2BIG)
		return lk__failf(
			err, errlen, rc,
			"process %d sent more sites than a lowkey process has (%d, %u MiB at "
			"most): it is not one, or it is broken; not read on",
			(int)pid, MAX_SITES, MAX_LIST_BYTES >> 20);
	if (rc == -ETIMEDOUT)
		return lk__failf(err, errlen, rc, "process %d did not list its sites within %d s",
				 (int)pid, LIST_TIMEOUT_MS / 1000);
	return rc == 1 ? 0 : rc;
}

/* The sites of every object process pid maps, read from their files; their state from mem. */
static int rows_from_maps(struct rows *r, pid_t pid, const struct proc_mem *mem)
{
	char *shown[512];
	int fds[512];
	int n = proc_objects(pid, fds, shown, 512);

	if (n < 0)
		return n;
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0)
			rows_from_file(r, NULL, fds[i], shown[i], true, mem);
	proc_objects_free(fds, shown, n);
	return 0;
}

/* Whether the process's sites may be read from its files instead (it has no socket to ask). */
static bool read_files_instead(int rc)
{
	return rc == -ENOENT || rc == -ENOTCONN || rc == -ECONNREFUSED || rc == -ESTALE ||
	       rc == -EPERM || rc == -EBUSY;
}

static size_t rows_unknown(const struct rows *r)
{
	size_t n = 0;

	for (size_t i = 0; i < r->n; i++)
		n += r->v[i].enabled < 0 || r->v[i].tracer < 0;
	return n;
}

/* What the sites' state comes from, or why it is unknown: into buf. */
static void say_state(const struct proc_mem *mem, const struct rows *r, char *buf, size_t len)
{
	char why[512];
	size_t unknown = rows_unknown(r);

	if (mem->fd < 0) {
		proc_mem_why(mem, why, sizeof(why));
		snprintf(buf, len,
			 "whether each is on, and whether a tracer holds it, is unknown: %s", why);
	} else if (unknown) {
		snprintf(buf, len,
			 "their state from its memory, but for %zu: what it maps there is not what "
			 "the file holds now",
			 unknown);
	} else {
		snprintf(buf, len, "their state from its memory");
	}
}

/* Why the sites come from the files; the control socket's error was rc (err). */
static void say_why_files(pid_t pid, const char *name, const struct rows *r,
			  const struct proc_mem *mem, int rc, const char *err)
{
	char state[1024];

	if (!r->n) {
		fprintf(stderr, "lowkey list: process %d (%s) has no lowkey probe sites%s\n",
			(int)pid, name,
			proc_uses_lowkey(pid) == 1 ? "" : ": it is not linked with liblowkey");
		return;
	}
	say_state(mem, r, state, sizeof(state));
	if (rc == -ENOTCONN || rc == -EBUSY || rc == -EPERM || lk__ctl_asked(pid))
		fprintf(stderr, "lowkey list: %s (sites read from its files; %s)\n", err, state);
	else
		fprintf(stderr,
			"lowkey list: process %d (%s) has no control socket open: sites read from "
			"its files; %s\n",
			(int)pid, name, state);
}

/* Without a control socket: from the files the process maps, and its memory where readable. */
static int rows_from_files_and_memory(struct rows *r, pid_t pid, const char *name, int ctl,
				      const char *err, const char **source)
{
	struct proc_mem mem;
	int rc = proc_mem_open(&mem, pid);

	if (!rc) {
		rc = rows_from_maps(r, pid, &mem);
		if (rc)
			proc_mem_close(&mem);
	}
	if (rc && ctl == -EPERM)
		cli_error("list", NULL, "%s; nor can its mapped files be read", err);
	else if (rc)
		cli_error("list",
			  rc == -EACCES ? "run lowkey as the process's user, or as root" : NULL,
			  "cannot read the mapped files of process %d (%s): %s", (int)pid, name,
			  strerror(-rc));
	if (rc)
		return rc;
	*source = mem.fd >= 0 ? "memory" : "elf";
	say_why_files(pid, name, r, &mem, ctl, err);
	proc_mem_close(&mem);
	return 0;
}

static int list_pid(pid_t pid, bool json)
{
	char err[1024], name[64];
	struct rows r = { 0 };
	const char *source = "control";
	int rc;

	proc_name_of(pid, name, sizeof(name));
	rc = rows_from_control(&r, pid, err, sizeof(err));
	if (rc == -ESRCH) {
		cli_error("list", NULL, "%s",
			  err); /* no such process, or it exited as lowkey waited */
		return CLI_EXIT_FAIL;
	}
	if (rc == -EACCES)
		return cli_pid_denied("list", err);
	if (rc && !read_files_instead(rc)) {
		cli_error("list", NULL, "process %d (%s): %s", (int)pid, name, err);
		free_rows(&r);
		return CLI_EXIT_FAIL;
	}
	if (rc) {
		free_rows(&r);
		memset(&r, 0, sizeof(r));
		if (rows_from_files_and_memory(&r, pid, name, rc, err, &source)) {
			free_rows(&r);
			return CLI_EXIT_FAIL;
		}
	}
	sort_rows(&r);
	if (json)
		print_json(&r, pid, source);
	else
		print_text(&r);
	free_rows(&r);
	return CLI_EXIT_OK;
}

static int list_files(char **files, int n, bool json)
{
	struct rows r = { 0 };
	int failed = 0;

	for (int i = 0; i < n; i++)
		if (rows_from_file(&r, files[i], -1, files[i], false, NULL) != 0)
			failed = 1;
	sort_rows(&r);
	if (json) {
		print_json(&r, 0, NULL);
	} else {
		print_text(&r);
		print_foreign(&r);
	}
	free_rows(&r);
	return failed ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

static int parse_pid(const char *s, pid_t *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v <= 0 || v > 1 << 22)
		return -EINVAL;
	*out = (pid_t)v;
	return 0;
}

static int list_run(int argc, char **argv)
{
	static const struct option options[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	pid_t pid = 0;
	bool json = false;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+p:jh", options, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (parse_pid(optarg, &pid) != 0) {
				cli_error("list", "give a process id, such as $(pidof server)",
					  "bad pid '%s'", optarg);
				return CLI_EXIT_USAGE;
			}
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			fputs(list_usage, stdout);
			return CLI_EXIT_OK;
		default:
			fputs(list_usage, stderr);
			return CLI_EXIT_USAGE;
		}
	}
	if (pid && optind < argc) {
		cli_error("list", NULL, "give either --pid or files, not both");
		return CLI_EXIT_USAGE;
	}
	if (pid)
		return cli_check_pid("list", pid, false) ? CLI_EXIT_FAIL : list_pid(pid, json);
	if (optind == argc)
		return cli_list_events(json);
	return list_files(argv + optind, argc - optind, json);
}

const struct cli_command cmd_list = {
	.name = "list",
	.summary = "list the counter events here, or the probe sites of a program or process",
	.usage = list_usage,
	.run = list_run,
};
