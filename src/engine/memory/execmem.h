/*
 * numthunk executable memory: the W^X allocator under the native engine.
 *
 * A policy hands out code that is never writable and executable at once
 * through the same mapping. Each OS policy lives in its own file
 * (engine/memory/memfd.c, engine/memory/mprotect.c, engine/memory/filemap.c,
 * engine/memory/virtualprotect.c, engine/memory/mapjit.c, engine/memory/remap.c);
 * engine/choose.c lists them in the order to try,
 * and engine/native.c moves on from one to the next when the system refuses it,
 * at start (vm.memfd_noexec=2, SELinux, seccomp ...) or later (a memfd
 * write refused under RLIMIT_FSIZE, ENOSPC ...).
 *
 * Callers hold the native engine's lock around every call into a policy:
 * policies keep no lock of their own. A policy writes code and leaves the
 * instruction cache to its caller (engine/native.c flushes once per placement).
 * Handlers (code without data) come back to the policy when no plan uses
 * them and the quarantine has passed; stub blocks never do.
 *
 * Place in the pipeline: engine, below the native engine: engine/native.c
 * places code through these policies.
 */
#ifndef NUMTHUNK_EXECMEM_H
#define NUMTHUNK_EXECMEM_H

#include <stddef.h>

#include "numthunk.h"

/*
 * The page, the unit of every block a policy places and of its protections:
 * the system's page size (4 KiB on x86-64 and most Linux, 16 KiB on macOS
 * on Apple silicon and Asahi Linux, 64 KiB on some arm64 kernels), read by
 * engine/native.c when the engine starts, before any policy runs, and
 * never changed afterwards. A power of two from 4 to 64 KiB, else the
 * engine does not start (new thunks use libffi).
 */
extern size_t nt_exec_page;
#define NT_PAGE_SIZE     nt_exec_page
#define NT_PAGE_SIZE_MIN 4096u
#define NT_PAGE_SIZE_MAX 65536u

typedef struct nt_execmem {
    const char *name; /* "memfd-pwrite", "mprotect-sealed" */
    /* 0 if the policy works in this process (probes with a real page). */
    int (*init)(void);
    /*
     * Places n bytes of code and returns their executable address, or NULL
     * (err filled). With data_after == 0 the code may share a page with
     * earlier code (it is written only into bytes never executed before).
     * With data_after > 0, n must be a multiple of NT_PAGE_SIZE: the code
     * starts a fresh page-aligned block and is followed immediately by
     * data_after bytes (a page multiple) of zeroed, private, read-write
     * memory, so that code can reach its data pc-relative at a fixed
     * distance. Any failure (err filled) makes the caller move on to the
     * next policy for good.
     */
    void *(*place)(const void *code, size_t n, size_t data_after, nt_error *err);
    /*
     * Takes back n bytes of code placed with data_after == 0, which no call
     * can be running any more (engine/native.c sends a handler through the
     * quarantine first): a later place() may reuse them, or they are
     * unmapped. Code this process cannot write again (the parent's, after
     * fork) is left alone.
     */
    void (*release)(void *code, size_t n);
    /* Runs in a forked child (atfork handler, engine lock held): from now
       on write nothing the parent shares. */
    void (*after_fork_child)(void);
} nt_execmem;

extern const nt_execmem nt_execmem_memfd;          /* Linux */
extern const nt_execmem nt_execmem_mprotect;       /* POSIX */
extern const nt_execmem nt_execmem_filemap;        /* Windows */
extern const nt_execmem nt_execmem_virtualprotect; /* Windows */
extern const nt_execmem nt_execmem_mapjit;         /* macOS, arm64 */
extern const nt_execmem nt_execmem_remap;          /* macOS */

static inline size_t nt_round_up(size_t n, size_t to)
{
    return (n + to - 1) / to * to;
}

/* Instruction-cache maintenance after writing code, the one helper for it
   (engine/native.c calls it once per placement): portable.h's
   nt_icache_flush, nothing on x86, whose instruction fetch snoops data
   writes. */
#define NT_ICACHE_FLUSH(p, n) nt_icache_flush((p), (n))

#endif /* NUMTHUNK_EXECMEM_H */
