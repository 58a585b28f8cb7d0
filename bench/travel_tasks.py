"""The task bench_travel.py ships to worker processes (importable by name,
as tasks and @cfuncs must be)."""

import os
import time

from sweep_kernels import integrate_all


def integrate_timed(thunks):
    """(worker pid, CPU seconds spent here, results)."""
    c0 = time.process_time()
    out = integrate_all(thunks)
    return os.getpid(), time.process_time() - c0, out
