/*
 * DLPack descriptors: a bound array becomes a DLTensor the binding owns.
 *
 * A target parameter `const DLTensor *` (or `DLTensor *`) bound to an
 * array receives a pointer to a DLTensor built here, once, at bind time:
 * from the buffer protocol (PEP 3118) where the object has it, else from
 * the object's __dlpack__ capsule (the versioned protocol,
 * DLManagedTensorVersioned, where the exporter offers it; the legacy
 * DLManagedTensor otherwise). What the kernel reads is normalised: device
 * {kDLCPU, 0}, byte_offset 0 (folded into data), lanes 1, strides always
 * present and counted in elements, data aligned for the element type.
 *
 * The DLTensor, its shape and strides and what keeps the data alive (the
 * held Py_buffer, a reference to a NumPy array read directly, or the
 * consumed DLPack tensor whose deleter we call) live in one block owned by
 * a capsule. The binding holds that capsule the way
 * it holds any buffer: as an nt_held whose view refers to it
 * (PyBuffer_FillInfo), so rebind, reclaim and release treat a descriptor
 * exactly like a bound buffer.
 *
 * Only what a DLTensor cannot describe is refused: object and structured
 * dtypes, non-native byte order, byte strides that are not whole elements,
 * memory on another device, read-only data for a non-const DLTensor *, and
 * data the exporter copied (a copy would not be the live array).
 *
 * Place in the pipeline: convert, after the plan: a const DLTensor *
 * parameter's value, for convert/value.c; python/capi.c uses it too.
 */
#include "python/pyapi.h"
#include "convert/dlpack.h"

#define NO_IMPORT_ARRAY
#define PY_ARRAY_UNIQUE_SYMBOL nt_ARRAY_API
#define NPY_NO_DEPRECATED_API  NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include <stdint.h>
#include <string.h>

_Static_assert(sizeof(void *) != 8 || sizeof(DLTensor) == NT_DLTENSOR_SIZE,
               "NT_DLTENSOR_SIZE matches the public header");


#define BLOCK_CAPSULE "numthunk.dltensor"

/* The versions of the DLPack capsule protocol we read: 1.x. */
#define MAX_MAJOR 1
#define MAX_MINOR 1

typedef struct {
    DLTensor tensor;                     /* what the kernel gets a pointer to */
    PyObject *array;                     /* ndarray source read directly, or NULL */
    Py_buffer view;                      /* buffer source (view.obj set), or unused */
    DLManagedTensor *legacy;             /* consumed "dltensor" capsule, or NULL */
    DLManagedTensorVersioned *versioned; /* consumed "dltensor_versioned", or NULL */
    int64_t dims[];                      /* shape[ndim] then strides[ndim] */
} dl_block;

/* Py_DECREF, with the exception now set (a refusal) put aside while what
   it frees runs: an exporter's capsule destructor or DLPack deleter may run
   Python code, which must neither see nor swallow the refusal. */
static void release_keeping_error(PyObject *obj)
{
    if (obj == NULL)
        return;
    nt_saved_error saved;
    nt_error_save(&saved);
    Py_DECREF(obj);
    nt_error_restore(&saved);
}

static void block_free(dl_block *b)
{
    if (b == NULL)
        return;
    nt_saved_error saved;
    nt_error_save(&saved);
    Py_XDECREF(b->array);
    if (b->view.obj != NULL)
        PyBuffer_Release(&b->view);
    if (b->legacy != NULL && b->legacy->deleter != NULL)
        b->legacy->deleter(b->legacy);
    if (b->versioned != NULL && b->versioned->deleter != NULL)
        b->versioned->deleter(b->versioned);
    PyMem_Free(b);
    nt_error_restore(&saved);
}

static void block_capsule_destroy(PyObject *capsule)
{
    block_free(PyCapsule_GetPointer(capsule, BLOCK_CAPSULE));
}

static dl_block *block_new(int32_t ndim)
{
    size_t n = (size_t)(ndim > 0 ? ndim : 0);
    dl_block *b = PyMem_Calloc(1, sizeof(dl_block) + 2 * n * sizeof(int64_t));
    if (b == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    b->tensor.ndim = ndim;
    b->tensor.shape = b->dims;
    b->tensor.strides = b->dims + n;
    b->tensor.device.device_type = kDLCPU;
    b->tensor.device.device_id = 0;
    return b;
}

/* ---- dtypes ---- */

/* A numthunk element kind as a DLPack dtype (the kind table's DLPack
   columns); 0 if DLPack has no code for it. */
static int dtype_of_kind(int kind, DLDataType *out)
{
    const nt_kind_info *r = &nt_kinds[kind];
    out->code = r->dl_code;
    out->bits = r->dl_bits;
    out->lanes = 1;
    return r->dl_bits != 0;
}

/* The kind a one-lane DLPack dtype describes, NT_VOID if none does. Every
   scalar kind has a DLPack code and width (test_dlpack_guards refuses the
   widths none has, 0 among them). */
static int kind_of_dtype(DLDataType d)
{
    for (int k = NT_BOOL; k <= NT_C128; k++)
        if (nt_kinds[k].dl_code == d.code && nt_kinds[k].dl_bits == d.bits)
            return k;
    return NT_VOID;
}

/* Half precision: numthunk has no scalar kind for it, but a DLTensor
   describes it and the kernel decides. */
static int is_half(DLDataType d)
{
    return d.code == kDLFloat && d.bits == 16;
}

/* Half precision ('e') in native order. */
static int is_half_format(const char *f)
{
    if (f == NULL)
        return 0;
    const uint16_t one = 1;
    int little = *(const uint8_t *)&one == 1;
    if (*f == '@' || *f == '=' || (*f == '<' && little) || (*f == '>' && !little))
        f++;
    return f[0] == 'e' && f[1] == '\0';
}

/* The dtypes numthunk passes on, one lane: its kinds' (integers, unsigned
   integers, IEEE floats, complex and bool of whole bytes) and half
   precision. */
static int dtype_supported(DLDataType d)
{
    return d.lanes == 1 && (kind_of_dtype(d) != NT_VOID || is_half(d));
}

/* Alignment the elements need: the kind's, 2 for half precision. */
static size_t dtype_align(DLDataType d)
{
    int kind = kind_of_dtype(d);
    return kind != NT_VOID ? nt_kinds[kind].align : (size_t)d.bits / 8;
}

static const char *device_name(int32_t type)
{
    switch (type) {
    case kDLCPU: return "CPU";
    case kDLCUDA: return "CUDA";
    case kDLCUDAHost: return "CUDAHost";
    case kDLOpenCL: return "OpenCL";
    case kDLVulkan: return "Vulkan";
    case kDLMetal: return "Metal";
    case kDLVPI: return "VPI";
    case kDLROCM: return "ROCm";
    case kDLROCMHost: return "ROCmHost";
    case kDLExtDev: return "ExtDev";
    case kDLCUDAManaged: return "CUDAManaged";
    case kDLOneAPI: return "OneAPI";
    case kDLWebGPU: return "WebGPU";
    case kDLHexagon: return "Hexagon";
    case kDLMAIA: return "MAIA";
    case kDLTrn: return "Trn";
    default: return "unknown";
    }
}

static int refuse_device(int32_t type, int32_t id, nt_label *what)
{
    PyErr_Format(PyExc_ValueError,
                 "%s: the array is on device %s:%d (DLPack device type %d); "
                 "a DLTensor bound here must be in CPU memory (kDLCPU = 1): copy "
                 "it to the host first",
                 nt_label_text(what), device_name(type), (int)id, (int)type);
    return -1;
}

static int refuse_read_only(nt_label *what)
{
    PyErr_Format(PyExc_ValueError,
                 "%s: the array is read-only but the parameter is a non-const "
                 "DLTensor * (the kernel may write through it); pass a writable "
                 "array, or declare the parameter const DLTensor *",
                 nt_label_text(what));
    return -1;
}

/* ---- from the buffer protocol ---- */

/* obj's strided buffer into view: 0, or -1 with an exception that names
   the parameter where the exporter refused. */
static int get_view(PyObject *obj, Py_buffer *view, nt_label *what)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_FULL_RO) == 0)
        return 0;
    /* NumPy raises ValueError for dtypes a buffer cannot carry
       (datetime64): name the parameter, keep NumPy's reason as cause. */
    if (!PyErr_ExceptionMatches(PyExc_BufferError) && !PyErr_ExceptionMatches(PyExc_TypeError)
        && !PyErr_ExceptionMatches(PyExc_ValueError))
        return -1;
    PyObject *type, *cause, *tb;
    PyErr_Fetch(&type, &cause, &tb);
    PyErr_NormalizeException(&type, &cause, &tb);
    PyErr_Format(PyExc_TypeError, "%s: %.200s object does not export a strided buffer (%S)",
                 nt_label_text(what), Py_TYPE(obj)->tp_name, cause != NULL ? cause : Py_None);
    PyObject *t2, *v2, *tb2;
    PyErr_Fetch(&t2, &v2, &tb2);
    PyErr_NormalizeException(&t2, &v2, &tb2);
    if (v2 != NULL && cause != NULL)
        PyException_SetCause(v2, Py_NewRef(cause));
    PyErr_Restore(t2, v2, tb2);
    Py_XDECREF(type);
    Py_XDECREF(cause);
    Py_XDECREF(tb);
    return -1;
}

/* The DLPack dtype of the buffer's elements: its kind's (the kind table's
   DLPack columns), or half precision. */
static int view_dtype(const Py_buffer *view, DLDataType *dtype, nt_label *what)
{
    nt_elem e;
    if (nt_elem_decode(view, &e, nt_label_text(what)) < 0)
        return -1;
    if (e.kind != NT_VOID && dtype_of_kind(e.kind, dtype))
        return 0;
    if (is_half_format(view->format) && view->itemsize == 2) { /* ('e' is no kind's code) */
        *dtype = (DLDataType){ kDLFloat, 16, 1 };
        return 0;
    }
    PyErr_Format(PyExc_TypeError,
                 "%s: the array's element format '%s' cannot be described by a "
                 "DLTensor (integers, floats, complex and bool only)",
                 nt_label_text(what), e.format);
    return -1;
}

/* What a buffer must be besides its elements and its layout (direct:
   nt_view_check): writable if the kernel may write. */
static int check_view(const Py_buffer *view, int writable, nt_label *what)
{
    if (writable && view->readonly)
        return refuse_read_only(what);
    return 0;
}

/* The buffer's data, shape and strides (in elements) into the block, its
   data aligned for the elements. */
static int fill_from_view(dl_block *b, const Py_buffer *view, nt_label *what)
{
    b->tensor.data = view->buf;
    Py_ssize_t compact = view->itemsize;
    for (int d = view->ndim - 1; d >= 0; d--) {
        Py_ssize_t stride = view->strides != NULL ? view->strides[d] : compact;
        if (stride % view->itemsize != 0) {
            PyErr_Format(PyExc_ValueError,
                         "%s: axis %d has a stride of %zd bytes, not a whole number of "
                         "%zd-byte elements; DLTensor strides count elements (copy the "
                         "array, e.g. np.ascontiguousarray(arr))",
                         nt_label_text(what), d, stride, view->itemsize);
            return -1;
        }
        b->tensor.shape[d] = view->shape[d];
        b->tensor.strides[d] = stride / view->itemsize;
        compact *= view->shape[d];
    }
    return nt_check_aligned(view, dtype_align(b->tensor.dtype), 0, nt_label_text(what));
}

/* NULL with an exception, or NULL with *not_array set for a pointer
   object (the caller binds it as a pointer). */
static dl_block *from_buffer(PyObject *obj, int writable, nt_label *what, int *not_array)
{
    Py_buffer view;
    if (get_view(obj, &view, what) < 0)
        return NULL;
    dl_block *b = NULL;
    DLDataType dtype;
    if (nt_is_pointer_buffer(&view)) {
        *not_array = 1;
        goto error;
    }
    /* a format of plain numbers may still be a cast of Python objects */
    if (nt_view_check(obj, &view, nt_label_text(what)) < 0 || view_dtype(&view, &dtype, what) < 0
        || nt_check_plain(&view, nt_label_text(what)) < 0 || check_view(&view, writable, what) < 0)
        goto error;
    b = block_new(view.ndim);
    if (b == NULL)
        goto error;
    b->tensor.dtype = dtype;
    if (fill_from_view(b, &view, what) < 0)
        goto error;
    b->view = view; /* the block holds the buffer from here on */
    return b;
error:
    PyMem_Free(b);
    {
        nt_saved_error saved;
        nt_error_save(&saved);
        PyBuffer_Release(&view);
        nt_error_restore(&saved);
    }
    return NULL;
}

/* A plain ndarray that passes every check, read without a buffer export
   (the block's reference pins it: NumPy refuses to resize an array
   referenced elsewhere). NULL without an exception when any check fails:
   the buffer path then says why. */
static dl_block *from_ndarray(PyObject *obj, int kind, int writable)
{
    PyArrayObject *a = (PyArrayObject *)obj;
    DLDataType dtype;
    if (!dtype_of_kind(kind, &dtype) || (writable && !PyArray_ISWRITEABLE(a))
        || !PyArray_ISALIGNED(a) || (uintptr_t)PyArray_DATA(a) % dtype_align(dtype) != 0)
        return NULL;
    int ndim = PyArray_NDIM(a);
    npy_intp itemsize = PyArray_ITEMSIZE(a);
    const npy_intp *strides = PyArray_STRIDES(a);
    for (int d = 0; d < ndim; d++)
        if (strides[d] % itemsize != 0)
            return NULL;
    dl_block *b = block_new(ndim);
    if (b == NULL) {
        PyErr_Clear(); /* the buffer path will run into it again */
        return NULL;
    }
    b->tensor.dtype = dtype;
    b->tensor.data = PyArray_DATA(a);
    for (int d = 0; d < ndim; d++) {
        b->tensor.shape[d] = PyArray_DIM(a, d);
        b->tensor.strides[d] = strides[d] / itemsize;
    }
    b->array = Py_NewRef(obj);
    return b;
}

/* ---- from __dlpack__ ---- */

/* __dlpack_device__() -> (type, id); 0 with *known = 0 if the object has
   no such method. */
static int query_device(PyObject *obj, int32_t *type, int32_t *id, int *known, nt_label *what)
{
    *known = 0;
    PyObject *meth = PyObject_GetAttrString(obj, "__dlpack_device__");
    if (meth == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -1;
        PyErr_Clear();
        return 0;
    }
    PyObject *r = PyObject_CallNoArgs(meth);
    Py_DECREF(meth);
    if (r == NULL) {
        nt_raise_chained(PyExc_TypeError, "%s: %.200s.__dlpack_device__() raised",
                         nt_label_text(what), Py_TYPE(obj)->tp_name);
        return -1;
    }
    long t = -1, i = -1;
    int ok = PyTuple_Check(r) && PyTuple_GET_SIZE(r) == 2;
    if (ok) {
        t = PyLong_AsLong(PyTuple_GET_ITEM(r, 0));
        i = t == -1 && PyErr_Occurred() ? -1 : PyLong_AsLong(PyTuple_GET_ITEM(r, 1));
        ok = !PyErr_Occurred();
    }
    Py_DECREF(r);
    if (!ok) {
        if (nt_error_passes())
            return -1;
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "%s: __dlpack_device__() of %.200s must return (device_type, "
                     "device_id) as two ints",
                     nt_label_text(what), Py_TYPE(obj)->tp_name);
        return -1;
    }
    *type = (int32_t)t;
    *id = (int32_t)i;
    *known = 1;
    return 0;
}

/* obj.__dlpack__(max_version=(1, 1), copy=False), or obj.__dlpack__() for
   exporters that predate the versioned protocol (they raise TypeError for
   the keywords). What goes wrong names the parameter. */
static PyObject *export_capsule(PyObject *obj, nt_label *what)
{
    PyObject *meth = PyObject_GetAttrString(obj, "__dlpack__");
    if (meth == NULL) {
        if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError,
                         "%s: %.200s is neither a buffer nor a DLPack exporter (it has no "
                         "__dlpack__)",
                         nt_label_text(what), Py_TYPE(obj)->tp_name);
        } else {
            nt_raise_chained(PyExc_TypeError, "%s: reading %.200s.__dlpack__ raised",
                             nt_label_text(what), Py_TYPE(obj)->tp_name);
        }
        return NULL;
    }
    if (!PyCallable_Check(meth)) {
        PyErr_Format(PyExc_TypeError, "%s: %.200s.__dlpack__ is of type %.100s, not a method",
                     nt_label_text(what), Py_TYPE(obj)->tp_name, Py_TYPE(meth)->tp_name);
        Py_DECREF(meth);
        return NULL;
    }
    PyObject *capsule = NULL;
    PyObject *kw =
        Py_BuildValue("{s:(ii),s:O}", "max_version", MAX_MAJOR, MAX_MINOR, "copy", Py_False);
    PyObject *noargs = PyTuple_New(0);
    if (kw != NULL && noargs != NULL) {
        capsule = PyObject_Call(meth, noargs, kw);
        if (capsule == NULL && PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            capsule = PyObject_CallNoArgs(meth);
        }
    }
    Py_XDECREF(kw);
    Py_XDECREF(noargs);
    Py_DECREF(meth);
    if (capsule == NULL)
        nt_raise_chained(PyExc_TypeError, "%s: %.200s.__dlpack__() raised", nt_label_text(what),
                         Py_TYPE(obj)->tp_name);
    return capsule;
}

/* The consumed tensor's DLTensor into the block: checks and normalises. */
static int fill_from_dltensor(dl_block *b, const DLTensor *src, nt_label *what)
{
    if (src->device.device_type != kDLCPU)
        return refuse_device(src->device.device_type, src->device.device_id, what);
    if (!dtype_supported(src->dtype)) {
        PyErr_Format(PyExc_TypeError,
                     "%s: DLPack dtype (code %d, bits %d, lanes %d) is not passed on: "
                     "integers, floats, complex and bool of whole bytes, one lane",
                     nt_label_text(what), (int)src->dtype.code, (int)src->dtype.bits,
                     (int)src->dtype.lanes);
        return -1;
    }
    b->tensor.dtype = src->dtype;
    b->tensor.data = (char *)src->data + src->byte_offset;
    /* The elements' bytes, at most INT64_MAX (unless an extent is 0: none
       is read), as convert/buffer.c asks of buffers: a count past it is no memory,
       and wrapped it would pass the alignment check below. */
    int empty = 0, over = 0;
    for (int32_t d = 0; d < src->ndim; d++) {
        if (src->shape[d] < 0) {
            PyErr_Format(PyExc_ValueError, "%s: DLPack shape[%d] is negative (%lld)",
                         nt_label_text(what), (int)d, (long long)src->shape[d]);
            return -1;
        }
        empty |= src->shape[d] == 0;
    }
    int64_t bytes = src->dtype.bits / 8;
    for (int32_t d = 0; d < src->ndim && !empty && !over; d++) {
        if (bytes > INT64_MAX / src->shape[d])
            over = 1;
        else
            bytes *= src->shape[d];
    }
    if (over) {
        PyErr_Format(PyExc_ValueError,
                     "%s: DLPack shape and dtype make more than %lld bytes (no memory holds "
                     "them)",
                     nt_label_text(what), (long long)INT64_MAX);
        return -1;
    }
    uint64_t compact = 1; /* wraps only for an empty tensor, whose strides no read uses */
    for (int32_t d = src->ndim - 1; d >= 0; d--) {
        b->tensor.shape[d] = src->shape[d];
        b->tensor.strides[d] = src->strides != NULL ? src->strides[d] : (int64_t)compact;
        compact *= (uint64_t)src->shape[d];
    }
    size_t align = dtype_align(src->dtype);
    if (align > 1 && !empty && (uintptr_t)b->tensor.data % align != 0) {
        PyErr_Format(PyExc_ValueError,
                     "%s: the array's data is not aligned to %zu bytes (address %p)",
                     nt_label_text(what), align, b->tensor.data);
        return -1;
    }
    return 0;
}

/* A consumed tensor's block: ndim checked, the capsule renamed `used`
   (the exporter's destructor then leaves the tensor to us). The caller
   hands the block the deleter, then finish() fills it. */
static dl_block *take(PyObject *capsule, const char *used, const DLTensor *t, nt_label *what)
{
    if (t->ndim < 0) {
        PyErr_Format(PyExc_ValueError, "%s: DLPack ndim is negative", nt_label_text(what));
        return NULL;
    }
    dl_block *b = block_new(t->ndim);
    if (b != NULL && PyCapsule_SetName(capsule, used) < 0) {
        block_free(b);
        return NULL;
    }
    return b;
}

/* The block filled from the tensor it owns, or NULL (the block freed, and
   with it the tensor). */
static dl_block *finish(dl_block *b, const DLTensor *t, nt_label *what)
{
    if (fill_from_dltensor(b, t, what) < 0) {
        block_free(b);
        return NULL;
    }
    return b;
}

static dl_block *from_versioned(PyObject *obj, PyObject *capsule, int writable, nt_label *what)
{
    DLManagedTensorVersioned *m = PyCapsule_GetPointer(capsule, "dltensor_versioned");
    if (m->version.major != MAX_MAJOR) {
        /* Only the deleter may be touched: the capsule's destructor calls it. */
        PyErr_Format(PyExc_TypeError,
                     "%s: %.200s exported a DLPack %u.%u tensor; numthunk reads "
                     "version %d.x",
                     nt_label_text(what), Py_TYPE(obj)->tp_name, (unsigned)m->version.major,
                     (unsigned)m->version.minor, MAX_MAJOR);
        return NULL;
    }
    dl_block *b = take(capsule, "used_dltensor_versioned", &m->dl_tensor, what);
    if (b == NULL)
        return NULL;
    b->versioned = m;
    if (m->flags & DLPACK_FLAG_BITMASK_IS_COPIED) {
        PyErr_Format(PyExc_ValueError,
                     "%s: %.200s exported a copy of its data; a bound DLTensor must "
                     "be the live array",
                     nt_label_text(what), Py_TYPE(obj)->tp_name);
        block_free(b);
        return NULL;
    }
    if (writable && (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY)) {
        refuse_read_only(what);
        block_free(b);
        return NULL;
    }
    return finish(b, &m->dl_tensor, what);
}

/* The legacy protocol cannot say "read-only": exporters that follow it
   (NumPy among them) refuse to export read-only arrays. */
static dl_block *from_legacy(PyObject *capsule, nt_label *what)
{
    DLManagedTensor *m = PyCapsule_GetPointer(capsule, "dltensor");
    dl_block *b = take(capsule, "used_dltensor", &m->dl_tensor, what);
    if (b == NULL)
        return NULL;
    b->legacy = m;
    return finish(b, &m->dl_tensor, what);
}

/* What __dlpack__() returned when it is no DLPack tensor. */
static void refuse_capsule(PyObject *obj, PyObject *capsule, nt_label *what)
{
    if (!PyCapsule_CheckExact(capsule)) {
        PyErr_Format(PyExc_TypeError,
                     "%s: %.200s.__dlpack__() returned %.100s, not a DLPack capsule "
                     "('dltensor' or 'dltensor_versioned')",
                     nt_label_text(what), Py_TYPE(obj)->tp_name, Py_TYPE(capsule)->tp_name);
        return;
    }
    const char *name = PyCapsule_GetName(capsule);
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError,
                 "%s: %.200s.__dlpack__() returned a capsule named %s%.100s%s, not "
                 "'dltensor' or 'dltensor_versioned'%s",
                 nt_label_text(what), Py_TYPE(obj)->tp_name, name != NULL ? "'" : "",
                 name != NULL ? name : "NULL", name != NULL ? "'" : "",
                 name != NULL && strncmp(name, "used_", 5) == 0
                     ? " (a tensor already consumed: __dlpack__ must export a new "
                       "capsule on each call)"
                     : "");
}

static dl_block *from_dlpack(PyObject *obj, int writable, nt_label *what)
{
    int32_t dev_type, dev_id;
    int known;
    if (query_device(obj, &dev_type, &dev_id, &known, what) < 0)
        return NULL;
    if (known && dev_type != kDLCPU) {
        refuse_device(dev_type, dev_id, what);
        return NULL;
    }
    PyObject *capsule = export_capsule(obj, what);
    if (capsule == NULL)
        return NULL;
    dl_block *b = NULL;
    if (PyCapsule_IsValid(capsule, "dltensor_versioned"))
        b = from_versioned(obj, capsule, writable, what);
    else if (PyCapsule_IsValid(capsule, "dltensor"))
        b = from_legacy(capsule, what);
    else
        refuse_capsule(obj, capsule, what);
    release_keeping_error(capsule);
    return b;
}

/* ---- the binding ---- */

/* The descriptor's owner, or NULL: with an exception, or without one and
   *not_array set when obj is a pointer object rather than an array. */
static PyObject *acquire(PyObject *obj, int writable, nt_label *what, DLTensor **tensor,
                         int *not_array)
{
    dl_block *b = NULL;
    *not_array = 0;
    int kind = nt_ndarray_kind(obj);
    if (kind != NT_VOID)
        b = from_ndarray(obj, kind, writable);
    if (b != NULL)
        ;
    else if (PyObject_CheckBuffer(obj))
        b = from_buffer(obj, writable, what, not_array);
    else
        b = from_dlpack(obj, writable, what);
    if (b == NULL)
        return NULL;
    PyObject *capsule = PyCapsule_New(b, BLOCK_CAPSULE, block_capsule_destroy);
    if (capsule == NULL) {
        block_free(b);
        return NULL;
    }
    *tensor = &b->tensor;
    return capsule;
}

PyObject *nt_dlpack_acquire(PyObject *obj, int writable, const char *label, DLTensor **tensor)
{
    int not_array;
    nt_label l = { NULL, 0, label, 0, 0, "" }, *what = &l;
    PyObject *capsule = acquire(obj, writable, what, tensor, &not_array);
    if (capsule == NULL && not_array)
        PyErr_Format(PyExc_TypeError, "%s: %.200s is a pointer, not an array", nt_label_text(what),
                     Py_TYPE(obj)->tp_name);
    return capsule;
}

int nt_dlpack_is_array(PyObject *obj)
{
    if (PyObject_CheckBuffer(obj))
        return 1;
    PyObject *meth = PyObject_GetAttrString(obj, "__dlpack__");
    if (meth != NULL) {
        Py_DECREF(meth);
        return 1;
    }
    if (!PyErr_ExceptionMatches(PyExc_AttributeError))
        return -1;
    PyErr_Clear();
    return 0;
}

int nt_dlpack_convert(const nt_sig *sig, int i, PyObject *value, void *cell, nt_held **held)
{
    const nt_type *t = &sig->args[i];
    nt_label l = { sig, i, NULL, 0, 0, "" }, *what = &l;
    int is_array = nt_dlpack_is_array(value);
    if (is_array < 0) {
        nt_raise_chained(PyExc_TypeError, "%s: reading %.200s.__dlpack__ raised",
                         nt_label_text(what), Py_TYPE(value)->tp_name);
        return -1;
    }
    if (is_array == 0)
        return 1;
    if (t->depth != 1)
        return 1; /* DLTensor **: an ordinary pointer parameter */
    DLTensor *tensor;
    int not_array;
    PyObject *capsule = acquire(value, !(t->cflags & NT_CONST_BASE), what, &tensor, &not_array);
    if (capsule == NULL)
        return not_array ? 1 : -1;
    nt_held *h = PyMem_Calloc(1, sizeof(*h));
    if (h == NULL) {
        Py_DECREF(capsule);
        PyErr_NoMemory();
        return -1;
    }
    /* The held view refers to the capsule: releasing the binding's buffers
       releases the descriptor, its source and the DLPack tensor. */
    if (PyBuffer_FillInfo(&h->view, capsule, tensor, (Py_ssize_t)sizeof(DLTensor), 1, PyBUF_SIMPLE)
        < 0) {
        Py_DECREF(capsule);
        PyMem_Free(h);
        return -1;
    }
    Py_DECREF(capsule);
    memcpy(cell, &tensor, sizeof(tensor));
    h->next = *held;
    *held = h;
    return 0;
}
