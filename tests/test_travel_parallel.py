"""A parameter sweep on other processes: 1,000 integrands (thunks built
here, half on a Numba @cfunc found by name, half on a C library symbol found
by name) integrated with scipy.integrate.quad by Dask workers,
multiprocessing and concurrent.futures, equal to the serial run."""

import concurrent.futures
import logging
import multiprocessing
import os

import pytest

import numthunk as nt

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(nt.__file__)))
POLY = "double (double x, const double *p, int n)"
N = 1000
CHUNK = 50


@pytest.fixture(scope="module")
def sweep(fixture_path):
    """(thunks, the serial results)."""
    import travel_kernels as k

    poly = nt.Function.from_library(fixture_path, "f_d_dpi", POLY)
    thunks = []
    for i, p in enumerate(k.parameter_sets(N)):
        target = k.damped if i % 2 == 0 else poly
        thunks.append(nt.bind(target, nt.ARG, p, nt.size(p)))
    serial = k.integrate_all(thunks)
    assert len(set(serial)) > N // 2         # the parameters matter
    return thunks, serial


@pytest.fixture
def worker_path(monkeypatch):
    """Workers started now import numthunk and travel_kernels."""
    paths = [ROOT, HERE] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))


def _check(sweep, answers):
    """answers: [(pid, [results of one chunk])] in chunk order."""
    _thunks, serial = sweep
    parallel = [x for _pid, chunk in answers for x in chunk]
    assert parallel == serial                  # exactly: the same machine code
    pids = {pid for pid, _chunk in answers}
    assert os.getpid() not in pids
    return pids


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_multiprocessing_pool(sweep, worker_path, method):
    """spawn: a fresh interpreter per worker; fork: a copy of this one."""
    import travel_kernels as k

    ctx = multiprocessing.get_context(method)
    with ctx.Pool(2) as pool:
        result = pool.map_async(k.integrate_where, k.chunks(sweep[0], CHUNK))
        answers = result.get(timeout=300)
    assert 1 <= len(_check(sweep, answers)) <= 2


def test_process_pool_executor(sweep, worker_path):
    """forkserver: the children fork from a fresh interpreter, not from this one."""
    import travel_kernels as k

    ctx = multiprocessing.get_context("forkserver")
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=ctx) as ex:
        answers = list(ex.map(k.integrate_where, k.chunks(sweep[0], CHUNK), timeout=300))
    assert 1 <= len(_check(sweep, answers)) <= 2


def test_dask_local_cluster(sweep, worker_path):
    from dask.distributed import Client, LocalCluster, wait

    import travel_kernels as k

    cluster = client = None
    try:
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                               host="127.0.0.1", dashboard_address=None,
                               silence_logs=logging.ERROR)
        client = Client(cluster, timeout=120)
        client.wait_for_workers(2, timeout=120)
        workers = set(client.run(os.getpid).values())
        futures = client.map(k.integrate_where, k.chunks(sweep[0], CHUNK), pure=False)
        done, not_done = wait(futures, timeout=300)
        assert not not_done
        answers = client.gather(futures)
        pids = _check(sweep, answers)
        assert pids <= workers and len(workers) == 2
    finally:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
