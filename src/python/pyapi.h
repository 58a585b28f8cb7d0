/*
 * Internal header of the Python layer: the C types the extension exposes
 * and the helpers they share. Everything that touches PyObject lives above
 * this line of the pipeline; parse/spellings.c, parse/declarator.c, plan/plan.c and the engines never
 * include it.
 *
 * Place in the pipeline: python: shared by the Python boundary and the
 * convert stage.
 */
#ifndef NUMTHUNK_PYAPI_H
#define NUMTHUNK_PYAPI_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <structmember.h>

#include "numthunk.h"

/* ---- module state (python/module.c; docs/architecture.md, "The C/Python
   boundary") ---- */

/*
 * What the module owns. The types, made from specs when the module is
 * executed (heap types, each holding the module), and the ARG singleton;
 * the C API capsule; and the callables the Python package registers once
 * (numthunk._core._register, at the end of numthunk/_api.py's import), so
 * that C never looks the package's classes up by name. thunk_class is the
 * package's Thunk: the hooks apply to it and its subclasses, and the C API
 * makes its thunks of it; the core type alone resolves nothing (the
 * converter refuses foreign values by name). The hooks are NULL until
 * registered.
 */
typedef struct {
    PyTypeObject *signature_type;                                        /* python/signature.c */
    PyTypeObject *thunk_type;                                            /* python/thunk.c */
    PyTypeObject *function_type;                                         /* python/function.c */
    PyTypeObject *arg_type, *derived_type, *strided_type, *address_type; /* convert/markers.c */
    PyObject *arg;                                                       /* the ARG singleton */
    PyObject *capi;            /* numthunk._core._C_API (python/capi.c) */
    PyTypeObject *thunk_class; /* numthunk.Thunk */
    PyObject *resolve_values;  /* (sig, values, owner) -> values: before creation */
    PyObject *resolve_call;    /* (thunk, args) -> args: before a call */
    PyObject *resolve_rebind;  /* (thunk, index, value) -> value: before a rebind */
    PyObject *numba_type;      /* (thunk) -> Numba's type of it */
} nt_state;

/* The state of the one module object (one core per process: a second
   exec of the module fails), set by its exec and cleared when the module
   is freed. Read it through nt_get_state() only. */
extern nt_state *nt_core_state;

/* The module state: the one accessor every file uses to reach the types,
   ARG and the registered callables. Valid whenever code of the core runs
   for one of its objects (each holds its type, each type the module). */
static inline nt_state *nt_get_state(void)
{
    return nt_core_state;
}

/* A new tuple of n borrowed references (new references in it); NULL on
   error. */
static inline PyObject *nt_tuple_of(PyObject *const *items, Py_ssize_t n)
{
    PyObject *t = PyTuple_New(n);
    for (Py_ssize_t i = 0; t != NULL && i < n; i++)
        PyTuple_SET_ITEM(t, i, Py_NewRef(items[i]));
    return t;
}

/* Whether the registered hooks apply to objects of type tp: tp is the
   registered thunk class or a subclass of it. */
int nt_state_hooks_for(const nt_state *st, PyTypeObject *tp);

/* ---- the state lock: free-threaded builds (docs/architecture.md) ----
   Every counter, flag, graph link, table and cache of the Python layer
   (thunks, the registry, the Signatures' plan caches, the registered
   thunk class and hooks of the module state) changes with the GIL held
   where there is a GIL. Without one
   (Py_GIL_DISABLED) the same code runs inside a critical section on one
   process-wide object, nt_state_lock (python/module.c): held while the code
   runs, suspended wherever the thread detaches (the GIL let go around a
   target, a wait, a lock another thread holds) as the GIL would have
   been let go, so the "resolve, then commit" reasoning holds unchanged:
   after Python code or a call that may block, state is checked again.
   NT_LOCK_BEGIN/NT_LOCK_END open and close a block holding it;
   NT_LOCK/NT_UNLOCK take and leave it through an nt_lock_state, so that
   a callee can leave it around a target called from Python. With the GIL
   they are nothing: a plain block, and no code on any path. */
#ifdef Py_GIL_DISABLED
extern PyObject *nt_state_lock;
/* CPython is not built with ThreadSanitizer: its mutexes are invisible to
   it, so a TSan build (NUMTHUNK_SANITIZE=thread) tells it of the lock. */
#if defined(__SANITIZE_THREAD__)
#define NT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define NT_TSAN 1
#endif
#endif
#ifdef NT_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define NT_TSAN_ACQUIRE() __tsan_acquire(&nt_state_lock)
#define NT_TSAN_RELEASE() __tsan_release(&nt_state_lock)
/* The core's own blocks come from the C allocator in a TSan build.
   CPython's allocator (mimalloc) is not built with TSan: a block one
   thread read and freed, then handed to another by mimalloc, looks like
   a race between the reader and the new owner (TSan sees no free). TSan
   intercepts malloc and free, so through them the block is new memory.
   Every block the core frees with PyMem_Free it also allocated. */
#define PyMem_Malloc      PyMem_RawMalloc
#define PyMem_Calloc      PyMem_RawCalloc
#define PyMem_Realloc     PyMem_RawRealloc
#define PyMem_Free        PyMem_RawFree
#else
#define NT_TSAN_ACQUIRE() ((void)0)
#define NT_TSAN_RELEASE() ((void)0)
#endif
/* Where the section may have been suspended and resumed unseen (after
   Python code, a buffer release, a decref), what the thread did before
   is released and what others did meanwhile acquired, as the real lock
   did: both annotations are true while the lock is held. */
#define NT_TSAN_SYNC() (NT_TSAN_RELEASE(), NT_TSAN_ACQUIRE())
typedef PyCriticalSection nt_lock_state;
#define NT_LOCK(s)   (PyCriticalSection_Begin((s), nt_state_lock), NT_TSAN_ACQUIRE())
#define NT_UNLOCK(s) (NT_TSAN_RELEASE(), PyCriticalSection_End(s))
#else
typedef char nt_lock_state;
#define NT_LOCK(s)     ((void)(s))
#define NT_UNLOCK(s)   ((void)(s))
#define NT_TSAN_SYNC() ((void)0)
#endif
// clang-format off
#define NT_LOCK_BEGIN { nt_lock_state nt_lock_; NT_LOCK(&nt_lock_);
#define NT_LOCK_END NT_UNLOCK(&nt_lock_); }
// clang-format on
int nt_state_lock_ready(void);

/* ---- binding markers (convert/markers.c): C types, read as structs ---- */

/* The ARG singleton, the module's (its type has no other instance). */
#define NT_ARG (nt_get_state()->arg)

enum { NT_DERIVED_SIZE = 0, NT_DERIVED_SHAPE, NT_DERIVED_STRIDE };

typedef struct {
    PyObject_HEAD
    PyObject *obj; /* the array the value is derived from */
    Py_ssize_t axis;
    int kind;     /* NT_DERIVED_* */
    int elements; /* stride in elements rather than bytes */
} nt_DerivedObject;

typedef struct {
    PyObject_HEAD
    PyObject *obj;
} nt_StridedObject;

typedef struct {
    PyObject_HEAD
    PyObject *owner; /* kept alive with the binding */
    uintptr_t value;
    int needs_gil; /* a function that needs the GIL (nogil=False) */
} nt_AddressObject;

#define nt_is_derived(v) (Py_TYPE(v) == nt_get_state()->derived_type)
#define nt_is_strided(v) (Py_TYPE(v) == nt_get_state()->strided_type)
#define nt_is_address(v) (Py_TYPE(v) == nt_get_state()->address_type)

/* The most axes an array may have: NumPy's NPY_MAXDIMS was 32 and is 64
   since NumPy 2; an axis beyond it names no dimension of any array. */
#define NT_MAX_AXES 64

/* A pointer value from an int or an object with __index__ (floats and
   bools refused): 0 .. UINTPTR_MAX, else an OverflowError "<what> 0x...
   is not a valid pointer value (0 to 2**64 - 1)". 0, or -1 with an
   exception set. */
int nt_pointer_value(PyObject *value, const char *what, uintptr_t *out);

/* A new Derived marker (what rebind() binds to a derived parameter that
   follows its array). */
PyObject *nt_derived_new(int kind, PyObject *obj, Py_ssize_t axis, int elements);
/* Each type's exec step: the type (or types) made from its spec with the
   module, kept in st and added to the module. 0, or -1 with an exception. */
int nt_markers_add(PyObject *module, nt_state *st);

/* ---- Signature ---- */

typedef struct {
    PyObject_HEAD
    nt_sig *sig;
    Py_hash_t hash;      /* -1 until computed */
    nt_plan_cache plans; /* plans for the binding patterns seen so far */
} nt_SignatureObject;

/* The plan for this signature with pattern[i] = 1 where parameter i is
   forwarded. *owned is set when the cache was full and the caller must
   free the plan. NULL with err filled on failure. */
nt_plan *nt_signature_plan(nt_SignatureObject *self, const uint8_t *pattern,
                           const nt_engine *wanted, int *owned, nt_error *err);

int nt_signature_add(PyObject *module, nt_state *st);

/* A new Signature object that takes ownership of sig (freed on failure). */
PyObject *nt_signature_wrap(PyTypeObject *type, nt_sig *sig);

/* ---- Function (python/function.c) ---- */

/* numthunk._core.Function, the base of numthunk.Function: what binding
   reads of a function, as fields (each NULL while unset, as a slot). */
typedef struct {
    PyObject_HEAD
    PyObject *signature;   /* _signature: a Signature */
    PyObject *address;     /* an int */
    PyObject *nogil;       /* a bool */
    PyObject *memoryviews; /* {index: declaration} */
    PyObject *depends;     /* a tuple of thunks */
    PyObject *fixed;       /* {index: value} */
    PyObject *carried;     /* _carried: the thunk this function is, or None */
} nt_FunctionObject;

int nt_function_add(PyObject *module, nt_state *st);

/* ---- descriptors (convert/buffer.c) ---- */

/* A bound buffer: the Py_buffer is held for as long as the binding lives. */
typedef struct nt_held {
    Py_buffer view;
    struct nt_held *next; /* retired list */
} nt_held;

typedef struct {
    int kind;           /* element kind, NT_VOID if the format is not a scalar */
    const char *format; /* as exported ("B" when the exporter gave none) */
} nt_elem;

/* Acquires a buffer with strides and format. Returns NULL with an
   exception set (naming the parameter through `what`). */
nt_held *nt_held_get(PyObject *obj, const char *what);
void nt_held_release(nt_held *h);
/* The layout an exporter gave for a PyBUF_FULL_RO request, checked: a shape
   where ndim > 0, no negative count, no suboffsets, len = itemsize x the
   elements. 0, or -1 with an exception naming `what`. */
int nt_view_check(PyObject *obj, const Py_buffer *view, const char *what);
/* Decodes the PEP 3118 format of a held buffer into an element kind. */
int nt_elem_decode(const Py_buffer *view, nt_elem *out, const char *what);
/* A struct buffer's fields in the host's byte order: 0, or -1 with a
   TypeError starting with `what` that names the first field in the other. */
int nt_struct_check_order(const Py_buffer *view, const char *what);
/* Items of plain data: no Python object ('O') among them, at any depth
   of a struct. 0, or -1 with a TypeError starting with `what` that names
   the field. Every buffer bound to a pointer or memoryview passes it. */
int nt_check_plain(const Py_buffer *view, const char *what);
/* The alignment a struct buffer's items need: their most aligned field's,
   no more than divides the item size (a packed struct's is 1). */
size_t nt_struct_align(const Py_buffer *view);
int nt_is_aligned(const Py_buffer *view, size_t align);
/* 0 if it is, else -1 with a ValueError starting with `what`; of_struct:
   align is that of a struct's items (nt_struct_align), which NumPy's own
   alignment does not know. */
int nt_check_aligned(const Py_buffer *view, size_t align, int of_struct, const char *what);
/* 1 for the buffer of a pointer object (a ctypes c_void_p, c_char_p or
   POINTER instance exports the pointer's own bytes): what it means is its
   value, an address, not an array. */
int nt_is_pointer_buffer(const Py_buffer *v);

/* ---- conversion (convert/value.c) ---- */

/* "argument 2 (n: int)" for target parameter i (0-based). */
void nt_param_label(const nt_sig *sig, int i, char *buf, size_t n);

/* A parameter's label for messages ("argument 2 (n: int)"), formatted only
   when a message needs it, so that the checks that pass never pay for it;
   or fixed text where there is no signature (the C API). */
typedef struct {
    const nt_sig *sig;
    int i;
    const char *fixed; /* NULL: the label of parameter i of sig */
    int done;
    int call; /* a forwarded value of a call from Python (nt_convert_arg) */
    char text[256];
} nt_label;
const char *nt_label_text(nt_label *l);

/* A memoryview declaration for an NT_MEMVIEW parameter. */
typedef struct {
    int kind; /* element kind */
    int ndim;
    char contig; /* 'C', 'F' or 0 */
    int is_const;
} nt_mvspec;

/*
 * Converts value for target parameter i into cell (8, 16 or
 * sizeof(nt_memviewslice) bytes as plan/plan.c lays them out). A buffer it
 * must hold is pushed onto *held (the caller owns and releases it);
 * NumPy arrays are not held: the reference the binding keeps pins them
 * as a held buffer would (resize() refuses either way). *key, when not
 * NULL, receives the layout key of the buffer the value reads (its own
 * for pointers, its array's for size()/shape()/stride(); 0 for none):
 * rebind() matches derived values to their array by it.
 * mv is the declaration for NT_MEMVIEW parameters, else NULL.
 * Runs no code of the Python package; __index__/__float__ of the value
 * itself may run. Returns 0, or -1 with an exception set that names the
 * parameter.
 */
int nt_convert(const nt_sig *sig, int i, PyObject *value, void *cell, nt_held **held,
               const nt_mvspec *mv, uint64_t *key);

/* nt_convert for a forwarded value of a call from Python: an array or a
   sequence refused for a scalar parameter is also told that a SciPy
   routine calling its function with arrays takes t.lowlevelcallable(). */
int nt_convert_arg(const nt_sig *sig, int i, PyObject *value, void *cell, nt_held **held,
                   const nt_mvspec *mv);

/* 1 if value, bound to parameter t, needs the Python package to turn it
   into something nt_convert takes (a ctypes or cffi object, arr.ctypes,
   a Function or thunk for a function pointer, a ref() cell); else 0; -1
   with the exception set when asking the value ran code that raised one
   that passes (nt_error_passes: a KeyboardInterrupt). */
int nt_needs_resolve(const nt_type *t, PyObject *value);

/* The value of derived marker d (size/shape/stride) read from the
   buffer of new_source: what rebind() stores for a value that follows its
   array. 0, or -1 with an exception set. */
int nt_convert_derived_from(const nt_sig *sig, int j, nt_DerivedObject *d, PyObject *new_source,
                            void *cell, uint64_t *key);

/* The C return value at ret (ffi_arg-widened for narrow types) as Python. */
PyObject *nt_to_python(const nt_type *t, const void *ret);

/* ---- Thunk ---- */

/* The Thunk type (and, once per process, the fork() counter of calls in
   flight and the registry's layout). */
int nt_thunk_add(PyObject *module, nt_state *st);
int nt_binder_add(PyObject *module);
/* Memoryview declarations read against a signature (python/memviews.c). */
int nt_mvspecs_read(const nt_sig *sig, PyObject *memviews, nt_mvspec **out);

/*
 * The commit of a new thunk, where Thunk() and the C API (python/capi.c) end:
 * values (nvalues borrowed references, one per target parameter, NT_ARG
 * where forwarded; the caller holds them for the call) are
 * resolved already (no foreign objects: see nt_needs_resolve), so what
 * runs here is the C converter and the publication. owner (NULL: None) is
 * kept alive with the thunk; memviews as Thunk() takes them (NULL: none);
 * wanted: the engine asked for, NULL for the automatic choice; via: the
 * thunks the target declares it uses (Function.depends; NULL: none);
 * carried: the thunk whose address the target is, as the target's
 * spelling carries it (Function._carried; NULL or None: none, the target
 * address is looked up in the registry).
 */
PyObject *nt_thunk_create(PyTypeObject *type, nt_SignatureObject *sig, void *target,
                          PyObject *const *values, Py_ssize_t nvalues, PyObject *owner, int nogil,
                          PyObject *memviews, const nt_engine *wanted, PyObject *via,
                          PyObject *carried);
/* numthunk._core._new_thunk(type, signature, address, args, owner, nogil,
   memviews, engine, via, carried): type(signature, ...) as Thunk() takes its
   arguments by position, without the argument tuple and the type call
   (bind()'s path; a type with an __init__ of its own does not come here). */
PyObject *nt_thunk_new_positional(PyObject *module, PyObject *const *args, Py_ssize_t n);
/* The resolve phase before nt_thunk_create: values the converter does not
   know (ctypes/cffi objects, arr.ctypes, ref() cells, functions for
   function pointers, buffers for struct pointers) go to the registered
   resolve_values(sig, values, owner) when type is the package's thunk
   class or a subclass (nt_state), Python code of the package
   (owner, the target's owner or NULL, carries the target's declarations:
   the layouts of the structs it takes). 0 with *resolved NULL when the
   values bind as they are, or a new reference to the tuple of values to
   bind instead; -1 on error. */
int nt_thunk_resolve(PyTypeObject *type, nt_SignatureObject *sig, PyObject *const *values,
                     Py_ssize_t nvalues, PyObject *owner, PyObject **resolved);
/* rebind(key, value) of a thunk (an instance of the Thunk type), the one the
   method and the C API share: key an index or a name; a foreign value is
   resolved by the registered resolve_rebind first. 0, or -1 with an
   exception set. */
int nt_thunk_rebind_key(PyObject *thunk, PyObject *key, PyObject *value);
/* The address of a thunk (NULL with ValueError once released) and its
   release(); thunk must be an instance of the Thunk type. */
void *nt_thunk_address(PyObject *thunk);
int nt_thunk_release(PyObject *thunk);

/* ---- errors (python/errors.c) ---- */

/* Raises the Python exception matching err->status. */
void nt_raise(const nt_error *err);
/* Raises the ValueError for a parse error, with the source and a caret. */
void nt_raise_parse_error(const char *src, const nt_error *err);
/* raise exc with a formatted message, chained to the exception now set;
   an exception that passes (below) is left as it is */
void nt_raise_chained(PyObject *exc, const char *fmt, ...);
/* 1 if the exception now set propagates unchanged through a conversion:
   no Exception (KeyboardInterrupt, SystemExit), MemoryError, RecursionError */
int nt_error_passes(void);
/* The exception now set, put aside (and cleared) while cleanup that may run
   Python code (a DLPack deleter, a buffer release) runs; restored after. */
typedef struct {
    PyObject *type, *exc, *tb;
} nt_saved_error;
void nt_error_save(nt_saved_error *saved);
void nt_error_restore(nt_saved_error *saved);

#endif /* NUMTHUNK_PYAPI_H */
