/*
 * numthunk._core.Signature: an immutable parsed C signature.
 *
 * The Python package subclasses it to accept ctypes, cffi and Numba
 * signature objects; this type takes the C text (and optional typedefs,
 * name -> type text, for the mangled names in Cython capsules). A heap
 * type made from its spec with the module (nt_signature_add), kept in the
 * module state.
 *
 * Place in the pipeline: python, the boundary over parse and plan: a parsed
 * signature and its plan cache.
 */
#include "python/pyapi.h"

#include <stdlib.h>
#include <string.h>

PyObject *nt_signature_wrap(PyTypeObject *type, nt_sig *sig)
{
    nt_SignatureObject *self = (nt_SignatureObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        nt_sig_free(sig);
        return NULL;
    }
    self->sig = sig;
    self->hash = -1;
    return (PyObject *)self;
}

/* typedefs: a mapping name -> C type text. Fills *out (caller frees the
   names array, whose strings borrow from the dict's keys). */
static int collect_typedefs(PyObject *mapping, nt_typedef **out, Py_ssize_t *count)
{
    *out = NULL;
    *count = 0;
    if (mapping == NULL || mapping == Py_None)
        return 0;
    if (!PyDict_Check(mapping)) {
        PyErr_SetString(PyExc_TypeError, "typedefs must be a dict of name -> C type");
        return -1;
    }
    Py_ssize_t n = PyDict_Size(mapping);
    nt_typedef *tds = PyMem_Calloc((size_t)n, sizeof(nt_typedef)); /* (0: not NULL) */
    if (tds == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t pos = 0, k = 0;
    PyObject *key, *value;
    while (PyDict_Next(mapping, &pos, &key, &value)) {
        if (!PyUnicode_Check(key) || !PyUnicode_Check(value)) {
            PyErr_SetString(PyExc_TypeError, "typedefs must map str names to str C types");
            goto error;
        }
        const char *name = PyUnicode_AsUTF8(key);
        const char *text = PyUnicode_AsUTF8(value);
        if (name == NULL || text == NULL)
            goto error;
        nt_error err = { NT_OK, -1, "" };
        if (nt_type_parse(text, NULL, 0, &tds[k].type, &err) != 0) {
            PyErr_Format(PyExc_ValueError, "typedef %s = %s: %s", name, text, err.msg);
            goto error;
        }
        if (tds[k].type.fn != NULL) {
            nt_sig_free(tds[k].type.fn);
            tds[k].type.fn = NULL;
            PyErr_Format(PyExc_ValueError,
                         "typedef %s: function pointer typedefs are not supported", name);
            goto error;
        }
        tds[k].name = name;
        k++;
    }
    *out = tds;
    *count = k;
    return 0;
error:
    PyMem_Free(tds);
    return -1;
}

static PyObject *signature_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = { "text", "typedefs", NULL };
    PyObject *source, *typedefs = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:Signature", kwlist, &source, &typedefs))
        return NULL;
    if (PyObject_TypeCheck(source, nt_get_state()->signature_type)) {
        /* a copy keeps the parameter names, which the text form drops */
        nt_sig *copy = nt_sig_copy(((nt_SignatureObject *)source)->sig);
        if (copy == NULL)
            return PyErr_NoMemory();
        return nt_signature_wrap(type, copy);
    }
    if (!PyUnicode_Check(source)) {
        PyErr_Format(PyExc_TypeError, "Signature() takes C text, not %.100s",
                     Py_TYPE(source)->tp_name);
        return NULL;
    }
    const char *text = PyUnicode_AsUTF8(source);
    if (text == NULL)
        return NULL;
    nt_typedef *tds;
    Py_ssize_t ntds;
    if (collect_typedefs(typedefs, &tds, &ntds) < 0)
        return NULL;
    nt_error err = { NT_OK, -1, "" };
    nt_sig *sig = nt_sig_parse(text, tds, (size_t)ntds, &err);
    PyMem_Free(tds);
    if (sig == NULL) {
        nt_raise_parse_error(text, &err);
        return NULL;
    }
    return nt_signature_wrap(type, sig);
}

/* The plan cache changes only here, called by life/commit.c under the GIL or
   the state lock (python/pyapi.h); freed with the Signature, which no thunk
   holds any more. */
nt_plan *nt_signature_plan(nt_SignatureObject *self, const uint8_t *pattern,
                           const nt_engine *wanted, int *owned, nt_error *err)
{
    return nt_plan_cache_get(&self->plans, self->sig, pattern, wanted, nt_choose_engine, owned,
                             err);
}

static void signature_dealloc(nt_SignatureObject *self)
{
    /* Thunks hold a reference to their target's Signature, so no thunk
       uses these plans any more. */
    PyTypeObject *type = Py_TYPE(self);
    nt_plan_cache_free(&self->plans);
    nt_sig_free(self->sig);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

static PyObject *format_type(const nt_type *t)
{
    char buf[512];
    size_t need = nt_type_format(t, buf, sizeof(buf));
    if (need < sizeof(buf))
        return PyUnicode_FromString(buf);
    char *big = PyMem_Malloc(need + 1);
    if (big == NULL)
        return PyErr_NoMemory();
    nt_type_format(t, big, need + 1);
    PyObject *s = PyUnicode_FromString(big);
    PyMem_Free(big);
    return s;
}

static PyObject *signature_str(nt_SignatureObject *self)
{
    char buf[512];
    size_t need = nt_sig_format(self->sig, buf, sizeof(buf));
    if (need < sizeof(buf))
        return PyUnicode_FromString(buf);
    char *big = PyMem_Malloc(need + 1);
    if (big == NULL)
        return PyErr_NoMemory();
    nt_sig_format(self->sig, big, need + 1);
    PyObject *s = PyUnicode_FromString(big);
    PyMem_Free(big);
    return s;
}

static PyObject *signature_repr(nt_SignatureObject *self)
{
    PyObject *s = signature_str(self);
    if (s == NULL)
        return NULL;
    PyObject *r = PyUnicode_FromFormat("Signature(%R)", s);
    Py_DECREF(s);
    return r;
}

static Py_hash_t hash_type(const nt_type *t, Py_uhash_t h);

static Py_uhash_t hash_sig(const nt_sig *sig, Py_uhash_t h)
{
    h = hash_type(&sig->ret, h);
    for (int i = 0; i < sig->nargs; i++)
        h = hash_type(&sig->args[i], h);
    return h * 1000003u ^ (Py_uhash_t)sig->nargs;
}

static Py_hash_t hash_type(const nt_type *t, Py_uhash_t h)
{
    h = (h ^ t->kind) * 1099511628211u;
    if (t->kind == NT_PTR) {
        h = (h ^ t->base) * 1099511628211u;
        h = (h ^ t->depth) * 1099511628211u;
        h = (h ^ (t->cflags & NT_CONST_BASE)) * 1099511628211u;
    }
    if (t->fn != NULL) /* a function pointer's signature (parse/declarator.c sets no other) */
        h = hash_sig(t->fn, h);
    return (Py_hash_t)h;
}

static Py_hash_t signature_hash(nt_SignatureObject *self)
{
    if (self->hash == -1) {
        Py_hash_t h = (Py_hash_t)hash_sig(self->sig, 14695981039346656037u);
        self->hash = h == -1 ? -2 : h;
    }
    return self->hash;
}

static PyObject *signature_richcompare(PyObject *a, PyObject *b, int op)
{
    if ((op != Py_EQ && op != Py_NE) || !PyObject_TypeCheck(b, nt_get_state()->signature_type))
        Py_RETURN_NOTIMPLEMENTED;
    int eq = nt_sig_equal(((nt_SignatureObject *)a)->sig, ((nt_SignatureObject *)b)->sig);
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static PyObject *signature_restype(nt_SignatureObject *self, void *closure)
{
    (void)closure;
    return format_type(&self->sig->ret);
}

static PyObject *signature_argtypes(nt_SignatureObject *self, void *closure)
{
    (void)closure;
    PyObject *t = PyTuple_New(self->sig->nargs);
    if (t == NULL)
        return NULL;
    for (int i = 0; i < self->sig->nargs; i++) {
        PyObject *s = format_type(&self->sig->args[i]);
        if (s == NULL) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, s);
    }
    return t;
}

static PyObject *signature_names(nt_SignatureObject *self, void *closure)
{
    (void)closure;
    PyObject *t = PyTuple_New(self->sig->nargs);
    if (t == NULL)
        return NULL;
    for (int i = 0; i < self->sig->nargs; i++) {
        const char *name = self->sig->names != NULL ? self->sig->names[i] : NULL;
        PyObject *s = name != NULL ? PyUnicode_FromString(name) : Py_NewRef(Py_None);
        if (s == NULL) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, s);
    }
    return t;
}

static PyObject *signature_nargs(nt_SignatureObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLong(self->sig->nargs);
}

/* (kind, base, depth, const_base, spelling, fn) for the Python adapters
   that build ctypes, cffi and Numba types from a signature. */
static PyObject *describe_type(const nt_type *t)
{
    PyObject *fn = Py_None;
    Py_INCREF(fn);
    if (t->fn != NULL) { /* a function pointer's signature (parse/declarator.c sets no other) */
        Py_DECREF(fn);
        nt_sig *copy = nt_sig_copy(t->fn);
        if (copy == NULL)
            return PyErr_NoMemory();
        fn = nt_signature_wrap(nt_get_state()->signature_type, copy);
        if (fn == NULL)
            return NULL;
    }
    const char *spelling = t->spelling < nt_nspellings ? nt_spellings[t->spelling].name : "";
    return Py_BuildValue("(ssiisN)", nt_kind_name(t->kind),
                         nt_kind_name(t->kind == NT_PTR ? t->base : t->kind), (int)t->depth,
                         (t->cflags & NT_CONST_BASE) != 0, spelling, fn);
}

static PyObject *signature_describe(nt_SignatureObject *self, PyObject *unused)
{
    (void)unused;
    PyObject *ret = describe_type(&self->sig->ret);
    PyObject *args = PyTuple_New(self->sig->nargs);
    if (ret == NULL || args == NULL)
        goto error;
    for (int i = 0; i < self->sig->nargs; i++) {
        PyObject *d = describe_type(&self->sig->args[i]);
        if (d == NULL)
            goto error;
        PyTuple_SET_ITEM(args, i, d);
    }
    return Py_BuildValue("(NN)", ret, args);
error:
    Py_XDECREF(ret);
    Py_XDECREF(args);
    return NULL;
}

/* The label the core's messages start with ("argument 2 (n: int)"), for
   the messages the Python package raises about the same parameter. */
static PyObject *signature_label(nt_SignatureObject *self, PyObject *arg)
{
    long i = PyLong_AsLong(arg);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    if (i < 0 || i >= self->sig->nargs)
        return PyErr_Format(PyExc_IndexError, "parameter index %ld out of range", i);
    char buf[256];
    nt_param_label(self->sig, (int)i, buf, sizeof(buf));
    return PyUnicode_FromString(buf);
}

static PyObject *signature_reduce(nt_SignatureObject *self, PyObject *unused)
{
    (void)unused;
    PyObject *s = signature_str(self);
    if (s == NULL)
        return NULL;
    return Py_BuildValue("(O(N))", Py_TYPE(self), s);
}

static PyGetSetDef signature_getset[] = {
    { "restype", (getter)signature_restype, NULL, "the return type, as C text", NULL },
    { "argtypes", (getter)signature_argtypes, NULL, "parameter types, as C text", NULL },
    { "names", (getter)signature_names, NULL, "parameter names (None where unnamed)", NULL },
    { "nargs", (getter)signature_nargs, NULL, "number of parameters", NULL },
    { NULL, NULL, NULL, NULL, NULL },
};

static PyMethodDef signature_methods[] = {
    { "_describe", (PyCFunction)signature_describe, METH_NOARGS, NULL },
    { "_label", (PyCFunction)signature_label, METH_O, NULL },
    { "__reduce__", (PyCFunction)signature_reduce, METH_NOARGS, NULL },
    { NULL, NULL, 0, NULL },
};

static PyType_Slot signature_slots[] = {
    { Py_tp_dealloc, signature_dealloc },
    { Py_tp_repr, signature_repr },
    { Py_tp_str, signature_str },
    { Py_tp_hash, signature_hash },
    { Py_tp_richcompare, signature_richcompare },
    { Py_tp_doc, "Signature(text, typedefs=None): a parsed C function signature." },
    { Py_tp_getset, signature_getset },
    { Py_tp_methods, signature_methods },
    { Py_tp_new, signature_new },
    { 0, NULL },
};

static PyType_Spec signature_spec = {
    "numthunk._core.Signature",
    sizeof(nt_SignatureObject),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_IMMUTABLETYPE,
    signature_slots,
};

int nt_signature_add(PyObject *module, nt_state *st)
{
    PyObject *type = PyType_FromModuleAndSpec(module, &signature_spec, NULL);
    if (type == NULL)
        return -1;
    st->signature_type = (PyTypeObject *)type;
    return PyModule_AddObjectRef(module, "Signature", type);
}
