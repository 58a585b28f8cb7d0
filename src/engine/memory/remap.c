/*
 * numthunk executable memory, policy "remap-dual" (macOS).
 *
 * Two views of the same pages: code is copied into a read+write region,
 * which vm_remap then maps a second time, shared (not copied), where
 * the code is to run; that alias is made read+execute and the writable
 * view is deallocated, so the pages are never writable and executable
 * through one mapping, and once placed are writable through none. The data
 * after a stub block is an ordinary private mapping right after the alias
 * (the alias is laid over the start of a reservation of both, with
 * VM_FLAGS_OVERWRITE). Every placement gets pages of its own.
 *
 * For where MAP_JIT is refused (engine/memory/mapjit.c: the hardened
 * runtime without com.apple.security.cs.allow-jit) or gives no per-thread
 * W^X (x86-64). Where the system refuses any new executable page (the
 * hardened runtime without com.apple.security.cs.allow-unsigned-executable-
 * memory either), init()'s probe fails too and new thunks use libffi.
 * fork() needs nothing: after placement no writable view is left.
 *
 * Compiled for macOS by tools/cross.sh; never run (no macOS machine).
 *
 * Place in the pipeline: engine, below the native engine
 * (engine/memory/execmem.h).
 */
#include <mach/mach.h>
#include <mach/mach_error.h>
#include <string.h>
#include <sys/mman.h>

#include "engine/memory/execmem.h"

/* Maps n bytes (a page multiple) of code read+execute at at (reserved by
   the caller), through a writable view that is gone on return. 0, or a
   Mach error. */
static kern_return_t remap_code(vm_address_t at, const void *code, size_t n, size_t size)
{
    mach_port_t task = mach_task_self();
    vm_address_t rw = 0;
    kern_return_t kr = vm_allocate(task, &rw, size, VM_FLAGS_ANYWHERE);
    if (kr != KERN_SUCCESS)
        return kr;
    memcpy((void *)(uintptr_t)rw, code, n);
    vm_prot_t cur, max;
    kr = vm_remap(task, &at, size, 0, VM_FLAGS_FIXED | VM_FLAGS_OVERWRITE, task, rw, FALSE, &cur,
                  &max, VM_INHERIT_DEFAULT);
    if (kr == KERN_SUCCESS)
        kr = vm_protect(task, at, size, FALSE, VM_PROT_READ | VM_PROT_EXECUTE);
    vm_deallocate(task, rw, size);
    return kr;
}

static void *remap_place(const void *code, size_t n, size_t data_after, nt_error *err)
{
    size_t code_size = nt_round_up(n, NT_PAGE_SIZE);
    unsigned char *p = mmap(NULL, code_size + data_after, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        nt_fail(err, NT_ERR_OS, -1, "numthunk: cannot reserve memory for code");
        return NULL;
    }
    kern_return_t kr = remap_code((vm_address_t)(uintptr_t)p, code, n, code_size);
    if (kr != KERN_SUCCESS) {
        munmap(p, code_size + data_after);
        nt_fail(err, NT_ERR_OS, -1, "numthunk: cannot map an executable alias: %s",
                mach_error_string(kr));
        return NULL;
    }
    return p;
}

static int remap_init(void)
{
    static const unsigned char ret[4] = { 0 };
    nt_error err;
    nt_error_init(&err);
    void *p = remap_place(ret, sizeof(ret), 0, &err);
    if (p == NULL)
        return -1;
    munmap(p, NT_PAGE_SIZE);
    return 0;
}

static void remap_release(void *code, size_t n)
{
    munmap(code, nt_round_up(n, NT_PAGE_SIZE));
}

static void remap_after_fork_child(void)
{
}

const nt_execmem nt_execmem_remap = {
    "remap-dual", remap_init, remap_place, remap_release, remap_after_fork_child,
};
