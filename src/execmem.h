/*
 * numthunk executable memory: the W^X allocator under the native backend.
 *
 * A policy hands out code that is never writable and executable at once
 * through the same mapping. Each OS policy lives in its own file
 * (mem_memfd.c, mem_mprotect.c); backend.c picks one at run time, falling
 * back from the first to the second when the system refuses it
 * (vm.memfd_noexec=2, SELinux, seccomp ...).
 *
 * Callers hold the backend lock around every call into a policy: policies
 * keep no lock of their own.
 */
#ifndef NUMTHUNK_EXECMEM_H
#define NUMTHUNK_EXECMEM_H

#include <stddef.h>

#include "numthunk.h"

#define NT_PAGE_SIZE 4096u

typedef struct nt_execmem {
    const char *name;           /* "memfd-pwrite", "mprotect-sealed" */
    /* 0 if the policy works in this process (probes with a real page). */
    int (*init)(void);
    /*
     * Places n bytes of code and returns their executable address, or NULL
     * (err filled). With data_after == 0 the code may share a page with
     * earlier code (it is written only into bytes never executed before).
     * With data_after > 0, n must be a multiple of NT_PAGE_SIZE: the code
     * starts a fresh page-aligned block and is followed immediately by
     * data_after bytes (a page multiple) of zeroed, private, read-write
     * memory, so that code can reach its data rip-relative at a fixed
     * distance.
     */
    void *(*place)(const void *code, size_t n, size_t data_after,
                   nt_error *err);
    /* Runs in a forked child (atfork handler, backend lock held): from now
       on write nothing the parent shares. */
    void (*after_fork_child)(void);
} nt_execmem;

extern const nt_execmem nt_execmem_memfd;
extern const nt_execmem nt_execmem_mprotect;

/*
 * The policy in use: the first that initialises, in the order of the
 * platform's #if branch in backend.c. NUMTHUNK_EXECMEM=memfd|mprotect
 * restricts the choice to one (tests use it to run on both). NULL when none
 * works: the native backend then declares every plan unsupported and the
 * libffi backend takes over.
 */
const nt_execmem *nt_execmem_get(void);

static inline size_t nt_round_up(size_t n, size_t to)
{
    return (n + to - 1) / to * to;
}

/* Instruction-cache maintenance after writing code; compiles to nothing on
   x86, whose instruction fetch snoops data writes. */
#define NT_ICACHE_FLUSH(p, n) \
    __builtin___clear_cache((char *)(p), (char *)(p) + (n))

#endif /* NUMTHUNK_EXECMEM_H */
