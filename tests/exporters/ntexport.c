/*
 * ntexport: exporters of exactly the layouts a test asks for, so that the
 * buffer, DLPack, Numba and pickling tests can offer numthunk what NumPy
 * never makes (built by tests/ntbuild.py's build_extension).
 *
 *   Buffer(base, format, itemsize, shape, strides=None, suboffsets=None,
 *          offset=0, readonly=False, honour=True, ndim=None, len=None)
 *       A buffer exporter over base's memory (any writable or read-only
 *       buffer), starting offset bytes in. Every field is as given: None
 *       for format, shape, strides or suboffsets exports NULL. honour=True
 *       answers the request flags as PEP 3118 asks (NULL format without
 *       PyBUF_FORMAT, BufferError for a writable request of read-only
 *       memory, for strides not requested on a non-contiguous layout, for
 *       suboffsets without PyBUF_INDIRECT); honour=False fills every field
 *       whatever was requested. .exports counts the views not yet released,
 *       .requests the flags of each request. .on_get (None, or a callable
 *       of no arguments set by the test) runs inside every request before
 *       anything is exported: it may change what the caller holds, and its
 *       exception refuses the request.
 *
 *   Tensor(base, code, bits, shape, strides=None, lanes=1, data_offset=0,
 *          byte_offset=0, device=(1, 0), reported_device=None,
 *          versioned=True, version=(1, 1), flags=0, keywords=True,
 *          has_device=True, ndim=None, deleter=True)
 *       A DLPack exporter: __dlpack__ makes a new managed tensor per call,
 *       its data base's memory + data_offset, its byte_offset, dtype,
 *       shape and strides (None: NULL) as given. versioned=False or a call
 *       without max_version exports a legacy "dltensor" capsule;
 *       keywords=False makes __dlpack__ refuse keywords as exporters that
 *       predate the versioned protocol do; has_device=False hides
 *       __dlpack_device__. .exported and .deleted count managed tensors
 *       made and deleted (by their deleter, once each). deleter=False
 *       exports managed tensors whose deleter is NULL, as DLPack allows
 *       a producer that keeps the memory alive itself: the Tensor frees
 *       them when it goes.
 *
 *   kernels: {name: address} of C functions that read memory as described
 *       (the tests' independent computation), exported by name as well
 *       (Function.from_library(ntexport.__file__, name, ...) pickles):
 *       uintptr_t nt_x_addr(const void *p)
 *       double nt_x_sum(const void *p, int code, ptrdiff_t n0, ptrdiff_t n1,
 *                       ptrdiff_t s0, ptrdiff_t s1)
 *           the sum of the n0 x n1 elements at p + i*s0 + j*s1 (bytes),
 *           read as the struct-module code ('b', 'B', 'h', 'H', 'i', 'I',
 *           'q', 'Q', 'f', 'd', '?'; 'F', 'D': complex, real + 10 imag);
 *       double nt_x_sum_elems(...): the same, strides counted in elements;
 *       double nt_x_sum_n(const void *p, int code, size_t n): n contiguous.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <stdint.h>
#include <string.h>

#include "numthunk/dlpack.h"

/* ---- kernels (exported: Function.from_library finds them by name) ---- */

uintptr_t nt_x_addr(const void *p);
double nt_x_sum(const void *p, int code, ptrdiff_t n0, ptrdiff_t n1, ptrdiff_t s0,
                ptrdiff_t s1);
double nt_x_sum_elems(const void *p, int code, ptrdiff_t n0, ptrdiff_t n1, ptrdiff_t e0,
                      ptrdiff_t e1);
double nt_x_sum_n(const void *p, int code, size_t n);

uintptr_t nt_x_addr(const void *p)
{
    return (uintptr_t)p;
}

static size_t code_size(int code)
{
    switch (code) {
    case 'b': case 'B': case '?': return 1;
    case 'h': case 'H': return 2;
    case 'i': case 'I': case 'f': return 4;
    case 'q': case 'Q': case 'd': case 'F': return 8;
    case 'D': return 16;
    default: return 0;
    }
}

/* One element read as the struct-module code; complex: real + 10 imag. */
static double element(const char *e, int code)
{
    switch (code) {
    case 'b': { int8_t v; memcpy(&v, e, 1); return v; }
    case 'B': { uint8_t v; memcpy(&v, e, 1); return v; }
    case '?': { uint8_t v; memcpy(&v, e, 1); return v != 0; }
    case 'h': { int16_t v; memcpy(&v, e, 2); return v; }
    case 'H': { uint16_t v; memcpy(&v, e, 2); return v; }
    case 'i': { int32_t v; memcpy(&v, e, 4); return v; }
    case 'I': { uint32_t v; memcpy(&v, e, 4); return v; }
    case 'q': { int64_t v; memcpy(&v, e, 8); return (double)v; }
    case 'Q': { uint64_t v; memcpy(&v, e, 8); return (double)v; }
    case 'f': { float v; memcpy(&v, e, 4); return v; }
    case 'd': { double v; memcpy(&v, e, 8); return v; }
    case 'F': { float v[2]; memcpy(v, e, 8); return (double)v[0] + 10.0 * (double)v[1]; }
    case 'D': { double v[2]; memcpy(v, e, 16); return v[0] + 10.0 * v[1]; }
    default: return -1.0e300;
    }
}

/* The n0 x n1 elements at p + i*s0 + j*s1 (bytes), in row-major order. */
double nt_x_sum(const void *p, int code, ptrdiff_t n0, ptrdiff_t n1, ptrdiff_t s0,
                ptrdiff_t s1)
{
    double s = 0.0;
    const char *base = p;
    for (ptrdiff_t i = 0; i < n0; i++)
        for (ptrdiff_t j = 0; j < n1; j++)
            s += element(base + i * s0 + j * s1, code);
    return s;
}

/* Strides counted in elements of the code's size. */
double nt_x_sum_elems(const void *p, int code, ptrdiff_t n0, ptrdiff_t n1, ptrdiff_t e0,
                      ptrdiff_t e1)
{
    ptrdiff_t size = (ptrdiff_t)code_size(code);
    return nt_x_sum(p, code, n0, n1, e0 * size, e1 * size);
}

/* n contiguous elements. */
double nt_x_sum_n(const void *p, int code, size_t n)
{
    return nt_x_sum(p, code, (ptrdiff_t)n, 1, (ptrdiff_t)code_size(code), 0);
}

/* ---- helpers ---- */

/* A tuple of ints (or None: *out NULL, *n -1) into a PyMem array. */
static int ssize_tuple(PyObject *obj, Py_ssize_t **out, Py_ssize_t *n, const char *what)
{
    *out = NULL;
    *n = -1;
    if (obj == NULL || obj == Py_None)
        return 0;
    PyObject *seq = PySequence_Fast(obj, what);
    if (seq == NULL)
        return -1;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
    Py_ssize_t *a = PyMem_Calloc((size_t)(len > 0 ? len : 1), sizeof(Py_ssize_t));
    if (a == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        a[i] = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(seq, i));
        if (a[i] == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            PyMem_Free(a);
            return -1;
        }
    }
    Py_DECREF(seq);
    *out = a;
    *n = len;
    return 0;
}

/* The memory behind base: writable if it can be, else read-only. */
static int take_base(PyObject *base, Py_buffer *view)
{
    if (PyObject_GetBuffer(base, view, PyBUF_WRITABLE) == 0)
        return 0;
    PyErr_Clear();
    return PyObject_GetBuffer(base, view, PyBUF_SIMPLE);
}

/* ---- Buffer ---- */

typedef struct {
    PyObject_HEAD
    Py_buffer base;
    int has_base;
    Py_ssize_t offset;
    char *format;                /* NULL: exported as NULL */
    Py_ssize_t itemsize, len;
    int ndim;
    Py_ssize_t *shape, *strides, *suboffsets;   /* NULL: exported as NULL */
    int readonly, honour;
    Py_ssize_t exports;
    PyObject *requests;          /* list of the flags of each request */
    PyObject *on_get;            /* NULL, None or a callable run by each request */
} BufferObject;

static void buffer_dealloc(BufferObject *self)
{
    if (self->has_base)
        PyBuffer_Release(&self->base);
    PyMem_Free(self->format);
    PyMem_Free(self->shape);
    PyMem_Free(self->strides);
    PyMem_Free(self->suboffsets);
    Py_XDECREF(self->requests);
    Py_XDECREF(self->on_get);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *buffer_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = { "base", "format", "itemsize", "shape", "strides",
                              "suboffsets", "offset", "readonly", "honour", "ndim",
                              "len", NULL };
    PyObject *base, *format, *shape, *strides = Py_None, *suboffsets = Py_None;
    PyObject *ndim_obj = Py_None, *len_obj = Py_None;
    Py_ssize_t itemsize, offset = 0;
    int readonly = 0, honour = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOnO|OOnppOO:Buffer", kwlist, &base,
                                     &format, &itemsize, &shape, &strides, &suboffsets,
                                     &offset, &readonly, &honour, &ndim_obj, &len_obj))
        return NULL;
    BufferObject *self = (BufferObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->requests = PyList_New(0);
    if (self->requests == NULL)
        goto error;
    if (take_base(base, &self->base) < 0)
        goto error;
    self->has_base = 1;
    self->offset = offset;
    self->itemsize = itemsize;
    self->readonly = readonly || self->base.readonly;
    self->honour = honour;
    if (format != Py_None) {
        Py_ssize_t n;
        const char *f = PyUnicode_AsUTF8AndSize(format, &n);
        if (f == NULL)
            goto error;
        self->format = PyMem_Malloc((size_t)n + 1);
        if (self->format == NULL) {
            PyErr_NoMemory();
            goto error;
        }
        memcpy(self->format, f, (size_t)n + 1);
    }
    Py_ssize_t nshape, nstrides, nsub;
    if (ssize_tuple(shape, &self->shape, &nshape, "shape") < 0
        || ssize_tuple(strides, &self->strides, &nstrides, "strides") < 0
        || ssize_tuple(suboffsets, &self->suboffsets, &nsub, "suboffsets") < 0)
        goto error;
    if (ndim_obj != Py_None) {
        self->ndim = PyLong_AsLong(ndim_obj);
        if (self->ndim == -1 && PyErr_Occurred())
            goto error;
    } else {
        self->ndim = nshape > 0 ? (int)nshape : 0;
    }
    if (len_obj != Py_None) {
        self->len = PyLong_AsSsize_t(len_obj);
        if (self->len == -1 && PyErr_Occurred())
            goto error;
    } else {
        Py_ssize_t n = itemsize;
        for (Py_ssize_t d = 0; d < nshape; d++)
            n *= self->shape[d];
        self->len = n;
    }
    return (PyObject *)self;
error:
    Py_DECREF(self);
    return NULL;
}

/* Whether the configured layout is C-contiguous (the PEP 3118 meaning). */
static int buffer_c_contiguous(BufferObject *self)
{
    if (self->strides == NULL)
        return 1;
    Py_ssize_t want = self->itemsize;
    for (int d = self->ndim - 1; d >= 0; d--) {
        Py_ssize_t n = self->shape != NULL ? self->shape[d] : 0;
        if (n > 1 && self->strides[d] != want)
            return 0;
        want *= n;
    }
    return 1;
}

static int buffer_getbuffer(BufferObject *self, Py_buffer *view, int flags)
{
    PyObject *f = PyLong_FromLong(flags);
    if (f == NULL || PyList_Append(self->requests, f) < 0) {
        Py_XDECREF(f);
        view->obj = NULL;
        return -1;
    }
    Py_DECREF(f);
    if (self->on_get != NULL && self->on_get != Py_None) {
        PyObject *r = PyObject_CallNoArgs(self->on_get);
        if (r == NULL) {
            view->obj = NULL;
            return -1;
        }
        Py_DECREF(r);
    }
    const char *format = self->format;
    Py_ssize_t *shape = self->shape, *strides = self->strides;
    if (self->honour) {
        const char *refused = NULL;
        if ((flags & PyBUF_WRITABLE) && self->readonly)
            refused = "read-only memory";
        else if (self->suboffsets != NULL && (flags & PyBUF_INDIRECT) != PyBUF_INDIRECT)
            refused = "an indirect buffer, not requested";
        else if ((flags & PyBUF_STRIDES) != PyBUF_STRIDES && !buffer_c_contiguous(self))
            refused = "strides needed, not requested";
        if (refused != NULL) {
            PyErr_Format(PyExc_BufferError, "ntexport.Buffer: %s", refused);
            view->obj = NULL;
            return -1;
        }
        if (!(flags & PyBUF_FORMAT))
            format = NULL;
        if ((flags & PyBUF_STRIDES) != PyBUF_STRIDES)
            strides = NULL;
        if ((flags & PyBUF_ND) != PyBUF_ND)
            shape = NULL;
    }
    view->obj = Py_NewRef(self);
    view->buf = (char *)self->base.buf + self->offset;
    view->len = self->len;
    view->readonly = self->readonly;
    view->itemsize = self->itemsize;
    view->format = (char *)format;
    view->ndim = self->ndim;
    view->shape = shape;
    view->strides = strides;
    view->suboffsets = self->suboffsets;
    view->internal = NULL;
    self->exports++;
    return 0;
}

static void buffer_releasebuffer(BufferObject *self, Py_buffer *view)
{
    (void)view;
    self->exports--;
}

static PyBufferProcs buffer_as_buffer = {
    (getbufferproc)buffer_getbuffer, (releasebufferproc)buffer_releasebuffer
};

static PyObject *buffer_address(BufferObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromVoidPtr((char *)self->base.buf + self->offset);
}

static PyGetSetDef buffer_getset[] = {
    { "address", (getter)buffer_address, NULL, "where the buffer starts", NULL },
    { NULL, NULL, NULL, NULL, NULL }
};

static PyMemberDef buffer_members[] = {
    { "exports", T_PYSSIZET, offsetof(BufferObject, exports), READONLY, NULL },
    { "requests", T_OBJECT, offsetof(BufferObject, requests), READONLY, NULL },
    { "on_get", T_OBJECT, offsetof(BufferObject, on_get), 0, NULL },
    { NULL, 0, 0, 0, NULL }
};

static PyTypeObject BufferType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ntexport.Buffer",
    .tp_basicsize = sizeof(BufferObject),
    .tp_dealloc = (destructor)buffer_dealloc,
    .tp_as_buffer = &buffer_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Buffer(base, format, itemsize, shape, strides=None, suboffsets=None, "
              "offset=0, readonly=False, honour=True, ndim=None, len=None)",
    .tp_getset = buffer_getset,
    .tp_members = buffer_members,
    .tp_new = buffer_new,
};

/* ---- Tensor ---- */

typedef struct {
    PyObject_HEAD
    Py_buffer base;
    int has_base;
    Py_ssize_t data_offset;
    uint64_t byte_offset;
    DLDataType dtype;
    int32_t ndim;
    Py_ssize_t *shape, *strides;   /* strides NULL: exported as NULL */
    int32_t dev_type, dev_id, rep_type, rep_id;
    int versioned, keywords, has_device;
    uint32_t major, minor;
    uint64_t flags;
    Py_ssize_t exported, deleted;
    PyObject *last_kwargs;
    int deleter;
    void *orphans; /* deleter=False: the managed tensors made, freed at dealloc */
} TensorObject;

/* One managed tensor: the struct the capsule carries, its shape and
   strides, and the exporter it keeps alive. */
typedef struct managed {
    DLManagedTensorVersioned v;
    DLManagedTensor l;
    TensorObject *owner;  /* NULL for deleter=False (the Tensor frees it) */
    struct managed *next; /* deleter=False: the Tensor's list */
    int64_t dims[];
} managed;

static void managed_free(managed *m)
{
    PyGILState_STATE g = PyGILState_Ensure();
    m->owner->deleted++;
    Py_DECREF(m->owner);
    PyMem_RawFree(m);
    PyGILState_Release(g);
}

static void delete_versioned(DLManagedTensorVersioned *self)
{
    managed_free(self->manager_ctx);
}

static void delete_legacy(DLManagedTensor *self)
{
    managed_free(self->manager_ctx);
}

/* A capsule not consumed (its name unchanged) deletes its tensor. */
static void capsule_versioned_destroy(PyObject *capsule)
{
    if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
        DLManagedTensorVersioned *m = PyCapsule_GetPointer(capsule, "dltensor_versioned");
        if (m->deleter != NULL)
            m->deleter(m);
    }
}

static void capsule_legacy_destroy(PyObject *capsule)
{
    if (PyCapsule_IsValid(capsule, "dltensor")) {
        DLManagedTensor *m = PyCapsule_GetPointer(capsule, "dltensor");
        if (m->deleter != NULL)
            m->deleter(m);
    }
}

static void tensor_dealloc(TensorObject *self)
{
    if (self->has_base)
        PyBuffer_Release(&self->base);
    PyMem_Free(self->shape);
    PyMem_Free(self->strides);
    Py_XDECREF(self->last_kwargs);
    for (managed *m = self->orphans; m != NULL;) {
        managed *next = m->next;
        PyMem_RawFree(m);
        m = next;
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int int_pair(PyObject *obj, int32_t *a, int32_t *b, const char *what)
{
    if (!PyTuple_Check(obj) || PyTuple_GET_SIZE(obj) != 2) {
        PyErr_Format(PyExc_TypeError, "%s: a pair of ints", what);
        return -1;
    }
    long x = PyLong_AsLong(PyTuple_GET_ITEM(obj, 0));
    long y = x == -1 && PyErr_Occurred() ? -1 : PyLong_AsLong(PyTuple_GET_ITEM(obj, 1));
    if (PyErr_Occurred())
        return -1;
    *a = (int32_t)x;
    *b = (int32_t)y;
    return 0;
}

static PyObject *tensor_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = { "base", "code", "bits", "shape", "strides", "lanes",
                              "data_offset", "byte_offset", "device", "reported_device",
                              "versioned", "version", "flags", "keywords", "has_device",
                              "ndim", "deleter", NULL };
    PyObject *base, *shape, *strides = Py_None, *device = NULL, *reported = Py_None;
    PyObject *version = NULL, *ndim_obj = Py_None;
    int code, bits, lanes = 1, versioned = 1, keywords = 1, has_device = 1, deleter = 1;
    Py_ssize_t data_offset = 0;
    unsigned long long byte_offset = 0, flags = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OiiO|OinKOOpOKppOp:Tensor", kwlist, &base,
                                     &code, &bits, &shape, &strides, &lanes, &data_offset,
                                     &byte_offset, &device, &reported, &versioned, &version,
                                     &flags, &keywords, &has_device, &ndim_obj, &deleter))
        return NULL;
    TensorObject *self = (TensorObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    if (base != Py_None) {
        if (take_base(base, &self->base) < 0)
            goto error;
        self->has_base = 1;
    }
    self->data_offset = data_offset;
    self->byte_offset = byte_offset;
    self->dtype.code = (uint8_t)code;
    self->dtype.bits = (uint8_t)bits;
    self->dtype.lanes = (uint16_t)lanes;
    Py_ssize_t nshape, nstrides;
    if (ssize_tuple(shape, &self->shape, &nshape, "shape") < 0
        || ssize_tuple(strides, &self->strides, &nstrides, "strides") < 0)
        goto error;
    if (self->shape == NULL) {
        PyErr_SetString(PyExc_TypeError, "Tensor: shape is a tuple");
        goto error;
    }
    if (ndim_obj != Py_None) {
        self->ndim = (int32_t)PyLong_AsLong(ndim_obj);
        if (PyErr_Occurred())
            goto error;
    } else {
        self->ndim = (int32_t)nshape;
    }
    self->dev_type = kDLCPU;
    self->dev_id = 0;
    if (device != NULL && int_pair(device, &self->dev_type, &self->dev_id, "device") < 0)
        goto error;
    self->rep_type = self->dev_type;
    self->rep_id = self->dev_id;
    if (reported != Py_None
        && int_pair(reported, &self->rep_type, &self->rep_id, "reported_device") < 0)
        goto error;
    int32_t major = 1, minor = 1;
    if (version != NULL && int_pair(version, &major, &minor, "version") < 0)
        goto error;
    self->major = (uint32_t)major;
    self->minor = (uint32_t)minor;
    self->versioned = versioned;
    self->keywords = keywords;
    self->has_device = has_device;
    self->deleter = deleter;
    self->flags = flags;
    return (PyObject *)self;
error:
    Py_DECREF(self);
    return NULL;
}

static PyObject *tensor_capsule(TensorObject *self, int versioned)
{
    size_t n = (size_t)(self->ndim > 0 ? self->ndim : 0);
    managed *m = PyMem_RawCalloc(1, sizeof(managed) + 2 * (n > 0 ? n : 1) * sizeof(int64_t));
    if (m == NULL)
        return PyErr_NoMemory();
    if (self->deleter) {
        m->owner = (TensorObject *)Py_NewRef(self);
    } else {
        m->next = self->orphans;
        self->orphans = m;
    }
    DLTensor *t = versioned ? &m->v.dl_tensor : &m->l.dl_tensor;
    t->data = self->has_base ? (char *)self->base.buf + self->data_offset : NULL;
    t->device.device_type = (DLDeviceType)self->dev_type;
    t->device.device_id = self->dev_id;
    t->ndim = self->ndim;
    t->dtype = self->dtype;
    t->shape = m->dims;
    t->strides = self->strides != NULL ? m->dims + n : NULL;
    t->byte_offset = self->byte_offset;
    for (size_t d = 0; d < n; d++) {
        m->dims[d] = self->shape[d];
        if (self->strides != NULL)
            m->dims[n + d] = self->strides[d];
    }
    PyObject *capsule;
    if (versioned) {
        m->v.version.major = self->major;
        m->v.version.minor = self->minor;
        m->v.manager_ctx = m;
        m->v.deleter = self->deleter ? delete_versioned : NULL;
        m->v.flags = self->flags;
        capsule = PyCapsule_New(&m->v, "dltensor_versioned", capsule_versioned_destroy);
    } else {
        m->l.manager_ctx = m;
        m->l.deleter = self->deleter ? delete_legacy : NULL;
        capsule = PyCapsule_New(&m->l, "dltensor", capsule_legacy_destroy);
    }
    if (capsule == NULL) {
        if (m->owner != NULL) { /* else the Tensor's list frees it */
            Py_DECREF(m->owner);
            PyMem_RawFree(m);
        }
        return NULL;
    }
    self->exported++;
    return capsule;
}

static PyObject *tensor_dlpack(TensorObject *self, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) != 0) {
        PyErr_SetString(PyExc_TypeError, "__dlpack__() takes keyword arguments only");
        return NULL;
    }
    if (kwds != NULL && PyDict_GET_SIZE(kwds) > 0 && !self->keywords) {
        PyErr_SetString(PyExc_TypeError, "__dlpack__() takes no keyword arguments");
        return NULL;
    }
    Py_XSETREF(self->last_kwargs, kwds != NULL ? PyDict_Copy(kwds) : PyDict_New());
    if (self->last_kwargs == NULL)
        return NULL;
    PyObject *maxv = kwds != NULL ? PyDict_GetItemString(kwds, "max_version") : NULL;
    return tensor_capsule(self, self->versioned && maxv != NULL && maxv != Py_None);
}

static PyObject *tensor_device(TensorObject *self, PyObject *unused)
{
    (void)unused;
    return Py_BuildValue("(ii)", (int)self->rep_type, (int)self->rep_id);
}

static PyObject *tensor_getattro(TensorObject *self, PyObject *name)
{
    if (!self->has_device && PyUnicode_Check(name)
        && PyUnicode_CompareWithASCIIString(name, "__dlpack_device__") == 0) {
        PyErr_SetString(PyExc_AttributeError, "__dlpack_device__");
        return NULL;
    }
    return PyObject_GenericGetAttr((PyObject *)self, name);
}

static PyMethodDef tensor_methods[] = {
    { "__dlpack__", (PyCFunction)(void (*)(void))tensor_dlpack, METH_VARARGS | METH_KEYWORDS,
      NULL },
    { "__dlpack_device__", (PyCFunction)tensor_device, METH_NOARGS, NULL },
    { NULL, NULL, 0, NULL }
};

static PyMemberDef tensor_members[] = {
    { "exported", T_PYSSIZET, offsetof(TensorObject, exported), READONLY, NULL },
    { "deleted", T_PYSSIZET, offsetof(TensorObject, deleted), READONLY, NULL },
    { "last_kwargs", T_OBJECT, offsetof(TensorObject, last_kwargs), READONLY, NULL },
    { NULL, 0, 0, 0, NULL }
};

static PyTypeObject TensorType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ntexport.Tensor",
    .tp_basicsize = sizeof(TensorObject),
    .tp_dealloc = (destructor)tensor_dealloc,
    .tp_getattro = (getattrofunc)tensor_getattro,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Tensor(base, code, bits, shape, strides=None, ...): a DLPack exporter",
    .tp_methods = tensor_methods,
    .tp_members = tensor_members,
    .tp_new = tensor_new,
};

/* ---- module ---- */

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "ntexport", "exporters of exact layouts, for the tests", -1,
    NULL, NULL, NULL, NULL, NULL
};

PyMODINIT_FUNC PyInit_ntexport(void)
{
    if (PyType_Ready(&BufferType) < 0 || PyType_Ready(&TensorType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    PyObject *kernels = Py_BuildValue(
        "{s:N,s:N,s:N,s:N}",
        "nt_x_addr", PyLong_FromVoidPtr((void *)nt_x_addr),
        "nt_x_sum", PyLong_FromVoidPtr((void *)nt_x_sum),
        "nt_x_sum_elems", PyLong_FromVoidPtr((void *)nt_x_sum_elems),
        "nt_x_sum_n", PyLong_FromVoidPtr((void *)nt_x_sum_n));
    if (kernels == NULL
        || PyModule_AddObjectRef(m, "Buffer", (PyObject *)&BufferType) < 0
        || PyModule_AddObjectRef(m, "Tensor", (PyObject *)&TensorType) < 0
        || PyModule_AddObject(m, "kernels", kernels) < 0) {
        Py_XDECREF(kernels);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
