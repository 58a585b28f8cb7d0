/*
 * numthunk registry: thunks by entry address, and the addresses of
 * collected thunks that still wait in the quarantine.
 *
 * Place in the pipeline: life, beside the engines, above them. A thunk's address
 * reaches bind() again as a bare int (signature=, address(n), a ctypes cast
 * of the int); the registry turns it back into its thunk, so that the thunk
 * that uses it can hold it, count it in its chain depth, take its GIL need
 * and refuse cycles (life/commit.c). Spellings that carry their thunk (the
 * thunk, t.ctypes, a capsule, owner=) are not looked up here: life/commit.c
 * takes the thunk they carry. A thunk is entered when it is made and
 * leaves when it is freed; released meanwhile, it stays and is refused when
 * bound (it says so itself). Freed, its address stays as a collected
 * thunk's (a "grave", with the quarantine clock of its release) for as long
 * as the quarantine holds the entry, so that an int naming it is refused
 * instead of being bound as plain code; once the quarantine let the entry
 * go, the address may serve anything, and the grave is forgotten: graves
 * wait in a ring in the order they were dug, and each burial lets go those
 * at its head whose time has passed (a grave met past its time goes too).
 * An address reused by a new thunk replaces whatever was entered at it.
 *
 * The registry holds no reference. Every call runs with the GIL held, or
 * without a GIL under the state lock (python/pyapi.h), which python/thunk.c's and
 * python/capi.c's entry points take before they reach life/commit.c.
 *
 * Open addressing with linear probing and backward-shift deletion, at most
 * half full, graves included.
 */
#include <stdint.h>
#include <stdlib.h>

#include "numthunk.h"
#include "life/quarantine.h"

typedef struct {
    const void *address; /* NULL: an empty slot */
    uintptr_t who;       /* the owner, or GRAVE(stamp) */
} slot;

#define IS_GRAVE(who)  ((who)&1u)
#define GRAVE(stamp)   (((uintptr_t)(stamp) << 1) | 1u)
#define GRAVE_STAMP(w) ((uint64_t)((w) >> 1))

static slot *table;
static size_t cap; /* a power of two, or 0 */
static size_t count;
static unsigned shift; /* 64 - log2(cap) */

/* Graves in the order they were dug: (address, stamp), oldest at head. */
typedef struct {
    const void *address;
    uint64_t stamp;
} dug;
static dug *ring;
static size_t ring_cap, ring_head, ring_len; /* ring_cap a power of two, or 0 */

static size_t home(const void *address)
{
    /* Fibonacci hashing of the address */
    return (size_t)(((uint64_t)(uintptr_t)address * 0x9E3779B97F4A7C15ull) >> shift);
}

/* The slot holding address, or the empty slot ending its run. */
static slot *probe(const void *address)
{
    size_t i = home(address);
    while (table[i].address != NULL && table[i].address != address)
        i = (i + 1) & (cap - 1);
    return &table[i];
}

/* Empties s; later members of the run move into the hole unless their
   home lies cyclically in (hole, i]. */
static void vacate(slot *s)
{
    size_t hole = (size_t)(s - table);
    for (size_t i = (hole + 1) & (cap - 1); table[i].address != NULL; i = (i + 1) & (cap - 1)) {
        size_t h = home(table[i].address);
        if (hole < i ? (h <= hole || h > i) : (h <= hole && h > i)) {
            table[hole] = table[i];
            hole = i;
        }
    }
    table[hole] = (slot){ NULL, 0 };
    count--;
}

/* The table again at ncap slots. 0, or -1 with no memory (the table
   unchanged). */
static int grow(size_t ncap)
{
    slot *old = table;
    size_t ocap = cap;
    slot *fresh = calloc(ncap, sizeof(slot));
    if (fresh == NULL)
        return -1;
    table = fresh;
    cap = ncap;
    shift = 64;
    for (size_t c = ncap; c > 1; c >>= 1)
        shift--;
    for (size_t i = 0; i < ocap; i++)
        if (old[i].address != NULL)
            *probe(old[i].address) = old[i];
    free(old);
    return 0;
}

/* The graves at the ring's head whose time has passed leave the table (a
   grave since replaced, or gone, is left alone). */
static void forget_expired(void)
{
    while (ring_len > 0 && !nt_quarantine_holds(ring[ring_head].stamp)) {
        dug g = ring[ring_head];
        ring_head = (ring_head + 1) & (ring_cap - 1);
        ring_len--;
        slot *s = probe(g.address);
        if (s->address != NULL && s->who == GRAVE(g.stamp))
            vacate(s);
    }
}

/* g at the ring's tail; 0, or -1 with no memory (the grave is then never
   forgotten by the ring: met past its time, it goes all the same). */
static int ring_push(dug g)
{
    if (ring_len == ring_cap) {
        size_t ncap = ring_cap ? 2 * ring_cap : 256;
        dug *fresh = malloc(ncap * sizeof(dug));
        if (fresh == NULL)
            return -1;
        for (size_t i = 0; i < ring_len; i++)
            fresh[i] = ring[(ring_head + i) & (ring_cap - 1)];
        free(ring);
        ring = fresh;
        ring_cap = ncap;
        ring_head = 0;
    }
    ring[(ring_head + ring_len) & (ring_cap - 1)] = g;
    ring_len++;
    return 0;
}

int nt_registry_add(void *owner, const void *address)
{
    if (2 * (count + 1) > cap && grow(cap ? 2 * cap : 64) != 0)
        return -1;
    slot *s = probe(address);
    count += s->address == NULL;
    *s = (slot){ address, (uintptr_t)owner }; /* in place of a grave or a released owner */
    return 0;
}

void *nt_registry_find(const void *address, int *collected)
{
    *collected = 0;
    if (count == 0 || address == NULL)
        return NULL;
    slot *s = probe(address);
    if (s->address == NULL)
        return NULL;
    if (!IS_GRAVE(s->who))
        return (void *)s->who;
    if (nt_quarantine_holds(GRAVE_STAMP(s->who)))
        *collected = 1;
    else
        vacate(s); /* the quarantine let the entry go: forgotten */
    return NULL;
}

void nt_registry_bury(const void *owner, const void *address, uint64_t stamp)
{
    if (count == 0 || address == NULL)
        return;
    forget_expired();
    slot *s = probe(address);
    if (s->address == NULL || s->who != (uintptr_t)owner)
        return; /* not entered (creation failed), or replaced since */
    if (!nt_quarantine_holds(stamp)) {
        vacate(s);
        return;
    }
    s->who = GRAVE(stamp);
    (void)ring_push((dug){ address, stamp });
}
