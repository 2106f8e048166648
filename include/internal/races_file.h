/* SPDX-License-Identifier: MIT */
/*
 * Internal API: the file `lowkey races` and liblowkey-races.so share.
 *
 * The command decodes the program's code (Capstone, in the CLI only) and writes the plan: the
 * sampling parameters, the objects decoded (the program first, then the libraries asked for) and
 * one lkr_insn per memory-accessing instruction it may sample. The library maps the same file
 * MAP_SHARED in the program, samples, and writes what it found into the records that follow the
 * instructions, as it goes: what was found survives the program dying. Layout: the header page,
 * `nobjects` objects, `ninsns` instructions, `max_races` records, then LKR_MODULES_MAX modules.
 * All integers are native-endian.
 */
#ifndef LK_RACES_FILE_H
#define LK_RACES_FILE_H

#include <stdint.h>

#define LKR_MAGIC 0x3173656361726b6cull /* "lkraces1" */
#define LKR_VERSION 3u
#define LKR_HEADER_SIZE 4096u
#define LKR_ERROR_MAX 256u
#define LKR_OBJECTS_MAX 64u
#define LKR_PATH_MAX 240u
#define LKR_STACK_MAX 16u   /* frames kept of each thread's stack */
#define LKR_MODULES_MAX 64u /* objects loaded listed for the stacks' frames */

/* lkr_insn.access and lkr_race.access */
#define LKR_READ 0x1u
#define LKR_WRITE 0x2u

/*
 * Registers of an effective address, numbered as glibc's ucontext_t gregs on x86-64 (REG_R8 = 0
 * ... REG_RIP = 16); LKR_REG_NONE where the operand has none.
 */
#define LKR_REG_NONE 0xffu
#define LKR_REG_RIP 16u

/* An object whose instructions are in the plan: the program (the first), or a library. */
struct lkr_object {
	uint64_t dev, ino; /* its file, to find it among those loaded */
	uint64_t bias;	   /* set by the library: ELF addresses + bias = run-time addresses */
	uint32_t loaded;   /* set by the library: it was loaded when sampling started */
	uint32_t pad;
	char path[LKR_PATH_MAX]; /* for the report */
};

/*
 * An object a record has a frame in, not in the plan (set by the library as it makes the record:
 * libc, the libraries not sampled, those dlopen()ed after sampling started), so that the command
 * can name the frames in it. Listed once; past LKR_MODULES_MAX, not listed.
 */
struct lkr_module {
	uint64_t bias;		 /* ELF addresses + bias = run-time addresses */
	char path[LKR_PATH_MAX]; /* as the loader names it, NUL-terminated */
};

/* One instruction the library may sample: base + index * scale + disp, size bytes. */
struct lkr_insn {
	uint64_t vaddr; /* its ELF address in its object (add the object's load bias) */
	int64_t disp;	/* with base LKR_REG_RIP: the ELF address it reaches */
	uint8_t len;	/* bytes of the instruction */
	uint8_t base, index, scale;
	uint8_t size;	/* bytes accessed: 1, 2, 4 or 8 */
	uint8_t access; /* LKR_READ, LKR_WRITE or both */
	uint8_t object; /* its index among the objects */
	uint8_t pad;
};

/* header flags, set by the library */
#define LKR_F_STARTED 0x1u  /* it claimed the plan and armed its watchpoints */
#define LKR_F_FINISHED 0x2u /* it stopped sampling and removed them (exit, or the duration) */
#define LKR_F_FULL 0x4u	    /* more distinct races than max_races: see races_dropped */

/*
 * A race: the sampled instruction, held at sample_ip with the watchpoint on addr, and another
 * thread's access that the watchpoint caught (other_ip: the instruction after it, as the CPU
 * reports a data watchpoint), folded by the pair of instructions. other_ip 0: the value changed
 * in the window and no thread's access was caught (a write the watchpoint could not see).
 *
 * The stacks, the first time: each thread's return addresses from the trapped instruction out,
 * unwound in its SIGTRAP handler. Frame 0 is the trapped context's instruction pointer
 * (sample_ip, or other_ip), the callers' return addresses follow; a depth past LKR_STACK_MAX is
 * no stack the library wrote, and the command reads none of it.
 */
struct lkr_race {
	uint64_t sample_ip, other_ip;	/* run-time addresses */
	uint64_t addr;			/* the first time: the address accessed */
	uint64_t before, after;		/* the first time: the value around the window */
	uint64_t windows;		/* windows it was caught in */
	uint64_t hits;			/* accesses caught in them */
	uint32_t sample_tid, other_tid; /* the first time */
	uint8_t size;			/* bytes the sampled instruction accesses */
	uint8_t access;			/* what it does: LKR_READ, LKR_WRITE */
	uint8_t other_write;		/* the watchpoint caught writes only (a read was sampled) */
	uint8_t sample_depth;		/* frames in sample_stack: 0 to LKR_STACK_MAX */
	uint8_t other_depth;		/* frames in other_stack */
	uint8_t pad[3];
	uint64_t sample_stack[LKR_STACK_MAX];
	uint64_t other_stack[LKR_STACK_MAX];
};

struct lkr_header {
	uint64_t magic;
	uint32_t version;
	uint32_t header_size;
	/* The plan: written by the command before the program starts. */
	uint64_t seed;
	uint64_t period_ns;   /* one instruction armed per period */
	uint64_t window_ns;   /* how long a sampled thread is held */
	uint64_t duration_ns; /* 0: until the program exits */
	uint32_t nobjects;    /* the first is the program: another exec()ed image leaves the plan */
	uint32_t ninsns;
	uint32_t max_races;
	uint32_t stack_depth; /* frames of each thread's stack kept: 0 (none) to LKR_STACK_MAX */
	/* Written by the library. */
	uint32_t claimed; /* set once (compare-and-swap) by the process that samples */
	uint32_t flags;	  /* LKR_F_* */
	int32_t pid;
	uint32_t nmodules;	/* modules listed: 0 to LKR_MODULES_MAX */
	uint64_t picks;		/* instructions armed */
	uint64_t samples;	/* of them, reached by a thread: windows opened */
	uint64_t misaligned;	/* reached, but at an address the watchpoint cannot cover exactly */
	uint64_t races_used;	/* records filled */
	uint64_t races_dropped; /* distinct races with no record left */
	/*
	 * What the callbacks cost the program's threads, from the trap's handler (the hit's time)
	 * to the callback's end, stacks included: the held threads' until their windows opened
	 * (one per sample), and the other threads' for the accesses kept (at most 16 a window).
	 */
	uint64_t held_ns;
	uint64_t kept;
	uint64_t kept_ns;
	char error[LKR_ERROR_MAX]; /* why the library could not sample, or "" */
};

/*
 * Attaching (`lowkey races --pid`): a program started with liblowkey-races.so preloaded and
 * LOWKEY_RACES_ATTACH=1 listens on the abstract SOCK_SEQPACKET socket "lowkey-races.PID" (PID its
 * own). The command connects, checks that the process at the other end is PID (SO_PEERCRED), and
 * sends LKR_ATTACH_START with the plan's descriptor (SCM_RIGHTS); the library accepts only its
 * own user or root. It answers LKR_ATTACH_STARTED once sampling (or LKR_ATTACH_DONE at once if it
 * could not start: the plan's error says why), LKR_ATTACH_REFUSED for a plan that is not for this
 * program; then LKR_ATTACH_DONE when it stopped and removed its watchpoints: at the plan's
 * duration, at exit, or after the command sent LKR_ATTACH_STOP or closed the connection. One
 * command at a time; the next one may attach after.
 */
#define LKR_ATTACH_NAME "lowkey-races.%d"
#define LKR_ATTACH_START 'S'
#define LKR_ATTACH_STOP 'Q'
#define LKR_ATTACH_STARTED 'A'
#define LKR_ATTACH_DONE 'D'
#define LKR_ATTACH_REFUSED 'R'

static inline struct lkr_object *lkr_objects(struct lkr_header *h)
{
	return (struct lkr_object *)((char *)h + LKR_HEADER_SIZE);
}

static inline struct lkr_insn *lkr_insns(struct lkr_header *h)
{
	return (struct lkr_insn *)(lkr_objects(h) + h->nobjects);
}

static inline struct lkr_race *lkr_races(struct lkr_header *h)
{
	return (struct lkr_race *)(lkr_insns(h) + h->ninsns);
}

static inline struct lkr_module *lkr_modules(struct lkr_header *h)
{
	return (struct lkr_module *)(lkr_races(h) + h->max_races);
}

static inline uint64_t lkr_file_size(uint32_t nobjects, uint32_t ninsns, uint32_t max_races)
{
	return LKR_HEADER_SIZE + (uint64_t)nobjects * sizeof(struct lkr_object) +
	       (uint64_t)ninsns * sizeof(struct lkr_insn) +
	       (uint64_t)max_races * sizeof(struct lkr_race) +
	       LKR_MODULES_MAX * sizeof(struct lkr_module);
}

#endif
