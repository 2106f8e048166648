// SPDX-License-Identifier: MIT
/*
 * The instructions `lowkey races` may sample: every executable section of the program decoded
 * with Capstone, and of its instructions those that access memory through one explicit operand
 * whose address the library can compute from the trapped thread's registers (races.h).
 */
#include <capstone/capstone.h>
#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/ucontext.h>
#include <unistd.h>

#include "probe_elf.h"
#include "races.h"

#define SECTION_MAX (256u << 20) /* bytes of one section decoded at most */

/* Capstone's 64-bit general register as ucontext_t's gregs index, or LKR_REG_NONE. */
static uint8_t greg_of(x86_reg reg)
{
	static const struct {
		x86_reg reg;
		uint8_t greg;
	} map[] = {
		{ X86_REG_R8, REG_R8 },	  { X86_REG_R9, REG_R9 },   { X86_REG_R10, REG_R10 },
		{ X86_REG_R11, REG_R11 }, { X86_REG_R12, REG_R12 }, { X86_REG_R13, REG_R13 },
		{ X86_REG_R14, REG_R14 }, { X86_REG_R15, REG_R15 }, { X86_REG_RDI, REG_RDI },
		{ X86_REG_RSI, REG_RSI }, { X86_REG_RBP, REG_RBP }, { X86_REG_RBX, REG_RBX },
		{ X86_REG_RDX, REG_RDX }, { X86_REG_RAX, REG_RAX }, { X86_REG_RCX, REG_RCX },
		{ X86_REG_RSP, REG_RSP }, { X86_REG_RIP, REG_RIP },
	};

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (map[i].reg == reg)
			return map[i].greg;
	return LKR_REG_NONE;
}

static bool string_op(unsigned int id)
{
	switch (id) {
	case X86_INS_STOSB:
	case X86_INS_STOSW:
	case X86_INS_STOSD:
	case X86_INS_STOSQ:
	case X86_INS_LODSB:
	case X86_INS_LODSW:
	case X86_INS_LODSD:
	case X86_INS_LODSQ:
	case X86_INS_SCASB:
	case X86_INS_SCASW:
	case X86_INS_SCASD:
	case X86_INS_SCASQ:
		return true;
	default:
		return false;
	}
}

/* Instructions whose memory operand is not an access, or not the program's data. */
static bool no_data_access(csh cs, const cs_insn *insn)
{
	switch (insn->id) {
	case X86_INS_LEA:
	case X86_INS_NOP:
	case X86_INS_PREFETCH:
	case X86_INS_PREFETCHNTA:
	case X86_INS_PREFETCHT0:
	case X86_INS_PREFETCHT1:
	case X86_INS_PREFETCHT2:
	case X86_INS_PREFETCHW:
	case X86_INS_CLFLUSH:
	case X86_INS_CLFLUSHOPT:
		return true;
	default:
		return cs_insn_group(cs, insn, CS_GRP_JUMP) ||
		       cs_insn_group(cs, insn, CS_GRP_CALL) ||
		       cs_insn_group(cs, insn, CS_GRP_RET) || cs_insn_group(cs, insn, CS_GRP_INT) ||
		       string_op(insn->id);
	}
}

/* Atomic as the CPU does it: the lock prefix, or xchg with memory (implicitly locked). */
static bool atomic_op(const cs_insn *insn)
{
	const cs_x86 *x = &insn->detail->x86;

	return x->prefix[0] == X86_PREFIX_LOCK || insn->id == X86_INS_XCHG ||
	       insn->id == X86_INS_CMPXCHG || insn->id == X86_INS_CMPXCHG8B ||
	       insn->id == X86_INS_CMPXCHG16B || insn->id == X86_INS_XADD;
}

static int grow(struct races_code *code, size_t *cap)
{
	struct races_insn *p;

	if (code->n < *cap)
		return 0;
	*cap = *cap ? *cap * 2 : 1024;
	p = realloc(code->insns, *cap * sizeof(*p));
	if (!p)
		return -ENOMEM;
	code->insns = p;
	return 0;
}

/* The instruction as races.h describes it; false if it does not access memory as one operand. */
static bool describe(csh cs, const cs_insn *insn, struct races_insn *out)
{
	const cs_x86 *x = &insn->detail->x86;
	const cs_x86_op *mem = NULL;

	for (unsigned int i = 0; i < x->op_count; i++) {
		if (x->operands[i].type != X86_OP_MEM)
			continue;
		if (mem)
			return false; /* movs, cmps: two */
		mem = &x->operands[i];
	}
	if (!mem || !mem->access || no_data_access(cs, insn))
		return false;
	memset(out, 0, sizeof(*out));
	out->plan.vaddr = insn->address;
	out->plan.len = (uint8_t)insn->size;
	out->plan.size = mem->size;
	out->plan.access = (uint8_t)(((mem->access & CS_AC_READ) ? LKR_READ : 0) |
				     ((mem->access & CS_AC_WRITE) ? LKR_WRITE : 0));
	out->plan.base = greg_of(mem->mem.base);
	out->plan.index = greg_of(mem->mem.index);
	out->plan.scale = (uint8_t)mem->mem.scale;
	out->plan.disp = mem->mem.disp;
	if (out->plan.base == LKR_REG_RIP)
		out->plan.disp += (int64_t)(insn->address + insn->size);
	out->atomic = atomic_op(insn);
	return true;
}

/* Whether the library can sample it (races.h); counts why not in code. */
static bool sampleable(const cs_insn *insn, const struct races_insn *ri, struct races_code *code)
{
	const cs_x86_op *mem = NULL;
	const struct lkr_insn *p = &ri->plan;

	for (unsigned int i = 0; i < insn->detail->x86.op_count && !mem; i++)
		if (insn->detail->x86.operands[i].type == X86_OP_MEM)
			mem = &insn->detail->x86.operands[i];
	if (ri->atomic) {
		code->atomic++;
		return false;
	}
	if (mem->mem.segment != X86_REG_INVALID)
		return false; /* fs/gs: thread-local storage */
	if ((mem->mem.base != X86_REG_INVALID && p->base == LKR_REG_NONE) ||
	    (mem->mem.index != X86_REG_INVALID && p->index == LKR_REG_NONE))
		return false; /* a 32-bit address (addr32) */
	if (p->size != 1 && p->size != 2 && p->size != 4 && p->size != 8)
		return false; /* vector and x87 operands: no watchpoint covers them */
	if ((p->base == REG_RSP || p->base == REG_RBP) && p->index == LKR_REG_NONE) {
		code->stack++;
		return false;
	}
	return p->access != 0;
}

static int decode_section(csh cs, const uint8_t *bytes, size_t size, uint64_t addr, uint8_t object,
			  struct races_code *code, size_t *cap)
{
	cs_insn *insn = cs_malloc(cs);
	int err = 0;

	if (!insn)
		return -ENOMEM;
	while (size && !err) {
		struct races_insn ri;

		if (!cs_disasm_iter(cs, &bytes, &size, &addr, insn)) {
			bytes++; /* not an instruction: padding or data in the section */
			size--;
			addr++;
			continue;
		}
		if (!describe(cs, insn, &ri))
			continue;
		ri.plan.object = object;
		ri.sampled = sampleable(insn, &ri, code);
		err = grow(code, cap);
		if (!err) {
			code->insns[code->n++] = ri;
			code->sampled += ri.sampled;
		}
	}
	cs_free(insn, 1);
	return err;
}

static int read_exact(int fd, void *buf, size_t len, uint64_t off)
{
	ssize_t n = pread(fd, buf, len, (off_t)off);

	return n == (ssize_t)len ? 0 : -EIO;
}

/* The executable sections of the ELF file at fd, each decoded. */
static int decode_file(int fd, uint64_t file_size, csh cs, uint8_t object, struct races_code *code,
		       char *err, size_t errlen)
{
	Elf64_Ehdr eh;
	size_t cap = code->n;
	int ret = 0;

	if (read_exact(fd, &eh, sizeof(eh), 0) || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64 ||
	    eh.e_shentsize != sizeof(Elf64_Shdr)) {
		snprintf(err, errlen, "not an x86-64 ELF program");
		return -ENOEXEC;
	}
	for (unsigned int i = 0; i < eh.e_shnum && !ret; i++) {
		Elf64_Shdr sh;
		uint8_t *bytes;

		if (read_exact(fd, &sh, sizeof(sh), eh.e_shoff + (uint64_t)i * sizeof(sh)))
			break;
		if (sh.sh_type != SHT_PROGBITS || !(sh.sh_flags & SHF_EXECINSTR) || !sh.sh_size ||
		    sh.sh_size > SECTION_MAX || sh.sh_offset > file_size ||
		    sh.sh_size > file_size - sh.sh_offset)
			continue;
		bytes = malloc(sh.sh_size);
		if (!bytes)
			return -ENOMEM;
		if (read_exact(fd, bytes, sh.sh_size, sh.sh_offset) == 0)
			ret = decode_section(cs, bytes, sh.sh_size, sh.sh_addr, object, code, &cap);
		free(bytes);
	}
	if (ret)
		snprintf(err, errlen, "out of memory decoding the program");
	return ret;
}

static int by_object_and_address(const void *a, const void *b)
{
	const struct lkr_insn *x = &((const struct races_insn *)a)->plan;
	const struct lkr_insn *y = &((const struct races_insn *)b)->plan;

	if (x->object != y->object)
		return x->object < y->object ? -1 : 1;
	return (x->vaddr > y->vaddr) - (x->vaddr < y->vaddr);
}

int races_decode(const char *path, uint8_t object, struct races_code *out, char *err, size_t errlen)
{
	struct races_code before = *out;
	struct stat st;
	csh cs;
	int fd, ret;

	fd = open_regular_file(path, err, errlen);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) != 0) {
		ret = -errno;
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
		close(fd);
		return ret;
	}
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK) {
		snprintf(err, errlen, "Capstone cannot decode x86-64 here");
		close(fd);
		return -ENOSYS;
	}
	cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
	ret = decode_file(fd, (uint64_t)st.st_size, cs, object, out, err, errlen);
	cs_close(&cs);
	close(fd);
	if (ret) {
		before.insns = out->insns; /* perhaps moved: what it held is still at its start */
		*out = before;
	} else if (out->n > 1) {
		qsort(out->insns, out->n, sizeof(*out->insns), by_object_and_address);
	}
	return ret;
}

void races_code_free(struct races_code *code)
{
	free(code->insns);
	memset(code, 0, sizeof(*code));
}

const struct races_insn *races_insn_ending(const struct races_code *code, uint8_t object,
					   uint64_t end)
{
	size_t lo = 0, hi = code->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct lkr_insn *in = &code->insns[mid].plan;
		uint64_t e = in->vaddr + in->len;

		if (in->object == object && e == end)
			return &code->insns[mid];
		if (in->object < object || (in->object == object && e < end))
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}
