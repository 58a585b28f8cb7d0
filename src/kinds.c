/*
 * kinds.c: the kind table, one row per value kind with every fact about it
 * as a column (numthunk.h, nt_kind_info), the way CPython's
 * Modules/_ctypes/cfield.c keeps one row per format character.
 *
 * Place in the pipeline: below everything. The parser prints a kind's C
 * text from here (parse/declarator.c), the converter reads ranges, float limits and
 * which converter a kind takes (convert/value.c), the descriptor stage decodes
 * PEP 3118 codes (convert/buffer.c) and NumPy dtypes, convert/dlpack.c the DLPack codes,
 * plan/plan.c the cell sizes, libffi its types (engine/ffi.c), the handler
 * planner the C caller's widening of narrow ints (engine/route.c), and the
 * Python package every name (python/module.c exports the rows as _core.kinds).
 *
 * Widths, alignments and limits come from this compiler: sizeof, _Alignof,
 * <stdint.h>, <float.h>. A PEP 3118 code's native size is the size of the
 * C type it names (struct module: 'l' is C long), so a kind lists the
 * native codes whose C type has its width and signedness; standard sizes
 * ('=', '<', '>', '!') are fixed by the struct module. No Python here:
 * the parser builds and fuzzes with this file alone (and libffi).
 */
#include "numthunk.h"
#include "../numthunk/include/numthunk/dlpack.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <string.h>

/* libffi's type of each kind, NULL in a build without libffi
   (engine/ffi.c, NT_WITHOUT_LIBFFI). */
#ifdef NT_WITHOUT_LIBFFI
#define FFI_T(name) NULL
#else
#include <ffi.h>
#define FFI_T(name) (&ffi_type_##name)
#endif

_Static_assert(sizeof(_Bool) == 1, "_Bool width");
_Static_assert(sizeof(float) == 4 && sizeof(double) == 8, "IEEE floats");
_Static_assert(FLT_MANT_DIG == 24 && FLT_MAX_EXP == 128, "IEEE single");
_Static_assert(NT_KIND_COUNT <= 32, "a kind set fits in 32 bits");
_Static_assert(sizeof(NT_FMT_CODES) - 1 <= 32, "a code set fits in 32 bits");

/* ------------------------------------------------------------------------ */
/* PEP 3118 codes                                                            */

/* Bits of the codes of NT_FMT_CODES, in its order. */
// clang-format off
enum {
    F_BOOL = 1u << 0, F_c = 1u << 1, F_b = 1u << 2, F_B = 1u << 3,
    F_h = 1u << 4, F_H = 1u << 5, F_i = 1u << 6, F_I = 1u << 7,
    F_l = 1u << 8, F_L = 1u << 9, F_q = 1u << 10, F_Q = 1u << 11,
    F_n = 1u << 12, F_N = 1u << 13, F_f = 1u << 14, F_d = 1u << 15
};
// clang-format on

#define IF(cond, bits) ((cond) ? (uint32_t)(bits) : 0u)
#define CHAR_SIGNED    (CHAR_MIN < 0)

/* Native codes of an integer of n bytes: those whose C type is that wide
   ('c' is char, of char's signedness; 'n' and 'N' are ssize_t and size_t). */
#define NATIVE_S(n)                                                                       \
    (IF(CHAR_SIGNED && (n) == 1, F_c) | IF((n) == 1, F_b) | IF(sizeof(short) == (n), F_h) \
     | IF(sizeof(int) == (n), F_i) | IF(sizeof(long) == (n), F_l)                         \
     | IF(sizeof(long long) == (n), F_q) | IF(sizeof(size_t) == (n), F_n))
#define NATIVE_U(n)                                                                        \
    (IF(!CHAR_SIGNED && (n) == 1, F_c) | IF((n) == 1, F_B) | IF(sizeof(short) == (n), F_H) \
     | IF(sizeof(int) == (n), F_I) | IF(sizeof(long) == (n), F_L)                          \
     | IF(sizeof(long long) == (n), F_Q) | IF(sizeof(size_t) == (n), F_N))
/* Standard sizes: b B c 1, h H 2, i I l L 4, q Q 8 ('n', 'N' are native
   only). */
#define STD_S(n)                                                              \
    (IF(CHAR_SIGNED && (n) == 1, F_c) | IF((n) == 1, F_b) | IF((n) == 2, F_h) \
     | IF((n) == 4, F_i | F_l) | IF((n) == 8, F_q))
#define STD_U(n)                                                               \
    (IF(!CHAR_SIGNED && (n) == 1, F_c) | IF((n) == 1, F_B) | IF((n) == 2, F_H) \
     | IF((n) == 4, F_I | F_L) | IF((n) == 8, F_Q))

/* NumPy's character for an integer dtype of n bytes: its C type's code
   (NumPy's dtype characters are the struct module's). */
#define NUMPY_S(n) ((n) == 1 ? 'b' : sizeof(short) == (n) ? 'h' : sizeof(int) == (n) ? 'i' : 'q')
#define NUMPY_U(n) ((n) == 1 ? 'B' : sizeof(short) == (n) ? 'H' : sizeof(int) == (n) ? 'I' : 'Q')

/* The one C text for a 32- or 64-bit integer: the names SciPy's
   LowLevelCallable tables compare, "int" and "intptr_t", where they have
   that width; else the exact-width name. */
#define C_INT32  (sizeof(int) == 4 ? "int" : "int32_t")
#define C_UINT32 (sizeof(int) == 4 ? "unsigned int" : "uint32_t")
#define C_INT64  (sizeof(intptr_t) == 8 ? "intptr_t" : "int64_t")
#define C_UINT64 (sizeof(uintptr_t) == 8 ? "uintptr_t" : "uint64_t")

/* ------------------------------------------------------------------------ */
/* The table                                                                 */

#ifndef NT_WITHOUT_LIBFFI
/* __Pyx_memviewslice: two pointers and 3 x 8 Py_ssize_t, passed by value.
   size and alignment are preset, so ffi_prep_cif never writes to it. */
// clang-format off
static ffi_type *memview_elements[] = {
    &ffi_type_pointer, &ffi_type_pointer,
#define E8 &ffi_type_sint64, &ffi_type_sint64, &ffi_type_sint64, \
           &ffi_type_sint64, &ffi_type_sint64, &ffi_type_sint64, \
           &ffi_type_sint64, &ffi_type_sint64
    E8, E8, E8,
#undef E8
    NULL
};
static ffi_type memview_ffi = {
    sizeof(nt_memviewslice), _Alignof(nt_memviewslice), FFI_TYPE_STRUCT,
    memview_elements
};
// clang-format on
#define MEMVIEW_FFI (&memview_ffi)
#else
#define MEMVIEW_FFI NULL
#endif

_Static_assert(sizeof(nt_memviewslice) == 2 * sizeof(void *) + 24 * sizeof(ptrdiff_t),
               "memoryview slice layout");
_Static_assert(sizeof(ptrdiff_t) == 8 || sizeof(void *) == 4,
               "memview_elements assumes 64-bit Py_ssize_t");

/* An integer kind: T its exact-width C type. */
// clang-format off
#define INT_ROW(NAME, CTEXT, T, SIGNED, LO, HI, EXT, FFI, NUMBA, CTYPES)         \
    { .name = NAME, .c_text = CTEXT, .value = NT_VALUE_INT, .is_signed = SIGNED,   \
      .size = sizeof(T), .align = _Alignof(T), .cell = 8, .ext = EXT,              \
      .min = LO, .max = HI,                                                         \
      .fmt_native = SIGNED ? NATIVE_S(sizeof(T)) : NATIVE_U(sizeof(T)),             \
      .fmt_std = SIGNED ? STD_S(sizeof(T)) : STD_U(sizeof(T)),                      \
      .dtype = SIGNED ? NUMPY_S(sizeof(T)) : NUMPY_U(sizeof(T)),                    \
      .dl_code = SIGNED ? kDLInt : kDLUInt, .dl_bits = 8 * sizeof(T),               \
      .ffi = FFI, .numba = NUMBA, .ctypes = CTYPES, .cffi = CTEXT }

const nt_kind_info nt_kinds[NT_KIND_COUNT] = {
    [NT_VOID] = { .name = "void", .c_text = "void", .size = 0, .align = 1, .cell = 8,
                  .ffi = FFI_T(void), .numba = "void", .cffi = "void" },
    [NT_BOOL] = { .name = "bool", .c_text = "bool", .value = NT_VALUE_BOOL,
                  .size = sizeof(_Bool), .align = _Alignof(_Bool), .cell = 8,
                  .ext = NT_EXT_ZX8, .min = 0, .max = 1,
                  .fmt_native = F_BOOL, .fmt_std = F_BOOL, .dtype = '?',
                  .dl_code = kDLBool, .dl_bits = 8, .ffi = FFI_T(uint8),
                  .numba = "boolean", .ctypes = "c_bool", .cffi = "_Bool" },
    [NT_I8] = INT_ROW("int8", "int8_t", int8_t, 1, INT8_MIN, INT8_MAX, NT_EXT_SX8,
                      FFI_T(sint8), "int8", "c_int8"),
    [NT_U8] = INT_ROW("uint8", "uint8_t", uint8_t, 0, 0, UINT8_MAX, NT_EXT_ZX8,
                      FFI_T(uint8), "uint8", "c_uint8"),
    [NT_I16] = INT_ROW("int16", "int16_t", int16_t, 1, INT16_MIN, INT16_MAX, NT_EXT_SX16,
                       FFI_T(sint16), "int16", "c_int16"),
    [NT_U16] = INT_ROW("uint16", "uint16_t", uint16_t, 0, 0, UINT16_MAX, NT_EXT_ZX16,
                       FFI_T(uint16), "uint16", "c_uint16"),
    [NT_I32] = INT_ROW("int32", C_INT32, int32_t, 1, INT32_MIN, INT32_MAX, NT_EXT_NONE,
                       FFI_T(sint32), "int32", "c_int32"),
    [NT_U32] = INT_ROW("uint32", C_UINT32, uint32_t, 0, 0, UINT32_MAX, NT_EXT_NONE,
                       FFI_T(uint32), "uint32", "c_uint32"),
    [NT_I64] = INT_ROW("int64", C_INT64, int64_t, 1, INT64_MIN, INT64_MAX, NT_EXT_NONE,
                       FFI_T(sint64), "int64", "c_int64"),
    [NT_U64] = INT_ROW("uint64", C_UINT64, uint64_t, 0, 0, UINT64_MAX, NT_EXT_NONE,
                       FFI_T(uint64), "uint64", "c_uint64"),
    [NT_F32] = { .name = "float32", .c_text = "float", .value = NT_VALUE_REAL,
                 .is_signed = 1, .size = sizeof(float), .align = _Alignof(float), .cell = 8,
                 .part = NT_F32,
                 /* FLT_MAX plus half an ulp: ties round to even, which is 2^128 */
                 .fmax = FLT_MAX, .fover = 0x1.ffffffp+127,
                 .fmt_native = F_f, .fmt_std = F_f, .dtype = 'f',
                 .dl_code = kDLFloat, .dl_bits = 32, .ffi = FFI_T(float),
                 .numba = "float32", .ctypes = "c_float", .cffi = "float" },
    [NT_F64] = { .name = "float64", .c_text = "double", .value = NT_VALUE_REAL,
                 .is_signed = 1, .size = sizeof(double), .align = _Alignof(double), .cell = 8,
                 .part = NT_F64,
                 .fmax = DBL_MAX, .fover = HUGE_VAL,
                 .fmt_native = F_d, .fmt_std = F_d, .dtype = 'd',
                 .dl_code = kDLFloat, .dl_bits = 64, .ffi = FFI_T(double),
                 .numba = "float64", .ctypes = "c_double", .cffi = "double" },
    [NT_C64] = { .name = "complex64", .c_text = "float complex", .value = NT_VALUE_COMPLEX,
                 .is_signed = 1, .size = 2 * sizeof(float), .align = _Alignof(float),
                 .cell = 8, .part = NT_F32, .fmax = FLT_MAX, .fover = 0x1.ffffffp+127,
                 .fmt_native = F_f, .fmt_std = F_f, .dtype = 'F',
                 .dl_code = kDLComplex, .dl_bits = 64, .ffi = FFI_T(complex_float),
                 .numba = "complex64", .cffi = "float _Complex" },
    [NT_C128] = { .name = "complex128", .c_text = "double complex",
                  .value = NT_VALUE_COMPLEX, .is_signed = 1, .size = 2 * sizeof(double),
                  .align = _Alignof(double), .cell = 16, .part = NT_F64,
                  .fmax = DBL_MAX, .fover = HUGE_VAL,
                  .fmt_native = F_d, .fmt_std = F_d, .dtype = 'D',
                  .dl_code = kDLComplex, .dl_bits = 128, .ffi = FFI_T(complex_double),
                  .numba = "complex128", .cffi = "double _Complex" },
    [NT_PTR] = { .name = "pointer", .value = NT_VALUE_POINTER, .size = sizeof(void *),
                 .align = _Alignof(void *), .cell = 8, .ffi = FFI_T(pointer),
                 .numba = "voidptr", .ctypes = "c_void_p", .cffi = "void *" },
    [NT_FNPTR] = { .name = "function pointer", .value = NT_VALUE_POINTER,
                   .size = sizeof(void (*)(void)), .align = _Alignof(void (*)(void)),
                   .cell = 8, .ffi = FFI_T(pointer) },
    [NT_MEMVIEW] = { .name = "memoryview slice", .c_text = "__Pyx_memviewslice",
                     .value = NT_VALUE_MEMVIEW, .size = sizeof(nt_memviewslice),
                     .align = _Alignof(nt_memviewslice), .cell = sizeof(nt_memviewslice),
                     .ffi = MEMVIEW_FFI },
    [NT_DLTENSOR] = { .name = "DLTensor", .c_text = "DLTensor", .size = NT_DLTENSOR_SIZE,
                      .align = _Alignof(void *), .cell = 8 },
};
// clang-format on

/* ------------------------------------------------------------------------ */
/* Reading it                                                                */

static const nt_kind_info *row(uint8_t kind) /* nt_type's kind: never negative */
{
    return &nt_kinds[kind < NT_KIND_COUNT ? kind : NT_VOID];
}

size_t nt_type_size(const nt_type *t)
{
    return row(t->kind)->size;
}

size_t nt_type_align(const nt_type *t)
{
    return row(t->kind)->align;
}

size_t nt_cell_size(const nt_type *t)
{
    return row(t->kind)->cell;
}

const char *nt_kind_name(int kind)
{
    if (kind < 0 || kind >= NT_KIND_COUNT)
        return "invalid";
    return nt_kinds[kind].name;
}

uint32_t nt_fmt_bit(char code)
{
    const char *p = code != '\0' ? strchr(NT_FMT_CODES, code) : NULL;
    return p != NULL ? 1u << (p - NT_FMT_CODES) : 0;
}

/* ------------------------------------------------------------------------ */
/* Its inverses, for the bind path                                           */

/* The kind of a PEP 3118 code, by [standard][complex][code], and of a value
   class, signedness and size, by [value][signed][size]: the rows' columns
   read the other way, so that decoding a buffer's format or a NumPy
   dtype is one load, not a scan of the table. 0 (NT_VOID) for none. */
static uint8_t by_code[2][2][256]; /* every byte a code: no bound to check */
static uint8_t by_class[NT_VALUE_MEMVIEW + 1][2][17];
static int inverses_built;

void nt_kinds_ready(void)
{
    if (inverses_built)
        return;
    /* the last row written wins: go backwards, so that the first row that
       lists a code (or has a class and size) is the one found */
    for (int k = NT_C128; k >= NT_BOOL; k--) {
        const nt_kind_info *r = &nt_kinds[k];
        int cx = r->value == NT_VALUE_COMPLEX;
        for (const char *c = NT_FMT_CODES; *c != '\0'; c++) {
            if (r->fmt_native & nt_fmt_bit(*c))
                by_code[0][cx][(unsigned char)*c] = (uint8_t)k;
            if (r->fmt_std & nt_fmt_bit(*c))
                by_code[1][cx][(unsigned char)*c] = (uint8_t)k;
        }
        if (r->size < sizeof(by_class[0][0]))
            by_class[r->value][r->is_signed][r->size] = (uint8_t)k;
    }
    inverses_built = 1;
}

int nt_kind_of_format(char code, int standard, int is_complex)
{
    nt_kinds_ready();
    return by_code[standard != 0][is_complex != 0][(unsigned char)code];
}

int nt_kind_find(int value, int is_signed, size_t size)
{
    nt_kinds_ready();
    if (value < 0 || value > NT_VALUE_MEMVIEW || size >= sizeof(by_class[0][0]))
        return NT_VOID;
    return by_class[value][is_signed != 0][size];
}
