/*
 * numthunk native engine for x86-64 System V (Linux): plan -> machine code.
 *
 * Place in the pipeline: the architecture half of the native engine. It
 * supplies an nt_arch (native.h): the entry stub's bytes, which plans it can
 * run, the shape key and the handler's code. Stub blocks, slots, the
 * handler cache, executable memory and the quarantine are native.c's and
 * belong to no architecture; plans this file cannot run go to libffi.
 *
 * Layout (DESIGN.md, "Engine layout that we want"):
 *
 *   address --> stub (16 bytes, one per thunk, code identical but for its
 *               rip-relative offset; made 512 at a time and sealed RX)
 *                  endbr64
 *                  mov  r10, [rip + slot]     ; slot: this stub's context
 *                  jmp  [r10]                 ; ctx word 0: the handler
 *           --> handler (one per plan *shape*, generated once, shared)
 *                  moves forwarded args from the thunk's ABI positions to
 *                  the target's, re-extends narrow ints, loads bound values
 *                  from [r10 + 32 + offset], then jmp [r10 + 8] (target),
 *                  or builds a frame and calls when the target needs more
 *                  stack arguments than the caller passed.
 *
 * A thunk costs 16 bytes of stub + 8 bytes of slot + its context (malloc).
 * Making one writes only data (the slot); code is written only for a new
 * shape or a new block of 512 stubs. The slot holds the context pointer, and
 * the context holds handler, target and values, so one aligned release-store
 * of the slot swaps all of them at once (rebind, release).
 *
 * The shape key leaves out what the handler never touches: the return type
 * (rax/rdx/xmm0/xmm1 are passed through untouched: tail jump, or call then
 * ret) and the exact integer kind of bound values (cells are stored
 * pre-extended to 64 bits), so e.g. all plans "two bound ints then one
 * forwarded double" share one handler whatever their types' names.
 *
 * ABI facts used (System V AMD64 psABI 1.0, section 3.2.3): INTEGER class
 * (bool, ints, pointers) in rdi rsi rdx rcx r8 r9, SSE class (float,
 * double) in xmm0-7, the rest in 8-byte stack slots in order, rsp 16-byte
 * aligned at the call; rax is used only for variadic calls (al = vector
 * register count), r10 and r11 are free at entry; the callee owns its
 * incoming argument area, so a handler may rewrite it before a tail jump.
 * Narrow ints: the psABI leaves bits above the type undefined, but GCC and
 * Clang callees assume 32-bit extension and Numba does not provide it, so
 * every forwarded bool/u8/u16 is zero- and every i8/i16 sign-extended.
 *
 * Not handled here (libffi takes them): complex and struct arguments,
 * by-value memoryview slices, struct returns in memory, more than MAX_ARGS
 * parameters.
 *
 * Choices weighed against this layout (measured on the development
 * machine, AMD EPYC under KVM, C loop calling a double(void) thunk over
 * double sum(double *, int)):
 *   - per-thunk code with the bound values as immediates is the fastest
 *     possible trampoline (one jump), but writes code for every thunk; here
 *     it was only ~0.5 ns/call faster than stub + handler (6.8 vs 7.3 ns),
 *     so not worth code writes on the creation path.
 *   - stubs fused with their handler (a block of stubs per shape) save the
 *     same ~0.5 ns but cost at least a block of pages per distinct shape.
 *   - a stub table in the extension's own text, mapped beside a data page
 *     (libffi 3.4 static trampolines) needs to find and re-map our .so file
 *     at run time; with mem_memfd.c our stubs never have a writable view
 *     anyway, and handlers need run-time code in any case.
 *   - prebuilt handlers for common shapes: a new shape costs one handler
 *     generation (a few microseconds with memfd), once per process, so
 *     prebuilding would only add start-up time and memory.
 * Generated code has no unwind tables (the frame form is 3 instructions
 * around a call): debuggers and C++ exceptions see an unknown frame there.
 */
#include <string.h>

#include "native.h"

/* ------------------------------------------------------------------------ */
/* Code buffer: every byte of generated code goes through emit().            */

typedef struct {
    uint8_t *p;
    size_t len, cap;
    int overflow;            /* set once a write did not fit; sticky */
} code_buf;

static void
emit(code_buf *b, const uint8_t *bytes, size_t n)
{
    if (b->overflow || n > b->cap - b->len) {
        b->overflow = 1;
        return;
    }
    memcpy(b->p + b->len, bytes, n);
    b->len += n;
}

/* ------------------------------------------------------------------------ */
/* Registers and opcodes                                                     */

enum {
    RAX = 0, RCX, RDX, RBX, RSP, RBP, RSI, RDI,
    R8, R9, R10, R11, R12, R13, R14, R15
};

static const uint8_t ARG_GPR[6] = { RDI, RSI, RDX, RCX, R8, R9 };
#define N_ARG_GPR 6
#define N_ARG_XMM 8

#define CTX_REG   R10   /* context pointer, loaded by the stub */
#define CYCLE_GPR R11   /* breaks cycles of integer moves */
#define CYCLE_XMM 15    /* breaks cycles of SSE moves */
#define COPY_GPR  RAX   /* memory-to-memory copies, extensions into memory */

/* Opcodes (Intel SDM vol. 2). */
static const uint8_t OP_MOV_RM_R[]  = { 0x89 };        /* mov r/m64, r64 */
static const uint8_t OP_MOV_R_RM[]  = { 0x8B };        /* mov r64, r/m64 */
static const uint8_t OP_MOVZX_B[]   = { 0x0F, 0xB6 };  /* movzx r32, r/m8 */
static const uint8_t OP_MOVZX_W[]   = { 0x0F, 0xB7 };  /* movzx r32, r/m16 */
static const uint8_t OP_MOVSX_B[]   = { 0x0F, 0xBE };  /* movsx r32, r/m8 */
static const uint8_t OP_MOVSX_W[]   = { 0x0F, 0xBF };  /* movsx r32, r/m16 */
static const uint8_t OP_MOVAPS[]    = { 0x0F, 0x28 };  /* movaps x, x/m128 */
static const uint8_t OP_MOVSD_LD[]  = { 0x0F, 0x10 };  /* F2: movsd x, m64 */
static const uint8_t OP_MOVSD_ST[]  = { 0x0F, 0x11 };  /* F2: movsd m64, x */
static const uint8_t OP_GRP5[]      = { 0xFF };        /* /2 call, /4 jmp */
static const uint8_t OP_GRP1_IMM32[] = { 0x81 };       /* /0 add, /5 sub */
#define PFX_F2     0xF2
#define GRP5_CALL  2
#define GRP5_JMP   4
#define GRP1_ADD   0
#define GRP1_SUB   5

static const uint8_t INS_ENDBR64[] = { 0xF3, 0x0F, 0x1E, 0xFA }; /* endbr64 */
static const uint8_t INS_RET[]     = { 0xC3 };                   /* ret */

/* An r/m operand: a register, or [base + disp]. */
typedef struct {
    uint8_t mem;
    uint8_t reg;             /* register, or the base register */
    int32_t disp;
} operand;

static operand
reg_op(int r)
{
    operand o = { 0, (uint8_t)r, 0 };
    return o;
}

static operand
mem_op(int base, int32_t disp)
{
    operand o = { 1, (uint8_t)base, disp };
    return o;
}

/*
 * One instruction of the form [prefix] [REX] opcode ModRM [SIB] [disp].
 * byte_rm: the r/m operand is an 8-bit register; spl/bpl/sil/dil are only
 * reachable with a REX prefix (without one, 4-7 mean ah/ch/dh/bh).
 */
static void
enc(code_buf *b, uint8_t prefix, int w, int byte_rm, const uint8_t *op,
    size_t nop, int reg, operand rm)
{
    uint8_t ins[16];
    size_t n = 0;
    if (prefix)
        ins[n++] = prefix;
    uint8_t rex = (uint8_t)(0x40 | (w ? 8 : 0) | ((reg & 8) ? 4 : 0)
                            | ((rm.reg & 8) ? 1 : 0));
    if (rex != 0x40 || (byte_rm && !rm.mem && rm.reg >= 4))
        ins[n++] = rex;
    memcpy(ins + n, op, nop);
    n += nop;
    if (!rm.mem) {
        ins[n++] = (uint8_t)(0xC0 | ((reg & 7) << 3) | (rm.reg & 7));
    } else {
        int base = rm.reg & 7;
        int mod = (rm.disp == 0 && base != RBP) ? 0
                  : (rm.disp >= -128 && rm.disp <= 127) ? 1 : 2;
        ins[n++] = (uint8_t)((mod << 6) | ((reg & 7) << 3) | base);
        if (base == RSP)
            ins[n++] = 0x24;             /* SIB: base only, no index */
        if (mod == 1) {
            ins[n++] = (uint8_t)(int8_t)rm.disp;
        } else if (mod == 2) {
            uint32_t d = (uint32_t)rm.disp;
            for (int i = 0; i < 4; i++)
                ins[n++] = (uint8_t)(d >> (8 * i));
        }
    }
    emit(b, ins, n);
}

static void
emit_imm32(code_buf *b, int32_t v)
{
    uint32_t u = (uint32_t)v;
    uint8_t bytes[4] = { (uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16),
                         (uint8_t)(u >> 24) };
    emit(b, bytes, 4);
}

static void
mov_r64_rm(code_buf *b, int dst, operand src)
{
    enc(b, 0, 1, 0, OP_MOV_R_RM, sizeof(OP_MOV_R_RM), dst, src);
}

static void
mov_rm_r64(code_buf *b, operand dst, int src)
{
    enc(b, 0, 1, 0, OP_MOV_RM_R, sizeof(OP_MOV_RM_R), src, dst);
}

/* Narrow-integer extensions applied to forwarded arguments. */
enum { EXT_NONE = 0, EXT_ZX8, EXT_SX8, EXT_ZX16, EXT_SX16 };

static void
movx_r32_rm(code_buf *b, int ext, int dst, operand src)
{
    const uint8_t *op = ext == EXT_ZX8 ? OP_MOVZX_B
                      : ext == EXT_SX8 ? OP_MOVSX_B
                      : ext == EXT_ZX16 ? OP_MOVZX_W : OP_MOVSX_W;
    int byte = ext == EXT_ZX8 || ext == EXT_SX8;
    enc(b, 0, 0, byte, op, 2, dst, src);
}

static void
movaps_x_x(code_buf *b, int dst, int src)
{
    enc(b, 0, 0, 0, OP_MOVAPS, sizeof(OP_MOVAPS), dst, reg_op(src));
}

static void
movsd_x_m(code_buf *b, int dst, operand src)
{
    enc(b, PFX_F2, 0, 0, OP_MOVSD_LD, sizeof(OP_MOVSD_LD), dst, src);
}

static void
movsd_m_x(code_buf *b, operand dst, int src)
{
    enc(b, PFX_F2, 0, 0, OP_MOVSD_ST, sizeof(OP_MOVSD_ST), src, dst);
}

static void
jmp_target(code_buf *b)   /* jmp [r10 + 8]: 41 FF 62 08 */
{
    enc(b, 0, 0, 0, OP_GRP5, sizeof(OP_GRP5), GRP5_JMP,
        mem_op(CTX_REG, NT_CTX_TARGET_OFFSET));
}

static void
call_target(code_buf *b)  /* call [r10 + 8]: 41 FF 52 08 */
{
    enc(b, 0, 0, 0, OP_GRP5, sizeof(OP_GRP5), GRP5_CALL,
        mem_op(CTX_REG, NT_CTX_TARGET_OFFSET));
}

static void
rsp_adjust(code_buf *b, int grp1, int32_t n)   /* add/sub rsp, imm32 */
{
    enc(b, 0, 1, 0, OP_GRP1_IMM32, sizeof(OP_GRP1_IMM32), grp1, reg_op(RSP));
    emit_imm32(b, n);
}

/* ------------------------------------------------------------------------ */
/* Argument locations and moves                                              */

enum { CLS_INT = 0, CLS_SSE = 1 };
enum { LOC_GPR = 0, LOC_XMM, LOC_MEM };

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
loc_xmm(int r)
{
    loc l = { LOC_XMM, (uint8_t)r, 0 };
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

static operand
loc_op(loc l)
{
    return l.kind == LOC_MEM ? mem_op(l.reg, l.disp) : reg_op(l.reg);
}

/* dst <- src for one value of class cls, extending a narrow int by ext. */
static void
emit_move(code_buf *b, int cls, int ext, loc dst, loc src)
{
    if (cls == CLS_SSE) {
        if (dst.kind == LOC_XMM && src.kind == LOC_XMM) {
            movaps_x_x(b, dst.reg, src.reg);
        } else if (dst.kind == LOC_XMM) {
            movsd_x_m(b, dst.reg, loc_op(src));
        } else if (src.kind == LOC_XMM) {
            movsd_m_x(b, loc_op(dst), src.reg);
        } else {
            mov_r64_rm(b, COPY_GPR, loc_op(src));
            mov_rm_r64(b, loc_op(dst), COPY_GPR);
        }
        return;
    }
    if (ext != EXT_NONE) {
        int r = dst.kind == LOC_GPR ? dst.reg : COPY_GPR;
        movx_r32_rm(b, ext, r, loc_op(src));
        if (dst.kind != LOC_GPR)
            mov_rm_r64(b, loc_op(dst), COPY_GPR);
        return;
    }
    if (dst.kind == LOC_GPR) {
        mov_r64_rm(b, dst.reg, loc_op(src));
    } else if (src.kind == LOC_GPR) {
        mov_rm_r64(b, loc_op(dst), src.reg);
    } else {
        mov_r64_rm(b, COPY_GPR, loc_op(src));
        mov_rm_r64(b, loc_op(dst), COPY_GPR);
    }
}

typedef struct {
    loc dst, src;
    uint8_t cls, ext, done;
} move;

/*
 * Emits a set of moves as if all happened at once. Destinations are
 * distinct and so are sources (each thunk parameter feeds exactly one
 * target parameter), so the moves form simple chains and cycles: a move
 * runs once no pending move still reads its destination; when only cycles
 * are left, one value is parked in a scratch register (r11 or xmm15, never
 * argument registers), which turns its cycle into a chain. A chain runs to
 * its end before another cycle is broken, so one scratch of each class is
 * enough.
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
            emit_move(b, m[i].cls, m[i].ext, m[i].dst, m[i].src);
            m[i].done = 1;
            left--;
            progressed = 1;
        }
        if (progressed || left == 0)
            continue;
        /* Only cycles remain: park the value the first pending move would
           overwrite, and let its reader take it from the scratch. */
        for (int i = 0; i < n; i++) {
            if (m[i].done)
                continue;
            for (int j = 0; j < n; j++) {
                if (j == i || m[j].done || !loc_eq(m[j].src, m[i].dst))
                    continue;
                loc tmp = m[j].cls == CLS_SSE ? loc_xmm(CYCLE_XMM)
                                              : loc_gpr(CYCLE_GPR);
                emit_move(b, m[j].cls, EXT_NONE, tmp, m[j].src);
                m[j].src = tmp;
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
    /* Returns pass through untouched, so whatever comes back in registers
       (rax, rdx:rax, xmm0, xmm0:xmm1 for complex) is fine; a struct
       returned in memory would take rdi and shift every argument. */
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
        shape_arg a = { NT_IS_FLOAT(s->kind) ? CLS_SSE : CLS_INT, EXT_NONE,
                        0, 0, 0 };
        if (s->src == NT_SRC_BOUND) {
            if (s->offset > (1u << 30) || (s->offset & 7))
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

/* Assigns System V locations to a parameter list given by class; stack
   slot k is at [rsp + stack_base + 8k]. Returns the number of stack slots. */
static int
assign_locations(const uint8_t *cls, int n, int32_t stack_base, loc *out)
{
    int ngpr = 0, nxmm = 0, nstack = 0;
    for (int i = 0; i < n; i++) {
        if (cls[i] == CLS_INT && ngpr < N_ARG_GPR)
            out[i] = loc_gpr(ARG_GPR[ngpr++]);
        else if (cls[i] == CLS_SSE && nxmm < N_ARG_XMM)
            out[i] = loc_xmm(nxmm++);
        else
            out[i] = loc_mem(RSP, stack_base + 8 * nstack++);
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
 * Tail form (target stack args fit in the caller's area):
 *     endbr64; <moves>; jmp [r10+8]
 * Frame form:
 *     endbr64; sub rsp, F; <moves>; call [r10+8]; add rsp, F; ret
 * with F = 8 mod 16, so rsp is 16-byte aligned at the call (it is 8 mod 16
 * at entry, after the caller's call pushed the return address).
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
    int32_t frame = tail ? 0 : 8 * t_stack + ((t_stack & 1) ? 0 : 8);

    /* Incoming stack args sit above the return address; outgoing ones at
       the bottom of our frame, or (tail form) in the same incoming area. */
    assign_locations(fcls, nfwd, frame + 8, floc);
    assign_locations(tcls, nargs, tail ? 8 : 0, tloc);

    emit(b, INS_ENDBR64, sizeof(INS_ENDBR64));
    if (!tail)
        rsp_adjust(b, GRP1_SUB, frame);

    /* 1. Forwarded values, all at once. */
    int n = 0;
    for (int i = 0; i < nargs; i++) {
        if (shape[i].bound)
            continue;
        loc src = floc[shape[i].fwd];
        if (loc_eq(src, tloc[i])) {
            /* Already in place: only the extension is left. */
            if (shape[i].ext != EXT_NONE)
                emit_move(b, CLS_INT, shape[i].ext, tloc[i], tloc[i]);
            continue;
        }
        move m = { tloc[i], src, shape[i].cls, shape[i].ext, 0 };
        mv[n++] = m;
    }
    emit_parallel_moves(b, mv, n);

    /* 2. Bound values, now that no forwarded value is still to be read. */
    for (int i = 0; i < nargs; i++) {
        if (!shape[i].bound)
            continue;
        loc src = loc_mem(CTX_REG,
                          NT_CTX_VALUES_OFFSET + (int32_t)shape[i].offset);
        emit_move(b, shape[i].cls, EXT_NONE, tloc[i], src);
    }

    if (tail) {
        jmp_target(b);
    } else {
        call_target(b);
        rsp_adjust(b, GRP1_ADD, frame);
        emit(b, INS_RET, sizeof(INS_RET));
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
 * Stub i of a block reaches its slot rip-relative (native.c places the slot
 * page right after the stubs):
 *
 *   F3 0F 1E FA             endbr64
 *   4C 8B 15 <disp32>       mov r10, [rip + disp32]   ; disp32 = slot - next
 *   41 FF 22                jmp qword ptr [r10]
 *   CC CC                   int3; int3                ; pad to 16 bytes
 */
#define STUB_SIZE     16
#define STUB_LOAD_END 11     /* offset of the byte after the mov */

static void
x64_build_stub(uint8_t *out, int32_t slot_disp)
{
    int32_t disp = slot_disp - STUB_LOAD_END;
    uint8_t stub[STUB_SIZE] = {
        0xF3, 0x0F, 0x1E, 0xFA,            /* endbr64 */
        0x4C, 0x8B, 0x15, 0, 0, 0, 0,      /* mov r10, [rip+disp32] */
        0x41, 0xFF, 0x22,                  /* jmp qword ptr [r10] */
        0xCC, 0xCC,                        /* int3; int3 */
    };
    for (int k = 0; k < 4; k++)
        stub[7 + k] = (uint8_t)((uint32_t)disp >> (8 * k));
    memcpy(out, stub, STUB_SIZE);
}

/* ------------------------------------------------------------------------ */
/* The arch                                                                  */

static nt_status
x64_supports(const nt_plan *plan)
{
    shape_arg shape[MAX_ARGS];
    if (plan->target == NULL || !kind_supported_ret(plan->target->ret.kind)
        || plan_shape(plan, shape) != 0)
        return NT_ERR_UNSUPPORTED;
    return NT_OK;
}

static size_t
x64_shape_key(const nt_plan *plan, uint8_t *key)
{
    shape_arg shape[MAX_ARGS];
    if (plan_shape(plan, shape) != 0)
        return 0;
    return shape_key(shape, plan->nargs, plan->nfwd, key);
}

static size_t
x64_gen_handler(const nt_plan *plan, uint8_t *code, size_t cap)
{
    shape_arg shape[MAX_ARGS];
    if (plan_shape(plan, shape) != 0)
        return 0;
    code_buf b = { code, 0, cap, 0 };
    gen_handler(&b, shape, plan->nargs, plan->nfwd);
    return b.overflow ? 0 : b.len;
}

const nt_arch nt_arch_x86_64_sysv = {
    STUB_SIZE,
    x64_build_stub,
    x64_supports,
    x64_shape_key,
    x64_gen_handler,
};
