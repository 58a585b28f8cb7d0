/*
 * numthunk native engine for x86-64: the architecture's half, its ABI
 * descriptions (System V on Linux, Microsoft x64 on Windows) and its
 * encoders, which serve both.
 *
 * Place in the pipeline: engine, the native engine's architecture file. It supplies
 * an nt_arch (engine/native.h): the System V ABI as the handler planner needs it
 * (engine/route.c decides from it which plans run natively, each
 * parameter's location and the order of the moves), the entry stub's
 * bytes, and an emitter for each step of a handler. Stub blocks, slots,
 * the handler cache, executable memory and the quarantine belong to no
 * architecture (engine/native.c, life/quarantine.c); plans the planner refuses go to
 * libffi.
 *
 * Layout (docs/architecture.md, "The context: what word sits where"):
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
 * of the slot swaps all of them at once (rebind, release). Return values
 * (rax/rdx/xmm0/xmm1) pass through untouched: tail jump, or call then ret.
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
 * by-value memoryview slices, struct returns in memory, more than 128
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
 *     at run time; with engine/memory/memfd.c our stubs never have a writable view
 *     anyway, and handlers need run-time code in any case.
 *   - prebuilt handlers for common shapes: a new shape costs one handler
 *     generation (a few microseconds with memfd), once per process, so
 *     prebuilding would only add start-up time and memory.
 * Generated code has no unwind tables (the frame form is 3 instructions
 * around a call): debuggers and C++ exceptions see an unknown frame there.
 */
#include <string.h>

#include "engine/native.h"

/* ------------------------------------------------------------------------ */
/* Registers and opcodes                                                     */

enum { RAX = 0, RCX, RDX, RBX, RSP, RBP, RSI, RDI, R8, R9, R10, R11, R12, R13, R14, R15 };

#define CTX_REG         R10 /* context pointer, loaded by the stub */
#define CYCLE_GPR       R11 /* parks an integer while a cycle of moves breaks */
#define CYCLE_XMM       15  /* parks an SSE value the same way (System V) */
#define COPY_GPR        RAX /* memory-to-memory copies, extensions into memory */
/* Microsoft x64 keeps xmm6-xmm15 for the caller (callee-saved): an SSE
   value waits in xmm5, volatile there and no argument register. r10, r11
   and rax are volatile in both conventions. */
#define CYCLE_XMM_WIN64 5

/* Opcodes (Intel SDM vol. 2). */
// clang-format off
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
// clang-format on

/* An r/m operand: a register, or [base + disp]. */
typedef struct {
    uint8_t mem;
    uint8_t reg; /* register, or the base register */
    int32_t disp;
} operand;

static operand reg_op(int r)
{
    operand o = { 0, (uint8_t)r, 0 };
    return o;
}

static operand mem_op(int base, int32_t disp)
{
    operand o = { 1, (uint8_t)base, disp };
    return o;
}

/*
 * One instruction of the form [prefix] [REX] opcode ModRM [SIB] [disp].
 * byte_rm: the r/m operand is an 8-bit register; spl/bpl/sil/dil are only
 * reachable with a REX prefix (without one, 4-7 mean ah/ch/dh/bh).
 */
static void enc(nt_code *b, uint8_t prefix, int w, int byte_rm, const uint8_t *op, size_t nop,
                int reg, operand rm)
{
    uint8_t ins[16];
    size_t n = 0;
    if (prefix)
        ins[n++] = prefix;
    uint8_t rex = (uint8_t)(0x40 | (w ? 8 : 0) | ((reg & 8) ? 4 : 0) | ((rm.reg & 8) ? 1 : 0));
    if (rex != 0x40 || (byte_rm && !rm.mem && rm.reg >= 4))
        ins[n++] = rex;
    memcpy(ins + n, op, nop);
    n += nop;
    if (!rm.mem) {
        ins[n++] = (uint8_t)(0xC0 | ((reg & 7) << 3) | (rm.reg & 7));
    } else {
        int base = rm.reg & 7;
        int mod = (rm.disp == 0 && base != RBP) ? 0 : (rm.disp >= -128 && rm.disp <= 127) ? 1 : 2;
        ins[n++] = (uint8_t)((mod << 6) | ((reg & 7) << 3) | base);
        if (base == RSP)
            ins[n++] = 0x24; /* SIB: base only, no index */
        if (mod == 1) {
            ins[n++] = (uint8_t)(int8_t)rm.disp;
        } else if (mod == 2) {
            uint32_t d = (uint32_t)rm.disp;
            for (int i = 0; i < 4; i++)
                ins[n++] = (uint8_t)(d >> (8 * i));
        }
    }
    nt_code_put(b, ins, n);
}

static void emit_imm32(nt_code *b, int32_t v)
{
    uint32_t u = (uint32_t)v;
    uint8_t bytes[4] = { (uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16), (uint8_t)(u >> 24) };
    nt_code_put(b, bytes, 4);
}

static void mov_r64_rm(nt_code *b, int dst, operand src)
{
    enc(b, 0, 1, 0, OP_MOV_R_RM, sizeof(OP_MOV_R_RM), dst, src);
}

static void mov_rm_r64(nt_code *b, operand dst, int src)
{
    enc(b, 0, 1, 0, OP_MOV_RM_R, sizeof(OP_MOV_RM_R), src, dst);
}

static void movx_r32_rm(nt_code *b, int ext, int dst, operand src)
{
    const uint8_t *op = ext == NT_EXT_ZX8 ? OP_MOVZX_B
        : ext == NT_EXT_SX8               ? OP_MOVSX_B
        : ext == NT_EXT_ZX16              ? OP_MOVZX_W
                                          : OP_MOVSX_W;
    int byte = ext == NT_EXT_ZX8 || ext == NT_EXT_SX8;
    enc(b, 0, 0, byte, op, 2, dst, src);
}

static void movaps_x_x(nt_code *b, int dst, int src)
{
    enc(b, 0, 0, 0, OP_MOVAPS, sizeof(OP_MOVAPS), dst, reg_op(src));
}

static void movsd_x_m(nt_code *b, int dst, operand src)
{
    enc(b, PFX_F2, 0, 0, OP_MOVSD_LD, sizeof(OP_MOVSD_LD), dst, src);
}

static void movsd_m_x(nt_code *b, operand dst, int src)
{
    enc(b, PFX_F2, 0, 0, OP_MOVSD_ST, sizeof(OP_MOVSD_ST), src, dst);
}

static void jmp_target(nt_code *b) /* jmp [r10 + 8]: 41 FF 62 08 */
{
    enc(b, 0, 0, 0, OP_GRP5, sizeof(OP_GRP5), GRP5_JMP, mem_op(CTX_REG, NT_CTX_TARGET_OFFSET));
}

static void call_target(nt_code *b) /* call [r10 + 8]: 41 FF 52 08 */
{
    enc(b, 0, 0, 0, OP_GRP5, sizeof(OP_GRP5), GRP5_CALL, mem_op(CTX_REG, NT_CTX_TARGET_OFFSET));
}

static void rsp_adjust(nt_code *b, int grp1, int32_t n) /* add/sub rsp, imm32 */
{
    enc(b, 0, 1, 0, OP_GRP1_IMM32, sizeof(OP_GRP1_IMM32), grp1, reg_op(RSP));
    emit_imm32(b, n);
}

/* ------------------------------------------------------------------------ */
/* One step of a handler                                                     */

static operand loc_op(nt_loc l)
{
    return l.kind == NT_LOC_MEM ? mem_op(l.reg, l.disp) : reg_op(l.reg);
}

/* dst <- src for one value of class cls, extending a narrow int by ext.
   rax is the only register written besides dst. */
static void emit_move(nt_code *b, int cls, int ext, nt_loc dst, nt_loc src)
{
    if (cls == NT_CLS_FP) {
        if (dst.kind == NT_LOC_FPR && src.kind == NT_LOC_FPR) {
            movaps_x_x(b, dst.reg, src.reg);
        } else if (dst.kind == NT_LOC_FPR) {
            movsd_x_m(b, dst.reg, loc_op(src));
        } else if (src.kind == NT_LOC_FPR) {
            movsd_m_x(b, loc_op(dst), src.reg);
        } else {
            mov_r64_rm(b, COPY_GPR, loc_op(src));
            mov_rm_r64(b, loc_op(dst), COPY_GPR);
        }
        return;
    }
    if (ext != NT_EXT_NONE) {
        int r = dst.kind == NT_LOC_GPR ? dst.reg : COPY_GPR;
        movx_r32_rm(b, ext, r, loc_op(src));
        if (dst.kind != NT_LOC_GPR)
            mov_rm_r64(b, loc_op(dst), COPY_GPR);
        return;
    }
    if (dst.kind == NT_LOC_GPR) {
        mov_r64_rm(b, dst.reg, loc_op(src));
    } else if (src.kind == NT_LOC_GPR) {
        mov_rm_r64(b, loc_op(dst), src.reg);
    } else {
        mov_r64_rm(b, COPY_GPR, loc_op(src));
        mov_rm_r64(b, loc_op(dst), COPY_GPR);
    }
}

/* A bound value's load is a move like any other: [r10 + 32 + offset]. */
static void x64_step(nt_code *b, const nt_step *s)
{
    emit_move(b, s->cls, s->ext, s->dst, s->src);
}

/*
 * Tail form (target stack args fit in the caller's area):
 *     endbr64; <steps>; jmp [r10+8]
 * Frame form:
 *     endbr64; sub rsp, F; <steps>; call [r10+8]; add rsp, F; ret
 * with F = 8 mod 16 (the planner's frame size: no frame record, 8 bytes of
 * return address pushed), so rsp is 16-byte aligned at the call.
 */
static void x64_enter(nt_code *b, const nt_route *hp)
{
    nt_code_put(b, INS_ENDBR64, sizeof(INS_ENDBR64));
    if (!hp->tail)
        rsp_adjust(b, GRP1_SUB, hp->frame);
}

static void x64_leave(nt_code *b, const nt_route *hp)
{
    if (hp->tail) {
        jmp_target(b);
        return;
    }
    call_target(b);
    rsp_adjust(b, GRP1_ADD, hp->frame);
    nt_code_put(b, INS_RET, sizeof(INS_RET));
}

/* ------------------------------------------------------------------------ */
/* Entry stub                                                                */

/*
 * Stub i of a block reaches its slot rip-relative (engine/native.c places the slot
 * page right after the stubs):
 *
 *   F3 0F 1E FA             endbr64
 *   4C 8B 15 <disp32>       mov r10, [rip + disp32]   ; disp32 = slot - next
 *   41 FF 22                jmp qword ptr [r10]
 *   CC CC                   int3; int3                ; pad to 16 bytes
 */
#define STUB_SIZE     16
#define STUB_LOAD_END 11 /* offset of the byte after the mov */

static void x64_build_stub(uint8_t *out, int32_t slot_disp)
{
    int32_t disp = slot_disp - STUB_LOAD_END;
    // clang-format off
    uint8_t stub[STUB_SIZE] = {
        0xF3, 0x0F, 0x1E, 0xFA,            /* endbr64 */
        0x4C, 0x8B, 0x15, 0, 0, 0, 0,      /* mov r10, [rip+disp32] */
        0x41, 0xFF, 0x22,                  /* jmp qword ptr [r10] */
        0xCC, 0xCC,                        /* int3; int3 */
    };
    // clang-format on
    for (int k = 0; k < 4; k++)
        stub[7 + k] = (uint8_t)((uint32_t)disp >> (8 * k));
    memcpy(out, stub, STUB_SIZE);
}

/* ------------------------------------------------------------------------ */
/* The arch                                                                  */

const nt_arch nt_arch_x86_64_sysv = {
    .abi = {
        .arg_regs = { { RDI, RSI, RDX, RCX, R8, R9 },      /* INTEGER */
                      { 0, 1, 2, 3, 4, 5, 6, 7 } },        /* SSE: xmm0-7 */
        .n_arg_regs = { 6, 8 },
        .stack_slot = 8,
        .stack_align = 16,
        .entry_pushed = 8,            /* the caller's return address */
        .frame_record = 0,            /* sub rsp only: no frame pointer */
        .sp_reg = RSP,
        .ctx_reg = CTX_REG,
        .cycle = { { NT_LOC_GPR, CYCLE_GPR, 0, 0 }, { NT_LOC_FPR, CYCLE_XMM, 0, 0 } },
        .copy = { COPY_GPR, NT_NO_REG },
        /* .ext NULL: narrow ints re-extended to 32 bits, as GCC and Clang
           callees expect of a caller (the kind table's ext) */
        .arg_kinds = NT_KINDS_SCALAR,
        /* rax, rdx:rax, xmm0, xmm0:xmm1 (complex) come back untouched; a
           struct returned in memory would take rdi and shift every
           argument */
        .ret_kinds = NT_KIND_BIT(NT_VOID) | NT_KINDS_SCALAR | NT_KINDS_COMPLEX,
        .max_args = 128,              /* larger plans go to libffi */
        .max_bound_offset = 1u << 30, /* a disp32 reaches any cell */
    },
    .stub_size = STUB_SIZE,
    .build_stub = x64_build_stub,
    .enter = x64_enter,
    .step = x64_step,
    .leave = x64_leave,
};

/*
 * Microsoft x64 (Windows), the same encoders over another description
 * (Microsoft's "x64 calling convention" and "x64 ABI conventions" pages):
 * four argument slots shared by position, argument i in rcx, rdx, r8, r9
 * or xmm0-xmm3 by its type (the other register of its slot unused), then
 * 8-byte stack slots above the caller's 32 bytes of shadow space (the
 * fifth argument at [rsp + 40] on entry), rsp 16-byte aligned at the call.
 * The frame form reserves 32 bytes of shadow space for the target below its
 * stack arguments. rbx, rbp, rdi, rsi, r12-r15 and xmm6-xmm15 are the
 * caller's: the handler writes only argument registers, r10, r11, rax and
 * xmm5. Narrow integers: the convention leaves the bits above them
 * undefined and callees read only the type's own; the handler still
 * extends them to 32 bits, as on System V, which no callee can mind.
 *
 * Returned in registers and passed through: void, integers, pointers and
 * bool in rax, float and double in xmm0. Not run here (libffi takes them):
 * complex values (a double complex is a 16-byte aggregate, passed by
 * reference and returned through a hidden pointer in rcx that shifts every
 * argument by one slot; a float complex is an 8-byte aggregate in rax,
 * which compilers do not agree on for _Complex), struct values, and
 * variadic targets (which want floats copied into integer registers).
 */
const nt_arch nt_arch_x86_64_win64 = {
    .abi = {
        .arg_regs = { { RCX, RDX, R8, R9 },                /* integers */
                      { 0, 1, 2, 3 } },                    /* xmm0-3 */
        .n_arg_regs = { 4, 4 },
        .slots_shared = 1,
        .shadow = 32,
        .stack_slot = 8,
        .stack_align = 16,
        .entry_pushed = 8,            /* the caller's return address */
        .frame_record = 0,
        .sp_reg = RSP,
        .ctx_reg = CTX_REG,
        .cycle = { { NT_LOC_GPR, CYCLE_GPR, 0, 0 }, { NT_LOC_FPR, CYCLE_XMM_WIN64, 0, 0 } },
        .copy = { COPY_GPR, NT_NO_REG },
        .arg_kinds = NT_KINDS_SCALAR,
        .ret_kinds = NT_KIND_BIT(NT_VOID) | NT_KINDS_SCALAR,
        .max_args = 128,
        .max_bound_offset = 1u << 30,
    },
    .stub_size = STUB_SIZE,
    .build_stub = x64_build_stub,
    .enter = x64_enter,
    .step = x64_step,
    .leave = x64_leave,
};
