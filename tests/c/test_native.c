/*
 * Standalone C harness for the native engines (x86-64 System V, Microsoft
 * x64, AArch64 Linux, and Apple's arm64 ABI run on Linux) and executable
 * memory. Plain C: no Python, cross-compilable
 * (tests/c/aarch64.sh builds it for aarch64 and runs it under qemu-user).
 *
 * Build (with the real signature/plan code):
 *   gcc -O2 -Wall -Wextra -Werror -std=c11 -D_GNU_SOURCE -Isrc \
 *       src/engine/choose.c src/engine/native.c src/engine/route.c src/life/quarantine.c src/life/fork.c src/life/released.c \
 *       src/engine/ffi.c src/kinds.c src/parse/spellings.c src/parse/declarator.c src/plan/plan.c \
 *       tests/c/test_native.c -o test_native -lffi -ldl -lpthread
 * (engine/choose.c includes the arch file and the engine/memory/ files in its platform branch;
 * engine/ffi.c is there because a native plan falls back to libffi when
 * executable memory runs out).
 * With -DNT_TEST_ABI_WIN64 on x86-64 Linux, engine/choose.c takes the
 * Microsoft x64 description instead: thunks are called through ms_abi
 * function pointers and every fixture is an ms_abi function (NT_CC), so
 * the same tests run against the Windows convention in-process; the
 * released trap and libffi entries are left to tests/c/win64.sh there.
 *
 * Run:
 *   ./test_native                 all tests (NT_FIXTURE_CC picks the compiler
 *                                 for the generated fixtures, default cc;
 *                                 NUMTHUNK_EXECMEM=memfd|mprotect the policy)
 *   ./test_native writefix PREFIX [COUNT [SEED [PARTS]]]
 *                                 writes the random signatures' fixture
 *                                 source as PREFIX.0.c ... (PARTS files, to
 *                                 compile in parallel) for a cross build;
 *                                 run the tests with NT_FIXTURE_LIB=<the
 *                                 .so built from all parts> and the same
 *                                 COUNT and SEED
 *   ./test_native apple ...       the same writefix and COUNT SEED forms,
 *                                 for Apple's arm64 ABI: fixtures for
 *                                 aarch64-macos, the engine on that
 *                                 description (tests/c/aarch64.sh)
 *   ./test_native dump [DIR]      writes the code of a few thunks (stub and
 *                                 handler, up to its final branch) to
 *                                 DIR/<name>.{stub,handler}.bin for a
 *                                 disassembler
 *   ./test_native bench           timings: direct vs thunk, creation cost
 *   ./test_native loop KIND N     one call loop (for callgrind)
 *
 * The differential test generates C fixtures for random signatures, builds
 * them with a real compiler (the oracle for the ABI) into a shared library
 * and loads it. Each fixture records what it received; the caller passes
 * narrow forwarded integers as 64-bit values with garbage above the type,
 * as Numba does, so a missing re-extension shows up with clang callees.
 * Every other signature forwards its parameters in a permuted order (moves
 * in cycles), and one in four forwards them all (stack arguments rewritten
 * in the caller's area).
 * Every third fixture declares its narrow parameters as 32-bit ints and
 * records all 32 bits: the engines promise extension to 32 bits whether or
 * not a given compiler's callees rely on it (Linux AArch64 callees extend
 * for themselves; Apple's make the caller do it).
 *
 * NT_EXEC_WRAPPER: a command prefix for re-running this program (the
 * NUMTHUNK_NO_REUSE check runs in a new process), e.g. "qemu-aarch64".
 *
 * Built with -DNT_TEST_WRAP_ALLOC and the linker's
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=aligned_alloc,--wrap=strdup
 * (tests/test_core_c.py does), the engine's own allocations pass through
 * this file, and each one of the engine's start and of a first thunk is
 * failed in turn, each in a process of its own ("nomem K").
 */
#include <complex.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "numthunk.h"
#include "engine/memory/execmem.h"
#include "engine/native.h"
#include "check.h"
#include "gensig.h"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */

static const nt_engine *be;

#ifdef NT_TEST_WRAP_ALLOC
/* The allocation to fail, counted from 1 once armed (0: none), and the
   count so far. */
static long nomem_at, nomem_count;

static int nomem_now(void)
{
    return nomem_at > 0 && ++nomem_count == nomem_at;
}

void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t a, size_t n);
char *__real_strdup(const char *s);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t k, size_t n);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_aligned_alloc(size_t a, size_t n);
char *__wrap_strdup(const char *s);

void *__wrap_malloc(size_t n)
{
    return nomem_now() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t k, size_t n)
{
    return nomem_now() ? NULL : __real_calloc(k, n);
}

void *__wrap_realloc(void *p, size_t n)
{
    return nomem_now() ? NULL : __real_realloc(p, n);
}

void *__wrap_aligned_alloc(size_t a, size_t n)
{
    return nomem_now() ? NULL : __real_aligned_alloc(a, n);
}

char *__wrap_strdup(const char *s)
{
    return nomem_now() ? NULL : __real_strdup(s);
}
#endif

static double
now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static nt_sig *
make_sig(int ret, const int *kinds, int n)
{
    nt_sig *s = calloc(1, sizeof(*s));
    s->ret.kind = (uint8_t)ret;
    s->nargs = n;
    s->args = calloc((size_t)n + 1, sizeof(nt_type));
    s->names = calloc((size_t)n + 1, sizeof(char *));
    for (int i = 0; i < n; i++) {
        s->args[i].kind = (uint8_t)kinds[i];
        if (kinds[i] == NT_PTR)
            s->args[i].depth = 1;
    }
    if (ret == NT_PTR)
        s->ret.depth = 1;
    return s;
}

static void
free_sig(nt_sig *s)
{
    free(s->args);
    free(s->names);
    free(s);
}

/* A thunk made the way the core makes one. bound[i] != 0: parameter i is
   bound to the 64-bit cell value vals[i]. */
typedef struct {
    nt_sig *sig;
    nt_plan *plan;
    nt_ctx *ctx;
    nt_entry_ref entry;
    void *address;
} thunk;

static int
set_values(nt_plan *plan, nt_ctx *ctx, const uint64_t *vals)
{
    for (int i = 0; i < plan->nargs; i++)
        if (plan->slots[i].src == NT_SRC_BOUND)
            memcpy(ctx->values + plan->slots[i].offset, &vals[i], 8);
    return 0;
}

/* As make_thunk, the thunk taking the target's forwarded parameters in
   another order where perm is not NULL: its parameter k is the target's
   forwarded parameter perm[k]. */
static int
make_thunk_perm(thunk *t, nt_sig *sig, const int *bound, const uint64_t *vals,
                void *target, const int *perm)
{
    nt_error err = { NT_OK, -1, "" };
    memset(t, 0, sizeof(*t));
    t->sig = sig;
    t->plan = nt_plan_new(sig, &err);
    if (t->plan == NULL)
        goto fail;
    for (int i = 0; i < sig->nargs; i++) {
        if (bound[i])
            nt_plan_set_bound(t->plan, i);
        else
            nt_plan_set_arg(t->plan, i);
    }
    if (nt_plan_finish(t->plan, &err) != 0)
        goto fail;
    for (int k = 0; perm != NULL && k < t->plan->nfwd; k++) {
        int i = -1;
        for (int j = 0; j <= perm[k]; j++)
            for (i++; t->plan->slots[i].src != NT_SRC_ARG; i++)
                ;
        t->plan->slots[i].fwd = (uint16_t)k;
        t->plan->fwd_index[k] = i;
    }
    t->plan->engine = be;
    if (be->supports(t->plan) != NT_OK) {
        nt_fail(&err, NT_ERR_UNSUPPORTED, -1, "unsupported");
        goto fail;
    }
    if (be->prepare(t->plan, &err) != NT_OK)
        goto fail;
    t->ctx = nt_ctx_new(t->plan, target, &err);
    if (t->ctx == NULL)
        goto fail;
    t->ctx->handler = t->plan->handler;
    t->ctx->target = target;
    set_values(t->plan, t->ctx, vals);
    if (be->entry_new(t->plan, t->ctx, &t->entry, &t->address, &err)
        != NT_OK)
        goto fail;
    return 0;
fail:
    fprintf(stderr, "make_thunk: %s\n", err.msg);
    return -1;
}

static int
make_thunk(thunk *t, nt_sig *sig, const int *bound, const uint64_t *vals,
           void *target)
{
    return make_thunk_perm(t, sig, bound, vals, target, NULL);
}

static void
drop_thunk(thunk *t)
{
    nt_entry_free(&t->entry, NULL);
    if (t->plan != NULL)
        be->plan_release(t->plan);
    nt_ctx_free_chain(t->ctx, NULL);
    nt_plan_free(t->plan);
    t->ctx = NULL;
    t->plan = NULL;
}

/* ------------------------------------------------------------------------ */
/* Hand-written fixtures: names encode signatures (f_d_pi = double(double*,  */
/* int)).                                                                    */

/* The convention thunks are called with and fixtures compiled for:
   Microsoft x64 where the harness tests that description on x86-64 Linux
   (built with -DNT_TEST_ABI_WIN64, which engine/choose.c's chain reads),
   else the platform's own. */
#ifdef NT_TEST_ABI_WIN64
#define NT_CC      __attribute__((ms_abi))
#define NT_CC_TEXT "__attribute__((ms_abi)) "
/* What the engine calls that is not a thunk's target, the released trap
   (nt_trap_released_at) and libffi's closures (the fallback when
   executable memory runs out), follow System V in this build: their tests
   run where the whole program is Microsoft x64 (tests/c/win64.sh, Wine). */
#define NT_PLATFORM_CALLS 0
#else
#define NT_PLATFORM_CALLS 1
#define NT_CC
#define NT_CC_TEXT ""
#endif

#if defined(__clang__)
#define NOIPA __attribute__((noinline))
#else
#define NOIPA __attribute__((noinline, noipa))
#endif

NOIPA NT_CC double
f_d_pi(double *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += x[i];
    return s;
}

NOIPA NT_CC long
f_l_ll(long a, long b)
{
    return a + b;
}

/* 10 ints and 10 doubles: 4 + 2 on the stack. */
NOIPA NT_CC double
f_d_i10d10(int a0, int a1, int a2, int a3, int a4, int a5, int a6, int a7,
           int a8, int a9, double d0, double d1, double d2, double d3,
           double d4, double d5, double d6, double d7, double d8, double d9)
{
    return a0 + 2.0 * a1 + 3.0 * a2 + 4.0 * a3 + 5.0 * a4 + 6.0 * a5
           + 7.0 * a6 + 8.0 * a7 + 9.0 * a8 + 10.0 * a9 + 11 * d0 + 12 * d1
           + 13 * d2 + 14 * d3 + 15 * d4 + 16 * d5 + 17 * d6 + 18 * d7
           + 19 * d8 + 20 * d9;
}

NOIPA NT_CC long
f_l_c(signed char c)
{
    return c;
}

/* complex returns come back in xmm0 (float) or xmm0:xmm1 (double): the
   handler passes them through, in the tail form and in the frame form */
NOIPA NT_CC double _Complex
f_C_dd(double re, double im)
{
    return re + im * _Complex_I;
}

NOIPA NT_CC float _Complex
f_F_ff(float re, float im)
{
    return re + im * _Complex_I;
}

NOIPA NT_CC double _Complex
f_C_l8d(long a0, long a1, long a2, long a3, long a4, long a5, long a6,
        long a7, double im)
{
    return (double)(a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7) + im * _Complex_I;
}

static uint64_t
dbits(double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

/* complex returns come back in xmm0 (float) or xmm0:xmm1 (double) on
   System V, in s0:s1 / d0:d1 on AArch64: the handler passes them through,
   in the tail form and in the frame form */
static void
test_complex_returns(void)
{
    thunk t;
    nt_sig *s;
    int kdd[2] = { NT_F64, NT_F64 };
    int b10[2] = { 1, 0 };
    uint64_t vdd[2] = { dbits(1.5), 0 };
    s = make_sig(NT_C128, kdd, 2);
    if (make_thunk(&t, s, b10, vdd, (void *)f_C_dd) == 0) {
        double _Complex (NT_CC *fn)(double) = (double _Complex (NT_CC *)(double))t.address;
        double _Complex z = fn(-2.25);
        CHECK(creal(z) == 1.5 && cimag(z) == -2.25, "f_C_dd gave %g%+gi",
              creal(z), cimag(z));
        drop_thunk(&t);
    } else {
        failures++;
    }
    free_sig(s);
    int kff[2] = { NT_F32, NT_F32 };
    float re = 0.75f;
    uint32_t reb;
    memcpy(&reb, &re, 4);
    uint64_t vff[2] = { reb, 0 };
    s = make_sig(NT_C64, kff, 2);
    if (make_thunk(&t, s, b10, vff, (void *)f_F_ff) == 0) {
        float _Complex (NT_CC *fn)(float) = (float _Complex (NT_CC *)(float))t.address;
        float _Complex z = fn(4.5f);
        CHECK(crealf(z) == 0.75f && cimagf(z) == 4.5f, "f_F_ff gave %g%+gi",
              crealf(z), cimagf(z));
        drop_thunk(&t);
    } else {
        failures++;
    }
    free_sig(s);
    /* frame form: 8 longs bound (2 on the stack), the double forwarded */
    int k9[9], b9[9];
    uint64_t v9[9];
    for (int i = 0; i < 9; i++) {
        k9[i] = i < 8 ? NT_I64 : NT_F64;
        b9[i] = i < 8;
        v9[i] = (uint64_t)(i + 1);
    }
    s = make_sig(NT_C128, k9, 9);
    if (make_thunk(&t, s, b9, v9, (void *)f_C_l8d) == 0) {
        double _Complex (NT_CC *fn)(double) = (double _Complex (NT_CC *)(double))t.address;
        double _Complex z = fn(7.5);
        CHECK(creal(z) == 36 && cimag(z) == 7.5, "f_C_l8d gave %g%+gi",
              creal(z), cimag(z));
        drop_thunk(&t);
    } else {
        failures++;
    }
    free_sig(s);
}

/* Microsoft x64 returns a double complex through a hidden pointer (and a
   float complex as an 8-byte aggregate): the engine refuses both, as it
   refuses every complex and struct argument, so libffi takes them. */
static void
test_complex_refused(void)
{
    int kdd[2] = { NT_F64, NT_F64 };
    for (int ret = NT_C64; ret <= NT_C128; ret++) {
        nt_error err = { NT_OK, -1, "" };
        nt_sig *s = make_sig(ret, kdd, 2);
        nt_plan *plan = nt_plan_new(s, &err);
        nt_plan_set_bound(plan, 0);
        nt_plan_set_arg(plan, 1);
        CHECK(plan != NULL && nt_plan_finish(plan, &err) == NT_OK
              && be->supports(plan) == NT_ERR_UNSUPPORTED,
              "a complex return (kind %d) is taken by the native engine", ret);
        nt_plan_free(plan);
        free_sig(s);
    }
    fprintf(stderr, "  complex returns: refused (libffi takes them)\n");
}

static void
test_handwritten(void)
{
    double arr[4] = { 1, 2, 3, 4.5 };
    int kinds_pi[2] = { NT_PTR, NT_I32 };
    nt_sig *s = make_sig(NT_F64, kinds_pi, 2);
    int all[2] = { 1, 1 };
    uint64_t vals[2] = { (uint64_t)(uintptr_t)arr, 4 };
    thunk t;
    if (make_thunk(&t, s, all, vals, (void *)f_d_pi) == 0) {
        double (NT_CC *fn)(void) = (double (NT_CC *)(void))t.address;
        CHECK(fn() == 10.5, "sum thunk gave %g", fn());
        arr[0] = 100;   /* live pointer: the change is seen */
        CHECK(fn() == 109.5, "sum thunk after mutation gave %g", fn());
        /* rebind n */
        nt_error err = { NT_OK, -1, "" };
        nt_ctx *c2 = nt_ctx_new(t.plan, (void *)f_d_pi, &err);
        c2->handler = t.plan->handler;
        c2->target = (void *)f_d_pi;
        uint64_t v2[2] = { (uint64_t)(uintptr_t)arr, 2 };
        set_values(t.plan, c2, v2);
        c2->older = t.ctx;
        nt_entry_swap(&t.entry, c2);
        t.ctx = c2;
        CHECK(fn() == 102, "swapped sum thunk gave %g", fn());
        drop_thunk(&t);
    } else {
        failures++;
    }
    free_sig(s);

    /* complex returns: passed through where the ABI returns them in
       registers, else refused (libffi's) */
    if (nt_arch_native->abi.ret_kinds & NT_KIND_BIT(NT_C128))
        test_complex_returns();
    else
        test_complex_refused();

    /* forwarded narrow signed char with garbage above it */
    int kinds_c[1] = { NT_I8 };
    s = make_sig(NT_I64, kinds_c, 1);
    int none[1] = { 0 };
    if (make_thunk(&t, s, none, vals, (void *)f_l_c) == 0) {
        long (NT_CC *fn)(uint64_t) = (long (NT_CC *)(uint64_t))t.address;
        CHECK(fn(0x12345600ull | 0xD7) == -41, "f_l_c gave %ld",
              fn(0x12345600ull | 0xD7));
        drop_thunk(&t);
    } else {
        failures++;
    }
    free_sig(s);

    /* stack arguments: bind all ints, forward the doubles in reverse-free
       order; then bind the doubles and forward the ints */
    int k20[20];
    for (int i = 0; i < 20; i++)
        k20[i] = i < 10 ? NT_I32 : NT_F64;
    s = make_sig(NT_F64, k20, 20);
    int b20[20];
    uint64_t v20[20];
    double expect = 0;
    for (int i = 0; i < 20; i++) {
        b20[i] = i < 10;
        v20[i] = i < 10 ? (uint64_t)(int64_t)(i - 3) : dbits(i * 0.5);
        expect += (i + 1) * (i < 10 ? (double)(i - 3) : i * 0.5);
    }
    if (make_thunk(&t, s, b20, v20, (void *)f_d_i10d10) == 0) {
        double (NT_CC *fn)(double, double, double, double, double, double, double,
                     double, double, double)
            = (double (NT_CC *)(double, double, double, double, double, double,
                          double, double, double, double))t.address;
        double r = fn(5, 5.5, 6, 6.5, 7, 7.5, 8, 8.5, 9, 9.5);
        CHECK(r == expect, "f_d_i10d10 doubles forwarded: %g != %g", r,
              expect);
        drop_thunk(&t);
    } else {
        failures++;
    }
    for (int i = 0; i < 20; i++)
        b20[i] = i >= 10;
    if (make_thunk(&t, s, b20, v20, (void *)f_d_i10d10) == 0) {
        double (NT_CC *fn)(long, long, long, long, long, long, long, long, long,
                     long)
            = (double (NT_CC *)(long, long, long, long, long, long, long, long,
                          long, long))t.address;
        double r = fn(-3, -2, -1, 0, 1, 2, 3, 4, 5, 6);
        CHECK(r == expect, "f_d_i10d10 ints forwarded: %g != %g", r, expect);
        drop_thunk(&t);
    } else {
        failures++;
    }
    free_sig(s);
}

/* ------------------------------------------------------------------------ */
/* Differential test over generated fixtures                                 */

#define NSIG_DEFAULT 2500
#define MAXP 16

typedef struct {
    int ret;
    int n;
    int kinds[MAXP];
    int bound[MAXP];
    int wide;           /* the fixture declares narrow ints as 32-bit */
    int in_reg[MAXP];   /* the target's parameter i is passed in a register */
    /* the thunk's parameter k is the target's forwarded parameter perm[k]
       (counting forwarded ones only): every other signature takes its
       forwarded parameters in another order, so that moves form cycles */
    int nfwd;
    int perm[MAXP];
} gsig;

/* The Apple arm64 ABI (tests/c/aarch64.sh "apple"): the engine runs on its
   description, and the fixtures, callees and callers, are compiled for
   aarch64-macos. Where the ABIs differ, the fixtures follow it: stack
   arguments take their natural size, so a narrow int is seen as 32 bits
   only where it is passed in a register, and a caller passes each stack
   argument as its own type. */
static int apple;

static void
gen_sigs(gsig *g, int count, uint64_t seed)
{
    rng_state = seed;
    for (int s = 0; s < count; s++) {
        gsig *x = &g[s];
        int mode = (int)(rng() % 4);  /* 0 mixed, 1 mostly ints, 2 mostly
                                         floats, 3 narrow ints */
        x->n = (int)(rng() % (MAXP + 1));
        if (s % 5 == 0)
            x->n = MAXP;
        for (int i = 0; i < x->n; i++) {
            int k = scalar_kinds[rng() % NSCALAR];
            int r = (int)(rng() % 10);
            if (mode == 1 && r < 7)
                k = scalar_kinds[rng() % 9];
            else if (mode == 2 && r < 7)
                k = rng() & 1 ? NT_F32 : NT_F64;
            else if (mode == 3 && r < 7)
                k = NT_BOOL + (int)(rng() % 5);
            x->kinds[i] = k;
            x->bound[i] = (int)(rng() & 1);
        }
        int rr = (int)(rng() % (NSCALAR + 1));
        x->ret = rr == NSCALAR ? NT_VOID : scalar_kinds[rr];
        x->wide = s % 3 == 1;
        /* one in four forwards every parameter: the stack arguments then
           move within the caller's area (the tail form), in order or
           (odd s) not */
        for (int i = 0; i < x->n && s % 8 >= 6; i++)
            x->bound[i] = 0;
        int used[2] = { 0, 0 };
        x->nfwd = 0;
        for (int i = 0; i < x->n; i++) {
            x->in_reg[i] = used[NT_IS_FLOAT(x->kinds[i])]++ < 8;
            x->nfwd += !x->bound[i];
        }
        if (s % 2 == 1) {
            random_permutation(x->perm, x->nfwd);
        } else {
            for (int k = 0; k < x->nfwd; k++)
                x->perm[k] = k;
        }
    }
}

/* Whether the fixture declares the target's parameter i as a 32-bit int:
   a narrow one in the wide view (on Apple's ABI only in a register, where
   the view does not move the stack arguments). */
static int
is_wide(const gsig *x, int i)
{
    return x->wide && is_narrow(x->kinds[i]) && (!apple || x->in_reg[i]);
}

/* The C type a fixture declares for the target's parameter i: narrow ints
   become 32-bit in the wide view, keeping their signedness. */
static const char *
param_ctype(const gsig *x, int i)
{
    int k = x->kinds[i];
    if (is_wide(x, i))
        return k == NT_I8 || k == NT_I16 ? "int" : "unsigned int";
    return ctype(k);
}

/* The target's parameter index of the thunk's parameter k. */
static int
thunk_param(const gsig *x, int k)
{
    for (int i = 0, j = 0; i < x->n; i++)
        if (!x->bound[i] && j++ == x->perm[k])
            return i;
    return -1;
}

static int
write_fixtures(const char *path, const gsig *g, int count, uint64_t seed,
               int lo, int hi)
{
    /* Signatures [lo, hi) of count: a part of the fixtures, so that parts
       can be compiled in parallel; the part with lo == 0 defines the
       shared globals. */
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fprintf(f,
            "#include <stdint.h>\n#include <string.h>\n"
            "%suint64_t nt_in[%d]; %suint64_t nt_rec[%d]; "
            "%suint64_t nt_retval;\n%slong nt_calls;\n",
            lo ? "extern " : "", MAXP, lo ? "extern " : "", MAXP + 1,
            lo ? "extern " : "", lo ? "extern " : "");
    if (lo == 0)
        fprintf(f, "const int nt_fixture_count = %d;\n"
                "const unsigned long long nt_fixture_seed = %lluull;\n",
                count, (unsigned long long)seed);
    fprintf(f,
            "static uint64_t fb(float x){uint32_t u;memcpy(&u,&x,4);return u;}\n"
            "static uint64_t db(double x){uint64_t u;memcpy(&u,&x,8);return u;}\n"
            "static float bf(uint64_t v){uint32_t u=(uint32_t)v;float x;"
            "memcpy(&x,&u,4);return x;}\n"
            "static double bd(uint64_t v){double x;memcpy(&x,&v,8);return x;}\n");
    for (int s = lo; s < hi; s++) {
        const gsig *x = &g[s];
        /* the fixture */
        fprintf(f, "%s " NT_CC_TEXT "fx_%d(", ctype(x->ret), s);
        for (int i = 0; i < x->n; i++)
            fprintf(f, "%s%s a%d", i ? ", " : "", param_ctype(x, i), i);
        fprintf(f, "%s) {\n", x->n ? "" : "void");
        for (int i = 0; i < x->n; i++) {
            int k = x->kinds[i];
            if (k == NT_F32)
                fprintf(f, "  nt_rec[%d] = fb(a%d);\n", i, i);
            else if (k == NT_F64)
                fprintf(f, "  nt_rec[%d] = db(a%d);\n", i, i);
            else if (k == NT_PTR)
                fprintf(f, "  nt_rec[%d] = (uint64_t)(uintptr_t)a%d;\n", i, i);
            else if (is_wide(x, i))
                fprintf(f, "  nt_rec[%d] = (uint32_t)a%d;\n", i, i);
            else
                fprintf(f, "  nt_rec[%d] = (uint64_t)(int64_t)a%d;\n", i, i);
        }
        fprintf(f, "  nt_calls++;\n");
        if (x->ret == NT_F32)
            fprintf(f, "  return bf(nt_retval);\n");
        else if (x->ret == NT_F64)
            fprintf(f, "  return bd(nt_retval);\n");
        else if (x->ret == NT_PTR)
            fprintf(f, "  return (void *)(uintptr_t)nt_retval;\n");
        else if (x->ret != NT_VOID)
            fprintf(f, "  return (%s)nt_retval;\n", ctype(x->ret));
        fprintf(f, "}\n");

        /* the caller of the thunk: the forwarded params in the thunk's
           order; narrow ints and pointers in registers as full 64-bit
           values (garbage above the type), and (Apple) each on the stack
           as its own type, whose size places the next */
        fprintf(f, "typedef %s (" NT_CC_TEXT "*tk_%d)(", ctype(x->ret), s);
        int used[2] = { 0, 0 };
        for (int k = 0; k < x->nfwd; k++) {
            int kind = x->kinds[thunk_param(x, k)];
            int in_reg = used[NT_IS_FLOAT(kind)]++ < 8;
            fprintf(f, "%s%s", k ? ", " : "",
                    kind == NT_F32 ? "float" : kind == NT_F64 ? "double"
                    : apple && !in_reg ? ctype(kind) : "uint64_t");
        }
        fprintf(f, "%s);\n", x->nfwd ? "" : "void");
        fprintf(f, "void call_%d(void *fn) {\n  ", s);
        if (x->ret != NT_VOID)
            fprintf(f, "%s r = ", ctype(x->ret));
        fprintf(f, "((tk_%d)fn)(", s);
        used[0] = used[1] = 0;
        for (int k = 0; k < x->nfwd; k++) {
            int i = thunk_param(x, k), kind = x->kinds[i];
            int in_reg = used[NT_IS_FLOAT(kind)]++ < 8;
            const char *fmt = kind == NT_F32 ? "bf(nt_in[%d])"
                              : kind == NT_F64 ? "bd(nt_in[%d])"
                              : !apple || in_reg ? "nt_in[%d]"
                              : kind == NT_BOOL ? "(_Bool)(nt_in[%d] & 1)"
                              : kind == NT_PTR ? "(void *)(uintptr_t)nt_in[%d]"
                              : NULL;
            fprintf(f, "%s", k ? ", " : "");
            if (fmt != NULL)
                fprintf(f, fmt, i);
            else
                fprintf(f, "(%s)nt_in[%d]", ctype(kind), i);
        }
        fprintf(f, ");\n");
        if (x->ret == NT_F32)
            fprintf(f, "  nt_rec[%d] = fb(r);\n", MAXP);
        else if (x->ret == NT_F64)
            fprintf(f, "  nt_rec[%d] = db(r);\n", MAXP);
        else if (x->ret == NT_PTR)
            fprintf(f, "  nt_rec[%d] = (uint64_t)(uintptr_t)r;\n", MAXP);
        else if (x->ret != NT_VOID)
            fprintf(f, "  nt_rec[%d] = (uint64_t)(int64_t)r;\n", MAXP);
        fprintf(f, "}\n");
    }
    return fclose(f);
}

/* The value a callee of kind k sees for the 64-bit input v. */
static uint64_t
received(int k, uint64_t v)
{
    switch (k) {
    case NT_BOOL: return v & 1;
    case NT_I8: return (uint64_t)(int64_t)(int8_t)v;
    case NT_U8: return (uint8_t)v;
    case NT_I16: return (uint64_t)(int64_t)(int16_t)v;
    case NT_U16: return (uint16_t)v;
    case NT_I32: return (uint64_t)(int64_t)(int32_t)v;
    case NT_U32: return (uint32_t)v;
    case NT_F32: return (uint32_t)v;
    default: return v;
    }
}

/* A random input for kind k; forwarded narrow ints get garbage above. */
static uint64_t
random_value(int k)
{
    uint64_t v = rng();
    if (k == NT_BOOL)
        return (v & ~(uint64_t)0xFF) | (v >> 63);
    if (k == NT_F32) {
        float x = (float)((int64_t)(v >> 40) - (1 << 23)) / 64.0f;
        uint32_t u;
        memcpy(&u, &x, 4);
        return (v & 0xFFFFFFFF00000000ull) | u;
    }
    if (k == NT_F64)
        return dbits((double)(int64_t)(v >> 11) / 1024.0);
    return v;
}

/* The 64-bit cell the core stores for a bound value: extended, float in
   the low 4 bytes. */
static uint64_t
cell_value(int k, uint64_t v)
{
    return k == NT_F32 ? (uint32_t)v : received(k, v);
}

#if defined(__aarch64__)
extern const nt_arch nt_arch_aarch64_apple;
#endif

/* The ABI the engine runs on here, for the statistics only (which
   signatures used the stack, which needed a frame). */
static const nt_abi *
harness_abi(void)
{
#if defined(__aarch64__)
    if (apple)
        return &nt_arch_aarch64_apple.abi;
#endif
    return &nt_arch_native->abi;
}

static void
test_random(int count, uint64_t seed)
{
    const char *cc = getenv("NT_FIXTURE_CC");
    if (cc == NULL || *cc == '\0')
        cc = "cc";
    /* NT_FIXTURE_LIB: fixtures built beforehand (cross builds, where this
       program runs under emulation and cannot run the compiler) */
    const char *prebuilt = getenv("NT_FIXTURE_LIB");
    char dir[] = "/tmp/nt_fixtures_XXXXXX";
    char src[256], lib[256], cmd[1024];
    gsig *g = calloc((size_t)count, sizeof(gsig));
    gen_sigs(g, count, seed);
    dir[0] = '\0';
    if (prebuilt != NULL && *prebuilt != '\0') {
        snprintf(lib, sizeof(lib), "%s", prebuilt);
    } else {
        strcpy(dir, "/tmp/nt_fixtures_XXXXXX");
        if (mkdtemp(dir) == NULL) {
            CHECK(0, "mkdtemp: %s", strerror(errno));
            free(g);
            return;
        }
        snprintf(src, sizeof(src), "%s/fx.c", dir);
        snprintf(lib, sizeof(lib), "%s/fx.so", dir);
        if (write_fixtures(src, g, count, seed, 0, count) != 0) {
            CHECK(0, "cannot write %s", src);
            free(g);
            return;
        }
        snprintf(cmd, sizeof(cmd), "%s -O2 -shared -fPIC -w -o %s %s", cc,
                 lib, src);
        double t0 = now_ns();
        if (system(cmd) != 0) {
            CHECK(0, "fixture build failed: %s", cmd);
            free(g);
            return;
        }
        fprintf(stderr, "  fixtures: %d signatures built with %s in %.1f "
                "s\n", count, cc, (now_ns() - t0) / 1e9);
    }
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        CHECK(0, "dlopen: %s", dlerror());
        free(g);
        return;
    }
    const int *fcount = dlsym(h, "nt_fixture_count");
    const unsigned long long *fseed = dlsym(h, "nt_fixture_seed");
    /* the signatures of a seed are the same whatever the count: a fixture
       for more signatures serves a run over the first `count` */
    if (fcount == NULL || fseed == NULL || *fcount < count
        || *fseed != (unsigned long long)seed) {
        CHECK(0, "%s does not hold the first %d signatures of seed %llu",
              lib, count, (unsigned long long)seed);
        dlclose(h);
        free(g);
        return;
    }
    if (prebuilt != NULL && *prebuilt != '\0')
        fprintf(stderr, "  fixtures: %d signatures prebuilt in %s\n", count,
                lib);
    uint64_t *in = dlsym(h, "nt_in");
    uint64_t *rec = dlsym(h, "nt_rec");
    uint64_t *retval = dlsym(h, "nt_retval");
    long *calls = dlsym(h, "nt_calls");

    int nstack = 0, nframe = 0, ntail = 0, bad = 0;
    rng_state = seed ^ 0xABCDEF;
    for (int s = 0; s < count && bad < 20; s++) {
        const gsig *x = &g[s];
        char name[32];
        snprintf(name, sizeof(name), "fx_%d", s);
        void *fx = dlsym(h, name);
        snprintf(name, sizeof(name), "call_%d", s);
        void (*call)(void *) = (void (*)(void *))dlsym(h, name);

        uint64_t vals[MAXP], cells[MAXP];
        for (int i = 0; i < x->n; i++) {
            vals[i] = random_value(x->kinds[i]);
            cells[i] = cell_value(x->kinds[i], vals[i]);
            in[i] = vals[i];
        }
        nt_sig *sig = make_sig(x->ret, x->kinds, x->n);
        thunk t;
        if (make_thunk_perm(&t, sig, x->bound, cells, fx, x->perm) != 0) {
            CHECK(0, "sig %d: cannot make thunk", s);
            bad++;
            free_sig(sig);
            continue;
        }
        nt_route hp;
        if (nt_route_make(harness_abi(), t.plan, &hp) == 0) {
            nstack += hp.target_stack + hp.thunk_stack > 0;
            nframe += !hp.tail;
            ntail += hp.tail && hp.target_stack > 0;
        }
        for (int round = 0; round < 2; round++) {
            *retval = random_value(x->ret == NT_VOID ? NT_I64 : x->ret);
            memset(rec, 0xEE, (MAXP + 1) * sizeof(uint64_t));
            long before = *calls;
            call(t.address);
            CHECK(*calls == before + 1, "sig %d: fixture not called", s);
            for (int i = 0; i < x->n; i++) {
                uint64_t want = x->bound[i] ? received(x->kinds[i], cells[i])
                                            : received(x->kinds[i], vals[i]);
                if (is_wide(x, i))
                    want = (uint32_t)want;   /* all 32 bits extended */
                if (rec[i] != want) {
                    CHECK(0, "sig %d round %d arg %d (%s%s, %s): got %#llx "
                          "want %#llx", s, round, i, ctype(x->kinds[i]),
                          is_wide(x, i) ? " seen as 32 bits" : "",
                          x->bound[i] ? "bound" : "forwarded",
                          (unsigned long long)rec[i],
                          (unsigned long long)want);
                    bad++;
                }
            }
            if (x->ret != NT_VOID) {
                /* (_Bool)v is v != 0, unlike a bool argument */
                uint64_t want = x->ret == NT_BOOL ? *retval != 0
                                                  : received(x->ret, *retval);
                CHECK(rec[MAXP] == want, "sig %d: return %#llx want %#llx",
                      s, (unsigned long long)rec[MAXP],
                      (unsigned long long)want);
            }
            if (round == 1)
                break;
            /* rebind: new values for bound params, one swap */
            nt_error err = { NT_OK, -1, "" };
            nt_ctx *c2 = nt_ctx_new(t.plan, fx, &err);
            c2->handler = t.plan->handler;
            c2->target = fx;
            for (int i = 0; i < x->n; i++) {
                vals[i] = random_value(x->kinds[i]);
                cells[i] = cell_value(x->kinds[i], vals[i]);
                in[i] = vals[i];
            }
            set_values(t.plan, c2, cells);
            c2->older = t.ctx;
            nt_entry_swap(&t.entry, c2);
            t.ctx = c2;
        }
        drop_thunk(&t);
        free_sig(sig);
    }
    fprintf(stderr, "  random: %d signatures (seed %llu), %d with stack "
            "args: %d needing a frame, %d moving them in the caller's "
            "area\n", count, (unsigned long long)seed, nstack, nframe, ntail);
    dlclose(h);
    free(g);
    if (dir[0] != '\0') {
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "  (could not remove %s)\n", dir);
    }
}

/* ------------------------------------------------------------------------ */
/* Permuted forwarding: the thunk's parameters in another order than the     */
/* target's. plan/plan.c keeps the order, but the engine takes any permutation;  */
/* permutations make move cycles (registers and stack slots), which          */
/* order-keeping plans never do.                                             */

static uint64_t prec[16];

#define L long
#define D double
NOIPA NT_CC void
f_v_l16(L a0, L a1, L a2, L a3, L a4, L a5, L a6, L a7, L a8, L a9, L a10,
        L a11, L a12, L a13, L a14, L a15)
{
    L a[16] = { a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13,
                a14, a15 };
    memcpy(prec, a, sizeof(a));
}

NOIPA NT_CC void
f_v_d16(D a0, D a1, D a2, D a3, D a4, D a5, D a6, D a7, D a8, D a9, D a10,
        D a11, D a12, D a13, D a14, D a15)
{
    D a[16] = { a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13,
                a14, a15 };
    memcpy(prec, a, sizeof(a));
}

/* ints and doubles interleaved: l d l d ...; only the ints overflow */
NOIPA NT_CC void
f_v_ld8(L a0, D a1, L a2, D a3, L a4, D a5, L a6, D a7, L a8, D a9, L a10,
        D a11, L a12, D a13, L a14, D a15)
{
    uint64_t u[16];
    L l[8] = { a0, a2, a4, a6, a8, a10, a12, a14 };
    D d[8] = { a1, a3, a5, a7, a9, a11, a13, a15 };
    for (int i = 0; i < 8; i++) {
        memcpy(&u[2 * i], &l[i], 8);
        memcpy(&u[2 * i + 1], &d[i], 8);
    }
    memcpy(prec, u, sizeof(u));
}

/* narrow ints seen as 32 bits (the kinds cycle through bool, int8, uint8,
   int16, uint16): a missing or wrong extension shows in the upper bits,
   also for a value parked while a cycle of moves is broken */
#define S int
#define U unsigned
NOIPA NT_CC void
f_v_n16(U a0, S a1, U a2, S a3, U a4, U a5, S a6, U a7, S a8, U a9, U a10,
        S a11, U a12, S a13, U a14, U a15)
{
    U a[16] = { a0, (U)a1, a2, (U)a3, a4, a5, (U)a6, a7, (U)a8, a9, a10,
                (U)a11, a12, (U)a13, a14, a15 };
    for (int i = 0; i < 16; i++)
        prec[i] = a[i];
}
#undef S
#undef U

static const int narrow_kinds[5] = { NT_BOOL, NT_I8, NT_U8, NT_I16, NT_U16 };

typedef void (NT_CC *call_l16)(L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L);
typedef void (NT_CC *call_d16)(D, D, D, D, D, D, D, D, D, D, D, D, D, D, D, D);
typedef void (NT_CC *call_l8d8)(L, L, L, L, L, L, L, L, D, D, D, D, D, D, D, D);
#undef L
#undef D

/*
 * Where argument slots are shared by position (Microsoft x64), the caller
 * of a mixed thunk must give each position its own type: the first four
 * positions go to rcx/xmm0 ... r9/xmm3 by type, the rest are 8-byte stack
 * slots whatever their type. So a call of 16 arguments is one of 16 typed
 * calls, by the classes of its first four (bit k: position k is a double),
 * the others passed as their 64 bits.
 */
typedef uint64_t U;
#define A4 U, U, U, U, U, U, U, U, U, U, U, U
#define R4 v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12], v[13], v[14], v[15]
#define CALL16(T0, T1, T2, T3)                                                   \
    ((void (NT_CC *)(T0, T1, T2, T3, A4))fn)(as_##T0(v[0]), as_##T1(v[1]),       \
                                             as_##T2(v[2]), as_##T3(v[3]), R4)
static U as_U(U v) { return v; }
static double as_double(U v) { double d; memcpy(&d, &v, 8); return d; }

static void
call16_by_position(void *fn, int fp_mask, const U *v)
{
    switch (fp_mask & 15) {
    case 0: CALL16(U, U, U, U); break;
    case 1: CALL16(double, U, U, U); break;
    case 2: CALL16(U, double, U, U); break;
    case 3: CALL16(double, double, U, U); break;
    case 4: CALL16(U, U, double, U); break;
    case 5: CALL16(double, U, double, U); break;
    case 6: CALL16(U, double, double, U); break;
    case 7: CALL16(double, double, double, U); break;
    case 8: CALL16(U, U, U, double); break;
    case 9: CALL16(double, U, U, double); break;
    case 10: CALL16(U, double, U, double); break;
    case 11: CALL16(double, double, U, double); break;
    case 12: CALL16(U, U, double, double); break;
    case 13: CALL16(double, U, double, double); break;
    case 14: CALL16(U, double, double, double); break;
    default: CALL16(double, double, double, double); break;
    }
}
#undef CALL16
#undef A4
#undef R4

static void
test_permutations(int count, uint64_t seed)
{
    rng_state = seed;
    int bad = 0, cycles = 0;
    for (int it = 0; it < count && bad < 10; it++) {
        int which = it % 4;
        int kinds[16];
        for (int i = 0; i < 16; i++)
            kinds[i] = which == 0 ? NT_I64 : which == 1 ? NT_F64
                       : which == 3 ? narrow_kinds[i % 5]
                       : (i & 1) ? NT_F64 : NT_I64;
        void *target = which == 0 ? (void *)f_v_l16
                       : which == 1 ? (void *)f_v_d16
                       : which == 3 ? (void *)f_v_n16 : (void *)f_v_ld8;
        int bound[16];
        uint64_t cells[16];
        int pbound = (int)(rng() % 4);   /* 0: none bound ... */
        for (int i = 0; i < 16; i++) {
            bound[i] = (int)(rng() % 4) < pbound;
            cells[i] = kinds[i] == NT_F64 ? dbits((double)(100 + i))
                                          : cell_value(kinds[i], 100 + i);
        }
        nt_sig *sig = make_sig(NT_VOID, kinds, 16);
        nt_error err = { NT_OK, -1, "" };
        thunk t;
        memset(&t, 0, sizeof(t));
        t.plan = nt_plan_new(sig, &err);
        for (int i = 0; i < 16; i++) {
            if (bound[i])
                nt_plan_set_bound(t.plan, i);
            else
                nt_plan_set_arg(t.plan, i);
        }
        nt_plan_finish(t.plan, &err);
        /* shuffle: the t-th forwarded target param takes thunk param p[t] */
        int nf = t.plan->nfwd, p[16];
        random_permutation(p, nf);
        for (int i = 0, k = 0; i < 16; i++) {
            if (bound[i])
                continue;
            t.plan->slots[i].fwd = (uint16_t)p[k];
            t.plan->fwd_index[p[k]] = i;
            cycles += p[k] != k;
            k++;
        }
        t.plan->engine = be;
        if (be->supports(t.plan) != NT_OK
            || be->prepare(t.plan, &err) != NT_OK) {
            CHECK(0, "permutation %d: %s", it, err.msg);
            bad++;
            nt_plan_free(t.plan);
            free_sig(sig);
            continue;
        }
        t.ctx = nt_ctx_new(t.plan, target, &err);
        t.ctx->handler = t.plan->handler;
        set_values(t.plan, t.ctx, cells);
        be->entry_new(t.plan, t.ctx, &t.entry, &t.address, &err);

        /* thunk param k carries the value 1000 + k (as long or double),
           narrow ints 0x5A5A5A5A00 + k * 37 (garbage above them, the low
           byte's sign alternating, bool 0 or 1); the caller passes ints
           and doubles each in thunk order. want[k]: what the target sees. */
        long li[16];
        double di[16];
        int ni = 0, nd = 0;
        uint64_t thunk_val[16];
        for (int k = 0; k < nf; k++) {
            int kind = kinds[t.plan->fwd_index[k]];
            if (kind == NT_F64) {
                di[nd] = 1000.0 + k;
                thunk_val[k] = dbits(di[nd++]);
            } else if (which == 3) {
                uint64_t v = 0x5A5A5A5A00ull + (uint64_t)(k * 37);
                li[ni++] = (long)(kind == NT_BOOL ? v & ~0xFEull : v);
                thunk_val[k] = (uint32_t)received(kind, v);
            } else {
                li[ni] = 1000 + k;
                thunk_val[k] = (uint64_t)li[ni++];
            }
        }
        for (int k = ni; k < 16; k++)
            li[k] = -1;
        for (int k = nd; k < 16; k++)
            di[k] = -1;
        memset(prec, 0, sizeof(prec));
        if (which == 0 || which == 3)
            ((call_l16)t.address)(li[0], li[1], li[2], li[3], li[4], li[5],
                                  li[6], li[7], li[8], li[9], li[10], li[11],
                                  li[12], li[13], li[14], li[15]);
        else if (which == 1)
            ((call_d16)t.address)(di[0], di[1], di[2], di[3], di[4], di[5],
                                  di[6], di[7], di[8], di[9], di[10], di[11],
                                  di[12], di[13], di[14], di[15]);
        else if (nt_arch_native->abi.slots_shared) {
            /* each thunk parameter at its own position, by its type */
            uint64_t pos[16] = { 0 };
            int fp_mask = 0;
            for (int k = 0; k < nf; k++) {
                pos[k] = thunk_val[k];
                if (kinds[t.plan->fwd_index[k]] == NT_F64)
                    fp_mask |= 1 << k;
            }
            call16_by_position(t.address, fp_mask, pos);
        } else
            ((call_l8d8)t.address)(li[0], li[1], li[2], li[3], li[4], li[5],
                                   li[6], li[7], di[0], di[1], di[2], di[3],
                                   di[4], di[5], di[6], di[7]);
        for (int i = 0; i < 16; i++) {
            uint64_t want = bound[i] ? cells[i]
                                     : thunk_val[t.plan->slots[i].fwd];
            if (which == 3)
                want = (uint32_t)want;   /* the fixture keeps 32 bits */
            if (prec[i] != want) {
                CHECK(0, "permutation %d (fixture %d) arg %d: got %#llx "
                      "want %#llx", it, which, i,
                      (unsigned long long)prec[i], (unsigned long long)want);
                bad++;
            }
        }
        drop_thunk(&t);
        free_sig(sig);
    }
    fprintf(stderr, "  permutations: %d permuted plans (%d params moved "
            "out of order)\n", count, cycles);
}

/* ------------------------------------------------------------------------ */
/* W^X: no mapping both writable and executable                              */

static void
test_no_wx(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    int wx = 0, ours = 0;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        char perms[8] = "";
        if (sscanf(line, "%*s %7s", perms) != 1)
            continue;
        if (strchr(perms, 'w') && strchr(perms, 'x')) {
            wx++;
            fprintf(stderr, "  w+x mapping: %s", line);
        }
        if (strstr(line, "memfd:numthunk") != NULL)
            ours++;
    }
    if (f != NULL)
        fclose(f);
    CHECK(wx == 0, "%d mappings are writable and executable", wx);
    fprintf(stderr, "  maps: no w+x mapping (%d memfd code mappings)\n",
            ours);
}

/* ------------------------------------------------------------------------ */
/* Release trap, quarantine, fork, threads                                   */

static void
test_release_trap(void)
{
    int p[2];
    if (pipe(p) != 0)
        return;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 2);
        int k[2] = { NT_I64, NT_I64 };
        nt_sig *s = make_sig(NT_I64, k, 2);
        int b[2] = { 1, 0 };
        uint64_t v[2] = { 5, 0 };
        thunk t;
        if (make_thunk(&t, s, b, v, (void *)f_l_ll) != 0)
            _exit(3);
        long (NT_CC *fn)(long) = (long (NT_CC *)(long))t.address;
        if (fn(1) != 6)
            _exit(4);
        nt_what *what = nt_plan_what(t.plan, (void *)f_l_ll);
        if (what == NULL)
            _exit(3);
        nt_entry_free(&t.entry, what);    /* the trap names it */
        fn(1);                 /* must not return */
        _exit(5);
    }
    close(p[1]);
    char buf[1024] = "";
    size_t got = 0;
    ssize_t n;
    while (got < sizeof(buf) - 1 && (n = read(p[0], buf + got, sizeof(buf) - 1 - got)) > 0)
        got += (size_t)n;
    buf[got] = '\0';
    close(p[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT,
          "released thunk: child status %#x", st);
    char want[128];
    snprintf(want, sizeof(want), "numthunk: called a released thunk: intptr_t (intptr_t) "
             "over intptr_t (intptr_t, intptr_t), target at %p\n", (void *)f_l_ll);
    CHECK(strstr(buf, want) != NULL,
          "released thunk: stderr was '%s', expected '%s'", buf, want);
    CHECK(strstr(buf, "a temporary whose address was kept") != NULL,
          "released thunk: no advice in '%s'", buf);
    fprintf(stderr, "  release: trap aborts with \"%.*s\"\n",
            (int)strcspn(buf, "\n"), buf);
}

/*
 * Run with NUMTHUNK_EXECMEM=none: no executable memory at all. The native
 * engine declines new plans, and a plan prepared anyway (as a plan cached
 * before memory ran out is) gets libffi entries through the native vtable:
 * calls, swaps and release work, and a late call after the plan is gone
 * reaches the trap.
 */
static void
test_no_execmem(void)
{
    nt_error err = { NT_OK, -1, "" };
    int k[2] = { NT_I64, NT_I64 };
    nt_sig *s = make_sig(NT_I64, k, 2);
    nt_plan *plan = nt_plan_new(s, &err);
    nt_plan_set_bound(plan, 0);
    nt_plan_set_arg(plan, 1);
    nt_plan_finish(plan, &err);
    plan->engine = be;
    CHECK(be->supports(plan) == NT_ERR_UNSUPPORTED,
          "no memory: the native engine still takes new plans");
    CHECK(strcmp(be->memory_policy(), "none") == 0, "policy %s",
          be->memory_policy());
    if (be->prepare(plan, &err) != NT_OK) {
        CHECK(0, "no memory: prepare: %s", err.msg);
        return;
    }
    nt_ctx *c1 = nt_ctx_new(plan, (void *)f_l_ll, &err);
    nt_ctx *c2 = nt_ctx_new(plan, (void *)f_l_ll, &err);
    uint64_t v1[2] = { 5, 0 }, v2[2] = { 10, 0 };
    set_values(plan, c1, v1);
    set_values(plan, c2, v2);
    nt_entry_ref e = { NULL, NULL };
    void *addr = NULL;
    if (be->entry_new(plan, c1, &e, &addr, &err) != NT_OK) {
        CHECK(0, "no memory: entry_new: %s", err.msg);
        return;
    }
    CHECK(e.engine == &nt_engine_ffi, "no memory: entry is not libffi's");
    long (NT_CC *fn)(long) = (long (NT_CC *)(long))addr;
    CHECK(fn(1) == 6, "no memory: call gave %ld", fn(1));
    nt_entry_swap(&e, c2);
    CHECK(fn(1) == 11, "no memory: call after swap gave %ld", fn(1));
    nt_entry_free(&e, NULL);
    be->plan_release(plan);
    nt_plan_free(plan);
    free(c1);
    free(c2);
    free_sig(s);
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 2);
        fn(1);                 /* must not return */
        _exit(5);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT,
          "no memory: late call status %#x", st);
    fprintf(stderr, "  no executable memory: libffi entries through the "
            "native engine, late call traps\n");
}

static void
test_quarantine(int no_reuse)
{
    int k[2] = { NT_I64, NT_I64 };
    nt_sig *s = make_sig(NT_I64, k, 2);
    int b[2] = { 1, 0 };
    uint64_t v[2] = { 7, 0 };
    thunk t;
    if (make_thunk(&t, s, b, v, (void *)f_l_ll) != 0) {
        failures++;
        return;
    }
    void *first = t.address;
    drop_thunk(&t);
    long reused_at = -1;
    const long n = 40000;
    const long q = (long)nt_config_get()->quarantine;
    for (long i = 0; i < n && reused_at < 0; i++) {
        if (make_thunk(&t, s, b, v, (void *)f_l_ll) != 0) {
            failures++;
            break;
        }
        long (NT_CC *fn)(long) = (long (NT_CC *)(long))t.address;
        CHECK(fn(1) == 8, "quarantine thunk %ld", i);
        if (t.address == first)
            reused_at = i;
        drop_thunk(&t);
    }
    if (no_reuse) {
        CHECK(reused_at < 0, "NUMTHUNK_NO_REUSE: address reused at %ld",
              reused_at);
        fprintf(stderr, "  quarantine: NUMTHUNK_NO_REUSE=1, no reuse in "
                "%ld thunks\n", n);
    } else {
        CHECK(reused_at >= q, "address reused after only %ld frees "
              "(quarantine %ld)", reused_at, q);
        fprintf(stderr, "  quarantine: first reuse after %ld frees\n",
                reused_at + 1);
    }
    free_sig(s);
}

/* The handler cache (engine/native.c) is open addressing with linear probing,
   keyed by the FNV-1a hash of the shape key, and removal moves back the
   entries after the hole whose home is at or before it, across the
   table's end too, and leaves the others where they are. Each scenario
   runs in a fresh process ("hcache N"): the table has its first 64 cells
   and only the released-thunk trap's handler. Shapes hashing to chosen
   cells are made in order; some go, and their handlers leave once the
   quarantine has passed: the others must still find their handlers (not
   write second ones) and run. */
static uint64_t
shape_hash(const nt_plan *plan)
{
    uint8_t key[NT_SHAPE_KEY_MAX];
    size_t n = nt_handler_key(&nt_arch_native->abi, plan, key);
    uint64_t h = 1469598103934665603ull; /* FNV-1a, as engine/native.c hashes */
    for (size_t i = 0; i < n; i++)
        h = (h ^ key[i]) * 1099511628211ull;
    return h;
}

static nt_plan *
bound_plan(nt_sig *s, const int *bound)
{
    nt_error err = { NT_OK, -1, "" };
    nt_plan *plan = nt_plan_new(s, &err);
    if (plan == NULL)
        return NULL;
    for (int i = 0; i < s->nargs; i++) {
        if (bound[i])
            nt_plan_set_bound(plan, i);
        else
            nt_plan_set_arg(plan, i);
    }
    if (nt_plan_finish(plan, &err) != NT_OK
        || nt_handler_supports(&nt_arch_native->abi, plan) != NT_OK) {
        nt_plan_free(plan);
        return NULL;
    }
    return plan;
}

typedef struct {
    int cell; /* its key's home among 64 cells */
    int goes; /* its plan goes, its handler leaves */
    nt_sig *sig;
    int bound[14];
    thunk first;
} cache_shape;

/* The nth shape whose key hashes to cell: int64_t (int64_t x n) for the
   nth count n that has one, the first two parameters bound (f_l_ll adds
   them), the others bound or forwarded by the bits of a salt (the count
   is searched too, as the key's low bits vary little with the pattern
   alone). */
static int
shape_at(cache_shape *out, int nth)
{
    int k[14];
    for (int i = 0; i < 14; i++)
        k[i] = NT_I64;
    for (int n = 2; n <= 14; n++) {
        nt_sig *s = make_sig(NT_I64, k, n);
        for (int salt = 0; salt < (1 << n); salt += 4) {
            int b[14];
            for (int i = 0; i < 14; i++)
                b[i] = i < 2 || ((salt >> i) & 1);
            nt_plan *plan = bound_plan(s, b);
            int hit = plan != NULL && (int)(shape_hash(plan) & 63) == out->cell;
            nt_plan_free(plan);
            if (hit && nth-- == 0) {
                out->sig = s;
                memcpy(out->bound, b, sizeof(b));
                return 0;
            }
            if (hit)
                break; /* one shape per count */
        }
        free_sig(s);
    }
    CHECK(0, "no shape hashing to cell %d", out->cell);
    return -1;
}

/* Whether a new plan of shape s gets the handler of s->first. */
static int
same_handler(cache_shape *s, long i, long q)
{
    const uint64_t v[14] = { 40, 2 };
    thunk t;
    if (make_thunk(&t, s->sig, s->bound, v, (void *)f_l_ll) != 0) {
        failures++;
        return 0;
    }
    int same = t.plan->handler == s->first.plan->handler;
    CHECK(same, "the shape at cell %d made a second handler in round %ld "
          "of frees (quarantine %ld)", s->cell, i, q);
    drop_thunk(&t);
    return same;
}

static int
test_handler_cache_removal(int which)
{
    nt_error err = { NT_OK, -1, "" };
    nt_sig *trap_sig =
        nt_sig_parse("void (const char *, const void *)", NULL, 0, &err);
    const int both[2] = { 1, 1 };
    nt_plan *trap = trap_sig != NULL ? bound_plan(trap_sig, both) : NULL;
    CHECK(trap != NULL, "the trap's plan: %s", err.msg);
    if (trap == NULL)
        return failures != 0;
    int tc = (int)(shape_hash(trap) & 63);
    nt_plan_free(trap);
    nt_sig_free(trap_sig);
    /* m, m + 1, m + 2 in the middle, clear of the trap's cell */
    int m = tc >= 20 && tc <= 22 ? 30 : 20;
    /* (cell, goes), made in this order; cells of 1 and 2 are m + 0, m + 1:
       0: the second wraps to 0 and moves back to 63, the third to 0;
       1: the second moves back to m; 2: the second, at its home, stays;
       3: the second stays at 63, the third, wrapped to 0 with its home
          after the hole at 62, stays; 4: the second, at its home 0, stays */
    static const int plans[5][4][2] = {
        { { 63, 1 }, { 63, 0 }, { 63, 0 }, { -1, 0 } },
        { { 0, 1 }, { 0, 0 }, { -1, 0 } },
        { { 0, 1 }, { 1, 0 }, { -1, 0 } },
        { { 62, 1 }, { 63, 0 }, { 63, 0 }, { -1, 0 } },
        { { 63, 1 }, { 0, 0 }, { -1, 0 } },
    };
    if (which < 0 || which >= 5)
        return 2;
    int wraps = which == 0 || which >= 3;
    if (wraps && (tc >= 62 || tc <= 1)) {
        fprintf(stderr, "  handler cache %d: the trap's handler is at cell %d: "
                "no wrap to test\n", which, tc);
        return 0;
    }
    cache_shape sh[4];
    int n = 0, ok = 1;
    for (; n < 4 && plans[which][n][0] >= 0 && ok; n++) {
        sh[n].cell = wraps ? plans[which][n][0] : m + plans[which][n][0];
        sh[n].goes = plans[which][n][1];
        int nth = 0;
        for (int j = 0; j < n; j++)
            nth += sh[j].cell == sh[n].cell;
        ok = shape_at(&sh[n], nth) == 0;
        if (!ok)
            n--;
    }
    const uint64_t v[14] = { 40, 2 };
    int made = 0;
    while (ok && made < n
           && make_thunk(&sh[made].first, sh[made].sig, sh[made].bound, v,
                         (void *)f_l_ll) == 0)
        made++;
    CHECK(made == n, "handler cache %d: %d of %d thunks made", which, made,
          n);
    for (int j = 0; j < made; j++)
        if (sh[j].goes)
            drop_thunk(&sh[j].first);
    const long q = (long)nt_config_get()->quarantine;
    /* they leave at the (q + 1)th free after their own */
    int same = made == n;
    for (long i = 0; i <= q + 2 && same; i++)
        for (int j = 0; j < n && same; j++)
            if (!sh[j].goes)
                same = same_handler(&sh[j], i, q);
    for (int j = 0; j < made; j++) {
        if (sh[j].goes)
            continue;
        long (NT_CC *fn)(long, long, long, long, long, long, long, long, long,
                   long, long, long)
            = (long (NT_CC *)(long, long, long, long, long, long, long, long,
                        long, long, long, long))sh[j].first.address;
        CHECK(fn(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0) == 42,
              "the shape at cell %d: its thunk after the others' handlers "
              "left", sh[j].cell);
        drop_thunk(&sh[j].first);
    }
    for (int j = 0; j < n; j++)
        free_sig(sh[j].sig);
    if (failures == 0)
        fprintf(stderr, "  handler cache %d: cells", which);
    for (int j = 0; j < n && failures == 0; j++)
        fprintf(stderr, " %d%s", sh[j].cell, sh[j].goes ? " (goes)" : "");
    if (failures == 0)
        fprintf(stderr, "; the trap's at %d\n", tc);
    return failures != 0;
}

/* A shape nothing else in this process has made, so the handler cache
   misses and new code must be written. */
static int
fresh_shape_call(int salt, long *got)
{
    int k[MAXP];
    int b[MAXP];
    uint64_t v[MAXP];
    for (int i = 0; i < 14; i++) {
        k[i] = NT_I64;
        b[i] = (salt >> i) & 1;
        v[i] = 0;
    }
    k[0] = NT_I64;
    k[1] = NT_I64;
    b[0] = 1;
    b[1] = 1;
    v[0] = 40;
    v[1] = 2;
    /* the first two params feed f_l_ll; the rest are ignored by it */
    nt_sig *s = make_sig(NT_I64, k, 14);
    thunk t;
    int rc = make_thunk(&t, s, b, v, (void *)f_l_ll);
    if (rc == 0) {
        /* call with up to 12 forwarded zeros */
        long (NT_CC *fn)(long, long, long, long, long, long, long, long, long,
                   long, long, long)
            = (long (NT_CC *)(long, long, long, long, long, long, long, long, long,
                        long, long, long))t.address;
        *got = fn(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
        drop_thunk(&t);
    }
    free_sig(s);
    return rc;
}

static void
test_fork(void)
{
    long got = 0;
    CHECK(fresh_shape_call(0x100, &got) == 0 && got == 42, "pre-fork %ld",
          got);
    /* a thunk made before the fork, used on both sides */
    int k[2] = { NT_I64, NT_I64 };
    nt_sig *s = make_sig(NT_I64, k, 2);
    int b[2] = { 1, 0 };
    uint64_t v[2] = { 100, 0 };
    thunk t;
    if (make_thunk(&t, s, b, v, (void *)f_l_ll) != 0) {
        failures++;
        return;
    }
    long (NT_CC *fn)(long) = (long (NT_CC *)(long))t.address;
    pid_t pid = fork();
    if (pid == 0) {
        int ok = fn(1) == 101;
        for (int i = 0; i < 50; i++) {
            long r = 0;
            ok &= fresh_shape_call(0x200 + i * 4, &r) == 0 && r == 42;
        }
        ok &= fn(2) == 102;
        _exit(ok ? 0 : 1);
    }
    int ok = 1;
    for (int i = 0; i < 50; i++) {
        long r = 0;
        ok &= fresh_shape_call(0x201 + i * 4, &r) == 0 && r == 42;
    }
    ok &= fn(3) == 103;
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork child status %#x",
          st);
    CHECK(ok, "fork parent calls failed");
    /* after the child is gone, the parent still writes its own memory */
    long r = 0;
    CHECK(fresh_shape_call(0x3FF0, &r) == 0 && r == 42, "post-fork %ld", r);
    fprintf(stderr, "  fork: create+call in parent and child ok\n");
    drop_thunk(&t);
    free_sig(s);
}

typedef struct {
    int id;
    thunk *shared;           /* swapped by thread 0, called by the rest */
    volatile int *stop;
    long calls, torn, errors;
} worker;

static void *
worker_main(void *arg)
{
    worker *w = arg;
    long (NT_CC *shared_fn)(void) = (long (NT_CC *)(void))w->shared->address;
    uint64_t seed = 0x5EED + (uint64_t)w->id;
    for (int iter = 0; iter < 3000; iter++) {
        /* create/call/free with a mix of shapes (some shared with other
           threads, some per thread) */
        long r = 0;
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        int salt = (int)((seed >> 33) % 64) | (w->id << 6);
        if (fresh_shape_call(salt & 0x3FFC, &r) != 0 || r != 42)
            w->errors++;
        /* the shared thunk returns a + b with (a, b) = (k, -k): 0 unless a
           call saw half of one context and half of another */
        long s = shared_fn();
        w->calls++;
        if (s != 0)
            w->torn++;
    }
    return NULL;
}

static void
test_threads(void)
{
    int k[2] = { NT_I64, NT_I64 };
    nt_sig *s = make_sig(NT_I64, k, 2);
    int b[2] = { 1, 1 };
    uint64_t v[2] = { 1, (uint64_t)-1 };
    thunk shared;
    if (make_thunk(&shared, s, b, v, (void *)f_l_ll) != 0) {
        failures++;
        return;
    }
    volatile int stop = 0;
    enum { NW = 6 };
    worker w[NW];
    pthread_t th[NW];
    for (int i = 0; i < NW; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        w[i].id = i;
        w[i].shared = &shared;
        w[i].stop = &stop;
        pthread_create(&th[i], NULL, worker_main, &w[i]);
    }
    /* swap the shared thunk's context while the workers call it */
    long swaps = 0;
    for (long i = 2; i < 20000; i++) {
        nt_error err = { NT_OK, -1, "" };
        nt_ctx *c = nt_ctx_new(shared.plan, (void *)f_l_ll, &err);
        c->handler = shared.plan->handler;
        c->target = (void *)f_l_ll;
        uint64_t nv[2] = { (uint64_t)i, (uint64_t)-i };
        set_values(shared.plan, c, nv);
        c->older = shared.ctx;
        nt_entry_swap(&shared.entry, c);
        shared.ctx = c;
        swaps++;
    }
    long calls = 0, torn = 0, errors = 0;
    for (int i = 0; i < NW; i++) {
        pthread_join(th[i], NULL);
        calls += w[i].calls;
        torn += w[i].torn;
        errors += w[i].errors;
    }
    CHECK(torn == 0 && errors == 0, "threads: %ld torn, %ld errors", torn,
          errors);
    fprintf(stderr, "  threads: %d threads, %ld create+call+free, %ld "
            "shared calls during %ld swaps: %ld torn, %ld errors\n", NW,
            calls, calls, swaps, torn, errors);
    drop_thunk(&shared);
    free_sig(s);
}

/* ------------------------------------------------------------------------ */
/* Branch Target Identification: where the system defines PROT_BTI (arm64    */
/* Linux), the pages of a stub and of its handler are guarded, so a call    */
/* lands only on a `bti c`; a branch to any other instruction raises        */
/* SIGILL. NT_REQUIRE_BTI=1 makes a system that does not enforce it a       */
/* failure (qemu-aarch64 -cpu max enforces it) instead of a notice.         */

#ifdef PROT_BTI
static int
guard_pages(void *p, int prot_extra)
{
    uintptr_t page = (uintptr_t)p & ~(uintptr_t)(NT_PAGE_SIZE - 1);
    return mprotect((void *)page, NT_PAGE_SIZE,
                    PROT_READ | PROT_EXEC | prot_extra);
}

/* In a child: guards the thunk's pages, calls the stub at byte offset
   `skip` (0: its entry), exits 0 when the call gave the right result. */
static int
bti_child(int skip)
{
    pid_t pid = fork();
    if (pid == 0) {
        int k[2] = { NT_I64, NT_I64 };
        nt_sig *s = make_sig(NT_I64, k, 2);
        int b[2] = { 1, 0 };
        uint64_t v[2] = { 40, 0 };
        thunk t;
        if (make_thunk(&t, s, b, v, (void *)f_l_ll) != 0)
            _exit(3);
        if (guard_pages(t.address, PROT_BTI) != 0
            || guard_pages(t.plan->handler, PROT_BTI) != 0)
            _exit(4);
        long (NT_CC *fn)(long) = (long (NT_CC *)(long))((char *)t.address + skip);
        _exit(fn(2) == 42 ? 0 : 5);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return st;
}

static void
test_bti(void)
{
    const char *req = getenv("NT_REQUIRE_BTI");
    int required = req != NULL && strcmp(req, "1") == 0;
    /* control: entering a stub past its landing pad must fault */
    int st = bti_child(4);
    int enforced = WIFSIGNALED(st) && WTERMSIG(st) == SIGILL;
    if (!enforced) {
        CHECK(!required, "BTI not enforced (control call: status %#x)", st);
        fprintf(stderr, "  bti: not enforced on this system, landing pads "
                "not exercised\n");
        return;
    }
    st = bti_child(0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "BTI-guarded stub and handler: child status %#x", st);
    fprintf(stderr, "  bti: guarded stub and handler pages called through "
            "their landing pads; a call past the pad faults\n");
}
#else
static void
test_bti(void)
{
}
#endif

/* ------------------------------------------------------------------------ */
/* Code dump, for counting instructions with a disassembler                  */

static int
write_file(const char *dir, const char *name, const char *ext,
           const void *p, size_t n)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s.%s.bin", dir, name, ext);
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return -1;
    size_t w = fwrite(p, 1, n, f);
    return fclose(f) != 0 || w != n ? -1 : 0;
}

/* Writes the stub (16 bytes) and 512 bytes from the handler's start of a
   few representative thunks; the handler's code ends at its first return
   or tail branch. Run with NUMTHUNK_EXECMEM=mprotect: each handler then
   starts a page of its own, so the 512 bytes are all mapped. */
static int
dump_code(const char *dir)
{
    static double arr[4] = { 1, 2, 3, 4 };
    struct {
        const char *name;
        int ret, n;
        int kinds[20];
        int bound[20];
        void *target;
    } shapes[] = {
        /* double(void) over double sum(double *, int) */
        { "sum_bound", NT_F64, 2, { NT_PTR, NT_I32 }, { 1, 1 },
          (void *)f_d_pi },
        /* long(long) over long add(long, long), first bound */
        { "add_one_bound", NT_I64, 2, { NT_I64, NT_I64 }, { 1, 0 },
          (void *)f_l_ll },
        /* long(int8) forwarded with re-extension */
        { "narrow_forwarded", NT_I64, 1, { NT_I8 }, { 0 }, (void *)f_l_c },
        /* 18 bound int64 args: 10 on the stack, nothing forwarded */
        { "bound18", NT_I64, 18,
          { NT_I64, NT_I64, NT_I64, NT_I64, NT_I64, NT_I64, NT_I64, NT_I64,
            NT_I64, NT_I64, NT_I64, NT_I64, NT_I64, NT_I64, NT_I64, NT_I64,
            NT_I64, NT_I64 },
          { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 },
          (void *)f_l_ll },
        /* double(double x5) over f_d_i10d10, 15 bound */
        { "i10d10_5fwd", NT_F64, 20,
          { NT_I32, NT_I32, NT_I32, NT_I32, NT_I32, NT_I32, NT_I32, NT_I32,
            NT_I32, NT_I32, NT_F64, NT_F64, NT_F64, NT_F64, NT_F64, NT_F64,
            NT_F64, NT_F64, NT_F64, NT_F64 },
          { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0 },
          (void *)f_d_i10d10 },
    };
    int rc = 0;
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        uint64_t vals[20] = { (uint64_t)(uintptr_t)arr, 4 };
        nt_sig *s = make_sig(shapes[i].ret, shapes[i].kinds, shapes[i].n);
        thunk t;
        if (make_thunk(&t, s, shapes[i].bound, vals, shapes[i].target) != 0
            || write_file(dir, shapes[i].name, "stub", t.address, 16) != 0
            || write_file(dir, shapes[i].name, "handler", t.plan->handler,
                          512) != 0) {
            fprintf(stderr, "dump of %s failed\n", shapes[i].name);
            rc = 1;
        }
        if (t.plan != NULL)
            drop_thunk(&t);
        free_sig(s);
    }
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Benchmarks                                                                */

static double bench_arr[4] = { 1, 2, 3, 4 };

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    thunk sum;       /* double(void) over f_d_pi(arr, 4) */
    thunk many;      /* double(double x5) over f_d_i10d10, rest bound */
    nt_sig *s_sum, *s_many;
} bench_thunks;

static int
bench_setup(bench_thunks *bt)
{
    int kinds_pi[2] = { NT_PTR, NT_I32 };
    bt->s_sum = make_sig(NT_F64, kinds_pi, 2);
    int all[2] = { 1, 1 };
    uint64_t vals[2] = { (uint64_t)(uintptr_t)bench_arr, 4 };
    if (make_thunk(&bt->sum, bt->s_sum, all, vals, (void *)f_d_pi) != 0)
        return -1;
    int k20[20], b20[20];
    uint64_t v20[20];
    for (int i = 0; i < 20; i++) {
        k20[i] = i < 10 ? NT_I32 : NT_F64;
        b20[i] = i < 15;          /* forward the last 5 doubles */
        v20[i] = i < 10 ? (uint64_t)i : dbits(i);
    }
    bt->s_many = make_sig(NT_F64, k20, 20);
    return make_thunk(&bt->many, bt->s_many, b20, v20, (void *)f_d_i10d10);
}

static double sink;

static double
run_loop(const char *kind, long n, bench_thunks *bt)
{
    double acc = 0;
    double t0 = now_ns();
    if (strcmp(kind, "direct") == 0) {
        for (long i = 0; i < n; i++)
            acc += f_d_pi(bench_arr, 4);
    } else if (strcmp(kind, "pointer") == 0) {
        double (NT_CC *volatile fp)(double *, int) = f_d_pi;
        for (long i = 0; i < n; i++)
            acc += fp(bench_arr, 4);
    } else if (strcmp(kind, "thunk") == 0) {
        double (NT_CC *volatile fp)(void) = (double (NT_CC *)(void))bt->sum.address;
        for (long i = 0; i < n; i++)
            acc += fp();
    } else if (strcmp(kind, "many-direct") == 0) {
        double (NT_CC *volatile fp)(int, int, int, int, int, int, int, int, int,
                              int, double, double, double, double, double,
                              double, double, double, double, double)
            = f_d_i10d10;
        for (long i = 0; i < n; i++)
            acc += fp(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
                      16, 17, 18, 19);
    } else if (strcmp(kind, "many-thunk") == 0) {
        double (NT_CC *volatile fp)(double, double, double, double, double)
            = (double (NT_CC *)(double, double, double, double, double))
                  bt->many.address;
        for (long i = 0; i < n; i++)
            acc += fp(15, 16, 17, 18, 19);
    } else if (strcmp(kind, "create") == 0) {
        /* context + entry for an existing plan, then release */
        nt_error err = { NT_OK, -1, "" };
        nt_entry_ref *es = malloc((size_t)n * sizeof(*es));
        nt_ctx **cs = malloc((size_t)n * sizeof(*cs));
        void *addr;
        for (long i = 0; i < n; i++) {
            cs[i] = nt_ctx_new(bt->sum.plan, (void *)f_d_pi, &err);
            memcpy(cs[i]->values, bt->sum.ctx->values,
                   bt->sum.plan->values_size);
            if (be->entry_new(bt->sum.plan, cs[i], &es[i], &addr, &err)
                != NT_OK)
                exit(1);
        }
        acc = (now_ns() - t0) / (double)n;
        for (long i = 0; i < n; i++) {
            nt_entry_free(&es[i], NULL);
            nt_ctx_free_chain(cs[i], NULL);
        }
        free(es);
        free(cs);
        return acc;
    } else {
        fprintf(stderr, "unknown loop %s\n", kind);
        exit(2);
    }
    sink = acc;
    return (now_ns() - t0) / (double)n;
}

static long
rss_kb(void)
{
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f != NULL) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

static void
bench(void)
{
    bench_thunks bt;
    if (bench_setup(&bt) != 0) {
        failures++;
        return;
    }
    const char *kinds[] = { "direct", "pointer", "thunk", "many-direct",
                            "many-thunk" };
    enum { REPS = 15, NK = 5 };
    /* kinds interleaved within each repetition, so that load from other
       processes falls on all of them alike; ratios are taken per
       repetition, then the median */
    double t[NK][REPS], ratio[3][REPS];
    for (int k = 0; k < NK; k++)
        run_loop(kinds[k], 1000000, &bt);   /* warm up */
    for (int r = 0; r < REPS; r++) {
        for (int k = 0; k < NK; k++)
            t[k][r] = run_loop(kinds[k], 5000000, &bt);
        ratio[0][r] = t[2][r] / t[0][r];
        ratio[1][r] = t[2][r] / t[1][r];
        ratio[2][r] = t[4][r] / t[3][r];
    }
    for (int k = 0; k < NK; k++) {
        qsort(t[k], REPS, sizeof(double), cmp_double);
        printf("call %-12s %6.2f ns (median of %d x 5e6)\n", kinds[k],
               t[k][REPS / 2], REPS);
    }
    for (int k = 0; k < 3; k++)
        qsort(ratio[k], REPS, sizeof(double), cmp_double);
    printf("median ratio thunk/direct %.2f, thunk/pointer %.2f, "
           "many-thunk/many-direct %.2f\n", ratio[0][REPS / 2],
           ratio[1][REPS / 2], ratio[2][REPS / 2]);

    /* creation: context + entry for an existing plan (what bind costs the
       engine once the handler exists), then the same with plan + prepare */
    enum { NCREATE = 100000 };
    static thunk ts[NCREATE];
    nt_error err = { NT_OK, -1, "" };
    long rss0 = rss_kb();
    double t0 = now_ns();
    for (int i = 0; i < NCREATE; i++) {
        nt_ctx *c = nt_ctx_new(bt.sum.plan, (void *)f_d_pi, &err);
        c->handler = bt.sum.plan->handler;
        c->target = (void *)f_d_pi;
        memcpy(c->values, bt.sum.ctx->values, bt.sum.plan->values_size);
        ts[i].ctx = c;
        if (be->entry_new(bt.sum.plan, c, &ts[i].entry, &ts[i].address,
                          &err) != NT_OK) {
            failures++;
            return;
        }
    }
    double t_entry = (now_ns() - t0) / NCREATE;
    long rss1 = rss_kb();
    for (int i = 0; i < NCREATE; i++) {
        nt_entry_free(&ts[i].entry, NULL);
        nt_ctx_free_chain(ts[i].ctx, NULL);
    }
    int all[2] = { 1, 1 };
    uint64_t vals[2] = { (uint64_t)(uintptr_t)bench_arr, 4 };
    t0 = now_ns();
    for (int i = 0; i < NCREATE; i++)
        make_thunk(&ts[i], bt.s_sum, all, vals, (void *)f_d_pi);
    double t_full = (now_ns() - t0) / NCREATE;
    for (int i = 0; i < NCREATE; i++)
        drop_thunk(&ts[i]);
    printf("create ctx+entry %.0f ns, plan+prepare+ctx+entry %.0f ns "
           "(%d thunks)\n", t_entry, t_full, NCREATE);
    printf("memory: %.1f bytes/thunk RSS growth over %d thunks (stub 16 + "
           "slot 8 + context %zu + malloc overhead)\n",
           (rss1 - rss0) * 1024.0 / NCREATE, NCREATE,
           sizeof(nt_ctx) + bt.sum.plan->values_size);
    printf("memory policy: %s\n", be->memory_policy());

    /* handler generation: prepare() for shapes not seen before (14 int64
       params, every bound/forwarded pattern of the last 12) */
    enum { NSHAPES = 4096 };
    int k14[14], b14[14];
    for (int i = 0; i < 14; i++)
        k14[i] = NT_I64;
    nt_sig *s14 = make_sig(NT_I64, k14, 14);
    double t_gen = 0;
    for (int salt = 0; salt < NSHAPES; salt++) {
        nt_plan *pl = nt_plan_new(s14, &err);
        for (int i = 0; i < 14; i++) {
            b14[i] = i < 2 || ((salt >> (i - 2)) & 1);
            if (b14[i])
                nt_plan_set_bound(pl, i);
            else
                nt_plan_set_arg(pl, i);
        }
        nt_plan_finish(pl, &err);
        pl->engine = be;
        t0 = now_ns();
        if (be->prepare(pl, &err) != NT_OK)
            failures++;
        t_gen += now_ns() - t0;
        nt_plan_free(pl);
    }
    printf("handler generation (new shape) %.0f ns each over %d shapes\n",
           t_gen / NSHAPES, NSHAPES);
    free_sig(s14);
}

#ifdef NT_TEST_WRAP_ALLOC
/*
 * "nomem K": the K-th allocation from the engine's start on fails (its
 * start runs here, at the first question asked of it: the stubs' image,
 * the memory policy, the released slots' trap handler), then one thunk is
 * made, called and dropped. Exit 0: allocation K was never reached and
 * all worked; 1: it was failed, and the thunk either could not be made or
 * gave the right result; 2: a wrong result. Never a signal.
 */
static int
test_nomem(long k)
{
    int kinds[2] = { NT_I64, NT_I64 };
    nt_sig *s = make_sig(NT_I64, kinds, 2);
    int b[2] = { 1, 0 };
    uint64_t v[2] = { 5, 0 };
    thunk t;
    nomem_at = k;
    const char *policy = be->memory_policy();
    int made = make_thunk(&t, s, b, v, (void *)f_l_ll) == 0;
    long r = made ? ((long (NT_CC *)(long))t.address)(1) : 6;
    if (made)
        drop_thunk(&t);
    nomem_at = 0;
    fprintf(stderr, "nomem %ld: %s, thunk %s, %ld\n", k, policy,
            made ? "made" : "not made", r);
    if (r != 6)
        return 2;
    return nomem_count >= k;
}

/* Each allocation of the start and the first thunk failed in turn. */
static void
sweep_nomem(const char *wrap, const char *self)
{
    char cmd[1024];
    long k;
    int st = 0;
    for (k = 1; k < 2000; k++) {
        snprintf(cmd, sizeof(cmd), "%s '%s' nomem %ld 2>/dev/null", wrap, self, k);
        st = system(cmd);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 1)
            break;
    }
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "allocation %ld failed: exit status %#x (%s)", k, st, cmd);
    CHECK(k > 10, "the engine's start allocated only %ld times", k - 1);
    printf("no memory: each of %ld allocations failed in turn\n", k - 1); /* read by the test */
}
#endif

/* ------------------------------------------------------------------------ */

/*
 * "apple [writefix PREFIX COUNT SEED PARTS | COUNT SEED]": the engine on
 * Apple's arm64 description, against fixtures compiled for aarch64-macos
 * and carried into ELF (tests/c/aarch64.sh): the random signatures, with
 * their permuted forwarding, callers and callees both Apple-compiled. The
 * rest of the harness (memory, trap, fork, threads) belongs to no ABI and
 * runs in the AAPCS64 pass.
 */
static int
apple_main(int argc, char **argv)
{
    apple = 1;
    int count = NSIG_DEFAULT;
    uint64_t seed = 20261129;
    if (argc >= 3 && strcmp(argv[1], "writefix") == 0) {
        int parts = argc >= 6 ? atoi(argv[5]) : 1;
        if (argc >= 4)
            count = atoi(argv[3]);
        if (argc >= 5)
            seed = strtoull(argv[4], NULL, 10);
        if (count < 1 || parts < 1 || parts > count)
            return 2;
        gsig *g = calloc((size_t)count, sizeof(gsig));
        gen_sigs(g, count, seed);
        int rc = 0;
        for (int p = 0; p < parts && rc == 0; p++) {
            char path[512];
            snprintf(path, sizeof(path), "%s.%d.c", argv[2], p);
            rc = write_fixtures(path, g, count, seed, count * p / parts,
                                count * (p + 1) / parts);
        }
        free(g);
        return rc != 0;
    }
#if defined(__aarch64__)
    if (nt_native_test_arch(&nt_arch_aarch64_apple) != 0) {
        printf("the native engine did not start on Apple's arm64 "
               "description\n");
        return 1;
    }
#else
    printf("Apple's arm64 description is in the AArch64 build only\n");
    return 1;
#endif
    if (argc >= 2)
        count = atoi(argv[1]);
    if (argc >= 3)
        seed = strtoull(argv[2], NULL, 10);
    const char *policy = be->memory_policy(); /* starts the engine */
    fprintf(stderr, "engine %s on the aarch64-apple ABI, memory policy %s, page %zu\n",
            be->name, policy, (size_t)NT_PAGE_SIZE);
    test_random(count, seed);
    if (failures == 0)
        printf("all native engine tests passed\n");
    else
        printf("%d failures\n", failures);
    return failures != 0;
}

int
main(int argc, char **argv)
{
    be = nt_engine_native;
    if (be == NULL) {
        printf("no native engine on this platform: skipped\n");
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "apple") == 0)
        return apple_main(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "bench") == 0) {
        bench();
        return failures != 0;
    }
    if (argc >= 4 && strcmp(argv[1], "loop") == 0) {
        bench_thunks bt;
        if (bench_setup(&bt) != 0)
            return 1;
        run_loop(argv[2], atol(argv[3]), &bt);
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "noreuse") == 0) {
        test_quarantine(1);
        return failures != 0;
    }
    if (argc >= 2 && strcmp(argv[1], "noexecmem") == 0) {
        test_no_execmem();
        return failures != 0;
    }
#ifdef NT_TEST_WRAP_ALLOC
    if (argc >= 3 && strcmp(argv[1], "nomem") == 0)
        return test_nomem(atol(argv[2]));
#endif
    if (argc >= 3 && strcmp(argv[1], "hcache") == 0)
        return test_handler_cache_removal(atoi(argv[2]));
    if (argc >= 2 && strcmp(argv[1], "dump") == 0)
        return dump_code(argc >= 3 ? argv[2] : ".");
    int count = NSIG_DEFAULT;
    uint64_t seed = 20261129;
    if (argc >= 3 && strcmp(argv[1], "writefix") == 0) {
        int parts = 1;
        if (argc >= 4)
            count = atoi(argv[3]);
        if (argc >= 5)
            seed = strtoull(argv[4], NULL, 10);
        if (argc >= 6)
            parts = atoi(argv[5]);
        if (count < 1 || parts < 1 || parts > count)
            return 2;
        gsig *g = calloc((size_t)count, sizeof(gsig));
        gen_sigs(g, count, seed);
        int rc = 0;
        for (int p = 0; p < parts && rc == 0; p++) {
            char path[512];
            snprintf(path, sizeof(path), "%s.%d.c", argv[2], p);
            rc = write_fixtures(path, g, count, seed, count * p / parts,
                                count * (p + 1) / parts);
        }
        free(g);
        return rc != 0;
    }
    if (argc >= 2)
        count = atoi(argv[1]);
    if (argc >= 3)
        seed = strtoull(argv[2], NULL, 10);

    const char *policy = be->memory_policy(); /* starts the engine */
    fprintf(stderr, "engine %s, memory policy %s, page %zu\n", be->name, policy,
            (size_t)NT_PAGE_SIZE);
    test_handwritten();
    test_random(count, seed);
    test_permutations(3000, seed);
    test_no_wx();
    if (NT_PLATFORM_CALLS)
        test_release_trap();
    test_bti();
    test_fork();
    test_threads();
    test_quarantine(0);
    test_no_wx();

    /* NUMTHUNK_NO_REUSE and NUMTHUNK_EXECMEM are read once per process:
       check them in new ones. The path comes from /proc/self/exe, which an
       emulator such as qemu-user reports as the emulated program, so a
       wrapper (NT_EXEC_WRAPPER) can run it. */
    char self[400], cmd[1024];
    ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
    self[len > 0 ? len : 0] = '\0';
    const char *wrap = getenv("NT_EXEC_WRAPPER");
    if (wrap == NULL)
        wrap = "";
    snprintf(cmd, sizeof(cmd), "NUMTHUNK_NO_REUSE=1 %s '%s' noreuse", wrap,
             self);
    CHECK(len > 0 && system(cmd) == 0, "NUMTHUNK_NO_REUSE run failed: %s",
          cmd);
    if (NT_PLATFORM_CALLS) {
        snprintf(cmd, sizeof(cmd), "NUMTHUNK_EXECMEM=none %s '%s' noexecmem",
                 wrap, self);
        CHECK(len > 0 && system(cmd) == 0, "NUMTHUNK_EXECMEM=none run failed: "
              "%s", cmd);
#ifdef NT_TEST_WRAP_ALLOC
        sweep_nomem(wrap, self);
#endif
    }
    /* the handler cache's first table, each scenario in a process of its
       own */
    for (int k = 0; k < 5; k++) {
        snprintf(cmd, sizeof(cmd), "%s '%s' hcache %d", wrap, self, k);
        CHECK(len > 0 && system(cmd) == 0, "handler cache run failed: %s",
              cmd);
    }

    /* the verdict on stdout (tests/test_core_c.py reads it there), the
       details above on stderr */
    if (failures == 0)
        printf("all native engine tests passed\n");
    else
        printf("%d failures\n", failures);
    return failures != 0;
}
