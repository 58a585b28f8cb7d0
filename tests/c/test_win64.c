/*
 * The native engine on Windows (Microsoft x64), built by mingw-w64 and run
 * under Wine by tests/c/win64.sh: engine/choose.c takes its _WIN64 branch,
 * so thunks are placed by the Windows memory policies
 * (engine/memory/filemap.c, engine/memory/virtualprotect.c) and call
 * callees that mingw-w64 compiled for Windows. Built with
 * -DNT_WITHOUT_LIBFFI (no libffi for mingw here): the fallback says so.
 *
 *   test_win64 writefix FILE COUNT SEED   the fixtures' C source, for mingw
 *   test_win64 COUNT SEED DLL             the tests, on the default policy
 *                                         and again on each other one
 *
 * Tests: random signatures of up to 16 parameters of every scalar kind,
 * about half bound, against the recording fixtures (narrow forwarded ints
 * with garbage above them, every third fixture reading them as 32-bit
 * ints, a rebind per signature); 3,000 permuted plans whose moves form
 * cycles, every position called with its own type; the code pages are
 * read+execute and the
 * slot pages read+write, never both (VirtualQuery); the released-thunk trap
 * (in a child process); NUMTHUNK_EXECMEM=none and the missing libffi.
 * tests/c/test_native.c tests the same description in-process on Linux,
 * with every test the System V engine has.
 */
#include <process.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

#include "numthunk.h"
#include "engine/native.h"
#include "check.h"
#include "gensig.h"

#define MAXP 16

static const nt_engine *be;

typedef struct {
    int ret, n, wide;
    int kinds[MAXP], bound[MAXP];
} gsig;

static void gen_sigs(gsig *g, int count, uint64_t seed)
{
    rng_state = seed;
    for (int s = 0; s < count; s++) {
        gsig *x = &g[s];
        int mode = (int)(rng() % 3); /* mixed, mostly floats, mostly narrow */
        x->n = s % 5 == 0 ? MAXP : (int)(rng() % (MAXP + 1));
        for (int i = 0; i < x->n; i++) {
            int k = scalar_kinds[rng() % NSCALAR];
            if (mode == 1 && rng() % 10 < 6)
                k = rng() & 1 ? NT_F32 : NT_F64;
            else if (mode == 2 && rng() % 10 < 6)
                k = NT_BOOL + (int)(rng() % 5);
            x->kinds[i] = k;
            x->bound[i] = (int)(rng() & 1);
        }
        int r = (int)(rng() % (NSCALAR + 1));
        x->ret = r == NSCALAR ? NT_VOID : scalar_kinds[r];
        x->wide = s % 3 == 1;
    }
}

static const char *param_ctype(const gsig *x, int k)
{
    if (x->wide && is_narrow(k))
        return k == NT_I8 || k == NT_I16 ? "int" : "unsigned int";
    return ctype(k);
}

/* Fixture fx_N records what it received; call_N calls a thunk of its
   forwarded parameters with nt_in (narrow ints as 64-bit values). */
static int write_fixtures(const char *path, const gsig *g, int count, uint64_t seed)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fprintf(f, "#include <stdint.h>\n#include <string.h>\n"
               "uint64_t nt_in[%d], nt_rec[%d], nt_retval; long long nt_calls;\n"
               "const int nt_fixture_count = %d;\n"
               "const unsigned long long nt_fixture_seed = %lluull;\n"
               "static uint64_t fb(float x){uint32_t u;memcpy(&u,&x,4);return u;}\n"
               "static uint64_t db(double x){uint64_t u;memcpy(&u,&x,8);return u;}\n"
               "static float bf(uint64_t v){uint32_t u=(uint32_t)v;float x;memcpy(&x,&u,4);"
               "return x;}\n"
               "static double bd(uint64_t v){double x;memcpy(&x,&v,8);return x;}\n",
            MAXP, MAXP + 1, count, (unsigned long long)seed);
    for (int s = 0; s < count; s++) {
        const gsig *x = &g[s];
        fprintf(f, "%s fx_%d(", ctype(x->ret), s);
        for (int i = 0; i < x->n; i++)
            fprintf(f, "%s%s a%d", i ? ", " : "", param_ctype(x, x->kinds[i]), i);
        fprintf(f, "%s) {\n", x->n ? "" : "void");
        for (int i = 0; i < x->n; i++) {
            int k = x->kinds[i];
            if (k == NT_F32)
                fprintf(f, "  nt_rec[%d] = fb(a%d);\n", i, i);
            else if (k == NT_F64)
                fprintf(f, "  nt_rec[%d] = db(a%d);\n", i, i);
            else if (k == NT_PTR)
                fprintf(f, "  nt_rec[%d] = (uint64_t)(uintptr_t)a%d;\n", i, i);
            else if (x->wide && is_narrow(k))
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
        fprintf(f, "}\ntypedef %s (*tk_%d)(", ctype(x->ret), s);
        int nf = 0;
        for (int i = 0; i < x->n; i++)
            if (!x->bound[i]) {
                int k = x->kinds[i];
                fprintf(f, "%s%s", nf++ ? ", " : "",
                        k == NT_F32 ? "float" : k == NT_F64 ? "double" : "uint64_t");
            }
        fprintf(f, "%s);\nvoid call_%d(void *fn) {\n  ", nf ? "" : "void", s);
        if (x->ret != NT_VOID)
            fprintf(f, "%s r = ", ctype(x->ret));
        fprintf(f, "((tk_%d)fn)(", s);
        nf = 0;
        for (int i = 0; i < x->n; i++)
            if (!x->bound[i]) {
                int k = x->kinds[i];
                fprintf(f, "%s%s(nt_in[%d])", nf++ ? ", " : "",
                        k == NT_F32 ? "bf" : k == NT_F64 ? "bd" : "", i);
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

static uint64_t received(int k, uint64_t v)
{
    switch (k) {
    case NT_BOOL: return v & 1;
    case NT_I8: return (uint64_t)(int64_t)(int8_t)v;
    case NT_U8: return (uint8_t)v;
    case NT_I16: return (uint64_t)(int64_t)(int16_t)v;
    case NT_U16: return (uint16_t)v;
    case NT_I32: return (uint64_t)(int64_t)(int32_t)v;
    case NT_U32:
    case NT_F32: return (uint32_t)v;
    default: return v;
    }
}

static uint64_t random_value(int k)
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
    if (k == NT_F64) {
        double d = (double)(int64_t)(v >> 11) / 1024.0;
        memcpy(&v, &d, 8);
    }
    return v;
}

/* ------------------------------------------------------------------------ */

typedef struct {
    nt_sig sig;
    nt_type args[MAXP];
    nt_plan *plan;
    nt_ctx *ctx;
    nt_entry_ref entry;
    void *address;
} thunk;

static void set_values(nt_plan *plan, nt_ctx *ctx, const uint64_t *cells)
{
    for (int i = 0; i < plan->nargs; i++)
        if (plan->slots[i].src == NT_SRC_BOUND)
            memcpy(ctx->values + plan->slots[i].offset, &cells[i], 8);
}

/* 0, or -1 with err filled. */
static int make_thunk(thunk *t, const gsig *x, const uint64_t *cells, void *target, nt_error *err)
{
    memset(t, 0, sizeof(*t));
    t->sig.ret.kind = (uint8_t)x->ret;
    t->sig.ret.depth = x->ret == NT_PTR;
    t->sig.nargs = x->n;
    t->sig.args = t->args;
    for (int i = 0; i < x->n; i++) {
        t->args[i].kind = (uint8_t)x->kinds[i];
        t->args[i].depth = x->kinds[i] == NT_PTR;
    }
    t->plan = nt_plan_new(&t->sig, err);
    if (t->plan == NULL)
        return -1;
    for (int i = 0; i < x->n; i++) {
        if (x->bound[i])
            nt_plan_set_bound(t->plan, i);
        else
            nt_plan_set_arg(t->plan, i);
    }
    if (nt_plan_finish(t->plan, err) != NT_OK)
        return -1;
    t->plan->engine = be;
    if (be->supports(t->plan) != NT_OK) {
        nt_fail(err, NT_ERR_UNSUPPORTED, -1, "the native engine does not take it");
        return -1;
    }
    if (be->prepare(t->plan, err) != NT_OK)
        return -1;
    t->ctx = nt_ctx_new(t->plan, target, err);
    if (t->ctx == NULL)
        return -1;
    set_values(t->plan, t->ctx, cells);
    return be->entry_new(t->plan, t->ctx, &t->entry, &t->address, err) == NT_OK ? 0 : -1;
}

static void drop_thunk(thunk *t)
{
    nt_entry_free(&t->entry, NULL);
    if (t->plan != NULL)
        be->plan_release(t->plan);
    nt_ctx_free_chain(t->ctx, NULL);
    nt_plan_free(t->plan);
}

/* Code read+execute, its slot read+write: never writable and executable. */
static int protection(const void *p)
{
    MEMORY_BASIC_INFORMATION mbi;
    if (VirtualQuery(p, &mbi, sizeof(mbi)) != sizeof(mbi))
        return -1;
    return (int)mbi.Protect;
}

static int nwx_checked;

static void check_pages(const thunk *t)
{
    int code = protection(t->address), handler = protection(t->plan->handler);
    /* the stub's slot: stub i of a block reads slot i of the page after
       the block's stubs (engine/native.c) */
    const uint8_t *stub = t->address;
    int32_t disp;
    memcpy(&disp, stub + 7, 4);
    int slot = protection(stub + 11 + disp);
    CHECK(code == PAGE_EXECUTE_READ && handler == PAGE_EXECUTE_READ && slot == PAGE_READWRITE,
          "pages: stub %#x, handler %#x, slot %#x", code, handler, slot);
    nwx_checked++;
}

static void test_random(int count, uint64_t seed, const char *dll)
{
    gsig *g = calloc((size_t)count, sizeof(gsig));
    gen_sigs(g, count, seed);
    HMODULE h = LoadLibraryA(dll);
    CHECK(h != NULL, "LoadLibrary(%s): error %lu", dll, (unsigned long)GetLastError());
    if (h == NULL)
        return;
    const int *fcount = (const int *)(void *)GetProcAddress(h, "nt_fixture_count");
    const unsigned long long *fseed =
        (const unsigned long long *)(void *)GetProcAddress(h, "nt_fixture_seed");
    uint64_t *in = (uint64_t *)(void *)GetProcAddress(h, "nt_in");
    uint64_t *rec = (uint64_t *)(void *)GetProcAddress(h, "nt_rec");
    uint64_t *retval = (uint64_t *)(void *)GetProcAddress(h, "nt_retval");
    long long *calls = (long long *)(void *)GetProcAddress(h, "nt_calls");
    CHECK(fcount && fseed && in && rec && retval && calls && *fcount >= count
              && *fseed == seed,
          "%s does not hold the first %d signatures of seed %llu", dll, count,
          (unsigned long long)seed);
    if (!(fcount && fseed && in && rec && retval && calls && *fcount >= count && *fseed == seed))
        return;
    int bad = 0, nframe = 0;
    rng_state = seed ^ 0xABCDEF;
    for (int s = 0; s < count && bad < 20; s++) {
        const gsig *x = &g[s];
        char name[32];
        snprintf(name, sizeof(name), "fx_%d", s);
        void *fx = (void *)GetProcAddress(h, name);
        snprintf(name, sizeof(name), "call_%d", s);
        void (*call)(void *) = (void (*)(void *))(void *)GetProcAddress(h, name);
        uint64_t vals[MAXP], cells[MAXP];
        for (int i = 0; i < x->n; i++) {
            vals[i] = random_value(x->kinds[i]);
            cells[i] = x->kinds[i] == NT_F32 ? (uint32_t)vals[i] : received(x->kinds[i], vals[i]);
            in[i] = vals[i];
        }
        thunk t;
        nt_error err = { NT_OK, -1, "" };
        if (fx == NULL || call == NULL || make_thunk(&t, x, cells, fx, &err) != 0) {
            CHECK(0, "sig %d: no thunk: %s", s, err.msg);
            bad++;
            continue;
        }
        nt_route hp;
        nt_route_make(&nt_arch_native->abi, t.plan, &hp);
        nframe += !hp.tail;
        if (s < 50)
            check_pages(&t);
        for (int round = 0; round < 2; round++) {
            *retval = random_value(x->ret == NT_VOID ? NT_I64 : x->ret);
            memset(rec, 0xEE, (MAXP + 1) * sizeof(uint64_t));
            long long before = *calls;
            call(t.address);
            CHECK(*calls == before + 1, "sig %d: fixture not called", s);
            for (int i = 0; i < x->n; i++) {
                uint64_t want = received(x->kinds[i], x->bound[i] ? cells[i] : vals[i]);
                if (x->wide && is_narrow(x->kinds[i]))
                    want = (uint32_t)want;
                if (rec[i] != want) {
                    CHECK(0, "sig %d round %d arg %d (%s, %s): got %#llx want %#llx", s, round, i,
                          ctype(x->kinds[i]), x->bound[i] ? "bound" : "forwarded",
                          (unsigned long long)rec[i], (unsigned long long)want);
                    bad++;
                }
            }
            if (x->ret != NT_VOID) {
                uint64_t want = x->ret == NT_BOOL ? *retval != 0 : received(x->ret, *retval);
                CHECK(rec[MAXP] == want, "sig %d: return %#llx want %#llx", s,
                      (unsigned long long)rec[MAXP], (unsigned long long)want);
            }
            if (round == 1)
                break;
            /* rebind: new bound values, one swap */
            nt_ctx *c2 = nt_ctx_new(t.plan, fx, &err);
            for (int i = 0; i < x->n; i++) {
                vals[i] = random_value(x->kinds[i]);
                cells[i] =
                    x->kinds[i] == NT_F32 ? (uint32_t)vals[i] : received(x->kinds[i], vals[i]);
                in[i] = vals[i];
            }
            set_values(t.plan, c2, cells);
            c2->older = t.ctx;
            nt_entry_swap(&t.entry, c2);
            t.ctx = c2;
        }
        drop_thunk(&t);
    }
    fprintf(stderr, "  random: %d signatures (seed %llu), %d needing a frame; %d thunks' pages "
                    "read+execute, slots read+write\n",
            count, (unsigned long long)seed, nframe, nwx_checked);
    free(g);
}

/* ------------------------------------------------------------------------ */
/* Permuted forwarding: the thunk's parameters in another order than the     */
/* target's, so that moves form cycles through registers and stack slots.   */

static uint64_t prec[16];

typedef long long L;
typedef double D;
typedef uint64_t U;

static __attribute__((noinline)) void f_v_l16(L a0, L a1, L a2, L a3, L a4, L a5, L a6, L a7,
                                              L a8, L a9, L a10, L a11, L a12, L a13, L a14,
                                              L a15)
{
    L a[16] = { a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15 };
    memcpy(prec, a, sizeof(a));
}

static __attribute__((noinline)) void f_v_d16(D a0, D a1, D a2, D a3, D a4, D a5, D a6, D a7,
                                              D a8, D a9, D a10, D a11, D a12, D a13, D a14,
                                              D a15)
{
    D a[16] = { a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15 };
    memcpy(prec, a, sizeof(a));
}

/* long long and double alternating: the kinds of a slot change places */
static __attribute__((noinline)) void f_v_ld8(L a0, D a1, L a2, D a3, L a4, D a5, L a6, D a7,
                                              L a8, D a9, L a10, D a11, L a12, D a13, L a14,
                                              D a15)
{
    L l[8] = { a0, a2, a4, a6, a8, a10, a12, a14 };
    D d[8] = { a1, a3, a5, a7, a9, a11, a13, a15 };
    for (int i = 0; i < 8; i++) {
        memcpy(&prec[2 * i], &l[i], 8);
        memcpy(&prec[2 * i + 1], &d[i], 8);
    }
}

/* narrow ints seen as 32 bits (bool, int8, uint8, int16, uint16 in turn) */
#define S int
#define W unsigned
static __attribute__((noinline)) void f_v_n16(W a0, S a1, W a2, S a3, W a4, W a5, S a6, W a7,
                                              S a8, W a9, W a10, S a11, W a12, S a13, W a14,
                                              W a15)
{
    W a[16] = { a0, (W)a1, a2, (W)a3, a4, a5, (W)a6, a7, (W)a8, a9, a10, (W)a11, a12, (W)a13,
                a14, a15 };
    for (int i = 0; i < 16; i++)
        prec[i] = a[i];
}
#undef S
#undef W

static const int narrow_kinds[5] = { NT_BOOL, NT_I8, NT_U8, NT_I16, NT_U16 };

/* A call of 16 arguments, each position by its own type: the first four go
   to rcx/xmm0 ... r9/xmm3 by type (bit k of fp_mask: position k is a
   double), the rest are 8-byte stack slots whatever their type. */
#define A12 U, U, U, U, U, U, U, U, U, U, U, U
#define R12 v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12], v[13], v[14], v[15]
#define CALL16(T0, T1, T2, T3)                                                                  \
    ((void (*)(T0, T1, T2, T3, A12))fn)(as_##T0(v[0]), as_##T1(v[1]), as_##T2(v[2]),           \
                                        as_##T3(v[3]), R12)
static U as_U(U v)
{
    return v;
}

static D as_D(U v)
{
    D d;
    memcpy(&d, &v, 8);
    return d;
}

static void call16_by_position(void *fn, int fp_mask, const U *v)
{
    switch (fp_mask & 15) {
    case 0: CALL16(U, U, U, U); break;
    case 1: CALL16(D, U, U, U); break;
    case 2: CALL16(U, D, U, U); break;
    case 3: CALL16(D, D, U, U); break;
    case 4: CALL16(U, U, D, U); break;
    case 5: CALL16(D, U, D, U); break;
    case 6: CALL16(U, D, D, U); break;
    case 7: CALL16(D, D, D, U); break;
    case 8: CALL16(U, U, U, D); break;
    case 9: CALL16(D, U, U, D); break;
    case 10: CALL16(U, D, U, D); break;
    case 11: CALL16(D, D, U, D); break;
    case 12: CALL16(U, U, D, D); break;
    case 13: CALL16(D, U, D, D); break;
    case 14: CALL16(U, D, D, D); break;
    default: CALL16(D, D, D, D); break;
    }
}
#undef CALL16
#undef A12
#undef R12

static void test_permutations(int count, uint64_t seed)
{
    rng_state = seed;
    int bad = 0, moved = 0;
    for (int it = 0; it < count && bad < 10; it++) {
        int which = it % 4;
        gsig x = { .ret = NT_VOID, .n = 16 };
        for (int i = 0; i < 16; i++)
            x.kinds[i] = which == 0 ? NT_I64
                : which == 1        ? NT_F64
                : which == 3        ? narrow_kinds[i % 5]
                : (i & 1)           ? NT_F64
                                    : NT_I64;
        void *target = which == 0 ? (void *)f_v_l16
            : which == 1          ? (void *)f_v_d16
            : which == 3          ? (void *)f_v_n16
                                  : (void *)f_v_ld8;
        int pbound = (int)(rng() % 4);
        uint64_t cells[16];
        for (int i = 0; i < 16; i++) {
            x.bound[i] = (int)(rng() % 4) < pbound;
            if (x.kinds[i] == NT_F64) {
                D d = 100.0 + i;
                memcpy(&cells[i], &d, 8);
            } else {
                cells[i] = received(x.kinds[i], 100 + i);
            }
        }
        /* the plan as made, then its forwarded parameters shuffled: the
           t-th forwarded target parameter takes thunk parameter p[t] */
        thunk t;
        memset(&t, 0, sizeof(t));
        nt_error err = { NT_OK, -1, "" };
        t.sig.ret.kind = NT_VOID;
        t.sig.nargs = 16;
        t.sig.args = t.args;
        for (int i = 0; i < 16; i++)
            t.args[i].kind = (uint8_t)x.kinds[i];
        t.plan = nt_plan_new(&t.sig, &err);
        for (int i = 0; i < 16; i++) {
            if (x.bound[i])
                nt_plan_set_bound(t.plan, i);
            else
                nt_plan_set_arg(t.plan, i);
        }
        nt_plan_finish(t.plan, &err);
        int nf = t.plan->nfwd, p[16];
        random_permutation(p, nf);
        for (int i = 0, k = 0; i < 16; i++) {
            if (x.bound[i])
                continue;
            t.plan->slots[i].fwd = (uint16_t)p[k];
            t.plan->fwd_index[p[k]] = i;
            moved += p[k] != k;
            k++;
        }
        t.plan->engine = be;
        if (be->supports(t.plan) != NT_OK || be->prepare(t.plan, &err) != NT_OK
            || (t.ctx = nt_ctx_new(t.plan, target, &err)) == NULL) {
            CHECK(0, "permutation %d: %s", it, err.msg);
            bad++;
            nt_plan_free(t.plan);
            continue;
        }
        set_values(t.plan, t.ctx, cells);
        be->entry_new(t.plan, t.ctx, &t.entry, &t.address, &err);
        /* thunk parameter k: 1000 + k (as long long or double), narrow
           ints 0x5A5A5A5A00 + 37 k (garbage above, bool 0 or 1) */
        uint64_t arg[16] = { 0 }, seen[16];
        int fp_mask = 0;
        for (int k = 0; k < nf; k++) {
            int kind = x.kinds[t.plan->fwd_index[k]];
            if (kind == NT_F64) {
                D d = 1000.0 + k;
                memcpy(&arg[k], &d, 8);
                seen[k] = arg[k];
                fp_mask |= 1 << k;
            } else if (which == 3) {
                uint64_t v = 0x5A5A5A5A00ull + (uint64_t)(k * 37);
                arg[k] = kind == NT_BOOL ? v & ~0xFEull : v;
                seen[k] = (uint32_t)received(kind, v);
            } else {
                arg[k] = seen[k] = 1000 + (uint64_t)k;
            }
        }
        memset(prec, 0, sizeof(prec));
        call16_by_position(t.address, fp_mask, arg);
        for (int i = 0; i < 16; i++) {
            uint64_t want = x.bound[i] ? cells[i] : seen[t.plan->slots[i].fwd];
            if (which == 3)
                want = (uint32_t)want;
            if (prec[i] != want) {
                CHECK(0, "permutation %d (fixture %d) arg %d: got %#llx want %#llx", it, which, i,
                      (unsigned long long)prec[i], (unsigned long long)want);
                bad++;
            }
        }
        drop_thunk(&t);
    }
    fprintf(stderr, "  permutations: %d permuted plans (%d params moved out of order)\n", count,
            moved);
}

/* ------------------------------------------------------------------------ */
/* The released trap, in a child: "trap FILE" writes its stderr there.      */

static long long add2(long long a, long long b)
{
    return a + b;
}

static int trap_child(const char *file)
{
    if (freopen(file, "w", stderr) == NULL)
        return 2;
    gsig x = { .ret = NT_I64, .n = 2, .kinds = { NT_I64, NT_I64 }, .bound = { 1, 0 } };
    uint64_t cells[2] = { 5, 0 };
    thunk t;
    nt_error err = { NT_OK, -1, "" };
    if (make_thunk(&t, &x, cells, (void *)add2, &err) != 0)
        return 3;
    long long (*fn)(long long) = (long long (*)(long long))t.address;
    if (fn(1) != 6)
        return 4;
    nt_what *what = nt_plan_what(t.plan, (void *)add2);
    nt_entry_free(&t.entry, what);
    fflush(stderr);
    fn(1); /* must not return */
    return 5;
}

static void test_trap(const char *self)
{
    const char *file = "nt_trap.txt";
    intptr_t st = _spawnl(_P_WAIT, self, self, "trap", file, NULL);
    char buf[2048] = "";
    FILE *f = fopen(file, "r");
    size_t got = f != NULL ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    buf[got] = '\0';
    if (f != NULL)
        fclose(f);
    remove(file);
    char want[160];
    snprintf(want, sizeof(want), "numthunk: called a released thunk: intptr_t (intptr_t) over "
             "intptr_t (intptr_t, intptr_t), target at 0x%llx",
             (unsigned long long)(uintptr_t)add2);
    /* abort() ends a Windows process with status 3 */
    CHECK(st == 3, "released thunk: child status %ld", (long)st);
    CHECK(strstr(buf, want) != NULL, "released thunk: stderr was '%s', expected '%s'", buf, want);
    fprintf(stderr, "  release: trap aborts with \"%.*s\"\n", (int)strcspn(buf, "\n"), buf);
}

/* NUMTHUNK_EXECMEM=none: no executable memory; the native engine takes
   no plan, and the fallback says that libffi is not built in. */
static void test_no_execmem(void)
{
    gsig x = { .ret = NT_I64, .n = 2, .kinds = { NT_I64, NT_I64 }, .bound = { 1, 0 } };
    uint64_t cells[2] = { 5, 0 };
    thunk t;
    nt_error err = { NT_OK, -1, "" };
    CHECK(make_thunk(&t, &x, cells, (void *)add2, &err) != 0, "a thunk without memory");
    CHECK(strcmp(be->memory_policy(), "none") == 0, "policy %s", be->memory_policy());
    nt_error_init(&err);
    CHECK(nt_engine_ffi.prepare(t.plan, &err) == NT_ERR_UNSUPPORTED
              && strstr(err.msg, "libffi is not built in") != NULL,
          "the fallback said '%s'", err.msg);
    nt_plan_free(t.plan);
    fprintf(stderr, "  no executable memory: no native plan; fallback: %s\n", err.msg);
}

int main(int argc, char **argv)
{
    if (argc >= 5 && strcmp(argv[1], "writefix") == 0) {
        int count = atoi(argv[3]);
        uint64_t seed = strtoull(argv[4], NULL, 10);
        gsig *g = calloc((size_t)count, sizeof(gsig));
        gen_sigs(g, count, seed);
        return write_fixtures(argv[2], g, count, seed) != 0;
    }
    be = nt_engine_native;
    if (be == NULL) {
        printf("no native engine in this build\n");
        return 1;
    }
    if (argc >= 3 && strcmp(argv[1], "trap") == 0)
        return trap_child(argv[2]);
    if (argc >= 2 && strcmp(argv[1], "linuxpolicy") == 0) {
        /* NUMTHUNK_EXECMEM=memfd: a Linux policy, refused naming these */
        const char *want = "NUMTHUNK_EXECMEM=memfd: expected 'filemap', 'virtualprotect', "
                           "'none' or 'auto'";
        CHECK(strcmp(nt_config_get()->error, want) == 0, "config error '%s'",
              nt_config_get()->error);
        fprintf(stderr, "  %s\n", nt_config_get()->error);
        return failures != 0;
    }
    if (argc >= 2 && strcmp(argv[1], "noexecmem") == 0) {
        test_no_execmem();
        return failures != 0;
    }
    if (argc < 4)
        return 2;
    int count = atoi(argv[1]);
    uint64_t seed = strtoull(argv[2], NULL, 10);
    fprintf(stderr, "engine %s, memory policy %s, long is %d bits\n", be->name,
            be->memory_policy(), (int)(8 * sizeof(long)));
    CHECK(strcmp(be->name, "native-x86_64-win64") == 0, "engine %s", be->name);
    CHECK(nt_config_get()->error[0] == '\0', "config error '%s'", nt_config_get()->error);
    test_random(count, seed, argv[3]);
    test_permutations(3000, seed);
    char self[MAX_PATH];
    GetModuleFileNameA(NULL, self, sizeof(self));
    test_trap(self);
    if (failures == 0)
        printf("all native engine tests passed (%s)\n", be->memory_policy());
    else
        printf("%d failures\n", failures);
    return failures != 0;
}
