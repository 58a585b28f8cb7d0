# Cython declarations of numthunk/dlpack.h: DLPack descriptors and the
# inline helpers, for kernels that take `const DLTensor *`.
#
#     from numthunk.dlpack cimport DLTensor, kDLFloat, nt_dl_dtype_is, nt_dl_next
#
# Compile with the C include path numthunk.get_include().

from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

# A missing C include path stops the build with a message that says what to
# pass (__has_include: GCC 5, Clang, MSVC 2017 and later), before the
# compiler's bare "No such file" for the header.
cdef extern from *:
    """
    #if defined(__has_include) && !defined(NUMTHUNK_INCLUDE_CHECKED)
    #define NUMTHUNK_INCLUDE_CHECKED 1
    #if !__has_include("numthunk/dlpack.h")
    #error "numthunk/dlpack.h is not on the C include path: give the C compiler the directory numthunk.get_include() returns (include_dirs=[numthunk.get_include()] in setup.py, include_directories in meson, -I in CFLAGS); see docs/cython.md, Building against the C API"
    #endif
    #endif
    """

cdef extern from "numthunk/dlpack.h" nogil:
    ctypedef enum DLDeviceType:
        kDLCPU
        kDLCUDA
        kDLCUDAHost
        kDLOpenCL
        kDLVulkan
        kDLMetal
        kDLVPI
        kDLROCM
        kDLROCMHost
        kDLExtDev
        kDLCUDAManaged
        kDLOneAPI
        kDLWebGPU
        kDLHexagon
        kDLMAIA
        kDLTrn

    ctypedef enum DLDataTypeCode:
        kDLInt
        kDLUInt
        kDLFloat
        kDLOpaqueHandle
        kDLBfloat
        kDLComplex
        kDLBool

    ctypedef struct DLDevice:
        DLDeviceType device_type
        int32_t device_id

    ctypedef struct DLDataType:
        uint8_t code
        uint8_t bits
        uint16_t lanes

    ctypedef struct DLTensor:
        void *data
        DLDevice device
        int32_t ndim
        DLDataType dtype
        int64_t *shape
        int64_t *strides
        uint64_t byte_offset

    ctypedef struct DLPackVersion:
        uint32_t major
        uint32_t minor

    ctypedef struct DLManagedTensor:
        DLTensor dl_tensor
        void *manager_ctx
        void (*deleter)(DLManagedTensor *)

    ctypedef struct DLManagedTensorVersioned:
        DLPackVersion version
        void *manager_ctx
        void (*deleter)(DLManagedTensorVersioned *)
        uint64_t flags
        DLTensor dl_tensor

    int64_t nt_dl_numel(const DLTensor *t)
    size_t nt_dl_itemsize(const DLTensor *t)
    int nt_dl_dtype_is(const DLTensor *t, uint8_t code, uint8_t bits)
    int64_t nt_dl_stride(const DLTensor *t, int32_t axis)
    int nt_dl_is_contiguous(const DLTensor *t)
    int64_t nt_dl_offset(const DLTensor *t, const int64_t *index)
    void *nt_dl_ptr(const DLTensor *t, const int64_t *index)
    int nt_dl_next(const DLTensor *t, int64_t *index)
