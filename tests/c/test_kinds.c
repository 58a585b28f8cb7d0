/*
 * test_kinds.c: the kind table (src/kinds.c) row by row, against oracles
 * that are not the table: libffi's own types, the C compiler's sizes and
 * signedness of the C types the PEP 3118 codes name, float rounding done
 * by the compiler, the parser (every row's C text parses back to its
 * kind), and the kind macros of numthunk.h. The columns the Python
 * package reads are checked against ctypes, cffi, Numba, NumPy and a C
 * probe by tests/test_types.py, which builds and runs this file.
 *
 *   gcc -Wall -Wextra -Werror -std=c11 -Isrc src/kinds.c src/parse/spellings.c \
 *       src/parse/declarator.c tests/c/test_kinds.c -o test_kinds -lffi
 */
#include "numthunk.h"
#include "../numthunk/include/numthunk/dlpack.h"

#include <ffi.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int failures;
static int checks;

#define CHECK(cond, ...) check((cond), __LINE__, __VA_ARGS__)

static void
check(int ok, int line, const char *fmt, ...)
{
    checks++;
    if (ok)
        return;
    failures++;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "test_kinds.c:%d: ", line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static int
is_scalar(int k)
{
    return k >= NT_BOOL && k <= NT_C128;
}

/* libffi's types are an oracle for size and alignment. */
static void
test_ffi(void)
{
    for (int k = 0; k < NT_KIND_COUNT; k++) {
        const nt_kind_info *r = &nt_kinds[k];
        if (r->ffi == NULL) {
            CHECK(k == NT_DLTENSOR, "%s: no libffi type", r->name);
            continue;
        }
        if (k == NT_VOID) {
            CHECK(r->ffi->type == FFI_TYPE_VOID, "void: libffi type");
            continue;
        }
        CHECK(r->ffi->size == r->size && r->ffi->alignment == r->align,
              "%s: libffi says size %zu align %u, the table %u %u", r->name,
              r->ffi->size, (unsigned)r->ffi->alignment, r->size, r->align);
    }
    CHECK(nt_kinds[NT_I8].ffi == &ffi_type_sint8 && nt_kinds[NT_U8].ffi == &ffi_type_uint8
          && nt_kinds[NT_I16].ffi == &ffi_type_sint16
          && nt_kinds[NT_U16].ffi == &ffi_type_uint16
          && nt_kinds[NT_I32].ffi == &ffi_type_sint32
          && nt_kinds[NT_U32].ffi == &ffi_type_uint32
          && nt_kinds[NT_I64].ffi == &ffi_type_sint64
          && nt_kinds[NT_U64].ffi == &ffi_type_uint64,
          "integers: libffi's type of their signedness");
}

/* Classes, macros, cells, widening, limits. */
static void
test_columns(void)
{
    for (int k = 0; k < NT_KIND_COUNT; k++) {
        const nt_kind_info *r = &nt_kinds[k];
        int v = r->value;
        CHECK(strcmp(nt_kind_name(k), r->name) == 0, "%s: nt_kind_name", r->name);
        for (int j = 0; j < k; j++)
            CHECK(strcmp(nt_kinds[j].name, r->name) != 0, "%s: named twice", r->name);
        CHECK(NT_IS_INT(k) == (v == NT_VALUE_BOOL || v == NT_VALUE_INT), "%s: NT_IS_INT",
              r->name);
        CHECK(NT_IS_FLOAT(k) == (v == NT_VALUE_REAL), "%s: NT_IS_FLOAT", r->name);
        CHECK(NT_IS_COMPLEX(k) == (v == NT_VALUE_COMPLEX), "%s: NT_IS_COMPLEX", r->name);
        CHECK(is_scalar(k) == (v >= NT_VALUE_BOOL && v <= NT_VALUE_COMPLEX),
              "%s: scalar kinds are contiguous", r->name);
        if (v != NT_VALUE_NONE)
            CHECK(r->cell >= r->size && r->cell % 8 == 0, "%s: cell of %u bytes",
                  r->name, r->cell);
        nt_type t = { (uint8_t)k, 0, 0, 0, 0, NULL };
        CHECK(nt_cell_size(&t) == r->cell && nt_type_size(&t) == r->size
              && nt_type_align(&t) == r->align, "%s: accessors", r->name);
        /* a C caller widens ints narrower than 32 bits by their sign */
        int want = NT_EXT_NONE;
        if (v == NT_VALUE_BOOL || (v == NT_VALUE_INT && r->size < 4))
            want = r->size == 1 ? (r->is_signed ? NT_EXT_SX8 : NT_EXT_ZX8)
                                : (r->is_signed ? NT_EXT_SX16 : NT_EXT_ZX16);
        CHECK(r->ext == want, "%s: ext %d, want %d", r->name, r->ext, want);
        if (v == NT_VALUE_INT) {
            int bits = 8 * r->size;
            uint64_t max = r->is_signed ? (UINT64_MAX >> (65 - bits)) : (UINT64_MAX >> (64 - bits));
            int64_t min = r->is_signed ? -(int64_t)max - 1 : 0;
            CHECK(r->max == max && r->min == min, "%s: range", r->name);
        }
        if (v == NT_VALUE_REAL || v == NT_VALUE_COMPLEX) {
            const nt_kind_info *p = &nt_kinds[r->part];
            CHECK(p->value == NT_VALUE_REAL && p->part == r->part
                  && p->size * (v == NT_VALUE_COMPLEX ? 2 : 1) == r->size
                  && p->align == r->align && p->fmax == r->fmax && p->fover == r->fover,
                  "%s: parts", r->name);
        }
    }
    CHECK(nt_kinds[NT_BOOL].min == 0 && nt_kinds[NT_BOOL].max == 1, "bool: range");
    /* a kind past the table reads as void: its accessors and its name */
    for (int k = NT_KIND_COUNT; k <= UINT8_MAX; k++) {
        nt_type t = { (uint8_t)k, 0, 0, 0, 0, NULL };
        const nt_kind_info *v = &nt_kinds[NT_VOID];
        CHECK(nt_cell_size(&t) == v->cell && nt_type_size(&t) == v->size
                  && nt_type_align(&t) == v->align && strcmp(nt_kind_name(k), "invalid") == 0,
              "kind %d: past the table", k);
    }
    CHECK(strcmp(nt_kind_name(-1), "invalid") == 0, "kind -1: invalid");
    /* the compiler rounds: fover is where a double becomes an infinite float */
    volatile double over = nt_kinds[NT_F32].fover;
    volatile double below = nextafter(over, 0.0);
    CHECK(isinf((float)over) && !isinf((float)below) && (float)below == FLT_MAX,
          "float32: %a rounds to infinity, %a to FLT_MAX", over, below);
    CHECK(nt_kinds[NT_F32].fmax == FLT_MAX && nt_kinds[NT_F64].fmax == DBL_MAX,
          "float limits");
    CHECK(isinf(nt_kinds[NT_F64].fover), "float64: no finite double overflows");
}

/* Every row's C text parses back to its kind: the formatter prints it. */
static void
test_c_text(void)
{
    for (int k = 0; k < NT_KIND_COUNT; k++) {
        const nt_kind_info *r = &nt_kinds[k];
        if (r->c_text == NULL) {
            CHECK(r->value == NT_VALUE_POINTER, "%s: no C text", r->name);
            continue;
        }
        nt_type t;
        nt_error err = { NT_OK, -1, "" };
        int ok = nt_type_parse(r->c_text, NULL, 0, &t, &err) == 0;
        CHECK(ok && t.kind == k && t.depth == 0, "%s: '%s' parses to kind %d", r->name,
              r->c_text, ok ? t.kind : -1);
        char buf[64];
        if (ok && k != NT_VOID) {
            nt_type_format(&t, buf, sizeof(buf));
            CHECK(strcmp(buf, r->c_text) == 0, "%s: prints '%s'", r->name, buf);
        }
        /* a kind's name that is not C (int32, float64) is the Numba
           adapter's (numthunk/_numba_sig.py), not this parser's */
        if (is_scalar(k) && strcmp(r->name, "bool") != 0) {
            nt_error refused = { NT_OK, -1, "" };
            CHECK(nt_type_parse(r->name, NULL, 0, &t, &refused) != 0, "%s is no C type name",
                  r->name);
        }
    }
}

/* The C types the PEP 3118 codes name (the struct module's table), with
   their native sizes and signedness from this compiler. */
static const struct {
    char code;
    int value;
    size_t native, standard;     /* bytes; standard 0: native only */
    int is_signed;
} codes[] = {
    { '?', NT_VALUE_BOOL, sizeof(_Bool), 1, 0 },
    { 'c', NT_VALUE_INT, sizeof(char), 1, (char)-1 < 0 },
    { 'b', NT_VALUE_INT, sizeof(signed char), 1, 1 },
    { 'B', NT_VALUE_INT, sizeof(unsigned char), 1, 0 },
    { 'h', NT_VALUE_INT, sizeof(short), 2, 1 },
    { 'H', NT_VALUE_INT, sizeof(unsigned short), 2, 0 },
    { 'i', NT_VALUE_INT, sizeof(int), 4, 1 },
    { 'I', NT_VALUE_INT, sizeof(unsigned int), 4, 0 },
    { 'l', NT_VALUE_INT, sizeof(long), 4, 1 },
    { 'L', NT_VALUE_INT, sizeof(unsigned long), 4, 0 },
    { 'q', NT_VALUE_INT, sizeof(long long), 8, 1 },
    { 'Q', NT_VALUE_INT, sizeof(unsigned long long), 8, 0 },
    { 'n', NT_VALUE_INT, sizeof(ptrdiff_t), 0, 1 },
    { 'N', NT_VALUE_INT, sizeof(size_t), 0, 0 },
    { 'f', NT_VALUE_REAL, sizeof(float), 4, 1 },
    { 'd', NT_VALUE_REAL, sizeof(double), 8, 1 },
};

/* The kind with this class, signedness and size, found by hand. */
static int
kind_of(int value, int is_signed, size_t size)
{
    int found = NT_VOID;
    for (int k = NT_BOOL; k <= NT_C128; k++)
        if (nt_kinds[k].value == value && nt_kinds[k].is_signed == is_signed
            && nt_kinds[k].size == size) {
            CHECK(found == NT_VOID, "two kinds of class %d, %zu bytes", value, size);
            found = k;
        }
    return found;
}

static void
test_formats(void)
{
    size_t n = sizeof(codes) / sizeof(codes[0]);
    CHECK(strlen(NT_FMT_CODES) == n, "every code of NT_FMT_CODES is known here");
    for (size_t i = 0; i < n; i++) {
        for (int cplx = 0; cplx <= 1; cplx++) {
            int value = cplx ? NT_VALUE_COMPLEX : codes[i].value;
            int real = codes[i].value == NT_VALUE_REAL;
            int mult = cplx ? 2 : 1;
            int nat = cplx && !real ? NT_VOID
                      : kind_of(value, codes[i].is_signed, mult * codes[i].native);
            int std = (cplx && !real) || codes[i].standard == 0 ? NT_VOID
                      : kind_of(value, codes[i].is_signed, mult * codes[i].standard);
            CHECK(nt_kind_of_format(codes[i].code, 0, cplx) == nat,
                  "'%s%c' (native) decodes to %d, want %d", cplx ? "Z" : "", codes[i].code,
                  nt_kind_of_format(codes[i].code, 0, cplx), nat);
            CHECK(nt_kind_of_format(codes[i].code, 1, cplx) == std,
                  "'=%s%c' decodes to %d, want %d", cplx ? "Z" : "", codes[i].code,
                  nt_kind_of_format(codes[i].code, 1, cplx), std);
        }
    }
    /* and the other way: each code a row lists names that row */
    for (int k = NT_BOOL; k <= NT_C128; k++) {
        const nt_kind_info *r = &nt_kinds[k];
        int cplx = r->value == NT_VALUE_COMPLEX;
        for (const char *c = NT_FMT_CODES; *c != '\0'; c++) {
            if (r->fmt_native & nt_fmt_bit(*c))
                CHECK(nt_kind_of_format(*c, 0, cplx) == k, "%s: native '%c'", r->name, *c);
            if (r->fmt_std & nt_fmt_bit(*c))
                CHECK(nt_kind_of_format(*c, 1, cplx) == k, "%s: standard '%c'", r->name, *c);
        }
        CHECK(nt_kind_find(r->value, r->is_signed, r->size) == k, "%s: nt_kind_find", r->name);
    }
    /* the lookups' bounds: one past either end of the value classes, of
       the sizes and of the 7-bit codes finds nothing */
    CHECK(nt_kind_find(NT_VALUE_COMPLEX, nt_kinds[NT_C128].is_signed, 16) == NT_C128,
          "the largest size");
    CHECK(nt_kind_find(-1, 1, 4) == NT_VOID, "value class -1");
    for (int s = 0; s < 2; s++)
        for (size_t n = 0; n <= 17; n++)
            CHECK(nt_kind_find(NT_VALUE_MEMVIEW + 1, s, n) == NT_VOID
                      && nt_kind_find(NT_VALUE_MEMVIEW + 2, s, n) == NT_VOID,
                  "value class past NT_VALUE_MEMVIEW, size %zu", n);
    /* one past the sizes in every value class, the last row of the table
       (the end of its storage) among them: built under AddressSanitizer */
    for (int v = 0; v <= NT_VALUE_MEMVIEW; v++)
        for (int s = 0; s < 2; s++)
            CHECK(nt_kind_find(v, s, 17) == NT_VOID && nt_kind_find(v, s, (size_t)-1) == NT_VOID,
                  "value class %d, signed %d: size past the table", v, s);
    CHECK(nt_kind_of_format((char)0x80, 0, 0) == NT_VOID
              && nt_kind_of_format((char)0xFF, 1, 1) == NT_VOID, "codes past 127");
    CHECK(nt_fmt_bit('\0') == 0 && nt_fmt_bit('e') == 0 && nt_fmt_bit('P') == 0,
          "codes without a kind");
    CHECK(nt_kind_of_format('e', 0, 0) == NT_VOID && nt_kind_of_format('g', 0, 0) == NT_VOID,
          "half and long double have no kind");
}

/* DLPack: the code of the class, bits of the size (dlpack.h's enum). */
static void
test_dlpack(void)
{
    for (int k = 0; k < NT_KIND_COUNT; k++) {
        const nt_kind_info *r = &nt_kinds[k];
        int want = r->value == NT_VALUE_BOOL ? kDLBool
                 : r->value == NT_VALUE_INT ? (r->is_signed ? kDLInt : kDLUInt)
                 : r->value == NT_VALUE_REAL ? kDLFloat
                 : r->value == NT_VALUE_COMPLEX ? kDLComplex : -1;
        if (want < 0)
            CHECK(r->dl_bits == 0, "%s: no DLPack code", r->name);
        else
            CHECK(r->dl_code == want && r->dl_bits == 8 * r->size, "%s: DLPack (%d, %d)",
                  r->name, r->dl_code, r->dl_bits);
    }
}

int
main(void)
{
    test_ffi();
    test_columns();
    test_c_text();
    test_formats();
    test_dlpack();
    if (failures == 0)
        printf("all kind table tests passed (%d checks)\n", checks);
    else
        printf("%d of %d checks failed\n", failures, checks);
    return failures != 0;
}
