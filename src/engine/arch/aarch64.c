/*
 * numthunk native engine for AArch64: the architecture's half, its ABI
 * descriptions (AAPCS64 as Linux has it, and Apple's arm64 ABI, below) and
 * its encoders.
 *
 * Place in the pipeline: engine, the native engine's architecture file, as
 * engine/arch/x86_64.c is on x86-64. It supplies an nt_arch (engine/native.h): AAPCS64
 * as the handler planner needs it (engine/route.c decides from it which
 * plans run natively, each parameter's location and the order of the
 * moves), the entry stub's words, and an emitter for each step of a
 * handler. Stub blocks, slots, the handler cache, executable memory (with
 * its one instruction-cache flush after code is written) and the
 * quarantine belong to no architecture (engine/native.c, life/quarantine.c); plans the
 * planner refuses go to libffi. The layout is the x86-64 engine's:
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
 * which this engine does not take. Results in x0/x1 or v0-v3 (float and
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
 * by-value memoryview slices, struct returns in memory, more than 128
 * parameters; Windows on Arm, which engine/choose.c sends to libffi, and
 * macOS's executable memory (MAP_JIT), which no memory policy provides yet;
 * kernels with pages larger than 4 KiB, where the stub block layout does
 * not hold (engine/native.c then takes no plan).
 *
 * Instruction count per call, read from the emitted code (docs/engines.md
 * lists more shapes): double(void) over double sum(double *, int), both
 * bound: stub 4 + handler 5 (bti, two ldr, ldr x17, br) = 9 instructions
 * and 2 indirect branches before the target's first instruction, where a
 * direct call with the arguments in registers needs 2 (adr/ldr + mov) + bl.
 * Generated code has no unwind tables (the frame form keeps a frame record
 * for frame-pointer unwinders).
 */
#include "engine/native.h"

/* ------------------------------------------------------------------------ */
/* Instruction words: every one goes through emit(), into nt_code_put.      */

static void emit(nt_code *b, uint32_t ins)
{
    /* AArch64 instruction words are little-endian whatever the data order */
    uint8_t bytes[4] = { (uint8_t)ins, (uint8_t)(ins >> 8), (uint8_t)(ins >> 16),
                         (uint8_t)(ins >> 24) };
    nt_code_put(b, bytes, 4);
}

/* ------------------------------------------------------------------------ */
/* Registers and encoders (Arm ARM, A64 "Encoding index")                    */

#define REG_SP    31 /* as a base register; xzr elsewhere */
#define CTX_REG   16 /* x16: context pointer, loaded by the stub */
#define TMP_GPR   17 /* x17: scratch within one move; branch target */
#define COPY_FPR  16 /* v16: memory-to-memory copies */
#define CYCLE_FPR 17 /* v17: a parked value while breaking a cycle */

#define INS_BTI_C     0xD503245Fu /* bti c */
#define INS_RET       0xD65F03C0u /* ret */
#define INS_PUSH_FP   0xA9BF7BFDu /* stp x29, x30, [sp, #-16]! */
#define INS_POP_FP    0xA8C17BFDu /* ldp x29, x30, [sp], #16 */
#define INS_MOV_FP_SP 0x910003FDu /* mov x29, sp */

/* Load/store, unsigned scaled 12-bit offset: base | imm12 << 10 | Rn << 5
   | Rt, imm12 = offset / access size. */
#define OP_LDR_X   0xF9400000u /* ldr xT, [xN, #off] */
#define OP_STR_X   0xF9000000u /* str xT, [xN, #off] */
#define OP_LDR_D   0xFD400000u /* ldr dT, [xN, #off] */
#define OP_STR_D   0xFD000000u /* str dT, [xN, #off] */
#define OP_LDRB_W  0x39400000u /* ldrb wT, [xN, #off]  (zero-extends) */
#define OP_LDRSB_W 0x39C00000u /* ldrsb wT, [xN, #off] (sign-extends) */
#define OP_LDRH_W  0x79400000u /* ldrh wT, [xN, #off] */
#define OP_LDRSH_W 0x79C00000u /* ldrsh wT, [xN, #off] */
#define OP_LDR_W   0xB9400000u /* ldr wT, [xN, #off] */
#define OP_STRB_W  0x39000000u /* strb wT, [xN, #off] */
#define OP_STRH_W  0x79000000u /* strh wT, [xN, #off] */
#define OP_STR_W   0xB9000000u /* str wT, [xN, #off] */
#define OP_LDR_B   0x3D400000u /* ldr bT, [xN, #off] */
#define OP_LDR_H   0x7D400000u /* ldr hT, [xN, #off] */
#define OP_LDR_S   0xBD400000u /* ldr sT, [xN, #off] */
#define OP_STR_B   0x3D000000u /* str bT, [xN, #off] */
#define OP_STR_H   0x7D000000u /* str hT, [xN, #off] */
#define OP_STR_S   0xBD000000u /* str sT, [xN, #off] */

/* Loads and stores of a location's bytes (1, 2, 4 or 8: an 8-byte slot or
   cell, or a packed stack argument), by register file (NT_LOC_GPR,
   NT_LOC_FPR) and log2 of the size. A GPR load zero-extends. */
static const uint32_t op_load[2][4] = {
    { OP_LDRB_W, OP_LDRH_W, OP_LDR_W, OP_LDR_X },
    { OP_LDR_B, OP_LDR_H, OP_LDR_S, OP_LDR_D },
};
static const uint32_t op_store[2][4] = {
    { OP_STRB_W, OP_STRH_W, OP_STR_W, OP_STR_X },
    { OP_STR_B, OP_STR_H, OP_STR_S, OP_STR_D },
};

/* Bitfield moves on W registers: base | Rn << 5 | Rd. Writing a W register
   clears bits 32-63 of the X register. */
#define OP_UXTB 0x53001C00u /* uxtb wD, wN  (ubfm wD, wN, #0, #7) */
#define OP_SXTB 0x13001C00u /* sxtb wD, wN  (sbfm wD, wN, #0, #7) */
#define OP_UXTH 0x53003C00u /* uxth wD, wN  (ubfm wD, wN, #0, #15) */
#define OP_SXTH 0x13003C00u /* sxth wD, wN  (sbfm wD, wN, #0, #15) */

#define OP_MOV_X     0xAA0003E0u /* mov xD, xM   (orr xD, xzr, xM): | Rm << 16 | Rd */
#define OP_FMOV_D    0x1E604000u /* fmov dD, dN: | Rn << 5 | Rd */
#define OP_FMOV_DX   0x9E670000u /* fmov dD, xN: | Rn << 5 | Rd */
#define OP_FMOV_XD   0x9E660000u /* fmov xD, dN: | Rn << 5 | Rd */
#define OP_BR        0xD61F0000u /* br xN:  | Rn << 5 */
#define OP_BLR       0xD63F0000u /* blr xN: | Rn << 5 */
#define OP_SUB_SP    0xD10003FFu /* sub sp, sp, #imm12: | imm12 << 10 */
#define OP_ADD_SP    0x910003FFu /* add sp, sp, #imm12: | imm12 << 10 */
#define OP_LDR_LIT_X 0x58000000u /* ldr xT, <pc + imm19 * 4>: | imm19 << 5 | Rt */

/* Largest byte offset of a 64-bit load/store with a scaled 12-bit field. */
#define MAX_LDST_OFFSET (4095 * 8)

static uint32_t ldst(uint32_t op, int size, int rt, int rn, int32_t offset)
{
    /* Offsets are checked by the callers' plan limits; a misaligned or
       out-of-range one would silently encode another address, so it is
       refused here as well (sticky through an impossible word). */
    if (offset < 0 || offset % size != 0 || offset / size > 4095)
        return 0; /* udf #0: traps if it ever ran */
    return op | ((uint32_t)(offset / size) << 10) | ((uint32_t)rn << 5) | (uint32_t)rt;
}

static void emit_ldst(nt_code *b, uint32_t op, int size, int rt, int rn, int32_t off)
{
    uint32_t ins = ldst(op, size, rt, rn, off);
    if (ins == 0)
        b->overflow = 1; /* refuse the handler: libffi takes the plan */
    emit(b, ins);
}

static void emit_rr(nt_code *b, uint32_t op, int rd, int rn)
{
    emit(b, op | ((uint32_t)rn << 5) | (uint32_t)rd);
}

static void emit_mov_x(nt_code *b, int rd, int rm)
{
    emit(b, OP_MOV_X | ((uint32_t)rm << 16) | (uint32_t)rd);
}

static void emit_sp_adjust(nt_code *b, uint32_t op, int32_t n)
{
    if (n < 0 || n > 4095) {
        b->overflow = 1;
        return;
    }
    emit(b, op | ((uint32_t)n << 10));
}

/* ------------------------------------------------------------------------ */
/* One step of a handler                                                     */

/* Extends the low bits of GPR rn into wD (bits 32-63 cleared). */
static void emit_ext_reg(nt_code *b, int ext, int rd, int rn)
{
    static const uint32_t op[] = { 0, OP_UXTB, OP_SXTB, OP_UXTH, OP_SXTH };
    emit_rr(b, op[ext], rd, rn);
}

/* Loads a narrow int from memory into wD, extended as ext says. */
static void emit_ext_load(nt_code *b, int ext, int rd, nt_loc src)
{
    static const uint32_t op[] = { 0, OP_LDRB_W, OP_LDRSB_W, OP_LDRH_W, OP_LDRSH_W };
    int size = ext == NT_EXT_ZX8 || ext == NT_EXT_SX8 ? 1 : 2;
    emit_ldst(b, op[ext], size, rd, src.reg, src.disp);
}

/* rt (of register file `file`) <- the bytes at memory location l. */
static void emit_load(nt_code *b, int file, int rt, nt_loc l)
{
    int n = NT_LOC_BYTES(l), lg = n == 1 ? 0 : n == 2 ? 1 : n == 4 ? 2 : 3;
    emit_ldst(b, op_load[file][lg], 1 << lg, rt, l.reg, l.disp);
}

/* The bytes at memory location l <- the low bytes of rt. */
static void emit_store(nt_code *b, int file, int rt, nt_loc l)
{
    int n = NT_LOC_BYTES(l), lg = n == 1 ? 0 : n == 2 ? 1 : n == 4 ? 2 : 3;
    emit_ldst(b, op_store[file][lg], 1 << lg, rt, l.reg, l.disp);
}

/*
 * dst <- src for one value, extending a narrow int by ext. Floats travel
 * as the low half of a d register or 8-byte slot, so one 64-bit move
 * carries either FP kind, and an integer may wait in v17 while a cycle is
 * broken. Memory is read and written with the location's size: 8 bytes
 * for a slot or cell, a packed stack argument's own (Apple). x17 and v16
 * are used only inside one call.
 */
static void emit_move(nt_code *b, int ext, nt_loc dst, nt_loc src)
{
    if (ext != NT_EXT_NONE) {
        /* integer class: src and dst are GPRs, memory, or v17 */
        int r = dst.kind == NT_LOC_GPR ? dst.reg : TMP_GPR;
        if (src.kind == NT_LOC_GPR) {
            emit_ext_reg(b, ext, r, src.reg);
        } else if (src.kind == NT_LOC_MEM) {
            emit_ext_load(b, ext, r, src);
        } else {
            emit_rr(b, OP_FMOV_XD, r, src.reg);
            emit_ext_reg(b, ext, r, r);
        }
        if (dst.kind == NT_LOC_MEM)
            emit_store(b, NT_LOC_GPR, r, dst);
        else if (dst.kind == NT_LOC_FPR)
            emit_rr(b, OP_FMOV_DX, dst.reg, r);
        return;
    }
    switch (dst.kind * 3 + src.kind) {
    case NT_LOC_GPR * 3 + NT_LOC_GPR: emit_mov_x(b, dst.reg, src.reg); break;
    case NT_LOC_GPR * 3 + NT_LOC_FPR: emit_rr(b, OP_FMOV_XD, dst.reg, src.reg); break;
    case NT_LOC_GPR * 3 + NT_LOC_MEM: emit_load(b, NT_LOC_GPR, dst.reg, src); break;
    case NT_LOC_FPR * 3 + NT_LOC_GPR: emit_rr(b, OP_FMOV_DX, dst.reg, src.reg); break;
    case NT_LOC_FPR * 3 + NT_LOC_FPR: emit_rr(b, OP_FMOV_D, dst.reg, src.reg); break;
    case NT_LOC_FPR * 3 + NT_LOC_MEM: emit_load(b, NT_LOC_FPR, dst.reg, src); break;
    case NT_LOC_MEM * 3 + NT_LOC_GPR: emit_store(b, NT_LOC_GPR, src.reg, dst); break;
    case NT_LOC_MEM * 3 + NT_LOC_FPR: emit_store(b, NT_LOC_FPR, src.reg, dst); break;
    default: /* memory to memory */
        emit_load(b, NT_LOC_FPR, COPY_FPR, src);
        emit_store(b, NT_LOC_FPR, COPY_FPR, dst);
        break;
    }
}

/* A bound value for a stack slot goes through x17; every other step is
   one move. */
static void a64_step(nt_code *b, const nt_step *s)
{
    if (s->op == NT_STEP_LOAD && s->dst.kind == NT_LOC_MEM) {
        emit_load(b, NT_LOC_GPR, TMP_GPR, s->src);
        emit_store(b, NT_LOC_GPR, TMP_GPR, s->dst);
        return;
    }
    emit_move(b, s->ext, s->dst, s->src);
}

/*
 * Tail form (the target's stack args fit in the caller's area):
 *     bti c; <steps>; ldr x17, [x16, #8]; br x17
 * Frame form:
 *     bti c; stp x29, x30, [sp, #-16]!; mov x29, sp; sub sp, sp, #F;
 *     <steps>; ldr x17, [x16, #8]; blr x17;
 *     add sp, sp, #F; ldp x29, x30, [sp], #16; ret
 * with F = 8 * (target stack slots) rounded up to 16 (the planner's frame
 * size, below a 16-byte frame record), so sp stays 16-byte aligned (sp
 * alignment is checked by hardware on every sp-based access).
 */
static void a64_enter(nt_code *b, const nt_route *hp)
{
    emit(b, INS_BTI_C);
    if (hp->tail)
        return;
    emit(b, INS_PUSH_FP);
    emit(b, INS_MOV_FP_SP);
    emit_sp_adjust(b, OP_SUB_SP, hp->frame);
}

static void a64_leave(nt_code *b, const nt_route *hp)
{
    emit_ldst(b, OP_LDR_X, 8, TMP_GPR, CTX_REG, NT_CTX_TARGET_OFFSET);
    if (hp->tail) {
        emit(b, OP_BR | (TMP_GPR << 5));
        return;
    }
    emit(b, OP_BLR | (TMP_GPR << 5));
    emit_sp_adjust(b, OP_ADD_SP, hp->frame);
    emit(b, INS_POP_FP);
    emit(b, INS_RET);
}

/* ------------------------------------------------------------------------ */
/* Entry stub                                                                */

/*
 * Stub i of a block reaches its slot pc-relative (engine/native.c places the slot
 * page right after the stubs; ldr literal reaches +-1 MiB):
 *
 *   D503245F                bti  c
 *   58xxxxxx                ldr  x16, <slot>   ; imm19 = (slot - here) / 4
 *   F9400211                ldr  x17, [x16]    ; ctx word 0: the handler
 *   D61F0220                br   x17
 */
#define STUB_SIZE    16
#define STUB_LOAD_AT 4 /* offset of the ldr literal in a stub */

#define INS_LDR_X17_X16 0xF9400211u /* ldr x17, [x16] */
#define INS_BR_X17      0xD61F0220u /* br x17 */

static void a64_build_stub(uint8_t *out, int32_t slot_disp)
{
    nt_code b = { out, 0, STUB_SIZE, 0 };
    int32_t disp = slot_disp - STUB_LOAD_AT; /* slots are 8-aligned */
    emit(&b, INS_BTI_C);
    emit(&b, OP_LDR_LIT_X | (((uint32_t)(disp / 4) & 0x7FFFFu) << 5) | CTX_REG);
    emit(&b, INS_LDR_X17_X16);
    emit(&b, INS_BR_X17);
}

/* ------------------------------------------------------------------------ */
/* The arch                                                                  */

/*
 * Two descriptions of one calling convention, one emitter set. Apple's
 * arm64 ABI ("Writing ARM64 code for Apple platforms") differs from
 * AAPCS64 where a handler can see it only in its stack arguments: each
 * takes its natural size at its natural alignment (a char one byte, an int
 * four) rather than an 8-byte slot. Its other differences need nothing
 * here: the caller extends narrow ints to 32 bits, which the handler does
 * on both (the kind table's ext); x18 is reserved, and a handler touches
 * only argument registers, x16, x17, v16 and v17; char is signed and long
 * double is double, facts of the kind table and the parser, not of a
 * handler. engine/choose.c picks the Apple description on macOS; elsewhere
 * tests/c/test_native.c selects it (nt_native_test_arch) to call
 * Apple-compiled code under qemu (tests/c/aarch64.sh).
 */
// clang-format off
#define AARCH64_ABI(packed)                                                     \
    {                                                                           \
        /* x0-x7 and v0-v7, each class counted on its own */                    \
        .arg_regs = { { 0, 1, 2, 3, 4, 5, 6, 7 }, { 0, 1, 2, 3, 4, 5, 6, 7 } }, \
        .n_arg_regs = { 8, 8 },                                                 \
        .stack_slot = 8, .stack_align = 16, .stack_packed = (packed),           \
        /* the return address is in x30: stack arguments start at sp */         \
        .entry_pushed = 0, .frame_record = 16, /* stp x29, x30 */               \
        .sp_reg = REG_SP, .ctx_reg = CTX_REG,                                   \
        /* one park register serves both classes: fmov moves integers */        \
        .cycle = { { NT_LOC_FPR, CYCLE_FPR, 0, 0 },                             \
                   { NT_LOC_FPR, CYCLE_FPR, 0, 0 } },                           \
        .copy = { TMP_GPR, COPY_FPR },                                          \
        /* x0, x1, v0-v3 (float and double complex are HFAs) come back          \
           untouched; a struct returned in memory would need x8 */              \
        .ret_kinds = NT_KIND_BIT(NT_VOID) | NT_KINDS_SCALAR | NT_KINDS_COMPLEX, \
        /* .ext NULL: narrow ints in registers re-extended to 32 bits as a C    \
           caller does (the kind table's ext), which Apple's ABI requires */    \
        .arg_kinds = NT_KINDS_SCALAR,                                           \
        .max_args = 128,                                                        \
        /* one ldr with a scaled 12-bit offset reaches the cell */              \
        .max_bound_offset = MAX_LDST_OFFSET - NT_CTX_VALUES_OFFSET,             \
    }
// clang-format on

/* AAPCS64 as Linux has it: 8-byte stack slots. */
const nt_arch nt_arch_aarch64_linux = {
    .abi = AARCH64_ABI(0),
    .stub_size = STUB_SIZE,
    .build_stub = a64_build_stub,
    .enter = a64_enter,
    .step = a64_step,
    .leave = a64_leave,
};

/* Apple's arm64 ABI (macOS, iOS): stack arguments packed. */
const nt_arch nt_arch_aarch64_apple = {
    .abi = AARCH64_ABI(1),
    .stub_size = STUB_SIZE,
    .build_stub = a64_build_stub,
    .enter = a64_enter,
    .step = a64_step,
    .leave = a64_leave,
};
