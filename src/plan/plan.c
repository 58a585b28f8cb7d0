/*
 * Binding plans, their cache, and contexts (ABI-independent).
 *
 * A plan says, for each target parameter, whether the thunk's caller
 * forwards it or a bound value cell in the context supplies it. Engines
 * read plans; they never see Python objects. Cells are 8-byte aligned so
 * the engine can load any scalar cell with one 64-bit move.
 *
 * Place in the pipeline: plan, after parse: a signature and a binding pattern
 * in, the plan the conversion and the engines read out.
 */
#include "numthunk.h"
#include "portable.h"
#include <stddef.h>

#include <stdlib.h>
#include <string.h>

nt_plan *nt_plan_new(const nt_sig *target, nt_error *err)
{
    nt_plan *plan = calloc(1, sizeof(*plan));
    if (plan == NULL)
        goto nomem;
    plan->target = target;
    plan->nargs = target->nargs;
    if (target->nargs > 0) {
        plan->slots = calloc((size_t)target->nargs, sizeof(nt_slot));
        plan->fwd_index = calloc((size_t)target->nargs, sizeof(int));
        if (plan->slots == NULL || plan->fwd_index == NULL)
            goto nomem;
    }
    for (int i = 0; i < target->nargs; i++)
        plan->slots[i].kind = target->args[i].kind;
    return plan;
nomem:
    nt_plan_free(plan);
    nt_fail(err, NT_ERR_MEMORY, -1, "out of memory building a plan");
    return NULL;
}

void nt_plan_set_arg(nt_plan *plan, int i)
{
    plan->slots[i].src = NT_SRC_ARG;
}

void nt_plan_set_bound(nt_plan *plan, int i)
{
    plan->slots[i].src = NT_SRC_BOUND;
}

int nt_plan_finish(nt_plan *plan, nt_error *err)
{
    size_t offset = 0;
    int nfwd = 0;
    for (int i = 0; i < plan->nargs; i++) {
        nt_slot *s = &plan->slots[i];
        if (s->src == NT_SRC_ARG) {
            s->fwd = (uint16_t)nfwd;
            plan->fwd_index[nfwd++] = i;
        } else {
            s->offset = (uint32_t)offset;
            offset += nt_cell_size(&plan->target->args[i]);
        }
    }
    if (offset > UINT32_MAX / 2)
        return nt_fail(err, NT_ERR_VALUE, -1, "too many bound values");
    plan->nfwd = nfwd;
    plan->values_size = offset;
    return NT_OK;
}

void nt_plan_free(nt_plan *plan)
{
    if (plan == NULL)
        return;
    if (plan->engine != NULL && plan->engine->plan_release != NULL)
        plan->engine->plan_release(plan);
    free(plan->slots);
    free(plan->fwd_index);
    free(plan->text);
    nt_what_unref(plan->what);
    free(plan);
}

size_t nt_ctx_size(const nt_plan *plan)
{
    size_t size = NT_CTX_VALUES_OFFSET + plan->values_size;
    return (size + 15) & ~(size_t)15;
}

void nt_ctx_init(nt_ctx *ctx, const nt_plan *plan, void *target)
{
    memset(ctx, 0, nt_ctx_size(plan));
    ctx->handler = plan->handler;
    ctx->target = target;
}

nt_ctx *nt_ctx_new(const nt_plan *plan, void *target, nt_error *err)
{
    /* 16-byte alignment so complex cells and SSE loads never straddle. */
    nt_ctx *ctx = nt_aligned_alloc(16, nt_ctx_size(plan));
    if (ctx == NULL) {
        nt_fail(err, NT_ERR_MEMORY, -1, "out of memory allocating a context");
        return NULL;
    }
    nt_ctx_init(ctx, plan, target);
    return ctx;
}

void nt_ctx_free_chain(nt_ctx *ctx, const nt_ctx *keep)
{
    while (ctx != NULL) {
        nt_ctx *older = ctx->older;
        if (ctx != keep)
            nt_aligned_free(ctx);
        ctx = older;
    }
}

/* ---- the plan cache ---- */

static nt_plan *make_plan(const nt_sig *sig, const uint8_t *pattern, const nt_engine *wanted,
                          nt_engine_chooser choose, nt_error *err)
{
    nt_plan *plan = nt_plan_new(sig, err);
    if (plan == NULL)
        return NULL;
    for (int i = 0; i < sig->nargs; i++) {
        if (pattern[i])
            nt_plan_set_arg(plan, i);
        else
            nt_plan_set_bound(plan, i);
    }
    if (nt_plan_finish(plan, err) != NT_OK)
        goto error;
    const nt_engine *engine = choose(plan, wanted, err);
    if (engine == NULL)
        goto error;
    plan->engine = engine;
    if (engine->prepare(plan, err) != NT_OK)
        goto error;
    return plan;
error:
    nt_plan_free(plan);
    return NULL;
}

nt_plan *nt_plan_cache_get(nt_plan_cache *cache, const nt_sig *sig, const uint8_t *pattern,
                           const nt_engine *wanted, nt_engine_chooser choose, int *owned,
                           nt_error *err)
{
    size_t n = (size_t)sig->nargs;
    for (int k = 0; k < cache->n; k++) {
        nt_plan_slot *slot = &cache->slots[k];
        if (slot->wanted == wanted && (n == 0 || memcmp(slot->pattern, pattern, n) == 0)) {
            *owned = 0;
            return slot->plan;
        }
    }
    nt_plan *plan = make_plan(sig, pattern, wanted, choose, err);
    if (plan == NULL)
        return NULL;
    *owned = 1;
    if (cache->n < NT_PLAN_CACHE) {
        uint8_t *copy = malloc(n > 0 ? n : 1);
        if (copy != NULL) {
            memcpy(copy, pattern, n);
            cache->slots[cache->n++] = (nt_plan_slot){ plan, wanted, copy };
            *owned = 0;
        }
    }
    return plan;
}

void nt_plan_cache_free(nt_plan_cache *cache)
{
    for (int k = 0; k < cache->n; k++) {
        nt_plan_free(cache->slots[k].plan);
        free(cache->slots[k].pattern);
    }
    cache->n = 0;
}
