/*
 * numthunk._core.Thunk: a target, its bound values and the entry that
 * makes them one C function pointer.
 *
 * Creation: parse nothing (the Signature is parsed already), lay out a plan,
 * convert every bound value into a context cell with full checks, ask the
 * backend for an entry. Buffers stay held (array alive, not resizable) for
 * as long as a context that points into them may be read: until release(),
 * or reclaim() for contexts retired by rebind().
 *
 * The entry never needs the GIL. __call__ (from Python) releases it only
 * for targets that declare nogil.
 */
#include "pyapi.h"

#include <ffi.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    PyObject_HEAD
    nt_SignatureObject *sig;   /* the target's signature */
    PyObject *owner;           /* keeps the target's code alive */
    void *target;
    nt_plan *plan;
    nt_entry *entry;
    void *address;
    nt_ctx *ctx;               /* the published context */
    PyObject **bound;          /* nargs: bound objects, NULL where forwarded */
    nt_held **held;            /* nargs: buffers the current binding holds */
    nt_held *retired;          /* buffers of replaced bindings */
    nt_mvspec *mvspecs;        /* nargs, or NULL when no memoryview params */
    PyObject *csig;            /* the thunk's own Signature, made on demand */
    PyObject *numba_type;      /* Numba's type of this function value, cached */
    ffi_cif *call_cif;         /* for __call__, made on demand */
    ffi_type **call_types;
    int nogil;
    int released;
    int plan_owned;            /* 1: not from the Signature's cache */
    atomic_long inflight;      /* __call__s in progress */
    PyObject *weakreflist;
} ThunkObject;


static int released_error(ThunkObject *self)
{
    if (self->released) {
        PyErr_SetString(PyExc_ValueError, "the thunk has been released");
        return -1;
    }
    return 0;
}

static void release_lists(ThunkObject *self)
{
    int n = self->sig != NULL ? self->sig->sig->nargs : 0;
    if (self->held != NULL)
        for (int i = 0; i < n; i++) {
            nt_held_release(self->held[i]);
            self->held[i] = NULL;
        }
    nt_held_release(self->retired);
    self->retired = NULL;
}

/* Tears everything down; idempotent. Waits for __call__s in other threads. */
static void thunk_teardown(ThunkObject *self)
{
    if (self->released)
        return;
    self->released = 1;
    if (atomic_load(&self->inflight) > 0) {
        Py_BEGIN_ALLOW_THREADS
        while (atomic_load(&self->inflight) > 0)
            usleep(50);
        Py_END_ALLOW_THREADS
    }
    if (self->entry != NULL && self->plan != NULL)
        self->plan->backend->entry_free(self->entry);
    self->entry = NULL;
    nt_ctx_free_chain(self->ctx);
    self->ctx = NULL;
    release_lists(self);
    int n = self->sig != NULL ? self->sig->sig->nargs : 0;
    if (self->bound != NULL)
        for (int i = 0; i < n; i++)
            Py_CLEAR(self->bound[i]);
    if (self->plan_owned)
        nt_plan_free(self->plan);
    self->plan = NULL;
}

static void thunk_dealloc(ThunkObject *self)
{
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    thunk_teardown(self);
    PyMem_Free(self->bound);
    PyMem_Free(self->held);
    PyMem_Free(self->mvspecs);
    PyMem_Free(self->call_cif);
    PyMem_Free(self->call_types);
    Py_XDECREF(self->csig);
    Py_XDECREF(self->numba_type);
    Py_XDECREF(self->owner);
    Py_XDECREF(self->sig);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* memviews: {index: (type_text, ndim, contig, const)} */
static int collect_mvspecs(ThunkObject *self, PyObject *memviews)
{
    const nt_sig *sig = self->sig->sig;
    int any = 0;
    for (int i = 0; i < sig->nargs; i++)
        any |= sig->args[i].kind == NT_MEMVIEW;
    if (memviews != NULL && memviews != Py_None && !PyDict_Check(memviews)) {
        PyErr_SetString(PyExc_TypeError, "memviews must be a dict {index: spec}");
        return -1;
    }
    if (!any) {
        if (memviews != NULL && memviews != Py_None && PyDict_Size(memviews) > 0) {
            PyErr_SetString(PyExc_ValueError,
                            "memoryview declarations given, but the signature has no "
                            "__Pyx_memviewslice parameter");
            return -1;
        }
        return 0;
    }
    self->mvspecs = PyMem_Calloc((size_t)sig->nargs, sizeof(nt_mvspec));
    if (self->mvspecs == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (memviews == NULL || memviews == Py_None)
        return 0;
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(memviews, &pos, &key, &value)) {
        long i = PyLong_AsLong(key);
        if (i == -1 && PyErr_Occurred())
            return -1;
        if (i < 0 || i >= sig->nargs || sig->args[i].kind != NT_MEMVIEW) {
            PyErr_Format(PyExc_ValueError,
                         "memoryview declaration for parameter %ld, which is not a "
                         "__Pyx_memviewslice parameter of this signature", i);
            return -1;
        }
        const char *text, *contig = NULL;
        int ndim, is_const;
        if (!PyArg_ParseTuple(value, "sizp", &text, &ndim, &contig, &is_const))
            return -1;
        nt_type t;
        nt_error err = { NT_OK, -1, "" };
        if (nt_type_parse(text, NULL, 0, &t, &err) != 0) {
            PyErr_Format(PyExc_ValueError, "memoryview %ld dtype '%s': %s", i, text, err.msg);
            return -1;
        }
        if (t.depth != 0 || !(NT_IS_INT(t.kind) || NT_IS_FLOAT(t.kind) || NT_IS_COMPLEX(t.kind))) {
            if (t.fn != NULL)
                nt_sig_free(t.fn);
            PyErr_Format(PyExc_ValueError,
                         "memoryview %ld dtype '%s' is not a scalar type", i, text);
            return -1;
        }
        if (ndim < 1 || ndim > NT_MEMVIEW_MAX_DIMS) {
            PyErr_Format(PyExc_ValueError, "memoryview %ld: ndim must be 1..%d",
                         i, NT_MEMVIEW_MAX_DIMS);
            return -1;
        }
        char c = contig != NULL ? contig[0] : 0;
        if (c != 0 && c != 'C' && c != 'F') {
            PyErr_Format(PyExc_ValueError, "memoryview %ld: contig must be 'C', 'F' or None", i);
            return -1;
        }
        self->mvspecs[i] = (nt_mvspec){ t.kind, ndim, c, is_const };
    }
    return 0;
}

static const nt_mvspec *mvspec_of(ThunkObject *self, int i)
{
    if (self->mvspecs == NULL || self->mvspecs[i].ndim == 0)
        return NULL;
    return &self->mvspecs[i];
}

static PyObject *thunk_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = { "signature", "address", "args", "owner", "nogil",
                              "memviews", "engine", NULL };
    PyObject *sigobj, *address, *values, *owner = Py_None, *memviews = Py_None;
    const char *engine = NULL;
    int nogil = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!OO!|OpOz:Thunk", kwlist,
                                     &nt_SignatureType, &sigobj, &address,
                                     &PyTuple_Type, &values, &owner, &nogil, &memviews,
                                     &engine))
        return NULL;
    const nt_backend *wanted = NULL;
    if (engine != NULL && strcmp(engine, "ffi") == 0) {
        wanted = &nt_backend_ffi;
    } else if (engine != NULL && strcmp(engine, "native") == 0) {
        if (nt_backend_native == NULL) {
            PyErr_SetString(PyExc_ValueError, "engine='native': this platform has no native backend");
            return NULL;
        }
        wanted = nt_backend_native;
    } else if (engine != NULL && strcmp(engine, "auto") != 0) {
        PyErr_Format(PyExc_ValueError, "engine must be 'native', 'ffi' or 'auto', not '%s'", engine);
        return NULL;
    }
    const nt_sig *sig = ((nt_SignatureObject *)sigobj)->sig;
    if (!PyLong_Check(address)) {
        PyErr_Format(PyExc_TypeError, "target address must be an int, got %.100s",
                     Py_TYPE(address)->tp_name);
        return NULL;
    }
    void *target = PyLong_AsVoidPtr(address);
    if (target == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "target address is 0 (NULL)");
        return NULL;
    }
    Py_ssize_t nvalues = PyTuple_GET_SIZE(values);
    if (nvalues != sig->nargs) {
        char text[512];
        nt_sig_format(sig, text, sizeof(text));
        PyErr_Format(PyExc_TypeError,
                     "the target '%s' takes %d argument%s, got %zd "
                     "(pass numthunk.ARG for each parameter the thunk forwards)",
                     text, sig->nargs, sig->nargs == 1 ? "" : "s", nvalues);
        return NULL;
    }
    if (sig->ret.kind == NT_MEMVIEW) {
        PyErr_SetString(PyExc_TypeError, "targets returning a memoryview slice are not supported");
        return NULL;
    }

    ThunkObject *self = (ThunkObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    atomic_init(&self->inflight, 0);
    Py_INCREF(sigobj);
    self->sig = (nt_SignatureObject *)sigobj;
    Py_INCREF(owner);
    self->owner = owner;
    self->target = target;
    self->nogil = nogil;
    size_t n = (size_t)(sig->nargs > 0 ? sig->nargs : 1);
    self->bound = PyMem_Calloc(n, sizeof(PyObject *));
    self->held = PyMem_Calloc(n, sizeof(nt_held *));
    if (self->bound == NULL || self->held == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    if (collect_mvspecs(self, memviews) < 0)
        goto error;

    nt_error err = { NT_OK, -1, "" };
    uint8_t small[64];
    uint8_t *pattern = sig->nargs <= 64 ? small : PyMem_Malloc((size_t)sig->nargs);
    if (pattern == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    for (int i = 0; i < sig->nargs; i++)
        pattern[i] = PyTuple_GET_ITEM(values, i) == nt_state.arg;
    self->plan = nt_signature_plan((nt_SignatureObject *)sigobj, pattern, wanted,
                                   &self->plan_owned, &err);
    if (pattern != small)
        PyMem_Free(pattern);
    if (self->plan == NULL)
        goto error_nt;
    const nt_backend *backend = self->plan->backend;
    self->ctx = nt_ctx_new(self->plan, target, &err);
    if (self->ctx == NULL)
        goto error_nt;
    for (int i = 0; i < sig->nargs; i++) {
        const nt_slot *s = &self->plan->slots[i];
        if (s->src != NT_SRC_BOUND)
            continue;
        PyObject *v = PyTuple_GET_ITEM(values, i);
        if (nt_convert(sig, i, v, self->ctx->values + s->offset, &self->held[i],
                       mvspec_of(self, i)) < 0)
            goto error;
        Py_INCREF(v);
        self->bound[i] = v;
    }
    if (backend->entry_new(self->plan, self->ctx, &self->entry, &self->address, &err) != NT_OK)
        goto error_nt;
    return (PyObject *)self;

error_nt:
    nt_raise(&err);
error:
    Py_DECREF(self);
    return NULL;
}

/* ---- attributes ---- */

static PyObject *thunk_address(ThunkObject *self, void *closure)
{
    (void)closure;
    if (released_error(self) < 0)
        return NULL;
    return PyLong_FromVoidPtr(self->address);
}

static PyObject *thunk_csig(ThunkObject *self, void *closure)
{
    (void)closure;
    if (self->csig != NULL)
        return Py_NewRef(self->csig);
    if (released_error(self) < 0)
        return NULL;
    nt_sig *copy = nt_sig_copy(self->sig->sig);
    if (copy == NULL)
        return PyErr_NoMemory();
    /* Keep the forwarded parameters (with their names), in order. */
    int k = 0;
    for (int i = 0; i < copy->nargs; i++) {
        if (self->plan->slots[i].src == NT_SRC_ARG) {
            copy->args[k] = copy->args[i];
            if (copy->names != NULL)
                copy->names[k] = copy->names[i];
            k++;
        } else {
            if (copy->args[i].fn != NULL)
                nt_sig_free(copy->args[i].fn);
            if (copy->names != NULL)
                free(copy->names[i]);
        }
    }
    copy->nargs = k;
    self->csig = nt_signature_wrap(Py_TYPE(self->sig), copy);
    return Py_XNewRef(self->csig);
}

/* Numba reads _numba_type_ twice for every call that passes the thunk to
   compiled code: a C getter with the type cached on the thunk keeps that
   off the Python level. The Python package supplies the hook that makes
   the type the first time (it imports Numba). */
static PyObject *thunk_numba_type(ThunkObject *self, void *closure)
{
    (void)closure;
    if (self->numba_type != NULL)
        return Py_NewRef(self->numba_type);
    if (nt_state.numba_type_hook == NULL) {
        PyErr_SetString(PyExc_AttributeError, "_numba_type_");
        return NULL;
    }
    PyObject *t = PyObject_CallOneArg(nt_state.numba_type_hook, (PyObject *)self);
    if (t == NULL)
        return NULL;
    self->numba_type = Py_NewRef(t);
    return t;
}

static PyObject *thunk_target_signature(ThunkObject *self, void *closure)
{
    (void)closure;
    return Py_NewRef(self->sig);
}

static PyObject *thunk_target(ThunkObject *self, void *closure)
{
    (void)closure;
    return Py_NewRef(self->owner);
}

static PyObject *thunk_target_address(ThunkObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromVoidPtr(self->target);
}

static PyObject *thunk_nogil(ThunkObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->nogil);
}

static PyObject *thunk_released(ThunkObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->released);
}

static PyObject *thunk_backend(ThunkObject *self, void *closure)
{
    (void)closure;
    if (released_error(self) < 0)
        return NULL;
    return PyUnicode_FromString(self->plan->backend->name);
}

/* (value or ARG, ...) in target parameter order */
static PyObject *thunk_bindings(ThunkObject *self, void *closure)
{
    (void)closure;
    if (released_error(self) < 0)
        return NULL;
    int n = self->sig->sig->nargs;
    PyObject *t = PyTuple_New(n);
    if (t == NULL)
        return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *v = self->bound[i] != NULL ? self->bound[i] : nt_state.arg;
        PyTuple_SET_ITEM(t, i, Py_NewRef(v != NULL ? v : Py_None));
    }
    return t;
}

/* ---- calling from Python ---- */

static int prepare_call_cif(ThunkObject *self)
{
    if (self->call_cif != NULL)
        return 0;
    const nt_plan *plan = self->plan;
    const nt_sig *sig = self->sig->sig;
    ffi_cif *cif = PyMem_Calloc(1, sizeof(ffi_cif));
    ffi_type **types = PyMem_Calloc((size_t)(plan->nfwd > 0 ? plan->nfwd : 1), sizeof(ffi_type *));
    if (cif == NULL || types == NULL) {
        PyMem_Free(cif);
        PyMem_Free(types);
        PyErr_NoMemory();
        return -1;
    }
    for (int k = 0; k < plan->nfwd; k++)
        types[k] = nt_ffi_type_of(&sig->args[plan->fwd_index[k]]);
    if (ffi_prep_cif(cif, FFI_DEFAULT_ABI, (unsigned)plan->nfwd,
                     nt_ffi_type_of(&sig->ret), types) != FFI_OK) {
        PyMem_Free(cif);
        PyMem_Free(types);
        PyErr_SetString(PyExc_NotImplementedError, "libffi cannot call this signature");
        return -1;
    }
    self->call_cif = cif;
    self->call_types = types;
    return 0;
}

static PyObject *thunk_call(ThunkObject *self, PyObject *args, PyObject *kwds)
{
    if (released_error(self) < 0)
        return NULL;
    if (kwds != NULL && PyDict_Size(kwds) > 0) {
        PyErr_SetString(PyExc_TypeError, "a thunk takes positional arguments only");
        return NULL;
    }
    const nt_plan *plan = self->plan;
    const nt_sig *sig = self->sig->sig;
    Py_ssize_t nargs = PyTuple_GET_SIZE(args);
    if (nargs != plan->nfwd) {
        PyErr_Format(PyExc_TypeError, "the thunk takes %d argument%s, got %zd",
                     plan->nfwd, plan->nfwd == 1 ? "" : "s", nargs);
        return NULL;
    }
    if (prepare_call_cif(self) < 0)
        return NULL;
    /* Each forwarded value gets a cell big enough for any kind. */
    nt_memviewslice *cells = NULL;
    void **avalues = NULL;
    nt_held *held = NULL;
    PyObject *result = NULL;
    if (plan->nfwd > 0) {
        cells = PyMem_Calloc((size_t)plan->nfwd, sizeof(nt_memviewslice));
        avalues = PyMem_Calloc((size_t)plan->nfwd, sizeof(void *));
        if (cells == NULL || avalues == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }
    for (int k = 0; k < plan->nfwd; k++) {
        int i = plan->fwd_index[k];
        if (nt_convert(sig, i, PyTuple_GET_ITEM(args, k), &cells[k], &held,
                       mvspec_of(self, i)) < 0)
            goto done;
        avalues[k] = &cells[k];
    }
    union { uint64_t w[2]; double d[2]; ffi_arg a; } ret;
    memset(&ret, 0, sizeof(ret));
    void *fn = self->address;
    atomic_fetch_add(&self->inflight, 1);
    if (self->nogil) {
        Py_BEGIN_ALLOW_THREADS
        ffi_call(self->call_cif, FFI_FN(fn), &ret, avalues);
        Py_END_ALLOW_THREADS
    } else {
        ffi_call(self->call_cif, FFI_FN(fn), &ret, avalues);
    }
    atomic_fetch_sub(&self->inflight, 1);
    /* A target that needs the GIL (Cython) may return with an exception set. */
    if (!self->nogil && PyErr_Occurred())
        goto done;
    result = nt_to_python(&sig->ret, &ret);
done:
    nt_held_release(held);
    PyMem_Free(cells);
    PyMem_Free(avalues);
    return result;
}

/* ---- rebind / reclaim / release ---- */

static int param_index(ThunkObject *self, PyObject *key)
{
    const nt_sig *sig = self->sig->sig;
    if (PyUnicode_Check(key)) {
        const char *name = PyUnicode_AsUTF8(key);
        if (name == NULL)
            return -1;
        for (int i = 0; i < sig->nargs; i++)
            if (sig->names != NULL && sig->names[i] != NULL && strcmp(sig->names[i], name) == 0)
                return i;
        PyErr_Format(PyExc_KeyError, "the target has no parameter named '%s'", name);
        return -1;
    }
    Py_ssize_t i = PyNumber_AsSsize_t(key, PyExc_IndexError);
    if (i == -1 && PyErr_Occurred())
        return -1;
    if (i < 0 || i >= sig->nargs) {
        PyErr_Format(PyExc_IndexError, "parameter index %zd out of range (the target has %d)",
                     i, sig->nargs);
        return -1;
    }
    return (int)i;
}

/* The object a binding reads from: the array inside strided()/size()/... */
static PyObject *source_of(PyObject *bound)
{
    if (bound == NULL)
        return NULL;
    if ((nt_state.strided_type != NULL
         && PyObject_TypeCheck(bound, (PyTypeObject *)nt_state.strided_type))
        || (nt_state.derived_type != NULL
            && PyObject_TypeCheck(bound, (PyTypeObject *)nt_state.derived_type))) {
        PyObject *obj = PyObject_GetAttrString(bound, "obj");
        if (obj == NULL)
            PyErr_Clear();
        return obj;   /* new reference */
    }
    return Py_NewRef(bound);
}

static PyObject *thunk_rebind(ThunkObject *self, PyObject *args)
{
    PyObject *key, *value;
    if (!PyArg_ParseTuple(args, "OO:rebind", &key, &value))
        return NULL;
    if (released_error(self) < 0)
        return NULL;
    int i = param_index(self, key);
    if (i < 0)
        return NULL;
    const nt_sig *sig = self->sig->sig;
    nt_plan *plan = self->plan;
    if (plan->slots[i].src != NT_SRC_BOUND) {
        PyErr_Format(PyExc_ValueError,
                     "parameter %d is forwarded (numthunk.ARG), not bound; it cannot be rebound",
                     i);
        return NULL;
    }
    if (value == nt_state.arg) {
        PyErr_SetString(PyExc_ValueError,
                        "rebind cannot turn a bound parameter into a forwarded one");
        return NULL;
    }
    int n = sig->nargs;
    nt_error err = { NT_OK, -1, "" };
    nt_ctx *fresh = NULL;
    nt_held **newheld = PyMem_Calloc((size_t)n, sizeof(nt_held *));
    PyObject **newbound = PyMem_Calloc((size_t)n, sizeof(PyObject *));
    PyObject *old_source = NULL, *new_source = NULL;
    if (newheld == NULL || newbound == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    fresh = nt_ctx_new(plan, self->target, &err);
    if (fresh == NULL) {
        nt_raise(&err);
        goto error;
    }
    memcpy(fresh->values, self->ctx->values, plan->values_size);
    if (nt_convert(sig, i, value, fresh->values + plan->slots[i].offset, &newheld[i],
                   mvspec_of(self, i)) < 0)
        goto error;
    newbound[i] = Py_NewRef(value);
    /* Values derived from the array this parameter held follow the new one. */
    old_source = source_of(self->bound[i]);
    new_source = source_of(value);
    for (int j = 0; j < n && old_source != NULL; j++) {
        PyObject *b = self->bound[j];
        if (j == i || b == NULL || nt_state.derived_type == NULL
            || !PyObject_TypeCheck(b, (PyTypeObject *)nt_state.derived_type))
            continue;
        PyObject *src = source_of(b);
        int same = src == old_source;
        Py_XDECREF(src);
        if (!same)
            continue;
        PyObject *marker = PyObject_CallMethod(b, "_with_obj", "O", new_source);
        if (marker == NULL)
            goto error;
        newbound[j] = marker;
        if (nt_convert(sig, j, marker, fresh->values + plan->slots[j].offset, &newheld[j],
                       mvspec_of(self, j)) < 0)
            goto error;
    }
    /* Publish: one release-store. The old context stays readable. */
    fresh->older = self->ctx;
    plan->backend->entry_swap(self->entry, fresh);
    self->ctx = fresh;
    for (int j = 0; j < n; j++) {
        if (newbound[j] == NULL)
            continue;
        nt_held *h = self->held[j];
        while (h != NULL) {
            nt_held *next = h->next;
            h->next = self->retired;
            self->retired = h;
            h = next;
        }
        self->held[j] = newheld[j];
        Py_XSETREF(self->bound[j], newbound[j]);
    }
    PyMem_Free(newheld);
    PyMem_Free(newbound);
    Py_XDECREF(old_source);
    Py_XDECREF(new_source);
    Py_RETURN_NONE;
error:
    if (newheld != NULL)
        for (int j = 0; j < n; j++)
            nt_held_release(newheld[j]);
    if (newbound != NULL)
        for (int j = 0; j < n; j++)
            Py_XDECREF(newbound[j]);
    PyMem_Free(newheld);
    PyMem_Free(newbound);
    free(fresh);
    Py_XDECREF(old_source);
    Py_XDECREF(new_source);
    return NULL;
}

static PyObject *thunk_reclaim(ThunkObject *self, PyObject *unused)
{
    (void)unused;
    if (released_error(self) < 0)
        return NULL;
    nt_ctx_free_chain(self->ctx->older);
    self->ctx->older = NULL;
    nt_held_release(self->retired);
    self->retired = NULL;
    Py_RETURN_NONE;
}

static PyObject *thunk_release(ThunkObject *self, PyObject *unused)
{
    (void)unused;
    thunk_teardown(self);
    Py_RETURN_NONE;
}

static PyObject *thunk_enter(ThunkObject *self, PyObject *unused)
{
    (void)unused;
    if (released_error(self) < 0)
        return NULL;
    return Py_NewRef(self);
}

static PyObject *thunk_exit(ThunkObject *self, PyObject *args)
{
    (void)args;
    thunk_teardown(self);
    Py_RETURN_FALSE;
}

static PyGetSetDef thunk_getset[] = {
    { "address", (getter)thunk_address, NULL, "the thunk's C address (int)", NULL },
    { "csig", (getter)thunk_csig, NULL, "the thunk's own C signature", NULL },
    { "target_signature", (getter)thunk_target_signature, NULL, "the target's signature", NULL },
    { "target", (getter)thunk_target, NULL, "the target object", NULL },
    { "target_address", (getter)thunk_target_address, NULL, "the target's C address", NULL },
    { "nogil", (getter)thunk_nogil, NULL, "whether the target may run without the GIL", NULL },
    { "released", (getter)thunk_released, NULL, "whether release() was called", NULL },
    { "backend", (getter)thunk_backend, NULL, "the engine running this thunk", NULL },
    { "bindings", (getter)thunk_bindings, NULL, "bound values, ARG where forwarded", NULL },
    { "_numba_type_", (getter)thunk_numba_type, NULL, "Numba's type of this function value", NULL },
    { NULL, NULL, NULL, NULL, NULL }
};

static PyMethodDef thunk_methods[] = {
    { "rebind", (PyCFunction)thunk_rebind, METH_VARARGS,
      "rebind(index_or_name, value): replace a bound value; .address does not change" },
    { "reclaim", (PyCFunction)thunk_reclaim, METH_NOARGS,
      "free contexts and buffers retired by rebind(); no call may be in flight" },
    { "release", (PyCFunction)thunk_release, METH_NOARGS,
      "free the thunk; its address traps from now on; no call may be in flight" },
    { "__enter__", (PyCFunction)thunk_enter, METH_NOARGS, NULL },
    { "__exit__", (PyCFunction)thunk_exit, METH_VARARGS, NULL },
    { NULL, NULL, 0, NULL }
};

PyTypeObject nt_ThunkType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "numthunk._core.Thunk",
    .tp_basicsize = sizeof(ThunkObject),
    .tp_dealloc = (destructor)thunk_dealloc,
    .tp_call = (ternaryfunc)thunk_call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Thunk(signature, address, args, owner=None, nogil=True, memviews=None)",
    .tp_weaklistoffset = offsetof(ThunkObject, weakreflist),
    .tp_getset = thunk_getset,
    .tp_methods = thunk_methods,
    .tp_new = thunk_new,
};
