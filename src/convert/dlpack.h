/*
 * Internal header of the DLPack stage (convert/dlpack.c) and the C API (python/capi.c):
 * the public DLTensor declarations plus what the binding code calls.
 *
 * Place in the pipeline: convert: shared by convert/dlpack.c, convert/value.c
 * and python/capi.c.
 */
#ifndef NUMTHUNK_NT_DLPACK_H
#define NUMTHUNK_NT_DLPACK_H

#include "python/pyapi.h"
#include "../../numthunk/include/numthunk/dlpack.h"

/*
 * A DLTensor for obj, owned by the returned capsule (NULL with an
 * exception naming `what` on failure): from the buffer protocol if obj has
 * it, else from obj.__dlpack__(). writable: refuse read-only data; label
 * starts every message. The
 * descriptor, its shape and strides and the data stay valid while the
 * capsule lives.
 */
PyObject *nt_dlpack_acquire(PyObject *obj, int writable, const char *label, DLTensor **tensor);

/* 1 if obj is something a DLTensor can be built from (buffer or
   __dlpack__), 0 if not, -1 with an exception set. */
int nt_dlpack_is_array(PyObject *obj);

/*
 * Converts value for parameter i of sig, a `DLTensor *`: the cell receives a
 * pointer to a DLTensor the binding owns, and the descriptor's holder is
 * pushed onto *held like a bound buffer. Returns 0 bound, -1 with an
 * exception set, 1 if value is not an array (the caller tries the other
 * pointer forms: None, address(), ctypes/cffi pointers).
 */
int nt_dlpack_convert(const nt_sig *sig, int i, PyObject *value, void *cell, nt_held **held);

/* The element kind of a plain ndarray in native byte order (convert/value.c);
   NT_VOID for anything else. */
int nt_ndarray_kind(PyObject *obj);

/* Adds the C API capsule numthunk._core._C_API to the module (python/capi.c). */
int nt_capi_add(PyObject *module, nt_state *st);

#endif /* NUMTHUNK_NT_DLPACK_H */
