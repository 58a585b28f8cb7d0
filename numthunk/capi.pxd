# Cython declarations of numthunk/capi.h: make thunks from Cython code
# without numthunk.bind.
#
#     from cpython.object cimport PyObject
#     from numthunk cimport capi
#     capi.numthunk_import_capi()          # once, at module level
#
#     cdef PyObject *values[2]
#     values[0] = <PyObject *>arr          # bound
#     values[1] = NULL                     # forwarded
#     t = capi.numthunk_create(capi.numthunk_signature(b"double (const DLTensor *, double)"),
#                              <void *>kernel, values, 2, None, 0)
#     f = <double (*)(double) noexcept nogil>capi.numthunk_address(t)
#
# Compile with the C include path numthunk.get_include().

from cpython.object cimport PyObject
from numthunk.dlpack cimport DLTensor

# A missing C include path stops the build with a message that says what to
# pass (__has_include: GCC 5, Clang, MSVC 2017 and later), before the
# compiler's bare "No such file" for the header.
cdef extern from *:
    """
    #if defined(__has_include) && !defined(NUMTHUNK_INCLUDE_CHECKED)
    #define NUMTHUNK_INCLUDE_CHECKED 1
    #if !__has_include("numthunk/capi.h")
    #error "numthunk/capi.h is not on the C include path: give the C compiler the directory numthunk.get_include() returns (include_dirs=[numthunk.get_include()] in setup.py, include_directories in meson, -I in CFLAGS); see docs/cython.md, Building against the C API"
    #endif
    #endif
    """

cdef extern from "numthunk/capi.h":
    int NUMTHUNK_CAPI_VERSION
    unsigned int NUMTHUNK_NEEDS_GIL
    unsigned int NUMTHUNK_ENGINE_FFI
    unsigned int NUMTHUNK_ENGINE_NATIVE

    int numthunk_import_capi() except -1
    object numthunk_signature(const char *text)
    object numthunk_create(object signature, void *target, PyObject **values,
                           Py_ssize_t nvalues, PyObject *owner, unsigned int flags)
    void *numthunk_address(object thunk) except? NULL
    int numthunk_release(object thunk) except -1
    int numthunk_rebind(object thunk, Py_ssize_t index, object value) except -1
    bint numthunk_check(object obj)
    object numthunk_dltensor(object obj, int writable, DLTensor **out)
