/*
 * numthunk executable memory, policy "virtualprotect-sealed" (Windows).
 *
 * Used where the dual-view section of engine/memory/filemap.c is refused.
 * Code is copied into fresh pages committed read+write with VirtualAlloc,
 * then the pages are sealed PAGE_EXECUTE_READ with VirtualProtect and never
 * made writable again (engine/memory/mprotect.c, as Windows spells it). A
 * stub block's data pages are part of the same allocation and stay
 * read+write, right after the code. Every placement gets pages of its own:
 * a handler costs a page (and a 64 KiB range of address space), given back
 * once the handler has left the quarantine. place() calls
 * FlushInstructionCache, as Windows asks after code is written.
 *
 * Place in the pipeline: engine, below the native engine
 * (engine/memory/execmem.h), on Windows.
 */
#include <string.h>
#include <windows.h>

#include "engine/memory/execmem.h"

static int vp_init(void)
{
    void *p = VirtualAlloc(NULL, NT_PAGE_SIZE, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
    if (p == NULL)
        return -1;
    DWORD old;
    BOOL ok = VirtualProtect(p, NT_PAGE_SIZE, PAGE_EXECUTE_READ, &old);
    VirtualFree(p, 0, MEM_RELEASE);
    return ok ? 0 : -1;
}

static void *vp_place(const void *code, size_t n, size_t data_after, nt_error *err)
{
    size_t code_size = nt_round_up(n, NT_PAGE_SIZE);
    DWORD old;
    unsigned char *p =
        VirtualAlloc(NULL, code_size + data_after, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
    if (p == NULL)
        goto fail;
    memcpy(p, code, n);
    if (!VirtualProtect(p, code_size, PAGE_EXECUTE_READ, &old)) {
        DWORD e = GetLastError();
        VirtualFree(p, 0, MEM_RELEASE);
        SetLastError(e);
        goto fail;
    }
    FlushInstructionCache(GetCurrentProcess(), p, n);
    return p;
fail:
    nt_fail(err, NT_ERR_OS, -1, "numthunk: cannot map executable memory: Windows error %lu",
            (unsigned long)GetLastError());
    return NULL;
}

/* A handler's own allocation: nothing else lives in it. */
static void vp_release(void *code, size_t n)
{
    (void)n;
    VirtualFree(code, 0, MEM_RELEASE);
}

static void vp_after_fork_child(void)
{
}

const nt_execmem nt_execmem_virtualprotect = {
    "virtualprotect-sealed", vp_init, vp_place, vp_release, vp_after_fork_child,
};
