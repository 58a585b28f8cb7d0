/*
 * Reference kernels shipped in the extension: the demo (`python -m
 * numthunk`) and the benchmarks need a real C target and a C caller even
 * where Numba is not installed.
 */
#include "pyapi.h"

/* The seed kernel: double sum(const double *x, int n). */
double nt_kernel_sum(const double *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += x[i];
    return s;
}

/* A C caller: calls fn() `count` times and returns the sum of the results,
   the engine figure without any Python or Numba in the loop. noinline and
   the volatile pointer keep the compiler from hoisting the call. */
__attribute__((noinline)) double nt_kernel_call_loop(double (*fn)(void), long count)
{
    double (*volatile f)(void) = fn;
    double s = 0;
    for (long i = 0; i < count; i++)
        s += f();
    return s;
}

/* The same loop calling sum(x, n) directly: the baseline. */
__attribute__((noinline)) double nt_kernel_direct_loop(double (*fn)(const double *, int),
                                                       const double *x, int n, long count)
{
    double (*volatile f)(const double *, int) = fn;
    double s = 0;
    for (long i = 0; i < count; i++)
        s += f(x, n);
    return s;
}

PyObject *nt_kernel_addresses(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return Py_BuildValue("{s:N,s:N,s:N}",
                         "sum", PyLong_FromVoidPtr((void *)(uintptr_t)nt_kernel_sum),
                         "call_loop", PyLong_FromVoidPtr((void *)(uintptr_t)nt_kernel_call_loop),
                         "direct_loop", PyLong_FromVoidPtr((void *)(uintptr_t)nt_kernel_direct_loop));
}
