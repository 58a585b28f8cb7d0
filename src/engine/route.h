/*
 * numthunk native engine: the handler planner, which belongs to no
 * architecture (engine/route.c).
 *
 * A handler is what a native thunk's stub jumps to: it moves the forwarded
 * arguments from where the caller's ABI put them (the thunk's signature) to
 * where the target expects them, re-extends narrow integers, loads the
 * bound values from the context and transfers to the target. Everything
 * about that which follows from a few facts of the calling convention is
 * computed here, once per plan, from the architecture's ABI description
 * (nt_abi): the plan's shape and its key (plans with equal keys share one
 * handler), the location of each parameter on both sides, the stack counts,
 * the tail or frame form and the frame's size, and the order of the moves
 * (a parallel move, cycles broken through a scratch register). The result
 * is a list of steps; the architecture file turns each step into machine
 * code (nt_arch in engine/native.h: entry, one step, transfer, and the stub).
 * libffi divides the work the same way (ffi_prep_cif_core, then
 * ffi_prep_cif_machdep), as sljit keeps its common code apart from each
 * CPU's.
 *
 * Place in the pipeline: engine: between engine/native.c, engine/route.c and
 * the arch files.
 */
#ifndef NUMTHUNK_HANDLER_PLAN_H
#define NUMTHUNK_HANDLER_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "numthunk.h"

/* Register classes: integers and pointers, or floating point. */
enum { NT_CLS_INT = 0, NT_CLS_FP = 1, NT_NCLASS };

/* Where a value is: a general-purpose register, a floating-point register,
   or memory at [reg + disp]. */
enum { NT_LOC_GPR = 0, NT_LOC_FPR, NT_LOC_MEM };

typedef struct {
    uint8_t kind; /* NT_LOC_* */
    uint8_t reg;  /* register, or the base register of memory */
    int32_t disp;
    /* Memory: the bytes read or written there, 0 for 8 (a stack slot, a
       value cell). Only an ABI that packs stack arguments (nt_abi's
       stack_packed) has others: a parameter's natural size, 1, 2 or 4. */
    uint8_t size;
} nt_loc;

/* The bytes of memory a location covers. */
#define NT_LOC_BYTES(l) ((l).size != 0 ? (int32_t)(l).size : 8)

/* Kind sets (bit 1 << kind). */
#define NT_KIND_BIT(k) (1u << (k))
#define NT_KINDS_INT   (NT_KIND_BIT(NT_U64 + 1) - NT_KIND_BIT(NT_BOOL))
/* One integer or floating-point register each. */
#define NT_KINDS_SCALAR                                                             \
    (NT_KINDS_INT | NT_KIND_BIT(NT_F32) | NT_KIND_BIT(NT_F64) | NT_KIND_BIT(NT_PTR) \
     | NT_KIND_BIT(NT_FNPTR))
#define NT_KINDS_COMPLEX (NT_KIND_BIT(NT_C64) | NT_KIND_BIT(NT_C128))

#define NT_MAX_ARG_REGS  8 /* per class, in any nt_abi */
#define NT_NO_REG        0xFF
#define NT_PLAN_MAX_ARGS 128 /* the most parameters any nt_abi may take */

/*
 * An architecture's calling convention, as much of it as the planner needs.
 * Each architecture file provides one (in its nt_arch). Stack arguments are
 * stack_slot bytes each, in parameter order, the first at the caller's sp
 * at its call instruction; or, where stack_packed says so, each takes its
 * natural size at its natural alignment (Apple's arm64 ABI).
 */
typedef struct nt_abi {
    /* Argument registers of each class, in the order they are taken, and
       how many there are; each class is counted on its own. */
    uint8_t arg_regs[NT_NCLASS][NT_MAX_ARG_REGS];
    uint8_t n_arg_regs[NT_NCLASS];
    uint8_t stack_slot;  /* bytes per stack argument */
    uint8_t stack_align; /* sp alignment at a call, a multiple of the slot */
    /* Stack arguments packed: each at the next offset aligned to its
       natural alignment, taking its natural size (a char one byte, an int
       four), instead of one slot each. The handler then reads and writes
       each with an access of that size, and a narrow int written to the
       stack is not widened (its callee reads only its own bytes). */
    uint8_t stack_packed;
    /* Bytes the caller's call pushed (a return address), so that the
       incoming stack arguments start this far above sp at the handler's
       entry: where the tail form finds them and writes the target's. */
    uint8_t entry_pushed;
    /* Bytes the frame form's prologue pushes above its frame (a frame
       record); the incoming stack arguments are then entry_pushed +
       frame_record + frame bytes above sp. */
    uint8_t frame_record;
    uint8_t sp_reg;  /* the base register of stack slots */
    uint8_t ctx_reg; /* holds the context, from the stub on */
    /* Where a value of each class waits while a cycle of moves is broken:
       a register that carries no argument and that no single move uses. */
    nt_loc cycle[NT_NCLASS];
    /* Registers the arch's emitters may use inside one step (memory to
       memory copies, extensions), by register file: copy[NT_LOC_GPR] and
       copy[NT_LOC_FPR], NT_NO_REG for none. Never an argument, cycle or
       context register. */
    uint8_t copy[2];
    /* A floating-point argument that finds no FP register left takes the
       next integer register, if any, before the stack (RISC-V). */
    uint8_t fp_in_gpr;
    /* Argument registers are taken by position, not counted per class:
       the i-th argument takes the i-th register of its class (or the
       stack), and the other class's i-th register stays unused (Microsoft
       x64: rcx/xmm0, rdx/xmm1, r8/xmm2, r9/xmm3). */
    uint8_t slots_shared;
    /* Bytes the caller reserves between what its call pushed and the
       first stack argument, for the callee to use (Microsoft x64's 32
       bytes of shadow space); the frame form reserves as much below the
       target's stack arguments. */
    uint8_t shadow;
    uint32_t arg_kinds; /* kinds a parameter may have (NT_KIND_BIT) */
    uint32_t ret_kinds; /* kinds passed back untouched in registers */
    /* NT_EXT_* (numthunk.h) per forwarded kind, or NULL: widened as a C
       caller widens them, the kind table's ext (what GCC and Clang callees
       rely on for x86-64, and Apple's arm64 ABI requires). */
    const uint8_t *ext;
    /* NT_EXT_* per bound kind, or NULL: value cells load as they are
       stored (8 bytes, integers extended to 64 bits by their signedness,
       a float in the low 4 bytes). */
    const uint8_t *bound_ext;
    int max_args;              /* at most NT_PLAN_MAX_ARGS */
    uint32_t max_bound_offset; /* the farthest value cell one load reaches */
} nt_abi;

/* 0 if the description holds together (registers distinct where they must
   be, counts within the planner's arrays), else -1. */
int nt_abi_check(const nt_abi *abi);

/* ------------------------------------------------------------------------ */
/* The planner's result                                                      */

/* One step of a handler: dst <- src for a value of class cls, widened by
   ext (a forwarded argument, possibly onto itself when only the extension
   is left, or a value parked to break a cycle), or, for NT_STEP_LOAD, a
   bound value read from the context (src is memory at ctx_reg). Steps run
   in order; each is one move for the arch, between any two locations of
   the ABI's (a floating-point value may sit in a general-purpose register
   where abi.fp_in_gpr says so, or in a cycle register of the other file). */
enum { NT_STEP_MOVE = 0, NT_STEP_LOAD };

typedef struct {
    uint8_t op;  /* NT_STEP_* */
    uint8_t cls; /* NT_CLS_* */
    uint8_t ext; /* NT_EXT_* */
    nt_loc dst, src;
} nt_step;

/*
 * A handler, planned. Tail form (the target's stack arguments fit in the
 * caller's area, and, where they are packed, each of the target's lies
 * either apart from every forwarded one or exactly on one): entry, steps,
 * jump to the target. Frame form: entry,
 * frame_record bytes pushed, sp lowered by frame, steps, call, sp raised,
 * frame record popped, return; frame keeps sp aligned at the call.
 */
typedef struct {
    int tail;
    int32_t frame;    /* frame form only; 0 in the tail form */
    int thunk_stack;  /* bytes of stack arguments the caller passes */
    int target_stack; /* bytes of stack arguments the target takes */
    int nsteps;
    nt_step steps[2 * NT_PLAN_MAX_ARGS]; /* a move per argument, a park per cycle */
} nt_route;

/* NT_OK if the planner can plan the plan for this ABI, else
   NT_ERR_UNSUPPORTED (kinds, counts, offsets out of its reach). */
nt_status nt_handler_supports(const nt_abi *abi, const nt_plan *plan);

/* The key of the plan's shape: plans with equal keys share a handler. It
   leaves out what a handler never reads: the return type (passed back
   untouched) and the exact integer kind of bound values (cells are stored
   extended to 64 bits). Supported plans only; at most NT_SHAPE_KEY_MAX
   bytes (engine/native.h). */
size_t nt_handler_key(const nt_abi *abi, const nt_plan *plan, uint8_t *key);

/* Plans the handler for a supported plan into out. 0, or -1 if the plan is
   not supported. */
int nt_route_make(const nt_abi *abi, const nt_plan *plan, nt_route *out);

/* ------------------------------------------------------------------------ */
/* Code buffer: every byte of generated code goes through nt_code_put.      */

typedef struct nt_code {
    uint8_t *p;
    size_t len, cap;
    int overflow; /* set once a write did not fit; sticky */
} nt_code;

void nt_code_put(nt_code *b, const void *bytes, size_t n);

#endif /* NUMTHUNK_HANDLER_PLAN_H */
