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
 * New bytes go after code that already exists, or into a handler's block
 * that came back (release): engine/native.c returns a handler only after the
 * quarantine, when no call can be running it, so nothing that may be
 * executing is ever rewritten. Handler blocks come in power-of-two sizes,
 * so a block that came back serves any handler of its size class.
 *
 * vm.memfd_noexec (Linux 6.3+): at 1 a memfd is non-executable unless
 * created with MFD_EXEC, at 2 MFD_EXEC is refused. We ask for MFD_EXEC,
 * retry without it on kernels that do not know the flag (EINVAL), and let
 * init() fail when the mapping cannot be made executable, so engine/native.c falls
 * back to engine/memory/mprotect.c.
 *
 * fork(): the file (and its pages) are shared with the child. The child
 * drops its descriptor, its list of the file's chunks and the blocks that
 * came back, and starts a new file on its next write, so neither process
 * ever grows or writes the other's code (a block of the old file released
 * in the child is in no chunk of its own file: it is left alone).
 *
 * Place in the pipeline: engine, below the native engine
 * (engine/memory/execmem.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#include "engine/memory/execmem.h"

#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 0x0001U
#endif
#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U /* Linux 6.3, include/uapi/linux/memfd.h */
#endif

/* Handlers are packed into chunks of this size (one mapping each). */
#define CHUNK_SIZE (16u * NT_PAGE_SIZE)
/* Handlers start on this boundary (branch targets, cache lines). */
#define CODE_ALIGN 16u

/* Handler blocks: 64, 128, ... 8192 bytes (NT_HANDLER_MAX). */
#define MIN_BLOCK 64u
#define NCLASSES  8

static int mfd = -1;         /* our memory file, -1: none yet */
static off_t file_size;      /* bytes of mfd in use */
static unsigned char *chunk; /* RX view of the open handler chunk */
static off_t chunk_offset;   /* its offset in mfd */
/* Its size and bytes placed: 0, 0 while chunk is NULL. */
static size_t chunk_size, chunk_used;

/* Every handler chunk of the current file, to find a block's file offset. */
typedef struct {
    unsigned char *at;
    off_t offset;
    size_t size;
} chunk_map;
static chunk_map *chunks;
static size_t nchunks, chunks_cap;

/* Blocks that came back, by size class. */
typedef struct block {
    unsigned char *at;
    off_t offset;
    struct block *next;
} block;
static block *spare[NCLASSES];

/* The size class of n bytes of code, -1 beyond the largest. */
static int class_of(size_t n)
{
    size_t size = MIN_BLOCK;
    for (int c = 0; c < NCLASSES; c++, size *= 2)
        if (n <= size)
            return c;
    return -1;
}

static size_t class_size(int c)
{
    return (size_t)MIN_BLOCK << c;
}

/* Forgets the chunks and the spare blocks (never their memory: after fork,
   it is the parent's too). */
static void forget_blocks(void)
{
    for (int c = 0; c < NCLASSES; c++) {
        while (spare[c] != NULL) {
            block *b = spare[c];
            spare[c] = b->next;
            free(b);
        }
    }
    free(chunks);
    chunks = NULL;
    nchunks = chunks_cap = 0;
}

static int note_chunk(unsigned char *at, off_t offset, size_t size)
{
    if (nchunks == chunks_cap) {
        size_t ncap = chunks_cap ? 2 * chunks_cap : 16;
        chunk_map *nc = realloc(chunks, ncap * sizeof(*nc));
        if (nc == NULL)
            return -1;
        chunks = nc;
        chunks_cap = ncap;
    }
    chunks[nchunks++] = (chunk_map){ at, offset, size };
    return 0;
}

static int open_file(void)
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
    forget_blocks();
    return 0;
}

/* Grows the file by n bytes (page multiple); returns the old end. */
static int grow(size_t n, off_t *offset)
{
    if (ftruncate(mfd, file_size + (off_t)n) != 0)
        return -1;
    *offset = file_size;
    file_size += (off_t)n;
    return 0;
}

static int write_all(const void *code, size_t n, off_t offset)
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

static int memfd_init(void)
{
    if (mfd < 0 && open_file() != 0)
        return -1;
    /* Probe: the first chunk, mapped executable, doubles as the check that
       this system lets a memfd be executable at all. */
    off_t offset;
    if (grow(CHUNK_SIZE, &offset) != 0)
        goto fail;
    void *p = mmap(NULL, CHUNK_SIZE, PROT_READ | PROT_EXEC, MAP_SHARED, mfd, offset);
    if (p == MAP_FAILED)
        goto fail;
    chunk = p;
    chunk_offset = offset;
    chunk_size = CHUNK_SIZE;
    chunk_used = 0;
    if (note_chunk(p, offset, CHUNK_SIZE) != 0) {
        munmap(p, CHUNK_SIZE);
        chunk = NULL;
        chunk_size = 0;
        goto fail;
    }
    return 0;
fail:
    close(mfd);
    mfd = -1;
    return -1;
}

static void *place_block(const void *code, size_t n, size_t data_after, nt_error *err)
{
    /* One reservation for code + data so their distance is fixed; the code
       part is then replaced by the RX file mapping (MAP_FIXED over our own
       reservation, never over anything else). */
    const char *what = "cannot reserve memory";
    int saved;
    unsigned char *res =
        mmap(NULL, n + data_after, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
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
    if (mmap(res, n, PROT_READ | PROT_EXEC, MAP_SHARED | MAP_FIXED, mfd, offset) == MAP_FAILED) {
        what = "cannot map executable memory";
        goto unmap;
    }
    return res;
unmap:
    saved = errno;
    munmap(res, n + data_after);
    errno = saved;
fail:
    nt_fail(err, NT_ERR_OS, -1, "numthunk: %s: %s", what, strerror(errno));
    return NULL;
}

static void *memfd_place(const void *code, size_t n, size_t data_after, nt_error *err)
{
    if (mfd < 0 && open_file() != 0) {
        nt_fail(err, NT_ERR_OS, -1, "numthunk: memfd_create failed: %s", strerror(errno));
        return NULL;
    }
    if (data_after > 0)
        return place_block(code, n, data_after, err);

    int c = class_of(n);
    if (c >= 0 && spare[c] != NULL) {
        /* a block that came back: no call runs it any more */
        block *b = spare[c];
        if (write_all(code, n, b->offset) != 0) {
            nt_fail(err, NT_ERR_OS, -1, "numthunk: cannot write code: %s", strerror(errno));
            return NULL;
        }
        spare[c] = b->next;
        unsigned char *at = b->at;
        free(b);
        return at;
    }
    size_t need = c >= 0 ? class_size(c) : nt_round_up(n, CODE_ALIGN);
    if (chunk_used + need > chunk_size) { /* (no chunk: a size of 0) */
        size_t size = nt_round_up(need, CHUNK_SIZE);
        off_t offset;
        if (grow(size, &offset) != 0) {
            nt_fail(err, NT_ERR_OS, -1, "numthunk: cannot grow the code file: %s", strerror(errno));
            return NULL;
        }
        void *p = mmap(NULL, size, PROT_READ | PROT_EXEC, MAP_SHARED, mfd, offset);
        if (p == MAP_FAILED) {
            nt_fail(err, NT_ERR_OS, -1, "numthunk: cannot map executable memory: %s",
                    strerror(errno));
            return NULL;
        }
        /* The rest of the old chunk stays mapped: code in it is live. */
        if (note_chunk(p, offset, size) != 0) {
            munmap(p, size);
            nt_fail(err, NT_ERR_MEMORY, -1, "numthunk: out of memory");
            return NULL;
        }
        chunk = p;
        chunk_offset = offset;
        chunk_size = size;
        chunk_used = 0;
    }
    if (write_all(code, n, chunk_offset + (off_t)chunk_used) != 0) {
        nt_fail(err, NT_ERR_OS, -1, "numthunk: cannot write code: %s", strerror(errno));
        return NULL;
    }
    unsigned char *at = chunk + chunk_used;
    chunk_used += need;
    return at;
}

static void memfd_release(void *code, size_t n)
{
    int c = class_of(n);
    unsigned char *at = code;
    if (c < 0)
        return; /* beyond the largest class: kept */
    for (size_t k = 0; k < nchunks; k++) {
        if (at < chunks[k].at || at >= chunks[k].at + chunks[k].size)
            continue;
        block *b = malloc(sizeof(*b));
        if (b == NULL)
            return; /* kept, never reused */
        *b = (block){ at, chunks[k].offset + (off_t)(at - chunks[k].at), spare[c] };
        spare[c] = b;
        return;
    }
    /* not in this file (the parent's, after fork): left alone */
}

static void memfd_after_fork_child(void)
{
    /* Our descriptor shares the file offset and size with the parent's:
       closing our copy leaves the parent's file and its mappings intact. */
    if (mfd >= 0)
        close(mfd);
    mfd = -1;
    chunk = NULL;
    chunk_size = chunk_used = 0;
    forget_blocks();
}

const nt_execmem nt_execmem_memfd = {
    "memfd-pwrite", memfd_init, memfd_place, memfd_release, memfd_after_fork_child,
};
