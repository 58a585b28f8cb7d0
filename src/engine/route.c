/*
 * numthunk native engine, the handler planner: plan -> steps, for any
 * architecture described by an nt_abi (engine/route.h).
 *
 * Place in the pipeline: engine, between the plan (plan/plan.c) and the architecture
 * file's emitters (engine/arch/<arch>.c). engine/native.c asks here whether a plan can
 * run natively, for its shape key, and for its handler's code:
 * nt_handler_gen plans the handler, then hands each step to the arch.
 *
 * The handler does, in order:
 *   1. the forwarded arguments, all at once: each moves from its place in
 *      the thunk's signature to its place in the target's (narrow ints
 *      re-extended on the way, or in place when already there);
 *   2. the bound values, loaded from the context once no forwarded value
 *      is still to be read;
 *   3. the transfer: a tail jump when the target's stack arguments fit in
 *      the area the caller passed, else a frame, a call and a return.
 */
#include <string.h>

#include "engine/route.h"
#include "engine/native.h"

void nt_code_put(nt_code *b, const void *bytes, size_t n)
{
    if (b->overflow || n > b->cap - b->len) {
        b->overflow = 1;
        return;
    }
    memcpy(b->p + b->len, bytes, n);
    b->len += n;
}

/* ------------------------------------------------------------------------ */
/* The ABI description                                                       */

static int is_arg_reg(const nt_abi *abi, int file, int reg)
{
    int cls = file == NT_LOC_GPR ? NT_CLS_INT : NT_CLS_FP;
    for (int i = 0; i < abi->n_arg_regs[cls]; i++)
        if (abi->arg_regs[cls][i] == reg)
            return 1;
    return 0;
}

/* An extension table fits its kinds: a float's is none or F32, an
   integer's never F32. */
static int ext_table_fits(const nt_abi *abi, const uint8_t *ext)
{
    for (int k = 0; k < NT_KIND_COUNT; k++) {
        if (ext == NULL || !(abi->arg_kinds & NT_KIND_BIT(k)))
            continue;
        int fp = NT_IS_FLOAT(k);
        if (ext[k] >= NT_EXT_COUNT || (fp && ext[k] != NT_EXT_NONE && ext[k] != NT_EXT_F32)
            || (!fp && ext[k] == NT_EXT_F32))
            return 0;
    }
    return 1;
}

int nt_abi_check(const nt_abi *abi)
{
    if (abi->n_arg_regs[NT_CLS_INT] > NT_MAX_ARG_REGS
        || abi->n_arg_regs[NT_CLS_FP] > NT_MAX_ARG_REGS || abi->max_args < 0
        || abi->max_args > NT_PLAN_MAX_ARGS || abi->stack_slot == 0
        || abi->stack_align % abi->stack_slot != 0 || abi->shadow % abi->stack_slot != 0
        || (abi->stack_align & (abi->stack_align - 1)) != 0
        || (abi->stack_packed && abi->stack_align % 8 != 0) || !ext_table_fits(abi, abi->ext)
        || !ext_table_fits(abi, abi->bound_ext))
        return -1;
    if (is_arg_reg(abi, NT_LOC_GPR, abi->ctx_reg) || abi->copy[NT_LOC_GPR] == abi->ctx_reg)
        return -1;
    for (int file = NT_LOC_GPR; file <= NT_LOC_FPR; file++) {
        int copy = abi->copy[file];
        if (copy != NT_NO_REG && is_arg_reg(abi, file, copy))
            return -1;
    }
    for (int cls = 0; cls < NT_NCLASS; cls++) {
        nt_loc c = abi->cycle[cls];
        if (c.kind == NT_LOC_MEM || is_arg_reg(abi, c.kind, c.reg) || abi->copy[c.kind] == c.reg
            || (c.kind == NT_LOC_GPR && c.reg == abi->ctx_reg))
            return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Plan shapes                                                               */

typedef struct {
    uint8_t cls;
    uint8_t ext; /* abi->ext (or the kind's), abi->bound_ext
                    if bound */
    uint8_t bound;
    uint8_t size;    /* packed stacks: the natural size (1, 2, 4, 8); else 0 */
    uint16_t fwd;    /* forwarded only */
    uint32_t offset; /* bound only */
} shape_arg;

/* A packed stack argument's size as a key's 2 bits: log2 of 1, 2, 4, 8. */
static unsigned size_code(unsigned size)
{
    return size >= 8 ? 3u : size >= 4 ? 2u : size >= 2 ? 1u : 0u;
}

/* The shape of a plan: one entry per target parameter. 0 or -1. */
static int plan_shape(const nt_abi *abi, const nt_plan *plan, shape_arg *out)
{
    if (plan->nargs < 0 || plan->nargs > abi->max_args || plan->nfwd < 0
        || plan->nfwd > plan->nargs)
        return -1;
    uint8_t seen[NT_PLAN_MAX_ARGS] = { 0 };
    for (int i = 0; i < plan->nargs; i++) {
        const nt_slot *s = &plan->slots[i];
        if (s->kind >= NT_KIND_COUNT || !(abi->arg_kinds & NT_KIND_BIT(s->kind)))
            return -1;
        shape_arg a = { NT_IS_FLOAT(s->kind) ? NT_CLS_FP : NT_CLS_INT, NT_EXT_NONE, 0, 0, 0, 0 };
        if (abi->stack_packed) {
            /* scalars only (arg_kinds): their alignment is their size */
            a.size = (uint8_t)nt_kinds[s->kind].size;
            if (a.size != 1 && a.size != 2 && a.size != 4 && a.size != 8)
                return -1;
        }
        if (s->src == NT_SRC_BOUND) {
            /* one load reaches the cell; cells are 8-byte aligned */
            if (s->offset > abi->max_bound_offset || (s->offset & 7))
                return -1;
            a.bound = 1;
            a.offset = s->offset;
            a.ext = abi->bound_ext != NULL ? abi->bound_ext[s->kind] : NT_EXT_NONE;
        } else {
            if (s->fwd >= plan->nfwd || seen[s->fwd]++)
                return -1;
            a.fwd = s->fwd;
            a.ext = abi->ext != NULL ? abi->ext[s->kind] : nt_kinds[s->kind].ext;
        }
        out[i] = a;
    }
    return 0;
}

nt_status nt_handler_supports(const nt_abi *abi, const nt_plan *plan)
{
    shape_arg shape[NT_PLAN_MAX_ARGS];
    if (plan->target == NULL || plan->target->ret.kind >= NT_KIND_COUNT
        || !(abi->ret_kinds & NT_KIND_BIT(plan->target->ret.kind))
        || plan_shape(abi, plan, shape) != 0)
        return NT_ERR_UNSUPPORTED;
    return NT_OK;
}

_Static_assert(2 + 6 * NT_PLAN_MAX_ARGS <= NT_SHAPE_KEY_MAX, "shape key too long");
_Static_assert(NT_PLAN_MAX_ARGS <= 255, "a key byte holds a count");
_Static_assert(NT_EXT_COUNT <= 8, "a key byte holds the extension in 3 bits");
/* key byte: class (bit 0), extension (1-3), bound (4), packed size (5-6) */

size_t nt_handler_key(const nt_abi *abi, const nt_plan *plan, uint8_t *key)
{
    shape_arg shape[NT_PLAN_MAX_ARGS];
    if (plan_shape(abi, plan, shape) != 0)
        return 0;
    size_t n = 0;
    key[n++] = (uint8_t)plan->nargs;
    key[n++] = (uint8_t)plan->nfwd;
    for (int i = 0; i < plan->nargs; i++) {
        const shape_arg *a = &shape[i];
        key[n++] = (uint8_t)(a->cls | (a->ext << 1) | (a->bound << 4)
                             | (a->size != 0 ? size_code(a->size) << 5 : 0));
        key[n++] = (uint8_t)a->fwd;
        for (int k = 0; k < 4; k++)
            key[n++] = (uint8_t)(a->offset >> (8 * k));
    }
    return n;
}

/* ------------------------------------------------------------------------ */
/* Locations                                                                 */

/* The ABI's locations for a parameter list given by class (and natural
   size, for a packed stack); stack slot k is at [sp + stack_base + slot *
   k], or a packed argument at the next multiple of its size. Returns the
   bytes of stack arguments. */
static int assign_locations(const nt_abi *abi, const shape_arg *const *param, int n,
                            int32_t stack_base, nt_loc *out)
{
    int used[NT_NCLASS] = { 0, 0 }, nstack = 0;
    for (int i = 0; i < n; i++) {
        int c = param[i]->cls;
        if (abi->slots_shared) /* one count for both classes: the position */
            used[NT_CLS_INT] = used[NT_CLS_FP] = i;
        if (c == NT_CLS_FP && used[c] == abi->n_arg_regs[c] && abi->fp_in_gpr)
            c = NT_CLS_INT; /* in the integer convention from here */
        if (used[c] < abi->n_arg_regs[c]) {
            nt_loc l = { c == NT_CLS_INT ? NT_LOC_GPR : NT_LOC_FPR, abi->arg_regs[c][used[c]++], 0,
                         0 };
            out[i] = l;
        } else if (abi->stack_packed) {
            int size = param[i]->size;
            nstack = (nstack + size - 1) / size * size;
            nt_loc l = { NT_LOC_MEM, abi->sp_reg, stack_base + nstack, (uint8_t)size };
            out[i] = l;
            nstack += size;
        } else {
            nt_loc l = { NT_LOC_MEM, abi->sp_reg, stack_base + nstack, 0 };
            out[i] = l;
            nstack += abi->stack_slot;
        }
    }
    return nstack;
}

static int loc_eq(nt_loc a, nt_loc b)
{
    return a.kind == b.kind && a.reg == b.reg && a.disp == b.disp
        && (a.kind != NT_LOC_MEM || NT_LOC_BYTES(a) == NT_LOC_BYTES(b));
}

/* Whether writing a clobbers any of b: the same register, or memory whose
   bytes meet (packed stack arguments may meet without being equal). */
static int loc_overlaps(nt_loc a, nt_loc b)
{
    if (a.kind != b.kind || a.reg != b.reg)
        return 0;
    if (a.kind != NT_LOC_MEM)
        return 1;
    return a.disp < b.disp + NT_LOC_BYTES(b) && b.disp < a.disp + NT_LOC_BYTES(a);
}

static void add_step(nt_route *hp, int op, int cls, int ext, nt_loc dst, nt_loc src)
{
    nt_step s = { (uint8_t)op, (uint8_t)cls, (uint8_t)ext, dst, src };
    hp->steps[hp->nsteps++] = s;
}

/* ------------------------------------------------------------------------ */
/* Parallel moves                                                            */

typedef struct {
    nt_loc dst, src;
    uint8_t cls, ext, done;
} move;

/*
 * Schedules a set of moves as if all happened at once. Destinations are
 * distinct and so are sources (each thunk parameter feeds exactly one
 * target parameter), and a destination meets another move's source only
 * by being it (nt_route_make takes the frame form where packed stack
 * arguments would meet otherwise), so the moves form simple chains and
 * cycles: a move runs once no pending move still reads its destination;
 * when only cycles are left, one value is parked in its class's cycle
 * register (already extended), which turns its cycle into a chain. A
 * chain runs to its end before another cycle is broken, so one cycle
 * register per class is enough, and one for both classes where the ABI
 * names the same.
 */
static void schedule_moves(const nt_abi *abi, move *m, int n, nt_route *hp)
{
    int left = n;
    while (left > 0) {
        int progressed = 0;
        for (int i = 0; i < n; i++) {
            if (m[i].done)
                continue;
            /* a move may read its own destination (in place is no move,
               nt_route_make; a packed one may overlap its source) */
            int blocked = 0;
            for (int j = 0; j < n && !blocked; j++)
                blocked = j != i && !m[j].done && loc_overlaps(m[i].dst, m[j].src);
            if (blocked)
                continue;
            add_step(hp, NT_STEP_MOVE, m[i].cls, m[i].ext, m[i].dst, m[i].src);
            m[i].done = 1;
            left--;
            progressed = 1;
        }
        if (progressed) /* the last moves always progress */
            continue;
        /* Only cycles remain (every pending move's destination is another
           one's source): park the first pending move's value in the cycle
           register, extended, and let the move take it from there. Its
           source is free then, and its cycle a chain that ends with it. */
        int i = 0;
        while (m[i].done)
            i++;
        nt_loc park = abi->cycle[m[i].cls];
        add_step(hp, NT_STEP_MOVE, m[i].cls, m[i].ext, park, m[i].src);
        m[i].src = park;
        m[i].ext = NT_EXT_NONE;
    }
}

/* ------------------------------------------------------------------------ */
/* The plan of a handler                                                     */

/* Frame form: the bytes sp goes down below the frame record, enough for
   the target's stack arguments above the shadow space the ABI reserves
   for the callee, and such that sp is aligned at the call (the caller's
   sp was, before it pushed entry_pushed bytes). */
static int32_t frame_size(const nt_abi *abi, int target_stack)
{
    int32_t above = abi->entry_pushed + abi->frame_record;
    int32_t need = abi->shadow + target_stack + above;
    return (int32_t)nt_round_up((size_t)need, abi->stack_align) - above;
}

/* Packed stacks, tail form: whether some forwarded argument's destination
   meets another's source without being it (a byte of an int where a char
   was). The moves would then not be chains and cycles; the frame form
   writes the target's arguments apart from the caller's. */
static int packed_moves_meet(const shape_arg *shape, int nargs, const nt_loc *tloc,
                             const nt_loc *floc)
{
    for (int i = 0; i < nargs; i++) {
        if (shape[i].bound || tloc[i].kind != NT_LOC_MEM)
            continue;
        for (int j = 0; j < nargs; j++) {
            if (j == i || shape[j].bound)
                continue;
            nt_loc src = floc[shape[j].fwd];
            if (loc_overlaps(tloc[i], src) && !loc_eq(tloc[i], src))
                return 1;
        }
    }
    return 0;
}

/* The extension of a value written to loc: none into a packed stack
   argument, which holds the value's own bytes only. */
static int ext_into(const nt_abi *abi, int ext, nt_loc loc)
{
    return abi->stack_packed && loc.kind == NT_LOC_MEM ? NT_EXT_NONE : ext;
}

int nt_route_make(const nt_abi *abi, const nt_plan *plan, nt_route *hp)
{
    shape_arg shape[NT_PLAN_MAX_ARGS];
    const shape_arg *tparam[NT_PLAN_MAX_ARGS], *fparam[NT_PLAN_MAX_ARGS];
    nt_loc tloc[NT_PLAN_MAX_ARGS], floc[NT_PLAN_MAX_ARGS];
    move mv[NT_PLAN_MAX_ARGS];
    int nargs = plan->nargs, nfwd = plan->nfwd;

    if (plan_shape(abi, plan, shape) != 0)
        return -1;
    for (int i = 0; i < nargs; i++) {
        tparam[i] = &shape[i];
        if (!shape[i].bound)
            fparam[shape[i].fwd] = &shape[i];
    }
    hp->nsteps = 0;
    hp->target_stack = assign_locations(abi, tparam, nargs, 0, tloc);
    hp->thunk_stack = assign_locations(abi, fparam, nfwd, 0, floc);
    hp->tail = hp->target_stack <= hp->thunk_stack;
    if (hp->tail && abi->stack_packed) {
        assign_locations(abi, fparam, nfwd, abi->entry_pushed, floc);
        assign_locations(abi, tparam, nargs, abi->entry_pushed, tloc);
        hp->tail = !packed_moves_meet(shape, nargs, tloc, floc);
    }
    hp->frame = hp->tail ? 0 : frame_size(abi, hp->target_stack);

    /* Incoming stack arguments sit above what the caller pushed and the
       shadow space (and our frame); outgoing ones above the shadow space
       at the bottom of our frame, or (tail form) in the same incoming
       area. */
    int32_t in_base =
        abi->entry_pushed + abi->shadow + (hp->tail ? 0 : abi->frame_record + hp->frame);
    assign_locations(abi, fparam, nfwd, in_base, floc);
    assign_locations(abi, tparam, nargs, abi->shadow + (hp->tail ? abi->entry_pushed : 0), tloc);

    /* 1. Forwarded values, all at once. */
    int n = 0;
    for (int i = 0; i < nargs; i++) {
        if (shape[i].bound)
            continue;
        nt_loc src = floc[shape[i].fwd];
        int ext = ext_into(abi, shape[i].ext, tloc[i]);
        if (loc_eq(src, tloc[i])) {
            /* Already in place: only the extension is left. */
            if (ext != NT_EXT_NONE)
                add_step(hp, NT_STEP_MOVE, shape[i].cls, ext, tloc[i], tloc[i]);
            continue;
        }
        move m = { tloc[i], src, shape[i].cls, (uint8_t)ext, 0 };
        mv[n++] = m;
    }
    schedule_moves(abi, mv, n, hp);

    /* 2. Bound values, now that no forwarded value is still to be read. */
    for (int i = 0; i < nargs; i++) {
        if (!shape[i].bound)
            continue;
        nt_loc src = { NT_LOC_MEM, abi->ctx_reg, NT_CTX_VALUES_OFFSET + (int32_t)shape[i].offset,
                       0 };
        add_step(hp, NT_STEP_LOAD, shape[i].cls, ext_into(abi, shape[i].ext, tloc[i]), tloc[i],
                 src);
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Code                                                                      */

size_t nt_handler_gen(const nt_arch *arch, const nt_plan *plan, uint8_t *code, size_t cap)
{
    nt_route hp;
    if (nt_route_make(&arch->abi, plan, &hp) != 0)
        return 0;
    nt_code b = { code, 0, cap, 0 };
    arch->enter(&b, &hp);
    for (int i = 0; i < hp.nsteps; i++)
        arch->step(&b, &hp.steps[i]);
    arch->leave(&b, &hp);
    return b.overflow ? 0 : b.len;
}
