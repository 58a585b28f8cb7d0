/*
 * parse/spellings.c: the first stage of the pipeline, the C type model.
 *
 * Maps the C type names that SciPy, Cython and NumPy's C headers write in
 * their signature strings to value kinds of exact width (Numba's names are
 * the Numba adapter's typedefs, numthunk/_numba_sig.py). Widths come from this
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

/*
 * Index 0 is "void" so that a zeroed nt_type formats as "void". The C
 * text the formatter prints for a kind (nt_kinds[].c_text: int8_t, int,
 * double, ...) must stay in this table, so that printed text parses back.
 *
 * ssize_t, Py_ssize_t, Py_hash_t: ssize_t is POSIX, not C11; CPython and
 * POSIX both give it the width of size_t.
 * npy_bool is `unsigned char` in NumPy's C headers, so it is an 8-bit
 * unsigned integer here; C's bool and _Bool are real booleans.
 */
const nt_spelling nt_spellings[] = {
    { "void", NT_VOID },

    { "bool", NT_BOOL },
    { "_Bool", NT_BOOL },
    { "bint", S(int) },

    { "char", CHAR_KIND },
    { "signed char", NT_I8 },
    { "unsigned char", NT_U8 },

    { "short", S(short) },
    { "short int", S(short) },
    { "signed short", S(short) },
    { "signed short int", S(short) },
    { "unsigned short", U(short) },
    { "unsigned short int", U(short) },

    { "int", S(int) },
    { "signed", S(int) },
    { "signed int", S(int) },
    { "unsigned", U(int) },
    { "unsigned int", U(int) },

    { "long", S(long) },
    { "long int", S(long) },
    { "signed long", S(long) },
    { "signed long int", S(long) },
    { "unsigned long", U(long) },
    { "unsigned long int", U(long) },

    { "long long", S(long long) },
    { "long long int", S(long long) },
    { "signed long long", S(long long) },
    { "signed long long int", S(long long) },
    { "unsigned long long", U(long long) },
    { "unsigned long long int", U(long long) },
    { "PY_LONG_LONG", S(long long) },
    { "unsigned PY_LONG_LONG", U(long long) },

    { "int8_t", NT_I8 },
    { "uint8_t", NT_U8 },
    { "int16_t", NT_I16 },
    { "uint16_t", NT_U16 },
    { "int32_t", NT_I32 },
    { "uint32_t", NT_U32 },
    { "int64_t", NT_I64 },
    { "uint64_t", NT_U64 },

    { "intptr_t", S(intptr_t) },
    { "uintptr_t", U(uintptr_t) },
    { "size_t", U(size_t) },
    { "ssize_t", S(size_t) },
    { "Py_ssize_t", S(size_t) },
    { "Py_hash_t", S(size_t) },
    { "ptrdiff_t", S(ptrdiff_t) },
    { "npy_intp", S(intptr_t) },
    { "npy_uintp", U(uintptr_t) },
    { "float", NT_F32 },
    { "double", NT_F64 },

    { "float complex", NT_C64 },
    { "double complex", NT_C128 },
    { "_Complex float", NT_C64 },
    { "_Complex double", NT_C128 },
    { "float _Complex", NT_C64 },
    { "double _Complex", NT_C128 },
    { "__pyx_t_float_complex", NT_C64 },
    { "__pyx_t_double_complex", NT_C128 },

    /* NumPy C typedefs (npy_common.h) */
    { "npy_bool", NT_U8 },
    { "npy_int8", NT_I8 },
    { "npy_int16", NT_I16 },
    { "npy_int32", NT_I32 },
    { "npy_int64", NT_I64 },
    { "npy_uint8", NT_U8 },
    { "npy_uint16", NT_U16 },
    { "npy_uint32", NT_U32 },
    { "npy_uint64", NT_U64 },
    { "npy_byte", NT_I8 },
    { "npy_ubyte", NT_U8 },
    { "npy_short", S(short) },
    { "npy_ushort", U(short) },
    { "npy_int", S(int) },
    { "npy_uint", U(int) },
    { "npy_long", S(long) },
    { "npy_ulong", U(long) },
    { "npy_longlong", S(long long) },
    { "npy_ulonglong", U(long long) },
    { "npy_float", NT_F32 },
    { "npy_double", NT_F64 },
    { "npy_float32", NT_F32 },
    { "npy_float64", NT_F64 },

    { "__Pyx_memviewslice", NT_MEMVIEW },
    { "DLTensor", NT_DLTENSOR },
};

const size_t nt_nspellings = sizeof(nt_spellings) / sizeof(nt_spellings[0]);

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
