/*
 * test_sig.c: checks for the first pipeline stage (parse/spellings.c, parse/declarator.c) on its
 * own, without Python: parse/format round trips of the signature strings
 * that SciPy and Cython compare with strcmp, error columns, typedef
 * resolution and the platform widths of the spelling table.
 *
 *   gcc -Wall -Wextra -Werror -std=c11 -fsanitize=address,undefined \
 *       -Isrc src/kinds.c src/parse/spellings.c src/parse/declarator.c tests/c/test_sig.c -o test_sig -lffi
 *
 * Exits non-zero if any check fails.
 */
#include "numthunk.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
static int checks;

#define CHECK(cond) check((cond), #cond, __LINE__)

static void
check(int ok, const char *what, int line)
{
    checks++;
    if (!ok) {
        failures++;
        fprintf(stderr, "test_sig.c:%d: check failed: %s\n", line, what);
    }
}

static nt_sig *
parse(const char *src)
{
    nt_error err = {NT_OK, -1, ""};
    nt_sig *sig = nt_sig_parse(src, NULL, 0, &err);
    if (sig == NULL)
        fprintf(stderr, "  parse of \"%s\" failed at column %d: %s\n", src,
                err.column, err.msg);
    return sig;
}

/* src parses and formats as want; the formatted string parses back to an
   equal signature and formats the same again. */
static void
round_trip(const char *src, const char *want, int line)
{
    char buf[512], again[512];
    nt_sig *sig = parse(src), *back, *copy;
    size_t n;

    checks++;
    if (sig == NULL) {
        failures++;
        fprintf(stderr, "test_sig.c:%d: \"%s\" did not parse\n", line, src);
        return;
    }
    n = nt_sig_format(sig, buf, sizeof(buf));
    if (n != strlen(buf) || strcmp(buf, want) != 0) {
        failures++;
        fprintf(stderr, "test_sig.c:%d: \"%s\" formats as \"%s\", want "
                "\"%s\"\n", line, src, buf, want);
    }
    back = parse(buf);
    copy = nt_sig_copy(sig);
    if (back == NULL || !nt_sig_equal(sig, back) || copy == NULL ||
        !nt_sig_equal(sig, copy)) {
        failures++;
        fprintf(stderr, "test_sig.c:%d: \"%s\" does not round-trip\n", line,
                buf);
    } else {
        nt_sig_format(back, again, sizeof(again));
        if (strcmp(again, buf) != 0) {
            failures++;
            fprintf(stderr, "test_sig.c:%d: \"%s\" reformats as \"%s\"\n",
                    line, buf, again);
        }
    }
    nt_sig_free(sig);
    nt_sig_free(back);
    nt_sig_free(copy);
}

#define RT(src, want) round_trip((src), (want), __LINE__)
#define RT_SAME(src) round_trip((src), (src), __LINE__)

/* src fails with a ValueError at column col whose message contains part. */
static void
bad(const char *src, int col, const char *part, int line)
{
    nt_error err = {NT_OK, -1, ""};
    nt_sig *sig = nt_sig_parse(src, NULL, 0, &err);

    checks++;
    if (sig != NULL) {
        failures++;
        fprintf(stderr, "test_sig.c:%d: \"%s\" parsed, want an error\n",
                line, src);
        nt_sig_free(sig);
        return;
    }
    if (err.status != NT_ERR_VALUE || err.column != col ||
        strstr(err.msg, part) == NULL) {
        failures++;
        fprintf(stderr, "test_sig.c:%d: \"%s\": got status %d column %d "
                "\"%s\", want column %d and \"%s\"\n", line, src,
                (int)err.status, err.column, err.msg, col, part);
    }
}

#define BAD(src, col, part) bad((src), (col), (part), __LINE__)

static void
test_round_trips(void)
{
    /* SciPy LowLevelCallable tables */
    RT_SAME("double (double)");
    RT_SAME("double (int, double *)");
    RT_SAME("double (double, void *)");
    RT_SAME("double (int, double *, void *)");
    RT_SAME("int (double *, npy_intp, double *, void *)");
    RT_SAME("int (double *, intptr_t, double *, void *)");
    RT_SAME("int (double *, long, double *, void *)");
    RT_SAME("int (double *, long long, double *, void *)");
    RT_SAME("int (double *, npy_intp, double *, npy_intp, void *)");
    RT_SAME("int (npy_intp *, double *, int, int, void *)");

    /* Cython __pyx_capi__ capsule names */
    RT_SAME("double (double *, int)");
    RT_SAME("void (void)");
    RT("void ()", "void (void)");
    RT_SAME("__pyx_t_double_complex (__pyx_t_double_complex)");
    RT_SAME("__pyx_t_float_complex (__pyx_t_float_complex, int)");
    RT_SAME("unsigned PY_LONG_LONG (PY_LONG_LONG)");
    RT("double (double const *, int)", "double (const double *, int)");
    RT("double (double *const , int)", "double (double *const, int)");
    RT("void (__Pyx_memviewslice, int __pyx_skip_dispatch)",
       "void (__Pyx_memviewslice, int)");
    RT("int (int *, double *, int *)", "int (int *, double *, int *)");
    RT("double (double (*)(double), double)",
       "double (double (*)(double), double)");
    RT("bint (bint)", "bint (bint)");

    /* free-form C with names, spacing and qualifiers */
    RT("void(const double* x, Py_ssize_t n)",
       "void (const double *, Py_ssize_t)");
    RT("  double   f ( double   *x ,int n )  ", "double (double *, int)");
    RT("double\t(\ndouble\r)", "double (double)");
    RT("const double* f(const double* const x)",
       "const double *(const double *const)");
    RT("int (char **, const char *const *)",
       "int (char **, const char *const *)");
    /* NT_CONST_MID does not say which inner level is const: the canonical
       form marks them all */
    RT("int (double **const *, double *const *const *)",
       "int (double *const *const *, double *const *const *)");
    RT("double *(int)", "double *(int)");
    RT("double *const (int)", "double *const (int)");
    RT("void (double (*cb)(double, void *), void *data)",
       "void (double (*)(double, void *), void *)");
    RT("void (double *(*const cb)(int (*)(void)))",
       "void (double *(*const)(int (*)(void)))");
    RT("void (void (*)())", "void (void (*)(void))");
    RT("int (unsigned x, signed y)", "int (unsigned, signed)");
    RT("unsigned long long int (unsigned short int, long long)",
       "unsigned long long int (unsigned short int, long long)");
    RT("int (const int, int const)", "int (const int, const int)");
    RT("int (const unsigned const int)", "int (const unsigned int)");

    /* Numba's and NumPy's names are no C: numthunk/_numba_sig.py reads
       them (as typedefs) before this parser does */
    BAD("float64 (double)", 0, "unknown type name 'float64'");
    BAD("void (intc)", 6, "unknown type name 'intc'");
    BAD("void (voidptr)", 6, "unknown type name 'voidptr'");

    /* opaque struct pointers print back as written */
    RT_SAME("double (const struct pt *, union u **, struct pt *const)");
    RT("struct node *next(struct node*)", "struct node *(struct node *)");
    RT("int (struct __pyx_opt_args_f *__pyx_optional_args)",
       "int (struct __pyx_opt_args_f *)");

    /* complex spellings */
    RT_SAME("double complex (float complex)");
    RT_SAME("_Complex double (_Complex float)");
    RT_SAME("double _Complex (float _Complex)");
}

static void
test_errors(void)
{
    BAD("", 0, "empty signature");
    BAD("   ", 0, "empty signature");
    BAD("double (FLOAT64)", 8, "unknown type name 'FLOAT64'");
    BAD("double (int, FLOAT64 *x)", 13, "unknown type name 'FLOAT64'");
    BAD("int (int, ...)", 10, "variadic functions ('...') are not supported");
    BAD("int (...)", 5, "variadic");
    BAD("int (int ...)", 9, "variadic");
    BAD("double (int", 11, "expected ',' or ')'");
    BAD("double (int x y)", 14, "expected ',' or ')'");
    BAD("double (int; int)", 11, "expected ',' or ')'");
    BAD("void (void, int)", 6, "'void' must be the only parameter");
    BAD("void (int, void)", 11, "'void' must be the only parameter");
    BAD("void (void x)", 6, "a parameter cannot have type void");
    BAD("void (const void)", 6, "a parameter cannot have type void");
    BAD("struct s (int)", 9, "'struct s' passed by value is not supported");
    BAD("int (union u)", 12, "'union u' passed by value is not supported");
    BAD("int (struct s x)", 14, "'struct s' passed by value");
    BAD("int (struct *)", 12, "expected a struct name");
    BAD("int (struct int *)", 12, "expected a struct name");
    BAD("int (int struct s *)", 9, "'struct' types are not supported");
    BAD("int (enum e)", 5, "'enum' types are not supported");
    BAD("int (double x[])", 13, "arrays ('[]') are not supported");
    BAD("int (double *) x", 15, "unexpected 'x' after the signature");
    BAD("int (double *))", 14, "unexpected ')' after the signature");
    BAD("long double (double)", 0, "long double is not supported");
    BAD("double (long double)", 8, "long double is not supported");
    BAD("double (__int128)", 8, "unknown type name '__int128'");
    BAD("half (half)", 0, "unknown type name 'half'");
    BAD("float16 (int)", 0, "unknown type name 'float16'");
    BAD("double", 6, "expected '('");
    BAD("double f", 8, "expected '('");
    BAD("(double)", 0, "expected a type, got '('");
    BAD("double (int,)", 12, "expected a type");
    BAD("double (*)(double)", 8, "expected a type");
    BAD("int (double (**)(int))", 14, "pointers to function pointers");
    BAD("int (double (f)(int))", 13, "unknown type name 'f'");
    BAD("int (unsigned float)", 5, "unknown type name 'unsigned float'");
    BAD("int (npy_intp int)", 14, "cannot follow");
    BAD("int (volatile int)", 5, "'volatile' is not supported");
    BAD("int (int *restrict)", 10, "'restrict' is not supported");
    BAD("int (int int)", 5, "unknown type name 'int int'");
    BAD("int (double * int)", 14, "expected a name");
    BAD("int (double $)", 12, "unexpected character '$'");
    BAD("int (double \x01)", 12, "byte 0x01");
    BAD("int (CPointer(double))", 5, "unknown type name 'CPointer'");
    BAD("void (FunctionType[double(double)])", 6, "unknown type name 'FunctionType'");
    BAD("(double) -> double", 0, "expected a type, got '('");
    BAD("double (double) -> double", 16, "unexpected '->' after the signature");
    BAD("int f(int) (int)", 11, "unexpected '('");
}

static void
test_depth_limits(void)
{
    /* 255 '*' are the most a uint8_t depth holds; 256 are refused. */
    char src[600];
    size_t n = 0;
    int i;
    nt_sig *sig;

    memcpy(src, "int (int ", 9);
    n = 9;
    for (i = 0; i < 255; i++)
        src[n++] = '*';
    memcpy(src + n, ")", 2);
    sig = parse(src);
    CHECK(sig != NULL && sig->args[0].depth == 255);
    nt_sig_free(sig);
    memcpy(src + n, "*)", 3);
    BAD(src, 9 + 255, "too many levels of pointers");

    /* deep nesting is refused, not a stack overflow */
    {
        size_t len = 0, cap = 100000;
        char *deep = malloc(cap);
        if (deep == NULL)
            abort();
        memcpy(deep, "int (", 5);
        len = 5;
        while (len + 16 < cap) {
            memcpy(deep + len, "int (*)(", 8);
            len += 8;
        }
        deep[len] = '\0';
        {
            nt_error err = {NT_OK, -1, ""};
            CHECK(nt_sig_parse(deep, NULL, 0, &err) == NULL);
            CHECK(err.status == NT_ERR_VALUE);
            CHECK(strstr(err.msg, "nested too deeply") != NULL);
        }
        free(deep);
    }
}

static void
test_structure(void)
{
    nt_sig *sig;
    nt_type t;
    nt_error err = {NT_OK, -1, ""};

    sig = parse("double f(const double *const *x, int n, double (*g)(double))");
    CHECK(sig != NULL);
    if (sig != NULL) {
        CHECK(sig->ret.kind == NT_F64);
        CHECK(sig->nargs == 3);
        CHECK(sig->args[0].kind == NT_PTR);
        CHECK(sig->args[0].base == NT_F64);
        CHECK(sig->args[0].depth == 2);
        CHECK(sig->args[0].cflags == (NT_CONST_BASE | NT_CONST_MID));
        CHECK(sig->names[0] != NULL && strcmp(sig->names[0], "x") == 0);
        CHECK(sig->args[1].kind == nt_spellings[nt_spelling_find("int", 3)]
                                       .kind);
        CHECK(strcmp(sig->names[1], "n") == 0);
        CHECK(sig->args[2].kind == NT_FNPTR);
        CHECK(sig->args[2].fn != NULL && sig->args[2].fn->nargs == 1);
        CHECK(strcmp(sig->names[2], "g") == 0);
    }
    nt_sig_free(sig);

    sig = parse("void (double *, int)");
    CHECK(sig != NULL && sig->names[0] == NULL && sig->names[1] == NULL);
    nt_sig_free(sig);

    sig = parse("void (void)");
    CHECK(sig != NULL && sig->nargs == 0 && sig->ret.kind == NT_VOID);
    nt_sig_free(sig);

    /* a typedef of void * is a pointer of depth 1 to void */
    {
        nt_typedef vp = { "voidp", { 0, 0, 0, 0, 0, NULL } };
        CHECK(nt_type_parse("void *", NULL, 0, &vp.type, &err) == 0);
        CHECK(nt_type_parse("voidp", &vp, 1, &t, &err) == 0);
        CHECK(t.kind == NT_PTR && t.base == NT_VOID && t.depth == 1);
    }

    /* structural equality ignores spellings and names */
    {
        nt_sig *a = parse("int64_t (npy_intp *x)");
        nt_sig *b = parse("intptr_t (intptr_t *)");
        nt_sig *c = parse("int64_t (const int64_t *)");
        CHECK(a != NULL && b != NULL && c != NULL);
        if (sizeof(intptr_t) == 8)
            CHECK(nt_sig_equal(a, b));
        CHECK(!nt_sig_equal(b, c));
        nt_sig_free(a);
        nt_sig_free(b);
        nt_sig_free(c);
    }
    {
        /* the result's and each parameter's own const are no part of the
           function's type; what a pointer points to is */
        nt_sig *a = parse("double *const (const int)");
        nt_sig *b = parse("double * (int)");
        nt_sig *c = parse("const double * (int)");
        nt_sig *d = parse("void (double *const *)");
        nt_sig *e = parse("void (double **const)");
        nt_sig *f = parse("void (double **)");
        CHECK(a != NULL && b != NULL && c != NULL && d != NULL && e != NULL && f != NULL);
        CHECK(nt_sig_equal(a, b) && nt_sig_equal(b, a));
        CHECK(!nt_sig_equal(b, c) && !nt_sig_equal(a, c));
        CHECK(nt_sig_equal(e, f) && !nt_sig_equal(d, f) && !nt_sig_equal(d, e));
        nt_sig_free(a);
        nt_sig_free(b);
        nt_sig_free(c);
        nt_sig_free(d);
        nt_sig_free(e);
        nt_sig_free(f);
    }
    {
        nt_sig *a = parse("void (double (*)(double))");
        nt_sig *b = parse("void (double (*)(float))");
        nt_sig *c = parse("void (double (*f)(double x))");
        CHECK(a != NULL && b != NULL && c != NULL);
        CHECK(!nt_sig_equal(a, b));
        CHECK(nt_sig_equal(a, c));
        nt_sig_free(a);
        nt_sig_free(b);
        nt_sig_free(c);
    }
}

static void
test_type_parse(void)
{
    nt_type t;
    nt_error err = {NT_OK, -1, ""};
    char buf[64];

    CHECK(nt_type_parse("double", NULL, 0, &t, &err) == 0);
    CHECK(t.kind == NT_F64 && t.depth == 0);
    CHECK(nt_type_parse("double *const ", NULL, 0, &t, &err) == 0);
    CHECK(t.kind == NT_PTR && t.cflags == NT_CONST_SELF);
    nt_type_format(&t, buf, sizeof(buf));
    CHECK(strcmp(buf, "double *const") == 0);
    CHECK(nt_type_parse("double const *", NULL, 0, &t, &err) == 0);
    CHECK(t.cflags == NT_CONST_BASE);
    nt_type_format(&t, buf, sizeof(buf));
    CHECK(strcmp(buf, "const double *") == 0);

    CHECK(nt_type_parse("double (*)(double *, int)", NULL, 0, &t, &err) == 0);
    CHECK(t.kind == NT_FNPTR && t.fn != NULL && t.fn->nargs == 2);
    nt_type_format(&t, buf, sizeof(buf));
    CHECK(strcmp(buf, "double (*)(double *, int)") == 0);
    nt_sig_free(t.fn);

    /* no names in a bare type: "unsigned lon" is not "unsigned" */
    err.status = NT_OK;
    CHECK(nt_type_parse("unsigned lon", NULL, 0, &t, &err) != 0);
    CHECK(err.status == NT_ERR_VALUE && err.column == 9);
    err.status = NT_OK;
    CHECK(nt_type_parse("", NULL, 0, &t, &err) != 0);
    CHECK(err.status == NT_ERR_VALUE && err.column == 0);
    err.status = NT_OK;
    CHECK(nt_type_parse("double (*)(int", NULL, 0, &t, &err) != 0);
    CHECK(t.fn == NULL);
}

static void
test_typedefs(void)
{
    nt_typedef tds[4];
    nt_error err = {NT_OK, -1, ""};
    nt_sig *sig;
    nt_type t;
    char buf[256];

    memset(tds, 0, sizeof(tds));
    tds[0].name = "__pyx_t_5numpy_float64_t";
    CHECK(nt_type_parse("double", NULL, 0, &tds[0].type, &err) == 0);
    tds[1].name = "FLOAT64";
    tds[1].type = tds[0].type;
    tds[2].name = "__pyx_t_5scipy_6linalg_11cython_blas_d";
    tds[2].type = tds[0].type;
    tds[3].name = "dptr";
    CHECK(nt_type_parse("double *", NULL, 0, &tds[3].type, &err) == 0);

    sig = nt_sig_parse("__pyx_t_5numpy_float64_t (__pyx_t_5numpy_float64_t "
                       "*, const FLOAT64 *, int)", tds, 4, &err);
    CHECK(sig != NULL);
    if (sig != NULL) {
        nt_sig_format(sig, buf, sizeof(buf));
        CHECK(strcmp(buf, "double (double *, const double *, int)") == 0);
        CHECK(sig->args[1].cflags == NT_CONST_BASE);
    }
    nt_sig_free(sig);

    sig = nt_sig_parse("__pyx_t_5scipy_6linalg_11cython_blas_d (int *, "
                       "__pyx_t_5scipy_6linalg_11cython_blas_d *, int *)",
                       tds, 4, &err);
    CHECK(sig != NULL);
    if (sig != NULL) {
        nt_sig_format(sig, buf, sizeof(buf));
        CHECK(strcmp(buf, "double (int *, double *, int *)") == 0);
    }
    nt_sig_free(sig);

    /* a pointer typedef: const applies to the pointer, '*' adds a level */
    sig = nt_sig_parse("void (const dptr, dptr *, const dptr *)", tds, 4,
                       &err);
    CHECK(sig != NULL);
    if (sig != NULL) {
        nt_sig_format(sig, buf, sizeof(buf));
        CHECK(strcmp(buf, "void (double *const, double **, "
                     "double *const *)") == 0);
    }
    nt_sig_free(sig);

    /* spelling table first, then typedefs; unknown names still fail */
    err.status = NT_OK;
    sig = nt_sig_parse("double (float64_t)", tds, 4, &err);
    CHECK(sig == NULL && err.column == 8 &&
          strstr(err.msg, "unknown type name 'float64_t'") != NULL);

    /* a typedef names a new type: a name the parser knows, a keyword, a
       non-identifier or a name given twice is refused, not ignored */
    {
        static const char *const refused[] = {
            "double", "npy_float64", "Py_ssize_t", "int8_t", "const", "struct",
            "my type", "2x", "",
        };
        nt_typedef two[2];
        size_t k;

        memset(two, 0, sizeof(two));
        two[0].type = tds[1].type;
        for (k = 0; k < sizeof(refused) / sizeof(refused[0]); k++) {
            two[0].name = refused[k];
            err.status = NT_OK;
            sig = nt_sig_parse("double (double)", two, 1, &err);
            CHECK(sig == NULL && err.status == NT_ERR_VALUE);
            nt_sig_free(sig);
        }
        two[0].name = two[1].name = "REAL";
        two[1].type = tds[1].type;
        err.status = NT_OK;
        CHECK(nt_type_parse("REAL", two, 2, &t, &err) != 0 &&
              strstr(err.msg, "given twice") != NULL);
    }

    /* parameter names must differ within one parameter list */
    err.status = NT_OK;
    sig = nt_sig_parse("void (int a, double a)", NULL, 0, &err);
    CHECK(sig == NULL && err.column == 13 && strstr(err.msg, "named 'a'") != NULL);
    sig = nt_sig_parse("void (int a, double (*f)(double a))", NULL, 0, &err);
    CHECK(sig != NULL);
    nt_sig_free(sig);

    /* a bad typedef entry is reported, not trusted */
    tds[0].type.kind = NT_FNPTR;
    err.status = NT_OK;
    sig = nt_sig_parse("void (__pyx_t_5numpy_float64_t)", tds, 4, &err);
    CHECK(sig == NULL && err.status == NT_ERR_VALUE && err.column == 6);
    CHECK(nt_type_parse("FLOAT64 *", tds, 4, &t, &err) == 0);
    CHECK(t.kind == NT_PTR && t.base == NT_F64 && t.depth == 1);

    /* a kind at the kind table's end or past it, as the type or as a
       pointer's base, is no type: refused, never looked up */
    {
        static const int past[] = { NT_KIND_COUNT, NT_KIND_COUNT + 1, 255 };
        nt_typedef one;
        size_t k;
        int ptr;

        for (k = 0; k < sizeof(past) / sizeof(past[0]); k++)
            for (ptr = 0; ptr < 2; ptr++) {
                memset(&one, 0, sizeof(one));
                one.name = "PAST";
                one.type.kind = ptr ? NT_PTR : (uint8_t)past[k];
                one.type.base = ptr ? (uint8_t)past[k] : 0;
                one.type.depth = ptr ? 1 : 0;
                err.status = NT_OK;
                sig = nt_sig_parse("void (PAST)", &one, 1, &err);
                CHECK(sig == NULL && err.status == NT_ERR_VALUE &&
                      strstr(err.msg, "does not name a supported type") != NULL);
                nt_sig_free(sig);
            }
        /* a pointer of no level, a pointer to a pointer kind or to a
           function pointer kind is no type either */
        static const int bad_ptr[][2] = {
            { NT_F64, 0 }, { NT_PTR, 1 }, { NT_FNPTR, 1 }, { NT_PTR, 2 },
        };
        for (k = 0; k < sizeof(bad_ptr) / sizeof(bad_ptr[0]); k++) {
            memset(&one, 0, sizeof(one));
            one.name = "PAST";
            one.type.kind = NT_PTR;
            one.type.base = (uint8_t)bad_ptr[k][0];
            one.type.depth = (uint8_t)bad_ptr[k][1];
            err.status = NT_OK;
            sig = nt_sig_parse("void (PAST)", &one, 1, &err);
            CHECK(sig == NULL && err.status == NT_ERR_VALUE &&
                  strstr(err.msg, "does not name a supported type") != NULL);
            nt_sig_free(sig);
        }
        /* the last kind, DLTensor, is one: as a typedef's pointee, and as
           the typedef itself (then passed by pointer only) */
        memset(&one, 0, sizeof(one));
        one.name = "DLT";
        CHECK(nt_type_parse("const DLTensor *", NULL, 0, &one.type, &err) == 0);
        sig = nt_sig_parse("double (DLT t)", &one, 1, &err);
        CHECK(sig != NULL);
        if (sig != NULL) {
            nt_sig_format(sig, buf, sizeof(buf));
            CHECK(strcmp(buf, "double (const DLTensor *)") == 0);
        }
        nt_sig_free(sig);
        memset(&one.type, 0, sizeof(one.type));
        one.type.kind = NT_DLTENSOR;
        sig = nt_sig_parse("double (DLT *t)", &one, 1, &err);
        CHECK(sig != NULL);
        if (sig != NULL) {
            nt_sig_format(sig, buf, sizeof(buf));
            CHECK(strcmp(buf, "double (DLTensor *)") == 0);
        }
        nt_sig_free(sig);
        err.status = NT_OK;
        sig = nt_sig_parse("double (DLT t)", &one, 1, &err);
        CHECK(sig == NULL && strstr(err.msg, "DLTensor is passed by pointer") != NULL);
        nt_sig_free(sig);
    }
}

/* a and b parse to equal signatures. */
static void
same(const char *a, const char *b, int line)
{
    nt_sig *x = parse(a), *y = parse(b);

    checks++;
    if (x == NULL || y == NULL || !nt_sig_equal(x, y)) {
        failures++;
        fprintf(stderr, "test_sig.c:%d: \"%s\" and \"%s\" differ\n", line, a, b);
    }
    nt_sig_free(x);
    nt_sig_free(y);
}

#define SAME(a, b) same((a), (b), __LINE__)

/* Numba's signature syntax is the Numba adapter's (numthunk/_numba_sig.py):
   here its names are unknown, and a typedef may take one, as the adapter
   gives them; a function type where a parameter stands is C (C17 6.7.6.3). */
static void
test_numba_names_are_typedefs(void)
{
    nt_typedef td[2];
    nt_error err = {NT_OK, -1, ""};
    nt_sig *sig;
    char buf[128];

    memset(td, 0, sizeof(td));
    td[0].name = "f8";
    td[1].name = "i4";
    CHECK(nt_type_parse("double", NULL, 0, &td[0].type, &err) == 0);
    CHECK(nt_type_parse("int", NULL, 0, &td[1].type, &err) == 0);
    sig = nt_sig_parse("f8 (f8 (f8), i4 n)", td, 2, &err);
    CHECK(sig != NULL);
    if (sig != NULL) {
        nt_sig_format(sig, buf, sizeof(buf));
        CHECK(strcmp(buf, "double (double (*)(double), int)") == 0);
    }
    nt_sig_free(sig);
    RT("double (double (double), double)", "double (double (*)(double), double)");
    SAME("void (int (double))", "void (int (*)(double))");
    BAD("f8 (f8)", 0, "unknown type name 'f8'");
    BAD("void (i4, none)", 6, "unknown type name 'i4'");
}

static int
kind_of(const char *name)
{
    int i = nt_spelling_find(name, strlen(name));
    return i < 0 ? -1 : nt_spellings[i].kind;
}

static int
int_kind(size_t size, int is_signed)
{
    switch (size) {
    case 1: return is_signed ? NT_I8 : NT_U8;
    case 2: return is_signed ? NT_I16 : NT_U16;
    case 4: return is_signed ? NT_I32 : NT_U32;
    case 8: return is_signed ? NT_I64 : NT_U64;
    default: return -1;
    }
}

static void
test_types(void)
{
    size_t i, j;
    nt_type t;

    CHECK(kind_of("char") == (CHAR_MIN < 0 ? NT_I8 : NT_U8));
    CHECK(kind_of("signed char") == NT_I8);
    CHECK(kind_of("unsigned char") == NT_U8);
    CHECK(kind_of("short") == int_kind(sizeof(short), 1));
    CHECK(kind_of("unsigned short int") == int_kind(sizeof(short), 0));
    CHECK(kind_of("int") == int_kind(sizeof(int), 1));
    CHECK(kind_of("unsigned") == int_kind(sizeof(int), 0));
    CHECK(kind_of("long") == int_kind(sizeof(long), 1));
    CHECK(kind_of("unsigned long int") == int_kind(sizeof(long), 0));
    CHECK(kind_of("long long") == int_kind(sizeof(long long), 1));
    CHECK(kind_of("PY_LONG_LONG") == int_kind(sizeof(long long), 1));
    CHECK(kind_of("unsigned PY_LONG_LONG") == int_kind(sizeof(long long), 0));
    CHECK(kind_of("size_t") == int_kind(sizeof(size_t), 0));
    CHECK(kind_of("Py_ssize_t") == int_kind(sizeof(size_t), 1));
    CHECK(kind_of("npy_intp") == int_kind(sizeof(void *), 1));
    CHECK(kind_of("uintptr_t") == int_kind(sizeof(void *), 0));
    CHECK(kind_of("npy_long") == int_kind(sizeof(long), 1));
    CHECK(kind_of("bint") == int_kind(sizeof(int), 1));
    CHECK(kind_of("bool") == NT_BOOL);
    CHECK(kind_of("_Bool") == NT_BOOL);
    CHECK(kind_of("byte") == -1); /* Numba's: numthunk/_numba_sig.py */
    CHECK(kind_of("float64") == -1);
    CHECK(kind_of("npy_byte") == NT_I8);
    CHECK(kind_of("int64_t") == NT_I64);
    CHECK(kind_of("float") == NT_F32);
    CHECK(kind_of("double") == NT_F64);
    CHECK(kind_of("float complex") == NT_C64);
    CHECK(kind_of("__pyx_t_double_complex") == NT_C128);
    CHECK(kind_of("__Pyx_memviewslice") == NT_MEMVIEW);
    CHECK(kind_of("long double") == -1);
    CHECK(kind_of("__int128") == -1);
    CHECK(kind_of("float16") == -1);
    CHECK(nt_spelling_find("int", 2) == -1);  /* "in" */
    CHECK(nt_spelling_find("void", 4) == 0);

    /* every name in the table is unique and parses to its own kind */
    for (i = 0; i < nt_nspellings; i++) {
        nt_error err = {NT_OK, -1, ""};
        for (j = i + 1; j < nt_nspellings; j++)
            CHECK(strcmp(nt_spellings[i].name, nt_spellings[j].name) != 0);
        CHECK(nt_type_parse(nt_spellings[i].name, NULL, 0, &t, &err) == 0);
        if (nt_spellings[i].kind == NT_PTR)
            CHECK(t.kind == NT_PTR && t.base == NT_VOID);
        else
            CHECK(t.kind == nt_spellings[i].kind);
    }

    memset(&t, 0, sizeof(t));
    t.kind = NT_I64;
    CHECK(nt_type_size(&t) == 8 && nt_type_align(&t) == _Alignof(int64_t));
    t.kind = NT_C64;
    CHECK(nt_type_size(&t) == 8 && nt_type_align(&t) == 4);
    t.kind = NT_C128;
    CHECK(nt_type_size(&t) == 16 && nt_type_align(&t) == _Alignof(double));
    t.kind = NT_PTR;
    t.base = NT_F64;
    t.depth = 1;
    CHECK(nt_type_size(&t) == sizeof(void *));
    t.kind = NT_FNPTR;
    CHECK(nt_type_size(&t) == sizeof(void *));
    t.kind = NT_MEMVIEW;
    CHECK(nt_type_size(&t) == sizeof(nt_memviewslice));
    if (sizeof(void *) == 8)
        CHECK(sizeof(nt_memviewslice) == 208);
    t.kind = NT_BOOL;
    CHECK(nt_type_size(&t) == 1);

    CHECK(strcmp(nt_kind_name(NT_I32), "int32") == 0);
    CHECK(strcmp(nt_kind_name(NT_F64), "float64") == 0);
    CHECK(strcmp(nt_kind_name(NT_C128), "complex128") == 0);
    CHECK(strcmp(nt_kind_name(-1), "invalid") == 0);
    CHECK(strcmp(nt_kind_name(NT_KIND_COUNT), "invalid") == 0);
}

static void
test_format(void)
{
    nt_sig *sig = parse("int (double *, npy_intp, double *, void *)");
    char small[8];
    size_t need;
    nt_type t;

    if (sig == NULL) {
        CHECK(0);
        return;
    }
    need = nt_sig_format(sig, NULL, 0);
    CHECK(need == strlen("int (double *, npy_intp, double *, void *)"));
    memset(small, 'x', sizeof(small));
    CHECK(nt_sig_format(sig, small, sizeof(small)) == need);
    CHECK(strcmp(small, "int (do") == 0);
    CHECK(nt_sig_format(sig, small, 1) == need && small[0] == '\0');
    nt_sig_free(sig);

    /* hand-built types without a spelling print the kind's C name */
    memset(&t, 0, sizeof(t));
    t.kind = NT_I64;
    {
        char buf[32];
        nt_type_format(&t, buf, sizeof(buf));
        CHECK(strcmp(buf, sizeof(intptr_t) == 8 ? "intptr_t" : "int64_t") == 0);
    }
    t.kind = NT_PTR;
    t.base = NT_F64;
    t.depth = 2;
    t.cflags = NT_CONST_BASE;
    {
        char buf[64];
        nt_type_format(&t, buf, sizeof(buf));
        CHECK(strcmp(buf, "const double **") == 0);
    }
}

static void
test_sticky_error(void)
{
    nt_error err = {NT_OK, -1, ""};

    CHECK(nt_sig_parse("double (FLOAT64)", NULL, 0, &err) == NULL);
    CHECK(nt_sig_parse("int (int, ...)", NULL, 0, &err) == NULL);
    CHECK(strstr(err.msg, "FLOAT64") != NULL && err.column == 8);
    CHECK(nt_fail(&err, NT_ERR_TYPE, 3, "later %d", 1) == NT_ERR_TYPE);
    CHECK(err.status == NT_ERR_VALUE);
    CHECK(nt_fail(NULL, NT_ERR_OS, 0, "no err") == NT_ERR_OS);
}

/* Text cut to fit says so (parse/declarator.c nt_format_cut, nt_mark_cut): whole up to
   n - 1 bytes, then its first n - 4 and "..."; buffers of 0 to 3 bytes get
   no dots (no room), and are never written past. */
static void
test_cut_marks(void)
{
    char buf[16];
    for (size_t n = 0; n <= 12; n++) {
        for (size_t len = 0; len <= 12; len++) {
            char text[16];
            memset(text, 'a', len);
            text[len] = '\0';
            memset(buf, '#', sizeof(buf));
            size_t need = nt_format_cut(buf, n, "%s", text);
            CHECK(need == len);
            CHECK(buf[n] == '#' && buf[15] == '#');       /* nothing past n bytes */
            if (n == 0)
                continue;
            if (len < n) {
                CHECK(strcmp(buf, text) == 0);
            } else if (n >= 4) {
                CHECK(strlen(buf) == n - 1);
                CHECK(strncmp(buf, text, n - 4) == 0 && strcmp(buf + n - 4, "...") == 0);
            } else {
                CHECK(strlen(buf) == n - 1 && strncmp(buf, text, n - 1) == 0);
            }
        }
    }
    /* a formatter's own cut, marked after it */
    nt_sig *sig = parse("double (double, double, double)");
    CHECK(sig != NULL);
    size_t need = nt_sig_format(sig, buf, 16);
    CHECK(need == 31 && strlen(buf) == 15);
    nt_mark_cut(buf, 16, need);
    CHECK(strcmp(buf, "double (doub...") == 0);
    char whole[32];
    need = nt_sig_format(sig, whole, sizeof(whole)); /* fits: left alone */
    nt_mark_cut(whole, sizeof(whole), need);
    CHECK(strcmp(whole, "double (double, double, double)") == 0);
    nt_sig_free(sig);
}

/* The struct name pool (parse/declarator.c intern_tag, nt_tag_name): 4096 names for
   the process. Filled here, last (the pool never empties): every slot
   names its struct, the index one past the pool and those of the spelling
   table name none, and a new name past the limit fails with a memory
   error while a kept one still parses. */
static void
test_tag_pool(void)
{
    enum { POOL = 4096 };
    char src[64];
    nt_error err = {NT_OK, -1, ""};
    nt_sig *sig;
    int k, added = 0;
    unsigned last = 0;

    for (k = 0; k <= POOL; k++) {
        snprintf(src, sizeof(src), "void (struct Pool%d *)", k);
        sig = nt_sig_parse(src, NULL, 0, &err);
        if (sig == NULL)
            break;
        last = sig->args[0].spelling;
        nt_sig_free(sig);
        added++;
    }
    CHECK(added >= 1 && added < POOL + 1);
    CHECK(err.status == NT_ERR_MEMORY && err.column == 13);     /* under the name */
    CHECK(strcmp(err.msg, "too many distinct struct names (at most 4096)") == 0);
    CHECK(last == (unsigned)nt_nspellings + POOL - 1);
    snprintf(src, sizeof(src), "struct Pool%d", added - 1);
    CHECK(nt_tag_name(last) != NULL && strcmp(nt_tag_name(last), src) == 0);
    for (k = 0; k < POOL; k++)
        CHECK(nt_tag_name((unsigned)nt_nspellings + (unsigned)k) != NULL);
    CHECK(nt_tag_name((unsigned)nt_nspellings + POOL) == NULL);
    CHECK(nt_tag_name((unsigned)nt_nspellings + POOL + 1) == NULL);
    CHECK(nt_tag_name(UINT16_MAX) == NULL);
    CHECK(nt_tag_name((unsigned)nt_nspellings - 1) == NULL);
    CHECK(nt_tag_name(0) == NULL);
    err.status = NT_OK;
    sig = nt_sig_parse("void (struct Pool0 *, union Pool0 *)", NULL, 0, &err);
    CHECK(sig == NULL && err.status == NT_ERR_MEMORY);        /* union Pool0 is new */
    sig = parse("void (struct Pool0 *)");
    CHECK(sig != NULL && sig->args[0].spelling == last - (unsigned)(added - 1));
    nt_sig_free(sig);
}

int
main(void)
{
    test_round_trips();
    test_errors();
    test_depth_limits();
    test_structure();
    test_type_parse();
    test_typedefs();
    test_numba_names_are_typedefs();
    test_types();
    test_format();
    test_sticky_error();
    test_cut_marks();
    test_tag_pool();         /* last: it fills the pool */
    printf("test_sig: %d checks, %d failed\n", checks, failures);
    return failures != 0;
}
