/*
 * numthunk/capi.h: numthunk's C API for C and Cython extensions.
 *
 * Make thunks from C without going through Python's numthunk.bind: a
 * table of function pointers that numthunk._core exports as the capsule
 * numthunk._core._C_API, in the manner of NumPy's C API. Call
 * numthunk_import_capi() once (module init) in every C file that uses it;
 * it returns -1 with an ImportError set when numthunk is missing or older
 * than this header.
 *
 *     #include <Python.h>
 *     #include "numthunk/capi.h"      // -I numthunk.get_include()
 *
 *     static double kernel(const DLTensor *t, double x);
 *
 *     PyObject *sig = numthunk_signature("double (const DLTensor *, double)");
 *     PyObject *values[2] = { array, NULL };          // NULL: forwarded
 *     PyObject *thunk = numthunk_create(sig, (void *)kernel, values, 2, NULL, 0);
 *     double (*f)(double) = (double (*)(double))numthunk_address(thunk);
 *     f(0.5);                                         // kernel(<array>, 0.5)
 *     numthunk_release(thunk);                        // the address traps from now on
 *     Py_DECREF(thunk);
 *
 * The values are checked exactly as numthunk.bind checks them (dtype,
 * integer width, const, contiguity), with the same exceptions. Every
 * function needs the GIL; the thunk's address does not (call it from any
 * thread, as long as the thunk is alive and not released). Arguments are
 * borrowed: no function steals a reference. Errors follow CPython's
 * convention: NULL or -1 with an exception set. Each member below states
 * its references, GIL rule and errors; docs/capi.md is the reference.
 */
#ifndef NUMTHUNK_CAPI_H
#define NUMTHUNK_CAPI_H

#include <Python.h>

#include "dlpack.h"     /* numthunk/dlpack.h, next to this file */

#ifdef __cplusplus
extern "C" {
#endif

/* Version 1. Later versions only append members, so an extension built
   against version N runs with any numthunk that provides N or more. */
#define NUMTHUNK_CAPI_VERSION 1
#define NUMTHUNK_CAPI_CAPSULE "numthunk._core._C_API"

/* numthunk_create flags */
#define NUMTHUNK_NEEDS_GIL      0x1u  /* the target needs the GIL (Cython code building
                                         Python objects); thunk() from Python keeps it */
#define NUMTHUNK_ENGINE_FFI     0x2u  /* run on libffi closures */
#define NUMTHUNK_ENGINE_NATIVE  0x4u  /* native trampolines (falls back for plans they
                                         cannot run); neither flag: the default choice */

typedef struct {
    unsigned int version;     /* NUMTHUNK_CAPI_VERSION of the numthunk that runs */
    unsigned int size;        /* sizeof this table there */

    /* A parsed C signature ("double (const double *x, int n)").
       References: returns a new reference; text is read during the call.
       GIL: required.
       Errors: NULL with ValueError pointing at the column (or for NULL text). */
    PyObject *(*signature)(const char *text);

    /* A thunk of target (a C function of that signature) with values[i]
       bound to parameter i, or forwarded where values[i] is NULL; nvalues
       must equal the number of parameters. owner (may be NULL) is kept
       alive as long as the thunk: the module that holds target's code.
       References: returns a new reference to a numthunk.Thunk; signature,
       values and owner are borrowed (the thunk takes its own references
       to what it keeps).
       GIL: required; the thunk's address needs none.
       Errors: NULL with the exception numthunk.bind raises for the same
       values, or TypeError/ValueError for a bad signature, target, values
       array or flags. */
    PyObject *(*create)(PyObject *signature, void *target, PyObject *const *values,
                        Py_ssize_t nvalues, PyObject *owner, unsigned int flags);

    /* The thunk's C address, valid while the thunk is alive and not
       released (hold a reference to the thunk meanwhile).
       References: thunk is borrowed.
       GIL: required for this call; calls through the address need none.
       Errors: NULL with ValueError for a released thunk, TypeError for an
       object that is not a thunk. */
    void *(*address)(PyObject *thunk);

    /* thunk.release(): 0. Waits for calls made from Python in other
       threads; calls made from C through the address must be over.
       References: thunk is borrowed (the caller still drops its own).
       GIL: required.
       Errors: -1 with TypeError for an object that is not a thunk. */
    int (*release)(PyObject *thunk);

    /* thunk.rebind(index, value): 0.
       References: thunk and value are borrowed; the thunk takes its own
       reference to value.
       GIL: required.
       Errors: -1 with the exception thunk.rebind raises (IndexError,
       the conversion's TypeError/ValueError/OverflowError, ValueError for
       a released thunk or a NULL value, TypeError for a non-thunk). */
    int (*rebind)(PyObject *thunk, Py_ssize_t index, PyObject *value);

    /* 1 if obj is a thunk (or a subclass's instance), else 0 (also for NULL).
       References: obj is borrowed.
       GIL: required, as for any use of an object.
       Errors: none; it never sets an exception. */
    int (*check)(PyObject *obj);

    /* A DLTensor describing obj (buffer protocol or __dlpack__, CPU only,
       strides in elements) with the checks a DLTensor * parameter applies;
       writable: refuse read-only data.
       References: returns a new reference to the object that owns the
       descriptor and keeps the data alive; *out is borrowed from it, valid
       until that reference is dropped; obj is borrowed.
       GIL: required to make and to drop it; the descriptor and the data
       may be read without the GIL while the owner lives.
       Errors: NULL with TypeError or ValueError (what a DLTensor *
       parameter refuses, NULL arguments); *out is not set. */
    PyObject *(*dltensor)(PyObject *obj, int writable, DLTensor **out);
} numthunk_CAPI;

/* One table pointer per C file (static), set by numthunk_import_capi().
   numthunk_import_capi: imports numthunk._core and checks the table.
   References: none taken or given.
   GIL: required (it imports a module).
   Errors: -1 with ImportError when numthunk is missing or older than this
   header, or what PyCapsule_Import raised. */
static const numthunk_CAPI *numthunk_capi = NULL;

static inline int numthunk_import_capi(void)
{
    const numthunk_CAPI *api = (const numthunk_CAPI *)PyCapsule_Import(NUMTHUNK_CAPI_CAPSULE, 0);
    if (api == NULL)
        return -1;
    if (api->version < NUMTHUNK_CAPI_VERSION || api->size < sizeof(numthunk_CAPI)) {
        PyErr_Format(PyExc_ImportError,
                     "numthunk C API version %u is older than %d, which this module "
                     "was built for: upgrade numthunk", api->version, NUMTHUNK_CAPI_VERSION);
        return -1;
    }
    numthunk_capi = api;
    return 0;
}

static inline PyObject *numthunk_signature(const char *text)
{
    return numthunk_capi->signature(text);
}

static inline PyObject *numthunk_create(PyObject *signature, void *target,
                                        PyObject *const *values, Py_ssize_t nvalues,
                                        PyObject *owner, unsigned int flags)
{
    return numthunk_capi->create(signature, target, values, nvalues, owner, flags);
}

static inline void *numthunk_address(PyObject *thunk)
{
    return numthunk_capi->address(thunk);
}

static inline int numthunk_release(PyObject *thunk)
{
    return numthunk_capi->release(thunk);
}

static inline int numthunk_rebind(PyObject *thunk, Py_ssize_t index, PyObject *value)
{
    return numthunk_capi->rebind(thunk, index, value);
}

static inline int numthunk_check(PyObject *obj)
{
    return numthunk_capi->check(obj);
}

static inline PyObject *numthunk_dltensor(PyObject *obj, int writable, DLTensor **out)
{
    return numthunk_capi->dltensor(obj, writable, out);
}

#ifdef __cplusplus
}
#endif

#endif /* NUMTHUNK_CAPI_H */
