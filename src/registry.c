/*
 * numthunk registry: thunks by entry address.
 *
 * Place in the pipeline: beside the engines, above them. A thunk's address
 * reaches bind() again in many spellings (an int with signature=,
 * t.ctypes, t.cffi(ffi), a capsule, a LowLevelCallable's function, a ctypes
 * cast of the int...); the registry turns any of them back into its thunk,
 * so that the thunk that uses it can hold it, count it in its chain depth,
 * take its GIL need and refuse cycles (thunk.c). A thunk is entered when it
 * is made and leaves when it is freed; released meanwhile, it stays and is
 * refused when bound (it says so itself). An address reused by a new thunk
 * after the quarantine replaces the entry of a released one still alive.
 *
 * The registry holds no reference. A slot is the owner pointer alone (8
 * bytes): an owner's address is read from the owner itself, at the offset
 * nt_registry_init was given. Every call runs with the GIL held, or
 * without a GIL under the state lock (pyapi.h), which thunk.c's and
 * capi.c's entry points take before they reach commit.c, the only caller.
 *
 * Open addressing with linear probing and backward-shift deletion, at most
 * half full.
 */
#include <stdint.h>
#include <stdlib.h>

#include "numthunk.h"

static void **table; /* owners; NULL: an empty slot */
static size_t cap;   /* a power of two, or 0 */
static size_t count;
static unsigned shift;    /* 64 - log2(cap) */
static size_t key_offset; /* where an owner keeps its address */

#define KEY(owner) (*(void *const *)((const char *)(owner) + key_offset))

void nt_registry_init(size_t address_offset)
{
    key_offset = address_offset;
}

static size_t home(const void *address)
{
    /* Fibonacci hashing of the address */
    return (size_t)(((uint64_t)(uintptr_t)address * 0x9E3779B97F4A7C15ull) >> shift);
}

/* The slot holding address's owner, or the empty slot ending its run. */
static void **probe(const void *address)
{
    size_t i = home(address);
    while (table[i] != NULL && KEY(table[i]) != address)
        i = (i + 1) & (cap - 1);
    return &table[i];
}

static int grow(void)
{
    size_t ncap = cap ? 2 * cap : 64;
    void **old = table;
    size_t ocap = cap;
    void **fresh = calloc(ncap, sizeof(void *));
    if (fresh == NULL)
        return -1;
    table = fresh;
    cap = ncap;
    shift = 64;
    for (size_t c = ncap; c > 1; c >>= 1)
        shift--;
    for (size_t i = 0; i < ocap; i++)
        if (old[i] != NULL)
            *probe(KEY(old[i])) = old[i];
    free(old);
    return 0;
}

int nt_registry_add(void *owner)
{
    if (2 * (count + 1) > cap && grow() != 0)
        return -1;
    void **s = probe(KEY(owner));
    count += *s == NULL;
    *s = owner; /* in place of a released owner of the address */
    return 0;
}

void *nt_registry_find(const void *address)
{
    return count == 0 ? NULL : *probe(address); /* (no owner's address is NULL) */
}

void nt_registry_remove(const void *owner)
{
    if (count == 0)
        return;
    void **s = probe(KEY(owner));
    if (*s != owner)
        return; /* not entered (as one whose address is NULL), or replaced since */
    /* backward shift: later members of the run move into the hole unless
       their home lies cyclically in (hole, i] */
    size_t hole = (size_t)(s - table);
    for (size_t i = (hole + 1) & (cap - 1); table[i] != NULL; i = (i + 1) & (cap - 1)) {
        size_t h = home(KEY(table[i]));
        if (hole < i ? (h <= hole || h > i) : (h <= hole && h > i)) {
            table[hole] = table[i];
            hole = i;
        }
    }
    table[hole] = NULL;
    count--;
}
