/*
 * The scalar kinds of the random-signature harnesses (tests/c/test_native.c,
 * built for Linux and macOS ABIs, and tests/c/test_win64.c, built by
 * mingw-w64 for Wine) and the C spelling of each, shared by both so that
 * their fixtures declare the same types. Include after numthunk.h.
 */
#ifndef NUMTHUNK_TEST_GENSIG_H
#define NUMTHUNK_TEST_GENSIG_H

static const int scalar_kinds[] = {
    NT_BOOL, NT_I8, NT_U8, NT_I16, NT_U16, NT_I32, NT_U32, NT_I64, NT_U64,
    NT_F32, NT_F64, NT_PTR,
};
#define NSCALAR (int)(sizeof(scalar_kinds) / sizeof(scalar_kinds[0]))

/* The C type a fixture declares for a scalar kind (or void). */
static inline const char *
ctype(int k)
{
    switch (k) {
    case NT_VOID: return "void";
    case NT_BOOL: return "_Bool";
    case NT_I8: return "signed char";
    case NT_U8: return "unsigned char";
    case NT_I16: return "short";
    case NT_U16: return "unsigned short";
    case NT_I32: return "int";
    case NT_U32: return "unsigned int";
    case NT_I64: return "long long";
    case NT_U64: return "unsigned long long";
    case NT_F32: return "float";
    case NT_F64: return "double";
    case NT_PTR: return "void *";
    default: return "?";
    }
}

/* bool and the 8- and 16-bit ints: the kinds a caller extends. */
static inline int
is_narrow(int k)
{
    return k >= NT_BOOL && k <= NT_U16;
}

#endif /* NUMTHUNK_TEST_GENSIG_H */
