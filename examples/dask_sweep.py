"""A parameter sweep on Dask: 1,000 integrals, one thunk each.

The thunks are built here, in the driver, from one compiled kernel and
1,000 parameter arrays (``nt.bind`` takes microseconds, nothing is
compiled), and shipped to the workers. A thunk pickles as a recipe: the
kernel by name (the @cfunc ``sweep_kernels.damped``: each worker imports
the module, and Numba compiles it there once) and the parameters as values
(each worker binds its own copy; live binding holds within one process).
The workers integrate with ``scipy.integrate.quad`` and the result equals
the serial run, bit for bit.

    python examples/dask_sweep.py      # needs dask[distributed]
"""

import logging
import os
import time

import numpy as np
from sweep_kernels import damped, integrate_all

import numthunk as nt

N, CHUNK = 1000, 50


def main():
    from dask.distributed import Client, LocalCluster

    rng = np.random.default_rng(0)
    params = rng.uniform([0.5, 0.1, 0.5, -1.0], [2.0, 1.5, 6.0, 1.0], size=(N, 4))
    thunks = [nt.bind(damped, nt.ARG, p, nt.size(p)) for p in params]

    t0 = time.perf_counter()
    serial = integrate_all(thunks)
    t_serial = time.perf_counter() - t0

    # The workers are new processes: they must find sweep_kernels (and
    # numthunk) on their path.
    here = os.path.dirname(os.path.abspath(__file__))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [here] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None, silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as client:
        chunks = [thunks[i:i + CHUNK] for i in range(0, N, CHUNK)]
        client.gather(client.map(integrate_all, chunks[:2], pure=False))   # warm up
        t0 = time.perf_counter()
        futures = client.map(integrate_all, chunks, pure=False)
        parallel = [x for chunk in client.gather(futures) for x in chunk]
        t_parallel = time.perf_counter() - t0

    assert parallel == serial
    print(f"{N} integrals: serial {t_serial:.2f} s, 2 Dask workers {t_parallel:.2f} s "
          "(after warm-up)")
    print(f"first: {serial[0]:.12f}, last: {serial[-1]:.12f}")
    print("the workers' results are equal to the serial run")


if __name__ == "__main__":
    main()
