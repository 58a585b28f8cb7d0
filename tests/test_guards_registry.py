"""The registry of thunks by address (registry.c: open addressing, at most
half full, 64 slots first, doubled when the next entry would pass half;
a freed thunk's address kept as a grave while the quarantine holds its
entry; removal by backward shift) across its growth edges, in a fresh
process so that its count is the test's own: after the 31st, 32nd, 33rd
... entry (and each power of two around them) every thunk is found by its
address, and after frees in three orders the rest still are and the freed
are refused as collected. A thunk is found when binding its raw address to
a function pointer is refused for being a released thunk (released thunks
stay in the registry until freed), a grave when it is refused as a
collected thunk's. On both engines."""

import pytest

from conftest import ENGINES
from thunks import run_py

PRELUDE = """
import ctypes, numthunk as nt
lib = ctypes.CDLL({path!r})
fn = nt.Function(ctypes.cast(lib.f_d_d, ctypes.c_void_p).value, "double (double)")
solver = nt.Function(ctypes.cast(lib.f_d_Fddi, ctypes.c_void_p).value,
                     "double (double (*f)(double), double a, double b, int n)")

def state(t):
    try:
        nt.bind(solver, nt.address(t), 0.0, 1.0, 1, engine={engine!r}).release()
    except ValueError as exc:
        if "is a released thunk" in str(exc):
            return "released"
        assert "of a thunk that was released and collected" in str(exc), exc
        return "collected"
    return None

def found(t):
    return state(t) == "released"
"""

CODE = PRELUDE + """
thunks, addresses = [], []
edges = set()
for p in range(5, 12):
    edges |= {{(1 << p) // 2 - 1, (1 << p) // 2, (1 << p) // 2 + 1}}
for k in range(1, 1100):
    t = nt.bind(fn, nt.ARG, engine={engine!r})
    addresses.append(t.address)
    t.release()                      # stays in the registry, and is refused when bound
    thunks.append(t)
    if k in edges:
        assert all(found(a) for a in addresses), k
del t
print("grown", len(thunks))
order = {order!r}
n = len(thunks)
if order == "oldest":
    gone = list(range(0, n, 2))
elif order == "newest":
    gone = list(range(n - 1, -1, -3))
else:
    gone = [(i * 7919) % n for i in range(n // 2)]
    gone = list(dict.fromkeys(gone))
for i in gone:
    thunks[i] = None                 # freed: a grave while its entry is in the quarantine
gone = set(gone)
for i, a in enumerate(addresses):
    assert state(a) == ("collected" if i in gone else "released"), (i, a)
print("removed", len(gone))
"""


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("order", ["oldest", "newest", "scattered"])
def test_every_thunk_is_found_across_the_registry_s_growth_and_removals(fixture_path, engine,
                                                                        order):
    out = run_py(CODE.format(path=fixture_path, engine=engine, order=order))
    assert out.returncode == 0, out.stderr[-3000:]
    assert "grown 1099" in out.stdout
    assert "removed" in out.stdout


CHURN = PRELUDE + """
import random
from numthunk import _core
rng = random.Random(20261202)
checks = 0
for round in range(150):
    # made live (distinct addresses), then released: with a quarantine of
    # one release, each address but the last is free to serve again, and
    # a freed thunk's entry is removed at once (no grave)
    thunks = [nt.bind(fn, nt.ARG, engine={engine!r}) for k in range(31)]
    addresses = [t.address for t in thunks]
    for t in thunks:
        t.release()
    del t
    order = list(range(31))
    rng.shuffle(order)
    for j, i in enumerate(order):
        thunks[i] = None             # freed: leaves the registry by backward shift
        for k in order[j + 1:]:
            assert _core._registry_find(addresses[k]) is thunks[k], (round, j, k)
            checks += 1
        for k in order[:j + 1]:
            # the last released is the one whose entry the quarantine holds
            want = "collected" if k == 30 else None
            assert _core._registry_find(addresses[k]) == want, (round, j, k)
print("checks", checks)
"""


@pytest.mark.parametrize("engine", ENGINES)
def test_every_removal_keeps_the_rest_found_in_a_small_table(fixture_path, engine):
    """In a fresh process the table stays at its first 64 slots: 31 thunks
    fill it near half, so runs of neighbours are long and some wrap past
    the last slot to the first; the thunks go one by one in a random
    order, and after each removal every thunk left is still found (150
    rounds, new addresses each round)."""
    out = run_py(CHURN.format(path=fixture_path, engine=engine), NUMTHUNK_QUARANTINE="1")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "checks 69750" in out.stdout
