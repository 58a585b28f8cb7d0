/*
 * Python value -> C value cell, checked against the declared C type.
 *
 * This is where "nothing is truncated, reinterpreted or copied silently"
 * is enforced: integers are range-checked for their exact width, floats
 * never reach integer parameters, buffers must match the pointee type,
 * alignment, contiguity and writability. Every message starts with the
 * parameter's label, e.g. "argument 2 (n: int): 3000000000 does not fit in
 * a 32-bit C int".
 *
 * Cells are laid out as plan.c describes: integers extended to 64 bits,
 * float in the low 4 bytes, complex 8/16 bytes, memoryview slices by value.
 */
#include "pyapi.h"

#define NO_IMPORT_ARRAY
#define PY_ARRAY_UNIQUE_SYMBOL nt_ARRAY_API
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <numpy/arrayscalars.h>

#include <math.h>
#include <string.h>

void nt_param_label(const nt_sig *sig, int i, char *buf, size_t n)
{
    char type[160];
    nt_type_format(&sig->args[i], type, sizeof(type));
    if (sig->names != NULL && sig->names[i] != NULL)
        PyOS_snprintf(buf, n, "argument %d (%s: %s)", i + 1, sig->names[i], type);
    else
        PyOS_snprintf(buf, n, "argument %d (%s)", i + 1, type);
}

/* ---- integers ---- */

typedef struct {
    int bits;
    int is_signed;
    long long min;
    unsigned long long max;
} int_range;

static int_range range_of(int kind)
{
    switch (kind) {
    case NT_BOOL: return (int_range){ 1, 0, 0, 1 };
    case NT_I8:   return (int_range){ 8, 1, INT8_MIN, INT8_MAX };
    case NT_U8:   return (int_range){ 8, 0, 0, UINT8_MAX };
    case NT_I16:  return (int_range){ 16, 1, INT16_MIN, INT16_MAX };
    case NT_U16:  return (int_range){ 16, 0, 0, UINT16_MAX };
    case NT_I32:  return (int_range){ 32, 1, INT32_MIN, INT32_MAX };
    case NT_U32:  return (int_range){ 32, 0, 0, UINT32_MAX };
    case NT_I64:  return (int_range){ 64, 1, INT64_MIN, INT64_MAX };
    default:      return (int_range){ 64, 0, 0, UINT64_MAX };
    }
}

static int is_floatlike(PyObject *v)
{
    return PyFloat_Check(v) || PyComplex_Check(v)
        || PyArray_IsScalar(v, Floating) || PyArray_IsScalar(v, ComplexFloating);
}

static int is_boollike(PyObject *v)
{
    return PyBool_Check(v) || PyArray_IsScalar(v, Bool);
}

static int overflow(const char *what, const nt_type *t, PyObject *num)
{
    char type[64];
    nt_type_format(t, type, sizeof(type));
    int_range r = range_of(t->kind);
    if (t->kind == NT_BOOL)
        PyErr_Format(PyExc_OverflowError,
                     "%s: %S is not a valid C bool (expected True, False, 0 or 1)",
                     what, num);
    else if (r.is_signed)
        PyErr_Format(PyExc_OverflowError,
                     "%s: %S does not fit in a %d-bit C %s (range %lld..%llu)",
                     what, num, r.bits, type, r.min, r.max);
    else
        PyErr_Format(PyExc_OverflowError,
                     "%s: %S does not fit in a %d-bit unsigned C %s (range 0..%llu)",
                     what, num, r.bits, type, r.max);
    return -1;
}

static int convert_int(const nt_type *t, PyObject *value, void *cell, const char *what)
{
    uint64_t bits;
    if (is_boollike(value)) {
        bits = PyObject_IsTrue(value) ? 1 : 0;
        memcpy(cell, &bits, 8);
        return 0;
    }
    if (is_floatlike(value)) {
        PyErr_Format(PyExc_TypeError,
                     "%s: expected an integer, got %.100s %R (no silent truncation: "
                     "convert it explicitly if that is what you mean)",
                     what, Py_TYPE(value)->tp_name, value);
        return -1;
    }
    if (PyBytes_Check(value) && PyBytes_GET_SIZE(value) == 1
        && (t->kind == NT_I8 || t->kind == NT_U8)) {
        /* b'N' for a char (LAPACK's trans, uplo): the byte's value */
        unsigned char c = (unsigned char)PyBytes_AS_STRING(value)[0];
        int64_t v = t->kind == NT_I8 ? (int64_t)(int8_t)c : (int64_t)c;
        memcpy(cell, &v, 8);
        return 0;
    }
    if (PyUnicode_Check(value) || PyBytes_Check(value) || PyByteArray_Check(value)) {
        PyErr_Format(PyExc_TypeError, "%s: expected an integer, got %.100s",
                     what, Py_TYPE(value)->tp_name);
        return -1;
    }
    PyObject *num = PyNumber_Index(value);
    if (num == NULL) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: expected an integer, got %.100s",
                     what, Py_TYPE(value)->tp_name);
        return -1;
    }
    int_range r = range_of(t->kind);
    int result = -1;
    if (r.is_signed) {
        int ovf = 0;
        long long v = PyLong_AsLongLongAndOverflow(num, &ovf);
        if (v == -1 && PyErr_Occurred())
            goto done;
        if (ovf != 0 || v < r.min || (v > 0 && (unsigned long long)v > r.max)) {
            overflow(what, t, num);
            goto done;
        }
        int64_t s = v;
        memcpy(cell, &s, 8);
    } else {
        PyObject *zero = PyLong_FromLong(0);
        int neg = zero == NULL ? -1 : PyObject_RichCompareBool(num, zero, Py_LT);
        Py_XDECREF(zero);
        if (neg < 0)
            goto done;
        if (neg) {
            char type[64];
            nt_type_format(t, type, sizeof(type));
            PyErr_Format(PyExc_OverflowError,
                         "%s: %S is negative but C %s is unsigned", what, num, type);
            goto done;
        }
        unsigned long long v = PyLong_AsUnsignedLongLong(num);
        if (v == (unsigned long long)-1 && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_OverflowError))
                goto done;
            PyErr_Clear();
            overflow(what, t, num);
            goto done;
        }
        if (v > r.max) {
            overflow(what, t, num);
            goto done;
        }
        uint64_t u = v;
        memcpy(cell, &u, 8);
    }
    result = 0;
done:
    Py_DECREF(num);
    return result;
}

/* ---- floating point ---- */

/* Smallest double that rounds to infinity as a float: FLT_MAX plus half an
   ulp (ties round to even, which is 2^128). */
#define FLOAT_OVERFLOW 0x1.ffffffp+127

static int reject_nonnumber(PyObject *value, const char *what, const char *expected)
{
    if (PyUnicode_Check(value) || PyBytes_Check(value) || PyByteArray_Check(value)
        || value == Py_None) {
        PyErr_Format(PyExc_TypeError, "%s: expected %s, got %.100s",
                     what, expected, Py_TYPE(value)->tp_name);
        return -1;
    }
    return 0;
}

static int as_double(PyObject *value, double *out, const char *what)
{
    if (reject_nonnumber(value, what, "a real number") < 0)
        return -1;
    if (PyComplex_Check(value) || PyArray_IsScalar(value, ComplexFloating)) {
        PyErr_Format(PyExc_TypeError,
                     "%s: expected a real number, got %.100s %R",
                     what, Py_TYPE(value)->tp_name, value);
        return -1;
    }
    double d = PyFloat_AsDouble(value);
    if (d == -1.0 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_OverflowError,
                         "%s: %R is too large for a C double", what, value);
        } else {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "%s: expected a real number, got %.100s",
                         what, Py_TYPE(value)->tp_name);
        }
        return -1;
    }
    *out = d;
    return 0;
}

static int to_float(double d, float *out, PyObject *value, const char *what)
{
    if (isfinite(d) && fabs(d) >= FLOAT_OVERFLOW) {
        PyErr_Format(PyExc_OverflowError,
                     "%s: %R is beyond the range of a C float (max 3.4028234663852886e+38)",
                     what, value);
        return -1;
    }
    *out = (float)d;
    return 0;
}

static int convert_real(const nt_type *t, PyObject *value, void *cell, const char *what)
{
    double d;
    if (as_double(value, &d, what) < 0)
        return -1;
    memset(cell, 0, 8);
    if (t->kind == NT_F64) {
        memcpy(cell, &d, 8);
        return 0;
    }
    float f;
    if (to_float(d, &f, value, what) < 0)
        return -1;
    memcpy(cell, &f, 4);
    return 0;
}

static int convert_complex(const nt_type *t, PyObject *value, void *cell, const char *what)
{
    if (reject_nonnumber(value, what, "a complex number") < 0)
        return -1;
    Py_complex c = PyComplex_AsCComplex(value);
    if (c.real == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: expected a complex number, got %.100s",
                     what, Py_TYPE(value)->tp_name);
        return -1;
    }
    if (t->kind == NT_C128) {
        double parts[2] = { c.real, c.imag };
        memcpy(cell, parts, 16);
        return 0;
    }
    float parts[2];
    if (to_float(c.real, &parts[0], value, what) < 0
        || to_float(c.imag, &parts[1], value, what) < 0)
        return -1;
    memset(cell, 0, 8);
    memcpy(cell, parts, 8);
    return 0;
}

/* ---- derived values: size(arr), shape(arr, i), stride(arr, i) ---- */

static int convert_derived(const nt_type *t, PyObject *marker, void *cell,
                           const char *what)
{
    if (!NT_IS_INT(t->kind) || t->kind == NT_BOOL) {
        PyErr_Format(PyExc_TypeError,
                     "%s: size(), shape() and stride() bind integer parameters only",
                     what);
        return -1;
    }
    PyObject *kind = NULL, *obj = NULL, *axis_obj = NULL, *elements_obj = NULL, *num = NULL;
    nt_held *h = NULL;
    int result = -1;
    kind = PyObject_GetAttr(marker, nt_state.s_kind);
    obj = PyObject_GetAttr(marker, nt_state.s_obj);
    axis_obj = PyObject_GetAttr(marker, nt_state.s_axis);
    elements_obj = PyObject_GetAttr(marker, nt_state.s_elements);
    if (kind == NULL || obj == NULL || axis_obj == NULL || elements_obj == NULL)
        goto done;
    h = nt_held_get(obj, what);
    if (h == NULL)
        goto done;
    const Py_buffer *v = &h->view;
    Py_ssize_t value;
    if (kind == nt_state.s_size || PyUnicode_CompareWithASCIIString(kind, "size") == 0) {
        value = 1;
        for (int d = 0; d < v->ndim; d++)
            value *= v->shape[d];
    } else {
        Py_ssize_t axis = PyLong_AsSsize_t(axis_obj);
        if (axis == -1 && PyErr_Occurred())
            goto done;
        Py_ssize_t ax = axis < 0 ? axis + v->ndim : axis;
        if (ax < 0 || ax >= v->ndim) {
            PyErr_Format(PyExc_ValueError,
                         "%s: %U(arr, %zd) asks for axis %zd but the array has %d dimension%s",
                         what, kind, axis, axis, v->ndim, v->ndim == 1 ? "" : "s");
            goto done;
        }
        if (kind == nt_state.s_shape || PyUnicode_CompareWithASCIIString(kind, "shape") == 0) {
            value = v->shape[ax];
        } else {
            Py_ssize_t stride = v->itemsize;
            if (v->strides != NULL)
                stride = v->strides[ax];
            else
                for (int d = v->ndim - 1; d > ax; d--)
                    stride *= v->shape[d];
            int elements = PyObject_IsTrue(elements_obj);
            if (elements < 0)
                goto done;
            if (elements) {
                if (stride % v->itemsize != 0) {
                    PyErr_Format(PyExc_ValueError,
                                 "%s: stride %zd bytes of axis %zd is not a whole number "
                                 "of %zd-byte elements",
                                 what, stride, ax, v->itemsize);
                    goto done;
                }
                stride /= v->itemsize;
            }
            value = stride;
        }
    }
    /* The value is copied into the context; the buffer need not stay held.
       The marker bound with the thunk keeps a reference to the array, which
       is what stops NumPy's resize() from changing the shape under it. */
    num = PyLong_FromSsize_t(value);
    if (num == NULL || convert_int(t, num, cell, what) < 0)
        goto done;
    result = 0;
done:
    nt_held_release(h);
    Py_XDECREF(kind);
    Py_XDECREF(obj);
    Py_XDECREF(axis_obj);
    Py_XDECREF(elements_obj);
    Py_XDECREF(num);
    return result;
}

/* ---- buffers for T * ---- */

static const char *kind_label(int kind)
{
    return nt_kind_name(kind);
}

static int element_matches(const nt_type *t, const nt_elem *e)
{
    if (t->base == NT_VOID)
        return 1;
    if (e->kind == t->base)
        return 1;
    /* C char is its own type: any one-byte integer buffer may back a char *
       (bytes and bytearray export 'B'). */
    int spelled_char = t->spelling < nt_nspellings
        && strcmp(nt_spellings[t->spelling].name, "char") == 0;
    return spelled_char && (e->kind == NT_I8 || e->kind == NT_U8);
}

static size_t kind_align(int kind)
{
    nt_type s = { (uint8_t)kind, 0, 0, 0, 0, NULL };
    return nt_type_align(&s);
}

static int is_pointer_object(const Py_buffer *v)
{
    const char *f = v->format;
    if (f == NULL || v->ndim != 0)
        return 0;
    if (*f == '@' || *f == '=' || *f == '<' || *f == '>' || *f == '!')
        f++;
    return *f == '&' || *f == 'P' || *f == 'z';
}

/* 0 bound, -1 error, 1 not a data buffer (a pointer object: adapt it). */
static int convert_buffer(const nt_type *t, PyObject *obj, int strided, void *cell,
                          nt_held **held, const char *what)
{
    if (t->kind == NT_FNPTR) {
        PyErr_Format(PyExc_TypeError,
                     "%s: a buffer cannot be bound to a function pointer", what);
        return -1;
    }
    if (t->depth != 1) {
        char type[64];
        nt_type_format(t, type, sizeof(type));
        PyErr_Format(PyExc_TypeError,
                     "%s: a buffer can be bound to a single-level pointer (T *) only, "
                     "not to %s; pass numthunk.address(...) for other pointers",
                     what, type);
        return -1;
    }
    nt_held *h = nt_held_get(obj, what);
    if (h == NULL)
        return -1;
    const Py_buffer *v = &h->view;
    if (is_pointer_object(v)) {
        /* A ctypes pointer (or c_void_p, c_char_p) exports the bytes of the
           pointer itself; what the caller means is its value. */
        nt_held_release(h);
        return 1;
    }
    nt_elem e;
    if (nt_elem_decode(v, &e, what) < 0)
        goto error;
    if (!element_matches(t, &e)) {
        char type[64];
        nt_type_format(t, type, sizeof(type));
        if (e.kind == NT_VOID)
            PyErr_Format(PyExc_TypeError,
                         "%s: expected a buffer of %s for %s, got format '%s', "
                         "which is not a supported scalar type",
                         what, kind_label(t->base), type, e.format);
        else
            PyErr_Format(PyExc_TypeError,
                         "%s: expected a buffer of %s for %s, got %s (format '%s')",
                         what, kind_label(t->base), type, kind_label(e.kind), e.format);
        goto error;
    }
    if (v->readonly && !(t->cflags & NT_CONST_BASE)) {
        PyErr_Format(PyExc_ValueError,
                     "%s: the buffer is read-only but the parameter is a non-const "
                     "pointer (the target may write through it); pass a writable "
                     "array, or declare the parameter const", what);
        goto error;
    }
    size_t align = t->base == NT_VOID ? 1 : kind_align(t->base);
    if (!nt_is_aligned(v, align)) {
        PyErr_Format(PyExc_ValueError,
                     "%s: the buffer's data is not aligned to %zu bytes "
                     "(address %p); copy it, e.g. np.require(arr, requirements='A')",
                     what, align, v->buf);
        goto error;
    }
    if (!strided && !PyBuffer_IsContiguous(v, 'C')) {
        PyErr_Format(PyExc_ValueError,
                     "%s: the buffer is not C-contiguous; pass numthunk.strided(arr) "
                     "if the target takes strides too, or np.ascontiguousarray(arr) "
                     "to copy it", what);
        goto error;
    }
    void *p = v->buf;
    memcpy(cell, &p, sizeof(p));
    h->next = *held;
    *held = h;
    return 0;
error:
    nt_held_release(h);
    return -1;
}

/* ---- Cython typed memoryviews (__Pyx_memviewslice by value) ---- */

static int convert_memview(PyObject *obj, void *cell, nt_held **held,
                           const nt_mvspec *mv, const char *what)
{
    if (mv == NULL) {
        PyErr_Format(PyExc_TypeError,
                     "%s: a __Pyx_memviewslice parameter needs a declaration of its "
                     "dtype and ndim (the capsule signature does not carry them), "
                     "e.g. memoryviews={<index>: 'double[:, ::1]'}", what);
        return -1;
    }
    nt_held *h = nt_held_get(obj, what);
    if (h == NULL)
        return -1;
    const Py_buffer *v = &h->view;
    nt_elem e;
    if (nt_elem_decode(v, &e, what) < 0)
        goto error;
    if (e.kind != mv->kind) {
        PyErr_Format(PyExc_TypeError,
                     "%s: the memoryview is declared %s, got a buffer of %s (format '%s')",
                     what, kind_label(mv->kind),
                     e.kind == NT_VOID ? "an unsupported type" : kind_label(e.kind),
                     e.format);
        goto error;
    }
    if (v->ndim != mv->ndim) {
        PyErr_Format(PyExc_ValueError,
                     "%s: the memoryview is declared %d-dimensional, got a buffer with "
                     "%d dimension%s", what, mv->ndim, v->ndim, v->ndim == 1 ? "" : "s");
        goto error;
    }
    if (v->ndim > NT_MEMVIEW_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "%s: memoryviews have at most %d dimensions",
                     what, NT_MEMVIEW_MAX_DIMS);
        goto error;
    }
    if (v->readonly && !mv->is_const) {
        PyErr_Format(PyExc_ValueError,
                     "%s: the buffer is read-only but the memoryview is not declared "
                     "const", what);
        goto error;
    }
    if (!nt_is_aligned(v, kind_align(mv->kind))) {
        PyErr_Format(PyExc_ValueError, "%s: the buffer's data is not aligned", what);
        goto error;
    }
    if (mv->contig && !PyBuffer_IsContiguous(v, mv->contig)) {
        PyErr_Format(PyExc_ValueError,
                     "%s: the memoryview is declared %s-contiguous but the buffer is not",
                     what, mv->contig == 'C' ? "C" : "Fortran");
        goto error;
    }
    nt_memviewslice s;
    memset(&s, 0, sizeof(s));
    s.memview = NULL;
    s.data = v->buf;
    Py_ssize_t stride = v->itemsize;
    for (int d = v->ndim - 1; d >= 0; d--) {
        s.shape[d] = v->shape[d];
        s.strides[d] = v->strides != NULL ? v->strides[d] : stride;
        stride *= v->shape[d];
    }
    for (int d = 0; d < NT_MEMVIEW_MAX_DIMS; d++)
        s.suboffsets[d] = -1;
    memcpy(cell, &s, sizeof(s));
    h->next = *held;
    *held = h;
    return 0;
error:
    nt_held_release(h);
    return -1;
}

/* ---- pointers ---- */

static int convert_pointer(const nt_sig *sig, int i, PyObject *value, void *cell,
                           nt_held **held, const char *what, int depth)
{
    const nt_type *t = &sig->args[i];
    if (value == Py_None) {
        memset(cell, 0, 8);
        return 0;
    }
    if (nt_state.address_type != NULL
        && PyObject_TypeCheck(value, (PyTypeObject *)nt_state.address_type)) {
        PyObject *num = PyObject_GetAttr(value, nt_state.s_value);
        if (num == NULL)
            return -1;
        void *p = PyLong_AsVoidPtr(num);
        Py_DECREF(num);
        if (p == NULL && PyErr_Occurred())
            return -1;
        memcpy(cell, &p, sizeof(p));
        return 0;
    }
    if (PyLong_Check(value) && !PyBool_Check(value)) {
        PyErr_Format(PyExc_TypeError,
                     "%s: a bare int is not accepted as a pointer; wrap it "
                     "explicitly: numthunk.address(%S)", what, value);
        return -1;
    }
    if (nt_state.derived_type != NULL
        && PyObject_TypeCheck(value, (PyTypeObject *)nt_state.derived_type)) {
        PyErr_Format(PyExc_TypeError,
                     "%s: size(), shape() and stride() bind integer parameters only",
                     what);
        return -1;
    }
    if (nt_state.strided_type != NULL
        && PyObject_TypeCheck(value, (PyTypeObject *)nt_state.strided_type)) {
        PyObject *inner = PyObject_GetAttr(value, nt_state.s_obj);
        if (inner == NULL)
            return -1;
        int r = convert_buffer(t, inner, 1, cell, held, what);
        Py_DECREF(inner);
        if (r > 0)
            PyErr_Format(PyExc_TypeError, "%s: strided() takes an array, not a pointer", what);
        return r > 0 ? -1 : r;
    }
    if (t->kind == NT_PTR && PyObject_CheckBuffer(value)) {
        int r = convert_buffer(t, value, 0, cell, held, what);
        if (r <= 0)
            return r;
    }
    /* ctypes and cffi pointers, arr.ctypes, thunks for function pointers,
       ref() cells: the Python layer knows them. */
    if (nt_state.adapt != NULL && depth == 0) {
        PyObject *fnsig = Py_None;
        Py_INCREF(fnsig);
        if (t->kind == NT_FNPTR && t->fn != NULL) {
            Py_DECREF(fnsig);
            nt_sig *copy = nt_sig_copy(t->fn);
            if (copy == NULL)
                return PyErr_NoMemory(), -1;
            fnsig = nt_signature_wrap(nt_state.signature_type, copy);
            if (fnsig == NULL)
                return -1;
        }
        char type[160];
        nt_type_format(t, type, sizeof(type));
        PyObject *r = PyObject_CallFunction(nt_state.adapt, "OssO", value, what, type, fnsig);
        Py_DECREF(fnsig);
        if (r == NULL)
            return -1;
        if (r != Py_NotImplemented) {
            int rc = convert_pointer(sig, i, r, cell, held, what, depth + 1);
            Py_DECREF(r);
            return rc;
        }
        Py_DECREF(r);
    }
    char type[160];
    nt_type_format(t, type, sizeof(type));
    PyErr_Format(PyExc_TypeError,
                 "%s: cannot bind a %.100s object to %s (expected a buffer such as a "
                 "NumPy array, None, numthunk.address(n), a ctypes or cffi pointer%s)",
                 what, Py_TYPE(value)->tp_name, type,
                 t->kind == NT_FNPTR ? ", a thunk or a numthunk.Function" : "");
    return -1;
}

int nt_convert(const nt_sig *sig, int i, PyObject *value, void *cell,
               nt_held **held, const nt_mvspec *mv)
{
    char what[256];
    nt_param_label(sig, i, what, sizeof(what));
    const nt_type *t = &sig->args[i];
    if (t->kind != NT_PTR && t->kind != NT_FNPTR && t->kind != NT_MEMVIEW
        && nt_state.derived_type != NULL
        && PyObject_TypeCheck(value, (PyTypeObject *)nt_state.derived_type))
        return convert_derived(t, value, cell, what);
    switch (t->kind) {
    case NT_BOOL: case NT_I8: case NT_U8: case NT_I16: case NT_U16:
    case NT_I32: case NT_U32: case NT_I64: case NT_U64:
        return convert_int(t, value, cell, what);
    case NT_F32: case NT_F64:
        return convert_real(t, value, cell, what);
    case NT_C64: case NT_C128:
        return convert_complex(t, value, cell, what);
    case NT_PTR: case NT_FNPTR:
        return convert_pointer(sig, i, value, cell, held, what, 0);
    case NT_MEMVIEW: {
        PyObject *obj = value;
        if (nt_state.strided_type != NULL
            && PyObject_TypeCheck(value, (PyTypeObject *)nt_state.strided_type)) {
            obj = PyObject_GetAttrString(value, "obj");
            if (obj == NULL)
                return -1;
            int r = convert_memview(obj, cell, held, mv, what);
            Py_DECREF(obj);
            return r;
        }
        return convert_memview(obj, cell, held, mv, what);
    }
    default:
        PyErr_Format(PyExc_TypeError, "%s: parameters of this type cannot be bound", what);
        return -1;
    }
}

PyObject *nt_to_python(const nt_type *t, const void *ret)
{
    uint64_t w;
    memcpy(&w, ret, 8);
    switch (t->kind) {
    case NT_VOID: Py_RETURN_NONE;
    case NT_BOOL: return PyBool_FromLong((uint8_t)w != 0);
    case NT_I8:   return PyLong_FromLong((int8_t)w);
    case NT_U8:   return PyLong_FromLong((uint8_t)w);
    case NT_I16:  return PyLong_FromLong((int16_t)w);
    case NT_U16:  return PyLong_FromLong((uint16_t)w);
    case NT_I32:  return PyLong_FromLong((int32_t)w);
    case NT_U32:  return PyLong_FromUnsignedLong((uint32_t)w);
    case NT_I64:  return PyLong_FromLongLong((int64_t)w);
    case NT_U64:  return PyLong_FromUnsignedLongLong(w);
    case NT_F32: { float f; memcpy(&f, ret, 4); return PyFloat_FromDouble(f); }
    case NT_F64: { double d; memcpy(&d, ret, 8); return PyFloat_FromDouble(d); }
    case NT_C64: { float c[2]; memcpy(c, ret, 8); return PyComplex_FromDoubles(c[0], c[1]); }
    case NT_C128: { double c[2]; memcpy(c, ret, 16); return PyComplex_FromDoubles(c[0], c[1]); }
    case NT_PTR: case NT_FNPTR: {
        void *p; memcpy(&p, ret, sizeof(p)); return PyLong_FromVoidPtr(p);
    }
    default:
        PyErr_SetString(PyExc_TypeError, "this return type cannot be converted to Python");
        return NULL;
    }
}
