/*
 * parse/spellings.c: the first stage of the pipeline, the C type model.
 *
 * Maps the type names that SciPy, Cython, NumPy and Numba write in their
 * signature strings to value kinds of exact width. Widths come from this
 * compiler's sizeof/CHAR_MIN, never from assumptions such as "long is 8",
 * so the table is right on LP64, LLP64 and ILP32 alike. What each kind is
 * (size, range, C text, names elsewhere) is the kind table's (kinds.c). No
 * Python here: parse/declarator.c, kinds.c and this file build and fuzz on their own.
 *
 * Place in the pipeline: parse, the first stage, under parse/declarator.c.
 */
#include "numthunk.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */

nt_status nt_fail(nt_error *err, nt_status status, int column, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL || err->status != NT_OK)
        return status;
    err->status = status;
    err->column = column;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    va_end(ap);
    return status;
}

/* ------------------------------------------------------------------------ */
/* Spelling table                                                            */

/* Every integer type we name must have one of the four widths we model. */
_Static_assert(sizeof(short) == 2 || sizeof(short) == 4, "short width");
_Static_assert(sizeof(int) == 2 || sizeof(int) == 4 || sizeof(int) == 8, "int width");
_Static_assert(sizeof(long) == 4 || sizeof(long) == 8, "long width");
_Static_assert(sizeof(long long) == 8, "long long width");
_Static_assert(sizeof(size_t) == 4 || sizeof(size_t) == 8, "size_t width");
_Static_assert(sizeof(intptr_t) == 4 || sizeof(intptr_t) == 8, "intptr_t width");
_Static_assert(sizeof(ptrdiff_t) == sizeof(size_t), "ptrdiff_t width");
_Static_assert(NT_KIND_COUNT <= 256, "kinds fit in a uint8_t");

/* Integer kind of a given width and signedness: constant expressions, so
   the table below stays a const initializer. */
#define SKIND(n)  ((n) == 1 ? NT_I8 : (n) == 2 ? NT_I16 : (n) == 4 ? NT_I32 : NT_I64)
#define UKIND(n)  ((n) == 1 ? NT_U8 : (n) == 2 ? NT_U16 : (n) == 4 ? NT_U32 : NT_U64)
#define S(T)      SKIND(sizeof(T))
#define U(T)      UKIND(sizeof(T))
#define CHAR_KIND (CHAR_MIN < 0 ? NT_I8 : NT_U8)

/* A name that is not C (a NumPy or Numba name): the canonical form prints
   its kind's C text (nt_kinds[].c_text: "int", "intptr_t"), the names
   SciPy's LowLevelCallable tables compare. */
#define KIND_TEXT ""

/*
 * Index 0 is "void" so that a zeroed nt_type formats as "void". The C
 * text the formatter prints for a kind (nt_kinds[].c_text: int8_t, int,
 * double, ...) must stay in this table, so that printed text parses back.
 *
 * ssize_t, Py_ssize_t, Py_hash_t: ssize_t is POSIX, not C11; CPython and
 * POSIX both give it the width of size_t.
 * npy_bool is `unsigned char` in NumPy's C headers, so it is an 8-bit
 * unsigned integer here; Numba's boolean/bool_ are real booleans.
 */
const nt_spelling nt_spellings[] = {
    { "void", NT_VOID, NULL },

    { "bool", NT_BOOL, NULL },
    { "_Bool", NT_BOOL, NULL },
    { "bint", S(int), NULL },

    { "char", CHAR_KIND, NULL },
    { "signed char", NT_I8, NULL },
    { "unsigned char", NT_U8, NULL },

    { "short", S(short), NULL },
    { "short int", S(short), NULL },
    { "signed short", S(short), NULL },
    { "signed short int", S(short), NULL },
    { "unsigned short", U(short), NULL },
    { "unsigned short int", U(short), NULL },

    { "int", S(int), NULL },
    { "signed", S(int), NULL },
    { "signed int", S(int), NULL },
    { "unsigned", U(int), NULL },
    { "unsigned int", U(int), NULL },

    { "long", S(long), NULL },
    { "long int", S(long), NULL },
    { "signed long", S(long), NULL },
    { "signed long int", S(long), NULL },
    { "unsigned long", U(long), NULL },
    { "unsigned long int", U(long), NULL },

    { "long long", S(long long), NULL },
    { "long long int", S(long long), NULL },
    { "signed long long", S(long long), NULL },
    { "signed long long int", S(long long), NULL },
    { "unsigned long long", U(long long), NULL },
    { "unsigned long long int", U(long long), NULL },
    { "PY_LONG_LONG", S(long long), NULL },
    { "unsigned PY_LONG_LONG", U(long long), NULL },

    { "int8_t", NT_I8, NULL },
    { "uint8_t", NT_U8, NULL },
    { "int16_t", NT_I16, NULL },
    { "uint16_t", NT_U16, NULL },
    { "int32_t", NT_I32, NULL },
    { "uint32_t", NT_U32, NULL },
    { "int64_t", NT_I64, NULL },
    { "uint64_t", NT_U64, NULL },

    { "intptr_t", S(intptr_t), NULL },
    { "uintptr_t", U(uintptr_t), NULL },
    { "size_t", U(size_t), NULL },
    { "ssize_t", S(size_t), NULL },
    { "Py_ssize_t", S(size_t), NULL },
    { "Py_hash_t", S(size_t), NULL },
    { "ptrdiff_t", S(ptrdiff_t), NULL },
    { "npy_intp", S(intptr_t), NULL },
    { "npy_uintp", U(uintptr_t), NULL },
    { "intp", S(intptr_t), KIND_TEXT },
    { "uintp", U(uintptr_t), KIND_TEXT },
    { "intc", S(int), KIND_TEXT },
    { "uintc", U(int), KIND_TEXT },

    { "float", NT_F32, NULL },
    { "double", NT_F64, NULL },

    { "float complex", NT_C64, NULL },
    { "double complex", NT_C128, NULL },
    { "_Complex float", NT_C64, NULL },
    { "_Complex double", NT_C128, NULL },
    { "float _Complex", NT_C64, NULL },
    { "double _Complex", NT_C128, NULL },
    { "__pyx_t_float_complex", NT_C64, NULL },
    { "__pyx_t_double_complex", NT_C128, NULL },
    { "complex64", NT_C64, KIND_TEXT },
    { "complex128", NT_C128, KIND_TEXT },

    /* NumPy scalar names and Numba type names: not C, so the canonical
       form prints the C name (SciPy compares C text) */
    { "float32", NT_F32, KIND_TEXT },
    { "float64", NT_F64, KIND_TEXT },
    { "int8", NT_I8, KIND_TEXT },
    { "int16", NT_I16, KIND_TEXT },
    { "int32", NT_I32, KIND_TEXT },
    { "int64", NT_I64, KIND_TEXT },
    { "uint8", NT_U8, KIND_TEXT },
    { "uint16", NT_U16, KIND_TEXT },
    { "uint32", NT_U32, KIND_TEXT },
    { "uint64", NT_U64, KIND_TEXT },
    { "bool_", NT_BOOL, KIND_TEXT },
    { "boolean", NT_BOOL, KIND_TEXT },
    { "byte", NT_U8, "unsigned char" },
    { "voidptr", NT_PTR, NULL }, /* void *: the parser expands it */

    /* NumPy C typedefs (npy_common.h) */
    { "npy_bool", NT_U8, NULL },
    { "npy_int8", NT_I8, NULL },
    { "npy_int16", NT_I16, NULL },
    { "npy_int32", NT_I32, NULL },
    { "npy_int64", NT_I64, NULL },
    { "npy_uint8", NT_U8, NULL },
    { "npy_uint16", NT_U16, NULL },
    { "npy_uint32", NT_U32, NULL },
    { "npy_uint64", NT_U64, NULL },
    { "npy_byte", NT_I8, NULL },
    { "npy_ubyte", NT_U8, NULL },
    { "npy_short", S(short), NULL },
    { "npy_ushort", U(short), NULL },
    { "npy_int", S(int), NULL },
    { "npy_uint", U(int), NULL },
    { "npy_long", S(long), NULL },
    { "npy_ulong", U(long), NULL },
    { "npy_longlong", S(long long), NULL },
    { "npy_ulonglong", U(long long), NULL },
    { "npy_float", NT_F32, NULL },
    { "npy_double", NT_F64, NULL },
    { "npy_float32", NT_F32, NULL },
    { "npy_float64", NT_F64, NULL },

    { "__Pyx_memviewslice", NT_MEMVIEW, NULL },
    { "DLTensor", NT_DLTENSOR, NULL },
};

const size_t nt_nspellings = sizeof(nt_spellings) / sizeof(nt_spellings[0]);

/*
 * Numba's short names of its scalar types (numba.types: f8, i4, c16, b1,
 * ...) and `none`, its void. Read after the caller's typedefs, so that a
 * typedef may still take one of these names (and a Cython module's own
 * `ctypedef ... f8` keeps its meaning); a type read from one prints as its
 * kind's C text. Numba's names that look like C typedefs (uint, ulong,
 * int_, longlong, ...) are not here: a C header's `uint` is not Numba's.
 */
static const struct {
    const char *name;
    nt_kind kind;
} numba_names[] = {
    { "none", NT_VOID }, { "b1", NT_BOOL }, { "i1", NT_I8 },  { "i2", NT_I16 },   { "i4", NT_I32 },
    { "i8", NT_I64 },    { "u1", NT_U8 },   { "u2", NT_U16 }, { "u4", NT_U32 },   { "u8", NT_U64 },
    { "f4", NT_F32 },    { "f8", NT_F64 },  { "c8", NT_C64 }, { "c16", NT_C128 },
};

int nt_numba_name_find(const char *name, size_t len)
{
    size_t i;

    if (name == NULL)
        return -1;
    for (i = 0; i < sizeof(numba_names) / sizeof(numba_names[0]); i++) {
        const char *s = numba_names[i].name;
        if (strlen(s) == len && memcmp(s, name, len) == 0) {
            const char *c = nt_kinds[numba_names[i].kind].c_text;
            return nt_spelling_find(c, strlen(c));
        }
    }
    return -1;
}

_Static_assert(sizeof(nt_spellings) / sizeof(nt_spellings[0]) <= UINT16_MAX,
               "spelling indexes fit in nt_type.spelling");

int nt_spelling_find(const char *name, size_t len)
{
    size_t i;

    if (name == NULL)
        return -1;
    for (i = 0; i < nt_nspellings; i++) {
        const char *s = nt_spellings[i].name;
        if (strlen(s) == len && memcmp(s, name, len) == 0)
            return (int)i;
    }
    return -1;
}
