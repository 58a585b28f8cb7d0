/*
 * numthunk portability: the few calls the core makes that platforms spell
 * differently, each given one name here so that no other file tests the
 * platform (engine/choose.c's #if chain aside, which picks the engine).
 *
 * Place in the pipeline: below everything, as kinds.c: the engine (page
 * size), the plan (aligned contexts) and life (fork hooks) read it.
 */
#ifndef NUMTHUNK_PORTABLE_H
#define NUMTHUNK_PORTABLE_H

#include <stddef.h>
#include <stdlib.h>

/* ------------------------------------------------------------------------ */
/* For the native engine (engine/, plan/, life/quarantine.c): the page size, */
/* the contexts' aligned allocation and the fork hooks. Windows has no      */
/* sysconf and no aligned_alloc (memory from _aligned_malloc goes back      */
/* through _aligned_free, never free()), and no fork to hook.               */

#if defined(_WIN32)
#include <malloc.h>
#include <windows.h>

static inline long nt_page_size(void)
{
    SYSTEM_INFO si;
    GetSystemInfo(&si);
    return (long)si.dwPageSize;
}

static inline void *nt_aligned_alloc(size_t align, size_t n)
{
    return _aligned_malloc(n, align);
}

static inline void nt_aligned_free(void *p)
{
    _aligned_free(p);
}

static inline int nt_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void))
{
    (void)prepare, (void)parent, (void)child;
    return 0;
}
#else
#include <pthread.h>
#include <unistd.h>

static inline long nt_page_size(void)
{
    return sysconf(_SC_PAGESIZE);
}

/* n is rounded up to a multiple of align, as C11's aligned_alloc wants. */
static inline void *nt_aligned_alloc(size_t align, size_t n)
{
    return aligned_alloc(align, (n + align - 1) / align * align);
}

static inline void nt_aligned_free(void *p)
{
    free(p);
}

static inline int nt_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void))
{
    return pthread_atfork(prepare, parent, child);
}
#endif

#endif /* NUMTHUNK_PORTABLE_H */
