/*
 * numthunk/dlpack.h: DLPack tensor descriptors for C and Cython kernels.
 *
 * A kernel declared `double f(const DLTensor *t)` receives, through a
 * numthunk thunk, a descriptor of the whole array that was bound: data
 * pointer, device, dtype, shape and strides. The declarations below are
 * ABI-identical to DLPack 1.1's dlpack.h (they do not include it); when
 * dlpack.h was included first its definitions are used, and including it
 * after this header is harmless (both use DLPack's include guard).
 *
 * What numthunk hands a kernel: device {kDLCPU, 0}, byte_offset 0, lanes 1,
 * strides never NULL and counted in elements (NOT bytes), data aligned for
 * the element type. Descriptors from elsewhere may have strides == NULL
 * (compact row-major) and a nonzero byte_offset: the helpers below accept
 * both.
 *
 * Helpers (static inline, no library to link):
 *   nt_dl_numel(t)              number of elements
 *   nt_dl_itemsize(t)           bytes per element
 *   nt_dl_stride(t, axis)       element stride of an axis (also when NULL)
 *   nt_dl_is_contiguous(t)      C-contiguous (row-major, no gaps)
 *   nt_dl_dtype_is(t, code, bits)
 *   nt_dl_offset(t, index)      element offset of a multi-index
 *   nt_dl_ptr(t, index)         address of an element
 *   NT_DL_AT(type, t, index)    the element itself, as an lvalue
 *   nt_dl_next(t, index)        advance a multi-index in row-major order
 */
#ifndef NUMTHUNK_DLPACK_H
#define NUMTHUNK_DLPACK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_
#define NUMTHUNK_DLPACK_DECLARES_TYPES 1

#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 1

typedef struct {
    uint32_t major;
    uint32_t minor;
} DLPackVersion;

#ifdef __cplusplus
typedef enum : int32_t {
#else
typedef enum {
#endif
    kDLCPU = 1,
    kDLCUDA = 2,
    kDLCUDAHost = 3,
    kDLOpenCL = 4,
    kDLVulkan = 7,
    kDLMetal = 8,
    kDLVPI = 9,
    kDLROCM = 10,
    kDLROCMHost = 11,
    kDLExtDev = 12,
    kDLCUDAManaged = 13,
    kDLOneAPI = 14,
    kDLWebGPU = 15,
    kDLHexagon = 16,
    kDLMAIA = 17,
    kDLTrn = 18
} DLDeviceType;

typedef struct {
    DLDeviceType device_type;
    int32_t device_id;
} DLDevice;

typedef enum {
    kDLInt = 0U,
    kDLUInt = 1U,
    kDLFloat = 2U,
    kDLOpaqueHandle = 3U,
    kDLBfloat = 4U,
    kDLComplex = 5U,
    kDLBool = 6U,
    kDLFloat8_e3m4 = 7U,
    kDLFloat8_e4m3 = 8U,
    kDLFloat8_e4m3b11fnuz = 9U,
    kDLFloat8_e4m3fn = 10U,
    kDLFloat8_e4m3fnuz = 11U,
    kDLFloat8_e5m2 = 12U,
    kDLFloat8_e5m2fnuz = 13U,
    kDLFloat8_e8m0fnu = 14U,
    kDLFloat6_e2m3fn = 15U,
    kDLFloat6_e3m2fn = 16U,
    kDLFloat4_e2m1fn = 17U
} DLDataTypeCode;

typedef struct {
    uint8_t code;      /* a DLDataTypeCode */
    uint8_t bits;      /* bits of one lane: 8, 16, 32, 64, 128 (complex) */
    uint16_t lanes;    /* 1 for scalars */
} DLDataType;

typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;        /* ndim entries */
    int64_t *strides;      /* ndim entries, in elements; NULL: compact row-major */
    uint64_t byte_offset;  /* bytes from data to the first element */
} DLTensor;

typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)

typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

#endif /* DLPACK_DLPACK_H_ */

/* The layout numthunk writes and kernels read: any difference from
   dlpack.h would be a silent misread, so the compiler checks it. */
#if defined(__cplusplus)
#define NT_DL_STATIC_ASSERT static_assert
#else
#define NT_DL_STATIC_ASSERT _Static_assert
#endif
NT_DL_STATIC_ASSERT(sizeof(DLDevice) == 8, "DLDevice is two 32-bit fields");
NT_DL_STATIC_ASSERT(sizeof(DLDataType) == 4, "DLDataType is 4 bytes");
NT_DL_STATIC_ASSERT(offsetof(DLTensor, data) == 0, "DLTensor.data");
NT_DL_STATIC_ASSERT(offsetof(DLTensor, device) == sizeof(void *), "DLTensor.device");
NT_DL_STATIC_ASSERT(offsetof(DLTensor, ndim) == sizeof(void *) + 8, "DLTensor.ndim");
NT_DL_STATIC_ASSERT(offsetof(DLTensor, dtype) == sizeof(void *) + 12, "DLTensor.dtype");
NT_DL_STATIC_ASSERT(sizeof(void *) != 8 || offsetof(DLTensor, shape) == 24, "DLTensor.shape");
NT_DL_STATIC_ASSERT(sizeof(void *) != 8 || offsetof(DLTensor, strides) == 32,
                    "DLTensor.strides");
NT_DL_STATIC_ASSERT(sizeof(void *) != 8 || offsetof(DLTensor, byte_offset) == 40,
                    "DLTensor.byte_offset");
NT_DL_STATIC_ASSERT(sizeof(void *) != 8 || sizeof(DLTensor) == 48, "DLTensor is 48 bytes on LP64");
#undef NT_DL_STATIC_ASSERT

/* ---- helpers ---------------------------------------------------------- */

/* Number of elements (1 for a 0-d tensor, 0 if any extent is 0). */
static inline int64_t nt_dl_numel(const DLTensor *t)
{
    int64_t n = 1;
    for (int32_t d = 0; d < t->ndim; d++)
        n *= t->shape[d];
    return n;
}

/* Bytes per element: bits * lanes rounded up to whole bytes. */
static inline size_t nt_dl_itemsize(const DLTensor *t)
{
    return ((size_t)t->dtype.bits * t->dtype.lanes + 7) / 8;
}

/* Whether the elements are of DLPack type (code, bits) with one lane. */
static inline int nt_dl_dtype_is(const DLTensor *t, uint8_t code, uint8_t bits)
{
    return t->dtype.code == code && t->dtype.bits == bits && t->dtype.lanes == 1;
}

/* Stride of an axis in elements; with strides == NULL, what compact
   row-major order gives. */
static inline int64_t nt_dl_stride(const DLTensor *t, int32_t axis)
{
    if (t->strides != NULL)
        return t->strides[axis];
    int64_t s = 1;
    for (int32_t d = t->ndim - 1; d > axis; d--)
        s *= t->shape[d];
    return s;
}

/* C-contiguous: row-major with no gaps. Axes of extent 1 may have any
   stride; an empty tensor is contiguous. */
static inline int nt_dl_is_contiguous(const DLTensor *t)
{
    if (t->strides == NULL)
        return 1;
    int64_t expected = 1;
    for (int32_t d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] == 0)
            return 1;
        if (t->shape[d] != 1 && t->strides[d] != expected)
            return 0;
        expected *= t->shape[d];
    }
    return 1;
}

/* Element offset (not bytes) of index[0..ndim-1] from the first element. */
static inline int64_t nt_dl_offset(const DLTensor *t, const int64_t *index)
{
    int64_t off = 0;
    for (int32_t d = 0; d < t->ndim; d++)
        off += index[d] * nt_dl_stride(t, d);
    return off;
}

/* Address of the element at index (byte_offset and strides honoured). */
static inline void *nt_dl_ptr(const DLTensor *t, const int64_t *index)
{
    return (char *)t->data + t->byte_offset
           + nt_dl_offset(t, index) * (int64_t)nt_dl_itemsize(t);
}

/* The element at index as a `type` lvalue: NT_DL_AT(double, t, idx) += 1. */
#define NT_DL_AT(type, t, index) (*(type *)nt_dl_ptr((t), (index)))

/* Advances index to the next element in row-major order. Returns 0 after
   the last element (index is then all zeros again), 1 otherwise. Start
   with all zeros, and only if nt_dl_numel(t) > 0. */
static inline int nt_dl_next(const DLTensor *t, int64_t *index)
{
    for (int32_t d = t->ndim - 1; d >= 0; d--) {
        if (++index[d] < t->shape[d])
            return 1;
        index[d] = 0;
    }
    return 0;
}

#ifdef __cplusplus
}
#endif

#endif /* NUMTHUNK_DLPACK_H */
