/*
 * libffi engine: the portable engine that runs every plan on every
 * platform libffi supports, including struct-by-value parameters (Cython
 * memoryview slices) and complex values.
 *
 * Each thunk is an ffi closure whose cif is the thunk's own signature (the
 * forwarded parameters). The closure handler loads the current context with
 * an acquire load, points each target argument either at the caller's
 * forwarded value or at a bound cell, and forwards with ffi_call. libffi
 * widens narrow integers on both sides, so a caller that leaves garbage in
 * the upper bits of an int8 argument (Numba does) still reaches the target
 * correctly extended.
 *
 * Released closures wait in the quarantine shared with the native engine
 * (life/quarantine.h) before libffi may reuse their code memory: addresses live on in
 * places we cannot see. What the handler reads besides the entry (the cifs
 * and the slot table) is in a reference-counted block held by the plan and
 * by every entry until it leaves the quarantine, so a late call through a
 * released closure reaches the trap even after its plan is gone.
 *
 * Place in the pipeline: engine: the portable one; engine/choose.c takes it
 * for plans the native engine does not run.
 */
#include "numthunk.h"
#include "life/quarantine.h"

#ifdef NT_WITHOUT_LIBFFI
/*
 * Built without libffi (-DNT_WITHOUT_LIBFFI, where the platform's libffi is
 * not at hand: tests/c/win64.sh builds the engine so for Windows). The
 * engine takes no plan, and says why where one is asked of it; the native
 * engine's plans then have no fallback when executable memory runs out.
 */
#define NOT_BUILT_IN "numthunk: libffi is not built in (NT_WITHOUT_LIBFFI)"

struct _ffi_type *nt_ffi_type_of(const nt_type *t)
{
    (void)t;
    return NULL;
}

static nt_status ffi_supports(const nt_plan *plan)
{
    (void)plan;
    return NT_ERR_UNSUPPORTED;
}

static nt_status ffi_prepare(nt_plan *plan, nt_error *err)
{
    (void)plan;
    return nt_fail(err, NT_ERR_UNSUPPORTED, -1, NOT_BUILT_IN);
}

static void ffi_plan_release(nt_plan *plan)
{
    (void)plan;
}

static nt_status ffi_entry_new(nt_plan *plan, nt_ctx *ctx, nt_entry_ref *out, void **address,
                               nt_error *err)
{
    (void)plan, (void)ctx, (void)out, (void)address;
    return nt_fail(err, NT_ERR_UNSUPPORTED, -1, NOT_BUILT_IN);
}

static void ffi_entry_swap(nt_entry *entry, nt_ctx *ctx)
{
    (void)entry, (void)ctx;
}

static void ffi_entry_free(nt_entry *entry, nt_what *what)
{
    (void)entry, (void)what;
}

static const char *ffi_memory_policy(void)
{
    return "none (libffi is not built in)";
}

#define FFI_CHAIN_LIMIT 0
#else /* with libffi */

#include <ffi.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    size_t refs; /* the plan's, and one per live entry; atomic */
    ffi_cif target_cif;
    ffi_cif thunk_cif;
    int nargs;
    nt_slot *slots;          /* nargs: a copy of the plan's */
    ffi_type **target_types; /* nargs */
    ffi_type **thunk_types;  /* nfwd */
} ffi_plan;

struct nt_entry {
    nt_ctx *ctx;  /* NULL once released: the handler traps; atomic */
    ffi_plan *fp; /* one reference */
    ffi_closure *closure;
    nt_what *what; /* once released: what the trap names */
};

ffi_type *nt_ffi_type_of(const nt_type *t)
{
    return t->kind < NT_KIND_COUNT ? nt_kinds[t->kind].ffi : NULL;
}

static nt_status ffi_supports(const nt_plan *plan)
{
    if (nt_ffi_type_of(&plan->target->ret) == NULL)
        return NT_ERR_UNSUPPORTED;
    for (int i = 0; i < plan->nargs; i++)
        if (nt_ffi_type_of(&plan->target->args[i]) == NULL)
            return NT_ERR_UNSUPPORTED;
    return NT_OK;
}

static void fp_unref(ffi_plan *fp)
{
    if (fp == NULL || nt_atomic_sub_size(&fp->refs, 1, NT_ACQ_REL) != 0)
        return;
    free(fp->slots);
    free(fp->target_types);
    free(fp->thunk_types);
    free(fp);
}

static void ffi_plan_release(nt_plan *plan)
{
    fp_unref(plan->engine_data);
    plan->engine_data = NULL;
}

/* Sets plan->engine_data; leaves plan->handler alone (a native plan that
   fell back to libffi keeps its handler for its native entries). */
static nt_status ffi_prepare(nt_plan *plan, nt_error *err)
{
    const nt_sig *sig = plan->target;
    ffi_plan *fp = calloc(1, sizeof(*fp));
    if (fp == NULL)
        return nt_fail(err, NT_ERR_MEMORY, -1, "out of memory");
    fp->refs = 1;
    plan->engine_data = fp;
    size_t n = (size_t)(sig->nargs > 0 ? sig->nargs : 1);
    fp->nargs = plan->nargs;
    fp->slots = calloc(n, sizeof(nt_slot));
    fp->target_types = calloc(n, sizeof(ffi_type *));
    fp->thunk_types = calloc(n, sizeof(ffi_type *));
    if (fp->slots == NULL || fp->target_types == NULL || fp->thunk_types == NULL)
        return nt_fail(err, NT_ERR_MEMORY, -1, "out of memory");
    if (plan->nargs > 0) /* a plan of no parameters has no slots (NULL) */
        memcpy(fp->slots, plan->slots, (size_t)plan->nargs * sizeof(nt_slot));
    for (int i = 0; i < sig->nargs; i++)
        fp->target_types[i] = nt_ffi_type_of(&sig->args[i]);
    for (int k = 0; k < plan->nfwd; k++)
        fp->thunk_types[k] = fp->target_types[plan->fwd_index[k]];
    ffi_type *rtype = nt_ffi_type_of(&sig->ret);
    if (ffi_prep_cif(&fp->target_cif, FFI_DEFAULT_ABI, (unsigned)sig->nargs, rtype,
                     fp->target_types)
            != FFI_OK
        || ffi_prep_cif(&fp->thunk_cif, FFI_DEFAULT_ABI, (unsigned)plan->nfwd, rtype,
                        fp->thunk_types)
            != FFI_OK)
        return nt_fail(err, NT_ERR_UNSUPPORTED, -1,
                       "libffi cannot prepare a call interface for this signature");
    return NT_OK;
}

static void ffi_handler(ffi_cif *cif, void *ret, void **args, void *user)
{
    (void)cif;
    nt_entry *entry = user;
    nt_ctx *ctx = nt_atomic_load_ptr(&entry->ctx, NT_ACQUIRE);
    if (ctx == NULL)
        nt_trap_released_at(entry->what != NULL ? entry->what->text : NULL,
                            entry->what != NULL ? entry->what->target : NULL);
    const ffi_plan *fp = entry->fp;
    void **avalues = NT_ALLOCA((fp->nargs > 0 ? (size_t)fp->nargs : 1) * sizeof(void *));
    for (int i = 0; i < fp->nargs; i++) {
        const nt_slot *s = &fp->slots[i];
        avalues[i] = s->src == NT_SRC_ARG ? args[s->fwd] : (void *)(ctx->values + s->offset);
    }
    ffi_call((ffi_cif *)&fp->target_cif, FFI_FN(ctx->target), ret, avalues);
}

static nt_status ffi_entry_new(nt_plan *plan, nt_ctx *ctx, nt_entry_ref *out, void **address,
                               nt_error *err)
{
    ffi_plan *fp = plan->engine_data;
    nt_entry *entry = calloc(1, sizeof(*entry));
    if (entry == NULL)
        return nt_fail(err, NT_ERR_MEMORY, -1, "out of memory");
    void *code = NULL;
    entry->closure = ffi_closure_alloc(sizeof(ffi_closure), &code);
    if (entry->closure == NULL) {
        free(entry);
        return nt_fail(err, NT_ERR_MEMORY, -1,
                       "numthunk: no executable memory left for a thunk: "
                       "libffi could not allocate a closure");
    }
    entry->ctx = ctx;
    if (ffi_prep_closure_loc(entry->closure, &fp->thunk_cif, ffi_handler, entry, code) != FFI_OK) {
        ffi_closure_free(entry->closure);
        free(entry);
        return nt_fail(err, NT_ERR_UNSUPPORTED, -1, "libffi could not prepare a closure");
    }
    nt_atomic_add_size(&fp->refs, 1, NT_RELAXED);
    entry->fp = fp;
    out->engine = &nt_engine_ffi;
    out->entry = entry;
    *address = code;
    return NT_OK;
}

static void ffi_entry_swap(nt_entry *entry, nt_ctx *ctx)
{
    nt_atomic_store_ptr(&entry->ctx, ctx, NT_RELEASE);
}

/* Quarantine leave: no call can reach the closure any more. */
static void entry_leave(void *item)
{
    nt_entry *entry = item;
    ffi_closure_free(entry->closure);
    fp_unref(entry->fp);
    nt_what_unref(entry->what);
    free(entry);
}

static void ffi_entry_free(nt_entry *entry, nt_what *what)
{
    if (entry == NULL)
        return;
    /* A late call traps on the NULL context; it still reads the entry,
       entry->fp and what the trap names, all kept until the entry leaves
       the quarantine (stored first: the release-store publishes it). */
    entry->what = nt_what_ref(what);
    nt_atomic_store_ptr(&entry->ctx, NULL, NT_RELEASE);
    nt_quarantine_push(entry, entry_leave);
}

static const char *ffi_memory_policy(void)
{
    return "libffi closures";
}

/* ---- calls from Python (numthunk.h nt_call) ---- */

struct nt_call {
    ffi_cif cif;
    ffi_type *types[]; /* the forwarded parameters' */
};

nt_call *nt_call_new(const nt_sig *sig, const nt_plan *plan, nt_error *err)
{
    nt_call *call = calloc(1, sizeof(*call) + (size_t)plan->nfwd * sizeof(ffi_type *));
    if (call == NULL) {
        nt_fail(err, NT_ERR_MEMORY, -1, "out of memory");
        return NULL;
    }
    for (int k = 0; k < plan->nfwd; k++)
        call->types[k] = nt_ffi_type_of(&sig->args[plan->fwd_index[k]]);
    if (ffi_prep_cif(&call->cif, FFI_DEFAULT_ABI, (unsigned)plan->nfwd, nt_ffi_type_of(&sig->ret),
                     call->types)
        != FFI_OK) {
        free(call);
        nt_fail(err, NT_ERR_UNSUPPORTED, -1, "libffi cannot call this signature");
        return NULL;
    }
    return call;
}

void nt_call_free(nt_call *call)
{
    free(call);
}

void nt_call_run(const nt_call *call, void *fn, void *ret, void **args)
{
    ffi_call((ffi_cif *)&call->cif, FFI_FN(fn), ret, args);
}

/* A libffi thunk calls its target from its closure handler: measured 0.9
   KiB of stack per level (x86-64, libffi 3.4), so 128 levels fit a 256 KiB
   thread stack with room to spare. */
#define FFI_CHAIN_LIMIT 128
#endif /* NT_WITHOUT_LIBFFI */

const nt_engine nt_engine_ffi = {
    .name = "libffi",
    .chain_limit = FFI_CHAIN_LIMIT,
    .supports = ffi_supports,
    .prepare = ffi_prepare,
    .plan_release = ffi_plan_release,
    .entry_new = ffi_entry_new,
    .entry_swap = ffi_entry_swap,
    .entry_free = ffi_entry_free,
    .memory_policy = ffi_memory_policy,
};
