/*
 * numthunk portability: what the core needs that compilers and platforms
 * spell differently, each given one name here, so that no other file of
 * src/ names a compiler extension or tests the platform (engine/choose.c's
 * #if chain aside, which picks the engine, and the platform files it
 * includes). tests/test_structure.py holds src/ to it: GNU builtins and
 * attributes, __atomic_*, <stdatomic.h>, _Thread_local, statement
 * expressions and VLAs appear nowhere else.
 *
 * Three families of compiler: gcc and clang (Linux, macOS, mingw-w64),
 * which take the GNU spellings; and MSVC (what setuptools picks on
 * Windows), which takes none of them: no __atomic_* and, in C, no usable
 * <stdatomic.h> without an experimental switch, no __attribute__, no
 * statement expressions, no VLAs. NT_MSVC names the last; NT_PORTABLE_MSVC
 * forces its spellings on clang (-fms-extensions), which is how
 * tools/cross.sh compiles them where there is no MSVC.
 *
 * By topic: compiler (attributes, branch hints, thread-local), atomics,
 * C library spellings, threads and processes (once, yield, nap, fork
 * hooks, stderr), memory (page size, aligned allocation, the instruction
 * cache).
 *
 * Place in the pipeline: below everything, with numthunk.h, which includes
 * it.
 */
#ifndef NUMTHUNK_PORTABLE_H
#define NUMTHUNK_PORTABLE_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if (defined(_MSC_VER) && !defined(__clang__)) || defined(NT_PORTABLE_MSVC)
#define NT_MSVC 1
#endif

#if defined(_WIN32)
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN /* no rpcndr.h: it defines `small` */
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <io.h>
#include <malloc.h>
#include <windows.h>
#else
#include <alloca.h>
#include <pthread.h>
#include <sched.h>
#include <strings.h>
#include <unistd.h>
#endif

#if defined(__APPLE__)
#include <libkern/OSCacheControl.h>
#endif

#ifdef NT_MSVC
#include <intrin.h>
#endif

/* ------------------------------------------------------------------------ */
/* Compiler: attributes, branch hints, thread-local storage                  */

#ifdef NT_MSVC
#define NT_NOINLINE     __declspec(noinline)
#define NT_COLD         /* no equivalent */
#define NT_UNUSED       /* unused static functions draw no warning */
#define NT_HIDDEN       /* a DLL exports only what it declares */
#define NT_PRINTF(f, a) /* no format checks */
#define NT_LIKELY(x)    (x)
#define NT_UNLIKELY(x)  (x)
#define NT_THREAD_LOCAL __declspec(thread)
#else
#define NT_NOINLINE     __attribute__((noinline))
#define NT_COLD         __attribute__((cold))
#define NT_UNUSED       __attribute__((unused))
#define NT_HIDDEN       __attribute__((visibility("hidden")))
#define NT_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define NT_LIKELY(x)    __builtin_expect(!!(x), 1)
#define NT_UNLIKELY(x)  __builtin_expect(!!(x), 0)
#define NT_THREAD_LOCAL _Thread_local
#endif

/* ------------------------------------------------------------------------ */
/* Atomics                                                                   */
/*
 * Named by the width they act on, since MSVC's C has no type-generic
 * builtin (nor typeof to make one): _ptr (any object pointer: the result
 * converts back), _u8, _int (32 bits), _u32 (unsigned), _u64 and _size.
 * gcc and clang take the __atomic builtins with the order given (the
 * width checked at compile time, so that a use MSVC would get wrong fails
 * everywhere); MSVC takes volatile accesses with a barrier for loads and
 * stores (a compiler barrier on x64, whose stores are not reordered with
 * older loads or stores; dmb ish on arm64) and the Interlocked intrinsics,
 * full barriers, for read-modify-write.
 */
#ifndef NT_MSVC
#define NT_RELAXED __ATOMIC_RELAXED
#define NT_ACQUIRE __ATOMIC_ACQUIRE
#define NT_RELEASE __ATOMIC_RELEASE
#define NT_ACQ_REL __ATOMIC_ACQ_REL
#define NT_SEQ_CST __ATOMIC_SEQ_CST

/* 0, or a compile error if *p is not `width` bytes wide (a constant array
   size: no VLA). */
#define NT_WIDTH_(p, width) ((void)sizeof(char[sizeof(*(p)) == (width) ? 1 : -1]))

#define NT_LOAD_(p, w, o)     (NT_WIDTH_(p, w), __atomic_load_n((p), (o)))
#define NT_STORE_(p, v, w, o) (NT_WIDTH_(p, w), __atomic_store_n((p), (v), (o)))

#define nt_atomic_load_ptr(p, o)     NT_LOAD_(p, sizeof(void *), o)
#define nt_atomic_store_ptr(p, v, o) NT_STORE_(p, v, sizeof(void *), o)
#define nt_atomic_load_u8(p, o)      NT_LOAD_(p, 1, o)
#define nt_atomic_store_u8(p, v, o)  NT_STORE_(p, v, 1, o)
#define nt_atomic_load_int(p, o)     NT_LOAD_(p, 4, o)
#define nt_atomic_store_int(p, v, o) NT_STORE_(p, v, 4, o)
#define nt_atomic_load_u32(p, o)     NT_LOAD_(p, 4, o)
#define nt_atomic_load_u64(p, o)     NT_LOAD_(p, 8, o)
#define nt_atomic_store_u64(p, v, o) NT_STORE_(p, v, 8, o)

/* The old value. */
#define nt_atomic_exchange_int(p, v, o) (NT_WIDTH_(p, 4), __atomic_exchange_n((p), (v), (o)))
/* The new value. */
#define nt_atomic_add_size(p, v, o) \
    (NT_WIDTH_(p, sizeof(size_t)), __atomic_add_fetch((p), (v), (o)))
#define nt_atomic_sub_size(p, v, o) \
    (NT_WIDTH_(p, sizeof(size_t)), __atomic_sub_fetch((p), (v), (o)))
/* 1 if *p was *expected and is now desired, else 0 with *expected set to
   what *p was (it may fail spuriously: loop). Sequentially consistent. */
#define nt_atomic_cas_u32(p, expected, desired)                                   \
    (NT_WIDTH_(p, 4),                                                             \
     __atomic_compare_exchange_n((p), (expected), (desired), 1, __ATOMIC_SEQ_CST, \
                                 __ATOMIC_SEQ_CST))
#else
#define NT_RELAXED 0
#define NT_ACQUIRE 2
#define NT_RELEASE 3
#define NT_ACQ_REL 4
#define NT_SEQ_CST 5

#if defined(_M_ARM64)
#define NT_FENCE_() __dmb(_ARM64_BARRIER_ISH)
#else
#define NT_FENCE_() _ReadWriteBarrier()
#endif

static inline void *nt_load_ptr_(void *const volatile *p)
{
    void *v = *p;
    NT_FENCE_();
    return v;
}
static inline void nt_store_ptr_(void *volatile *p, void *v)
{
    NT_FENCE_();
    *p = v;
}
static inline uint8_t nt_load_u8_(const volatile uint8_t *p)
{
    uint8_t v = *p;
    NT_FENCE_();
    return v;
}
static inline void nt_store_u8_(volatile uint8_t *p, uint8_t v)
{
    NT_FENCE_();
    *p = v;
}
static inline int nt_load_int_(const volatile int *p)
{
    int v = *p;
    NT_FENCE_();
    return v;
}
static inline void nt_store_int_(volatile int *p, int v)
{
    NT_FENCE_();
    *p = v;
}
static inline uint64_t nt_load_u64_(const volatile uint64_t *p)
{
    uint64_t v = *p;
    NT_FENCE_();
    return v;
}
static inline void nt_store_u64_(volatile uint64_t *p, uint64_t v)
{
    NT_FENCE_();
    *p = v;
}
static inline int nt_cas_u32_(volatile unsigned *p, unsigned *expected, unsigned desired)
{
    long old = _InterlockedCompareExchange((volatile long *)p, (long)desired, (long)*expected);
    if ((unsigned)old == *expected)
        return 1;
    *expected = (unsigned)old;
    return 0;
}

#define nt_atomic_load_ptr(p, o)        nt_load_ptr_((void *const volatile *)(p))
#define nt_atomic_store_ptr(p, v, o)    nt_store_ptr_((void *volatile *)(p), (void *)(v))
#define nt_atomic_load_u8(p, o)         nt_load_u8_(p)
#define nt_atomic_store_u8(p, v, o)     nt_store_u8_((p), (v))
#define nt_atomic_load_int(p, o)        nt_load_int_(p)
#define nt_atomic_store_int(p, v, o)    nt_store_int_((p), (v))
#define nt_atomic_load_u32(p, o)        ((unsigned)nt_load_int_((const volatile int *)(p)))
#define nt_atomic_load_u64(p, o)        nt_load_u64_(p)
#define nt_atomic_store_u64(p, v, o)    nt_store_u64_((p), (v))
#define nt_atomic_exchange_int(p, v, o) ((int)_InterlockedExchange((volatile long *)(p), (v)))
#define nt_atomic_add_size(p, v, o) \
    ((size_t)_InterlockedExchangeAdd64((volatile __int64 *)(p), (__int64)(v)) + (v))
#define nt_atomic_sub_size(p, v, o) \
    ((size_t)_InterlockedExchangeAdd64((volatile __int64 *)(p), -(__int64)(v)) - (v))
#define nt_atomic_cas_u32(p, expected, desired) nt_cas_u32_((p), (expected), (desired))
#endif

/* ------------------------------------------------------------------------ */
/* C library spellings                                                       */

#ifdef _WIN32
#define nt_strdup(s)        _strdup(s)
#define nt_strcasecmp(a, b) _stricmp((a), (b))
#else
#define nt_strdup(s)        strdup(s)
#define nt_strcasecmp(a, b) strcasecmp((a), (b))
#endif
/* strnlen is the C library's own on every platform (POSIX 2008, the
   Microsoft CRT, mingw-w64). */

/* ------------------------------------------------------------------------ */
/* Threads and processes                                                     */

/* nt_once: fn runs once, by the first caller; the others wait for it. */
#ifdef _WIN32
typedef INIT_ONCE nt_once;
#define NT_ONCE_INIT INIT_ONCE_STATIC_INIT

typedef struct {
    void (*fn)(void);
} nt_once_fn_;

static BOOL CALLBACK nt_once_run_(PINIT_ONCE once, PVOID fn, PVOID *context)
{
    (void)once, (void)context;
    ((nt_once_fn_ *)fn)->fn();
    return TRUE;
}

static inline void nt_call_once(nt_once *once, void (*fn)(void))
{
    nt_once_fn_ box = { fn };
    InitOnceExecuteOnce(once, nt_once_run_, &box, NULL);
}
#else
typedef pthread_once_t nt_once;
#define NT_ONCE_INIT PTHREAD_ONCE_INIT

static inline void nt_call_once(nt_once *once, void (*fn)(void))
{
    pthread_once(once, fn);
}
#endif

/* Gives up the core to another thread (a spin lock's waiter). */
static inline void nt_yield(void)
{
#ifdef _WIN32
    SwitchToThread();
#else
    sched_yield();
#endif
}

/* A short sleep, about 50 microseconds (a millisecond on Windows, whose
   Sleep counts those), while waiting for another thread. */
static inline void nt_nap(void)
{
#ifdef _WIN32
    Sleep(1);
#else
    usleep(50);
#endif
}

/* Writes n bytes to stderr with one system call, nothing buffered: safe
   where little else is (the released-thunk trap, life/released.c). */
static inline void nt_write_stderr(const char *text, size_t n)
{
#ifdef _WIN32
    int rc = _write(2, text, (unsigned)n);
#else
    ssize_t rc = write(2, text, n);
#endif
    (void)rc;
}

/* Registers the fork hooks (life/fork.c): pthread_atfork where fork
   exists; 0 and nothing on Windows, which has no fork. NT_HAS_FORK says
   which. */
#ifdef _WIN32
#define NT_HAS_FORK 0
static inline int nt_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void))
{
    (void)prepare, (void)parent, (void)child;
    return 0;
}
#else
#define NT_HAS_FORK 1
static inline int nt_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void))
{
    return pthread_atfork(prepare, parent, child);
}
#endif

/* ------------------------------------------------------------------------ */
/* Memory                                                                    */

/* The page size of the system. */
static inline long nt_page_size(void)
{
#ifdef _WIN32
    SYSTEM_INFO si;
    GetSystemInfo(&si);
    return (long)si.dwPageSize;
#else
    return sysconf(_SC_PAGESIZE);
#endif
}

/* n bytes aligned to align (a power of two), given back through
   nt_aligned_free only: memory from _aligned_malloc must never reach
   free(). n is rounded up to a multiple of align, as C11's aligned_alloc
   wants (macOS refuses other sizes). */
static inline void *nt_aligned_alloc(size_t align, size_t n)
{
#ifdef _WIN32
    return _aligned_malloc(n, align);
#else
    return aligned_alloc(align, (n + align - 1) / align * align);
#endif
}

static inline void nt_aligned_free(void *p)
{
#ifdef _WIN32
    _aligned_free(p);
#else
    free(p);
#endif
}

/* n bytes in the caller's stack frame, gone when it returns (where C99
   would have a VLA, which MSVC refuses). A macro: it must expand in the
   frame it allocates from. */
#ifdef _WIN32
#define NT_ALLOCA(n) _alloca(n)
#else
#define NT_ALLOCA(n) alloca(n)
#endif

/* Instruction-cache maintenance after code is written at p (n bytes):
   nothing on x86, whose instruction fetch snoops data writes. */
static inline void nt_icache_flush(void *p, size_t n)
{
#if defined(__APPLE__)
    sys_icache_invalidate(p, n);
#elif defined(_WIN32)
    FlushInstructionCache(GetCurrentProcess(), p, n);
#else
    __builtin___clear_cache((char *)p, (char *)p + n);
#endif
}

#endif /* NUMTHUNK_PORTABLE_H */
