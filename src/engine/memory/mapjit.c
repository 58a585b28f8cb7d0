/*
 * numthunk executable memory, policy "map-jit" (macOS on arm64).
 *
 * Apple silicon keeps W^X per thread for MAP_JIT memory: such pages are
 * writable or executable for a thread, never both, as the thread switches
 * with pthread_jit_write_protect_np (0: writable, 1: executable). Code is
 * copied in with the switch off and the switch is turned back on before
 * place() returns, so no thread ever runs code from a page it can write.
 * The data after a stub block is an ordinary private mapping laid over the
 * end of the MAP_JIT one (MAP_FIXED), so that it stays writable whichever
 * way the switch is. Every placement gets pages of its own, as under
 * mprotect-sealed (engine/memory/mprotect.c). engine/native.c invalidates
 * the instruction cache after each placement (sys_icache_invalidate, in
 * portable.h's nt_icache_flush).
 *
 * The hardened runtime refuses MAP_JIT to a process without the
 * com.apple.security.cs.allow-jit entitlement: init() probes a page and
 * the native engine moves on to the next policy (engine/memory/remap.c).
 * fork() needs nothing: the pages are private.
 *
 * Compiled for macOS by tools/cross.sh; never run (no macOS machine).
 *
 * Place in the pipeline: engine, below the native engine
 * (engine/memory/execmem.h).
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "engine/memory/execmem.h"

static int mapjit_init(void)
{
    if (!pthread_jit_write_protect_supported_np())
        return -1;
    void *p = mmap(NULL, NT_PAGE_SIZE, PROT_READ | PROT_WRITE | PROT_EXEC,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_JIT, -1, 0);
    if (p == MAP_FAILED)
        return -1;
    munmap(p, NT_PAGE_SIZE);
    return 0;
}

static void *mapjit_place(const void *code, size_t n, size_t data_after, nt_error *err)
{
    size_t code_size = nt_round_up(n, NT_PAGE_SIZE);
    unsigned char *p = mmap(NULL, code_size + data_after, PROT_READ | PROT_WRITE | PROT_EXEC,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_JIT, -1, 0);
    if (p == MAP_FAILED)
        goto fail;
    if (data_after > 0
        && mmap(p + code_size, data_after, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0)
            == MAP_FAILED) {
        munmap(p, code_size + data_after);
        goto fail;
    }
    pthread_jit_write_protect_np(0);
    memcpy(p, code, n);
    pthread_jit_write_protect_np(1);
    return p;
fail:
    nt_fail(err, NT_ERR_OS, -1, "numthunk: cannot map MAP_JIT memory: %s", strerror(errno));
    return NULL;
}

static void mapjit_release(void *code, size_t n)
{
    munmap(code, nt_round_up(n, NT_PAGE_SIZE));
}

static void mapjit_after_fork_child(void)
{
}

const nt_execmem nt_execmem_mapjit = {
    "map-jit", mapjit_init, mapjit_place, mapjit_release, mapjit_after_fork_child,
};
