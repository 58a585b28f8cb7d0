# cython: language_level=3
"""The generate_options kernel from the seed: a typed-memoryview core and the
pointer-API wrapper (raw pointers plus Py_ssize_t dims) written so ctypes
could call it. The core's body is a small boosting step: for each active
stimulus, the error after adding +delta or -delta times its row within its
time window."""
cimport numpy as np
from libc.math cimport fabs

ctypedef np.int8_t INT8
ctypedef np.int64_t INT64
ctypedef np.float64_t FLOAT64


cdef api void _generate_options(
        FLOAT64 [:] y_error,
        FLOAT64 [:,:] x,
        FLOAT64 [:] x_pads,
        INT8 [:] x_active,
        INT64 [:,:] indexes,
        long i_start,
        INT64 [:] i_start_by_x,
        INT64 [:] i_stop_by_x,
        int error,
        double delta,
        FLOAT64 [:,:] new_error,
        INT8 [:,:] new_sign,
    ) noexcept nogil:
    cdef:
        size_t n_stims = new_error.shape[0]
        size_t i_stim
        FLOAT64 [:] x_stim
        Py_ssize_t seg, t, tt
        double d, e_pos, e_neg, yp, yn

    for i_stim in range(n_stims):
        new_sign[i_stim, 0] = 0
        new_sign[i_stim, 1] = 0
        if x_active[i_stim] == 0:
            new_error[i_stim, 0] = -1
            new_error[i_stim, 1] = -1
            continue
        x_stim = x[i_stim]
        e_pos = 0
        e_neg = 0
        for seg in range(indexes.shape[0]):
            for t in range(indexes[seg, 0], indexes[seg, 1]):
                tt = t - i_start
                if tt < i_start_by_x[i_stim] or tt >= i_stop_by_x[i_stim]:
                    d = 0
                else:
                    d = delta * x_stim[tt] * x_pads[i_stim]
                yp = y_error[t] - d
                yn = y_error[t] + d
                if error == 1:
                    e_pos += fabs(yp)
                    e_neg += fabs(yn)
                else:
                    e_pos += yp * yp
                    e_neg += yn * yn
        new_error[i_stim, 0] = e_pos
        new_error[i_stim, 1] = e_neg
        new_sign[i_stim, 0] = 1
        new_sign[i_stim, 1] = -1


cdef api void generate_options(
        FLOAT64* y_error_ptr,
        FLOAT64* x_ptr,
        FLOAT64* x_pads_ptr,
        INT8* x_active_ptr,
        INT64* indexes_ptr,
        long i_start,
        INT64* i_start_by_x_ptr,
        INT64* i_stop_by_x_ptr,
        int error,
        double delta,
        FLOAT64* new_error_ptr,
        INT8* new_sign_ptr,
        Py_ssize_t y_error_len,
        Py_ssize_t x_dim0, Py_ssize_t x_dim1,
        Py_ssize_t x_pads_len,
        Py_ssize_t x_active_len,
        Py_ssize_t indexes_dim0, Py_ssize_t indexes_dim1,
        Py_ssize_t i_start_by_x_len,
        Py_ssize_t i_stop_by_x_len,
        Py_ssize_t new_error_dim0, Py_ssize_t new_error_dim1,
        Py_ssize_t new_sign_dim0, Py_ssize_t new_sign_dim1
    ):
    # Casting a pointer to a memoryview makes a Python object: this wrapper
    # needs the GIL.
    cdef:
        FLOAT64 [:] y_error = <FLOAT64[:y_error_len]> y_error_ptr
        FLOAT64 [:,:] x = <FLOAT64[:x_dim0, :x_dim1]> x_ptr
        FLOAT64 [:] x_pads = <FLOAT64[:x_pads_len]> x_pads_ptr
        INT8 [:] x_active = <INT8[:x_active_len]> x_active_ptr
        INT64 [:,:] indexes = <INT64[:indexes_dim0, :indexes_dim1]> indexes_ptr
        INT64 [:] i_start_by_x = <INT64[:i_start_by_x_len]> i_start_by_x_ptr
        INT64 [:] i_stop_by_x = <INT64[:i_stop_by_x_len]> i_stop_by_x_ptr
        FLOAT64 [:,:] new_error = <FLOAT64[:new_error_dim0, :new_error_dim1]> new_error_ptr
        INT8 [:,:] new_sign = <INT8[:new_sign_dim0, :new_sign_dim1]> new_sign_ptr

    _generate_options(y_error, x, x_pads, x_active, indexes, i_start, i_start_by_x,
                      i_stop_by_x, error, delta, new_error, new_sign)
