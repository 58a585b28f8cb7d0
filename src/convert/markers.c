/*
 * Binding markers: the values bind() takes besides buffers and scalars.
 *
 *   ARG                      forward this parameter
 *   Derived (size/shape/stride of a bound array), re-read on rebind
 *   Strided(arr)             a non-contiguous buffer's data pointer
 *   Address(n, owner=None)   an explicit pointer value
 *
 * They are types of the extension, so the converter (convert/value.c) reads them
 * as C structs: converting a value never calls into the Python package.
 * Heap types made from specs with the module; the module state keeps them
 * and the ARG singleton (nt_get_state; docs/architecture.md).
 *
 * Place in the pipeline: convert: the markers are values bind() takes;
 * convert/value.c reads them as C structs.
 */
#include "python/pyapi.h"

#define NO_IMPORT_ARRAY
#define PY_ARRAY_UNIQUE_SYMBOL nt_ARRAY_API
#define NPY_NO_DEPRECATED_API  NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include <string.h>

/* ---- ARG ---- */

static PyObject *arg_repr(PyObject *self)
{
    (void)self;
    return PyUnicode_FromString("numthunk.ARG");
}

static PyObject *arg_reduce(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyUnicode_FromString("ARG");
}

static PyMethodDef arg_methods[] = {
    { "__reduce__", arg_reduce, METH_NOARGS, NULL },
    { NULL, NULL, 0, NULL },
};

static PyType_Slot arg_slots[] = {
    { Py_tp_repr, arg_repr },
    { Py_tp_methods, arg_methods },
    { Py_tp_doc,
      "numthunk.ARG: forward this parameter. The thunk takes it from its own caller;\n"
      "its signature lists the forwarded parameters in order.\n\n"
      ">>> hypot = nt.Function.from_library(\"libm.so.6\", \"hypot\",\n"
      "...                                  \"double (double, double)\")\n"
      ">>> t = nt.bind(hypot, nt.ARG, 4.0)\n"
      ">>> t.csig, t(3.0)\n"
      "(Signature('double (double)'), 5.0)\n" },
    { 0, NULL },
};

/* One instance, made by nt_markers_add. */
static PyType_Spec arg_spec = {
    "numthunk._core.ArgType",
    sizeof(PyObject),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    arg_slots,
};

/* ---- a short description of an array, for reprs ---- */

static PyObject *short_repr(PyObject *obj)
{
    if (!PyArray_Check(obj))
        return PyUnicode_FromString(Py_TYPE(obj)->tp_name);
    PyArrayObject *a = (PyArrayObject *)obj;
    PyObject *dtype = PyObject_Str((PyObject *)PyArray_DESCR(a));
    if (dtype == NULL)
        return NULL;
    char dims[128] = "scalar";
    size_t used = 0;
    int d = 0;
    for (; d < PyArray_NDIM(a) && used < sizeof(dims) - 24; d++)
        used += (size_t)PyOS_snprintf(dims + used, sizeof(dims) - used, "%s%zd", d ? "x" : "",
                                      (Py_ssize_t)PyArray_DIM(a, d));
    if (d < PyArray_NDIM(a)) /* the axes left out are said to be there */
        PyOS_snprintf(dims + used, sizeof(dims) - used, "x...");
    PyObject *r = PyUnicode_FromFormat("array[%U, %s]", dtype, dims);
    Py_DECREF(dtype);
    return r;
}

/* An integer argument of a marker (an address, an axis): an int or an
   object with __index__, as PyNumber_Index takes them; a float is refused,
   not truncated (1.9 -> 1), and so is a bool. New reference or NULL. */
static PyObject *index_arg(PyObject *value, const char *what)
{
    if (PyBool_Check(value)) {
        PyErr_Format(PyExc_TypeError, "%s must be an integer, not bool", what);
        return NULL;
    }
    if (!PyIndex_Check(value)) {
        PyErr_Format(PyExc_TypeError, "%s must be an integer, got %.100s %R", what,
                     Py_TYPE(value)->tp_name, value);
        return NULL;
    }
    return PyNumber_Index(value);
}

/* ---- Derived: size(arr), shape(arr, axis), stride(arr, axis) ---- */

static const char *const derived_names[] = { "size", "shape", "stride" };

static int derived_traverse(nt_DerivedObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->obj);
    return 0;
}

static int derived_clear(nt_DerivedObject *self)
{
    Py_CLEAR(self->obj);
    return 0;
}

static void derived_dealloc(nt_DerivedObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    derived_clear(self);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

PyObject *nt_derived_new(int kind, PyObject *obj, Py_ssize_t axis, int elements)
{
    nt_DerivedObject *self = PyObject_GC_New(nt_DerivedObject, nt_get_state()->derived_type);
    if (self == NULL)
        return NULL;
    self->kind = kind;
    self->obj = Py_NewRef(obj);
    self->axis = axis;
    self->elements = elements;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static PyObject *derived_tp_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    (void)type;
    static char *kwlist[] = { "kind", "obj", "axis", "elements", NULL };
    const char *kind;
    PyObject *obj, *axis_obj = NULL;
    int elements = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "sO|Op:Derived", kwlist, &kind, &obj, &axis_obj,
                                     &elements))
        return NULL;
    for (int k = 0; k < 3; k++) {
        if (strcmp(kind, derived_names[k]) != 0)
            continue;
        if (k == NT_DERIVED_SIZE && (axis_obj != NULL || elements)) {
            /* the whole array's: every size() has axis 0 (life/commit.c pairs
               them by it) */
            PyErr_SetString(PyExc_TypeError, "size() takes no axis and no elements=");
            return NULL;
        }
        Py_ssize_t axis = 0;
        if (axis_obj != NULL) {
            char what[32];
            PyOS_snprintf(what, sizeof(what), "%s(): axis", kind);
            PyObject *num = index_arg(axis_obj, what);
            if (num == NULL)
                return NULL;
            int ovf = 0;
            long long v = PyLong_AsLongLongAndOverflow(num, &ovf);
            if (ovf != 0 || v < -NT_MAX_AXES || v >= NT_MAX_AXES) {
                PyErr_Format(PyExc_ValueError,
                             "%s(): axis %S is out of range (an array has at most %d "
                             "dimensions: -%d <= axis < %d)",
                             kind, num, NT_MAX_AXES, NT_MAX_AXES, NT_MAX_AXES);
                Py_DECREF(num);
                return NULL;
            }
            Py_DECREF(num);
            axis = (Py_ssize_t)v;
        }
        return nt_derived_new(k, obj, axis, elements);
    }
    PyErr_Format(PyExc_ValueError, "Derived kind must be 'size', 'shape' or 'stride', not '%s'",
                 kind);
    return NULL;
}

static PyObject *derived_repr(nt_DerivedObject *self)
{
    PyObject *what = short_repr(self->obj);
    if (what == NULL)
        return NULL;
    PyObject *r;
    if (self->kind == NT_DERIVED_SIZE)
        r = PyUnicode_FromFormat("size(%U)", what);
    else
        r = PyUnicode_FromFormat("%s(%U, %zd%s)", derived_names[self->kind], what, self->axis,
                                 self->elements ? ", elements=True" : "");
    Py_DECREF(what);
    return r;
}

static PyObject *derived_kind(nt_DerivedObject *self, void *closure)
{
    (void)closure;
    return PyUnicode_FromString(derived_names[self->kind]);
}

static PyObject *derived_elements(nt_DerivedObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->elements);
}

static PyMemberDef derived_members[] = {
    { "obj", T_OBJECT_EX, offsetof(nt_DerivedObject, obj), READONLY, "the array" },
    { "axis", T_PYSSIZET, offsetof(nt_DerivedObject, axis), READONLY, "the axis" },
    { NULL, 0, 0, 0, NULL },
};

static PyGetSetDef derived_getset[] = {
    { "kind", (getter)derived_kind, NULL, "'size', 'shape' or 'stride'", NULL },
    { "elements", (getter)derived_elements, NULL, "stride in elements, not bytes", NULL },
    { NULL, NULL, NULL, NULL, NULL },
};

static PyType_Slot derived_slots[] = {
    { Py_tp_dealloc, derived_dealloc },
    { Py_tp_repr, derived_repr },
    { Py_tp_traverse, derived_traverse },
    { Py_tp_clear, derived_clear },
    { Py_tp_members, derived_members },
    { Py_tp_getset, derived_getset },
    { Py_tp_new, derived_tp_new },
    { Py_tp_doc,
      "Derived(kind, obj, axis=0, elements=False): a value derived from a bound "
      "array, re-read when the array is rebound" },
    { 0, NULL },
};

static PyType_Spec derived_spec = {
    "numthunk._core.Derived",
    sizeof(nt_DerivedObject),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    derived_slots,
};

/* ---- Strided(arr) ---- */

static int strided_traverse(nt_StridedObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->obj);
    return 0;
}

static int strided_clear(nt_StridedObject *self)
{
    Py_CLEAR(self->obj);
    return 0;
}

static void strided_dealloc(nt_StridedObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    strided_clear(self);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

static PyObject *strided_tp_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = { "obj", NULL };
    PyObject *obj;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O:strided", kwlist, &obj))
        return NULL;
    nt_StridedObject *self = (nt_StridedObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->obj = Py_NewRef(obj);
    return (PyObject *)self;
}

static PyObject *strided_repr(nt_StridedObject *self)
{
    PyObject *what = short_repr(self->obj);
    if (what == NULL)
        return NULL;
    PyObject *r = PyUnicode_FromFormat("strided(%U)", what);
    Py_DECREF(what);
    return r;
}

static PyMemberDef strided_members[] = {
    { "obj", T_OBJECT_EX, offsetof(nt_StridedObject, obj), READONLY, "the buffer" },
    { NULL, 0, 0, 0, NULL },
};

static PyType_Slot strided_slots[] = {
    { Py_tp_dealloc, strided_dealloc },
    { Py_tp_repr, strided_repr },
    { Py_tp_traverse, strided_traverse },
    { Py_tp_clear, strided_clear },
    { Py_tp_members, strided_members },
    { Py_tp_new, strided_tp_new },
    { Py_tp_doc,
      "strided(arr): bind a non-contiguous buffer's data pointer, for targets "
      "that also take its strides" },
    { 0, NULL },
};

static PyType_Spec strided_spec = {
    "numthunk._core.Strided",
    sizeof(nt_StridedObject),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    strided_slots,
};

/* ---- Address(n, owner=None) ---- */

static int address_traverse(nt_AddressObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->owner);
    return 0;
}

static int address_clear(nt_AddressObject *self)
{
    Py_CLEAR(self->owner);
    return 0;
}

static void address_dealloc(nt_AddressObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    address_clear(self);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

int nt_pointer_value(PyObject *value, const char *what, uintptr_t *out)
{
    /* an exact int (a Function's address) is its own index */
    PyObject *num = PyLong_CheckExact(value) ? Py_NewRef(value) : index_arg(value, what);
    if (num == NULL)
        return -1;
    /* Negative or wider than a pointer: OverflowError either way (an exact
       int here: the only error is the overflow). */
    unsigned long long v = PyLong_AsUnsignedLongLong(num);
    int bad = v == (unsigned long long)-1 && PyErr_Occurred();
    if (bad)
        PyErr_Clear();
    if (bad || v > UINTPTR_MAX) {
        PyObject *hex = PyNumber_ToBase(num, 16);
        if (hex != NULL)
            PyErr_Format(PyExc_OverflowError, "%s %U is not a valid pointer value (0 to 2**%d - 1)",
                         what, hex, (int)(8 * sizeof(void *)));
        Py_XDECREF(hex);
        Py_DECREF(num);
        return -1;
    }
    Py_DECREF(num);
    *out = (uintptr_t)v;
    return 0;
}

static PyObject *address_tp_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = { "value", "owner", "nogil", NULL };
    PyObject *value, *owner = Py_None;
    int nogil = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O$p:address", kwlist, &value, &owner, &nogil))
        return NULL;
    uintptr_t v;
    if (nt_pointer_value(value, "address()", &v) < 0)
        return NULL;
    nt_AddressObject *self = (nt_AddressObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->value = v;
    self->owner = Py_NewRef(owner);
    self->needs_gil = !nogil;
    return (PyObject *)self;
}

static PyObject *address_value(nt_AddressObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromVoidPtr((void *)self->value);
}

static PyObject *address_nogil(nt_AddressObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(!self->needs_gil);
}

static PyObject *address_repr(nt_AddressObject *self)
{
    char buf[60];
    PyOS_snprintf(buf, sizeof(buf), "address(0x%llx%s)", (unsigned long long)self->value,
                  self->needs_gil ? ", nogil=False" : "");
    return PyUnicode_FromString(buf);
}

static PyMemberDef address_members[] = {
    { "owner", T_OBJECT, offsetof(nt_AddressObject, owner), READONLY,
      "kept alive with the binding" },
    { NULL, 0, 0, 0, NULL },
};

static PyGetSetDef address_getset[] = {
    { "value", (getter)address_value, NULL, "the pointer value (int)", NULL },
    { "nogil", (getter)address_nogil, NULL,
      "False for a function that needs the GIL: a thunk it is bound to keeps the GIL "
      "when called from Python",
      NULL },
    { NULL, NULL, NULL, NULL, NULL },
};

static PyType_Slot address_slots[] = {
    { Py_tp_dealloc, address_dealloc },
    { Py_tp_repr, address_repr },
    { Py_tp_traverse, address_traverse },
    { Py_tp_clear, address_clear },
    { Py_tp_members, address_members },
    { Py_tp_getset, address_getset },
    { Py_tp_new, address_tp_new },
    { Py_tp_doc,
      "``address(n, owner=None, *, nogil=True)``: an explicit pointer value for a\n"
      "pointer parameter (a bare int is refused there). Nothing checks what it\n"
      "points to; owner is kept alive with the binding, and nothing else is.\n"
      "nogil=False marks a function pointer whose code needs the GIL: a thunk it\n"
      "is bound to keeps the GIL when called from Python.\n\n"
      ">>> frexp = nt.Function.from_library(\"libm.so.6\", \"frexp\",\n"
      "...                                  \"double (double, int *)\")\n"
      ">>> e = np.zeros(1, dtype=np.intc)\n"
      ">>> nt.bind(frexp, 8.0, nt.address(e.ctypes.data, owner=e))()\n"
      "0.5\n"
      ">>> int(e[0])\n"
      "4\n" },
    { 0, NULL },
};

static PyType_Spec address_spec = {
    "numthunk._core.Address",
    sizeof(nt_AddressObject),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    address_slots,
};

/* A type made from spec with the module, added to it under name (if any). */
static PyTypeObject *add_type(PyObject *module, PyType_Spec *spec, const char *name)
{
    PyObject *type = PyType_FromModuleAndSpec(module, spec, NULL);
    if (type == NULL)
        return NULL;
    if (name != NULL && PyModule_AddObjectRef(module, name, type) < 0) {
        Py_DECREF(type);
        return NULL;
    }
    return (PyTypeObject *)type;
}

int nt_markers_add(PyObject *module, nt_state *st)
{
    if ((st->arg_type = add_type(module, &arg_spec, NULL)) == NULL
        || (st->derived_type = add_type(module, &derived_spec, "Derived")) == NULL
        || (st->strided_type = add_type(module, &strided_spec, "Strided")) == NULL
        || (st->address_type = add_type(module, &address_spec, "Address")) == NULL)
        return -1;
    st->arg = PyType_GenericAlloc(st->arg_type, 0);
    if (st->arg == NULL)
        return -1;
    return PyModule_AddObjectRef(module, "ARG", st->arg);
}
