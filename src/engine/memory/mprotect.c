/*
 * numthunk executable memory, policy "mprotect-sealed" (POSIX).
 *
 * Used where memfd is refused (vm.memfd_noexec=2, old kernels, seccomp
 * filters). Code is copied into fresh private anonymous pages while they
 * are read+write, then the pages are sealed read+execute with mprotect and
 * never made writable again. Since a sealed page can take no more code,
 * every placement gets pages of its own: a handler costs a page here
 * (handlers are per plan shape, and an unused one is unmapped once it has
 * left the quarantine), a stub block costs nothing extra.
 *
 * Under SELinux deny_execmem the RW->RX mprotect fails; init() finds that
 * out with a probe page and the native engine then stands down in favour
 * of libffi. fork() needs nothing: all pages are private.
 *
 * Place in the pipeline: engine, below the native engine
 * (engine/memory/execmem.h).
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "engine/memory/execmem.h"

static int mprotect_init(void)
{
    void *p = mmap(NULL, NT_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -1;
    int rc = mprotect(p, NT_PAGE_SIZE, PROT_READ | PROT_EXEC);
    munmap(p, NT_PAGE_SIZE);
    return rc;
}

static void *mprotect_place(const void *code, size_t n, size_t data_after, nt_error *err)
{
    size_t code_size = nt_round_up(n, NT_PAGE_SIZE);
    unsigned char *p = mmap(NULL, code_size + data_after, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        goto fail;
    memcpy(p, code, n);
    if (mprotect(p, code_size, PROT_READ | PROT_EXEC) != 0) {
        munmap(p, code_size + data_after);
        goto fail;
    }
    return p;
fail:
    nt_fail(err, NT_ERR_OS, -1, "numthunk: cannot map executable memory: %s", strerror(errno));
    return NULL;
}

/* A handler's own pages: nothing else lives on them (and after fork the
   child's copies are its own). */
static void mprotect_release(void *code, size_t n)
{
    munmap(code, nt_round_up(n, NT_PAGE_SIZE));
}

static void mprotect_after_fork_child(void)
{
}

const nt_execmem nt_execmem_mprotect = {
    "mprotect-sealed", mprotect_init, mprotect_place, mprotect_release, mprotect_after_fork_child,
};
