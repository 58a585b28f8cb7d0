/*
 * The handler planner (src/engine/route.c) on its own, against a model of
 * the machine. For random plans (forwarded parameters in any order, so
 * that moves form cycles) and several ABI descriptions, the planned steps
 * run on a simulated register file, stack and context, and then every
 * target parameter must hold what the target has to see: its bound cell
 * or its forwarded value, widened as the ABI says. Nothing else may be
 * written but the target's argument locations and the cycle registers,
 * the return address and frame record stay untouched, and sp is aligned
 * at a call. The ABIs: x86-64 System V, Microsoft x64 (slots shared by
 * position, 32 bytes of shadow space) and AArch64 as their arch files
 * describe them (the real nt_abi, compiled from src/engine/arch/ on any
 * host), a RISC-V 64 LP64D description (floats overflowing into integer
 * registers, 32-bit ints sign-extended to 64 bits, 32-bit floats) and
 * small made-up ones that run out of registers at once.
 *
 * Where each parameter sits is worked out here from the ABI's rules, apart
 * from the planner's own code: the model is the oracle. The emitters are
 * tested by tests/c/test_native.c, against real compilers.
 *
 *   gcc -Wall -Wextra -Werror -std=c11 -D_GNU_SOURCE -Isrc \
 *       src/engine/route.c src/kinds.c src/engine/arch/x86_64.c src/engine/arch/aarch64.c \
 *       tests/c/test_route.c -o test_route -lffi
 *   ./test_route [PLANS [SEED]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/native.h"
#include "check.h"

extern const nt_arch nt_arch_x86_64_sysv, nt_arch_x86_64_win64, nt_arch_aarch64_linux,
    nt_arch_aarch64_apple;

/* ------------------------------------------------------------------------ */
/* ABI descriptions besides the arch files'                                  */

/* RV64: narrow ints widened by their sign, 32-bit ints sign-extended to 64
   bits, floats NaN-boxed (a 32-bit float is moved as one); the same for
   bound cells of those kinds. */
static const uint8_t rv_ext[NT_KIND_COUNT] = {
    [NT_BOOL] = NT_EXT_ZX8, [NT_U8] = NT_EXT_ZX8, [NT_I8] = NT_EXT_SX8,
    [NT_U16] = NT_EXT_ZX16, [NT_I16] = NT_EXT_SX16,
    [NT_I32] = NT_EXT_SX32, [NT_U32] = NT_EXT_SX32, [NT_F32] = NT_EXT_F32,
};
static const uint8_t rv_bound_ext[NT_KIND_COUNT] = {
    [NT_U32] = NT_EXT_SX32, [NT_F32] = NT_EXT_F32,
};

/* What a C caller does (GCC and Clang on x86-64, Apple's arm64 ABI): bool,
   u8, u16 zero- and i8, i16 sign-extended to 32 bits. An ABI whose ext is
   NULL widens so (the kind table's ext column). */
static const uint8_t c_caller_ext[NT_KIND_COUNT] = {
    [NT_BOOL] = NT_EXT_ZX8, [NT_U8] = NT_EXT_ZX8, [NT_I8] = NT_EXT_SX8,
    [NT_U16] = NT_EXT_ZX16, [NT_I16] = NT_EXT_SX16,
};

static int
fwd_ext(const nt_abi *abi, int kind)
{
    return abi->ext != NULL ? abi->ext[kind] : c_caller_ext[kind];
}

static const nt_abi riscv64 = {
    .arg_regs = { { 10, 11, 12, 13, 14, 15, 16, 17 },       /* a0-a7 */
                  { 10, 11, 12, 13, 14, 15, 16, 17 } },     /* fa0-fa7 */
    .n_arg_regs = { 8, 8 },
    .stack_slot = 8, .stack_align = 16,
    .entry_pushed = 0, .frame_record = 16,                  /* ra, s0 */
    .sp_reg = 2, .ctx_reg = 31,                             /* sp, t6 */
    .cycle = { { NT_LOC_GPR, 5, 0 }, { NT_LOC_FPR, 0, 0 } }, /* t0, ft0 */
    .copy = { 6, 1 },                                       /* t1, ft1 */
    .fp_in_gpr = 1,
    .arg_kinds = NT_KINDS_SCALAR,
    .ret_kinds = NT_KIND_BIT(NT_VOID) | NT_KINDS_SCALAR | NT_KINDS_COMPLEX,
    .ext = rv_ext, .bound_ext = rv_bound_ext,
    .max_args = 128, .max_bound_offset = 2047 - NT_CTX_VALUES_OFFSET,
};

/* Two integer registers, one FP register, a return address pushed: almost
   everything on the stack, and cycles through stack slots. */
static const nt_abi tiny = {
    .arg_regs = { { 3, 0 }, { 5 } },
    .n_arg_regs = { 2, 1 },
    .stack_slot = 8, .stack_align = 16,
    .entry_pushed = 8, .frame_record = 0,
    .sp_reg = 15, .ctx_reg = 14,
    .cycle = { { NT_LOC_GPR, 13, 0 }, { NT_LOC_FPR, 7, 0 } },
    .copy = { 12, NT_NO_REG },
    .arg_kinds = NT_KINDS_SCALAR,
    .ret_kinds = NT_KIND_BIT(NT_VOID) | NT_KINDS_SCALAR,
    .ext = NULL,
    .max_args = 40, .max_bound_offset = 1u << 20,
};

/* One register of each class, floats overflowing into the integer one,
   one cycle register for both classes, a 32-byte stack alignment and a
   frame record: every rule of the planner at its smallest. */
static const nt_abi tiny_shared = {
    .arg_regs = { { 1 }, { 2 } },
    .n_arg_regs = { 1, 1 },
    .stack_slot = 8, .stack_align = 32,
    .entry_pushed = 0, .frame_record = 16,
    .sp_reg = 31, .ctx_reg = 9,
    .cycle = { { NT_LOC_FPR, 6, 0 }, { NT_LOC_FPR, 6, 0 } },
    .copy = { 8, 7 },
    .fp_in_gpr = 1,
    .arg_kinds = NT_KINDS_SCALAR,
    .ret_kinds = NT_KIND_BIT(NT_VOID) | NT_KINDS_SCALAR,
    .ext = rv_ext, .bound_ext = rv_bound_ext,
    .max_args = 24, .max_bound_offset = 4096,
};

/* Stack arguments packed to their natural size and alignment (as Apple's
   arm64 ABI has them), with few registers and a return address pushed:
   chars, shorts and ints share 8 bytes, and the forwarded and the target's
   stack arguments meet at odd offsets. */
static const nt_abi tiny_packed = {
    .arg_regs = { { 3, 0 }, { 5 } },
    .n_arg_regs = { 2, 1 },
    .stack_slot = 8, .stack_align = 16, .stack_packed = 1,
    .entry_pushed = 8, .frame_record = 0,
    .sp_reg = 15, .ctx_reg = 14,
    .cycle = { { NT_LOC_GPR, 13, 0, 0 }, { NT_LOC_FPR, 7, 0, 0 } },
    .copy = { 12, 6 },
    .arg_kinds = NT_KINDS_SCALAR,
    .ret_kinds = NT_KIND_BIT(NT_VOID) | NT_KINDS_SCALAR,
    .ext = NULL,
    .max_args = 40, .max_bound_offset = 1u << 20,
};

/* Slots shared by position as Microsoft x64 shares them, but two of them,
   16 bytes of shadow space, a 32-byte stack alignment and a frame record:
   positions run out at once and the shadow space is no multiple of the
   alignment. */
static const nt_abi tiny_win = {
    .arg_regs = { { 2, 1 }, { 0, 3 } },
    .n_arg_regs = { 2, 2 },
    .slots_shared = 1, .shadow = 16,
    .stack_slot = 8, .stack_align = 32,
    .entry_pushed = 8, .frame_record = 16,
    .sp_reg = 4, .ctx_reg = 10,
    .cycle = { { NT_LOC_GPR, 11, 0, 0 }, { NT_LOC_FPR, 5, 0, 0 } },
    .copy = { 0, NT_NO_REG },
    .arg_kinds = NT_KINDS_SCALAR,
    .ret_kinds = NT_KIND_BIT(NT_VOID) | NT_KINDS_SCALAR,
    .ext = NULL,
    .max_args = 40, .max_bound_offset = 1u << 20,
};

/* ------------------------------------------------------------------------ */
/* The machine model                                                         */

#define NREG   64
#define STACK  4096                  /* words */
#define CALLER_SP (STACK / 2 * 8)    /* byte address, 16- and 32-aligned */

typedef struct {
    uint64_t reg[2][NREG];           /* [NT_LOC_GPR or NT_LOC_FPR][reg] */
    uint8_t stack[STACK * 8];        /* by byte address */
    uint8_t wrote_reg[2][NREG];
    int64_t sp;
    const uint64_t *cells;           /* the context's value cells */
    int ncells;
    int bad;                         /* a read or write outside the model */
} machine;

/* The value at l, or (write) v stored there: a register whole, memory as
   many bytes as the location says (little-endian), aligned to them. */
static uint64_t
loc_access(machine *m, const nt_abi *abi, nt_loc l, int write, uint64_t v)
{
    if (l.kind != NT_LOC_MEM) {
        if (l.reg >= NREG) {
            m->bad = 1;
            return 0;
        }
        if (write) {
            m->wrote_reg[l.kind][l.reg] = 1;
            m->reg[l.kind][l.reg] = v;
        }
        return m->reg[l.kind][l.reg];
    }
    if (l.reg == abi->ctx_reg && !write) {
        int32_t at = l.disp - NT_CTX_VALUES_OFFSET;
        if (at < 0 || at % 8 != 0 || at / 8 >= m->ncells || NT_LOC_BYTES(l) != 8) {
            m->bad = 1;
            return 0;
        }
        return m->cells[at / 8];
    }
    int64_t addr = m->sp + l.disp;
    int n = NT_LOC_BYTES(l);
    if (l.reg != abi->sp_reg || addr < 0 || addr % n != 0
        || addr + n > (int64_t)sizeof(m->stack)) {
        m->bad = 1;
        return 0;
    }
    uint64_t got = 0;
    for (int b = 0; b < n; b++) {
        if (write)
            m->stack[addr + b] = (uint8_t)(v >> (8 * b));
        got |= (uint64_t)m->stack[addr + b] << (8 * b);
    }
    return got;
}

static uint64_t
widen(int ext, uint64_t v)
{
    switch (ext) {
    case NT_EXT_ZX8: return (uint8_t)v;
    case NT_EXT_SX8: return (uint32_t)(int32_t)(int8_t)v;
    case NT_EXT_ZX16: return (uint16_t)v;
    case NT_EXT_SX16: return (uint32_t)(int32_t)(int16_t)v;
    case NT_EXT_SX32: return (uint64_t)(int64_t)(int32_t)v;
    default: return v;               /* NT_EXT_NONE, NT_EXT_F32 */
    }
}

/* Where the ABI puts a list of parameters of these kinds: registers, or
   stack slot j at byte address base + shadow + slot * j (base: sp at the
   call), or (packed) each at the next multiple of its size. Registers are
   counted per class, or, where the ABI shares its slots (Microsoft x64),
   parameter i may take only register i of its class. Returns the bytes of
   stack arguments. */
typedef struct {
    int kind;                        /* NT_LOC_* */
    int reg;
    int64_t addr;
    int size;                        /* memory: bytes */
} place;

static int
places(const nt_abi *abi, const int *kinds, int n, int64_t base, place *out)
{
    int gpr = 0, fpr = 0, bytes = 0;
    for (int i = 0; i < n; i++) {
        int fp = NT_IS_FLOAT(kinds[i]);
        if (abi->slots_shared)
            gpr = fpr = i;
        if (fp && fpr < abi->n_arg_regs[NT_CLS_FP]) {
            out[i] = (place){ NT_LOC_FPR, abi->arg_regs[NT_CLS_FP][fpr++], 0, 0 };
        } else if ((!fp || abi->fp_in_gpr)
                   && gpr < abi->n_arg_regs[NT_CLS_INT]) {
            out[i] = (place){ NT_LOC_GPR, abi->arg_regs[NT_CLS_INT][gpr++], 0, 0 };
        } else {
            int size = abi->stack_packed ? (int)nt_kinds[kinds[i]].size
                                         : abi->stack_slot;
            bytes = (bytes + size - 1) / size * size;
            out[i] = (place){ NT_LOC_MEM, 0, base + abi->shadow + bytes, size };
            bytes += size;
        }
    }
    return bytes;
}

static uint64_t
at(machine *m, place p, int write, uint64_t v)
{
    if (p.kind != NT_LOC_MEM) {
        if (write)
            m->reg[p.kind][p.reg] = v;
        return m->reg[p.kind][p.reg];
    }
    uint64_t got = 0;
    for (int b = 0; b < p.size; b++) {
        if (write)
            m->stack[p.addr + b] = (uint8_t)(v >> (8 * b));
        got |= (uint64_t)m->stack[p.addr + b] << (8 * b);
    }
    return got;
}

/* Whether two stack places share a byte without being the same. */
static int
meet_apart(place a, place b)
{
    return a.kind == NT_LOC_MEM && b.kind == NT_LOC_MEM
        && a.addr < b.addr + b.size && b.addr < a.addr + a.size
        && (a.addr != b.addr || a.size != b.size);
}

/* ------------------------------------------------------------------------ */
/* Random plans                                                              */

typedef struct {
    nt_sig sig;
    nt_type args[NT_PLAN_MAX_ARGS];
    nt_plan plan;
    nt_slot slots[NT_PLAN_MAX_ARGS];
    int fwd_index[NT_PLAN_MAX_ARGS];
    int kinds[NT_PLAN_MAX_ARGS];
} rplan;

static const int scalar_kinds[] = {
    NT_BOOL, NT_I8, NT_U8, NT_I16, NT_U16, NT_I32, NT_U32, NT_I64, NT_U64,
    NT_F32, NT_F64, NT_PTR, NT_FNPTR,
};
#define NSCALAR (int)(sizeof(scalar_kinds) / sizeof(scalar_kinds[0]))

static void
random_plan(rplan *r, int max_args)
{
    memset(r, 0, sizeof(*r));
    int n = (int)(rng() % 4 == 0 ? rng() % (uint64_t)(max_args + 1)
                                 : rng() % 20);
    if (n > max_args)
        n = max_args;
    int mode = (int)(rng() % 3);     /* 0 mixed, 1 mostly FP, 2 mostly ints */
    int pbound = (int)(rng() % 5);
    int nfwd = 0;
    uint32_t offset = 0;
    for (int i = 0; i < n; i++) {
        int k = scalar_kinds[rng() % NSCALAR];
        if (mode == 1 && rng() % 4 != 0)
            k = rng() & 1 ? NT_F64 : NT_F32;
        else if (mode == 2 && NT_IS_FLOAT(k))
            k = NT_I16;
        r->kinds[i] = k;
        r->args[i].kind = (uint8_t)k;
        r->slots[i].kind = (uint8_t)k;
        if ((int)(rng() % 4) < pbound) {
            r->slots[i].src = NT_SRC_BOUND;
            r->slots[i].offset = offset;
            offset += 8;
        } else {
            r->slots[i].src = NT_SRC_ARG;
            r->fwd_index[nfwd] = i;
            r->slots[i].fwd = (uint16_t)nfwd++;
        }
    }
    /* the thunk's parameters in any order: slot i takes thunk param p[k] */
    int p[NT_PLAN_MAX_ARGS];
    random_permutation(p, nfwd);
    for (int i = 0, k = 0; i < n; i++) {
        if (r->slots[i].src != NT_SRC_ARG)
            continue;
        r->slots[i].fwd = (uint16_t)p[k];
        r->fwd_index[p[k]] = i;
        k++;
    }
    r->sig.ret.kind = NT_F64;
    r->sig.nargs = n;
    r->sig.args = r->args;
    r->plan.target = &r->sig;
    r->plan.nargs = n;
    r->plan.slots = r->slots;
    r->plan.nfwd = nfwd;
    r->plan.fwd_index = r->fwd_index;
    r->plan.values_size = offset;
}

/* ------------------------------------------------------------------------ */
/* One plan through the model                                                */

static int
is_cycle_loc(const nt_abi *abi, nt_loc l)
{
    for (int c = 0; c < NT_NCLASS; c++)
        if (abi->cycle[c].kind == l.kind && abi->cycle[c].reg == l.reg)
            return 1;
    return 0;
}

static int
same_place(place p, nt_loc l, int64_t sp)
{
    if (p.kind != l.kind)
        return 0;
    return p.kind == NT_LOC_MEM ? p.addr == sp + l.disp && p.size == NT_LOC_BYTES(l)
                                : p.reg == l.reg;
}

/* Runs plan r under abi; 0 when every check held. */
static int
run_plan(const char *name, const nt_abi *abi, rplan *r, int it)
{
    static nt_route hp;
    static machine m;
    int before = failures;
    const nt_plan *plan = &r->plan;
    if (nt_route_make(abi, plan, &hp) != 0) {
        CHECK(0, "%s plan %d: refused (%d params)", name, it, plan->nargs);
        return -1;
    }
    CHECK(nt_handler_supports(abi, plan) == NT_OK, "%s plan %d: planned "
          "but not supported", name, it);

    /* the thunk's and the target's parameters, where the ABI puts them */
    int fkinds[NT_PLAN_MAX_ARGS];
    for (int k = 0; k < plan->nfwd; k++)
        fkinds[k] = r->kinds[plan->fwd_index[k]];
    place in[NT_PLAN_MAX_ARGS], out[NT_PLAN_MAX_ARGS];
    int64_t entry_sp = CALLER_SP - abi->entry_pushed;
    int thunk_stack = places(abi, fkinds, plan->nfwd, CALLER_SP, in);
    int target_stack = places(abi, r->kinds, plan->nargs, 0, out);
    CHECK(hp.thunk_stack == thunk_stack && hp.target_stack == target_stack,
          "%s plan %d: stack bytes %d/%d, want %d/%d", name, it,
          hp.thunk_stack, hp.target_stack, thunk_stack, target_stack);
    /* the tail form where the target's stack arguments fit in the
       caller's, unless (packed) a forwarded one would be written where it
       meets another's source without being it */
    int tail = target_stack <= thunk_stack;
    for (int i = 0; i < plan->nargs && tail; i++) {
        if (plan->slots[i].src != NT_SRC_ARG)
            continue;
        place dst = out[i];
        dst.addr += CALLER_SP;
        for (int k = 0; k < plan->nfwd && tail; k++)
            if (k != plan->slots[i].fwd && meet_apart(dst, in[k]))
                tail = 0;
    }
    CHECK(hp.tail == tail, "%s plan %d: form", name, it);
    int64_t call_sp = hp.tail ? entry_sp
                      : entry_sp - abi->frame_record - hp.frame;
    int64_t out_base = hp.tail ? CALLER_SP : call_sp;
    if (!hp.tail) {
        CHECK(call_sp % abi->stack_align == 0, "%s plan %d: sp %% %d = %d at "
              "the call", name, it, abi->stack_align,
              (int)(call_sp % abi->stack_align));
        CHECK(hp.frame >= abi->shadow + target_stack, "%s plan %d: frame %d for %d "
              "bytes and %d bytes of shadow space", name, it, (int)hp.frame, target_stack,
              abi->shadow);
    }
    for (int i = 0; i < plan->nargs; i++)
        if (out[i].kind == NT_LOC_MEM)
            out[i].addr += out_base;

    /* the machine: garbage everywhere, the thunk's arguments in place */
    for (int f = 0; f < 2; f++)
        for (int i = 0; i < NREG; i++)
            m.reg[f][i] = rng();
    for (size_t i = 0; i < sizeof(m.stack); i++)
        m.stack[i] = (uint8_t)rng();
    memset(m.wrote_reg, 0, sizeof(m.wrote_reg));
    uint64_t fwd_val[NT_PLAN_MAX_ARGS], cells[NT_PLAN_MAX_ARGS];
    for (int k = 0; k < plan->nfwd; k++) {
        fwd_val[k] = rng();
        at(&m, in[k], 1, fwd_val[k]);
    }
    for (int i = 0; i < plan->nargs; i++)
        cells[i] = rng();
    uint64_t *cellmem = calloc((size_t)plan->nargs + 1, 8);
    for (int i = 0; i < plan->nargs; i++)
        if (plan->slots[i].src == NT_SRC_BOUND)
            cellmem[plan->slots[i].offset / 8] = cells[i];
    m.cells = cellmem;
    m.ncells = plan->nargs;
    m.bad = 0;
    m.sp = hp.tail ? entry_sp : call_sp;
    uint64_t kept[4];                /* return address, frame record */
    for (int w = 0; w < 4; w++)
        kept[w] = at(&m, (place){ NT_LOC_MEM, 0, entry_sp - 16 + 8 * w, 8 }, 0, 0);

    for (int s = 0; s < hp.nsteps; s++) {
        const nt_step *st = &hp.steps[s];
        uint64_t v = widen(st->ext, loc_access(&m, abi, st->src, 0, 0));
        int allowed = is_cycle_loc(abi, st->dst);
        for (int i = 0; i < plan->nargs && !allowed; i++)
            allowed = same_place(out[i], st->dst, m.sp);
        CHECK(allowed, "%s plan %d step %d: writes %d/%d%+d, no argument "
              "of the target's", name, it, s, st->dst.kind, st->dst.reg,
              (int)st->dst.disp);
        CHECK(st->op != NT_STEP_LOAD || st->src.reg == abi->ctx_reg,
              "%s plan %d step %d: a load not from the context", name, it, s);
        loc_access(&m, abi, st->dst, 1, v);
    }
    CHECK(!m.bad, "%s plan %d: a step outside the registers, stack or "
          "context", name, it);
    for (int w = 0; w < 4; w++) {
        int64_t addr = entry_sp - 16 + 8 * w;
        int record = addr >= entry_sp - abi->frame_record
                     && addr < entry_sp + abi->entry_pushed;
        CHECK(!record || at(&m, (place){ NT_LOC_MEM, 0, addr, 8 }, 0, 0) == kept[w],
              "%s plan %d: the "
              "return address or frame record was overwritten", name, it);
    }

    /* what the target sees */
    for (int i = 0; i < plan->nargs; i++) {
        int k = r->kinds[i];
        const nt_slot *sl = &plan->slots[i];
        uint64_t want = sl->src == NT_SRC_BOUND
            ? widen(abi->bound_ext ? abi->bound_ext[k] : NT_EXT_NONE, cells[i])
            : widen(fwd_ext(abi, k), fwd_val[sl->fwd]);
        uint64_t got = at(&m, out[i], 0, 0);
        /* a float's low 4 bytes; where stack arguments are packed, a
           4-byte value read from one fills only its register's low half,
           and a stack argument holds only its own bytes */
        uint64_t mask = k == NT_F32 || (abi->stack_packed && nt_kinds[k].size == 4)
                            ? 0xFFFFFFFFull : ~0ull;
        if (out[i].kind == NT_LOC_MEM && out[i].size < 8)
            mask &= (1ull << (8 * out[i].size)) - 1;
        CHECK((got & mask) == (want & mask), "%s plan %d arg %d (kind %d, "
              "%s): got %#llx want %#llx", name, it, i, k,
              sl->src == NT_SRC_BOUND ? "bound" : "forwarded",
              (unsigned long long)got, (unsigned long long)want);
    }
    free(cellmem);
    return failures == before ? 0 : -1;
}

/* ------------------------------------------------------------------------ */
/* Code, through an arch's emitters                                          */

static void
check_gen(const char *name, const nt_arch *arch, rplan *r, int it)
{
    static uint8_t code[NT_HANDLER_MAX];
    size_t len = nt_handler_gen(arch, &r->plan, code, sizeof(code));
    CHECK(len > 0, "%s plan %d: no code", name, it);
    /* a buffer one byte short is refused, never overrun */
    if (len > 0) {
        memset(code, 0xA5, sizeof(code));
        size_t short_len = nt_handler_gen(arch, &r->plan, code, len - 1);
        CHECK(short_len == 0 && code[len - 1] == 0xA5, "%s plan %d: %zu "
              "bytes into %zu", name, it, short_len, len - 1);
    }
}

/* ------------------------------------------------------------------------ */
/* What the planner refuses, and its keys                                    */

static void
test_refusals(const char *name, const nt_abi *abi)
{
    rplan r;
    do
        random_plan(&r, abi->max_args);
    while (r.plan.nargs < 3 || r.plan.nfwd < 2);
    CHECK(nt_handler_supports(abi, &r.plan) == NT_OK, "%s: base plan", name);
    nt_plan *p = &r.plan;
    struct { const char *what; int kind; } bad_kinds[] = {
        { "complex argument", NT_C128 }, { "memoryview", NT_MEMVIEW },
        { "DLTensor", NT_DLTENSOR }, { "void argument", NT_VOID },
        { "kind out of range", NT_KIND_COUNT }, { "kind 255", 255 },
    };
    for (size_t i = 0; i < sizeof(bad_kinds) / sizeof(bad_kinds[0]); i++) {
        uint8_t keep = p->slots[1].kind;
        p->slots[1].kind = (uint8_t)bad_kinds[i].kind;
        CHECK(nt_handler_supports(abi, p) != NT_OK, "%s: %s taken", name,
              bad_kinds[i].what);
        p->slots[1].kind = keep;
    }
    uint8_t ret = r.sig.ret.kind;
    r.sig.ret.kind = NT_MEMVIEW;
    CHECK(nt_handler_supports(abi, p) != NT_OK, "%s: memoryview return", name);
    /* out of range, and out of range by a whole word of bits (a shift by
       it would wrap to a kind's bit on x86-64) */
    const int far[] = { NT_KIND_COUNT, NT_KIND_COUNT + 3, 32 + NT_F64, 32 + NT_I32, 255 };
    for (size_t i = 0; i < sizeof(far) / sizeof(far[0]); i++) {
        r.sig.ret.kind = (uint8_t)far[i];
        CHECK(nt_handler_supports(abi, p) != NT_OK, "%s: return kind %d out of "
              "range", name, far[i]);
    }
    r.sig.ret.kind = ret;
    p->target = NULL;
    CHECK(nt_handler_supports(abi, p) != NT_OK, "%s: no target", name);
    p->target = &r.sig;

    int f = r.fwd_index[0], g = r.fwd_index[1];
    uint16_t keep = p->slots[g].fwd;
    p->slots[g].fwd = p->slots[f].fwd;       /* a thunk param used twice */
    CHECK(nt_handler_supports(abi, p) != NT_OK, "%s: duplicate fwd", name);
    p->slots[g].fwd = (uint16_t)p->nfwd;     /* past the thunk's params */
    CHECK(nt_handler_supports(abi, p) != NT_OK, "%s: fwd out of range", name);
    p->slots[g].fwd = keep;
    struct { const char *what; int *field; int value; } counts[] = {
        { "nfwd > nargs", &p->nfwd, p->nargs + 1 },
        { "nfwd < 0", &p->nfwd, -1 },
        { "too many params", &p->nargs, abi->max_args + 1 },
        { "nargs < 0", &p->nargs, -1 },
    };
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
        int keep_count = *counts[i].field;
        *counts[i].field = counts[i].value;
        CHECK(nt_handler_supports(abi, p) != NT_OK, "%s: %s", name,
              counts[i].what);
        *counts[i].field = keep_count;
    }

    nt_slot saved = p->slots[0];
    p->slots[0].src = NT_SRC_BOUND;
    p->slots[0].offset = abi->max_bound_offset + 8;
    CHECK(nt_handler_supports(abi, p) != NT_OK, "%s: cell out of reach", name);
    p->slots[0].offset = 4;
    CHECK(nt_handler_supports(abi, p) != NT_OK, "%s: misaligned cell", name);
    p->slots[0] = saved;
    CHECK(nt_handler_supports(abi, p) == NT_OK, "%s: restored plan", name);
}

static void
test_keys(const char *name, const nt_abi *abi)
{
    uint8_t k1[NT_SHAPE_KEY_MAX], k2[NT_SHAPE_KEY_MAX];
    rplan a, b;
    int ints[] = { NT_I32, NT_I64 }, narrow[] = { NT_I8, NT_U8 };
    for (int round = 0; round < 2; round++) {
        memset(&a, 0, sizeof(a));
        for (int i = 0; i < 2; i++) {
            a.kinds[i] = round ? narrow[i] : ints[i];
            a.slots[i].kind = (uint8_t)a.kinds[i];
            a.args[i].kind = (uint8_t)a.kinds[i];
        }
        a.slots[0].src = NT_SRC_BOUND;           /* bound, then forwarded */
        a.slots[1].fwd = 0;
        a.fwd_index[0] = 1;
        a.sig.ret.kind = NT_F64;
        a.sig.nargs = 2;
        a.sig.args = a.args;
        a.plan = (nt_plan){ &a.sig, 2, a.slots, 1, a.fwd_index, 8, NULL,
                            NULL, NULL, NULL, NULL };
        b = a;
        b.sig.args = b.args;
        b.plan.target = &b.sig;
        b.plan.slots = b.slots;
        b.plan.fwd_index = b.fwd_index;
        b.sig.ret.kind = NT_VOID;                /* returns are not keyed */
        size_t n1 = nt_handler_key(abi, &a.plan, k1);
        size_t n2 = nt_handler_key(abi, &b.plan, k2);
        CHECK(n1 == n2 && n1 > 0 && memcmp(k1, k2, n1) == 0,
              "%s: the return type changed the key", name);
        /* a forwarded int that needs another extension is another shape,
           and so (packed stacks) is one of another size: on the stack it
           is read and written with another access */
        const int other[2][2] = { { NT_U64, NT_I32 }, { NT_I16, NT_BOOL } };
        for (int o = 0; o < 2; o++) {
            int kb = other[round][o], ka = a.kinds[1];
            b.slots[1].kind = (uint8_t)kb;
            n2 = nt_handler_key(abi, &b.plan, k2);
            int differs = n1 != n2 || memcmp(k1, k2, n1) != 0;
            int want = fwd_ext(abi, kb) != fwd_ext(abi, ka)
                       || (abi->stack_packed && nt_kinds[kb].size != nt_kinds[ka].size);
            CHECK(differs == want, "%s: the key of %s for %s %s the "
                  "extension and packed size", name, nt_kind_name(kb),
                  nt_kind_name(ka), differs ? "follows more than" : "misses");
        }
    }
}

static void
test_abi_check(const char *name, const nt_abi *abi)
{
    CHECK(nt_abi_check(abi) == 0, "%s: its ABI description is refused", name);
    nt_abi bad = *abi;
    bad.ctx_reg = abi->arg_regs[NT_CLS_INT][0];
    CHECK(nt_abi_check(&bad) != 0, "%s: context in an argument register", name);
    bad = *abi;
    bad.cycle[NT_CLS_INT] = (nt_loc){ NT_LOC_GPR, abi->arg_regs[NT_CLS_INT][0],
                                      0, 0 };
    CHECK(nt_abi_check(&bad) != 0, "%s: cycle register carries arguments", name);
    bad = *abi;
    bad.cycle[NT_CLS_FP] = (nt_loc){ NT_LOC_MEM, abi->sp_reg, 0, 0 };
    CHECK(nt_abi_check(&bad) != 0, "%s: cycle location in memory", name);
    bad = *abi;
    bad.copy[NT_LOC_FPR] = abi->arg_regs[NT_CLS_FP][0];
    CHECK(nt_abi_check(&bad) != 0, "%s: copy register carries arguments", name);
    bad = *abi;
    bad.max_args = NT_PLAN_MAX_ARGS + 1;
    CHECK(nt_abi_check(&bad) != 0, "%s: more arguments than the planner "
          "holds", name);
    bad = *abi;
    bad.stack_align = 24;
    CHECK(nt_abi_check(&bad) != 0, "%s: alignment not a power of two", name);
    bad = *abi;
    bad.n_arg_regs[NT_CLS_FP] = NT_MAX_ARG_REGS + 1;
    CHECK(nt_abi_check(&bad) != 0, "%s: too many argument registers", name);
    bad = *abi;
    bad.n_arg_regs[NT_CLS_INT] = NT_MAX_ARG_REGS + 1;
    CHECK(nt_abi_check(&bad) != 0, "%s: too many integer argument registers", name);
    bad = *abi;
    bad.max_args = -1;
    CHECK(nt_abi_check(&bad) != 0, "%s: a negative argument count", name);
    bad.max_args = 0;
    CHECK(nt_abi_check(&bad) == 0, "%s: no arguments at all is refused", name);
    bad.max_args = NT_PLAN_MAX_ARGS;
    CHECK(nt_abi_check(&bad) == 0, "%s: as many arguments as the planner holds is "
          "refused", name);
    bad = *abi;
    bad.stack_slot = 0;
    CHECK(nt_abi_check(&bad) != 0, "%s: stack slots of 0 bytes", name);
    bad = *abi;
    bad.shadow = (uint8_t)(abi->stack_slot / 2 + abi->shadow);
    CHECK(nt_abi_check(&bad) != 0, "%s: shadow space that is no multiple of the slot", name);
    bad = *abi;
    bad.stack_slot = 2 * abi->stack_align;
    CHECK(nt_abi_check(&bad) != 0, "%s: an alignment that is no multiple of the slot",
          name);
    bad = *abi;
    bad.copy[NT_LOC_GPR] = abi->ctx_reg;
    CHECK(nt_abi_check(&bad) != 0, "%s: the context register as the copy register", name);
    bad = *abi;
    bad.cycle[NT_CLS_INT] = (nt_loc){ NT_LOC_GPR, abi->ctx_reg, 0, 0 };
    CHECK(nt_abi_check(&bad) != 0, "%s: the context register as a cycle register", name);
    uint8_t ext[NT_KIND_COUNT];
    for (int k = 0; k < NT_KIND_COUNT; k++)
        ext[k] = (uint8_t)fwd_ext(abi, k);
    ext[NT_F64] = NT_EXT_SX8;
    bad = *abi;
    bad.ext = ext;
    CHECK(nt_abi_check(&bad) != 0, "%s: a float extended as an int", name);
    for (int k = 0; k < NT_KIND_COUNT; k++)
        ext[k] = (uint8_t)fwd_ext(abi, k);
    ext[NT_I64] = NT_EXT_COUNT;
    bad.bound_ext = ext;
    bad.ext = abi->ext;
    CHECK(nt_abi_check(&bad) != 0, "%s: an extension out of range", name);
}

/* ------------------------------------------------------------------------ */

int
main(int argc, char **argv)
{
    int count = argc > 1 ? atoi(argv[1]) : 20000;
    uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : 20261129;
    struct {
        const char *name;
        const nt_abi *abi;
        const nt_arch *arch;         /* its emitters, where it has some */
    } abis[] = {
        { "x86_64-sysv", &nt_arch_x86_64_sysv.abi, &nt_arch_x86_64_sysv },
        { "x86_64-win64", &nt_arch_x86_64_win64.abi, &nt_arch_x86_64_win64 },
        { "aarch64-linux", &nt_arch_aarch64_linux.abi, &nt_arch_aarch64_linux },
        { "aarch64-apple", &nt_arch_aarch64_apple.abi, &nt_arch_aarch64_apple },
        { "riscv64-lp64d", &riscv64, NULL },
        { "tiny", &tiny, NULL },
        { "tiny-shared", &tiny_shared, NULL },
        { "tiny-packed", &tiny_packed, NULL },
        { "tiny-win", &tiny_win, NULL },
    };
    for (size_t a = 0; a < sizeof(abis) / sizeof(abis[0]); a++) {
        rng_state = seed + a;
        const nt_abi *abi = abis[a].abi;
        test_abi_check(abis[a].name, abi);
        test_refusals(abis[a].name, abi);
        test_keys(abis[a].name, abi);
        int bad = 0, frames = 0, parks = 0;
        static rplan r;
        for (int it = 0; it < count && bad < 10; it++) {
            random_plan(&r, abi->max_args);
            if (run_plan(abis[a].name, abi, &r, it) != 0)
                bad++;
            nt_route hp;
            nt_route_make(abi, &r.plan, &hp);
            frames += !hp.tail;
            for (int s = 0; s < hp.nsteps; s++)
                parks += is_cycle_loc(abi, hp.steps[s].dst);
            if (abis[a].arch != NULL)
                check_gen(abis[a].name, abis[a].arch, &r, it);
        }
        printf("  %-14s %d plans: %d in the frame form, %d values parked to "
               "break cycles\n", abis[a].name, count, frames, parks);
    }
    if (failures == 0)
        printf("all handler planner tests passed\n");
    else
        printf("%d failures\n", failures);
    return failures != 0;
}
