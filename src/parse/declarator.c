/*
 * parse/declarator.c: the first stage of the pipeline, signature strings to nt_sig.
 *
 * Reads the C abstract declarators that SciPy (LowLevelCallable) and Cython
 * (__pyx_capi__ capsule names) use: C only. Numba's signature syntax
 * (float64, CPointer(T), FunctionType[R(A)], "(A) -> R") is translated to
 * C by the Numba adapter (numthunk/_numba_sig.py), its names as typedefs.
 * It writes them back in one canonical form. SciPy matches signatures with
 * strcmp, so the canonical form keeps the base type's spelling ("npy_intp"
 * stays "npy_intp") and follows Cython's declarator spacing: "T *",
 * "T *const", "double (*)(double)", "void (void)".
 *
 * The parser is a recursive-descent reader over a zero-terminated string;
 * it takes untrusted input (it is fuzzed), so recursion and pointer depth
 * are bounded, there are no fixed buffers that input can overflow, and every
 * error path frees what it built. Errors carry the 0-based column of the
 * offending token. No Python here.
 *
 * Place in the pipeline: parse, the first stage: text in, nt_sig out, for the
 * plan (plan/plan.c) and everything after.
 */
#include "numthunk.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NEST  64    /* nested parameter lists */
#define MAX_DEPTH 255   /* '*' levels: nt_type.depth is a uint8_t */
#define MAX_WORDS 6     /* "unsigned long long int" needs 4 */
#define MAX_ARGS  65535 /* plans index forwarded arguments with uint16 */
#define QUOTE_MAX 64    /* longest token quoted in an error message */

/* ------------------------------------------------------------------------ */
/* Tokens                                                                    */

enum {
    T_END,
    T_IDENT,
    T_LPAREN,
    T_RPAREN,
    T_STAR,
    T_COMMA,
    T_ELLIPSIS,
    T_LBRACKET,
    T_RBRACKET,
    T_ARROW, /* C's "->", read whole so that a message quotes it whole */
    T_OTHER
};

typedef struct {
    int kind;
    size_t start;
    size_t len;
} token;

typedef struct {
    const char *src;
    size_t pos;
    const nt_typedef *typedefs;
    size_t ntypedefs;
    nt_error *err;
    int nest;
} parser;

static int is_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static int is_ident_start(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int is_ident_char(unsigned char c)
{
    return is_ident_start(c) || (c >= '0' && c <= '9');
}

static token peek(const parser *p)
{
    const char *s = p->src;
    size_t i = p->pos;
    token t;

    while (is_space((unsigned char)s[i]))
        i++;
    t.start = i;
    t.len = 1;
    switch (s[i]) {
    case '\0':
        t.kind = T_END;
        t.len = 0;
        return t;
    case '(': t.kind = T_LPAREN; return t;
    case ')': t.kind = T_RPAREN; return t;
    case '*': t.kind = T_STAR; return t;
    case ',': t.kind = T_COMMA; return t;
    case '[': t.kind = T_LBRACKET; return t;
    case ']': t.kind = T_RBRACKET; return t;
    case '-':
        if (s[i + 1] == '>') {
            t.kind = T_ARROW;
            t.len = 2;
            return t;
        }
        t.kind = T_OTHER;
        return t;
    case '.':
        if (s[i + 1] == '.' && s[i + 2] == '.') {
            t.kind = T_ELLIPSIS;
            t.len = 3;
            return t;
        }
        t.kind = T_OTHER;
        return t;
    default: break;
    }
    if (is_ident_start((unsigned char)s[i])) {
        size_t j = i;
        while (is_ident_char((unsigned char)s[j]))
            j++;
        t.kind = T_IDENT;
        t.len = j - i;
        return t;
    }
    t.kind = T_OTHER;
    return t;
}

static void advance(parser *p, const token *t)
{
    p->pos = t->start + t->len;
}

static int word_is(const parser *p, size_t start, size_t len, const char *word)
{
    size_t n = strlen(word);
    return len == n && memcmp(p->src + start, word, n) == 0;
}

static int tok_is(const parser *p, const token *t, const char *word)
{
    return t->kind == T_IDENT && word_is(p, t->start, t->len, word);
}

static int tok_in(const parser *p, const token *t, const char *const *words, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (tok_is(p, t, words[i]))
            return 1;
    return 0;
}

/* Words that build a builtin type name ("unsigned long long int"). */
static const char *const type_keywords[] = {
    "void",   "char",     "short", "int",  "long",     "float",   "double",
    "signed", "unsigned", "_Bool", "bool", "_Complex", "complex",
};

/* Qualifiers that would change the meaning and that we do not model. */
static const char *const unsupported_qualifiers[] = {
    "volatile", "restrict", "__restrict", "__restrict__", "_Atomic",
};

static const char *const aggregates[] = { "struct", "union", "enum" };

/* Other C keywords: never a type, never a name. */
static const char *const other_keywords[] = {
    "const",  "typedef", "static",  "extern", "register", "auto",  "inline",
    "sizeof", "return",  "if",      "else",   "for",      "while", "do",
    "switch", "case",    "default", "break",  "continue", "goto",
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static int is_reserved(const parser *p, const token *t)
{
    return tok_in(p, t, type_keywords, COUNT(type_keywords))
        || tok_in(p, t, unsupported_qualifiers, COUNT(unsupported_qualifiers))
        || tok_in(p, t, aggregates, COUNT(aggregates))
        || tok_in(p, t, other_keywords, COUNT(other_keywords));
}

/* ------------------------------------------------------------------------ */
/* Struct names                                                              */

/*
 * A pointer to a struct the signature only names ("struct S *", a typedef'd
 * struct) is an opaque data pointer: base NT_VOID, and the name kept so that
 * it prints back as written and pointee checks can compare it. Types are
 * copied by value everywhere (plans, contexts, typedef tables), so the name
 * is not owned by the type: it lives in this process-wide, append-only pool
 * and the type carries its index, past the spelling table, in `spelling`.
 * Appends are lock-free (a slot is claimed with a compare-and-swap and
 * published with a release store); a name interned twice by a race only
 * costs a slot, since names compare by text. The pool is bounded, so
 * untrusted input cannot grow it without limit.
 */
#define MAX_TAGS    4096
#define MAX_TAG_LEN 255

_Static_assert(MAX_TAGS + 512 <= UINT16_MAX, "tag indexes fit in a spelling");

static const char *tag_pool[MAX_TAGS]; /* atomic */
static unsigned tag_count;             /* atomic */

const char *nt_tag_name(unsigned spelling)
{
    unsigned k;

    if (spelling < nt_nspellings)
        return NULL;
    k = spelling - (unsigned)nt_nspellings;
    if (k >= MAX_TAGS)
        return NULL;
    return nt_atomic_load_ptr(&tag_pool[k], NT_ACQUIRE);
}

/* The spelling index of a struct name, interned; 0 (void's, never a
   tag's) when the pool is full or memory ran out. */
static int intern_tag(const char *name, size_t len)
{
    unsigned n = nt_atomic_load_u32(&tag_count, NT_ACQUIRE);
    unsigned k;
    char *copy;

    for (k = 0; k < n && k < MAX_TAGS; k++) {
        const char *t = nt_atomic_load_ptr(&tag_pool[k], NT_ACQUIRE);
        if (t != NULL && strlen(t) == len && memcmp(t, name, len) == 0)
            return (int)(nt_nspellings + k);
    }
    do {
        if (n >= MAX_TAGS)
            return 0;
    } while (!nt_atomic_cas_u32(&tag_count, &n, n + 1));
    copy = malloc(len + 1);
    if (copy == NULL)
        return 0; /* the claimed slot stays empty */
    memcpy(copy, name, len);
    copy[len] = '\0';
    nt_atomic_store_ptr(&tag_pool[n], copy, NT_RELEASE);
    return (int)(nt_nspellings + n);
}

/* "struct S" and a typedef "S" of it name the same struct. */
static const char *tag_core(const char *tag)
{
    if (strncmp(tag, "struct ", 7) == 0)
        return tag + 7;
    if (strncmp(tag, "union ", 6) == 0)
        return tag + 6;
    return tag;
}

static int is_struct_value(const nt_type *t)
{
    return t->kind == NT_VOID && nt_tag_name(t->spelling) != NULL;
}

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */

static int column(size_t pos)
{
    return pos > (size_t)INT_MAX ? INT_MAX : (int)pos;
}

static int quote_len(size_t len)
{
    return len > QUOTE_MAX ? QUOTE_MAX : (int)len;
}

static const char *quote_dots(size_t len)
{
    return len > QUOTE_MAX ? "..." : "";
}

static int fail_memory(parser *p)
{
    nt_fail(p->err, NT_ERR_MEMORY, -1, "out of memory");
    return -1;
}

/* An unexpected token where `expected` should stand. */
static int fail_token(parser *p, const token *t, const char *expected)
{
    const char *s = p->src + t->start;
    int col = column(t->start);

    switch (t->kind) {
    case T_ELLIPSIS:
        nt_fail(p->err, NT_ERR_VALUE, col, "variadic functions ('...') are not supported");
        break;
    case T_LBRACKET:
        nt_fail(p->err, NT_ERR_VALUE, col, "arrays ('[]') are not supported; use a pointer");
        break;
    case T_END:
        nt_fail(p->err, NT_ERR_VALUE, col, "expected %s, got end of input", expected);
        break;
    case T_OTHER:
        if ((unsigned char)*s >= 0x20 && (unsigned char)*s < 0x7f)
            nt_fail(p->err, NT_ERR_VALUE, col, "expected %s, got unexpected character '%c'",
                    expected, *s);
        else
            nt_fail(p->err, NT_ERR_VALUE, col, "expected %s, got unexpected byte 0x%02x", expected,
                    (unsigned)(unsigned char)*s);
        break;
    default:
        nt_fail(p->err, NT_ERR_VALUE, col, "expected %s, got '%.*s%s'", expected, quote_len(t->len),
                s, quote_dots(t->len));
        break;
    }
    return -1;
}

/* ------------------------------------------------------------------------ */
/* Types                                                                     */

/* The flag of a type's own const: a pointer's is on the pointer itself,
   any other type's on its value. */
static uint8_t own_const(const nt_type *t)
{
    return t->kind == NT_PTR || t->kind == NT_FNPTR ? NT_CONST_SELF : NT_CONST_BASE;
}

/* `const` applied to what has been read so far. */
static void add_const(nt_type *t)
{
    t->cflags |= own_const(t);
}

/* One more '*' around what has been read so far. */
static int push_pointer(parser *p, nt_type *t, size_t pos)
{
    if (t->kind == NT_FNPTR) {
        nt_fail(p->err, NT_ERR_VALUE, column(pos),
                "pointers to function pointers are not supported");
        return -1;
    }
    if (t->kind != NT_PTR) {
        t->base = t->kind;
        t->kind = NT_PTR;
        t->depth = 1;
        return 0;
    }
    if (t->depth >= MAX_DEPTH) {
        nt_fail(p->err, NT_ERR_VALUE, column(pos), "too many levels of pointers (at most %d)",
                MAX_DEPTH);
        return -1;
    }
    if (t->cflags & NT_CONST_SELF) {
        t->cflags &= (uint8_t)~NT_CONST_SELF;
        t->cflags |= NT_CONST_MID;
    }
    t->depth++;
    return 0;
}

/* The parser's typedef named by the text at start, len; NULL if none. */
static const nt_typedef *find_typedef(const parser *p, size_t start, size_t len)
{
    for (size_t k = 0; p->typedefs != NULL && k < p->ntypedefs; k++)
        if (p->typedefs[k].name != NULL && word_is(p, start, len, p->typedefs[k].name))
            return &p->typedefs[k];
    return NULL;
}

/* A caller's typedef, checked: its type must make sense on its own. */
static int typedef_type(parser *p, const nt_typedef *td, size_t pos, size_t len, nt_type *out)
{
    nt_type t = td->type;
    int ok;

    if (t.kind == NT_PTR)
        ok = t.depth >= 1 && t.base < NT_KIND_COUNT && t.base != NT_PTR && t.base != NT_FNPTR;
    else
        ok = t.kind < NT_KIND_COUNT && t.kind != NT_FNPTR;
    if (ok && is_struct_value(&t)) {
        /* a typedef'd struct prints as the typedef's name */
        int idx = len <= MAX_TAG_LEN ? intern_tag(p->src + pos, len) : 0;
        if (idx == 0) {
            nt_fail(p->err, NT_ERR_VALUE, column(pos),
                    "typedef '%.*s%s': too many struct names, or too long", quote_len(len),
                    p->src + pos, quote_dots(len));
            return -1;
        }
        t.spelling = (uint16_t)idx;
    }
    if (!ok || t.fn != NULL) {
        nt_fail(p->err, NT_ERR_VALUE, column(pos),
                "typedef '%.*s%s' does not name a supported type", quote_len(len), p->src + pos,
                quote_dots(len));
        return -1;
    }
    if (t.kind != NT_PTR) {
        t.depth = 0;
        t.base = 0;
        t.cflags &= NT_CONST_BASE;
    } else {
        t.cflags &= NT_CONST_BASE | NT_CONST_SELF | (t.depth > 1 ? NT_CONST_MID : 0);
    }
    if (t.spelling >= nt_nspellings && nt_tag_name(t.spelling) == NULL)
        t.spelling = 0; /* the formatter falls back to the kind's name */
    *out = t;
    return 0;
}

typedef struct {
    size_t start;
    size_t len;
} span;

/* The type named by the words of a declaration specifier. */
static int resolve_words(parser *p, const span *words, int nwords, int plain, nt_type *out)
{
    char joined[128];
    size_t n = 0;
    int i, idx, has_long = 0, has_double = 0;

    memset(out, 0, sizeof(*out));
    for (i = 0; i < nwords; i++) {
        has_long |= word_is(p, words[i].start, words[i].len, "long");
        has_double |= word_is(p, words[i].start, words[i].len, "double");
    }
    if (has_long && has_double) {
        nt_fail(p->err, NT_ERR_VALUE, column(words[0].start), "long double is not supported");
        return -1;
    }
    /* the words joined by one space, as the spelling table writes them */
    for (i = 0; i < nwords; i++) {
        if (n + words[i].len + 1 >= sizeof(joined))
            break;
        if (i > 0)
            joined[n++] = ' ';
        memcpy(joined + n, p->src + words[i].start, words[i].len);
        n += words[i].len;
    }
    joined[n] = '\0';
    idx = i < nwords ? -1 : nt_spelling_find(joined, n);

    if (idx >= 0) {
        out->kind = nt_spellings[idx].kind;
        out->spelling = (uint16_t)idx;
        return 0;
    }
    const nt_typedef *td =
        nwords == 1 && plain ? find_typedef(p, words[0].start, words[0].len) : NULL;
    if (td != NULL)
        return typedef_type(p, td, words[0].start, words[0].len, out);
    if (nwords == 1)
        nt_fail(p->err, NT_ERR_VALUE, column(words[0].start), "unknown type name '%.*s%s'",
                quote_len(words[0].len), p->src + words[0].start, quote_dots(words[0].len));
    else
        nt_fail(p->err, NT_ERR_VALUE, column(words[0].start), "unknown type name '%s'", joined);
    return -1;
}

static int read_type(parser *p, nt_type *out);

/* "struct S" / "union U", the keyword in `kw`: an opaque type, usable
   only through a pointer (see the struct name pool). */
static int parse_struct_name(parser *p, const token *kw, nt_type *out)
{
    token tok;
    int idx;
    size_t len;

    advance(p, kw);
    tok = peek(p);
    if (tok.kind != T_IDENT || is_reserved(p, &tok))
        return fail_token(p, &tok, "a struct name");
    len = kw->len + 1 + tok.len; /* as kept: "struct S", one space */
    if (len > MAX_TAG_LEN) {
        nt_fail(p->err, NT_ERR_VALUE, column(tok.start), "struct name longer than %d characters",
                MAX_TAG_LEN - (int)kw->len - 1);
        return -1;
    }
    /* one space between the keyword and the name, as written back */
    {
        char text[MAX_TAG_LEN + 8];
        memcpy(text, p->src + kw->start, kw->len);
        text[kw->len] = ' ';
        memcpy(text + kw->len + 1, p->src + tok.start, tok.len);
        idx = intern_tag(text, kw->len + 1 + tok.len);
    }
    if (idx == 0) {
        nt_fail(p->err, NT_ERR_MEMORY, column(tok.start),
                "too many distinct struct names (at most %d)", MAX_TAGS);
        return -1;
    }
    advance(p, &tok);
    memset(out, 0, sizeof(*out));
    out->kind = NT_VOID;
    out->spelling = (uint16_t)idx;
    return 0;
}

/* A declaration specifier being read. */
typedef struct {
    span words[MAX_WORDS];
    int nwords;
    int named;    /* the specifier is a non-keyword identifier */
    int resolved; /* ...already turned into the type (a struct) */
    int is_const;
} specifier;

/* "struct S" or "union U", the keyword in tok. */
static int spec_aggregate(parser *p, specifier *sp, const token *tok, nt_type *out)
{
    if (sp->nwords > 0 || sp->named || tok_is(p, tok, "enum")) {
        nt_fail(p->err, NT_ERR_VALUE, column(tok->start),
                "'%.*s' types are not supported; pass a pointer as void *", (int)tok->len,
                p->src + tok->start);
        return -1;
    }
    sp->words[0].start = tok->start;
    sp->words[0].len = tok->len;
    if (parse_struct_name(p, tok, out) < 0)
        return -1;
    sp->named = 1;
    sp->resolved = 1;
    return 1;
}

/* A word of a builtin type name ("unsigned", "long", ...). */
static int spec_keyword(parser *p, specifier *sp, const token *tok)
{
    if (sp->named) {
        nt_fail(p->err, NT_ERR_VALUE, column(tok->start),
                "'%.*s' cannot follow the type name '%.*s%s'", (int)tok->len, p->src + tok->start,
                quote_len(sp->words[0].len), p->src + sp->words[0].start,
                quote_dots(sp->words[0].len));
        return -1;
    }
    if (sp->nwords == MAX_WORDS) {
        nt_fail(p->err, NT_ERR_VALUE, column(sp->words[0].start), "too many words in a type name");
        return -1;
    }
    sp->words[sp->nwords].start = tok->start;
    sp->words[sp->nwords].len = tok->len;
    sp->nwords++;
    advance(p, tok);
    return 1;
}

/* A type name that is no keyword: a spelling or a typedef. */
static int spec_name(parser *p, specifier *sp, const token *tok)
{
    sp->words[0].start = tok->start;
    sp->words[0].len = tok->len;
    sp->named = 1;
    sp->nwords = 1;
    advance(p, tok);
    return 1;
}

/* Whether an identifier names a type: a spelling (size_t, int64_t) or one
   of the parser's typedefs. */
static int names_a_type(const parser *p, const token *tok)
{
    return nt_spelling_find(p->src + tok->start, tok->len) >= 0
        || find_typedef(p, tok->start, tok->len) != NULL;
}

/* One identifier of a specifier: 1 taken, 0 not part of it (a name
   follows), -1 on error. A type name after type keywords is refused where
   a parameter's name would stand: "unsigned int64" would read as an
   unsigned int named int64, 32 bits where 64 were meant. */
static int spec_token(parser *p, specifier *sp, const token *tok, nt_type *out)
{
    if (tok_is(p, tok, "const")) {
        advance(p, tok);
        sp->is_const = 1;
        return 1;
    }
    if (tok_in(p, tok, unsupported_qualifiers, COUNT(unsupported_qualifiers))) {
        nt_fail(p->err, NT_ERR_VALUE, column(tok->start), "'%.*s' is not supported", (int)tok->len,
                p->src + tok->start);
        return -1;
    }
    if (tok_in(p, tok, aggregates, COUNT(aggregates)))
        return spec_aggregate(p, sp, tok, out);
    if (tok_in(p, tok, type_keywords, COUNT(type_keywords)))
        return spec_keyword(p, sp, tok);
    if (tok_in(p, tok, other_keywords, COUNT(other_keywords)))
        return fail_token(p, tok, "a type");
    if (sp->nwords == 0 && !sp->named)
        return spec_name(p, sp, tok);
    if (sp->nwords == 1 && !sp->named && tok_is(p, tok, "PY_LONG_LONG")
        && word_is(p, sp->words[0].start, sp->words[0].len, "unsigned")) {
        sp->words[sp->nwords].start = tok->start;
        sp->words[sp->nwords].len = tok->len;
        sp->nwords++;
        sp->named = 1;
        advance(p, tok);
        return 1;
    }
    if (!sp->named && names_a_type(p, tok)) {
        nt_fail(p->err, NT_ERR_VALUE, column(tok->start),
                "'%.*s%s' is a type name: it cannot follow '%.*s%s', nor name a parameter",
                quote_len(tok->len), p->src + tok->start, quote_dots(tok->len),
                quote_len(sp->words[0].len), p->src + sp->words[0].start,
                quote_dots(sp->words[0].len));
        return -1;
    }
    return 0; /* a name */
}

/* {'*' | 'const'} after the specifier. */
static int parse_pointers(parser *p, nt_type *out)
{
    token tok;

    for (;;) {
        tok = peek(p);
        if (tok.kind == T_STAR) {
            if (push_pointer(p, out, tok.start) < 0)
                return -1;
            advance(p, &tok);
        } else if (tok_is(p, &tok, "const")) {
            add_const(out);
            advance(p, &tok);
        } else if (tok_in(p, &tok, unsupported_qualifiers, COUNT(unsupported_qualifiers))) {
            nt_fail(p->err, NT_ERR_VALUE, column(tok.start), "'%.*s' is not supported",
                    (int)tok.len, p->src + tok.start);
            return -1;
        } else {
            return 0;
        }
    }
}

/*
 * type := specifier {'*' | 'const'}
 * specifier := words of a builtin type, or one other identifier (a known
 * spelling or a caller's typedef), with `const` anywhere. A
 * following identifier that cannot continue the type is left for the caller
 * (a parameter or function name).
 */
static int parse_type(parser *p, nt_type *out)
{
    if (read_type(p, out) == 0)
        return 0;
    memset(out, 0, sizeof(*out));
    return -1;
}

static int read_type(parser *p, nt_type *out)
{
    specifier sp;
    token tok;
    int r;

    memset(&sp, 0, sizeof(sp));
    memset(out, 0, sizeof(*out));
    do {
        tok = peek(p);
        r = tok.kind == T_IDENT ? spec_token(p, &sp, &tok, out) : 0;
        if (r < 0)
            return -1;
    } while (r > 0);

    if (!sp.resolved) {
        if (sp.nwords == 0)
            return fail_token(p, &tok, "a type");
        if (resolve_words(p, sp.words, sp.nwords, sp.named, out) < 0)
            return -1;
    }
    if (sp.is_const)
        add_const(out);
    return parse_pointers(p, out);
}

/* ------------------------------------------------------------------------ */
/* Signatures                                                                */

/* A parameter or function name: copied, or NULL when `keep` is 0. */
static int take_name(parser *p, const token *tok, int keep, char **name)
{
    char *s;

    *name = NULL;
    if (is_reserved(p, tok))
        return fail_token(p, tok, "a name");
    advance(p, tok);
    if (!keep)
        return 0;
    s = malloc(tok->len + 1);
    if (s == NULL)
        return fail_memory(p);
    memcpy(s, p->src + tok->start, tok->len);
    s[tok->len] = '\0';
    *name = s;
    return 0;
}

static int parse_params(parser *p, nt_sig *sig);

/* Kernels take DLPack descriptors by pointer: a DLTensor parameter or
   result by value is a different ABI that nothing here builds. */
static int refuse_by_value(parser *p, const nt_type *t, size_t pos)
{
    if (t->kind != NT_DLTENSOR)
        return 0;
    nt_fail(p->err, NT_ERR_VALUE, column(pos),
            "DLTensor is passed by pointer: write 'const DLTensor *' "
            "(or 'DLTensor *' if the kernel writes the data)");
    return -1;
}

/* A struct by value, where a parameter or return type stands. */
static int fail_struct_value(parser *p, const nt_type *t, const token *after)
{
    nt_fail(p->err, NT_ERR_VALUE, column(after->start),
            "'%s' passed by value is not supported; pass a pointer to it",
            nt_tag_name(t->spelling));
    return -1;
}

/* A function type whose return type ret and '(' are read: its params and
   ')'. A parameter of function type is a function pointer (C17 6.7.6.3
   adjusts it so). */
static int function_of(parser *p, const nt_type *ret, nt_type *out)
{
    token tok = peek(p);
    nt_sig *fn;

    if (refuse_by_value(p, ret, tok.start) < 0)
        return -1;
    if (is_struct_value(ret))
        return fail_struct_value(p, ret, &tok);
    fn = calloc(1, sizeof(*fn));
    if (fn == NULL)
        return fail_memory(p);
    fn->ret = *ret;
    if (parse_params(p, fn) < 0) {
        nt_sig_free(fn);
        return -1;
    }
    memset(out, 0, sizeof(*out));
    out->kind = NT_FNPTR;
    out->fn = fn;
    return 0;
}

/* The declarator of a function pointer whose return type ret and '(' are
   read: '*' {'const'} [name] ')' '(' params ')', or a function type
   (function_of). */
static int parse_fnptr(parser *p, const nt_type *ret, nt_type *out, char **name, int allow_name)
{
    nt_sig *fn;
    token tok = peek(p);
    int fn_const = 0;

    if (tok.kind != T_STAR)
        return function_of(p, ret, out);
    advance(p, &tok);
    for (;;) {
        tok = peek(p);
        if (tok.kind == T_STAR) {
            nt_fail(p->err, NT_ERR_VALUE, column(tok.start),
                    "pointers to function pointers are not supported");
            return -1;
        }
        if (!tok_is(p, &tok, "const"))
            break;
        fn_const = 1;
        advance(p, &tok);
    }
    if (tok.kind == T_IDENT && allow_name) {
        if (take_name(p, &tok, 1, name) < 0)
            return -1;
        tok = peek(p);
    }
    if (tok.kind != T_RPAREN)
        goto fail_name;
    advance(p, &tok);
    tok = peek(p);
    if (tok.kind != T_LPAREN) {
        fail_token(p, &tok, "'(' and the parameters of the function pointer");
        goto fail_free;
    }
    advance(p, &tok);
    if (refuse_by_value(p, ret, tok.start) < 0)
        goto fail_free;
    fn = calloc(1, sizeof(*fn));
    if (fn == NULL) {
        fail_memory(p);
        goto fail_free;
    }
    fn->ret = *ret;
    if (parse_params(p, fn) < 0) {
        nt_sig_free(fn);
        goto fail_free;
    }
    out->kind = NT_FNPTR;
    out->cflags = fn_const ? NT_CONST_SELF : 0;
    out->spelling = 0;
    out->fn = fn;
    return 0;

fail_name:
    fail_token(p, &tok, "')'");
fail_free:
    free(*name);
    *name = NULL;
    return -1;
}

/*
 * param := type [name]
 *        | type '(' '*' {'const'} [name] ')' '(' params ')'
 * With allow_name 0 (nt_type_parse) no name is read.
 */
static int parse_param(parser *p, nt_type *out, char **name, int allow_name)
{
    nt_type t;
    token tok;

    *name = NULL;
    memset(out, 0, sizeof(*out));
    if (parse_type(p, &t) < 0)
        return -1;
    tok = peek(p);
    if (allow_name && is_struct_value(&t))
        return fail_struct_value(p, &t, &tok);
    if (tok.kind == T_IDENT && allow_name) {
        if (take_name(p, &tok, 1, name) < 0) {
            nt_sig_free(t.fn);
            return -1;
        }
        *out = t;
        return 0;
    }
    if (tok.kind != T_LPAREN) {
        *out = t;
        return 0;
    }
    advance(p, &tok);
    if (parse_fnptr(p, &t, out, name, allow_name) < 0)
        return -1;
    return 0;
}

static int append_arg(parser *p, nt_sig *sig, const nt_type *t, char *name, size_t pos)
{
    int n = sig->nargs, i;

    for (i = 0; name != NULL && i < n; i++)
        if (sig->names[i] != NULL && strcmp(sig->names[i], name) == 0) {
            nt_fail(p->err, NT_ERR_VALUE, column(pos),
                    "parameter %d is named '%s' as parameter %d is: parameter "
                    "names must differ",
                    n + 1, name, i + 1);
            return -1;
        }
    if (n >= MAX_ARGS) {
        nt_fail(p->err, NT_ERR_VALUE, column(pos), "too many parameters (at most %d)", MAX_ARGS);
        return -1;
    }
    /* Capacity is the next power of two: grow when n is one (or 0). */
    if ((n & (n - 1)) == 0) {
        size_t cap = n == 0 ? 1 : 2 * (size_t)n;
        nt_type *args = realloc(sig->args, cap * sizeof(*args));
        char **names;
        if (args == NULL)
            return fail_memory(p);
        sig->args = args;
        names = realloc(sig->names, cap * sizeof(*names));
        if (names == NULL)
            return fail_memory(p);
        sig->names = names;
    }
    sig->args[n] = *t;
    sig->names[n] = name;
    sig->nargs = n + 1;
    return 0;
}

/* params := 'void' | <empty> | param {',' param}, then ')'.  The '(' is
   already read. */
static int parse_params(parser *p, nt_sig *sig)
{
    token tok = peek(p);

    if (++p->nest > MAX_NEST) {
        nt_fail(p->err, NT_ERR_VALUE, column(tok.start),
                "signature nested too deeply (at most %d levels)", MAX_NEST);
        return -1;
    }
    if (tok.kind == T_RPAREN) {
        advance(p, &tok);
        p->nest--;
        return 0;
    }
    for (;;) {
        token first = peek(p);
        nt_type t;
        char *name;

        if (parse_param(p, &t, &name, 1) < 0)
            return -1;
        if (refuse_by_value(p, &t, first.start) < 0) {
            free(name);
            return -1;
        }
        tok = peek(p);
        if (t.kind == NT_VOID) {
            int bare = name == NULL && t.cflags == 0;
            free(name);
            if (bare && sig->nargs == 0 && tok.kind == T_RPAREN) {
                advance(p, &tok);
                break;
            }
            nt_fail(p->err, NT_ERR_VALUE, column(first.start),
                    bare ? "'void' must be the only parameter"
                         : "a parameter cannot have type void");
            return -1;
        }
        if (append_arg(p, sig, &t, name, first.start) < 0) {
            nt_sig_free(t.fn);
            free(name);
            return -1;
        }
        if (tok.kind == T_COMMA) {
            advance(p, &tok);
            continue;
        }
        if (tok.kind == T_RPAREN) {
            advance(p, &tok);
            break;
        }
        return fail_token(p, &tok, "',' or ')'");
    }
    p->nest--;
    return 0;
}

static void parser_init(parser *p, const char *src, const nt_typedef *typedefs, size_t ntypedefs,
                        nt_error *err)
{
    p->src = src;
    p->pos = 0;
    p->typedefs = typedefs;
    p->ntypedefs = typedefs != NULL ? ntypedefs : 0;
    p->err = err;
    p->nest = 0;
}

static int in_words(const char *name, const char *const *words, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (strcmp(name, words[i]) == 0)
            return 1;
    return 0;
}

/* A typedef names a new type: a C identifier that is no keyword and no
   name the parser knows already. A typedef of "double" would never be
   looked up (the spelling table comes first): refused, not ignored. */
static int check_typedefs(parser *p)
{
    size_t k, j, i, len;
    const char *name;

    for (k = 0; k < p->ntypedefs; k++) {
        name = p->typedefs[k].name;
        len = name != NULL ? strlen(name) : 0;
        int ident = len > 0 && is_ident_start((unsigned char)name[0]);
        for (i = 1; ident && i < len; i++)
            ident = is_ident_char((unsigned char)name[i]);
        if (!ident) {
            nt_fail(p->err, NT_ERR_VALUE, -1, "typedef name '%.*s%s' is not a C identifier",
                    quote_len(len), name != NULL ? name : "", quote_dots(len));
            return -1;
        }
        if (nt_spelling_find(name, len) >= 0) {
            nt_fail(p->err, NT_ERR_VALUE, -1,
                    "typedef '%s' would redefine a type name numthunk knows; "
                    "a typedef names a new type (give it another name)",
                    name);
            return -1;
        }
        if (in_words(name, type_keywords, COUNT(type_keywords))
            || in_words(name, unsupported_qualifiers, COUNT(unsupported_qualifiers))
            || in_words(name, aggregates, COUNT(aggregates))
            || in_words(name, other_keywords, COUNT(other_keywords))) {
            nt_fail(p->err, NT_ERR_VALUE, -1, "typedef '%s': a C keyword cannot name a type", name);
            return -1;
        }
        for (j = 0; j < k; j++)
            if (p->typedefs[j].name != NULL && strcmp(p->typedefs[j].name, name) == 0) {
                nt_fail(p->err, NT_ERR_VALUE, -1, "typedef '%s' is given twice", name);
                return -1;
            }
    }
    return 0;
}

static int expect_end(parser *p, const char *what)
{
    token tok = peek(p);

    if (tok.kind == T_END)
        return 0;
    if (tok.kind == T_ELLIPSIS || tok.kind == T_LBRACKET)
        return fail_token(p, &tok, "");
    nt_fail(p->err, NT_ERR_VALUE, column(tok.start), "unexpected '%.*s%s' after the %s",
            quote_len(tok.len), p->src + tok.start, quote_dots(tok.len), what);
    return -1;
}

/* A return type: no DLTensor or struct by value. */
static int parse_return(parser *p, nt_type *ret)
{
    token first = peek(p), tok;

    if (parse_type(p, ret) < 0 || refuse_by_value(p, ret, first.start) < 0)
        return -1;
    tok = peek(p);
    if (is_struct_value(ret))
        return fail_struct_value(p, ret, &tok);
    return 0;
}

nt_sig *nt_sig_parse(const char *src, const nt_typedef *typedefs, size_t ntypedefs, nt_error *err)
{
    parser p;
    nt_sig *sig;
    token tok;
    char *fname;

    if (src == NULL) {
        nt_fail(err, NT_ERR_VALUE, 0, "empty signature");
        return NULL;
    }
    parser_init(&p, src, typedefs, ntypedefs, err);
    if (check_typedefs(&p) < 0)
        return NULL;
    tok = peek(&p);
    if (tok.kind == T_END) {
        nt_fail(err, NT_ERR_VALUE, 0, "empty signature");
        return NULL;
    }
    sig = calloc(1, sizeof(*sig));
    if (sig == NULL) {
        fail_memory(&p);
        return NULL;
    }
    if (parse_return(&p, &sig->ret) < 0)
        goto error;
    tok = peek(&p);
    if (tok.kind == T_IDENT) {
        if (take_name(&p, &tok, 0, &fname) < 0)
            goto error;
        tok = peek(&p);
    }
    if (tok.kind != T_LPAREN) {
        fail_token(&p, &tok, "'(' and the parameter list");
        goto error;
    }
    advance(&p, &tok);
    if (parse_params(&p, sig) < 0)
        goto error;
    if (expect_end(&p, "signature") < 0)
        goto error;
    return sig;

error:
    nt_sig_free(sig);
    return NULL;
}

/*
 * A single type, optionally in function-pointer form "double (*)(double)";
 * no name. On success a function pointer's out->fn is owned by the caller
 * (nt_sig_free). On failure *out is zeroed.
 */
int nt_type_parse(const char *src, const nt_typedef *typedefs, size_t ntypedefs, nt_type *out,
                  nt_error *err)
{
    parser p;
    char *name;

    memset(out, 0, sizeof(*out));
    if (src == NULL) {
        nt_fail(err, NT_ERR_VALUE, 0, "empty type");
        return -1;
    }
    parser_init(&p, src, typedefs, ntypedefs, err);
    if (check_typedefs(&p) < 0)
        return -1;
    if (peek(&p).kind == T_END) {
        nt_fail(err, NT_ERR_VALUE, 0, "empty type");
        return -1;
    }
    if (parse_param(&p, out, &name, 0) < 0)
        return -1;
    if (expect_end(&p, "type") < 0) {
        nt_sig_free(out->fn);
        memset(out, 0, sizeof(*out));
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Ownership                                                                 */

void nt_sig_free(nt_sig *sig)
{
    int i;

    if (sig == NULL)
        return;
    for (i = 0; i < sig->nargs; i++) {
        if (sig->args != NULL)
            nt_sig_free(sig->args[i].fn);
        if (sig->names != NULL)
            free(sig->names[i]);
    }
    nt_sig_free(sig->ret.fn);
    free(sig->args);
    free(sig->names);
    free(sig);
}

static char *copy_string(const char *s)
{
    size_t n;
    char *c;

    if (s == NULL)
        return NULL;
    n = strlen(s) + 1;
    c = malloc(n);
    if (c != NULL)
        memcpy(c, s, n);
    return c;
}

nt_sig *nt_sig_copy(const nt_sig *sig)
{
    nt_sig *c;
    int i;

    if (sig == NULL)
        return NULL;
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->ret = sig->ret;
    c->ret.fn = NULL;
    if (sig->ret.fn != NULL && (c->ret.fn = nt_sig_copy(sig->ret.fn)) == NULL)
        goto error;
    if (sig->nargs > 0) {
        c->args = calloc((size_t)sig->nargs, sizeof(*c->args));
        c->names = calloc((size_t)sig->nargs, sizeof(*c->names));
        if (c->args == NULL || c->names == NULL)
            goto error;
    }
    for (i = 0; i < sig->nargs; i++) {
        c->args[i] = sig->args[i];
        c->args[i].fn = NULL;
        c->nargs = i + 1;
        if (sig->args[i].fn != NULL && (c->args[i].fn = nt_sig_copy(sig->args[i].fn)) == NULL)
            goto error;
        if (sig->names != NULL && sig->names[i] != NULL
            && (c->names[i] = copy_string(sig->names[i])) == NULL)
            goto error;
    }
    return c;

error:
    nt_sig_free(c);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Canonical form                                                            */

typedef struct {
    char *buf;
    size_t n;   /* capacity, including the NUL */
    size_t len; /* length needed so far */
} writer;

static void put(writer *w, const char *s)
{
    for (; *s != '\0'; s++) {
        if (w->len + 1 < w->n)
            w->buf[w->len] = *s;
        w->len++;
    }
}

static size_t finish(writer *w)
{
    if (w->n > 0)
        w->buf[w->len < w->n ? w->len : w->n - 1] = '\0';
    return w->len;
}

/* The name printed for a base kind: its spelling if that spelling still
   names this kind (types built by hand may carry 0), else the kind's C
   text. */
static const char *base_name(int kind, unsigned spelling)
{
    if (kind == NT_VOID && nt_tag_name(spelling) != NULL)
        return nt_tag_name(spelling);
    if (kind < 0 || kind >= NT_KIND_COUNT)
        return "void";
    if (spelling < nt_nspellings && nt_spellings[spelling].kind == kind)
        return nt_spellings[spelling].name;
    return nt_kinds[kind].c_text != NULL ? nt_kinds[kind].c_text : "void";
}

/* Whether the type's text ends in '*', so a declarator follows unspaced:
   Cython writes "double *(int)" but "double (int)". */
static int ends_in_star(const nt_type *t)
{
    return t->kind == NT_PTR && !(t->cflags & NT_CONST_SELF);
}

static void format_params(writer *w, const nt_sig *sig);

static void format_type(writer *w, const nt_type *t)
{
    int i, depth;

    /* a declarator's shape: function pointer, pointer, or a base type */
    switch (t->kind) {
    case NT_FNPTR:
        if (t->fn == NULL) {
            put(w, "void (*)(void)");
            return;
        }
        format_type(w, &t->fn->ret);
        put(w, ends_in_star(&t->fn->ret) ? "(*" : " (*");
        if (t->cflags & NT_CONST_SELF)
            put(w, "const");
        put(w, ")");
        format_params(w, t->fn);
        return;
    case NT_PTR:
        if (t->cflags & NT_CONST_BASE)
            put(w, "const ");
        put(w, base_name(t->base, t->spelling));
        put(w, " ");
        depth = t->depth > 0 ? t->depth : 1;
        for (i = 1; i <= depth; i++) {
            put(w, "*");
            if ((i < depth && (t->cflags & NT_CONST_MID))
                || (i == depth && (t->cflags & NT_CONST_SELF)))
                put(w, i < depth ? "const " : "const");
        }
        return;
    default:
        if (t->cflags & NT_CONST_BASE)
            put(w, "const ");
        put(w, base_name(t->kind, t->spelling));
        return;
    }
}

static void format_params(writer *w, const nt_sig *sig)
{
    int i;

    put(w, "(");
    if (sig->nargs <= 0)
        put(w, "void");
    for (i = 0; i < sig->nargs; i++) {
        if (i > 0)
            put(w, ", ");
        format_type(w, &sig->args[i]);
    }
    put(w, ")");
}

size_t nt_sig_format(const nt_sig *sig, char *buf, size_t n)
{
    writer w = { buf, n, 0 };

    if (sig == NULL) {
        put(&w, "void (void)");
        return finish(&w);
    }
    format_type(&w, &sig->ret);
    if (!ends_in_star(&sig->ret))
        put(&w, " ");
    format_params(&w, sig);
    return finish(&w);
}

size_t nt_type_format(const nt_type *t, char *buf, size_t n)
{
    writer w = { buf, n, 0 };

    format_type(&w, t);
    return finish(&w);
}

/* A message cut silently reads as a whole one ("double (*)(double, dou"
   looks like a type); the dots say that more was there. */
void nt_mark_cut(char *buf, size_t n, size_t needed)
{
    if (needed >= n && n >= 4)
        memcpy(buf + n - 4, "...", 4);
}

size_t nt_format_cut(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    if (len < 0) {
        if (n > 0)
            buf[0] = '\0';
        return 0;
    }
    nt_mark_cut(buf, n, (size_t)len);
    return (size_t)len;
}

/* ------------------------------------------------------------------------ */
/* Equality                                                                  */

int nt_type_equal(const nt_type *a, const nt_type *b)
{
    if (a->kind != b->kind || a->cflags != b->cflags)
        return 0;
    if (a->kind == NT_PTR && (a->base != b->base || a->depth != b->depth))
        return 0;
    if (a->kind == NT_PTR) {
        /* void * and struct pointers: the struct, if any, must match (a
           struct is never a parameter or result by value: parse refuses it) */
        const char *ta = nt_tag_name(a->spelling), *tb = nt_tag_name(b->spelling);
        if (ta == NULL || tb == NULL)
            return ta == tb;
        return strcmp(tag_core(ta), tag_core(tb)) == 0;
    }
    if (a->kind == NT_FNPTR)
        return nt_sig_equal(a->fn, b->fn);
    return 1;
}

/* Equal but for their own qualifier: a parameter's or the result's own
   const is no part of a function's type (C17 6.7.6.3, paragraphs 5 and
   15), so double (const double) is double (double), and double (double
   *const) is double (double *); what a pointer points to still counts. */
static int equal_unqualified(const nt_type *a, const nt_type *b)
{
    nt_type ua = *a, ub = *b;
    ua.cflags &= (uint8_t)~own_const(a);
    ub.cflags &= (uint8_t)~own_const(b);
    return nt_type_equal(&ua, &ub);
}

/* a and b are never NULL: a function pointer always has its signature
   (parse_fnptr and the nested declarator make one, nt_sig_copy copies it) */
int nt_sig_equal(const nt_sig *a, const nt_sig *b)
{
    int i;

    if (!equal_unqualified(&a->ret, &b->ret) || a->nargs != b->nargs)
        return 0;
    for (i = 0; i < a->nargs; i++)
        if (!equal_unqualified(&a->args[i], &b->args[i]))
            return 0;
    return 1;
}
