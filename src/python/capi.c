/*
 * The C API: a table of function pointers exported as the capsule
 * numthunk._core._C_API (numthunk/include/numthunk/capi.h declares it), so
 * C and Cython extensions make, read and release thunks without the
 * Python-level bind().
 *
 * create() follows "resolve, then commit" as numthunk.bind does: a NULL
 * value becomes the forwarded marker, foreign objects (ctypes and cffi
 * pointers, arr.ctypes, ref() cells) are resolved by the package's
 * registered callables (nt_thunk_resolve; rebind: nt_thunk_rebind_key), and the values go to nt_thunk_create, the commit
 * Thunk() itself ends in, so
 * every check and every lifetime rule is the one Python users get. Arrays,
 * numbers, None, address() and DLPack exporters need no Python code. The table is append-only: version and
 * size let an extension built against an older header run on a newer core.
 *
 * Place in the pipeline: python, the boundary for C and Cython callers: the
 * same stages as the Python types, through a table.
 */
#include "convert/dlpack.h"
#include "../../numthunk/include/numthunk/capi.h"

#include <string.h>

/* The thunk class handed out: the package's numthunk.Thunk (ctypes,
   lowlevelcallable(), Numba's protocol), registered when the package was
   imported (PyCapsule_Import imports it before any extension can reach
   this table), else the core type (docs/architecture.md, "The C/Python
   boundary"). Read under the state lock (python/pyapi.h), as _register writes
   it. */
static PyTypeObject *thunk_class(const nt_state *st)
{
    return st->thunk_class != NULL ? st->thunk_class : st->thunk_type;
}

/* The module state, or NULL with RuntimeError once the module is gone
   (an extension that calls in while the interpreter finalizes). */
static nt_state *live_state(const char *fn)
{
    nt_state *st = nt_get_state();
    if (st == NULL)
        PyErr_Format(PyExc_RuntimeError, "%s: the numthunk core module is gone", fn);
    return st;
}

static PyObject *capi_signature(const char *text)
{
    if (live_state("numthunk_signature") == NULL)
        return NULL;
    if (text == NULL) {
        PyErr_SetString(PyExc_ValueError, "numthunk_signature: text is NULL");
        return NULL;
    }
    nt_error err;
    nt_error_init(&err);
    nt_sig *sig = nt_sig_parse(text, NULL, 0, &err);
    if (sig == NULL) {
        nt_raise_parse_error(text, &err);
        return NULL;
    }
    return nt_signature_wrap(nt_get_state()->signature_type, sig);
}

/* numthunk_create's arguments checked, and the engine its flags name into
   *wanted. 0, or -1 with an exception set. */
static int check_create(const nt_state *st, PyObject *signature, void *target,
                        PyObject *const *values, Py_ssize_t nvalues, unsigned int flags,
                        const nt_engine **wanted)
{
    if (signature == NULL || !PyObject_TypeCheck(signature, st->signature_type)) {
        PyErr_SetString(PyExc_TypeError,
                        "numthunk_create: signature must be a numthunk Signature "
                        "(numthunk_signature(text))");
        return -1;
    }
    if (target == NULL) {
        PyErr_SetString(PyExc_ValueError, "numthunk_create: target address is 0 (NULL)");
        return -1;
    }
    if (nvalues < 0) {
        PyErr_Format(PyExc_ValueError,
                     "numthunk_create: nvalues is %zd; it counts the "
                     "values, one per target parameter (0 or more)",
                     nvalues);
        return -1;
    }
    if (nvalues > 0 && values == NULL) {
        PyErr_Format(PyExc_ValueError, "numthunk_create: values is NULL but nvalues is %zd",
                     nvalues);
        return -1;
    }
    if (flags & ~(NUMTHUNK_NEEDS_GIL | NUMTHUNK_ENGINE_FFI | NUMTHUNK_ENGINE_NATIVE)) {
        PyErr_Format(PyExc_ValueError, "numthunk_create: unknown flags 0x%x", flags);
        return -1;
    }
    if ((flags & NUMTHUNK_ENGINE_FFI) && (flags & NUMTHUNK_ENGINE_NATIVE)) {
        PyErr_SetString(PyExc_ValueError,
                        "numthunk_create: NUMTHUNK_ENGINE_FFI and NUMTHUNK_ENGINE_NATIVE "
                        "exclude each other");
        return -1;
    }
    /* the flags name an engine as engine= does, through the same parser */
    const char *engine = flags & NUMTHUNK_ENGINE_FFI ? "ffi"
        : flags & NUMTHUNK_ENGINE_NATIVE             ? "native"
                                                     : "auto";
    nt_error err;
    nt_error_init(&err);
    if (nt_engine_parse(engine, "numthunk_create: engine ", wanted, &err) != NT_OK) {
        nt_raise(&err);
        return -1;
    }
    return 0;
}

static PyObject *capi_create(PyObject *signature, void *target, PyObject *const *values,
                             Py_ssize_t nvalues, PyObject *owner, unsigned int flags)
{
    nt_state *st = live_state("numthunk_create");
    const nt_engine *wanted;
    if (st == NULL || check_create(st, signature, target, values, nvalues, flags, &wanted) < 0)
        return NULL;
    PyObject *result = NULL, *resolved = NULL;
    /* the values as the core takes them (NULL is numthunk.ARG), held here:
       a caller's borrowed reference may go while one is converted */
    PyObject *small[16], **items = nvalues <= 16 ? small : PyMem_New(PyObject *, (size_t)nvalues);
    if (items == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < nvalues; i++)
        items[i] = Py_NewRef(values[i] != NULL ? values[i] : NT_ARG);
    NT_LOCK_BEGIN
    PyTypeObject *cls = thunk_class(st);
    const nt_sig *sig = ((nt_SignatureObject *)signature)->sig;
    if (nvalues == sig->nargs
        && nt_thunk_resolve(cls, (nt_SignatureObject *)signature, items, nvalues, owner, &resolved)
            < 0)
        goto done;
    /* The commit Thunk() and numthunk.bind end in; it checks the count. */
    result = nt_thunk_create(cls, (nt_SignatureObject *)signature, target,
                             resolved != NULL ? PySequence_Fast_ITEMS(resolved) : items, nvalues,
                             owner, !(flags & NUMTHUNK_NEEDS_GIL), NULL, wanted, NULL, NULL);
done:
    NT_LOCK_END
    for (Py_ssize_t i = 0; i < nvalues; i++)
        Py_DECREF(items[i]);
    if (items != small)
        PyMem_Free(items);
    Py_XDECREF(resolved);
    return result;
}

static int check_thunk(PyObject *obj, const char *fn)
{
    nt_state *st = live_state(fn);
    if (st == NULL)
        return -1;
    if (obj != NULL && PyObject_TypeCheck(obj, st->thunk_type))
        return 0;
    PyErr_Format(PyExc_TypeError, "%s: expected a numthunk Thunk, got %.100s", fn,
                 obj != NULL ? Py_TYPE(obj)->tp_name : "NULL");
    return -1;
}

static void *capi_address(PyObject *thunk)
{
    if (check_thunk(thunk, "numthunk_address") < 0)
        return NULL;
    return nt_thunk_address(thunk);
}

static int capi_release(PyObject *thunk)
{
    if (check_thunk(thunk, "numthunk_release") < 0)
        return -1;
    return nt_thunk_release(thunk);
}

/* The C rebind Thunk.rebind ends in: foreign values resolved by the
   package's registered callable, the same refusals. */
static int capi_rebind(PyObject *thunk, Py_ssize_t index, PyObject *value)
{
    if (check_thunk(thunk, "numthunk_rebind") < 0)
        return -1;
    if (value == NULL) {
        PyErr_SetString(PyExc_ValueError, "numthunk_rebind: value is NULL");
        return -1;
    }
    PyObject *key = PyLong_FromSsize_t(index);
    if (key == NULL)
        return -1;
    int r = nt_thunk_rebind_key(thunk, key, value);
    Py_DECREF(key);
    return r;
}

static int capi_check(PyObject *obj)
{
    nt_state *st = nt_get_state();
    return st != NULL && obj != NULL && PyObject_TypeCheck(obj, st->thunk_type);
}

static PyObject *capi_dltensor(PyObject *obj, int writable, DLTensor **out)
{
    if (obj == NULL || out == NULL) {
        PyErr_SetString(PyExc_ValueError, "numthunk_dltensor: obj and out must not be NULL");
        return NULL;
    }
    return nt_dlpack_acquire(obj, writable, "numthunk_dltensor", out);
}

static const numthunk_CAPI capi_table = {
    NUMTHUNK_CAPI_VERSION, sizeof(numthunk_CAPI), capi_signature, capi_create,   capi_address,
    capi_release,          capi_rebind,           capi_check,     capi_dltensor,
};

int nt_capi_add(PyObject *module, nt_state *st)
{
    /* The table is constant; the capsule API takes a non-const pointer. */
    st->capi = PyCapsule_New((void *)&capi_table, NUMTHUNK_CAPI_CAPSULE, NULL);
    if (st->capi == NULL)
        return -1;
    return PyModule_AddObjectRef(module, "_C_API", st->capi);
}
