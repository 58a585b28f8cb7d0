/*
 * fuzz_sig.c: fuzzing the first pipeline stage (parse/declarator.c, parse/spellings.c, kinds.c).
 *
 * Properties checked on arbitrary bytes: parsing never crashes or leaks;
 * a failure carries a status, a message and a column inside the input; a
 * success formats to a canonical string that parses back (without the
 * typedefs, which the formatter resolves) to an equal signature and
 * formats to the same string again; copies compare equal.
 *
 * libFuzzer:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Isrc \
 *       src/kinds.c src/parse/spellings.c src/parse/declarator.c tests/c/fuzz_sig.c -o fuzz_sig -lffi
 * Without clang (CI), a random token-soup driver:
 *   gcc -g -O1 -DNT_FUZZ_STANDALONE -fsanitize=address,undefined -Isrc \
 *       src/kinds.c src/parse/spellings.c src/parse/declarator.c tests/c/fuzz_sig.c -o fuzz_sig -lffi
 *   ./fuzz_sig [iterations] [seed]
 */
#include "numthunk.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(cond)                                                        \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "fuzz_sig.c:%d: property failed: %s\n",          \
                    __LINE__, #cond);                                        \
            abort();                                                         \
        }                                                                    \
    } while (0)

static nt_typedef typedefs[4];
static int typedefs_ready;

static void
init_typedefs(void)
{
    static const char *const names[4] = {
        "FLOAT64", "__pyx_t_5numpy_float64_t", "dptr", "cdptr"
    };
    static const char *const texts[4] = {
        "double", "double", "double *", "const double *const"
    };
    int i;

    for (i = 0; i < 4; i++) {
        nt_error err = {NT_OK, -1, ""};
        typedefs[i].name = names[i];
        REQUIRE(nt_type_parse(texts[i], NULL, 0, &typedefs[i].type,
                              &err) == 0);
    }
    typedefs_ready = 1;
}

static char *
format_sig(const nt_sig *sig)
{
    size_t need = nt_sig_format(sig, NULL, 0);
    char *buf = malloc(need + 1);

    REQUIRE(buf != NULL);
    REQUIRE(nt_sig_format(sig, buf, need + 1) == need);
    REQUIRE(strlen(buf) == need);
    return buf;
}

static void
check_failure(const nt_error *err, size_t len)
{
    REQUIRE(err->status != NT_OK);
    REQUIRE(err->msg[0] != '\0');
    if (err->status == NT_ERR_VALUE)
        REQUIRE(err->column >= 0 && (size_t)err->column <= len);
}

static void
check_sig(const char *src, size_t len)
{
    nt_error err = {NT_OK, -1, ""};
    nt_sig *sig = nt_sig_parse(src, typedefs, 4, &err), *back, *copy;
    char *text, *again;

    if (sig == NULL) {
        check_failure(&err, len);
        return;
    }
    REQUIRE(err.status == NT_OK);
    text = format_sig(sig);
    back = nt_sig_parse(text, NULL, 0, &err);
    if (back == NULL)
        fprintf(stderr, "input \"%s\"\nformatted \"%s\" fails: %s\n", src,
                text, err.msg);
    REQUIRE(back != NULL);
    if (!nt_sig_equal(sig, back))
        fprintf(stderr, "input \"%s\"\nformatted \"%s\" differs\n", src,
                text);
    REQUIRE(nt_sig_equal(sig, back));
    again = format_sig(back);
    REQUIRE(strcmp(text, again) == 0);
    copy = nt_sig_copy(sig);
    REQUIRE(copy != NULL && nt_sig_equal(sig, copy));
    nt_sig_free(copy);
    nt_sig_free(back);
    nt_sig_free(sig);
    free(text);
    free(again);
}

static void
check_type(const char *src, size_t len)
{
    nt_error err = {NT_OK, -1, ""};
    nt_type t, back;
    size_t need;
    char *text;

    if (nt_type_parse(src, typedefs, 4, &t, &err) != 0) {
        check_failure(&err, len);
        REQUIRE(t.fn == NULL);
        return;
    }
    need = nt_type_format(&t, NULL, 0);
    text = malloc(need + 1);
    REQUIRE(text != NULL);
    nt_type_format(&t, text, need + 1);
    REQUIRE(nt_type_parse(text, NULL, 0, &back, &err) == 0);
    REQUIRE(nt_type_equal(&t, &back));
    REQUIRE(nt_type_size(&t) == nt_type_size(&back));
    REQUIRE(nt_type_align(&t) != 0);
    nt_sig_free(t.fn);
    nt_sig_free(back.fn);
    free(text);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *src = malloc(size + 1);
    size_t len;

    if (src == NULL)
        return 0;
    if (!typedefs_ready)
        init_typedefs();
    if (size > 0)
        memcpy(src, data, size);
    src[size] = '\0';
    len = strlen(src);
    check_sig(src, len);
    check_type(src, len);
    free(src);
    return 0;
}

#ifdef NT_FUZZ_STANDALONE

/* Two kinds of input: signatures generated from the grammar (most parse,
   and reach deep nesting, typedefs, function pointers and const placement), and
   soups of the grammar's tokens; either is then mutated now and then. */
static const char *const vocabulary[] = {
    "double", "float", "int", "char", "short", "long", "signed", "unsigned",
    "void", "const", "complex", "_Complex", "bool", "_Bool", "npy_intp",
    "PY_LONG_LONG", "Py_ssize_t", "__pyx_t_double_complex", "bint",
    "__Pyx_memviewslice", "int8_t", "npy_float64", "uintptr_t",
    "FLOAT64", "__pyx_t_5numpy_float64_t", "dptr", "cdptr", "struct",
    "volatile", "x", "f", "n", "_a1", "(", ")", "*", ",", "...", "[", "]",
    " ", " ", "  ", "\t", "(*)", "(void)", "double (", ", ", "*const ",
    "const *", "long long", "unsigned long long int", "long double", "$",
    "\xff", ";", "0", "double (double (*)(double), int)",
    "->", "-", ">", "double (*)(double)", "double(double)", "struct S", "union U *",
};

static const char *const typedef_names[] = {
    "FLOAT64", "__pyx_t_5numpy_float64_t", "dptr", "cdptr"
};

static const char *const param_names[] = { "x", "n", "data", "_p1", "cb" };

static uint64_t rng_state;

static uint64_t
rng(void)
{
    /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1DULL;
}

typedef struct {
    char *buf;
    size_t cap;
    size_t len;
} text;

static void
emit(text *t, const char *s)
{
    size_t n = strlen(s);
    if (t->len + n + 1 > t->cap)
        n = t->cap - t->len - 1;
    memcpy(t->buf + t->len, s, n);
    t->len += n;
    t->buf[t->len] = '\0';
}

static void
space(text *t)
{
    static const char *const spaces[] = { "", " ", " ", "  ", "\t", "\n" };
    emit(t, spaces[rng() % 6]);
}

static void gen_params(text *t, int nest);

static void
gen_type(text *t)
{
    int k = (int)(rng() % 20), stars, i;

    if (rng() % 4 == 0) {
        emit(t, "const ");
    }
    if (k == 1) {
        emit(t, typedef_names[rng() % 4]);
    } else {
        emit(t, nt_spellings[rng() % nt_nspellings].name);
    }
    if (rng() % 6 == 0)
        emit(t, " const");
    space(t);
    stars = rng() % 3 == 0 ? (int)(rng() % 4) : 0;
    if (rng() % 500 == 0)
        stars = 250 + (int)(rng() % 10);
    for (i = 0; i < stars; i++) {
        emit(t, "*");
        if (rng() % 5 == 0)
            emit(t, "const ");
        space(t);
    }
}


static void
gen_param(text *t, int nest)
{
    gen_type(t);
    if (rng() % 5 == 0 && nest < 70) {
        emit(t, " (*");
        if (rng() % 4 == 0)
            emit(t, "const ");
        if (rng() % 2)
            emit(t, param_names[rng() % 5]);
        emit(t, ")");
        space(t);
        gen_params(t, nest + 1);
    } else if (rng() % 6 == 0 && nest < 70) {
        gen_params(t, nest + 1);       /* a function type, a pointer to one (C17 6.7.6.3) */
    } else if (rng() % 2) {
        emit(t, " ");
        emit(t, param_names[rng() % 5]);
    }
}

static void
gen_params(text *t, int nest)
{
    int n = (int)(rng() % 5), i;

    emit(t, "(");
    if (n == 0 && rng() % 2)
        emit(t, "void");
    for (i = 0; i < n; i++) {
        if (i > 0) {
            emit(t, ",");
            space(t);
        }
        gen_param(t, nest);
    }
    emit(t, ")");
}

static void
gen_sig(text *t)
{
    gen_type(t);
    if (rng() % 3 == 0)
        emit(t, " f");
    space(t);
    gen_params(t, (int)(rng() % 80));
    space(t);
}

static void
gen_soup(text *t)
{
    size_t ntok = 1 + rng() % 24, k;
    size_t nvocab = sizeof(vocabulary) / sizeof(vocabulary[0]);

    for (k = 0; k < ntok; k++) {
        emit(t, vocabulary[rng() % nvocab]);
        if (rng() % 2)
            emit(t, " ");
    }
}

static void
mutate(text *t)
{
    size_t nvocab = sizeof(vocabulary) / sizeof(vocabulary[0]);
    size_t at, n;

    if (t->len == 0)
        return;
    at = rng() % t->len;
    switch (rng() % 4) {
    case 0:     /* one random byte */
        t->buf[at] = (char)(rng() & 0xff);
        break;
    case 1:     /* cut a span */
        n = rng() % (t->len - at + 1);
        memmove(t->buf + at, t->buf + at + n, t->len - at - n + 1);
        t->len -= n;
        break;
    case 2: {   /* insert a token */
        const char *w = vocabulary[rng() % nvocab];
        n = strlen(w);
        if (t->len + n + 1 > t->cap)
            return;
        memmove(t->buf + at + n, t->buf + at, t->len - at + 1);
        memcpy(t->buf + at, w, n);
        t->len += n;
        break;
    }
    default:    /* truncate */
        t->len = at;
        t->buf[at] = '\0';
        break;
    }
}

int
main(int argc, char **argv)
{
    unsigned long long iterations = argc > 1 ? strtoull(argv[1], NULL, 10)
                                             : 1000000ULL;
    unsigned long long seed = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
    unsigned long long it, parsed = 0;
    static char storage[16384];

    if (!typedefs_ready)
        init_typedefs();
    rng_state = seed * 0x9E3779B97F4A7C15ULL + 1;
    for (it = 0; it < iterations; it++) {
        text t = { storage, sizeof(storage), 0 };
        nt_error err = {NT_OK, -1, ""};
        nt_sig *sig;
        int m;

        storage[0] = '\0';
        if (rng() % 4 == 0)
            gen_soup(&t);
        else
            gen_sig(&t);
        for (m = (int)(rng() % 4) - 1; m > 0; m--)
            mutate(&t);
        LLVMFuzzerTestOneInput((const uint8_t *)t.buf, t.len);

        sig = nt_sig_parse(t.buf, typedefs, 4, &err);
        if (sig != NULL)
            parsed++;
        nt_sig_free(sig);
    }
    printf("fuzz_sig: %llu inputs, %llu parsed as signatures, seed %llu\n",
           iterations, parsed, seed);
    return 0;
}

#endif /* NT_FUZZ_STANDALONE */
