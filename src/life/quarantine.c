/*
 * numthunk quarantine: belongs to no engine and no architecture
 * (life/quarantine.h).
 *
 * Place in the pipeline: life, beside the engines. engine/native.c pushes released
 * slots, engine/ffi.c released closures; each item leaves, in release
 * order, once config->quarantine later releases have happened. engine/native.c
 * also pushes handler code no plan uses, which waits on the same clock. The
 * fork hooks (life/fork.c) take the quarantine's lock first.
 */
#include <stdint.h>
#include <stdlib.h>

#include "life/quarantine.h"
#include "life/fork.h"
#include "engine/native.h"

static nt_spin q_lock;

nt_spin *nt_quarantine_lock(void)
{
    return &q_lock;
}

/* ------------------------------------------------------------------------ */
/* Quarantine                                                                */

/*
 * Two rings under one lock. Released entries wait for config->quarantine
 * later releases of entries. Handler code no plan uses any more waits on
 * the same clock: it leaves once that many entries were released after it
 * came, so a handler lives at least as long after its last plan as a
 * released entry does after its release.
 */
typedef struct {
    void *item;
    void (*leave)(void *item);
    uint64_t stamp; /* entries released before it came */
} q_entry;

typedef struct {
    q_entry *at; /* oldest first from head */
    size_t cap, head, len;
} q_ring;

static q_ring q_entries, q_code;
static uint64_t q_released; /* entries released so far: the clock */

/* Appends; 0, or -1 if the ring cannot grow. q_lock held. */
static int ring_push(q_ring *r, q_entry e)
{
    if (r->len == r->cap) {
        size_t ncap = r->cap ? 2 * r->cap : 1024;
        q_entry *nq = malloc(ncap * sizeof(*nq));
        if (nq == NULL)
            return -1;
        for (size_t i = 0; i < r->len; i++)
            nq[i] = r->at[(r->head + i) % r->cap];
        free(r->at);
        r->at = nq;
        r->cap = ncap;
        r->head = 0;
    }
    r->at[(r->head + r->len) % r->cap] = e;
    r->len++;
    return 0;
}

static q_entry ring_pop(q_ring *r)
{
    q_entry e = r->at[r->head];
    r->head = (r->head + 1) % r->cap;
    r->len--;
    return e;
}

void nt_code_quarantine_push(void *item, void (*leave)(void *item))
{
    if (nt_config_get()->no_reuse)
        return; /* kept for ever, with every address */
    nt_fork_watch();
    nt_spin_lock(&q_lock);
    (void)ring_push(&q_code, (q_entry){ item, leave, q_released }); /* or kept */
    nt_spin_unlock(&q_lock);
}

void nt_quarantine_push(void *item, void (*leave)(void *item))
{
    const nt_config *cfg = nt_config_get();
    if (cfg->no_reuse)
        return; /* kept for ever: its address never recurs */
    nt_fork_watch();
    q_entry out[3];
    int nout = 0;
    nt_spin_lock(&q_lock);
    nt_atomic_store_u64(&q_released, q_released + 1, NT_RELAXED);
    if (ring_push(&q_entries, (q_entry){ item, leave, q_released }) == 0
        && q_entries.len > cfg->quarantine)
        out[nout++] = ring_pop(&q_entries);
    /* and handlers whose time has come, a few per release: the code ring
       drains faster than releases fill it */
    while (nout < 3 && q_code.len > 0
           && q_released - q_code.at[q_code.head].stamp > cfg->quarantine)
        out[nout++] = ring_pop(&q_code);
    nt_spin_unlock(&q_lock);
    for (int k = 0; k < nout; k++)
        out[k].leave(out[k].item);
}

uint64_t nt_quarantine_clock(void)
{
    return nt_atomic_load_u64(&q_released, NT_RELAXED);
}

int nt_quarantine_holds(uint64_t stamp)
{
    /* asked at every burial and lookup: the configuration read once */
    static const nt_config *config;
    const nt_config *cfg = nt_atomic_load_ptr(&config, NT_ACQUIRE);
    if (cfg == NULL)
        nt_atomic_store_ptr(&config, cfg = nt_config_get(), NT_RELEASE);
    /* the entry of stamp s leaves at the push that makes the clock
       s + quarantine (ring_push, then the pop of the oldest) */
    return cfg->no_reuse || nt_quarantine_clock() - stamp < cfg->quarantine;
}
