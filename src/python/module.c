/*
 * numthunk._core: the module, in multi-phase init; its state (the heap
 * types, ARG, the C API capsule and the callables the package registers),
 * one core per process; and the small functions the Python package needs
 * from C (the kind table as _core.kinds, checked scalar conversion for
 * ref(), engine_info()). docs/architecture.md, "The C/Python boundary",
 * says what is registered and why there is one core.
 *
 * Place in the pipeline: python, the boundary: the module that holds every
 * type and the state.
 */
#include "python/pyapi.h"
#include "life/thunk.h"
#include "engine/native.h"
#include "convert/dlpack.h"

#define PY_ARRAY_UNIQUE_SYMBOL nt_ARRAY_API
#define NPY_NO_DEPRECATED_API  NPY_1_7_API_VERSION
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

/* ---- the kind table (kinds.c) for the Python package ---- */

/* One row per scalar kind, as named fields: the adapters derive their name
   maps from these instead of keeping their own. */
static PyStructSequence_Field kind_fields[] = {
    { "name", "canonical name: 'int32', 'float64'" },
    { "size", "bytes of a value" },
    { "align", "alignment of a value" },
    { "signed", "signed (floats and complex are; bool is not)" },
    { "min", "the least value (floats and complex: of a part)" },
    { "max", "the greatest finite value (floats and complex: of a part)" },
    { "c", "the C text numthunk prints for it" },
    { "dtype", "NumPy dtype character" },
    { "numba", "numba.types name" },
    { "ctypes", "ctypes class name, or None" },
    { "cffi", "the C text cffi reads for it" },
    { "formats", "PEP 3118 formats of its buffers, native sizes" },
    { "std_formats", "PEP 3118 codes of its buffers after '=', '<', '>', '!'" },
    { "dlpack", "(DLPack type code, bits)" },
    { NULL, NULL },
};

static PyStructSequence_Desc kind_desc = {
    "numthunk._core.Kind",
    "A value kind: one row of the C core's kind table (src/kinds.c).",
    kind_fields,
    14,
};

/* The formats of a code mask: ('l', 'q'), ('Zf',) for a complex kind. */
static PyObject *format_tuple(uint32_t mask, int is_complex)
{
    PyObject *out = PyTuple_New(0);
    for (const char *c = NT_FMT_CODES; out != NULL && *c != '\0'; c++) {
        if (!(mask & nt_fmt_bit(*c)))
            continue;
        char text[3] = { is_complex ? 'Z' : *c, is_complex ? *c : '\0', '\0' };
        PyObject *s = PyUnicode_FromString(text);
        Py_ssize_t n = PyTuple_GET_SIZE(out);
        if (s == NULL || _PyTuple_Resize(&out, n + 1) < 0) {
            Py_XDECREF(s);
            Py_XDECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, n, s);
    }
    return out;
}

static PyObject *kind_row(PyTypeObject *type, const nt_kind_info *r)
{
    int is_int = r->value == NT_VALUE_BOOL || r->value == NT_VALUE_INT;
    int is_complex = r->value == NT_VALUE_COMPLEX;
    PyObject *row = PyStructSequence_New(type);
    PyObject *items[14] = {
        PyUnicode_FromString(r->name),
        PyLong_FromLong(r->size),
        PyLong_FromLong(r->align),
        PyBool_FromLong(r->is_signed),
        is_int ? PyLong_FromLongLong(r->min) : PyFloat_FromDouble(-r->fmax),
        is_int ? PyLong_FromUnsignedLongLong(r->max) : PyFloat_FromDouble(r->fmax),
        PyUnicode_FromString(r->c_text),
        PyUnicode_FromStringAndSize(&r->dtype, 1),
        PyUnicode_FromString(r->numba),
        r->ctypes != NULL ? PyUnicode_FromString(r->ctypes) : Py_NewRef(Py_None),
        PyUnicode_FromString(r->cffi),
        format_tuple(r->fmt_native, is_complex),
        format_tuple(r->fmt_std, is_complex),
        Py_BuildValue("(ii)", r->dl_code, r->dl_bits),
    };
    int ok = row != NULL;
    for (int i = 0; i < 14; i++) {
        ok = ok && items[i] != NULL;
        if (row != NULL && items[i] != NULL)
            PyStructSequence_SET_ITEM(row, i, items[i]);
        else
            Py_XDECREF(items[i]);
    }
    if (!ok)
        Py_CLEAR(row);
    return row;
}

/* _core.kinds: {name: Kind} for the scalar kinds, in kind order. */
static int add_kinds(PyObject *module)
{
    PyTypeObject *type = PyStructSequence_NewType(&kind_desc);
    PyObject *kinds = PyDict_New();
    int r = type != NULL && kinds != NULL ? 0 : -1;
    for (int k = NT_BOOL; r == 0 && k <= NT_C128; k++) {
        PyObject *row = kind_row(type, &nt_kinds[k]);
        r = row != NULL ? PyDict_SetItemString(kinds, nt_kinds[k].name, row) : -1;
        Py_XDECREF(row);
    }
    if (r == 0)
        r = PyModule_AddObjectRef(module, "kinds", kinds);
    if (r == 0)
        r = PyModule_AddObjectRef(module, "Kind", (PyObject *)type);
    Py_XDECREF(kinds);
    Py_XDECREF((PyObject *)type);
    return r;
}

/* What new thunks get now (after any executable-memory fallback), and the
   configuration read from the environment, whole. */
static PyObject *mod_engine_info(PyObject *module, PyObject *unused)
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
    return Py_BuildValue(
        "{s:s,s:s,s:O,s:s,s:N,s:{s:s,s:s,s:s,s:O,s:I}}", "engine", st.engine, "memory_policy",
        st.memory_policy, "native_available", nt_engine_native != NULL ? Py_True : Py_False,
        "fallback_engine", nt_engine_ffi.name, "fallbacks", fallbacks, "config", "engine",
        cfg->engine, "engine_from", cfg->engine_from, "execmem", cfg->execmem, "no_reuse",
        cfg->no_reuse ? Py_True : Py_False, "quarantine", cfg->quarantine);
}

/* A capsule named by its C signature (the SciPy/Cython convention) that
   keeps owner alive: its name lives in the block that holds the owner, so
   that the destructor and _capsule_owner find the block from the name.
   With context, the block is the capsule's context too; without, the
   context is NULL, as SciPy's LowLevelCallable keeps its first capsule
   (its consumers read the context as the callback's user data). */
typedef struct {
    PyObject *owner;
    char name[];
} capsule_block;

static capsule_block *block_of(PyObject *capsule)
{
    return (capsule_block *)(PyCapsule_GetName(capsule) - offsetof(capsule_block, name));
}

static void capsule_destroy(PyObject *capsule)
{
    capsule_block *c = block_of(capsule);
    Py_XDECREF(c->owner);
    PyMem_Free(c);
}

static void *capsule_address(PyObject *address)
{
    void *p = PyLong_AsVoidPtr(address);
    if (p == NULL && !PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "address is 0 (NULL)");
    return p;
}

static PyObject *make_capsule(void *p, const char *name, PyObject *owner, int with_context)
{
    size_t len = strlen(name);
    capsule_block *c = PyMem_Malloc(sizeof(capsule_block) + len + 1);
    if (c == NULL)
        return PyErr_NoMemory();
    memcpy(c->name, name, len + 1);
    c->owner = Py_NewRef(owner);
    PyObject *capsule = PyCapsule_New(p, c->name, capsule_destroy);
    if (capsule == NULL || (with_context && PyCapsule_SetContext(capsule, c) < 0)) {
        if (capsule != NULL)
            Py_DECREF(capsule); /* its destructor frees the block */
        else {
            Py_DECREF(c->owner);
            PyMem_Free(c);
        }
        return NULL;
    }
    return capsule;
}

static PyObject *mod_capsule(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *address, *owner;
    const char *name;
    if (!PyArg_ParseTuple(args, "OsO:_capsule", &address, &name, &owner))
        return NULL;
    void *p = capsule_address(address);
    return p == NULL ? NULL : make_capsule(p, name, owner, 1);
}

/* _capsule_owner(capsule): the owner a capsule of ours keeps (_capsule,
   _lowlevelcallable: a thunk's, a Function's), None for any other. */
static PyObject *mod_capsule_owner(PyObject *module, PyObject *capsule)
{
    (void)module;
    if (!PyCapsule_CheckExact(capsule) || PyCapsule_GetDestructor(capsule) != capsule_destroy
        || PyCapsule_GetName(capsule) == NULL) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    return Py_NewRef(block_of(capsule)->owner);
}

/* _lowlevelcallable(cls, address, name, owner): what SciPy's
   LowLevelCallable(capsule) makes of a capsule named `name` that keeps
   owner, with no user data, without its search through the ctypes and cffi
   forms: the tuple of class cls (SciPy's LowLevelCallable, a tuple
   subclass) holding a context-free capsule of the same pointer and name
   (user data NULL) that keeps owner too, the capsule, and None. */
static PyObject *mod_lowlevelcallable(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 4 || !PyType_Check(args[0])
        || !PyType_IsSubtype((PyTypeObject *)args[0], &PyTuple_Type) || !PyUnicode_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError,
                        "_lowlevelcallable(cls, address, name, owner): cls a tuple subclass, "
                        "name a str");
        return NULL;
    }
    const char *name = PyUnicode_AsUTF8(args[2]);
    void *p = name == NULL ? NULL : capsule_address(args[1]);
    if (p == NULL)
        return NULL;
    PyObject *r = NULL, *items = NULL, *pack = NULL;
    PyObject *capsule = make_capsule(p, name, args[3], 1);
    PyObject *raw = capsule == NULL ? NULL : make_capsule(p, name, args[3], 0);
    if (raw != NULL)
        items = PyTuple_Pack(3, raw, capsule, Py_None);
    if (items != NULL)
        pack = PyTuple_Pack(1, items);
    if (pack != NULL)
        r = PyTuple_Type.tp_new((PyTypeObject *)args[0], pack, NULL);
    Py_XDECREF(pack);
    Py_XDECREF(items);
    Py_XDECREF(raw);
    Py_XDECREF(capsule);
    return r;
}

/* _registry_find(address): what the registry holds at address (tests and
   debugging): the thunk entered there (live or released), "collected"
   where a freed thunk's entry still waits in the quarantine, None for
   anything else (a thunk being freed, at a reference count of 0, too). */
static PyObject *mod_registry_find(PyObject *module, PyObject *address)
{
    (void)module;
    void *p = PyLong_AsVoidPtr(address);
    if (p == NULL && PyErr_Occurred())
        return NULL;
    PyObject *r;
    NT_LOCK_BEGIN
    int collected;
    PyObject *t = nt_registry_find(p, &collected);
    if (collected)
        r = PyUnicode_FromString("collected");
    else if (t != NULL && Py_REFCNT(t) > 0)
        r = Py_NewRef(t);
    else
        r = Py_NewRef(Py_None);
    NT_LOCK_END
    return r;
}

/* _identify(address, signature, carried): the thunk that a function of
   signature at address is (carried, the thunk the Function stands for,
   when its address is the one; else the registry's), or None; refused
   as bind() refuses it (an address a collected thunk left in the
   quarantine, a thunk of another signature) and as a call from Python
   refuses it (released, or using a released thunk). Read by what hands a
   Function's address to code that calls it without a thunk of its own:
   Numba's unboxing, Function.lowlevelcallable(). */
static PyObject *mod_identify(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "_identify(address, signature, carried)");
        return NULL;
    }
    void *p = PyLong_AsVoidPtr(args[0]);
    if (p == NULL && PyErr_Occurred())
        return NULL;
    if (!PyObject_TypeCheck(args[1], nt_get_state()->signature_type)) {
        PyErr_SetString(PyExc_TypeError, "_identify: the signature must be a Signature");
        return NULL;
    }
    PyObject *carried = args[2] != Py_None ? args[2] : NULL;
    PyObject *r = NULL;
    NT_LOCK_BEGIN
    ThunkObject *d;
    if (nt_thunk_identify(p, carried, ((nt_SignatureObject *)args[1])->sig, DEP_TARGET, &d) == 0) {
        if (d != NULL && NT_UNUSABLE(d))
            nt_thunk_unusable_error(d);
        else
            r = Py_NewRef(d != NULL ? (PyObject *)d : Py_None);
    }
    NT_LOCK_END
    return r;
}

/* _capsule_context(capsule) -> its context as an address (0: NULL), what
   SciPy's callers pass a LowLevelCallable's function as its user data */
static PyObject *mod_capsule_context(PyObject *module, PyObject *capsule)
{
    (void)module;
    if (!PyCapsule_CheckExact(capsule)) {
        PyErr_SetString(PyExc_TypeError, "expected a PyCapsule");
        return NULL;
    }
    void *context = PyCapsule_GetContext(capsule);
    if (context == NULL && PyErr_Occurred())
        return NULL;
    return PyLong_FromVoidPtr(context);
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
                             "is named by its C signature",
                             raw);
            Py_XDECREF(raw);
            return NULL;
        }
    }
    return Py_BuildValue("(NN)", PyLong_FromVoidPtr(p), text);
}

/* ---- module state: the package's callables (docs/architecture.md,
   "The C/Python boundary") ---- */

nt_state *nt_core_state;

int nt_state_hooks_for(const nt_state *st, PyTypeObject *tp)
{
    return st != NULL && st->thunk_class != NULL && PyType_IsSubtype(tp, st->thunk_class);
}

/* _register(*, thunk_class, resolve_values, resolve_call, resolve_rebind,
   numba_type): what numthunk/_api.py hands the core once it is imported.
   Registering again (a reload of the package) replaces them. */
static PyObject *mod_register(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = { "thunk_class",    "resolve_values", "resolve_call",
                              "resolve_rebind", "numba_type",     NULL };
    PyObject *items[5] = { NULL, NULL, NULL, NULL, NULL };
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|$OOOOO:_register", kwlist, &items[0], &items[1],
                                     &items[2], &items[3], &items[4]))
        return NULL;
    for (int k = 0; k < 5; k++) {
        if (items[k] == NULL) {
            PyErr_Format(PyExc_TypeError, "_register() needs %s=", kwlist[k]);
            return NULL;
        }
        if (k > 0 && !PyCallable_Check(items[k])) {
            PyErr_Format(PyExc_TypeError, "_register(): %s= must be callable, not %.100s",
                         kwlist[k], Py_TYPE(items[k])->tp_name);
            return NULL;
        }
    }
    if (!PyType_Check(items[0])
        || !PyType_IsSubtype((PyTypeObject *)items[0], nt_get_state()->thunk_type)) {
        PyErr_SetString(PyExc_TypeError,
                        "_register(): thunk_class= must be a subclass of numthunk._core.Thunk");
        return NULL;
    }
    nt_state *st = PyModule_GetState(module);
    /* Thunks and the C API read these under the state lock (python/pyapi.h);
       what they replace goes after it (a finalizer may run). */
    PyObject **slots[5] = { (PyObject **)&st->thunk_class, &st->resolve_values, &st->resolve_call,
                            &st->resolve_rebind, &st->numba_type };
    PyObject *old[5];
    NT_LOCK_BEGIN
    for (int k = 0; k < 5; k++) {
        old[k] = *slots[k];
        *slots[k] = Py_NewRef(items[k]);
    }
    NT_LOCK_END
    for (int k = 0; k < 5; k++)
        Py_XDECREF(old[k]);
    Py_RETURN_NONE;
}

static int module_traverse(PyObject *module, visitproc visit, void *arg)
{
    nt_state *st = PyModule_GetState(module);
    Py_VISIT(st->signature_type);
    Py_VISIT(st->thunk_type);
    Py_VISIT(st->function_type);
    Py_VISIT(st->arg_type);
    Py_VISIT(st->derived_type);
    Py_VISIT(st->strided_type);
    Py_VISIT(st->address_type);
    Py_VISIT(st->arg);
    Py_VISIT(st->capi);
    Py_VISIT(st->thunk_class);
    Py_VISIT(st->resolve_values);
    Py_VISIT(st->resolve_call);
    Py_VISIT(st->resolve_rebind);
    Py_VISIT(st->numba_type);
    return 0;
}

static int module_clear(PyObject *module)
{
    nt_state *st = PyModule_GetState(module);
    Py_CLEAR(st->signature_type);
    Py_CLEAR(st->thunk_type);
    Py_CLEAR(st->function_type);
    Py_CLEAR(st->arg_type);
    Py_CLEAR(st->derived_type);
    Py_CLEAR(st->strided_type);
    Py_CLEAR(st->address_type);
    Py_CLEAR(st->arg);
    Py_CLEAR(st->capi);
    Py_CLEAR(st->thunk_class);
    Py_CLEAR(st->resolve_values);
    Py_CLEAR(st->resolve_call);
    Py_CLEAR(st->resolve_rebind);
    Py_CLEAR(st->numba_type);
    return 0;
}

/* One core per process: the registry, the engines and the quarantine are
   process-wide, so a second module object (another interpreter, a second
   load by importlib) would share them with types and a state of its own.
   Set by a successful exec, cleared when that module is freed. */
static int core_loaded;

static void module_free(void *module)
{
    module_clear(module);
    if (nt_core_state == PyModule_GetState(module)) {
        nt_core_state = NULL;
        core_loaded = 0;
    }
}

PyObject *nt_kernel_addresses(PyObject *module, PyObject *unused);

static PyMethodDef module_methods[] = {
    { "_kernels", nt_kernel_addresses, METH_NOARGS,
      "addresses of the reference kernels (demo and benchmarks)" },
    { "_capsule", mod_capsule, METH_VARARGS, "a signature-named capsule keeping owner alive" },
    { "_lowlevelcallable", (PyCFunction)(void (*)(void))mod_lowlevelcallable, METH_FASTCALL,
      "a scipy.LowLevelCallable of a signature-named capsule keeping owner, no user data" },
    { "_capsule_pointer", mod_capsule_pointer, METH_O, "the pointer and name of a capsule" },
    { "_capsule_context", mod_capsule_context, METH_O, "the context of a capsule, as an int" },
    { "_registry_find", mod_registry_find, METH_O,
      "the thunk at an address, 'collected' or None (tests)" },
    { "_identify", (PyCFunction)(void (*)(void))mod_identify, METH_FASTCALL,
      "the thunk a function of a signature at an address is, or None; refused as bind() "
      "and a call refuse it" },
    { "_capsule_owner", mod_capsule_owner, METH_O,
      "the owner a capsule of numthunk's keeps, None for any other" },
    { "_scalar", mod_scalar, METH_VARARGS, "check a scalar against a C type" },
    { "_register", (PyCFunction)(void (*)(void))mod_register, METH_VARARGS | METH_KEYWORDS,
      "the package's thunk class and hooks, handed to the core once" },
    { "_new_thunk", (PyCFunction)(void (*)(void))nt_thunk_new_positional, METH_FASTCALL,
      "Thunk(...) by position, for bind()" },
    { "engine_info", mod_engine_info, METH_NOARGS,
      "engine_info() -> dict: the engine and executable-memory policy new thunks get,\n"
      "the fallbacks taken and the configuration (see docs/engines.md).\n\n"
      ">>> info = nt.engine_info()\n"
      ">>> sorted(info)\n"
      "['config', 'engine', 'fallback_engine', 'fallbacks', 'memory_policy', "
      "'native_available']\n"
      ">>> info['fallback_engine']\n"
      "'libffi'\n" },
    { NULL, NULL, 0, NULL },
};

#ifdef Py_GIL_DISABLED
PyObject *nt_state_lock;
#endif

/* The object whose critical section is the state lock (python/pyapi.h): made by
   the first exec, kept for the life of the process rather than in the
   module state, as the registry and the engines it guards are (one core
   per process), and because a thunk may outlive the module object: its
   dealloc still takes the lock. */
int nt_state_lock_ready(void)
{
#ifdef Py_GIL_DISABLED
    if (nt_state_lock == NULL)
        nt_state_lock = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);
    return nt_state_lock != NULL ? 0 : -1;
#else
    return 0;
#endif
}

static int check_config(void)
{
    const nt_config *cfg = nt_config_get();
    if (cfg->error[0] != '\0') {
        PyErr_SetString(PyExc_ImportError, cfg->error);
        return -1;
    }
    return 0;
}

static int module_exec(PyObject *m)
{
    if (core_loaded) {
        PyErr_SetString(PyExc_ImportError,
                        "numthunk._core is already loaded in this process: its registry, "
                        "engines and quarantine are process-wide, so it runs once per "
                        "process (not in a second interpreter, nor loaded twice)");
        return -1;
    }
    if (_import_array() < 0 || check_config() < 0 || nt_state_lock_ready() < 0)
        return -1;
    nt_kinds_ready();
    nt_state *st = PyModule_GetState(m);
    nt_core_state = st;
    if (nt_signature_add(m, st) < 0 || nt_thunk_add(m, st) < 0 || nt_function_add(m, st) < 0
        || nt_binder_add(m) < 0
        || PyModule_AddIntConstant(m, "MEMVIEW_SIZE", (long)sizeof(nt_memviewslice)) < 0
        || nt_markers_add(m, st) < 0 || nt_capi_add(m, st) < 0 || add_kinds(m) < 0) {
        nt_core_state = NULL; /* the module is dropped: its state with it */
        /* CPython 3.11's PyType_FromModuleAndSpec can fail an allocation
           without setting an exception (tests/test_nomemory.py) */
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        return -1;
    }
    core_loaded = 1;
    return 0;
}

static PyModuleDef_Slot module_slots[] = {
    { Py_mod_exec, module_exec },
#ifdef Py_mod_multiple_interpreters
    { Py_mod_multiple_interpreters, Py_MOD_MULTIPLE_INTERPRETERS_NOT_SUPPORTED },
#endif
#ifdef Py_GIL_DISABLED
    /* Every piece of shared state has its lock or atomic without the GIL
       (docs/architecture.md, "Shared state and its protection"). */
    { Py_mod_gil, Py_MOD_GIL_NOT_USED },
#endif
    { 0, NULL },
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "numthunk._core",
    "C core of numthunk: signatures, descriptors, plans and trampolines.",
    sizeof(nt_state),
    module_methods,
    module_slots,
    module_traverse,
    module_clear,
    module_free,
};

/* Multi-phase init: the module object comes first, module_exec fills it. */
PyMODINIT_FUNC PyInit__core(void)
{
    return PyModuleDef_Init(&module_def);
}
