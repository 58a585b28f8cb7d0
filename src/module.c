/*
 * numthunk._core: module state and the small functions the Python package
 * needs from C (the kind table, checked scalar conversion for ref(),
 * backend_info()).
 */
#include "pyapi.h"
#include "native.h"
#include "nt_dlpack.h"

#define PY_ARRAY_UNIQUE_SYMBOL nt_ARRAY_API
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include <stdlib.h>
#include <string.h>

/* _scalar(ctype, value) -> (kind_name, value): value checked exactly as a
   bound value of that C type would be, and read back from its C cell. */
static PyObject *mod_scalar(PyObject *module, PyObject *args)
{
    (void)module;
    const char *text;
    PyObject *value;
    if (!PyArg_ParseTuple(args, "sO:_scalar", &text, &value))
        return NULL;
    nt_sig sig = { { NT_VOID, 0, 0, 0, 0, NULL }, 1, NULL, NULL };
    nt_type t;
    nt_error err = { NT_OK, -1, "" };
    if (nt_type_parse(text, NULL, 0, &t, &err) != 0) {
        nt_raise_parse_error(text, &err);
        return NULL;
    }
    if (t.depth != 0 || t.kind == NT_FNPTR || t.kind == NT_MEMVIEW || t.kind == NT_VOID) {
        if (t.fn != NULL)
            nt_sig_free(t.fn);
        PyErr_Format(PyExc_TypeError, "'%s' is not a scalar C type", text);
        return NULL;
    }
    sig.args = &t;
    uint64_t cell[2] = { 0, 0 };
    nt_held *held = NULL;
    if (nt_convert(&sig, 0, value, cell, &held, NULL, NULL) < 0)
        return NULL;
    nt_held_release(held);
    PyObject *v = nt_to_python(&t, cell);
    if (v == NULL)
        return NULL;
    return Py_BuildValue("(sN)", nt_kind_name(t.kind), v);
}

/* The scalar kinds, for the Python package: one table, read once, instead
   of parallel mappings in each adapter. Per kind: (name, size, signed,
   C text, NumPy dtype char, Numba type name, ctypes type name or None). */
typedef struct {
    int kind;
    int is_signed;
    const char *c_text;
    const char *dtype;
    const char *numba;
    const char *ctypes;
} kind_row;

static const kind_row kind_rows[] = {
    { NT_BOOL, 0, "bool", "?", "boolean", "c_bool" },
    { NT_I8, 1, "int8_t", "b", "int8", "c_int8" },
    { NT_U8, 0, "uint8_t", "B", "uint8", "c_uint8" },
    { NT_I16, 1, "int16_t", "h", "int16", "c_int16" },
    { NT_U16, 0, "uint16_t", "H", "uint16", "c_uint16" },
    { NT_I32, 1, sizeof(int) == 4 ? "int" : "int32_t", "i", "int32", "c_int32" },
    { NT_U32, 0, sizeof(int) == 4 ? "unsigned int" : "uint32_t", "I", "uint32", "c_uint32" },
    { NT_I64, 1, "int64_t", "q", "int64", "c_int64" },
    { NT_U64, 0, "uint64_t", "Q", "uint64", "c_uint64" },
    { NT_F32, 1, "float", "f", "float32", "c_float" },
    { NT_F64, 1, "double", "d", "float64", "c_double" },
    { NT_C64, 1, "float complex", "F", "complex64", NULL },
    { NT_C128, 1, "double complex", "D", "complex128", NULL },
};

static PyObject *kind_table(void)
{
    size_t n = sizeof(kind_rows) / sizeof(kind_rows[0]);
    PyObject *t = PyTuple_New((Py_ssize_t)n);
    if (t == NULL)
        return NULL;
    for (size_t k = 0; k < n; k++) {
        const kind_row *r = &kind_rows[k];
        nt_type ty = { (uint8_t)r->kind, 0, 0, 0, 0, NULL };
        PyObject *row = Py_BuildValue("(snOsssz)", nt_kind_name(r->kind),
                                      (Py_ssize_t)nt_type_size(&ty),
                                      r->is_signed ? Py_True : Py_False, r->c_text,
                                      r->dtype, r->numba, r->ctypes);
        if (row == NULL) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, (Py_ssize_t)k, row);
    }
    return t;
}

/* What new thunks get now (after any executable-memory fallback), and the
   configuration read from the environment, whole. */
static PyObject *mod_backend_info(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    const nt_config *cfg = nt_config_get();
    nt_engine_status st;
    nt_engine_status_get(&st);
    PyObject *fallbacks = PyList_New(0);
    for (int i = 0; fallbacks != NULL && i < st.nfallbacks; i++) {
        PyObject *s = PyUnicode_FromString(st.fallbacks[i]);
        if (s == NULL || PyList_Append(fallbacks, s) < 0)
            Py_CLEAR(fallbacks);
        Py_XDECREF(s);
    }
    if (fallbacks == NULL)
        return NULL;
    return Py_BuildValue("{s:s,s:s,s:O,s:s,s:N,s:{s:s,s:s,s:O,s:I}}",
                         "engine", st.engine,
                         "memory_policy", st.memory_policy,
                         "native_available", nt_backend_native != NULL ? Py_True : Py_False,
                         "fallback_engine", nt_backend_ffi.name,
                         "fallbacks", fallbacks,
                         "config",
                         "engine", cfg->engine,
                         "execmem", cfg->execmem,
                         "no_reuse", cfg->no_reuse ? Py_True : Py_False,
                         "quarantine", cfg->quarantine);
}

/* A capsule named by its C signature (the SciPy/Cython convention) whose
   context keeps owner alive. */
typedef struct {
    PyObject *owner;
    char name[];
} capsule_ctx;

static void capsule_destroy(PyObject *capsule)
{
    capsule_ctx *c = PyCapsule_GetContext(capsule);
    if (c != NULL) {
        Py_XDECREF(c->owner);
        PyMem_Free(c);
    }
}

static PyObject *mod_capsule(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *address, *owner;
    const char *name;
    if (!PyArg_ParseTuple(args, "OsO:_capsule", &address, &name, &owner))
        return NULL;
    void *p = PyLong_AsVoidPtr(address);
    if (p == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "address is 0 (NULL)");
        return NULL;
    }
    size_t len = strlen(name);
    capsule_ctx *c = PyMem_Malloc(sizeof(capsule_ctx) + len + 1);
    if (c == NULL)
        return PyErr_NoMemory();
    memcpy(c->name, name, len + 1);
    c->owner = Py_NewRef(owner);
    PyObject *capsule = PyCapsule_New(p, c->name, capsule_destroy);
    if (capsule == NULL || PyCapsule_SetContext(capsule, c) < 0) {
        Py_XDECREF(capsule);
        Py_DECREF(c->owner);
        PyMem_Free(c);
        return NULL;
    }
    return capsule;
}

/* _capsule_pointer(capsule) -> (address, name or None) */
static PyObject *mod_capsule_pointer(PyObject *module, PyObject *capsule)
{
    (void)module;
    if (!PyCapsule_CheckExact(capsule)) {
        PyErr_SetString(PyExc_TypeError, "expected a PyCapsule");
        return NULL;
    }
    const char *name = PyCapsule_GetName(capsule);
    void *p = PyCapsule_GetPointer(capsule, name);
    if (p == NULL)
        return NULL;
    PyObject *text = Py_NewRef(Py_None);
    if (name != NULL) {
        Py_DECREF(text);
        text = PyUnicode_DecodeUTF8(name, (Py_ssize_t)strlen(name), "strict");
        if (text == NULL) {
            PyObject *raw = PyBytes_FromString(name);
            PyErr_Clear();
            if (raw != NULL)
                PyErr_Format(PyExc_ValueError,
                             "the capsule's name %R is not UTF-8 text; a target capsule "
                             "is named by its C signature", raw);
            Py_XDECREF(raw);
            return NULL;
        }
    }
    return Py_BuildValue("(NN)", PyLong_FromVoidPtr(p), text);
}

PyObject *nt_kernel_addresses(PyObject *module, PyObject *unused);

static PyMethodDef module_methods[] = {
    { "_kernels", nt_kernel_addresses, METH_NOARGS,
      "addresses of the reference kernels (demo and benchmarks)" },
    { "_capsule", mod_capsule, METH_VARARGS, "a signature-named capsule keeping owner alive" },
    { "_capsule_pointer", mod_capsule_pointer, METH_O, "the pointer and name of a capsule" },
    { "_scalar", mod_scalar, METH_VARARGS, "check a scalar against a C type" },
    { "backend_info", mod_backend_info, METH_NOARGS,
      "backend_info() -> dict: the engine and executable-memory policy new thunks get,\n"
      "the fallbacks taken and the configuration (see docs/engines.md).\n\n"
      ">>> info = nt.backend_info()\n"
      ">>> sorted(info)\n"
      "['config', 'engine', 'fallback_engine', 'fallbacks', 'memory_policy', "
      "'native_available']\n"
      ">>> info['fallback_engine']\n"
      "'libffi'\n" },
    { NULL, NULL, 0, NULL }
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "numthunk._core",
    "C core of numthunk: signatures, descriptors, plans and trampolines.",
    -1, module_methods, NULL, NULL, NULL, NULL
};

static int check_config(void)
{
    const nt_config *cfg = nt_config_get();
    if (cfg->error[0] != '\0') {
        PyErr_SetString(PyExc_ImportError, cfg->error);
        return -1;
    }
    return 0;
}

PyMODINIT_FUNC PyInit__core(void)
{
    import_array();
    if (check_config() < 0)
        return NULL;
    if (PyType_Ready(&nt_SignatureType) < 0 || PyType_Ready(&nt_ThunkType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Signature", (PyObject *)&nt_SignatureType) < 0
        || PyModule_AddObjectRef(m, "Thunk", (PyObject *)&nt_ThunkType) < 0
        || PyModule_AddIntConstant(m, "MEMVIEW_SIZE", (long)sizeof(nt_memviewslice)) < 0
        || nt_markers_ready(m) < 0
        || nt_capi_add(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    PyObject *kinds = kind_table();
    if (kinds == NULL || PyModule_AddObjectRef(m, "kinds", kinds) < 0) {
        Py_XDECREF(kinds);
        Py_DECREF(m);
        return NULL;
    }
    Py_DECREF(kinds);
    return m;
}
