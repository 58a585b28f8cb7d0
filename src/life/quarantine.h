/*
 * numthunk quarantine, shared by both engines (life/quarantine.c).
 *
 * A released entry's address lives on in places we cannot see (a SciPy
 * LowLevelCallable, a Numba constant, a C struct), so neither engine reuses
 * it at once: both hand released entries to nt_quarantine_push, under one
 * policy (NUMTHUNK_NO_REUSE, the length configured in engine/choose.c).
 *
 * Place in the pipeline: life, beside the engines (life/quarantine.c).
 */
#ifndef NUMTHUNK_QUARANTINE_H
#define NUMTHUNK_QUARANTINE_H

#include <stdint.h>

#include "portable.h"

/*
 * The quarantine's lock and the native engine's: a flag taken with an
 * atomic exchange. What they guard is a few loads and stores (a slot taken
 * or given back, a ring entry), rarely a page placed; a waiter gives up its
 * core meanwhile. A pthread mutex costs about 55 instructions a pair, two
 * pairs per thunk made and freed (bash bench/callgrind_bind.sh). A static
 * nt_spin starts free (zero).
 */
typedef struct {
    int held;
} nt_spin;

static inline void nt_spin_lock(nt_spin *l)
{
    while (nt_atomic_exchange_int(&l->held, 1, NT_ACQUIRE))
        while (nt_atomic_load_int(&l->held, NT_RELAXED))
            nt_yield();
}

static inline void nt_spin_unlock(nt_spin *l)
{
    nt_atomic_store_int(&l->held, 0, NT_RELEASE);
}

/*
 * A released entry waits here while config->quarantine later releases
 * happen; then leave(item) runs (outside any engine lock) and the engine
 * may reuse or free what the item holds. Until then a late call through the
 * entry's address reaches the released-thunk trap. With NUMTHUNK_NO_REUSE
 * leave never runs. If the ring cannot grow, the item is simply kept.
 */
void nt_quarantine_push(void *item, void (*leave)(void *item));

/*
 * The quarantine's clock: entries released so far. Read right after an
 * entry's push (under the state lock, which every release holds), it is
 * that entry's stamp.
 */
uint64_t nt_quarantine_clock(void);

/*
 * Whether an entry pushed at stamp still waits (its address cannot serve
 * anything else yet): always with NUMTHUNK_NO_REUSE.
 */
int nt_quarantine_holds(uint64_t stamp);

/*
 * Handler code that no plan uses (engine/native.c): leave(item) runs once
 * config->quarantine entries have been released after now (outside any
 * lock), so no call that was running the code when its last plan went can
 * still be; a late call through a released entry meets the trap, never
 * the handler. With NUMTHUNK_NO_REUSE, or if the ring cannot grow, the
 * item is kept.
 */
void nt_code_quarantine_push(void *item, void (*leave)(void *item));

/* The quarantine's lock, which the fork hooks take first (life/fork.c). */
nt_spin *nt_quarantine_lock(void);

#endif /* NUMTHUNK_QUARANTINE_H */
