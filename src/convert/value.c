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
 * Cells are laid out as plan/plan.c describes: integers extended to 64 bits,
 * float in the low 4 bytes, complex 8/16 bytes, memoryview slices by value.
 *
 * Place in the pipeline: convert, between the plan (plan/plan.c) and the
 * engines: each bound or forwarded value becomes the cell the plan laid out.
 */
#include "python/pyapi.h"
#include "convert/dlpack.h"

#define NO_IMPORT_ARRAY
#define PY_ARRAY_UNIQUE_SYMBOL nt_ARRAY_API
#define NPY_NO_DEPRECATED_API  NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <numpy/arrayscalars.h>

#include <math.h>
#include <string.h>

/* The longest parameter name a label shows whole: past it, its first
   LABEL_NAME_MAX bytes and "...", so that a label (at most some 250 bytes)
   fits the 256 its callers give it with the closing parenthesis. */
#define LABEL_NAME_MAX 64

void nt_param_label(const nt_sig *sig, int i, char *buf, size_t n)
{
    char type[160];
    nt_mark_cut(type, sizeof(type), nt_type_format(&sig->args[i], type, sizeof(type)));
    if (sig->names != NULL && sig->names[i] != NULL) {
        const char *name = sig->names[i];
        int cut = strlen(name) > LABEL_NAME_MAX;
        nt_format_cut(buf, n, "argument %d (%.*s%s: %s)", i + 1, LABEL_NAME_MAX, name,
                      cut ? "..." : "", type);
    } else {
        nt_format_cut(buf, n, "argument %d (%s)", i + 1, type);
    }
}

const char *nt_label_text(nt_label *l)
{
    if (l->fixed != NULL)
        return l->fixed;
    if (!l->done) {
        nt_param_label(l->sig, l->i, l->text, sizeof(l->text));
        l->done = 1;
    }
    return l->text;
}


/* A value as a range message shows it: its repr, whole up to SHOWN_WHOLE
   characters (np.clongdouble's longest fits); a longer one (10**400,
   Decimal(10**400)) by its first SHOWN_CUT characters and "...", an int
   with its count of digits. An int too long for repr() (over
   sys.get_int_max_str_digits()) shows its count of bits. Called with no
   exception set; NULL with the exception when it passes (a MemoryError,
   a KeyboardInterrupt in a __repr__), which the caller raises as it is. */
#define SHOWN_WHOLE 80
#define SHOWN_CUT   32

typedef struct {
    char text[SHOWN_WHOLE + 1];
} shown;

static const char *show_unprintable(PyObject *v, shown *s)
{
    Py_ssize_t bits = -1;
    if (PyLong_Check(v)) {
        PyObject *n = PyObject_CallMethod(v, "bit_length", NULL);
        bits = n != NULL ? PyLong_AsSsize_t(n) : -1;
        Py_XDECREF(n);
        if (bits < 0 && nt_error_passes())
            return NULL;
        PyErr_Clear();
    }
    if (bits >= 0)
        PyOS_snprintf(s->text, sizeof(s->text), "an int of %zd bits", bits);
    else
        PyOS_snprintf(s->text, sizeof(s->text), "a %.60s", Py_TYPE(v)->tp_name);
    return s->text;
}

static const char *show(PyObject *v, shown *s)
{
    PyObject *r = PyObject_Repr(v);
    Py_ssize_t len = 0;
    const char *text = r != NULL ? PyUnicode_AsUTF8AndSize(r, &len) : NULL;
    if (text == NULL) {
        Py_XDECREF(r);
        if (nt_error_passes())
            return NULL;
        PyErr_Clear();
        return show_unprintable(v, s);
    }
    if (len <= SHOWN_WHOLE) {
        memcpy(s->text, text, (size_t)len + 1);
    } else {
        int cut = SHOWN_CUT;
        while (cut > 0 && (text[cut] & 0xC0) == 0x80) /* not inside a character */
            cut--;
        if (PyLong_CheckExact(v))
            PyOS_snprintf(s->text, sizeof(s->text), "%.*s... (%zd digits)", cut, text,
                          len - (text[0] == '-'));
        else
            PyOS_snprintf(s->text, sizeof(s->text), "%.*s...", cut, text);
    }
    Py_DECREF(r);
    return s->text;
}

/* The conversion the value's type defines for what the C API calls to
   convert it, or NULL if none: when converting raised, the value's own
   code did (the name says which), else the value is no number. */
static const char *index_hook(PyObject *v)
{
    PyNumberMethods *nb = Py_TYPE(v)->tp_as_number;
    return nb != NULL && nb->nb_index != NULL ? "__index__" : NULL;
}

static const char *float_hook(PyObject *v)
{
    PyNumberMethods *nb = Py_TYPE(v)->tp_as_number;
    return nb != NULL && nb->nb_float != NULL ? "__float__" : index_hook(v);
}

static const char *complex_hook(PyObject *v)
{
    nt_saved_error saved; /* the conversion's, the cause to report */
    nt_error_save(&saved);
    PyObject *m = PyObject_GetAttrString((PyObject *)Py_TYPE(v), "__complex__");
    int has = m != NULL;
    PyErr_Clear();
    Py_XDECREF(m);
    nt_error_restore(&saved);
    return has ? "__complex__" : float_hook(v);
}

/* Whether a value that did not convert to a scalar is an array or a
   sequence of values (an ndarray of one dimension or more, a list, a
   tuple, an array.array), as SciPy's routines pass their Python callable:
   it is refused as no scalar. Text is no sequence here (refused before). */
static int is_many(PyObject *v)
{
    if (PyArray_Check(v))
        return PyArray_NDIM((PyArrayObject *)v) > 0;
    return PySequence_Check(v) && !PyUnicode_Check(v) && !PyBytes_Check(v) && !PyByteArray_Check(v);
}

/* What SciPy routines that call their function with arrays take, after a
   call from Python passed an array: the thunk's lowlevelcallable(), of a
   signature the routine lists (docs/scipy.md's table, ndimage's rows). */
#define SCIPY_HINT                                                                          \
    "; a thunk or Function called from Python takes one value per parameter. A SciPy "      \
    "routine that calls its function with arrays takes t.lowlevelcallable() instead, of a " \
    "signature it lists: ndimage.generic_filter 'int (double *, intptr_t, double *, void "  \
    "*)', generic_filter1d 'int (double *, intptr_t, double *, intptr_t, void *)', "        \
    "geometric_transform 'int (intptr_t *, double *, int, int, void *)' (docs/scipy.md)"

/* The refusal of an array or sequence for a scalar parameter: what it is
   (its shape, or its count of items), and from a call, the hint above. */
static int refuse_many(PyObject *value, const char *expected, nt_label *what)
{
    if (nt_error_passes())
        return -1;
    PyErr_Clear();
    const char *type = Py_TYPE(value)->tp_name;
    const char *a = strchr("aeiouAEIOU", type[0]) != NULL ? "an" : "a";
    char got[200];
    if (PyArray_Check(value)) {
        PyArrayObject *arr = (PyArrayObject *)value;
        char shape[96];
        size_t len = 0;
        int nd = PyArray_NDIM(arr);
        for (int k = 0; k < nd && len < sizeof(shape); k++)
            len += (size_t)PyOS_snprintf(shape + len, sizeof(shape) - len, "%s%zd",
                                         k > 0 ? ", " : "", (Py_ssize_t)PyArray_DIM(arr, k));
        nt_mark_cut(shape, sizeof(shape), len);
        nt_format_cut(got, sizeof(got), "%s %.100s of shape (%s%s)", a, type, shape,
                      nd == 1 ? "," : "");
    } else {
        Py_ssize_t n = PyObject_Length(value);
        if (n < 0 && nt_error_passes())
            return -1;
        PyErr_Clear();
        if (n < 0)
            nt_format_cut(got, sizeof(got), "%s %.100s", a, type);
        else
            nt_format_cut(got, sizeof(got), "%s %.100s of %zd item%s", a, type, n,
                          n == 1 ? "" : "s");
    }
    PyErr_Format(PyExc_TypeError, "%s: expected %s, got %s, which is not a scalar%s",
                 nt_label_text(what), expected, got, what->call ? SCIPY_HINT : "");
    return -1;
}

/* The refusal of a value whose conversion raised (not an overflow): its
   hook (above) raised, or it is no number. -1. */
static int refuse_number(PyObject *value, const char *expected, const char *hook, nt_label *what)
{
    if (is_many(value))
        return refuse_many(value, expected, what);
    if (hook != NULL) {
        nt_raise_chained(PyExc_TypeError, "%s: expected %s; %.100s.%s() raised",
                         nt_label_text(what), expected, Py_TYPE(value)->tp_name, hook);
        return -1;
    }
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "%s: expected %s, got %.100s", nt_label_text(what), expected,
                 Py_TYPE(value)->tp_name);
    return -1;
}

static int is_floatlike(PyObject *v)
{
    return PyFloat_Check(v) || PyComplex_Check(v) || PyArray_IsScalar(v, Floating)
        || PyArray_IsScalar(v, ComplexFloating);
}

static int is_boollike(PyObject *v)
{
    return PyBool_Check(v) || PyArray_IsScalar(v, Bool);
}

/* ---- integers ---- */

/* A refusal of a value out of range: its range from the kind table. */
static int overflow(nt_label *what, const nt_type *t, PyObject *num)
{
    char type[64];
    nt_mark_cut(type, sizeof(type), nt_type_format(t, type, sizeof(type)));
    const nt_kind_info *r = &nt_kinds[t->kind];
    int bits = 8 * r->size;
    shown s;
    const char *v = show(num, &s);
    if (v == NULL)
        return -1;
    if (t->kind == NT_BOOL)
        PyErr_Format(PyExc_OverflowError,
                     "%s: %s is not a valid C bool (expected True, False, 0 or 1)",
                     nt_label_text(what), v);
    else if (r->is_signed)
        PyErr_Format(PyExc_OverflowError, "%s: %s does not fit in a %d-bit C %s (range %lld..%llu)",
                     nt_label_text(what), v, bits, type, (long long)r->min,
                     (unsigned long long)r->max);
    else
        PyErr_Format(PyExc_OverflowError,
                     "%s: %s does not fit in a %d-bit unsigned C %s (range 0..%llu)",
                     nt_label_text(what), v, bits, type, (unsigned long long)r->max);
    return -1;
}

static int refuse_negative(nt_label *what, const nt_type *t, PyObject *num)
{
    char type[64];
    nt_mark_cut(type, sizeof(type), nt_type_format(t, type, sizeof(type)));
    shown s;
    const char *v = show(num, &s);
    if (v == NULL)
        return -1;
    PyErr_Format(PyExc_OverflowError, "%s: %s is negative but C %s is unsigned",
                 nt_label_text(what), v, type);
    return -1;
}

/* v into the cell of integer type t, range-checked: the cell holds it
   extended to 64 bits (unsigned values that fit are >= 0). */
static int store_int(const nt_type *t, long long v, void *cell, nt_label *what)
{
    const nt_kind_info *r = &nt_kinds[t->kind];
    int fits = v >= r->min && (v <= 0 || (unsigned long long)v <= r->max);
    if (!fits) {
        PyObject *num = PyLong_FromLongLong(v);
        if (num == NULL)
            return -1;
        if (!r->is_signed && v < 0)
            refuse_negative(what, t, num);
        else
            overflow(what, t, num);
        Py_DECREF(num);
        return -1;
    }
    int64_t s = v;
    memcpy(cell, &s, 8);
    return 0;
}

/* An int object into the cell of integer type t. */
static int store_long(const nt_type *t, PyObject *num, void *cell, nt_label *what)
{
    int ovf = 0;
    long long v = PyLong_AsLongLongAndOverflow(num, &ovf);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (ovf == 0)
        return store_int(t, v, cell, what);
    const nt_kind_info *r = &nt_kinds[t->kind];
    if (ovf < 0 && !r->is_signed)
        return refuse_negative(what, t, num);
    if (ovf < 0 || r->is_signed)
        return overflow(what, t, num);
    unsigned long long u = PyLong_AsUnsignedLongLong(num);
    if (u == (unsigned long long)-1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return -1;
        PyErr_Clear();
        return overflow(what, t, num);
    }
    if (u > r->max)
        return overflow(what, t, num);
    uint64_t w = u;
    memcpy(cell, &w, 8);
    return 0;
}

/* b'N' for a char (LAPACK's trans, uplo): the byte's value. 1 if stored. */
static int store_char_byte(const nt_type *t, PyObject *value, void *cell)
{
    if (!PyBytes_Check(value) || PyBytes_GET_SIZE(value) != 1
        || (t->kind != NT_I8 && t->kind != NT_U8))
        return 0;
    unsigned char c = (unsigned char)PyBytes_AS_STRING(value)[0];
    int64_t v = t->kind == NT_I8 ? (int64_t)(int8_t)c : (int64_t)c;
    memcpy(cell, &v, 8);
    return 1;
}

/* The value as an int object (__index__), or NULL with the refusal: no
   float is truncated, no text read as a number. */
static PyObject *index_of(PyObject *value, nt_label *what)
{
    if (is_floatlike(value)) {
        PyErr_Format(PyExc_TypeError,
                     "%s: expected an integer, got %.100s %R (no silent truncation: "
                     "convert it explicitly if that is what you mean)",
                     nt_label_text(what), Py_TYPE(value)->tp_name, value);
        return NULL;
    }
    if (PyUnicode_Check(value) || PyBytes_Check(value) || PyByteArray_Check(value)) {
        PyErr_Format(PyExc_TypeError, "%s: expected an integer, got %.100s", nt_label_text(what),
                     Py_TYPE(value)->tp_name);
        return NULL;
    }
    if (PyArray_Check(value) && PyArray_NDIM((PyArrayObject *)value) > 0) {
        refuse_many(value, "an integer", what);
        return NULL;
    }
    PyObject *num = PyNumber_Index(value);
    if (num == NULL)
        refuse_number(value, "an integer", index_hook(value), what);
    return num;
}

static int convert_int(const nt_type *t, PyObject *value, void *cell, nt_label *what)
{
    if (PyLong_CheckExact(value))
        return store_long(t, value, cell, what); /* the common case */
    if (is_boollike(value)) {
        uint64_t bits = PyObject_IsTrue(value) ? 1 : 0;
        memcpy(cell, &bits, 8);
        return 0;
    }
    if (store_char_byte(t, value, cell))
        return 0;
    PyObject *num = index_of(value, what);
    if (num == NULL)
        return -1;
    int r = store_long(t, num, cell, what);
    Py_DECREF(num);
    return r;
}

/* ---- floating point ---- */

/* Text is no number, though float() and complex() read some (float(b"2"),
   complex("1j")). Anything else that does not convert is refused after. */
static int reject_nonnumber(PyObject *value, nt_label *what, const char *expected)
{
    /* an array of one item is no scalar either, though NumPy before 1.25
       gives its float() and complex() */
    if (PyArray_Check(value) && PyArray_NDIM((PyArrayObject *)value) > 0)
        return refuse_many(value, expected, what);
    if (PyUnicode_Check(value) || PyBytes_Check(value) || PyByteArray_Check(value)) {
        PyErr_Format(PyExc_TypeError, "%s: expected %s, got %.100s", nt_label_text(what), expected,
                     Py_TYPE(value)->tp_name);
        return -1;
    }
    return 0;
}

/* A value that is no float but converts to inf (Decimal('1e400'), a
   __float__ that overflows to inf) is refused as 2**1024 is; a value that is
   itself infinite (Decimal('Infinity')) compares equal to inf and passes.
   0, or -1 with an exception set. */
static int refuse_overflow_to_inf(PyObject *value, double d, nt_label *what, const char *ctype)
{
    if (!isinf(d) || PyFloat_Check(value) || PyComplex_Check(value)
        || PyArray_IsScalar(value, Floating) || PyArray_IsScalar(value, ComplexFloating))
        return 0;
    PyObject *inf = PyFloat_FromDouble(d);
    if (inf == NULL)
        return -1;
    int same = PyObject_RichCompareBool(value, inf, Py_EQ);
    Py_DECREF(inf);
    if (same > 0)
        return 0;
    if (same < 0 && nt_error_passes())
        return -1;
    PyErr_Clear();
    shown s;
    const char *v = show(value, &s);
    if (v == NULL)
        return -1;
    PyErr_Format(PyExc_OverflowError, "%s: %s is too large for a C %s (it converts to %s)",
                 nt_label_text(what), v, ctype, d > 0 ? "inf" : "-inf");
    return -1;
}

static int too_large(PyObject *value, nt_label *what, const char *ctype)
{
    shown s;
    const char *v = show(value, &s);
    if (v != NULL)
        PyErr_Format(PyExc_OverflowError, "%s: %s is too large for a C %s", nt_label_text(what), v,
                     ctype);
    return -1;
}

/* The value as a double, for a parameter of C type ctype (double or
   float: a value beyond any double is too large for either). */
static int as_double(PyObject *value, double *out, nt_label *what, const char *ctype)
{
    if (reject_nonnumber(value, what, "a real number") < 0)
        return -1;
    if (PyComplex_Check(value) || PyArray_IsScalar(value, ComplexFloating)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a real number, got %.100s %R",
                     nt_label_text(what), Py_TYPE(value)->tp_name, value);
        return -1;
    }
    if (PyArray_IsScalar(value, LongDouble)) {
        /* a finite long double beyond DBL_MAX converts to inf: refuse it as
           an int beyond DBL_MAX is refused */
        npy_longdouble ld = PyArrayScalar_VAL(value, LongDouble);
        if (isfinite(ld) && !isfinite((double)ld))
            return too_large(value, what, ctype);
    }
    double d = PyFloat_AsDouble(value);
    if (d == -1.0 && PyErr_Occurred()) {
        if (nt_error_passes())
            return -1;
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return refuse_number(value, "a real number", float_hook(value), what);
        PyErr_Clear();
        return too_large(value, what, ctype);
    }
    if (refuse_overflow_to_inf(value, d, what, ctype) < 0)
        return -1;
    *out = d;
    return 0;
}

/* d as a C float, refused where it would round to infinity (the kind
   table's float limits). */
static int to_float(double d, float *out, PyObject *value, nt_label *what)
{
    const nt_kind_info *r = &nt_kinds[NT_F32];
    if (isfinite(d) && fabs(d) >= r->fover) {
        shown s;
        const char *v = show(value, &s);
        PyObject *max = v != NULL ? PyFloat_FromDouble(r->fmax) : NULL;
        if (max == NULL)
            return -1;
        PyErr_Format(PyExc_OverflowError, "%s: %s is beyond the range of a C %s (max %R)",
                     nt_label_text(what), v, r->c_text, max);
        Py_DECREF(max);
        return -1;
    }
    *out = (float)d;
    return 0;
}

static int convert_real(const nt_type *t, PyObject *value, void *cell, nt_label *what)
{
    double d = 0.0; /* set by as_double on success; GCC -O1 with TSan cannot see that */
    if (as_double(value, &d, what, nt_kinds[t->kind].c_text) < 0)
        return -1;
    memset(cell, 0, 8);
    if (t->kind == NT_F64) { /* the store differs per kind */
        memcpy(cell, &d, 8);
        return 0;
    }
    float f = 0.0f; /* set by to_float on success; GCC cannot see that once inlined */
    if (to_float(d, &f, value, what) < 0)
        return -1;
    memcpy(cell, &f, 4);
    return 0;
}

/* The refusal of a complex value whose conversion raised, c the complex
   kind's row. */
static int complex_failed(const nt_kind_info *c, PyObject *value, nt_label *what)
{
    if (nt_error_passes())
        return -1;
    if (!PyErr_ExceptionMatches(PyExc_OverflowError))
        return refuse_number(value, "a complex number", complex_hook(value), what);
    /* the value shown with the overflow put aside (show runs its repr) */
    nt_saved_error cause;
    nt_error_save(&cause);
    shown s;
    const char *v = show(value, &s);
    PyObject *max = v != NULL ? PyFloat_FromDouble(c->fmax) : NULL;
    if (max == NULL) { /* that error is raised instead */
        nt_saved_error fresh;
        nt_error_save(&fresh);
        nt_error_restore(&cause);
        PyErr_Clear();
        nt_error_restore(&fresh);
        return -1;
    }
    nt_error_restore(&cause);
    nt_raise_chained(PyExc_OverflowError,
                     "%s: %s does not fit in a C %s (its parts are C %ss, max %R)",
                     nt_label_text(what), v, c->c_text, nt_kinds[c->part].c_text, max);
    Py_DECREF(max);
    return -1;
}

static int convert_complex(const nt_type *t, PyObject *value, void *cell, nt_label *what)
{
    if (reject_nonnumber(value, what, "a complex number") < 0)
        return -1;
    const nt_kind_info *r = &nt_kinds[t->kind];
    Py_complex c = PyComplex_AsCComplex(value);
    if (c.real == -1.0 && PyErr_Occurred())
        return complex_failed(r, value, what);
    if (refuse_overflow_to_inf(value, isinf(c.real) ? c.real : c.imag, what, r->c_text) < 0)
        return -1;
    /* the store differs per kind: two doubles, or two floats each checked */
    if (r->part == NT_F64) {
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

/* ---- the layout of a buffer: from an ndarray directly, or a Py_buffer ---- */

typedef struct {
    const char *buf;
    int ndim;
    Py_ssize_t itemsize;
    const Py_ssize_t *shape;
    const Py_ssize_t *strides; /* NULL: C-contiguous */
} layout;

static int is_plain_ndarray(PyObject *v)
{
    /* Subclasses that keep NumPy's buffer export read the same memory. */
    return PyArray_Check(v) && Py_TYPE(v)->tp_as_buffer != NULL
        && Py_TYPE(v)->tp_as_buffer->bf_getbuffer == PyArray_Type.tp_as_buffer->bf_getbuffer;
}

static layout layout_of_array(PyArrayObject *a)
{
    return (layout){ PyArray_BYTES(a), PyArray_NDIM(a), PyArray_ITEMSIZE(a), PyArray_DIMS(a),
                     PyArray_STRIDES(a) };
}

static layout layout_of_view(const Py_buffer *v)
{
    return (layout){ v->buf, v->ndim, v->itemsize, v->shape, v->strides };
}

static Py_ssize_t layout_stride(const layout *l, int axis)
{
    if (l->strides != NULL)
        return l->strides[axis];
    Py_ssize_t stride = l->itemsize;
    for (int d = l->ndim - 1; d > axis; d--)
        stride *= l->shape[d];
    return stride;
}

/* Two bindings that read the same memory with the same layout are "the
   same array" for the values derived from it, whatever object exported
   it (ndarray, arr.ctypes, memoryview, any buffer exporter). */
static uint64_t layout_key(const layout *l)
{
    uint64_t h = 14695981039346656037u;
#define MIX(x) (h = (h ^ (uint64_t)(x)) * 1099511628211u)
    MIX((uintptr_t)l->buf);
    MIX(l->ndim);
    MIX(l->itemsize);
    for (int d = 0; d < l->ndim; d++) {
        MIX(l->shape[d]);
        MIX(layout_stride(l, d));
    }
#undef MIX
    return h != 0 ? h : 1;
}

/* ---- derived values: size(arr), shape(arr, i), stride(arr, i) ---- */

static const char *const derived_names[] = { "size", "shape", "stride" };

static int derived_value(const nt_DerivedObject *d, const layout *l, Py_ssize_t *out,
                         nt_label *what)
{
    if (d->kind == NT_DERIVED_SIZE) {
        /* the shape's product: bounded by the bytes (convert/buffer.c, NumPy) unless
           the elements are 0 bytes long, where it may pass PY_SSIZE_T_MAX */
        Py_ssize_t n = 1;
        for (int k = 0; k < l->ndim; k++)
            if (l->shape[k] == 0)
                n = 0;
        for (int k = 0; k < l->ndim && n != 0; k++) {
            if (n > PY_SSIZE_T_MAX / l->shape[k]) {
                PyErr_Format(PyExc_OverflowError,
                             "%s: size(arr) of an array of more than %zd elements (its "
                             "elements are %zd bytes long)",
                             nt_label_text(what), PY_SSIZE_T_MAX, l->itemsize);
                return -1;
            }
            n *= l->shape[k];
        }
        *out = n;
        return 0;
    }
    Py_ssize_t ax = d->axis < 0 ? d->axis + l->ndim : d->axis;
    if (ax < 0 || ax >= l->ndim) {
        PyErr_Format(PyExc_ValueError,
                     "%s: %s(arr, %zd) asks for axis %zd but the array has %d dimension%s",
                     nt_label_text(what), derived_names[d->kind], d->axis, d->axis, l->ndim,
                     l->ndim == 1 ? "" : "s");
        return -1;
    }
    if (d->kind == NT_DERIVED_SHAPE) {
        *out = l->shape[ax];
        return 0;
    }
    Py_ssize_t stride = layout_stride(l, (int)ax);
    if (d->elements) {
        if (l->itemsize == 0) {
            PyErr_Format(PyExc_ValueError,
                         "%s: stride(arr, %zd, elements=True) of an array whose elements "
                         "are 0 bytes long: there is no stride in elements",
                         nt_label_text(what), ax);
            return -1;
        }
        if (stride % l->itemsize != 0) {
            PyErr_Format(PyExc_ValueError,
                         "%s: stride %zd bytes of axis %zd is not a whole number "
                         "of %zd-byte elements",
                         nt_label_text(what), stride, ax, l->itemsize);
            return -1;
        }
        stride /= l->itemsize;
    }
    *out = stride;
    return 0;
}

static int store_int(const nt_type *t, long long v, void *cell, nt_label *what);

/* The array behind a source object: arr.ctypes is resolved by the Python
   package before it gets here; strided(arr) is unwrapped. */
static PyObject *source_object(PyObject *obj)
{
    return nt_is_strided(obj) ? ((nt_StridedObject *)obj)->obj : obj;
}

static int derived_from(const nt_type *t, const nt_DerivedObject *d, PyObject *src, void *cell,
                        uint64_t *key, nt_label *what)
{
    if (!NT_IS_INT(t->kind) || t->kind == NT_BOOL) {
        PyErr_Format(PyExc_TypeError,
                     "%s: size(), shape() and stride() bind integer parameters only",
                     nt_label_text(what));
        return -1;
    }
    src = source_object(src);
    /* The value is copied into the context; the buffer need not stay held.
       The marker bound with the thunk keeps a reference to the array, which
       is what stops NumPy's resize() from changing the shape under it. */
    nt_held *h = NULL;
    layout l;
    if (is_plain_ndarray(src)) {
        l = layout_of_array((PyArrayObject *)src);
    } else {
        h = nt_held_get(src, nt_label_text(what));
        if (h == NULL)
            return -1;
        l = layout_of_view(&h->view);
    }
    Py_ssize_t value;
    int r = derived_value(d, &l, &value, what);
    if (key != NULL) /* (read only where r is 0) */
        *key = layout_key(&l);
    if (h != NULL)
        nt_held_release(h);
    return r < 0 ? -1 : store_int(t, value, cell, what);
}

int nt_convert_derived_from(const nt_sig *sig, int j, nt_DerivedObject *d, PyObject *new_source,
                            void *cell, uint64_t *key)
{
    nt_label what;
    what.sig = sig;
    what.i = j;
    what.fixed = NULL;
    what.done = 0;
    what.call = 0;
    return derived_from(&sig->args[j], d, new_source, cell, key, &what);
}

/* ---- buffers for T * ---- */

static int element_matches(const nt_type *t, int kind)
{
    if (t->base == NT_VOID)
        return 1;
    if (kind == t->base)
        return 1;
    /* C char is its own type: any one-byte integer buffer may back a char *
       (bytes and bytearray export 'B'). */
    int spelled_char =
        t->spelling < nt_nspellings && strcmp(nt_spellings[t->spelling].name, "char") == 0;
    return spelled_char && (kind == NT_I8 || kind == NT_U8);
}

/* The alignment a buffer bound to pointer t needs: its pointee's. */
static size_t pointee_align(const nt_type *t)
{
    return t->base == NT_VOID ? 1 : nt_kinds[t->base].align;
}

/* The element kind of a native-order NumPy array of a number dtype,
   NT_VOID otherwise: NumPy's kind letter and itemsize name the row. */
static int array_kind_of(PyArrayObject *a);

/* array_kind by NumPy's built-in type number, found once per number (its
   letter and itemsize are the type's own); 0: not yet, else the kind + 1 */
static uint8_t kind_of_type[32];

static int array_kind(PyArrayObject *a)
{
    int type = PyArray_TYPE(a);
    if (!PyArray_ISNOTSWAPPED(a) || !(PyTypeNum_ISBOOL(type) || PyTypeNum_ISNUMBER(type)))
        return NT_VOID;
    if ((unsigned)type >= sizeof(kind_of_type))
        return array_kind_of(a); /* a user-defined number type */
    int known = nt_atomic_load_u8(&kind_of_type[type], NT_RELAXED);
    if (known == 0) {
        known = array_kind_of(a) + 1;
        nt_atomic_store_u8(&kind_of_type[type], (uint8_t)known, NT_RELAXED);
    }
    return known - 1;
}

static int array_kind_of(PyArrayObject *a)
{
    int value, is_signed = 1;
    switch (PyArray_DESCR(a)->kind) { /* NumPy's letters, not our kinds */
    case 'b':
        value = NT_VALUE_BOOL;
        is_signed = 0;
        break;
    case 'i': value = NT_VALUE_INT; break;
    case 'u':
        value = NT_VALUE_INT;
        is_signed = 0;
        break;
    case 'f': value = NT_VALUE_REAL; break;
    case 'c': value = NT_VALUE_COMPLEX; break;
    default: return NT_VOID;
    }
    return nt_kind_find(value, is_signed, (size_t)PyArray_ITEMSIZE(a));
}

/* An ndarray that passes every check: its data pointer, with no buffer
   export (the binding's reference pins it). 0 if the fast path does not
   apply; the general path then accepts it or says why not. */
int nt_ndarray_kind(PyObject *obj)
{
    return is_plain_ndarray(obj) ? array_kind((PyArrayObject *)obj) : NT_VOID;
}

/* A pointer to a struct the signature names (struct S *, a typedef'd
   struct): its buffer must carry a struct layout (below). A pointer keeps
   its base's spelling (parse/declarator.c push_pointer), and only a struct's base, void,
   has a name from the tag pool. */
static int is_struct_pointer(const nt_type *t)
{
    return t->kind == NT_PTR && t->depth == 1 && nt_tag_name(t->spelling) != NULL;
}

static int array_fast(const nt_type *t, PyObject *obj, int strided, void *cell, uint64_t *key)
{
    if (!is_plain_ndarray(obj) || is_struct_pointer(t))
        return 0;
    PyArrayObject *a = (PyArrayObject *)obj;
    int kind = array_kind(a);
    if (kind == NT_VOID || !element_matches(t, kind)
        || (!PyArray_ISWRITEABLE(a) && !(t->cflags & NT_CONST_BASE)) || !PyArray_ISALIGNED(a)
        || (!strided && !PyArray_IS_C_CONTIGUOUS(a)))
        return 0;
    /* PyArray_ISALIGNED is about the dtype's alignment, which is ours for
       every kind above; a buffer must also be aligned for the C type. */
    if ((uintptr_t)PyArray_DATA(a) % pointee_align(t) != 0)
        return 0;
    void *p = PyArray_DATA(a);
    memcpy(cell, &p, sizeof(p));
    if (key != NULL) {
        layout l = layout_of_array(a);
        *key = layout_key(&l);
    }
    return 1;
}

static const char *skip_order(const char *f)
{
    if (*f == '@' || *f == '=' || *f == '<' || *f == '>' || *f == '!')
        f++;
    return f;
}

/* NumPy exports no buffer for datetime64/timedelta64 arrays, and its own
   error names no parameter. */
static int refuse_datetime(PyObject *obj, nt_label *what)
{
    if (!PyArray_Check(obj))
        return 0;
    char kind = PyArray_DESCR((PyArrayObject *)obj)->kind;
    if (kind != 'M' && kind != 'm')
        return 0;
    PyErr_Format(PyExc_TypeError,
                 "%s: a %s array has no C element type (NumPy exports no buffer "
                 "for it); pass arr.view(np.int64) to bind its raw integers",
                 nt_label_text(what), kind == 'M' ? "datetime64" : "timedelta64");
    return -1;
}

/* Only a buffer whose items are declared structs (a NumPy structured
   dtype, a ctypes Structure) may stand for a struct: a bare buffer's
   length says nothing about the struct's size. The package checks the
   struct's name and size (numthunk._foreign). */
static int refuse_undeclared_struct(const nt_type *t, const Py_buffer *v, nt_label *what)
{
    const char *tag = nt_tag_name(t->spelling);
    int is_union = strncmp(tag, "union ", 6) == 0;
    const char *core = strncmp(tag, "struct ", 7) == 0 ? tag + 7 : is_union ? tag + 6 : tag;
    PyErr_Format(PyExc_TypeError,
                 "%s: a buffer of format '%s' has no declared layout for %s; bind a "
                 "NumPy structured array whose struct is declared "
                 "(numthunk.Function(..., structs={'%s': dtype})), a ctypes %s "
                 "named %s (an instance or an array), a cffi '%s *', or "
                 "numthunk.address(p)",
                 nt_label_text(what), v->format != NULL ? v->format : "B", tag, core,
                 is_union ? "Union" : "Structure", core, tag);
    return -1;
}

/* ---- held buffers: what pointers and memoryviews share ---- */

/* The buffer of obj, held: NULL with an exception naming the parameter.
   Every buffer a pointer or a memoryview binds comes through here, so
   here its items are refused if they hold Python objects. */
static nt_held *hold(PyObject *obj, nt_label *what)
{
    if (refuse_datetime(obj, what) < 0)
        return NULL;
    nt_held *h = nt_held_get(obj, nt_label_text(what));
    if (h != NULL && nt_check_plain(&h->view, nt_label_text(what)) < 0) {
        nt_held_release(h);
        return NULL;
    }
    return h;
}

/* Refuses a read-only buffer where the target may write (the declaration,
   `decl`, is not const), and one not aligned for its elements (of_struct:
   align is a struct's, nt_struct_align). */
static int check_access(const Py_buffer *v, int is_const, const char *decl, size_t align,
                        int of_struct, nt_label *what)
{
    if (v->readonly && !is_const) {
        PyErr_Format(PyExc_ValueError,
                     "%s: the buffer is read-only but %s is not declared const (the "
                     "target may write through it); pass a writable array, or declare "
                     "%s const",
                     nt_label_text(what), decl, decl);
        return -1;
    }
    return nt_check_aligned(v, align, of_struct, nt_label_text(what));
}

/* The end of a binding that holds h: the key of the memory it reads, and
   h kept with the binding. */
static void keep(nt_held *h, nt_held **held, uint64_t *key)
{
    if (key != NULL) {
        layout l = layout_of_view(&h->view);
        *key = layout_key(&l);
    }
    h->next = *held;
    *held = h;
}

/* ---- buffers for T * ---- */

/* What a buffer cannot stand for, whatever its elements: a ctypes pointer
   object, a function pointer, a pointer to pointers, a struct it does not
   declare. 0, or -1 with the refusal. */
static int refuse_target(const nt_type *t, const Py_buffer *v, int strided, nt_label *what)
{
    if (!strided && nt_is_pointer_buffer(v)) {
        /* A ctypes pointer exports the bytes of the pointer itself. Data
           pointers are resolved before the core (numthunk._foreign: the
           pointee checked, the pointer's value bound); one that reaches
           here is bound where no data pointer goes. */
        PyErr_Format(PyExc_TypeError,
                     t->kind == NT_FNPTR
                         ? "%s: a ctypes data pointer cannot be bound to a function pointer"
                         : "%s: a ctypes pointer object is bound through its value "
                           "(numthunk.address(ctypes.cast(p, ctypes.c_void_p).value))",
                     nt_label_text(what));
        return -1;
    }
    if (t->kind == NT_FNPTR) {
        PyErr_Format(PyExc_TypeError, "%s: a buffer cannot be bound to a function pointer",
                     nt_label_text(what));
        return -1;
    }
    if (t->depth != 1) {
        char type[160];
        nt_mark_cut(type, sizeof(type), nt_type_format(t, type, sizeof(type)));
        PyErr_Format(PyExc_TypeError,
                     "%s: a buffer can be bound to a single-level pointer (T *) only, "
                     "not to %s; pass numthunk.address(...) for other pointers",
                     nt_label_text(what), type);
        return -1;
    }
    if (is_struct_pointer(t) && *skip_order(v->format != NULL ? v->format : "B") != 'T')
        return refuse_undeclared_struct(t, v, what);
    if (is_struct_pointer(t))
        return nt_struct_check_order(v, nt_label_text(what));
    return 0;
}

/* The buffer's elements against the pointee, its access and layout. */
static int check_elements(const nt_type *t, const Py_buffer *v, int strided, nt_label *what)
{
    nt_elem e;
    if (nt_elem_decode(v, &e, nt_label_text(what)) < 0)
        return -1;
    if (!element_matches(t, e.kind)) {
        char type[160];
        nt_mark_cut(type, sizeof(type), nt_type_format(t, type, sizeof(type)));
        if (e.kind == NT_VOID)
            PyErr_Format(PyExc_TypeError,
                         "%s: expected a buffer of %s for %s, got format '%s', "
                         "which is not a supported scalar type",
                         nt_label_text(what), nt_kind_name(t->base), type, e.format);
        else
            PyErr_Format(
                PyExc_TypeError, "%s: expected a buffer of %s for %s, got %s (format '%s')",
                nt_label_text(what), nt_kind_name(t->base), type, nt_kind_name(e.kind), e.format);
        return -1;
    }
    /* a struct's alignment is its items' (the signature knows only its name) */
    int of_struct = is_struct_pointer(t);
    size_t align = of_struct ? nt_struct_align(v) : pointee_align(t);
    if (check_access(v, t->cflags & NT_CONST_BASE, "the parameter", align, of_struct, what) < 0)
        return -1;
    if (!strided && !PyBuffer_IsContiguous(v, 'C')) {
        PyErr_Format(PyExc_ValueError,
                     "%s: the buffer is not C-contiguous; pass numthunk.strided(arr) "
                     "if the target takes strides too, or np.ascontiguousarray(arr) "
                     "to copy it",
                     nt_label_text(what));
        return -1;
    }
    return 0;
}

static int convert_buffer(const nt_type *t, PyObject *obj, int strided, void *cell, nt_held **held,
                          uint64_t *key, nt_label *what)
{
    if (t->kind == NT_PTR && t->depth == 1 && array_fast(t, obj, strided, cell, key))
        return 0;
    nt_held *h = hold(obj, what);
    if (h == NULL)
        return -1;
    if (refuse_target(t, &h->view, strided, what) < 0
        || check_elements(t, &h->view, strided, what) < 0) {
        nt_held_release(h);
        return -1;
    }
    void *p = h->view.buf;
    memcpy(cell, &p, sizeof(p));
    keep(h, held, key);
    return 0;
}

/* ---- Cython typed memoryviews (__Pyx_memviewslice by value) ---- */

/* The buffer against the memoryview's declaration. */
static int check_memview(const Py_buffer *v, const nt_mvspec *mv, nt_label *what)
{
    nt_elem e;
    if (nt_elem_decode(v, &e, nt_label_text(what)) < 0)
        return -1;
    if (nt_is_pointer_buffer(v)) {
        PyErr_Format(PyExc_TypeError,
                     "%s: the memoryview is declared %s, got a pointer (format '%s'), not an "
                     "array: a typed memoryview takes the array itself, whose shape and "
                     "strides it carries",
                     nt_label_text(what), nt_kind_name(mv->kind), e.format);
        return -1;
    }
    if (e.kind != mv->kind) {
        PyErr_Format(PyExc_TypeError,
                     "%s: the memoryview is declared %s, got a buffer of %s (format '%s')",
                     nt_label_text(what), nt_kind_name(mv->kind),
                     e.kind == NT_VOID ? "an unsupported type" : nt_kind_name(e.kind), e.format);
        return -1;
    }
    if (v->ndim != mv->ndim) {
        PyErr_Format(PyExc_ValueError,
                     "%s: the memoryview is declared %d-dimensional, got a buffer with "
                     "%d dimension%s",
                     nt_label_text(what), mv->ndim, v->ndim, v->ndim == 1 ? "" : "s");
        return -1;
    }
    if (v->ndim > NT_MEMVIEW_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "%s: memoryviews have at most %d dimensions",
                     nt_label_text(what), NT_MEMVIEW_MAX_DIMS);
        return -1;
    }
    if (check_access(v, mv->is_const, "the memoryview", nt_kinds[mv->kind].align, 0, what) < 0)
        return -1;
    if (mv->contig && !PyBuffer_IsContiguous(v, mv->contig)) {
        PyErr_Format(PyExc_ValueError,
                     "%s: the memoryview is declared %s-contiguous but the buffer is not",
                     nt_label_text(what), mv->contig == 'C' ? "C" : "Fortran");
        return -1;
    }
    return 0;
}

/* The slice Cython passes for the buffer: no memoryview object behind it. */
static void fill_slice(const Py_buffer *v, void *cell)
{
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
}

static int convert_memview(PyObject *obj, void *cell, nt_held **held, const nt_mvspec *mv,
                           uint64_t *key, nt_label *what)
{
    if (mv == NULL) {
        PyErr_Format(PyExc_TypeError,
                     "%s: a __Pyx_memviewslice parameter needs a declaration of its "
                     "dtype and ndim (the capsule signature does not carry them), "
                     "e.g. memoryviews={<index>: 'double[:, ::1]'}",
                     nt_label_text(what));
        return -1;
    }
    nt_held *h = hold(obj, what);
    if (h == NULL)
        return -1;
    if (check_memview(&h->view, mv, what) < 0) {
        nt_held_release(h);
        return -1;
    }
    fill_slice(&h->view, cell);
    keep(h, held, key);
    return 0;
}

/* ---- pointers ---- */

static int convert_pointer(const nt_type *t, PyObject *value, void *cell, nt_held **held,
                           uint64_t *key, nt_label *what)
{
    if (value == Py_None) {
        memset(cell, 0, 8);
        return 0;
    }
    if (nt_is_address(value)) {
        void *p = (void *)((nt_AddressObject *)value)->value;
        memcpy(cell, &p, sizeof(p));
        return 0;
    }
    if (PyLong_Check(value) && !PyBool_Check(value)) {
        PyErr_Format(PyExc_TypeError,
                     "%s: a bare int is not accepted as a pointer; wrap it "
                     "explicitly: numthunk.address(%S)",
                     nt_label_text(what), value);
        return -1;
    }
    if (t->kind == NT_PTR && t->base == NT_DLTENSOR) {
        if (nt_is_strided(value) && t->depth == 1) {
            PyErr_Format(PyExc_TypeError,
                         "%s: a DLTensor carries its array's strides itself; bind the "
                         "array, not numthunk.strided(arr)",
                         nt_label_text(what));
            return -1;
        }
        int r = nt_dlpack_convert(what->sig, what->i, value, cell, held);
        if (r <= 0)
            return r;
    }
    if (nt_is_strided(value)) {
        PyObject *inner = ((nt_StridedObject *)value)->obj;
        if (t->kind == NT_PTR && PyObject_CheckBuffer(inner))
            return convert_buffer(t, inner, 1, cell, held, key, what);
        PyErr_Format(PyExc_TypeError, "%s: strided() takes an array, got %.100s",
                     nt_label_text(what), Py_TYPE(inner)->tp_name);
        return -1;
    }
    if (PyObject_CheckBuffer(value))
        return convert_buffer(t, value, 0, cell, held, key, what);
    char type[160];
    nt_mark_cut(type, sizeof(type), nt_type_format(t, type, sizeof(type)));
    PyErr_Format(PyExc_TypeError,
                 "%s: cannot bind a %.100s object to %s (expected a buffer such as a "
                 "NumPy array, None, numthunk.address(n), a ctypes or cffi pointer%s)",
                 nt_label_text(what), Py_TYPE(value)->tp_name, type,
                 t->kind == NT_FNPTR ? ", a thunk or a numthunk.Function" : "");
    return -1;
}

/* A ctypes pointer object: POINTER(T) instances, c_void_p, c_char_p,
   c_wchar_p. They export a buffer (the pointer's own bytes), so the buffer
   test does not tell them apart from data; the Python package resolves
   them with the one foreign-pointer rule (numthunk._foreign). */
static int is_ctypes_pointer(PyObject *value)
{
    const char *meta = Py_TYPE(Py_TYPE(value))->tp_name;
    if (strcmp(meta, "_ctypes.PyCPointerType") == 0)
        return 1;
    if (strcmp(meta, "_ctypes.PyCSimpleType") != 0)
        return 0;
    /* _type_ is a class attribute of a simple type: its format code */
    PyObject *code = PyObject_GetAttrString((PyObject *)Py_TYPE(value), "_type_");
    int r = 0;
    if (code == NULL) {
        PyErr_Clear();
    } else {
        const char *c = PyUnicode_Check(code) ? PyUnicode_AsUTF8(code) : NULL;
        if (c == NULL)
            PyErr_Clear();
        else
            r = (c[0] == 'P' || c[0] == 'z' || c[0] == 'Z') && c[1] == '\0';
        Py_DECREF(code);
    }
    return r;
}

/* A ctypes Structure, Union or array instance (its type's type is one of
   ctypes' metatypes, or derives from one: a BigEndianStructure's). Its
   buffer's format may not show what its fields hold, ctypes exports a
   Union or a packed Structure as bytes: the package reads its type. */
static int is_ctypes_aggregate(PyObject *value)
{
    static const char *const metas[] = { "_ctypes.PyCStructType", "_ctypes.UnionType",
                                         "_ctypes.PyCArrayType" };
    if (!PyObject_CheckBuffer(value))
        return 0;
    PyObject *mro = Py_TYPE(Py_TYPE(value))->tp_mro;
    if (mro == NULL || !PyTuple_Check(mro))
        return 0;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(mro); k++) {
        const char *name = ((PyTypeObject *)PyTuple_GET_ITEM(mro, k))->tp_name;
        for (size_t m = 0; m < sizeof(metas) / sizeof(metas[0]); m++)
            if (strcmp(name, metas[m]) == 0)
                return 1;
    }
    return 0;
}

int nt_needs_resolve(const nt_type *t, PyObject *value)
{
    /* which foreign objects stand for a value differs per kind */
    switch (t->kind) {
    case NT_PTR:
        if (PyArray_CheckExact(value) && !is_struct_pointer(t))
            return 0; /* the common case, first: an array it reads */
        if (is_struct_pointer(t)) {
            /* the struct's declared layout is the package's to check */
            PyObject *inner = nt_is_strided(value) ? ((nt_StridedObject *)value)->obj : value;
            if (PyObject_CheckBuffer(inner))
                return 1;
        }
        if (t->base == NT_DLTENSOR && !is_ctypes_pointer(value)) {
            /* __dlpack__ exporters: the core reads them itself (a ctypes
               pointer exports a buffer too, but is a pointer to resolve) */
            int r = nt_dlpack_is_array(value);
            if (r > 0)
                return 0;
            if (r < 0) {
                if (nt_error_passes())
                    return -1;
                PyErr_Clear(); /* the converter names the parameter */
            }
        }
        if (PyArray_CheckExact(value))
            return 0;
        if (is_ctypes_aggregate(source_object(value)))
            return 1; /* what its fields hold is the package's to check */
        return !(value == Py_None || nt_is_address(value) || nt_is_strided(value)
                 || nt_is_derived(value) || PyLong_Check(value))
            && (!PyObject_CheckBuffer(value) || is_ctypes_pointer(value));
    case NT_FNPTR:
        return !(value == Py_None || nt_is_address(value) || nt_is_strided(value)
                 || nt_is_derived(value) || PyLong_Check(value));
    case NT_MEMVIEW: return !(PyObject_CheckBuffer(value) || nt_is_strided(value));
    default: return 0;
    }
}

static int convert(const nt_sig *sig, int i, PyObject *value, void *cell, nt_held **held,
                   const nt_mvspec *mv, uint64_t *key, int call)
{
    const nt_type *t = &sig->args[i];
    int value_class = nt_kinds[t->kind].value;
    if (key != NULL)
        *key = 0;
    nt_label label; /* text left unset: filled on first use */
    label.sig = sig;
    label.i = i;
    label.fixed = NULL;
    label.done = 0;
    label.call = call;
    nt_label *what = &label;
    /* size(), shape() and stride() bind integers; for any other
       parameter, derived_from says so */
    if (nt_is_derived(value)) {
        nt_DerivedObject *d = (nt_DerivedObject *)value;
        return derived_from(t, d, d->obj, cell, key, what);
    }
    /* one converter per value class: what a Python value may be differs */
    switch (value_class) {
    case NT_VALUE_BOOL:
    case NT_VALUE_INT: return convert_int(t, value, cell, what);
    case NT_VALUE_REAL: return convert_real(t, value, cell, what);
    case NT_VALUE_COMPLEX: return convert_complex(t, value, cell, what);
    case NT_VALUE_POINTER: return convert_pointer(t, value, cell, held, key, what);
    case NT_VALUE_MEMVIEW: return convert_memview(source_object(value), cell, held, mv, key, what);
    default:
        PyErr_Format(PyExc_TypeError, "%s: parameters of this type cannot be bound",
                     nt_label_text(what));
        return -1;
    }
}

int nt_convert(const nt_sig *sig, int i, PyObject *value, void *cell, nt_held **held,
               const nt_mvspec *mv, uint64_t *key)
{
    return convert(sig, i, value, cell, held, mv, key, 0);
}

int nt_convert_arg(const nt_sig *sig, int i, PyObject *value, void *cell, nt_held **held,
                   const nt_mvspec *mv)
{
    return convert(sig, i, value, cell, held, mv, NULL, 1);
}

/* An integer returned in the low bytes of w, extended by its signedness. */
static PyObject *int_to_python(const nt_kind_info *r, uint64_t w)
{
    unsigned shift = 64 - 8u * r->size;
    uint64_t u = w << shift >> shift;
    if (!r->is_signed || !((u >> (63 - shift)) & 1))
        return PyLong_FromUnsignedLongLong(u);
    /* negative: -(2^bits - u) */
    return PyLong_FromLongLong(-(long long)(~u << shift >> shift) - 1);
}

/* Part k of a returned float or complex: a float or a double. */
static double part_at(const nt_kind_info *r, const void *ret, int k)
{
    if (r->part == NT_F32) {
        float f;
        memcpy(&f, (const char *)ret + sizeof(f) * k, sizeof(f));
        return f;
    }
    double d;
    memcpy(&d, (const char *)ret + sizeof(d) * k, sizeof(d));
    return d;
}

PyObject *nt_to_python(const nt_type *t, const void *ret)
{
    const nt_kind_info *r = &nt_kinds[t->kind < NT_KIND_COUNT ? t->kind : NT_DLTENSOR];
    uint64_t w;
    memcpy(&w, ret, 8);
    /* what a C value becomes differs per value class */
    switch (r->value) {
    case NT_VALUE_BOOL: return PyBool_FromLong((uint8_t)w != 0);
    case NT_VALUE_INT: return int_to_python(r, w);
    case NT_VALUE_REAL: return PyFloat_FromDouble(part_at(r, ret, 0));
    case NT_VALUE_COMPLEX: return PyComplex_FromDoubles(part_at(r, ret, 0), part_at(r, ret, 1));
    case NT_VALUE_POINTER: {
        void *p;
        memcpy(&p, ret, sizeof(p));
        return PyLong_FromVoidPtr(p);
    }
    default:
        if (t->kind == NT_VOID)
            Py_RETURN_NONE;
        PyErr_SetString(PyExc_TypeError, "this return type cannot be converted to Python");
        return NULL;
    }
}
