"""The registry of thunks by address (life/registry.c: open addressing, at most
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

pytestmark = pytest.mark.guards

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


# A thunk alive (not released) is found by its address and held: spelled as
# an int with signature= (a target) and as nt.address(int) (a function
# value), the thunk made over it lists it as its dependency, itself and no
# other. Released thunks still alive are refused.
HELD = PRELUDE + """
# thunks of double (double) that tell themselves apart: hypot(k, x) is k at 0
hyp = nt.Function.from_library("libm.so.6", "hypot", "double (double, double)")

def held(t):
    by_int = nt.bind(t.address, nt.ARG, signature="double (double)", engine={engine!r})
    by_value = nt.bind(solver, nt.address(t.address), 0.0, 1.0, 1, engine={engine!r})
    return by_int.dependencies == (t,) and by_value.dependencies == (t,)
"""

MIXED = HELD + """
import random
rng = random.Random({seed})
live, released = {{}}, {{}}             # index -> thunk (released: and its address)
made = 0

def check(where):
    for i, t in live.items():
        assert held(t), (where, "live", i)
    for i, (t, address) in released.items():
        assert found(address), (where, "released", i)

def make():
    global made
    t = nt.bind(hyp, float(made), nt.ARG, engine={engine!r})
    roll = rng.random()
    if roll < 0.5:
        live[made] = t
    elif roll < 0.75:
        released[made] = (t, t.address)
        t.release()
    # else: freed at once, an entry added and removed
    made += 1

# growth: every power of two of entries passed, checked on either side
edges = {{n for p in range(5, 12) for n in ((1 << p) // 2 - 1, (1 << p) // 2 + 1)}}
while len(live) + len(released) < 1100:
    make()
    if len(live) + len(released) in edges:
        check(("grown", len(live) + len(released)))
# removal in the order asked for, checked after every tenth; with new
# thunks made meanwhile, which fill the holes that removals left
order = {order!r}
keys = sorted(set(live) | set(released))
if order == "newest":
    keys.reverse()
elif order == "scattered":
    rng.shuffle(keys)
for k, i in enumerate(keys):
    (live if i in live else released).pop(i)
    if k % 3 == 0:
        make()
    if k % 110 == 0:
        check(("removed", k))
check("end")
print("checked", len(live), len(released))
"""


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("order", ["oldest", "newest", "scattered"])
def test_live_thunks_are_found_and_held_by_any_address_spelling(fixture_path, engine, order):
    """Live and released thunks mixed, with thunks freed as soon as made:
    across the table's growth and removals in three orders (new thunks
    made meanwhile), every live thunk is the one its address finds, as an
    int with signature= and as nt.address(int), and every released one
    still alive is refused."""
    out = run_py(MIXED.format(path=fixture_path, engine=engine, order=order, seed=35))
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("checked "), out.stdout


# An address that left the quarantine serves a new thunk while the released
# thunk that had it is still alive: the new one takes its entry (found and
# held, not refused as the released one was), and freeing the old one
# afterwards, in any order, leaves the new one's entry alone. Between the
# release and the reuse the table grows (2000 thunks kept), so the entries
# replaced are ones that moved.
REUSED = HELD + """
import gc, random
rng = random.Random(35)
K = 50
q = nt.engine_info()["config"]["quarantine"]
olds = [nt.bind(hyp, float(i), nt.ARG, engine={engine!r}) for i in range(K)]
addresses = [t.address for t in olds]
for t in olds:
    t.release()
assert all(found(a) for a in addresses[:3])           # three releases: counted below
fodder = [nt.bind(fn, nt.ARG, engine={engine!r}) for _ in range(K)]
grown = [nt.bind(hyp, -float(i), nt.ARG, engine={engine!r}) for i in range(2000)]
for _ in range(q - K - 3):
    nt.bind(fn, nt.ARG, engine={engine!r}).release()
# each release from here lets one old address out, in release order, and
# the next thunk made takes it
new = []
for i, t in enumerate(fodder):
    t.release()
    new.append(nt.bind(hyp, 100.0 + i, nt.ARG, engine={engine!r}))
# (libffi's allocator gives back the closure freed last, nearly always)
reused = sum(t.address == a for t, a in zip(new, addresses))
assert reused == K or ({engine!r} == "ffi" and reused >= K - 5), reused
assert all(held(t) for t in new)
order = list(range(K))
rng.shuffle(order)
for k, i in enumerate(order):
    olds[i] = None                                     # freed now
    gc.collect()
    if k % 5 == 0:
        assert all(held(t) for t in new), k
assert all(held(t) for t in new) and all(held(t) for t in grown[::50])
call = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)
assert [call(t.address)(0.0) for t in new] == [100.0 + i for i in range(K)]
print("reused", reused)
"""


@pytest.mark.parametrize("engine", ENGINES)
def test_a_reused_address_finds_its_new_thunk_while_the_old_one_lives(fixture_path, engine):
    out = run_py(REUSED.format(path=fixture_path, engine=engine))
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("reused "), out.stdout
