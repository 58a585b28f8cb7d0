/*
 * numthunk executable memory, policy "memfd-pwrite" (Linux).
 *
 * Code lives in an anonymous memory file (memfd_create) that this process
 * maps only read+execute (MAP_SHARED). New code is written into the file
 * with pwrite(2): the kernel copies it into the very page-cache pages the
 * RX mapping shows, so the address space never holds a writable view of
 * code at all, not even briefly (a transient RW second mapping, the classic
 * memfd "dual map", would exist for the length of the write and costs an
 * mmap/munmap pair plus a TLB shootdown; pwrite costs one syscall). No
 * mapping is ever writable and executable.
 *
 * New bytes are always appended after code that already exists: nothing
 * that may be executing is ever rewritten.
 *
 * vm.memfd_noexec (Linux 6.3+): at 1 a memfd is non-executable unless
 * created with MFD_EXEC, at 2 MFD_EXEC is refused. We ask for MFD_EXEC,
 * retry without it on kernels that do not know the flag (EINVAL), and let
 * init() fail when the mapping cannot be made executable, so native.c falls
 * back to mem_mprotect.c.
 *
 * fork(): the file (and its pages) are shared with the child. The child
 * drops its descriptor and starts a new file on its next write, so neither
 * process ever grows or writes the other's code.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#include "execmem.h"

#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 0x0001U
#endif
#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U      /* Linux 6.3, include/uapi/linux/memfd.h */
#endif

/* Handlers are packed into chunks of this size (one mapping each). */
#define CHUNK_SIZE (16u * NT_PAGE_SIZE)
/* Handlers start on this boundary (branch targets, cache lines). */
#define CODE_ALIGN 16u

static int mfd = -1;             /* our memory file, -1: none yet */
static off_t file_size;          /* bytes of mfd in use */
static unsigned char *chunk;     /* RX view of the open handler chunk */
static off_t chunk_offset;       /* its offset in mfd */
static size_t chunk_size, chunk_used;

static int
open_file(void)
{
    int fd = memfd_create("numthunk", MFD_CLOEXEC | MFD_EXEC);
    if (fd < 0 && errno == EINVAL)
        fd = memfd_create("numthunk", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    mfd = fd;
    file_size = 0;
    chunk = NULL;
    chunk_size = chunk_used = 0;
    return 0;
}

/* Grows the file by n bytes (page multiple); returns the old end. */
static int
grow(size_t n, off_t *offset)
{
    if (ftruncate(mfd, file_size + (off_t)n) != 0)
        return -1;
    *offset = file_size;
    file_size += (off_t)n;
    return 0;
}

static int
write_all(const void *code, size_t n, off_t offset)
{
    const unsigned char *p = code;
    while (n > 0) {
        ssize_t k = pwrite(mfd, p, n, offset);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += k;
        n -= (size_t)k;
        offset += k;
    }
    return 0;
}

static int
memfd_init(void)
{
    if (mfd < 0 && open_file() != 0)
        return -1;
    /* Probe: the first chunk, mapped executable, doubles as the check that
       this system lets a memfd be executable at all. */
    off_t offset;
    if (grow(CHUNK_SIZE, &offset) != 0)
        goto fail;
    void *p = mmap(NULL, CHUNK_SIZE, PROT_READ | PROT_EXEC, MAP_SHARED,
                   mfd, offset);
    if (p == MAP_FAILED)
        goto fail;
    chunk = p;
    chunk_offset = offset;
    chunk_size = CHUNK_SIZE;
    chunk_used = 0;
    return 0;
fail:
    close(mfd);
    mfd = -1;
    return -1;
}

static void *
place_block(const void *code, size_t n, size_t data_after, nt_error *err)
{
    /* One reservation for code + data so their distance is fixed; the code
       part is then replaced by the RX file mapping (MAP_FIXED over our own
       reservation, never over anything else). */
    const char *what = "cannot reserve memory";
    unsigned char *res = mmap(NULL, n + data_after, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (res == MAP_FAILED)
        goto fail;
    off_t offset;
    if (grow(n, &offset) != 0) {
        what = "cannot grow the code file";
        goto unmap;
    }
    if (write_all(code, n, offset) != 0) {
        what = "cannot write code";
        goto unmap;
    }
    if (mmap(res, n, PROT_READ | PROT_EXEC, MAP_SHARED | MAP_FIXED, mfd,
             offset) == MAP_FAILED) {
        what = "cannot map executable memory";
        goto unmap;
    }
    return res;
unmap:
    {
        int saved = errno;
        munmap(res, n + data_after);
        errno = saved;
    }
fail:
    nt_fail(err, NT_ERR_OS, -1, "numthunk: %s: %s", what, strerror(errno));
    return NULL;
}

static void *
memfd_place(const void *code, size_t n, size_t data_after, nt_error *err)
{
    if (mfd < 0 && open_file() != 0) {
        nt_fail(err, NT_ERR_OS, -1, "numthunk: memfd_create failed: %s",
                strerror(errno));
        return NULL;
    }
    if (data_after > 0)
        return place_block(code, n, data_after, err);

    if (chunk == NULL || chunk_used + n > chunk_size) {
        size_t size = nt_round_up(n, CHUNK_SIZE);
        off_t offset;
        if (grow(size, &offset) != 0) {
            nt_fail(err, NT_ERR_OS, -1,
                    "numthunk: cannot grow the code file: %s",
                    strerror(errno));
            return NULL;
        }
        void *p = mmap(NULL, size, PROT_READ | PROT_EXEC, MAP_SHARED, mfd,
                       offset);
        if (p == MAP_FAILED) {
            nt_fail(err, NT_ERR_OS, -1,
                    "numthunk: cannot map executable memory: %s",
                    strerror(errno));
            return NULL;
        }
        /* The rest of the old chunk stays mapped: code in it is live. */
        chunk = p;
        chunk_offset = offset;
        chunk_size = size;
        chunk_used = 0;
    }
    if (write_all(code, n, chunk_offset + (off_t)chunk_used) != 0) {
        nt_fail(err, NT_ERR_OS, -1, "numthunk: cannot write code: %s",
                strerror(errno));
        return NULL;
    }
    unsigned char *at = chunk + chunk_used;
    chunk_used = nt_round_up(chunk_used + n, CODE_ALIGN);
    return at;
}

static void
memfd_after_fork_child(void)
{
    /* Our descriptor shares the file offset and size with the parent's:
       closing our copy leaves the parent's file and its mappings intact. */
    if (mfd >= 0)
        close(mfd);
    mfd = -1;
    chunk = NULL;
    chunk_size = chunk_used = 0;
}

const nt_execmem nt_execmem_memfd = {
    "memfd-pwrite",
    memfd_init,
    memfd_place,
    memfd_after_fork_child,
};
