/*
 * numthunk fork hooks: what the core does around fork() (life/fork.h).
 *
 * Place in the pipeline: life, across processes. Registered
 * once, by the first quarantine push, the native engine's start or the
 * module's import. Around fork() the hooks hold the quarantine's lock, then
 * the native engine's (lock order: quarantine, then engine), so that a
 * child never inherits either held by a thread that did not survive; in
 * the child the engine's work runs while both are still held, and the
 * fork generation moves on, so that calls from Python other threads had in
 * flight in the parent are counted again (python/thunk.c). Where there is
 * no fork (Windows), nt_atfork registers nothing (portable.h) and the hooks
 * never run.
 */
#include "life/fork.h"
#include "life/quarantine.h"
#include "portable.h"

#include "portable.h"

uint16_t nt_fork_generation;

static nt_once fork_once = NT_ONCE_INIT;

/* The native engine's lock and its work in a child (nt_fork_hooks); read
   once per fork into held, so that a registration during a fork does not
   unlock a lock that fork_prepare did not take. */
static nt_spin *engine_lock;
static void (*engine_in_child)(void);
static nt_spin *held;

static void fork_prepare(void)
{
    nt_spin_lock(nt_quarantine_lock());
    held = nt_atomic_load_ptr(&engine_lock, NT_ACQUIRE);
    if (held != NULL)
        nt_spin_lock(held);
}

static void fork_parent(void)
{
    if (held != NULL)
        nt_spin_unlock(held);
    nt_spin_unlock(nt_quarantine_lock());
}

static void fork_child(void)
{
    /* Only the forking thread exists here, and it holds both locks (taken
       in fork_prepare): nobody is half way through an allocation. */
    nt_fork_generation++;
    if (held != NULL) {
        engine_in_child();
        nt_spin_unlock(held);
    }
    nt_spin_unlock(nt_quarantine_lock());
}

static void register_fork_hooks(void)
{
    nt_atfork(fork_prepare, fork_parent, fork_child);
}

void nt_fork_watch(void)
{
    nt_call_once(&fork_once, register_fork_hooks);
}

void nt_fork_hooks(nt_spin *lock, void (*in_child)(void))
{
    if (lock != NULL) {
        engine_in_child = in_child;
        nt_atomic_store_ptr(&engine_lock, lock, NT_RELEASE);
    }
    nt_fork_watch();
}
