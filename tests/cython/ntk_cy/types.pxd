# Typedefs shared by the kernels: a .pxd-only module, so the typedef
# resolver must find it through its package, and its chains lead to numpy.
cimport numpy as cnp

ctypedef cnp.float64_t real_t
ctypedef real_t REAL
ctypedef long long index_t
ctypedef cnp.int32_t weight_t
