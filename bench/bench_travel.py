"""Thunks that travel: a parameter sweep on 2 worker processes against the
serial run, and what a thunk costs to pickle and unpickle.

    python bench/bench_travel.py [--quick]

Sweep: 1,000 integrals with scipy.integrate.quad, one thunk each, built in
the driver over the @cfunc kernels of examples/sweep_kernels.py: ``damped``
(a few operations per point: quad's own overhead dominates) and ``series``
(a 200-term sum per point). Serial in this process, then 2 worker
processes of multiprocessing (spawn) and of Dask's LocalCluster, 20 tasks
of 50 thunks each; pool and cluster start-up are reported apart, and the
timed run follows a warm-up (the workers have imported the kernel).
Besides the wall time, the CPU time the tasks spent, in all and in the
busiest process: on a shared machine the wall time measures the
neighbours, the busiest process's CPU time what the sweep would take with
a free core per worker.

Unpickling: ``pickle.loads`` of one thunk (a from_library target and a
@cfunc target, bound to a 4-element array and its size), with the target
resolved each time (no other thunk on it alive in the process) and with it
shared (one alive), next to ``nt.bind`` of the same values; and the first
unpickling in a fresh interpreter (loading the library, or importing the
kernel module and compiling the @cfunc), timed inside that interpreter.
"""

import logging
import multiprocessing
import os
import pickle
import statistics
import subprocess
import sys
import sysconfig
import time

import numpy as np

import numthunk as nt

QUICK = "--quick" in sys.argv
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXAMPLES = os.path.join(ROOT, "examples")
sys.path[:0] = [EXAMPLES, HERE]
import sweep_kernels as k  # noqa: E402
import travel_tasks  # noqa: E402

N, CHUNK, TERMS = 1000, 50, 200
POLY = "double (double x, const double *p, int n)"


def best(fn, number, repeat=5):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t0) / number)
    return min(times), statistics.median(times)


def fixture_library():
    """The test fixture library (f_d_dpi: a polynomial integrand), built here."""
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC").split()[0] or "cc"
    out_dir = os.path.join(HERE, "_build")
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, "fixture.so")
    subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", out,
                    os.path.join(ROOT, "tests", "fixtures", "fixture.c")], check=True)
    return out


def sweeps():
    rng = np.random.default_rng(0)
    params = rng.uniform([0.5, 0.1, 0.5, -1.0], [2.0, 1.5, 6.0, 1.0], size=(N, 4))
    heavy = np.hstack([params, np.full((N, 1), TERMS)])
    return {
        "damped": [nt.bind(k.damped, nt.ARG, p, nt.size(p)) for p in params],
        f"series ({TERMS} terms)": [nt.bind(k.series, nt.ARG, p, nt.size(p)) for p in heavy],
    }


def run_sweep(thunks, mapper):
    """(wall seconds, CPU seconds of all tasks, CPU seconds of the busiest
    process, results)."""
    chunks = [thunks[i:i + CHUNK] for i in range(0, len(thunks), CHUNK)]
    t0 = time.perf_counter()
    answers = mapper(travel_tasks.integrate_timed, chunks)
    wall = time.perf_counter() - t0
    per_pid = {}
    for pid, cpu, _out in answers:
        per_pid[pid] = per_pid.get(pid, 0.0) + cpu
    out = [x for _pid, _cpu, chunk in answers for x in chunk]
    return wall, sum(per_pid.values()), max(per_pid.values()), out


def bench_sweep():
    work = sweeps()
    rows = {}
    serial = {}
    for name, thunks in work.items():
        *row, serial[name] = run_sweep(thunks, lambda f, cs: [f(c) for c in cs])
        rows[name] = {"serial": row}

    os.environ["PYTHONPATH"] = os.pathsep.join([ROOT, EXAMPLES, HERE] + (
        [os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
    starts = {}
    t0 = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        pool.map(travel_tasks.integrate_timed, [work["damped"][:2]] * 2)     # warm-up
        starts["multiprocessing Pool(2, spawn)"] = time.perf_counter() - t0
        for name, thunks in work.items():
            *row, out = run_sweep(thunks, lambda f, cs: pool.map(f, cs, chunksize=1))
            assert out == serial[name]
            rows[name]["Pool(2, spawn)"] = row

    from dask.distributed import Client, LocalCluster
    t0 = time.perf_counter()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None, silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as client:
        client.gather(client.map(travel_tasks.integrate_timed, [work["damped"][:2]] * 2,
                                 pure=False))
        starts["Dask LocalCluster(2 workers)"] = time.perf_counter() - t0

        def dask_map(f, chunks):
            return client.gather(client.map(f, chunks, pure=False))

        for name, thunks in work.items():
            *row, out = run_sweep(thunks, dask_map)
            assert out == serial[name]
            rows[name]["Dask(2 workers)"] = row

    print(f"\nSweep: {N} integrals (scipy.integrate.quad), {N // CHUNK} tasks of {CHUNK} "
          "thunks; results equal to the serial run. wall: elapsed; cpu: CPU time of the "
          "tasks, all processes; busiest: CPU time of the busiest process (the wall time "
          "with a free core per worker)")
    for name, r in rows.items():
        print(f"  {name}")
        for how, (wall, cpu, busiest) in r.items():
            print(f"    {how:<18} wall {wall:7.3f} s   cpu {cpu:7.3f} s   "
                  f"busiest {busiest:7.3f} s")
    for what, sec in starts.items():
        print(f"  start-up and warm-up of {what}: {sec:.2f} s")


FRESH = """
import pickle, sys, time
t0 = time.perf_counter()
import numthunk
t1 = time.perf_counter()
t = pickle.loads(open(sys.argv[1], "rb").read())
t2 = time.perf_counter()
t(0.5)
print(f"{(t1 - t0) * 1e3:.1f} {(t2 - t1) * 1e3:.1f}")
"""


def bench_unpickle(library):
    p = np.array([1.0, 0.5, 3.0, 0.1])
    targets = {
        "from_library": nt.Function.from_library(library, "f_d_dpi", POLY),
        "@cfunc": k.damped,
    }
    number = 2000 if QUICK else 10000
    print(f"\nPickling one thunk (double (double) over a 4-element array and its size); "
          f"per operation, best and median of 5 x {number}")
    print(f"  {'':<40}  {'best':>9}  {'median':>9}")

    def row(label, fn):
        b, m = best(fn, number)
        print(f"  {label:<40}  {b * 1e6:6.2f} us  {m * 1e6:6.2f} us")

    for name, target in targets.items():
        t = nt.bind(target, nt.ARG, p, nt.size(p))
        blob = pickle.dumps(t)
        # each row() runs its lambda before the loop goes on
        row(f"{name}: nt.bind", lambda: nt.bind(target, nt.ARG, p, nt.size(p)))  # noqa: B023
        row(f"{name}: pickle.dumps", lambda: pickle.dumps(t))  # noqa: B023
        row(f"{name}: pickle.loads, target resolved", lambda: pickle.loads(blob))  # noqa: B023
        keep = pickle.loads(blob)       # one alive: the next ones share its target
        row(f"{name}: pickle.loads, target shared", lambda: pickle.loads(blob))  # noqa: B023
        del keep
        row(f"{name}: pickle.loads of the array alone",
            lambda b=pickle.dumps(p): pickle.loads(b))  # noqa: B008 (pickled once)

    print("\nFirst unpickling in a fresh interpreter (import numthunk | pickle.loads), "
          "median of 3")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([ROOT, EXAMPLES])
    for name, target in targets.items():
        path = os.path.join(HERE, "_build", f"travel-{name.strip('@')}.pickle")
        with open(path, "wb") as f:
            f.write(pickle.dumps(nt.bind(target, nt.ARG, p, nt.size(p))))
        runs = []
        for _ in range(3):
            out = subprocess.run([sys.executable, "-c", FRESH, path], env=env, check=True,
                                 capture_output=True, text=True).stdout.split()
            runs.append(tuple(map(float, out)))
        imp = statistics.median(r[0] for r in runs)
        load = statistics.median(r[1] for r in runs)
        print(f"  {name:<14} import numthunk {imp:7.1f} ms | pickle.loads {load:7.1f} ms")


def main():
    import dask
    import numba
    import scipy
    print(f"numthunk {nt.__version__}, numpy {np.__version__}, numba {numba.__version__}, "
          f"scipy {scipy.__version__}, dask {dask.__version__}; {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}")
    bench_unpickle(fixture_library())
    bench_sweep()


if __name__ == "__main__":
    main()
