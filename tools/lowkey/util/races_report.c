// SPDX-License-Identifier: MIT
/*
 * The report of `lowkey races`: each race the library recorded (two instructions, folded by the
 * pair), named with libdw -- functions, source lines, both threads' stacks, the global accessed --
 * as text or JSON (which races_html.c makes a page of).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "internal/json.h"
#include "internal/utf8.h"
#include "races.h"
#include "symbolize.h"

/* The entries of a stack: its frames, and the functions inlined in them. */
#define FRAMES_MAX (2 * LKR_STACK_MAX)

/* A frame of a thread's stack, or a function inlined in one, named. */
struct frame {
	uint64_t ip; /* frame 0: the access's instruction; the others: a return address */
	struct symbol_place place;
	bool inlined; /* a function inlined in the next entry, at the same ip */
};

/* One side of a race, named. */
struct side {
	uint64_t ip; /* the instruction; for the other side, the one after it when not decoded */
	uint32_t tid;
	const char *access;
	unsigned int size; /* 0: not known */
	bool atomic;
	struct symbol_place place;
	bool line_before;   /* ip is the instruction after the access (not decoded) */
	unsigned int depth; /* entries of its stack: 0 when none was taken */
	struct frame stack[FRAMES_MAX];
};

static const char *access_name(unsigned int access)
{
	switch (access) {
	case LKR_READ:
		return "read";
	case LKR_WRITE:
		return "write";
	case LKR_READ | LKR_WRITE:
		return "read-write";
	default:
		return "access";
	}
}

static void place_of(struct symbolizer *sym, uint64_t addr, bool line_before,
		     struct symbol_place *out)
{
	if (sym)
		symbolizer_place(sym, addr, line_before, out);
	else
		memset(out, 0, sizeof(*out));
}

/*
 * The thread's stack, depth return addresses, each frame with the functions inlined at its
 * address: frame 0 is the side's access, named at the side's address; the callers by the line of
 * their call (the byte before the return address). A depth the library cannot have written is no
 * stack. Entries past FRAMES_MAX are left out.
 */
static void name_stack(struct symbolizer *sym, const uint64_t *pcs, unsigned int depth,
		       struct side *s)
{
	struct symbol_place places[FRAMES_MAX];

	s->depth = 0;
	if (depth > LKR_STACK_MAX || !sym)
		return;
	for (unsigned int i = 0; i < depth && s->depth < FRAMES_MAX; i++) {
		uint64_t ip = i ? pcs[i] : s->ip;
		size_t n = symbolizer_frames(sym, ip, i ? true : s->line_before, places,
					     FRAMES_MAX - s->depth);

		for (size_t k = 0; k < n; k++)
			s->stack[s->depth++] = (struct frame){ ip, places[k], k + 1 < n };
	}
}

static void sampled_side(struct symbolizer *sym, const struct lkr_race *r, struct side *s)
{
	memset(s, 0, sizeof(*s));
	s->ip = r->sample_ip;
	s->tid = r->sample_tid;
	s->access = access_name(r->access);
	s->size = r->size;
	place_of(sym, r->sample_ip, false, &s->place);
	name_stack(sym, r->sample_stack, r->sample_depth, s);
}

/*
 * The other thread's side: the watchpoint reports the instruction after the access; in the
 * program, the decoded instruction that ends there says what the access was.
 */
static void other_side(struct symbolizer *sym, const struct lkr_race *r,
		       const struct races_code *code, const struct lkr_header *h, struct side *s)
{
	const struct lkr_object *objects = lkr_objects((struct lkr_header *)h);
	const struct races_insn *in = NULL;
	uint32_t i;

	memset(s, 0, sizeof(*s));
	s->ip = r->other_ip;
	s->tid = r->other_tid;
	s->line_before = true;
	place_of(sym, r->other_ip, true, &s->place);
	for (i = 0; s->place.module && !in && i < h->nobjects; i++)
		if (objects[i].loaded && r->other_ip > objects[i].bias)
			in = races_insn_ending(code, (uint8_t)i, r->other_ip - objects[i].bias);
	if (in) {
		/* named as the held one is: by its own address */
		s->ip = in->plan.vaddr + objects[in->plan.object].bias;
		s->line_before = false;
		place_of(sym, s->ip, false, &s->place);
		s->access = access_name(in->plan.access);
		s->size = in->plan.size;
		s->atomic = in->atomic;
	} else {
		s->access = r->other_write ? "write" : "access";
	}
	name_stack(sym, r->other_stack, r->other_depth, s);
}

static const char *basename_of(const char *path)
{
	const char *slash = path ? strrchr(path, '/') : NULL;

	return slash ? slash + 1 : path;
}

/*
 * "function+0x12 (file.c:34)", or "function (inlined) (file.c:34)", escaped: the names come from
 * the program's files.
 */
static const char *where(uint64_t ip, const struct symbol_place *place, bool inlined, char *buf,
			 size_t len)
{
	char raw[1024];
	int n;

	if (place->function && inlined)
		n = snprintf(raw, sizeof(raw), "%s (inlined)", place->function);
	else if (place->function)
		n = snprintf(raw, sizeof(raw), "%s+%#" PRIx64, place->function, place->offset);
	else
		n = snprintf(raw, sizeof(raw), "%#" PRIx64, ip);
	if (place->file && n > 0 && (size_t)n < sizeof(raw))
		snprintf(raw + n, sizeof(raw) - (size_t)n, " (%s:%d)", basename_of(place->file),
			 place->line);
	else if (!place->function && place->module && n > 0 && (size_t)n < sizeof(raw))
		snprintf(raw + n, sizeof(raw) - (size_t)n, " (%s)", basename_of(place->module));
	return lk__text_escape(raw, buf, len);
}

static void print_side_text(FILE *out, const char *role, const struct side *s)
{
	char buf[2048], size[32] = "";

	if (s->size)
		snprintf(size, sizeof(size), " of %u byte%s", s->size, s->size == 1 ? "" : "s");
	fprintf(out, "  %-9s %s%s%s by thread %u at %s\n", role, s->access, size,
		s->atomic ? " (atomic)" : "", s->tid,
		where(s->ip, &s->place, false, buf, sizeof(buf)));
	for (unsigned int i = 0; i < s->depth; i++)
		fprintf(out, "    #%-2u %s\n", i,
			where(s->stack[i].ip, &s->stack[i].place, s->stack[i].inlined, buf,
			      sizeof(buf)));
}

static void print_race_text(FILE *out, size_t nr, const struct lkr_race *r,
			    const struct symbol_place *global, const struct side *a,
			    const struct side *b)
{
	char name[1024], raw[512];

	if (global->function) {
		if (global->offset)
			snprintf(raw, sizeof(raw), "%s+%#" PRIx64, global->function,
				 global->offset);
		else
			snprintf(raw, sizeof(raw), "%s", global->function);
		lk__text_escape(raw, name, sizeof(name));
	} else {
		snprintf(name, sizeof(name), "heap or stack");
	}
	fprintf(out, "\nrace %zu: %s, %u byte%s at %#" PRIx64 "\n", nr, name, r->size,
		r->size == 1 ? "" : "s", r->addr);
	print_side_text(out, "held:", a);
	if (r->other_ip) {
		print_side_text(out, "meanwhile", b);
		fprintf(out, "  caught %" PRIu64 " time%s in %" PRIu64 " window%s\n", r->hits,
			r->hits == 1 ? "" : "s", r->windows, r->windows == 1 ? "" : "s");
	} else {
		fprintf(out,
			"  meanwhile the value changed (%#" PRIx64 " -> %#" PRIx64
			") and no access was "
			"caught: a write the watchpoint cannot see (the kernel's, or a thread it does not "
			"cover), in %" PRIu64 " window%s\n",
			r->before, r->after, r->windows, r->windows == 1 ? "" : "s");
	}
}

/* A place's names: function (demangled) and the symbol as mangled, offset, file, line. */
static void json_place(struct lk__json *j, const struct symbol_place *place)
{
	lk__json_str_or_null(j, "function", place->function);
	lk__json_str_or_null(j, "mangled", place->mangled);
	lk__json_uint(j, "offset", place->offset);
	lk__json_str_or_null(j, "file", place->file);
	lk__json_int(j, "line", place->line);
}

static void json_stack(struct lk__json *j, const struct side *s)
{
	lk__json_array(j, "stack");
	for (unsigned int i = 0; i < s->depth; i++) {
		lk__json_object_line(j, NULL);
		lk__json_strf(j, "ip", "%#" PRIx64, s->stack[i].ip);
		json_place(j, &s->stack[i].place);
		lk__json_bool(j, "inlined", s->stack[i].inlined);
		lk__json_str_or_null(j, "module", s->stack[i].place.module);
		lk__json_close(j);
	}
	lk__json_close(j);
}

static void json_side(struct lk__json *j, const char *key, const struct side *s)
{
	lk__json_object(j, key);
	lk__json_uint(j, "tid", s->tid);
	lk__json_str(j, "access", s->access);
	if (s->size)
		lk__json_uint(j, "size", s->size);
	else
		lk__json_null(j, "size");
	lk__json_bool(j, "atomic", s->atomic);
	lk__json_strf(j, "ip", "%#" PRIx64, s->ip);
	json_place(j, &s->place);
	json_stack(j, s);
	lk__json_close(j);
}

static void json_race(struct lk__json *j, const struct lkr_race *r,
		      const struct symbol_place *global, const struct side *a, const struct side *b)
{
	lk__json_object(j, NULL);
	lk__json_strf(j, "addr", "%#" PRIx64, r->addr);
	lk__json_str_or_null(j, "symbol", global->function);
	lk__json_str_or_null(j, "symbol_mangled", global->mangled);
	lk__json_uint(j, "symbol_offset", global->offset);
	lk__json_uint(j, "size", r->size);
	lk__json_uint(j, "windows", r->windows);
	lk__json_uint(j, "hits", r->hits);
	json_side(j, "held", a);
	if (r->other_ip) {
		json_side(j, "other", b);
	} else {
		lk__json_null(j, "other");
		lk__json_strf(j, "before", "%#" PRIx64, r->before);
		lk__json_strf(j, "after", "%#" PRIx64, r->after);
	}
	lk__json_close(j);
}

static void json_head(struct lk__json *j, const struct lkr_header *h, const struct races_code *code,
		      const struct races_run *run)
{
	lk__json_str(j, "command", run->command);
	lk__json_uint(j, "seed", run->seed);
	lk__json_num(j, "rate", run->rate);
	lk__json_num(j, "window_ms", run->window_ms);
	lk__json_object(j, "instructions");
	lk__json_uint(j, "decoded", code->n);
	lk__json_uint(j, "sampled", code->sampled);
	lk__json_uint(j, "atomic", code->atomic);
	lk__json_uint(j, "atomic_c11", code->atomic_debug[RACES_ATOMIC_C11]);
	lk__json_uint(j, "atomic_std", code->atomic_debug[RACES_ATOMIC_STD]);
	lk__json_uint(j, "sig_atomic", code->atomic_debug[RACES_ATOMIC_SIG]);
	lk__json_uint(j, "atomic_metadata", code->atomic_debug[RACES_ATOMIC_METADATA]);
	lk__json_uint(j, "covered", code->covered);
	lk__json_uint(j, "stack", code->stack);
	lk__json_close(j);
	lk__json_uint(j, "armed", h->picks);
	lk__json_uint(j, "reached", h->samples);
	lk__json_uint(j, "misaligned", h->misaligned);
	lk__json_uint(j, "dropped", h->races_dropped);
	lk__json_uint(j, "suppressed", run->suppressed);
	lk__json_object(j, "callbacks");
	lk__json_uint(j, "held_ns", h->held_ns);
	lk__json_uint(j, "kept", h->kept);
	lk__json_uint(j, "kept_ns", h->kept_ns);
	lk__json_close(j);
	lk__json_str_or_null(j, "error", h->error[0] ? h->error : NULL);
	if (run->attached)
		lk__json_null(j, "exit_status");
	else if (WIFEXITED(run->status))
		lk__json_int(j, "exit_status", WEXITSTATUS(run->status));
	else
		lk__json_int(j, "exit_status", 128 + WTERMSIG(run->status));
}

static void print_head_text(FILE *out, const struct lkr_header *h, size_t n,
			    const struct races_code *code, const struct races_run *run)
{
	char cmd[1024];

	fprintf(out,
		"lowkey races: %zu race%s in %s: %" PRIu64 " windows, %" PRIu64
		" instructions armed of the %zu sampled (seed %" PRIu64 ")\n",
		n, n == 1 ? "" : "s", lk__text_escape(run->command, cmd, sizeof(cmd)), h->samples,
		h->picks, code->sampled, run->seed);
	if (run->suppressed)
		fprintf(out, "lowkey races: %zu more race%s suppressed\n", run->suppressed,
			run->suppressed == 1 ? "" : "s");
	if (h->races_dropped)
		fprintf(out, "lowkey races: %" PRIu64 " more races had no room to be recorded\n",
			h->races_dropped);
}

/* One race, named: both sides and the global. */
struct named_race {
	const struct lkr_race *r;
	struct symbol_place global;
	struct side a, b;
	bool suppressed;
};

static struct races_names names_of(const struct symbol_place *place)
{
	return (struct races_names){ place->function, place->mangled, place->file, place->module };
}

/*
 * The frames a suppression sees of one access: its stack as printed, or where none was taken
 * (--stack 0, or the unwinder could not reach the trapped frame) the access itself with the
 * functions inlined there, which its address alone tells.
 */
static size_t access_names(struct symbolizer *sym, const struct side *s,
			   struct races_names out[FRAMES_MAX])
{
	struct symbol_place places[FRAMES_MAX];
	size_t n;

	if (s->depth) {
		for (unsigned int i = 0; i < s->depth; i++)
			out[i] = names_of(&s->stack[i].place);
		return s->depth;
	}
	if (!sym) {
		out[0] = names_of(&s->place);
		return 1;
	}
	n = symbolizer_frames(sym, s->ip, s->line_before, places, FRAMES_MAX);
	for (size_t i = 0; i < n; i++)
		out[i] = names_of(&places[i]);
	return n;
}

static bool race_suppressed(struct symbolizer *sym, const struct races_suppressions *s,
			    const struct named_race *nr)
{
	struct races_names frames[2][FRAMES_MAX], global = names_of(&nr->global);
	struct races_access_names accesses[2];
	size_t n = nr->r->other_ip ? 2 : 1;

	if (!s || !s->n)
		return false;
	accesses[0] =
		(struct races_access_names){ frames[0], access_names(sym, &nr->a, frames[0]) };
	if (n == 2)
		accesses[1] = (struct races_access_names){ frames[1],
							   access_names(sym, &nr->b, frames[1]) };
	global.file = NULL; /* where the global is defined: TSan does not match it */
	return races_race_suppressed(s, accesses, n, &global, 1);
}

static void name_race(struct symbolizer *sym, const struct lkr_race *r,
		      const struct races_code *code, const struct lkr_header *h,
		      const struct races_run *run, struct named_race *nr)
{
	memset(nr, 0, sizeof(*nr));
	nr->r = r;
	place_of(sym, r->addr, false, &nr->global);
	sampled_side(sym, r, &nr->a);
	other_side(sym, r, code, h, &nr->b);
	nr->suppressed = race_suppressed(sym, run->suppressions, nr);
}

/* Whether a plan's object was loaded at bias: the module listed there is that one. */
static bool in_plan(const struct lkr_header *h, uint64_t bias)
{
	const struct lkr_object *objects = lkr_objects((struct lkr_header *)h);

	for (uint32_t i = 0; i < h->nobjects && i < LKR_OBJECTS_MAX; i++)
		if (objects[i].loaded && objects[i].bias == bias)
			return true;
	return false;
}

/*
 * The plan's objects, and the other objects the program had loaded (the library listed them), for
 * the frames of the stacks in libc and the libraries not sampled. A path the program wrote without
 * its NUL is left out.
 */
static struct symbolizer *open_objects(struct lkr_header *h, const struct races_run *run)
{
	struct symbol_object objs[LKR_OBJECTS_MAX + LKR_MODULES_MAX];
	const struct lkr_object *objects = lkr_objects(h);
	const struct lkr_module *modules = lkr_modules(h);
	uint32_t nmodules = h->nmodules < LKR_MODULES_MAX ? h->nmodules : LKR_MODULES_MAX;
	size_t nobjs = 0;

	for (uint32_t i = 0; i < h->nobjects && i < LKR_OBJECTS_MAX; i++)
		if (objects[i].loaded)
			objs[nobjs++] = (struct symbol_object){ .path = run->paths[i],
								.bias = objects[i].bias };
	for (uint32_t i = 0; i < nmodules; i++)
		if (memchr(modules[i].path, 0, LKR_PATH_MAX) && !in_plan(h, modules[i].bias))
			objs[nobjs++] = (struct symbol_object){ .path = modules[i].path,
								.bias = modules[i].bias };
	return symbolizer_open_objects(objs, nobjs);
}

size_t races_report(FILE *out, struct lkr_header *h, const struct races_code *code,
		    struct races_run *run, bool json)
{
	uint64_t n = __atomic_load_n(&h->races_used, __ATOMIC_ACQUIRE);
	struct lkr_race *races = lkr_races(h);
	struct named_race *named;
	struct symbolizer *sym;
	size_t shown = 0, nr = 0;
	struct lk__json j;

	if (n > h->max_races)
		n = h->max_races;
	named = calloc(n ? n : 1, sizeof(*named));
	sym = open_objects(h, run);
	run->suppressed = 0;
	for (uint64_t i = 0; named && i < n; i++) {
		name_race(sym, &races[i], code, h, run, &named[i]);
		run->suppressed += named[i].suppressed;
	}
	if (!named) {
		fprintf(out, "lowkey races: %" PRIu64 " races found; out of memory to name them\n",
			n);
		symbolizer_close(sym);
		return (size_t)n;
	}
	shown = (size_t)n - run->suppressed;
	if (json) {
		lk__json_begin(&j, out, false);
		json_head(&j, h, code, run);
		lk__json_array(&j, "races");
	} else {
		print_head_text(out, h, shown, code, run);
	}
	for (uint64_t i = 0; i < n; i++) {
		struct named_race *r = &named[i];

		if (r->suppressed)
			continue;
		if (json)
			json_race(&j, r->r, &r->global, &r->a, &r->b);
		else
			print_race_text(out, ++nr, r->r, &r->global, &r->a, &r->b);
	}
	if (json) {
		lk__json_close(&j);
		lk__json_end(&j);
	}
	symbolizer_close(sym);
	free(named);
	return shown;
}
