/*
 * Reference kernels shipped in the extension: the demo (`python -m
 * numthunk`) and the benchmarks need a real C target and a C caller even
 * where Numba is not installed.
 *
 * Place in the pipeline: python, the boundary: C functions the module exports
 * for the demo and benchmarks, beside the pipeline.
 */
#include "python/pyapi.h"

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
NT_NOINLINE double nt_kernel_call_loop(double (*fn)(void), long count)
{
    double (*volatile f)(void) = fn;
    double s = 0;
    for (long i = 0; i < count; i++)
        s += f();
    return s;
}

/* The same loop calling sum(x, n) directly: the baseline. */
NT_NOINLINE double nt_kernel_direct_loop(double (*fn)(const double *, int), const double *x, int n,
                                         long count)
{
    double (*volatile f)(const double *, int) = fn;
    double s = 0;
    for (long i = 0; i < count; i++)
        s += f(x, n);
    return s;
}

/* 8 ints and 10 doubles: with all bound, two ints and two doubles travel
   on the stack (SysV: 6 integer and 8 SSE registers). */
double nt_kernel_many(int a1, int a2, int a3, int a4, int a5, int a6, int a7, int a8, double d1,
                      double d2, double d3, double d4, double d5, double d6, double d7, double d8,
                      double d9, double d10)
{
    return a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + d1 + d2 + d3 + d4 + d5 + d6 + d7 + d8 + d9 + d10;
}

typedef double (*many_fn)(int, int, int, int, int, int, int, int, double, double, double, double,
                          double, double, double, double, double, double);

NT_NOINLINE double nt_kernel_direct_many_loop(many_fn fn, long count)
{
    many_fn volatile f = fn;
    double s = 0;
    for (long i = 0; i < count; i++)
        s += f(1, 2, 3, 4, 5, 6, 7, 8, 0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5);
    return s;
}

PyObject *nt_kernel_addresses(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return Py_BuildValue(
        "{s:N,s:N,s:N,s:N,s:N}", "sum", PyLong_FromVoidPtr((void *)(uintptr_t)nt_kernel_sum),
        "many", PyLong_FromVoidPtr((void *)(uintptr_t)nt_kernel_many), "direct_many_loop",
        PyLong_FromVoidPtr((void *)(uintptr_t)nt_kernel_direct_many_loop), "call_loop",
        PyLong_FromVoidPtr((void *)(uintptr_t)nt_kernel_call_loop), "direct_loop",
        PyLong_FromVoidPtr((void *)(uintptr_t)nt_kernel_direct_loop));
}
