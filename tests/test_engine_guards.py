"""Entries across the native engine's stub blocks (engine/native.c take_slot: a
block of BLOCK_STUBS = 512 stubs, each reaching its slot at a fixed
distance; a new block when the current one is used up): in a fresh process
the thunks on either side of each block edge (the 1st, 511th, 512th,
513th, 1024th, 1025th ...) are called through their addresses from C and
return their own bound value, also after the thunks of the first block are
released and new ones made. On both engines (libffi has no blocks: the
same calls, for comparison)."""

import pytest

from conftest import ENGINES
from thunks import run_py

pytestmark = pytest.mark.guards

CODE = """
import ctypes, numthunk as nt
lib = ctypes.CDLL({path!r})
fn = nt.Function(ctypes.cast(lib.f_d_d, ctypes.c_void_p).value, "double (double)")
call = ctypes.CFUNCTYPE(ctypes.c_double)
thunks = [nt.bind(fn, float(i), engine={engine!r}) for i in range(1600)]
assert all(t.engine == thunks[0].engine for t in thunks)
edges = sorted({{k for e in (512, 1024, 1536) for k in (e - 2, e - 1, e, e + 1)}} | {{0, 1599}})
for i in edges:
    assert call(thunks[i].address)() == float(i), i
for i, t in enumerate(thunks):
    assert call(t.address)() == float(i), i
addresses = [t.address for t in thunks]
assert len(set(addresses)) == len(addresses)
for t in thunks[:512]:
    t.release()
more = [nt.bind(fn, float(-i), engine={engine!r}) for i in range(1, 600)]
assert not set(t.address for t in more) & set(addresses[:512])    # quarantined
for i, t in enumerate(more, 1):
    assert call(t.address)() == float(-i), i
for i, t in enumerate(thunks[512:], 512):
    assert call(t.address)() == float(i), i
print("ok", thunks[-1].engine)
"""


@pytest.mark.parametrize("engine", ENGINES)
def test_thunks_on_either_side_of_each_stub_block_edge_call_their_own_values(fixture_path,
                                                                            engine):
    out = run_py(CODE.format(path=fixture_path, engine=engine))
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("ok ")
