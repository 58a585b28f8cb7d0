/*
 * Internal header of the Python layer: the C types the extension exposes
 * and the helpers they share. Everything that touches PyObject lives above
 * this line of the pipeline; types.c, sig.c, plan.c and the backends never
 * include it.
 */
#ifndef NUMTHUNK_PYAPI_H
#define NUMTHUNK_PYAPI_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdatomic.h>

#include "numthunk.h"

/* ---- module state (single-phase module: one instance per process) ---- */

typedef struct {
    PyTypeObject *signature_type;
    PyTypeObject *thunk_type;
    /* Registered by the Python package at import (numthunk/_api.py). */
    PyObject *arg;            /* the ARG sentinel */
    PyObject *derived_type;   /* size()/shape()/stride() markers */
    PyObject *strided_type;   /* strided(arr): non-contiguous allowed */
    PyObject *address_type;   /* address(n): an explicit pointer value */
    PyObject *adapt;          /* adapt(obj, sig, index) -> replacement */
    PyObject *numba_type_hook; /* hook(thunk) -> Numba type (set by numthunk._api) */
    const nt_backend *forced; /* NUMTHUNK_BACKEND, or NULL for automatic */
    /* interned attribute names of the markers */
    PyObject *s_kind, *s_obj, *s_axis, *s_elements, *s_value, *s_size, *s_shape;
} nt_module_state;

extern nt_module_state nt_state;

/* ---- Signature ---- */

/* Plans are cached on the target's Signature object and shared by every
   thunk with the same binding pattern and engine request: a thunk then
   owns only its context and entry. */
#define NT_PLAN_CACHE 8

typedef struct {
    nt_plan *plan;
    const nt_backend *wanted;   /* the engine request the plan was made for */
    uint8_t *pattern;           /* nargs bytes: 1 where forwarded */
} nt_plan_slot;

typedef struct {
    PyObject_HEAD
    nt_sig *sig;
    Py_hash_t hash;           /* -1 until computed */
    int nplans;
    nt_plan_slot plans[NT_PLAN_CACHE];
} nt_SignatureObject;

/* The plan for this signature with pattern[i] = 1 where parameter i is
   forwarded. *owned is set when the cache was full and the caller must
   free the plan. NULL with err filled on failure. */
nt_plan *nt_signature_plan(nt_SignatureObject *self, const uint8_t *pattern,
                           const nt_backend *wanted, int *owned, nt_error *err);

extern PyTypeObject nt_SignatureType;

/* A new Signature object that takes ownership of sig (freed on failure). */
PyObject *nt_signature_wrap(PyTypeObject *type, nt_sig *sig);
/* Raises the ValueError for a parse error, with the source and a caret. */
void nt_raise_parse_error(const char *src, const nt_error *err);
/* Raises the Python exception matching err->status. */
void nt_raise(const nt_error *err);

/* ---- descriptors (descr.c) ---- */

/* A bound buffer: the Py_buffer is held for as long as the binding lives. */
typedef struct nt_held {
    Py_buffer view;
    struct nt_held *next;     /* retired list */
} nt_held;

typedef struct {
    int kind;                 /* element kind, NT_VOID if the format is not a scalar */
    int is_char;              /* format 'c' */
    const char *format;       /* as exported ("B" when the exporter gave none) */
} nt_elem;

/* Acquires a buffer with strides and format. Returns NULL with an
   exception set (naming the parameter through `what`). */
nt_held *nt_held_get(PyObject *obj, const char *what);
void nt_held_release(nt_held *h);
/* Decodes the PEP 3118 format of a held buffer into an element kind. */
int nt_elem_decode(const Py_buffer *view, nt_elem *out, const char *what);
int nt_is_aligned(const Py_buffer *view, size_t align);

/* ---- conversion (convert.c) ---- */

/* "argument 2 (n: int)" for target parameter i (0-based). */
void nt_param_label(const nt_sig *sig, int i, char *buf, size_t n);

/* A memoryview declaration for an NT_MEMVIEW parameter. */
typedef struct {
    int kind;                 /* element kind */
    int ndim;
    char contig;              /* 'C', 'F' or 0 */
    int is_const;
} nt_mvspec;

/*
 * Converts value for target parameter i into cell (8, 16 or
 * sizeof(nt_memviewslice) bytes as plan.c lays them out). Buffers it
 * acquires are pushed onto *held (the caller owns and releases them).
 * mv is the declaration for NT_MEMVIEW parameters, else NULL.
 * Returns 0, or -1 with an exception set that names the parameter.
 */
int nt_convert(const nt_sig *sig, int i, PyObject *value, void *cell,
               nt_held **held, const nt_mvspec *mv);

/* The C return value at ret (ffi_arg-widened for narrow types) as Python. */
PyObject *nt_to_python(const nt_type *t, const void *ret);

/* ---- Thunk ---- */

extern PyTypeObject nt_ThunkType;

/* The backend a plan runs on: wanted (or NUMTHUNK_BACKEND) if it can run
   the plan, else native if it can, else libffi. */
const nt_backend *nt_choose_backend(const nt_plan *plan, const nt_backend *wanted,
                                    nt_error *err);

#endif /* NUMTHUNK_PYAPI_H */
