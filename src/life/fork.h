/*
 * numthunk fork hooks (life/fork.c): the locks the core holds across
 * fork(), and the fork generation a child moves on to.
 *
 * Place in the pipeline: life (life/fork.c).
 */
#ifndef NUMTHUNK_FORK_H
#define NUMTHUNK_FORK_H

#include <stdint.h>

#include "life/quarantine.h"

/* Bumped in the child of every fork(); read with the GIL or the state
   lock held (a child has one thread when it changes). */
extern uint16_t nt_fork_generation;

/* Registers the process's fork hooks, once. */
void nt_fork_watch(void);

/*
 * Registers the fork hooks (once; later calls only add the engine). Around
 * fork() they hold the quarantine's lock, then engine_lock (lock order:
 * quarantine, then engine), so that the child finds neither half way
 * through an update; in the child, in_child runs while both are still
 * held. The native engine calls this from its initialisation.
 */
void nt_fork_hooks(nt_spin *engine_lock, void (*in_child)(void));

#endif /* NUMTHUNK_FORK_H */
