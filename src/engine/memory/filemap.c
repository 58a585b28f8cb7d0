/*
 * numthunk executable memory, policy "filemap-dualview" (Windows).
 *
 * Code lives in pagefile-backed sections (CreateFileMappingW on
 * INVALID_HANDLE_VALUE, created PAGE_EXECUTE_READWRITE so that either view
 * below may be made of it). Each section is seen through two views: one
 * FILE_MAP_WRITE view, where code is written, and one FILE_MAP_READ |
 * FILE_MAP_EXECUTE view at another address, where it runs. No view is ever
 * writable and executable (the memfd "dual map" of engine/memory/memfd.c's
 * header, as Windows spells it). Windows asks for FlushInstructionCache
 * after code is written through another view; place() calls it, so that
 * engine/native.c's own flush (nothing on x86) is all it adds.
 *
 * Views start on the allocation granularity (64 KiB), so sections come in
 * 64 KiB units:
 *   - handlers are packed into 64 KiB chunks, in power-of-two blocks of 64
 *     to 8192 bytes, both views mapped for as long as the process lives; a
 *     block that came back (release, after the quarantine: no call runs it)
 *     serves the next handler of its size class;
 *   - a stub block (data_after > 0) takes a section of its own, its code at
 *     the end of the section's last 64 KiB, so that the private read-write
 *     data pages (VirtualAlloc, zeroed) begin right after the code at the
 *     next 64 KiB boundary. Both are placed in an address range reserved
 *     and released just before; another thread may take the range in
 *     between, and then another range is tried. Its write view goes once
 *     the stubs are written: they never change.
 *
 * Place in the pipeline: engine, below the native engine
 * (engine/memory/execmem.h), on Windows.
 *
 * No fork on Windows: after_fork_child has nothing to do.
 */
#include <stdlib.h>
#include <string.h>
#include <windows.h>

#include "engine/memory/execmem.h"

#define FM_GRANULE   65536u /* Windows' allocation granularity: where a view may start */
#define FM_ALIGN     16u    /* handlers' start (branch targets) */
#define FM_MIN_BLOCK 64u    /* handler blocks: 64 ... 8192 bytes */
#define FM_NCLASSES  8
#define FM_TRIES     16 /* address ranges tried for one stub block */

typedef struct {
    unsigned char *x, *w; /* the RX view and the RW view */
    size_t size;
} fm_chunk;

static fm_chunk *fm_chunks; /* every handler chunk; the last is open */
static size_t fm_nchunks, fm_cap;
static size_t fm_used; /* bytes handed out of the open chunk */

typedef struct fm_block {
    unsigned char *x, *w;
    struct fm_block *next;
} fm_block;
static fm_block *fm_spare[FM_NCLASSES];

static void fm_fail(nt_error *err, const char *what)
{
    nt_fail(err, NT_ERR_OS, -1, "numthunk: %s: Windows error %lu", what,
            (unsigned long)GetLastError());
}

static int fm_class(size_t n)
{
    size_t size = FM_MIN_BLOCK;
    for (int c = 0; c < FM_NCLASSES; c++, size *= 2)
        if (n <= size)
            return c;
    return -1;
}

/* A section of size bytes, or NULL. */
static HANDLE fm_section(size_t size)
{
    return CreateFileMappingW(INVALID_HANDLE_VALUE, NULL, PAGE_EXECUTE_READWRITE,
                              (DWORD)((unsigned long long)size >> 32), (DWORD)size, NULL);
}

/* A new open chunk of size bytes with both views. 0, or -1 (err filled). */
static int fm_new_chunk(size_t size, nt_error *err)
{
    if (fm_nchunks == fm_cap) {
        size_t ncap = fm_cap ? 2 * fm_cap : 16;
        fm_chunk *nc = realloc(fm_chunks, ncap * sizeof(*nc));
        if (nc == NULL) {
            nt_fail(err, NT_ERR_MEMORY, -1, "numthunk: out of memory");
            return -1;
        }
        fm_chunks = nc;
        fm_cap = ncap;
    }
    HANDLE h = fm_section(size);
    if (h == NULL) {
        fm_fail(err, "cannot create a code section");
        return -1;
    }
    unsigned char *w = MapViewOfFile(h, FILE_MAP_WRITE, 0, 0, size);
    unsigned char *x =
        w != NULL ? MapViewOfFile(h, FILE_MAP_READ | FILE_MAP_EXECUTE, 0, 0, size) : NULL;
    if (x == NULL)
        fm_fail(err,
                w == NULL ? "cannot map a code section writable"
                          : "cannot map a code section executable");
    CloseHandle(h); /* the views keep the section */
    if (x == NULL) {
        if (w != NULL)
            UnmapViewOfFile(w);
        return -1;
    }
    fm_chunks[fm_nchunks++] = (fm_chunk){ x, w, size };
    fm_used = 0;
    return 0;
}

/* Probe: the first chunk doubles as the check that this process may map a
   section executable at all (a policy of the system may refuse). */
static int fm_init(void)
{
    nt_error err;
    nt_error_init(&err);
    return fm_nchunks > 0 || fm_new_chunk(FM_GRANULE, &err) == 0 ? 0 : -1;
}

/* Code then data: see the header. */
static void *fm_place_block(const void *code, size_t n, size_t data_after, nt_error *err)
{
    size_t size = nt_round_up(n, FM_GRANULE);
    HANDLE h = fm_section(size);
    if (h == NULL) {
        fm_fail(err, "cannot create a code section");
        return NULL;
    }
    unsigned char *w = MapViewOfFile(h, FILE_MAP_WRITE, 0, 0, size);
    if (w == NULL) {
        fm_fail(err, "cannot map a code section writable");
        CloseHandle(h);
        return NULL;
    }
    memcpy(w + size - n, code, n);
    UnmapViewOfFile(w);
    for (int t = 0; t < FM_TRIES; t++) {
        unsigned char *at = VirtualAlloc(NULL, size + data_after, MEM_RESERVE, PAGE_NOACCESS);
        if (at == NULL)
            break;
        VirtualFree(at, 0, MEM_RELEASE);
        unsigned char *x = MapViewOfFileEx(h, FILE_MAP_READ | FILE_MAP_EXECUTE, 0, 0, size, at);
        if (x == NULL)
            continue; /* the range was taken meanwhile */
        if (VirtualAlloc(x + size, data_after, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE) == NULL) {
            UnmapViewOfFile(x);
            continue;
        }
        CloseHandle(h);
        FlushInstructionCache(GetCurrentProcess(), x + size - n, n);
        return x + size - n;
    }
    fm_fail(err, "cannot place code beside its data");
    CloseHandle(h);
    return NULL;
}

static void *fm_place(const void *code, size_t n, size_t data_after, nt_error *err)
{
    if (data_after > 0)
        return fm_place_block(code, n, data_after, err);
    int c = fm_class(n);
    unsigned char *x, *w;
    if (c >= 0 && fm_spare[c] != NULL) {
        fm_block *b = fm_spare[c];
        fm_spare[c] = b->next;
        x = b->x;
        w = b->w;
        free(b);
    } else {
        size_t need = c >= 0 ? (size_t)FM_MIN_BLOCK << c : nt_round_up(n, FM_ALIGN);
        if (fm_nchunks == 0 || fm_used + need > fm_chunks[fm_nchunks - 1].size) {
            /* the rest of the old chunk stays mapped: code in it is live */
            if (fm_new_chunk(nt_round_up(need, FM_GRANULE), err) != 0)
                return NULL;
        }
        fm_chunk *k = &fm_chunks[fm_nchunks - 1];
        x = k->x + fm_used;
        w = k->w + fm_used;
        fm_used += need;
    }
    memcpy(w, code, n);
    FlushInstructionCache(GetCurrentProcess(), x, n);
    return x;
}

static void fm_release(void *code, size_t n)
{
    int c = fm_class(n);
    unsigned char *x = code;
    if (c < 0)
        return; /* beyond the largest class: kept */
    for (size_t k = 0; k < fm_nchunks; k++) {
        fm_chunk *ch = &fm_chunks[k];
        if (x < ch->x || x >= ch->x + ch->size)
            continue;
        fm_block *b = malloc(sizeof(*b));
        if (b == NULL)
            return; /* kept, never reused */
        *b = (fm_block){ x, ch->w + (x - ch->x), fm_spare[c] };
        fm_spare[c] = b;
        return;
    }
}

static void fm_after_fork_child(void)
{
}

const nt_execmem nt_execmem_filemap = {
    "filemap-dualview", fm_init, fm_place, fm_release, fm_after_fork_child,
};
