/*
 * numthunk._core.Function: the base of numthunk.Function, holding what
 * binding reads of a function as C fields. The package's class subclasses
 * it (its __init__, methods, other slots and pickling are Python:
 * numthunk/_api.py), and python/binder.c's bind reads these fields as a
 * struct, never by name. A heap type made from its spec with the module
 * (nt_function_add), kept in the module state.
 *
 * Place in the pipeline: python, the boundary: a target's signature,
 * address and declarations, as the package's Function holds them.
 */
#include "python/pyapi.h"

/* Each field reads and writes as the slot it replaces did: any object,
   an AttributeError while unset, and del unsets it (T_OBJECT_EX). */
static PyMemberDef function_members[] = {
    { "_signature", T_OBJECT_EX, offsetof(nt_FunctionObject, signature), 0,
      "the target's C signature (a Signature)" },
    { "address", T_OBJECT_EX, offsetof(nt_FunctionObject, address), 0,
      "the function's address (an int)" },
    { "nogil", T_OBJECT_EX, offsetof(nt_FunctionObject, nogil), 0,
      "whether the function may run without the GIL" },
    { "memoryviews", T_OBJECT_EX, offsetof(nt_FunctionObject, memoryviews), 0,
      "typed memoryview declarations, {index: declaration}" },
    { "depends", T_OBJECT_EX, offsetof(nt_FunctionObject, depends), 0,
      "the thunks the function's code calls (a tuple)" },
    { "fixed", T_OBJECT_EX, offsetof(nt_FunctionObject, fixed), 0,
      "parameters bound for good, {index: value}" },
    { "_carried", T_OBJECT_EX, offsetof(nt_FunctionObject, carried), 0,
      "the thunk this function is, or None" },
    { NULL, 0, 0, 0, NULL },
};

static int function_traverse(nt_FunctionObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->signature);
    Py_VISIT(self->address);
    Py_VISIT(self->nogil);
    Py_VISIT(self->memoryviews);
    Py_VISIT(self->depends);
    Py_VISIT(self->fixed);
    Py_VISIT(self->carried);
    return 0;
}

static int function_clear(nt_FunctionObject *self)
{
    Py_CLEAR(self->signature);
    Py_CLEAR(self->address);
    Py_CLEAR(self->nogil);
    Py_CLEAR(self->memoryviews);
    Py_CLEAR(self->depends);
    Py_CLEAR(self->fixed);
    Py_CLEAR(self->carried);
    return 0;
}

/* Also the last step of a subclass's dealloc (CPython's subtype_dealloc
   has cleared its slots and weak references, and tracks the object again
   for this untrack): the type it drops is the subclass. */
static void function_dealloc(nt_FunctionObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    function_clear(self);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

static PyType_Slot function_slots[] = {
    { Py_tp_dealloc, function_dealloc },
    { Py_tp_traverse, function_traverse },
    { Py_tp_clear, function_clear },
    { Py_tp_members, function_members },
    { Py_tp_doc,
      "The C fields of numthunk.Function, its base: what bind() reads of a\n"
      "function (signature, address, nogil, memoryviews, depends, fixed and\n"
      "the thunk it carries), read by the core as a struct." },
    { 0, NULL },
};

static PyType_Spec function_spec = {
    "numthunk._core.Function",
    sizeof(nt_FunctionObject),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    function_slots,
};

int nt_function_add(PyObject *module, nt_state *st)
{
    PyObject *type = PyType_FromModuleAndSpec(module, &function_spec, NULL);
    if (type == NULL)
        return -1;
    st->function_type = (PyTypeObject *)type;
    return PyModule_AddObjectRef(module, "Function", type);
}
