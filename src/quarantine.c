/*
 * numthunk quarantine and fork hooks: belong to no engine and no
 * architecture (quarantine.h).
 *
 * Place in the pipeline: beside the engines. native.c pushes released
 * slots, backend_ffi.c released closures; each item leaves, in release
 * order, once config->quarantine later releases have happened. The fork
 * hooks take the quarantine's lock and the native engine's, so a child
 * process never inherits either held by a thread that did not survive.
 */
#include <stdlib.h>

#include "quarantine.h"
#include "native.h"

/* ------------------------------------------------------------------------ */
/* Fork hooks, registered once for both the engine and the quarantine        */

static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

/* The native engine's lock and its work in a child (nt_fork_hooks); read
   once per fork into held, so that a registration during a fork does not
   unlock a lock that fork_prepare did not take. */
static pthread_mutex_t *engine_lock;
static void (*engine_in_child)(void);
static pthread_mutex_t *held;

static void
fork_prepare(void)
{
    pthread_mutex_lock(&q_lock);
    held = __atomic_load_n(&engine_lock, __ATOMIC_ACQUIRE);
    if (held != NULL)
        pthread_mutex_lock(held);
}

static void
fork_parent(void)
{
    if (held != NULL)
        pthread_mutex_unlock(held);
    pthread_mutex_unlock(&q_lock);
}

static void
fork_child(void)
{
    /* Only the forking thread exists here, and it holds both locks (taken
       in fork_prepare): nobody is half way through an allocation. */
    if (held != NULL) {
        engine_in_child();
        pthread_mutex_unlock(held);
    }
    pthread_mutex_unlock(&q_lock);
}

static void
register_fork_hooks(void)
{
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

void
nt_fork_hooks(pthread_mutex_t *lock, void (*in_child)(void))
{
    if (lock != NULL) {
        engine_in_child = in_child;
        __atomic_store_n(&engine_lock, lock, __ATOMIC_RELEASE);
    }
    pthread_once(&fork_once, register_fork_hooks);
}

/* ------------------------------------------------------------------------ */
/* Quarantine                                                                */

typedef struct {
    void *item;
    void (*leave)(void *item);
} q_entry;

static q_entry *q_ring;      /* oldest first from q_head */
static size_t q_cap, q_head, q_len;

void
nt_quarantine_push(void *item, void (*leave)(void *item))
{
    const nt_config *cfg = nt_config_get();
    if (cfg->no_reuse)
        return;              /* kept for ever: its address never recurs */
    pthread_once(&fork_once, register_fork_hooks);
    q_entry out = { NULL, NULL };
    pthread_mutex_lock(&q_lock);
    if (q_len == q_cap) {
        size_t ncap = q_cap ? 2 * q_cap : 1024;
        q_entry *nq = malloc(ncap * sizeof(*nq));
        if (nq == NULL) {
            pthread_mutex_unlock(&q_lock);
            return;          /* the item is simply never reused */
        }
        for (size_t i = 0; i < q_len; i++)
            nq[i] = q_ring[(q_head + i) % q_cap];
        free(q_ring);
        q_ring = nq;
        q_cap = ncap;
        q_head = 0;
    }
    q_ring[(q_head + q_len) % q_cap] = (q_entry){ item, leave };
    q_len++;
    if (q_len > cfg->quarantine) {
        out = q_ring[q_head];
        q_head = (q_head + 1) % q_cap;
        q_len--;
    }
    pthread_mutex_unlock(&q_lock);
    if (out.leave != NULL)
        out.leave(out.item);
}
