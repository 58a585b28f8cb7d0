/*
 * numthunk._core._Binder: numthunk.bind with its common case in C, the
 * Python boundary's fast path from a Function to a Thunk (life/commit.c
 * makes it, as it makes every thunk).
 *
 * Place in the pipeline: python, the boundary: a call of numthunk.bind in, a
 * thunk from life/commit.c out.
 */
#include "life/thunk.h"

/* numthunk.bind is a Binder over the package's bind(): a call with no
   keywords whose target is exactly numthunk.Function, with no fixed
   parameters, is _new_thunk(Thunk, f._signature, f.address, args, f,
   f.nogil, f.memoryviews, None, f.depends, f._carried) made here, without
   the Python frame, the argument tuple and dict of the package's function,
   which would be a third of the cost of a bind; every other call, and any
   Function whose fields are not what its __init__ leaves, goes to that
   function unchanged. numthunk.Function is a subclass of
   numthunk._core.Function (python/function.c), so these are C fields of
   its struct: read as such, never looked up by name. */

enum { F_SIGNATURE, F_ADDRESS, F_NOGIL, F_MEMORYVIEWS, F_DEPENDS, F_FIXED, F_CARRIED, NFIELDS };

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict;         /* __doc__, __wrapped__, __name__: the package's */
    PyObject *fallback;     /* the package's bind() */
    PyTypeObject *function; /* numthunk.Function, a subclass of _core.Function */
    PyTypeObject *thunk;    /* numthunk.Thunk */
} BinderObject;

/* The Function's fields, new references (0), or 0 with f[0] NULL if one
   is unset or fixed is not an empty dict: the package's bind() then. */
static void binder_fields(nt_FunctionObject *fn, PyObject **f)
{
    int ok = 1;
#ifdef Py_GIL_DISABLED
    Py_BEGIN_CRITICAL_SECTION((PyObject *)fn); /* as the member descriptors read them */
#endif
    f[F_SIGNATURE] = fn->signature;
    f[F_ADDRESS] = fn->address;
    f[F_NOGIL] = fn->nogil;
    f[F_MEMORYVIEWS] = fn->memoryviews;
    f[F_DEPENDS] = fn->depends;
    f[F_FIXED] = fn->fixed;
    f[F_CARRIED] = fn->carried;
    for (int k = 0; k < NFIELDS; k++)
        ok &= f[k] != NULL;
    ok = ok && PyDict_CheckExact(f[F_FIXED]) && PyDict_GET_SIZE(f[F_FIXED]) == 0
        && PyObject_TypeCheck(f[F_SIGNATURE], nt_get_state()->signature_type);
    for (int k = 0; k < NFIELDS && ok; k++)
        Py_INCREF(f[k]);
#ifdef Py_GIL_DISABLED
    Py_END_CRITICAL_SECTION();
#endif
    if (!ok)
        f[0] = NULL;
}

static PyObject *binder_fast(BinderObject *self, PyObject *const *args, Py_ssize_t n, PyObject **f)
{
    /* the values are the call's own arguments, held by the caller */
    nt_new_args a = { .sig = (nt_SignatureObject *)f[F_SIGNATURE],
                      .address = f[F_ADDRESS],
                      .owner = args[0],
                      .memviews = f[F_MEMORYVIEWS],
                      .engine = Py_None,
                      .via = f[F_DEPENDS],
                      .carried = f[F_CARRIED],
                      .values = args + 1,
                      .nvalues = n - 1 };
    if ((a.nogil = PyObject_IsTrue(f[F_NOGIL])) < 0) /* True and False: no call */
        return NULL;
    PyObject *r;
    NT_LOCK_BEGIN
    r = nt_thunk_make(self->thunk, &a);
    NT_LOCK_END
    return r;
}

static PyObject *binder_vectorcall(BinderObject *self, PyObject *const *args, size_t nargsf,
                                   PyObject *kwnames)
{
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    PyObject *f[NFIELDS] = { NULL };
    if (kwnames == NULL && n >= 1 && Py_IS_TYPE(args[0], self->function))
        binder_fields((nt_FunctionObject *)args[0], f);
    if (f[0] == NULL)
        return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
    PyObject *r = binder_fast(self, args, n, f);
    for (int k = 0; k < NFIELDS; k++)
        Py_DECREF(f[k]);
    return r;
}

/* _Binder(fallback, function_class, thunk_class) */
static PyObject *binder_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *fallback;
    PyTypeObject *function, *thunk;
    if (!PyArg_ParseTupleAndKeywords(
            args, kwds, "OO!O!:_Binder",
            (char *[]){ "fallback", "function_class", "thunk_class", NULL }, &fallback,
            &PyType_Type, &function, &PyType_Type, &thunk))
        return NULL;
    nt_state *st = nt_get_state();
    if (!PyCallable_Check(fallback) || !PyType_IsSubtype(function, st->function_type)
        || !PyType_IsSubtype(thunk, st->thunk_type)) {
        PyErr_SetString(PyExc_TypeError,
                        "_Binder(fallback: callable, "
                        "function_class: a subclass of numthunk._core.Function, "
                        "thunk_class: a subclass of numthunk._core.Thunk)");
        return NULL;
    }
    BinderObject *self = (BinderObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = (vectorcallfunc)binder_vectorcall;
    self->fallback = Py_NewRef(fallback);
    self->function = (PyTypeObject *)Py_NewRef(function);
    self->thunk = (PyTypeObject *)Py_NewRef(thunk);
    return (PyObject *)self;
}

static int binder_traverse(BinderObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->dict);
    Py_VISIT(self->fallback);
    Py_VISIT(self->function);
    Py_VISIT(self->thunk);
    return 0;
}

static int binder_clear(BinderObject *self)
{
    Py_CLEAR(self->dict);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->function);
    Py_CLEAR(self->thunk);
    return 0;
}

static void binder_dealloc(BinderObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    binder_clear(self);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

/* pickle and copy take bind() by its name, as they take a function: the
   __qualname__ that functools.update_wrapper gave it (numthunk/_api.py),
   in the module its __module__ names. */
static PyObject *binder_reduce(BinderObject *self, PyObject *unused)
{
    (void)unused;
    PyObject *name = PyObject_GetAttrString((PyObject *)self, "__qualname__");
    if (name != NULL && !PyUnicode_Check(name)) {
        Py_DECREF(name);
        PyErr_SetString(PyExc_TypeError, "a _Binder's __qualname__ must be a str");
        return NULL;
    }
    return name;
}

static PyObject *binder_repr(BinderObject *self)
{
    PyObject *name = PyObject_GetAttrString((PyObject *)self, "__qualname__");
    if (name == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return NULL;
        PyErr_Clear();
        return PyUnicode_FromFormat("<numthunk._core._Binder at %p>", (void *)self);
    }
    PyObject *r = PyUnicode_FromFormat("<function %S at %p>", name, (void *)self);
    Py_DECREF(name);
    return r;
}

static PyMethodDef binder_methods[] = {
    { "__reduce__", (PyCFunction)binder_reduce, METH_NOARGS, NULL },
    { NULL, NULL, 0, NULL },
};

static PyMemberDef binder_members[] = {
    { "__vectorcalloffset__", T_PYSSIZET, offsetof(BinderObject, vectorcall), READONLY, NULL },
    { "__dictoffset__", T_PYSSIZET, offsetof(BinderObject, dict), READONLY, NULL },
    { NULL, 0, 0, 0, NULL }
};

static PyGetSetDef binder_getset[] = { { "__dict__", PyObject_GenericGetDict,
                                         PyObject_GenericSetDict, NULL, NULL },
                                       { NULL, NULL, NULL, NULL, NULL } };

static PyType_Slot binder_slots[] = {
    { Py_tp_new, binder_new },
    { Py_tp_call, PyVectorcall_Call },
    { Py_tp_dealloc, binder_dealloc },
    { Py_tp_traverse, binder_traverse },
    { Py_tp_clear, binder_clear },
    { Py_tp_members, binder_members },
    { Py_tp_getset, binder_getset },
    { Py_tp_methods, binder_methods },
    { Py_tp_repr, binder_repr },
    { Py_tp_doc,
      "_Binder(fallback, function_class, thunk_class): bind() with its common "
      "case in C" },
    { 0, NULL }
};

static PyType_Spec binder_spec = { "numthunk._core._Binder", sizeof(BinderObject), 0,
                                   Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC
                                       | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_IMMUTABLETYPE,
                                   binder_slots };

int nt_binder_add(PyObject *module)
{
    PyObject *binder = PyType_FromModuleAndSpec(module, &binder_spec, NULL);
    if (binder == NULL)
        return -1;
    int r = PyModule_AddObjectRef(module, "_Binder", binder);
    Py_DECREF(binder);
    return r;
}
