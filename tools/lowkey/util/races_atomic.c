// SPDX-License-Identifier: MIT
/*
 * Atomics the instruction does not show: on x86-64 an atomic load, and a relaxed or release
 * atomic store, are plain movs. The debug information says where they are, in two ways:
 *
 * - the variable an instruction addresses directly (rip-relative: a global, a static), from the
 *   DW_TAG_variable whose location is its address, and the member of its type at the offset
 *   accessed: an _Atomic type (DW_TAG_atomic_type), a class std::atomic<T> (and libstdc++'s and
 *   libc++'s classes that implement it), or a volatile sig_atomic_t;
 * - the function the instruction is in, inlined or not: a member function of those classes, or
 *   libc++'s __cxx_atomic_* functions, which access only the atomic value (through a pointer too,
 *   where the first way cannot tell which variable it is).
 *
 * Read with libdw through the CLI's symbolizer: from the object's own file (read, never mapped),
 * or from its separate debug file, found by build-id or debuglink as the symbolizer finds it.
 */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "races.h"
#include "symbolize.h"

#define TYPE_DEPTH_MAX 64 /* typedefs, qualifiers, members and arrays followed at most */
#define DIE_DEPTH_MAX 256

/* A global or static variable: where it is and its type. */
struct variable {
	uint64_t addr, size;
	Dwarf_Die type;
};

/* Code of a function that accesses atomics only (ELF addresses, end excluded). */
struct code_range {
	uint64_t start, end;
};

struct debug_info {
	struct variable *vars;
	size_t nvars, vars_cap;
	struct code_range *ranges;
	size_t nranges, ranges_cap;
	int err; /* -ENOMEM once an allocation failed */
};

/* The classes of the C++ library that hold an atomic value, in namespace std. */
static const char *const atomic_classes[] = {
	"atomic",	"__atomic_base",     "__atomic_float",
	"__atomic_ref", "atomic_ref",	     "__atomic_flag_base",
	"atomic_flag",	"__cxx_atomic_impl", "__cxx_atomic_base_impl",
};

static bool atomic_class_name(const char *name, size_t len)
{
	for (size_t i = 0; i < sizeof(atomic_classes) / sizeof(atomic_classes[0]); i++)
		if (strlen(atomic_classes[i]) == len && memcmp(atomic_classes[i], name, len) == 0)
			return true;
	return false;
}

/*
 * Whether a mangled name is a member of std's atomic classes, or one of libc++'s __cxx_atomic_*
 * functions: _ZN [qualifiers] St [3__1] <length><name> then I (template arguments) or, for a
 * function, anything.
 */
static bool atomic_function(const char *mangled)
{
	const char *p = mangled;
	char *end;
	unsigned long len;

	if (strncmp(p, "_ZN", 3) != 0)
		return false;
	p += 3;
	while (*p == 'r' || *p == 'V' || *p == 'K' || *p == 'R' || *p == 'O')
		p++;
	if (strncmp(p, "St", 2) != 0)
		return false;
	p += 2;
	if (strncmp(p, "3__1", 4) == 0) /* libc++'s inline namespace */
		p += 4;
	len = strtoul(p, &end, 10);
	if (end == p || len == 0 || strnlen(end, len) < len)
		return false;
	if (len > 13 && strncmp(end, "__cxx_atomic_", 13) == 0)
		return true;
	return end[len] == 'I' && atomic_class_name(end, len);
}

/* The DIE's DW_AT_type, following DW_AT_abstract_origin and DW_AT_specification. */
static bool type_of(Dwarf_Die *die, Dwarf_Die *type)
{
	Dwarf_Attribute at;

	return dwarf_attr_integrate(die, DW_AT_type, &at) && dwarf_formref_die(&at, type);
}

/* Whether a class DIE is directly in namespace std (or libc++'s std::__1). */
static bool in_std(Dwarf_Die *die)
{
	Dwarf_Die *scopes = NULL;
	int n = dwarf_getscopes_die(die, &scopes);
	bool std = false;

	/* scopes[0] is the DIE itself, then what contains it, out to the unit */
	for (int i = 1; i < n && !std; i++) {
		const char *name = dwarf_diename(&scopes[i]);

		if (dwarf_tag(&scopes[i]) != DW_TAG_namespace || !name)
			break;
		std = strcmp(name, "std") == 0;
		if (!std && strcmp(name, "__1") != 0)
			break;
	}
	free(scopes);
	return std;
}

static bool std_atomic_class(Dwarf_Die *die)
{
	const char *name = dwarf_diename(die), *angle;

	if (!name || !(angle = strchr(name, '<')))
		return false;
	return atomic_class_name(name, (size_t)(angle - name)) && in_std(die);
}

/* The member (or base class) of a struct, class or union that holds byte *off; false if none. */
static bool member_at(Dwarf_Die *aggregate, uint64_t *off, Dwarf_Die *type)
{
	Dwarf_Die child;
	int more = dwarf_child(aggregate, &child);

	for (; more == 0; more = dwarf_siblingof(&child, &child)) {
		Dwarf_Attribute at;
		Dwarf_Word loc = 0, size;
		int tag = dwarf_tag(&child);

		if (tag != DW_TAG_member && tag != DW_TAG_inheritance)
			continue;
		if (dwarf_hasattr(&child, DW_AT_bit_size) ||
		    dwarf_hasattr(&child, DW_AT_data_bit_offset))
			continue; /* a bitfield: never atomic */
		if (dwarf_attr(&child, DW_AT_data_member_location, &at) &&
		    dwarf_formudata(&at, &loc) != 0)
			continue; /* a location expression: a virtual base */
		if (!type_of(&child, type) || dwarf_aggregate_size(type, &size) != 0)
			continue;
		if (*off >= loc && *off - loc < size) {
			*off -= loc;
			return true;
		}
	}
	return false;
}

/* What the bytes at off of a variable of type are, as far as atomicity goes. */
static enum races_atomic_kind kind_at(Dwarf_Die *type, uint64_t off)
{
	Dwarf_Die t = *type, next;
	Dwarf_Word size;
	bool is_volatile = false;

	for (int depth = 0; depth < TYPE_DEPTH_MAX; depth++, t = next) {
		const char *name;

		switch (dwarf_tag(&t)) {
		case DW_TAG_atomic_type:
			return RACES_ATOMIC_C11;
		case DW_TAG_volatile_type:
			is_volatile = true;
			/* fall through */
		case DW_TAG_const_type:
		case DW_TAG_restrict_type:
			if (!type_of(&t, &next))
				return RACES_NOT_ATOMIC;
			break;
		case DW_TAG_typedef:
			name = dwarf_diename(&t);
			if (is_volatile && name && strcmp(name, "sig_atomic_t") == 0)
				return RACES_ATOMIC_SIG;
			if (!type_of(&t, &next))
				return RACES_NOT_ATOMIC;
			break;
		case DW_TAG_structure_type:
		case DW_TAG_class_type:
		case DW_TAG_union_type:
			if (std_atomic_class(&t))
				return RACES_ATOMIC_STD;
			if (!member_at(&t, &off, &next))
				return RACES_NOT_ATOMIC;
			break;
		case DW_TAG_array_type:
			if (!type_of(&t, &next) || dwarf_aggregate_size(&next, &size) != 0 || !size)
				return RACES_NOT_ATOMIC;
			off %= size;
			break;
		default:
			return RACES_NOT_ATOMIC;
		}
	}
	return RACES_NOT_ATOMIC;
}

/* ---- collecting the variables and the atomic functions ---- */

static bool grow(void **p, size_t *cap, size_t n, size_t elem)
{
	void *bigger;

	if (n < *cap)
		return true;
	bigger = realloc(*p, (*cap ? *cap * 2 : 256) * elem);
	if (!bigger)
		return false;
	*p = bigger;
	*cap = *cap ? *cap * 2 : 256;
	return true;
}

/* A variable's static address: its location is DW_OP_addr or DW_OP_addrx alone. */
static bool static_address(Dwarf_Die *die, uint64_t *addr)
{
	Dwarf_Attribute at, result;
	Dwarf_Op *ops;
	size_t nops;
	Dwarf_Addr a;

	if (!dwarf_attr(die, DW_AT_location, &at) || dwarf_getlocation(&at, &ops, &nops) != 0 ||
	    nops != 1)
		return false;
	if (ops[0].atom == DW_OP_addr) {
		*addr = ops[0].number;
		return true;
	}
	if ((ops[0].atom == DW_OP_addrx || ops[0].atom == DW_OP_GNU_addr_index) &&
	    dwarf_getlocation_attr(&at, &ops[0], &result) == 0 &&
	    dwarf_formaddr(&result, &a) == 0) {
		*addr = a;
		return true;
	}
	return false;
}

static void add_variable(struct debug_info *d, Dwarf_Die *die)
{
	struct variable v;

	if (!static_address(die, &v.addr) || !type_of(die, &v.type) ||
	    dwarf_aggregate_size(&v.type, &v.size) != 0 || !v.size)
		return;
	if (!grow((void **)&d->vars, &d->vars_cap, d->nvars, sizeof(v))) {
		d->err = -ENOMEM;
		return;
	}
	d->vars[d->nvars++] = v;
}

static void add_function(struct debug_info *d, Dwarf_Die *die)
{
	Dwarf_Attribute at;
	Dwarf_Addr base, start, end;
	ptrdiff_t off = 0;
	const char *mangled;

	if (!dwarf_attr_integrate(die, DW_AT_linkage_name, &at) &&
	    !dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &at))
		return;
	mangled = dwarf_formstring(&at);
	if (!mangled || !atomic_function(mangled))
		return;
	while ((off = dwarf_ranges(die, off, &base, &start, &end)) > 0) {
		if (!grow((void **)&d->ranges, &d->ranges_cap, d->nranges, sizeof(*d->ranges))) {
			d->err = -ENOMEM;
			return;
		}
		d->ranges[d->nranges++] = (struct code_range){ start, end };
	}
}

static void walk(struct debug_info *d, Dwarf_Die *die, int depth)
{
	Dwarf_Die child;

	if (depth > DIE_DEPTH_MAX)
		return;
	switch (dwarf_tag(die)) {
	case DW_TAG_variable:
		add_variable(d, die);
		break;
	case DW_TAG_subprogram:
	case DW_TAG_inlined_subroutine:
		add_function(d, die);
		break;
	default:
		break;
	}
	if (dwarf_child(die, &child) != 0)
		return;
	do
		walk(d, &child, depth + 1);
	while (!d->err && dwarf_siblingof(&child, &child) == 0);
}

static int by_addr(const void *a, const void *b)
{
	const struct variable *x = a, *y = b;

	return (x->addr > y->addr) - (x->addr < y->addr);
}

static int by_start(const void *a, const void *b)
{
	const struct code_range *x = a, *y = b;

	return (x->start > y->start) - (x->start < y->start);
}

/* The ranges sorted and merged where they overlap (inlined code nests): disjoint, by address. */
static void merge_ranges(struct debug_info *d)
{
	size_t n = 0;

	if (d->nranges < 2)
		return;
	qsort(d->ranges, d->nranges, sizeof(*d->ranges), by_start);
	for (size_t i = 1; i < d->nranges; i++) {
		if (d->ranges[i].start <= d->ranges[n].end) {
			if (d->ranges[i].end > d->ranges[n].end)
				d->ranges[n].end = d->ranges[i].end;
		} else {
			d->ranges[++n] = d->ranges[i];
		}
	}
	d->nranges = n + 1;
}

static void collect(struct debug_info *d, Dwarf *dw)
{
	Dwarf_CU *cu = NULL;
	Dwarf_Die cudie;
	uint8_t unit_type;

	while (!d->err && dwarf_get_units(dw, cu, &cu, NULL, &unit_type, &cudie, NULL) == 0)
		walk(d, &cudie, 0);
	if (d->nvars > 1)
		qsort(d->vars, d->nvars, sizeof(*d->vars), by_addr);
	merge_ranges(d);
}

/* The variable that holds [addr, addr + size), or NULL. */
static struct variable *variable_at(const struct debug_info *d, uint64_t addr, uint64_t size)
{
	size_t lo = 0, hi = d->nvars;

	while (lo < hi) { /* the last variable that starts at or before addr */
		size_t mid = lo + (hi - lo) / 2;

		if (d->vars[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; i-- > 0 && d->vars[i].addr + d->vars[i].size > addr;)
		if (addr + size <= d->vars[i].addr + d->vars[i].size)
			return &d->vars[i];
	return NULL;
}

static bool in_atomic_function(const struct debug_info *d, uint64_t addr)
{
	size_t lo = 0, hi = d->nranges;

	while (lo < hi) { /* the first range that ends after addr */
		size_t mid = lo + (hi - lo) / 2;

		if (d->ranges[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < d->nranges && d->ranges[lo].start <= addr;
}

static enum races_atomic_kind kind_of(const struct debug_info *d, const struct lkr_insn *in)
{
	struct variable *v;

	if (in_atomic_function(d, in->vaddr))
		return RACES_ATOMIC_STD;
	if (in->base != LKR_REG_RIP || in->index != LKR_REG_NONE)
		return RACES_NOT_ATOMIC;
	v = variable_at(d, (uint64_t)in->disp, in->size);
	return v ? kind_at(&v->type, (uint64_t)in->disp - v->addr) : RACES_NOT_ATOMIC;
}

static void mark(const struct debug_info *d, uint8_t object, struct races_code *code)
{
	for (size_t i = 0; i < code->n; i++) {
		struct races_insn *ri = &code->insns[i];

		if (ri->plan.object != object || ri->atomic || ri->covered ||
		    ri->atomic_kind != RACES_NOT_ATOMIC)
			continue;
		ri->atomic_kind = kind_of(d, &ri->plan);
		if (ri->atomic_kind == RACES_NOT_ATOMIC)
			continue;
		code->atomic_debug[ri->atomic_kind]++;
		if (ri->sampled) {
			ri->sampled = false;
			code->sampled--;
		}
	}
}

/* The first instruction of object in code: an address the symbolizer knows it by. */
static const struct races_insn *first_of(const struct races_code *code, uint8_t object)
{
	for (size_t i = 0; i < code->n; i++)
		if (code->insns[i].plan.object == object)
			return &code->insns[i];
	return NULL;
}

int races_mark_atomics(const char *path, uint8_t object, struct races_code *code, char *err,
		       size_t errlen)
{
	struct symbol_object obj = { .path = path };
	const struct races_insn *first = first_of(code, object);
	struct debug_info d = { 0 };
	struct symbolizer *s;
	uint64_t bias;
	Dwarf *dw;

	if (!first)
		return 0;
	s = symbolizer_open_objects(&obj, 1);
	if (!s) {
		snprintf(err, errlen, "cannot read the debug information of %s (libdw)", path);
		return -ENOMEM;
	}
	dw = symbolizer_dwarf(s, first->plan.vaddr, &bias);
	/* Loaded at 0, as the plan's addresses are ELF ones: a separate file has the same. */
	if (dw && bias == 0) {
		collect(&d, dw);
		if (!d.err)
			mark(&d, object, code);
	}
	symbolizer_close(s);
	free(d.vars);
	free(d.ranges);
	if (d.err)
		snprintf(err, errlen, "out of memory reading the debug information of %s", path);
	return d.err;
}
