/*
 * numthunk internal header: the contracts between the stages of the pipeline
 *
 *   kinds (kinds.c)             -> every fact about each value kind
 *   signature (parse/spellings.c, parse/declarator.c)  -> what the target takes and returns
 *   descriptor (convert/buffer.c)        -> what a bound Python object is
 *   plan (plan/plan.c)               -> where each target argument comes from
 *   engine (engine/choose.c chooses;  -> machine code or libffi closure for a plan
 *     engine/native.c + engine/arch/<arch>.c, engine/ffi.c; C calls an engine an
 *     nt_engine)
 *   executable memory (engine/memory/) -> W^X pages for the native engine
 *   Python types (python/module.c, python/thunk.c)
 *
 * parse/spellings.c, kinds.c and parse/declarator.c have no Python dependency (they can be built
 * and fuzzed on their own, with libffi); everything below the Python layer
 * reports failures through an nt_error and a status code, and the Python
 * layer turns that into one exception.
 *
 * Place in the pipeline: every stage reads it: parse, plan, convert, engine,
 * life, python.
 */
#ifndef NUMTHUNK_H
#define NUMTHUNK_H

#include <stddef.h>
#include <stdint.h>

#include "portable.h"

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */

typedef enum {
    NT_OK = 0,
    NT_ERR_VALUE,      /* ValueError: malformed input (signature syntax...) */
    NT_ERR_TYPE,       /* TypeError: wrong kind of object / wrong dtype */
    NT_ERR_OVERFLOW,   /* OverflowError: value out of range for a C type */
    NT_ERR_MEMORY,     /* MemoryError */
    NT_ERR_OS,         /* OSError: mmap/memfd/mprotect refused */
    NT_ERR_UNSUPPORTED /* the chosen engine cannot run this plan */
} nt_status;

typedef struct {
    nt_status status;
    int column; /* signature errors: 0-based column, else -1 */
    char msg[512];
} nt_error;

/* An empty error, for hot paths: an initializer would zero all of msg. */
static inline void nt_error_init(nt_error *err)
{
    err->status = NT_OK;
    err->column = -1;
    err->msg[0] = '\0';
}

/* Sets err (if not already set: the first error sticks) and returns status. */
nt_status nt_fail(nt_error *err, nt_status status, int column, const char *fmt, ...)
    NT_PRINTF(4, 5);

/* ------------------------------------------------------------------------ */
/* Type model                                                                */

/* Value kinds with exact widths. Order matters: integer kinds are contiguous. */
typedef enum {
    NT_VOID = 0,
    NT_BOOL,
    NT_I8,
    NT_U8,
    NT_I16,
    NT_U16,
    NT_I32,
    NT_U32,
    NT_I64,
    NT_U64,
    NT_F32,
    NT_F64,
    NT_C64,      /* float _Complex  (two floats) */
    NT_C128,     /* double _Complex (two doubles) */
    NT_PTR,      /* any data pointer; see nt_type.base / depth */
    NT_FNPTR,    /* pointer to function; see nt_type.fn */
    NT_MEMVIEW,  /* Cython __Pyx_memviewslice, passed by value */
    NT_DLTENSOR, /* DLPack DLTensor: only as a pointee (DLTensor *) */
    NT_KIND_COUNT
} nt_kind;

#define NT_IS_INT(k)     ((k) >= NT_BOOL && (k) <= NT_U64)
#define NT_IS_FLOAT(k)   ((k) == NT_F32 || (k) == NT_F64)
#define NT_IS_COMPLEX(k) ((k) == NT_C64 || (k) == NT_C128)

/* cflags */
#define NT_CONST_BASE 0x01 /* the innermost pointee is const: const double * */
#define NT_CONST_SELF 0x02 /* the pointer itself is const: double *const */
#define NT_CONST_MID  0x04 /* some intermediate level is const (T *const *) */

typedef struct nt_sig nt_sig;

/*
 * One C type. Scalars: kind, depth 0. Data pointers: kind NT_PTR, base is
 * the kind of the innermost pointee (NT_VOID for void *, and for an opaque
 * struct pointer, whose struct name nt_tag_name(spelling) gives), depth
 * the number of '*'. spelling is an index in nt_spellings[] (how the base type was
 * written, e.g. "npy_intp"), kept so that str() gives back the names that
 * SciPy and Cython compare with strcmp.
 */
typedef struct {
    uint8_t kind;
    uint8_t base;
    uint8_t depth;
    uint8_t cflags;
    uint16_t spelling;
    nt_sig *fn; /* NT_FNPTR: the pointee signature (owned) */
} nt_type;

/* Spelling table entry: a C type name and what it means on this platform
   (the canonical form prints it as written). */
typedef struct {
    const char *name;
    uint8_t kind;
} nt_spelling;

extern const nt_spelling nt_spellings[];
extern const size_t nt_nspellings;

/* Looks up a (possibly multi-word, single-spaced) type name. Returns the
   spelling index or -1. */
int nt_spelling_find(const char *name, size_t len);

/* ------------------------------------------------------------------------ */
/* The kind table (kinds.c)                                                  */

/* What a Python value bound to a kind becomes: the converter each kind
   takes (convert/value.c), and the class of its machine representation. */
typedef enum {
    NT_VALUE_NONE = 0, /* void; DLTensor (a pointee only) */
    NT_VALUE_BOOL,     /* C bool */
    NT_VALUE_INT,      /* the integers */
    NT_VALUE_REAL,     /* float, double */
    NT_VALUE_COMPLEX,  /* two floats or two doubles */
    NT_VALUE_POINTER,  /* data and function pointers */
    NT_VALUE_MEMVIEW   /* a Cython memoryview slice, by value */
} nt_value_class;

/* How a value is widened on its way to the target: a narrow integer to 32
   bits (zero- or sign-extended from 8 or 16; the bits above 32 cleared), a
   32-bit integer sign-extended to 64 bits (RV64 passes int and unsigned
   int so), or a 32-bit float moved as one (RISC-V keeps it NaN-boxed in a
   64-bit register). The kind table says what a C caller does (ext); an
   ABI description may say otherwise (engine/route.h). */
enum {
    NT_EXT_NONE = 0,
    NT_EXT_ZX8,
    NT_EXT_SX8,
    NT_EXT_ZX16,
    NT_EXT_SX16,
    NT_EXT_SX32,
    NT_EXT_F32,
    NT_EXT_COUNT
};

/* PEP 3118 (struct module) element codes, one bit each: the codes of a
   kind's fmt_native and fmt_std masks. */
#define NT_FMT_CODES "?cbBhHiIlLqQnNfd"

/*
 * One row per kind, every fact about it (the way CPython's
 * Modules/_ctypes/cfield.c keeps one row per format character): what the
 * other stages read instead of switching on the kind. Sizes and limits
 * come from this compiler (sizeof, _Alignof, <limits.h>, <float.h>).
 */
typedef struct {
    const char *name;   /* canonical: "int32", "float64", "pointer" */
    const char *c_text; /* C text the formatter prints for it: "int",
                           "intptr_t"; NULL for pointers */
    uint8_t value;      /* nt_value_class */
    uint8_t is_signed;  /* integers: signed; bool 0; floats and
                           complex 1 */
    uint16_t size;      /* bytes of a value, as passed */
    uint16_t align;     /* _Alignof of a value */
    uint16_t cell;      /* bytes of a bound value cell (plan/plan.c) */
    uint8_t ext;        /* NT_EXT_*: how a C caller widens it in a
                           register (narrow ints to 32 bits) */
    uint8_t part;       /* floats, complex: the kind of each part (a
                           float's is itself) */
    int64_t min;        /* integers: the range */
    uint64_t max;
    double fmax;         /* floats, complex parts: the largest finite */
    double fover;        /* doubles of this magnitude or more round to
                            infinity in this type */
    uint32_t fmt_native; /* PEP 3118 codes with no prefix or '@' */
    uint32_t fmt_std;    /* with '=', '<', '>', '!' (standard sizes) */
    char dtype;          /* NumPy dtype character, 0 for none */
    uint8_t dl_code;     /* DLPack type code (dl_bits 0: none) */
    uint8_t dl_bits;
    struct _ffi_type *ffi; /* libffi's type for it, NULL for none */
    const char *numba;     /* numba.types name */
    const char *ctypes;    /* ctypes class name, NULL for none */
    const char *cffi;      /* the type text cffi reads */
} nt_kind_info;

extern const nt_kind_info nt_kinds[NT_KIND_COUNT];

/* Size and alignment of a value of this type when passed (pointers: 8 on
   LP64; NT_MEMVIEW: sizeof(__Pyx_memviewslice)). */
size_t nt_type_size(const nt_type *t);
size_t nt_type_align(const nt_type *t);

/* Bytes of a bound value cell of this type (8, 16, or a memoryview slice). */
size_t nt_cell_size(const nt_type *t);

/* Canonical name of a kind: "int32", "float64", ... */
const char *nt_kind_name(int kind);

/* The bit of a PEP 3118 code in fmt_native/fmt_std, 0 if it has none. */
uint32_t nt_fmt_bit(char code);

/* The scalar kind a PEP 3118 code names, with standard sizes or native
   ones, as a complex ('Z' before it) or not; NT_VOID if none does. */
int nt_kind_of_format(char code, int standard, int is_complex);

/* The kind of a value class, signedness and size (a NumPy dtype's kind
   letter and itemsize say as much); NT_VOID if none has them. */
int nt_kind_find(int value, int is_signed, size_t size);

/* Builds the two lookups above from the table (each also does so on first
   use); the module calls it once at import, before any thread can. */
void nt_kinds_ready(void);

/* The memoryview slice struct, layout identical to Cython 0.29 .. 3.x. */
#define NT_MEMVIEW_MAX_DIMS 8
typedef struct {
    void *memview; /* NULL: no Python object behind it */
    char *data;
    ptrdiff_t shape[NT_MEMVIEW_MAX_DIMS];
    ptrdiff_t strides[NT_MEMVIEW_MAX_DIMS];
    ptrdiff_t suboffsets[NT_MEMVIEW_MAX_DIMS];
} nt_memviewslice;

/* Size of a DLPack DLTensor (numthunk/include/numthunk/dlpack.h, which
   convert/dlpack.c checks against this): 48 bytes on LP64. */
#define NT_DLTENSOR_SIZE (3 * sizeof(void *) + 16 + 8)

/* ------------------------------------------------------------------------ */
/* Signatures                                                                */

struct nt_sig {
    nt_type ret;
    int nargs;
    nt_type *args; /* nargs entries (owned) */
    char **names;  /* nargs entries, NULL where unnamed (owned) */
};

/* A name the parser does not know, resolved by the caller (Cython typedefs). */
typedef struct {
    const char *name;
    nt_type type; /* type.fn must be NULL */
} nt_typedef;

/*
 * Parses a C declaration as SciPy and Cython write it:
 *   "double (double *, int)", "void(const double* x, Py_ssize_t n)",
 *   "double const *", "double *const ", "void (void)",
 *   "double (*)(double)" as a parameter type.
 * An optional function name may stand before '('. Returns NULL and fills err
 * (with the 0-based column) on failure.
 */
nt_sig *nt_sig_parse(const char *src, const nt_typedef *typedefs, size_t ntypedefs, nt_error *err);

/* Parses a single type ("double", "const FLOAT64 *"). 0 on success. */
int nt_type_parse(const char *src, const nt_typedef *typedefs, size_t ntypedefs, nt_type *out,
                  nt_error *err);

void nt_sig_free(nt_sig *sig);
nt_sig *nt_sig_copy(const nt_sig *sig);

/* The struct name ("struct S", or a typedef's name) an opaque struct
   pointer carries in its `spelling`, or NULL if the spelling is not one. */
const char *nt_tag_name(unsigned spelling);

/* Canonical C form, e.g. "double (double *, int)". Writes at most n bytes
   (always NUL-terminated) and returns the length it needed. */
size_t nt_sig_format(const nt_sig *sig, char *buf, size_t n);
size_t nt_type_format(const nt_type *t, char *buf, size_t n);

/* Text for messages whose cut shows: snprintf into buf, and text that did
   not fit ends in "..." (its first n - 4 bytes, then the dots). Returns
   the length the whole text needed. nt_mark_cut marks buf so when a
   writer above (nt_sig_format) needed `needed` bytes. */
size_t nt_format_cut(char *buf, size_t n, const char *fmt, ...) NT_PRINTF(3, 4);
void nt_mark_cut(char *buf, size_t n, size_t needed);

/* Structural equality: kinds, pointer shapes, const, nested signatures;
   spellings and parameter names do not matter. Signatures compare as C's
   compatible function types: a parameter's or the result's own const is
   left out (double (const double) equals double (double)). */
int nt_type_equal(const nt_type *a, const nt_type *b);
int nt_sig_equal(const nt_sig *a, const nt_sig *b);

/* ------------------------------------------------------------------------ */
/* Plans and contexts                                                        */

/* Where a target argument comes from. */
typedef enum {
    NT_SRC_ARG = 0, /* forwarded: the thunk's own parameter number `fwd` */
    NT_SRC_BOUND    /* bound: bytes at ctx values + `offset` */
} nt_src;

typedef struct {
    uint8_t src;
    uint8_t kind;    /* the target parameter's kind (NT_PTR for pointers) */
    uint16_t fwd;    /* NT_SRC_ARG: index among the thunk's parameters */
    uint32_t offset; /* NT_SRC_BOUND: byte offset in ctx->values */
} nt_slot;

/*
 * A plan: the target signature plus one slot per target parameter. Bound
 * scalars occupy 8-byte value cells, stored already extended to 64 bits
 * (signed kinds sign-extended, unsigned and bool zero-extended; float in
 * the low 4 bytes); complex values 16 bytes; memoryview slices
 * sizeof(nt_memviewslice). Every cell is 8-byte aligned.
 *
 * The thunk's own signature is the target's return type and the forwarded
 * parameters in order: nfwd of them, fwd_index[k] = target parameter index.
 */
typedef struct nt_plan {
    const nt_sig *target; /* borrowed; outlives the plan */
    int nargs;            /* == target->nargs */
    nt_slot *slots;       /* nargs entries */
    int nfwd;
    int *fwd_index;     /* nfwd entries */
    size_t values_size; /* bytes of bound values */
    const struct nt_engine *engine;
    void *engine_data;    /* owned by the engine (cifs, handler, ...) */
    void *handler;        /* native: handler stored in word 0 of each ctx */
    char *text;           /* "<thunk signature> over <target's>", made
                             when a thunk of this plan is first torn down */
    struct nt_what *what; /* the description last made from it */
} nt_plan;

/*
 * A context: everything one call needs besides the forwarded arguments.
 * Word 0 is the handler (native engine: the stub jumps through it), word 1
 * the target. Contexts are immutable once published; rebinding publishes a
 * new one with a single release-store of the entry's context pointer.
 */
typedef struct nt_ctx {
    void *handler;        /* offset 0 */
    void *target;         /* offset 8 */
    struct nt_ctx *older; /* retired contexts, freed at release/reclaim */
    uint64_t pad_;
    unsigned char values[]; /* offset 32 */
} nt_ctx;

#define NT_CTX_HANDLER_OFFSET 0
#define NT_CTX_TARGET_OFFSET  8
#define NT_CTX_VALUES_OFFSET  32

/* Builds a plan for target; slots filled by the caller afterwards with
   nt_plan_set_arg / nt_plan_set_bound, then nt_plan_finish. */
nt_plan *nt_plan_new(const nt_sig *target, nt_error *err);
void nt_plan_set_arg(nt_plan *plan, int i);
void nt_plan_set_bound(nt_plan *plan, int i);
int nt_plan_finish(nt_plan *plan, nt_error *err); /* computes fwd, offsets */
void nt_plan_free(nt_plan *plan);
/*
 * What the released trap says of a thunk: "double (void) over double
 * (const double *, int)" (its own signature and its target's) and the
 * target's address. Laid out as a context (nt_ctx), so that a released
 * native entry's slot points straight at it: the handler the native engine
 * stores in it passes `text` and `target` (its two values) to
 * nt_trap_released_at. Shared by the thunks of a plan with one target and
 * by their released entries, reference-counted (a plan may go while its
 * released entries wait in the quarantine); immutable once made but for
 * `handler`, which is only ever set to the one trap handler.
 */
typedef struct nt_what {
    void *handler;      /* offset 0: the native trap handler, or NULL */
    void *trap;         /* offset 8: nt_trap_released_at */
    void *unused_;      /* offset 16 */
    size_t refs;        /* offset 24; atomic */
    const char *text;   /* offset 32: the context's first value */
    const void *target; /* offset 40: its second */
    char chars[];       /* what text points to */
} nt_what;

/* The description of the plan's thunks with this target, made or shared
   (GIL held); NULL when out of memory. Borrowed: nt_what_ref() to keep it. */
nt_what *nt_plan_what(nt_plan *plan, const void *target);
nt_what *nt_what_ref(nt_what *what); /* NULL passes through */
void nt_what_unref(nt_what *what);

/*
 * Plans are cached per target signature and shared by every thunk with the
 * same binding pattern (pattern[i] = 1 where parameter i is forwarded) and
 * engine request: a thunk then owns only its context and entry. The cache
 * belongs to the Signature object; plans it holds live as long as it.
 */
#define NT_PLAN_CACHE 8

typedef struct {
    nt_plan *plan;
    const struct nt_engine *wanted; /* the engine request it was made for */
    uint8_t *pattern;               /* nargs bytes */
} nt_plan_slot;

typedef struct {
    int n;
    nt_plan_slot slots[NT_PLAN_CACHE];
} nt_plan_cache;

/* Picks the engine for a new plan (nt_choose_engine). */
typedef const struct nt_engine *(*nt_engine_chooser)(const nt_plan *plan,
                                                     const struct nt_engine *wanted, nt_error *err);

/* The prepared plan for sig with this pattern and engine request, from the
   cache or made now with the engine choose() picks. *owned is set when the
   cache was full and the caller must free the plan. NULL with err filled
   on failure. */
nt_plan *nt_plan_cache_get(nt_plan_cache *cache, const nt_sig *sig, const uint8_t *pattern,
                           const struct nt_engine *wanted, nt_engine_chooser choose, int *owned,
                           nt_error *err);
void nt_plan_cache_free(nt_plan_cache *cache);

/*
 * The engine a name asks for, for every door a name comes through
 * (NUMTHUNK_ENGINE, engine= of bind() and Thunk(), numthunk_create's
 * flags): "native"; "ffi" or "libffi" (the name libffi thunks report);
 * "auto" or NULL, the configured default (*out NULL). Any other name, or
 * "native" where there is no native engine: NT_ERR_VALUE, the message
 * starting with where (e.g. "engine=") and the name (engine/choose.c).
 */
#define NT_ENGINE_NAMES "'native', 'ffi', 'libffi' or 'auto'"
nt_status nt_engine_parse(const char *name, const char *where, const struct nt_engine **out,
                          nt_error *err);

/* The engine a plan runs on: wanted (NULL: the configured one) if it can
   run the plan, else native if it can, else libffi. NULL, err filled, if
   none can (engine/choose.c). */
const struct nt_engine *nt_choose_engine(const nt_plan *plan, const struct nt_engine *wanted,
                                         nt_error *err);

/* The bytes of a context with room for the plan's values (a multiple of
   16), and one zeroed in place there (16-aligned memory) for target. */
size_t nt_ctx_size(const nt_plan *plan);
void nt_ctx_init(nt_ctx *ctx, const nt_plan *plan, void *target);
/* A zeroed context with room for the plan's values, allocated. */
nt_ctx *nt_ctx_new(const nt_plan *plan, void *target, nt_error *err);
/* Frees ctx and the contexts older than it, all but keep (memory that is
   not the chain's own: a thunk's first context, NULL if none). */
void nt_ctx_free_chain(nt_ctx *ctx, const nt_ctx *keep);

/* ------------------------------------------------------------------------ */
/* Backends                                                                  */

typedef struct nt_entry nt_entry; /* one thunk's callable entry; opaque */

/*
 * An entry as its engine handed it out, with that engine: swap and free go
 * to the engine that made the entry, which is not always the plan's (a
 * native plan's new entries are libffi closures once executable memory has
 * run out).
 */
typedef struct nt_entry_ref {
    const struct nt_engine *engine;
    nt_entry *entry; /* NULL: none yet, or freed */
} nt_entry_ref;

typedef struct nt_engine {
    const char *name; /* "native-x86_64-sysv", "libffi" */
    /* Thunks on this engine whose target is another thunk may nest this
       deep: each level calls the next, on the caller's C stack. */
    int chain_limit;
    /* NT_OK if this engine can run the plan, else NT_ERR_UNSUPPORTED. */
    nt_status (*supports)(const nt_plan *plan);
    /* Per-plan preparation: cifs, handler lookup. Sets plan->engine_data,
       plan->handler. */
    nt_status (*prepare)(nt_plan *plan, nt_error *err);
    void (*plan_release)(nt_plan *plan);
    /* A new entry that runs plan with ctx, and the engine that made it;
       *address is its C address. */
    nt_status (*entry_new)(nt_plan *plan, nt_ctx *ctx, nt_entry_ref *out, void **address,
                           nt_error *err);
    /* Publishes ctx (release-store); the old one stays valid. */
    void (*entry_swap)(nt_entry *entry, nt_ctx *ctx);
    /* The entry's address becomes a trap that names the thunk with what
       (the engine takes its own reference; NULL: no description). */
    void (*entry_free)(nt_entry *entry, nt_what *what);
    /* A short description of the executable-memory policy in use. */
    const char *(*memory_policy)(void);
} nt_engine;

/* Publishes ctx through the entry's own engine. */
static inline void nt_entry_swap(const nt_entry_ref *ref, nt_ctx *ctx)
{
    ref->engine->entry_swap(ref->entry, ctx);
}

/* Frees the entry, if any, through its own engine, its trap naming the
   thunk with what; the ref becomes empty. */
static inline void nt_entry_free(nt_entry_ref *ref, nt_what *what)
{
    if (ref->entry != NULL)
        ref->engine->entry_free(ref->entry, what);
    ref->entry = NULL;
}

extern const nt_engine nt_engine_ffi;
/* The libffi type of a value (struct ffi_type *). */
struct _ffi_type *nt_ffi_type_of(const nt_type *t);

/* A call from Python into a thunk's entry, whichever engine made it: the
   entry is a C function of the thunk's own type (its forwarded
   parameters), called through libffi (engine/ffi.c). */
typedef struct nt_call nt_call;
/* NULL with err set (NT_ERR_MEMORY, or NT_ERR_UNSUPPORTED when libffi
   cannot call the type). */
nt_call *nt_call_new(const nt_sig *sig, const nt_plan *plan, nt_error *err);
void nt_call_free(nt_call *call);
/* fn(args...) into ret, which holds 16 bytes, aligned for any scalar;
   args[k] points at forwarded argument k. */
void nt_call_run(const nt_call *call, void *fn, void *ret, void **args);
/* NULL on platforms without a native engine. */
extern const nt_engine *const nt_engine_native;

/* Writes "numthunk: called a released thunk", what the thunk was (what:
   nt_what text, and its target; either may be NULL) and what usually
   causes this to stderr, and aborts: with write() only, as it runs in any
   thread, without the GIL, maybe where nothing else is safe. */
void nt_trap_released(void);
void nt_trap_released_at(const char *what, const void *target);
/* The longest description text, with its NUL. */
#define NT_WHAT_MAX 224

/* ------------------------------------------------------------------------ */
/* Registry: thunks by entry address (life/registry.c)                           */

/* Enters owner at address, in place of whatever was there. -1: no
   memory. */
int nt_registry_add(void *owner, const void *address);
/* The owner at address (live or released), or NULL; *collected: the
   address is a freed owner's whose entry the quarantine still holds. */
void *nt_registry_find(const void *address, int *collected);
/* owner, entered at address, is freed: its address stays as a collected
   thunk's while the quarantine holds the entry released at stamp
   (nt_quarantine_clock), then it is forgotten. */
void nt_registry_bury(const void *owner, const void *address, uint64_t stamp);

#endif /* NUMTHUNK_H */
