/*
 * numthunk native engine for AArch64 Linux (AAPCS64): plan -> machine code.
 *
 * Place in the pipeline: the architecture half of the native engine. It
 * supplies an nt_arch (native.h): the entry stub's words, which plans it
 * can run, the shape key and the handler's code. Stub blocks, slots, the
 * handler cache, executable memory (with its one instruction-cache flush
 * after code is written) and the quarantine are native.c's; plans this file
 * cannot run go to libffi. The layout is the x86-64 engine's:
 *
 *   address --> stub (16 bytes, one per thunk, identical but for the
 *               pc-relative offset of its slot; made a block at a time,
 *               sealed RX)
 *                  bti  c                  ; BTI landing pad for blr/br
 *                  ldr  x16, <slot>        ; this stub's context
 *                  ldr  x17, [x16]         ; ctx word 0: the handler
 *                  br   x17
 *           --> handler (one per plan *shape*, generated once, shared)
 *                  moves forwarded args from the thunk's ABI positions to
 *                  the target's, re-extends narrow ints, loads bound values
 *                  from [x16 + 32 + offset], then ldr x17, [x16, #8]; br x17,
 *                  or builds a frame and calls when the target needs more
 *                  stack arguments than the caller passed.
 *
 * x16 holds the context from the stub on, as r10 does on x86-64; x17 is the
 * only general-purpose scratch. Both are IP0/IP1, the intra-procedure-call
 * registers that AAPCS64 lets any veneer between caller and callee
 * clobber, so a thunk is to its caller exactly such a veneer. Tail branches
 * go through x17, which BTI-guarded callees accept at their `bti c` (a `br`
 * through any other register needs `bti j`). Floating-point scratch: v16
 * for memory-to-memory copies, v17 to park one value while a cycle of moves
 * is broken (v16-v31 are caller-saved and carry no arguments).
 *
 * ABI facts used (AAPCS64, "Parameter passing", and the Linux/ELF
 * variant): integers and pointers in x0-x7, float and double in v0-v7 (s
 * and d views), each class counted on its own; the rest in 8-byte stack
 * slots in order starting at [sp], sp 16-byte aligned at the call; the
 * return address is in x30, not on the stack, so a handler may rewrite the
 * incoming argument area (the callee owns it) and tail-branch; x8 is the
 * indirect result register, needed only for results returned in memory,
 * which this backend does not take. Results in x0/x1 or v0-v3 (float and
 * double complex are homogeneous floating-point aggregates, returned in
 * s0:s1 and d0:d1) pass through untouched.
 * Narrow ints: AAPCS64 leaves the bits above an argument's width
 * unspecified; Linux GCC and Clang callees extend for themselves, Apple's
 * arm64 ABI makes the caller extend to 32 bits, and Numba does not extend.
 * Like the x86-64 engine, every forwarded bool/u8/u16 is zero- and every
 * i8/i16 sign-extended to 32 bits, so the handler gives its callee what a
 * C caller would on either ABI.
 *
 * Not handled here (libffi takes them): complex and struct arguments,
 * by-value memoryview slices, struct returns in memory, more than MAX_ARGS
 * parameters; Apple's arm64 ABI (stack arguments packed to their natural
 * size, MAP_JIT and pthread_jit_write_protect_np) and Windows on Arm, which
 * backend.c sends to libffi; kernels with pages larger than 4 KiB, where
 * the stub block layout does not hold (supports() refuses every plan).
 *
 * Instruction count per call, read from the emitted code (docs/engines.md
 * lists more shapes): double(void) over double sum(double *, int), both
 * bound: stub 4 + handler 5 (bti, two ldr, ldr x17, br) = 9 instructions
 * and 2 indirect branches before the target's first instruction, where a
 * direct call with the arguments in registers needs 2 (adr/ldr + mov) + bl.
 * Generated code has no unwind tables (the frame form keeps a frame record
 * for frame-pointer unwinders).
 */
#include <string.h>
#include <unistd.h>

#include "numthunk.h"
#include "execmem.h"
#include "native.h"

/* ------------------------------------------------------------------------ */
/* Code buffer: every instruction word of generated code goes through       */
/* emit().                                                                   */

typedef struct {
    uint8_t *p;
    size_t len, cap;
    int overflow;            /* set once a write did not fit; sticky */
} code_buf;

static void
emit(code_buf *b, uint32_t ins)
{
    if (b->overflow || 4 > b->cap - b->len) {
        b->overflow = 1;
        return;
    }
    /* AArch64 instruction words are little-endian whatever the data order */
    uint8_t bytes[4] = { (uint8_t)ins, (uint8_t)(ins >> 8),
                         (uint8_t)(ins >> 16), (uint8_t)(ins >> 24) };
    memcpy(b->p + b->len, bytes, 4);
    b->len += 4;
}

/* ------------------------------------------------------------------------ */
/* Registers and encoders (Arm ARM, A64 "Encoding index")                    */

#define N_ARG_GPR 8          /* x0-x7 */
#define N_ARG_FPR 8          /* v0-v7 */
#define REG_SP    31         /* as a base register; xzr elsewhere */
#define CTX_REG   16         /* x16: context pointer, loaded by the stub */
#define TMP_GPR   17         /* x17: scratch within one move; branch target */
#define COPY_FPR  16         /* v16: memory-to-memory copies */
#define CYCLE_FPR 17         /* v17: a parked value while breaking a cycle */

#define INS_BTI_C     0xD503245Fu   /* bti c */
#define INS_RET       0xD65F03C0u   /* ret */
#define INS_PUSH_FP   0xA9BF7BFDu   /* stp x29, x30, [sp, #-16]! */
#define INS_POP_FP    0xA8C17BFDu   /* ldp x29, x30, [sp], #16 */
#define INS_MOV_FP_SP 0x910003FDu   /* mov x29, sp */

/* Load/store, unsigned scaled 12-bit offset: base | imm12 << 10 | Rn << 5
   | Rt, imm12 = offset / access size. */
#define OP_LDR_X    0xF9400000u     /* ldr xT, [xN, #off] */
#define OP_STR_X    0xF9000000u     /* str xT, [xN, #off] */
#define OP_LDR_D    0xFD400000u     /* ldr dT, [xN, #off] */
#define OP_STR_D    0xFD000000u     /* str dT, [xN, #off] */
#define OP_LDRB_W   0x39400000u     /* ldrb wT, [xN, #off]  (zero-extends) */
#define OP_LDRSB_W  0x39C00000u     /* ldrsb wT, [xN, #off] (sign-extends) */
#define OP_LDRH_W   0x79400000u     /* ldrh wT, [xN, #off] */
#define OP_LDRSH_W  0x79C00000u     /* ldrsh wT, [xN, #off] */

/* Bitfield moves on W registers: base | Rn << 5 | Rd. Writing a W register
   clears bits 32-63 of the X register. */
#define OP_UXTB     0x53001C00u     /* uxtb wD, wN  (ubfm wD, wN, #0, #7) */
#define OP_SXTB     0x13001C00u     /* sxtb wD, wN  (sbfm wD, wN, #0, #7) */
#define OP_UXTH     0x53003C00u     /* uxth wD, wN  (ubfm wD, wN, #0, #15) */
#define OP_SXTH     0x13003C00u     /* sxth wD, wN  (sbfm wD, wN, #0, #15) */

#define OP_MOV_X    0xAA0003E0u     /* mov xD, xM   (orr xD, xzr, xM): | Rm << 16 | Rd */
#define OP_FMOV_D   0x1E604000u     /* fmov dD, dN: | Rn << 5 | Rd */
#define OP_FMOV_DX  0x9E670000u     /* fmov dD, xN: | Rn << 5 | Rd */
#define OP_FMOV_XD  0x9E660000u     /* fmov xD, dN: | Rn << 5 | Rd */
#define OP_BR       0xD61F0000u     /* br xN:  | Rn << 5 */
#define OP_BLR      0xD63F0000u     /* blr xN: | Rn << 5 */
#define OP_SUB_SP   0xD10003FFu     /* sub sp, sp, #imm12: | imm12 << 10 */
#define OP_ADD_SP   0x910003FFu     /* add sp, sp, #imm12: | imm12 << 10 */
#define OP_LDR_LIT_X 0x58000000u    /* ldr xT, <pc + imm19 * 4>: | imm19 << 5 | Rt */

/* Largest byte offset of a 64-bit load/store with a scaled 12-bit field. */
#define MAX_LDST_OFFSET (4095 * 8)

static uint32_t
ldst(uint32_t op, int size, int rt, int rn, int32_t offset)
{
    /* Offsets are checked by the callers' plan limits; a misaligned or
       out-of-range one would silently encode another address, so it is
       refused here as well (sticky through an impossible word). */
    if (offset < 0 || offset % size != 0 || offset / size > 4095)
        return 0;            /* udf #0: traps if it ever ran */
    return op | ((uint32_t)(offset / size) << 10) | ((uint32_t)rn << 5)
           | (uint32_t)rt;
}

static void
emit_ldst(code_buf *b, uint32_t op, int size, int rt, int rn, int32_t off)
{
    uint32_t ins = ldst(op, size, rt, rn, off);
    if (ins == 0)
        b->overflow = 1;     /* refuse the handler: libffi takes the plan */
    emit(b, ins);
}

static void
emit_rr(code_buf *b, uint32_t op, int rd, int rn)
{
    emit(b, op | ((uint32_t)rn << 5) | (uint32_t)rd);
}

static void
emit_mov_x(code_buf *b, int rd, int rm)
{
    emit(b, OP_MOV_X | ((uint32_t)rm << 16) | (uint32_t)rd);
}

static void
emit_sp_adjust(code_buf *b, uint32_t op, int32_t n)
{
    if (n < 0 || n > 4095) {
        b->overflow = 1;
        return;
    }
    emit(b, op | ((uint32_t)n << 10));
}

/* ------------------------------------------------------------------------ */
/* Argument locations and moves                                              */

enum { CLS_INT = 0, CLS_FP = 1 };
enum { LOC_GPR = 0, LOC_FPR, LOC_MEM };

/* Narrow-integer extensions applied to forwarded arguments. */
enum { EXT_NONE = 0, EXT_ZX8, EXT_SX8, EXT_ZX16, EXT_SX16 };

typedef struct {
    uint8_t kind;
    uint8_t reg;             /* register, or base register for LOC_MEM */
    int32_t disp;
} loc;

static loc
loc_gpr(int r)
{
    loc l = { LOC_GPR, (uint8_t)r, 0 };
    return l;
}

static loc
loc_fpr(int r)
{
    loc l = { LOC_FPR, (uint8_t)r, 0 };
    return l;
}

static loc
loc_mem(int base, int32_t disp)
{
    loc l = { LOC_MEM, (uint8_t)base, disp };
    return l;
}

static int
loc_eq(loc a, loc b)
{
    return a.kind == b.kind && a.reg == b.reg && a.disp == b.disp;
}

/* Extends the low bits of GPR rn into wD (bits 32-63 cleared). */
static void
emit_ext_reg(code_buf *b, int ext, int rd, int rn)
{
    static const uint32_t op[] = { 0, OP_UXTB, OP_SXTB, OP_UXTH, OP_SXTH };
    emit_rr(b, op[ext], rd, rn);
}

/* Loads a narrow int from memory into wD, extended as ext says. */
static void
emit_ext_load(code_buf *b, int ext, int rd, loc src)
{
    static const uint32_t op[] = { 0, OP_LDRB_W, OP_LDRSB_W, OP_LDRH_W,
                                   OP_LDRSH_W };
    int size = ext == EXT_ZX8 || ext == EXT_SX8 ? 1 : 2;
    emit_ldst(b, op[ext], size, rd, src.reg, src.disp);
}

/*
 * dst <- src for one 64-bit value, extending a narrow int by ext. Floats
 * travel as the low half of a d register or 8-byte slot, so one 64-bit
 * move carries either FP kind. x17 and v16 are used only inside one call.
 */
static void
emit_move(code_buf *b, int ext, loc dst, loc src)
{
    if (ext != EXT_NONE) {
        /* integer class: src and dst are GPRs, memory, or the parked v17 */
        int r = dst.kind == LOC_GPR ? dst.reg : TMP_GPR;
        if (src.kind == LOC_GPR) {
            emit_ext_reg(b, ext, r, src.reg);
        } else if (src.kind == LOC_MEM) {
            emit_ext_load(b, ext, r, src);
        } else {
            emit_rr(b, OP_FMOV_XD, r, src.reg);
            emit_ext_reg(b, ext, r, r);
        }
        if (dst.kind == LOC_MEM)
            emit_ldst(b, OP_STR_X, 8, r, dst.reg, dst.disp);
        else if (dst.kind == LOC_FPR)
            emit_rr(b, OP_FMOV_DX, dst.reg, r);
        return;
    }
    switch (dst.kind * 3 + src.kind) {
    case LOC_GPR * 3 + LOC_GPR:
        emit_mov_x(b, dst.reg, src.reg);
        break;
    case LOC_GPR * 3 + LOC_FPR:
        emit_rr(b, OP_FMOV_XD, dst.reg, src.reg);
        break;
    case LOC_GPR * 3 + LOC_MEM:
        emit_ldst(b, OP_LDR_X, 8, dst.reg, src.reg, src.disp);
        break;
    case LOC_FPR * 3 + LOC_GPR:
        emit_rr(b, OP_FMOV_DX, dst.reg, src.reg);
        break;
    case LOC_FPR * 3 + LOC_FPR:
        emit_rr(b, OP_FMOV_D, dst.reg, src.reg);
        break;
    case LOC_FPR * 3 + LOC_MEM:
        emit_ldst(b, OP_LDR_D, 8, dst.reg, src.reg, src.disp);
        break;
    case LOC_MEM * 3 + LOC_GPR:
        emit_ldst(b, OP_STR_X, 8, src.reg, dst.reg, dst.disp);
        break;
    case LOC_MEM * 3 + LOC_FPR:
        emit_ldst(b, OP_STR_D, 8, src.reg, dst.reg, dst.disp);
        break;
    default: /* memory to memory */
        emit_ldst(b, OP_LDR_D, 8, COPY_FPR, src.reg, src.disp);
        emit_ldst(b, OP_STR_D, 8, COPY_FPR, dst.reg, dst.disp);
        break;
    }
}

typedef struct {
    loc dst, src;
    uint8_t ext, done;
} move;

/*
 * Emits a set of moves as if all happened at once (the x86-64 engine's
 * algorithm). Destinations are distinct and so are sources, so the moves
 * form chains and cycles: a move runs once no pending move still reads its
 * destination; when only cycles are left, one value is parked in v17
 * (already extended), which turns its cycle into a chain. A chain runs to
 * its end before another cycle is broken, so one park register serves both
 * classes.
 */
static void
emit_parallel_moves(code_buf *b, move *m, int n)
{
    int left = n;
    while (left > 0) {
        int progressed = 0;
        for (int i = 0; i < n; i++) {
            if (m[i].done)
                continue;
            int blocked = 0;
            for (int j = 0; j < n && !blocked; j++)
                blocked = j != i && !m[j].done && loc_eq(m[j].src, m[i].dst);
            if (blocked)
                continue;
            emit_move(b, m[i].ext, m[i].dst, m[i].src);
            m[i].done = 1;
            left--;
            progressed = 1;
        }
        if (progressed || left == 0)
            continue;
        for (int i = 0; i < n; i++) {
            if (m[i].done)
                continue;
            for (int j = 0; j < n; j++) {
                if (j == i || m[j].done || !loc_eq(m[j].src, m[i].dst))
                    continue;
                loc tmp = loc_fpr(CYCLE_FPR);
                emit_move(b, m[j].ext, tmp, m[j].src);
                m[j].src = tmp;
                m[j].ext = EXT_NONE;
                break;
            }
            break;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Plan shapes and handlers                                                  */

#define MAX_ARGS 128                 /* larger plans go to libffi */

typedef struct {
    uint8_t cls;
    uint8_t ext;                     /* forwarded only */
    uint8_t bound;
    uint16_t fwd;                    /* forwarded only */
    uint32_t offset;                 /* bound only */
} shape_arg;

static int
kind_ext(int kind)
{
    switch (kind) {
    case NT_BOOL: case NT_U8: return EXT_ZX8;
    case NT_I8: return EXT_SX8;
    case NT_U16: return EXT_ZX16;
    case NT_I16: return EXT_SX16;
    default: return EXT_NONE;
    }
}

static int
kind_supported_arg(int kind)
{
    return NT_IS_INT(kind) || NT_IS_FLOAT(kind) || kind == NT_PTR
           || kind == NT_FNPTR;
}

static int
kind_supported_ret(int kind)
{
    /* Returns pass through untouched: x0, v0, and the complex kinds in
       s0:s1 / d0:d1 (HFAs). A struct returned in memory would need x8. */
    return kind == NT_VOID || kind_supported_arg(kind) || NT_IS_COMPLEX(kind);
}

/* The shape of a plan: one entry per target parameter. 0 or -1. */
static int
plan_shape(const nt_plan *plan, shape_arg *out)
{
    if (plan->nargs < 0 || plan->nargs > MAX_ARGS || plan->nfwd < 0
        || plan->nfwd > plan->nargs)
        return -1;
    int seen[MAX_ARGS] = { 0 };
    for (int i = 0; i < plan->nargs; i++) {
        const nt_slot *s = &plan->slots[i];
        if (!kind_supported_arg(s->kind))
            return -1;
        shape_arg a = { NT_IS_FLOAT(s->kind) ? CLS_FP : CLS_INT, EXT_NONE,
                        0, 0, 0 };
        if (s->src == NT_SRC_BOUND) {
            /* one ldr with a scaled 12-bit offset reaches the cell */
            if (s->offset > MAX_LDST_OFFSET - NT_CTX_VALUES_OFFSET
                || (s->offset & 7))
                return -1;
            a.bound = 1;
            a.offset = s->offset;
        } else {
            if (s->fwd >= plan->nfwd || seen[s->fwd]++)
                return -1;
            a.fwd = s->fwd;
            a.ext = (uint8_t)kind_ext(s->kind);
        }
        out[i] = a;
    }
    return 0;
}

/* Assigns AAPCS64 (Linux) locations to a parameter list given by class;
   stack slot k is at [sp + stack_base + 8k]. Returns the number of stack
   slots. */
static int
assign_locations(const uint8_t *cls, int n, int32_t stack_base, loc *out)
{
    int ngpr = 0, nfpr = 0, nstack = 0;
    for (int i = 0; i < n; i++) {
        if (cls[i] == CLS_INT && ngpr < N_ARG_GPR)
            out[i] = loc_gpr(ngpr++);
        else if (cls[i] == CLS_FP && nfpr < N_ARG_FPR)
            out[i] = loc_fpr(nfpr++);
        else
            out[i] = loc_mem(REG_SP, stack_base + 8 * nstack++);
    }
    return nstack;
}

static int
count_stack(const uint8_t *cls, int n)
{
    loc tmp[MAX_ARGS];
    return assign_locations(cls, n, 0, tmp);
}

/*
 * Generates the handler for a shape into b.
 *
 * Tail form (the target's stack args fit in the caller's area):
 *     bti c; <moves>; ldr x17, [x16, #8]; br x17
 * Frame form:
 *     bti c; stp x29, x30, [sp, #-16]!; mov x29, sp; sub sp, sp, #F;
 *     <moves>; ldr x17, [x16, #8]; blr x17;
 *     add sp, sp, #F; ldp x29, x30, [sp], #16; ret
 * with F = 8 * (target stack slots) rounded up to 16, so sp stays 16-byte
 * aligned (sp alignment is checked by hardware on every sp-based access).
 */
static void
gen_handler(code_buf *b, const shape_arg *shape, int nargs, int nfwd)
{
    uint8_t tcls[MAX_ARGS], fcls[MAX_ARGS];
    loc tloc[MAX_ARGS], floc[MAX_ARGS];
    move mv[MAX_ARGS];

    for (int i = 0; i < nargs; i++) {
        tcls[i] = shape[i].cls;
        if (!shape[i].bound)
            fcls[shape[i].fwd] = shape[i].cls;
    }
    int t_stack = count_stack(tcls, nargs);
    int f_stack = count_stack(fcls, nfwd);
    int tail = t_stack <= f_stack;
    int32_t frame = tail ? 0 : (int32_t)nt_round_up(8u * (unsigned)t_stack,
                                                     16);

    /* Incoming stack args start at the caller's sp: above our frame record
       and outgoing area in the frame form. */
    assign_locations(fcls, nfwd, tail ? 0 : frame + 16, floc);
    assign_locations(tcls, nargs, 0, tloc);

    emit(b, INS_BTI_C);
    if (!tail) {
        emit(b, INS_PUSH_FP);
        emit(b, INS_MOV_FP_SP);
        emit_sp_adjust(b, OP_SUB_SP, frame);
    }

    /* 1. Forwarded values, all at once. */
    int n = 0;
    for (int i = 0; i < nargs; i++) {
        if (shape[i].bound)
            continue;
        loc src = floc[shape[i].fwd];
        if (loc_eq(src, tloc[i])) {
            /* Already in place: only the extension is left. */
            if (shape[i].ext != EXT_NONE)
                emit_move(b, shape[i].ext, tloc[i], tloc[i]);
            continue;
        }
        move m = { tloc[i], src, shape[i].ext, 0 };
        mv[n++] = m;
    }
    emit_parallel_moves(b, mv, n);

    /* 2. Bound values, now that no forwarded value is still to be read. */
    for (int i = 0; i < nargs; i++) {
        if (!shape[i].bound)
            continue;
        loc src = loc_mem(CTX_REG,
                          NT_CTX_VALUES_OFFSET + (int32_t)shape[i].offset);
        if (tloc[i].kind == LOC_MEM) {
            emit_ldst(b, OP_LDR_X, 8, TMP_GPR, src.reg, src.disp);
            emit_ldst(b, OP_STR_X, 8, TMP_GPR, tloc[i].reg, tloc[i].disp);
        } else {
            emit_move(b, EXT_NONE, tloc[i], src);
        }
    }

    emit_ldst(b, OP_LDR_X, 8, TMP_GPR, CTX_REG, NT_CTX_TARGET_OFFSET);
    if (tail) {
        emit(b, OP_BR | (TMP_GPR << 5));
    } else {
        emit(b, OP_BLR | (TMP_GPR << 5));
        emit_sp_adjust(b, OP_ADD_SP, frame);
        emit(b, INS_POP_FP);
        emit(b, INS_RET);
    }
}
/* ------------------------------------------------------------------------ */
/* Shape keys                                                                */

_Static_assert(2 + 6 * MAX_ARGS <= NT_SHAPE_KEY_MAX, "shape key too long");

static size_t
shape_key(const shape_arg *shape, int nargs, int nfwd, uint8_t *key)
{
    size_t n = 0;
    key[n++] = (uint8_t)nargs;
    key[n++] = (uint8_t)nfwd;
    for (int i = 0; i < nargs; i++) {
        const shape_arg *a = &shape[i];
        key[n++] = (uint8_t)(a->cls | (a->ext << 1) | (a->bound << 4));
        key[n++] = (uint8_t)a->fwd;
        for (int k = 0; k < 4; k++)
            key[n++] = (uint8_t)(a->offset >> (8 * k));
    }
    return n;
}

/* ------------------------------------------------------------------------ */
/* Entry stub                                                                */

/*
 * Stub i of a block reaches its slot pc-relative (native.c places the slot
 * page right after the stubs; ldr literal reaches +-1 MiB):
 *
 *   D503245F                bti  c
 *   58xxxxxx                ldr  x16, <slot>   ; imm19 = (slot - here) / 4
 *   F9400211                ldr  x17, [x16]    ; ctx word 0: the handler
 *   D61F0220                br   x17
 */
#define STUB_SIZE    16
#define STUB_LOAD_AT 4       /* offset of the ldr literal in a stub */

#define INS_LDR_X17_X16 0xF9400211u /* ldr x17, [x16] */
#define INS_BR_X17      0xD61F0220u /* br x17 */

static void
a64_build_stub(uint8_t *out, int32_t slot_disp)
{
    code_buf b = { out, 0, STUB_SIZE, 0 };
    int32_t disp = slot_disp - STUB_LOAD_AT;   /* slots are 8-aligned */
    emit(&b, INS_BTI_C);
    emit(&b, OP_LDR_LIT_X | (((uint32_t)(disp / 4) & 0x7FFFFu) << 5)
                 | CTX_REG);
    emit(&b, INS_LDR_X17_X16);
    emit(&b, INS_BR_X17);
}

/* ------------------------------------------------------------------------ */
/* The arch                                                                  */

/* native.c lays out a block as stubs then a slot page, in NT_PAGE_SIZE
   units; on a kernel with 16 or 64 KiB pages the slots would share a page
   with code, so such systems get libffi. */
static int
page_size_fits(void)
{
    static long page;
    if (page == 0)
        page = sysconf(_SC_PAGESIZE);
    return page == (long)NT_PAGE_SIZE;
}

static nt_status
a64_supports(const nt_plan *plan)
{
    shape_arg shape[MAX_ARGS];
    if (!page_size_fits() || plan->target == NULL
        || !kind_supported_ret(plan->target->ret.kind)
        || plan_shape(plan, shape) != 0)
        return NT_ERR_UNSUPPORTED;
    return NT_OK;
}

static size_t
a64_shape_key(const nt_plan *plan, uint8_t *key)
{
    shape_arg shape[MAX_ARGS];
    if (plan_shape(plan, shape) != 0)
        return 0;
    return shape_key(shape, plan->nargs, plan->nfwd, key);
}

static size_t
a64_gen_handler(const nt_plan *plan, uint8_t *code, size_t cap)
{
    shape_arg shape[MAX_ARGS];
    if (plan_shape(plan, shape) != 0)
        return 0;
    code_buf b = { code, 0, cap, 0 };
    gen_handler(&b, shape, plan->nargs, plan->nfwd);
    return b.overflow ? 0 : b.len;
}

const nt_arch nt_arch_aarch64_linux = {
    STUB_SIZE,
    a64_build_stub,
    a64_supports,
    a64_shape_key,
    a64_gen_handler,
};
