"""rebind() at the limits of its guards: the retry limit of a rebind
overtaken by other rebinds while it prepares the values following its
array (life/commit.c prepare_current, REBIND_RETRIES), and exporters that rebind
or raise while the rebound buffer is exported (ntexport.Buffer.on_get).
On both engines."""

import numpy as np
import pytest

import numthunk as nt

from thunks import bind

pytestmark = pytest.mark.guards

LIMIT = 100                     # life/commit.c REBIND_RETRIES: prepares again at most this often
PLZ = "int64_t (const int64_t *x, int64_t k, size_t n)"


def _overtaken(cfn, ntexport, engine, times):
    """rebind x to a buffer whose export (each preparation of n = size(x)
    reads it) rebinds k, `times` times in all after the conversion of x
    itself: the rebind of x is overtaken `times` times."""
    a = np.arange(3, dtype=np.int64)
    raw = np.arange(5, dtype=np.int64)
    buf = ntexport.Buffer(raw, "q", 8, (5,))
    t = bind(engine, cfn("f_l_plz", PLZ), a, 1, nt.size(a))
    state = {"exports": 0, "left": None, "k": 1}

    def on_get():
        state["exports"] += 1
        if state["left"] is not None and state["exports"] > 1 and state["left"] > 0:
            state["left"] -= 1
            state["k"] += 1
            t.rebind("k", state["k"])

    buf.on_get = on_get
    state["left"] = times
    try:
        t.rebind("x", buf)
        error = None
    except RuntimeError as exc:
        error = exc
    finally:
        buf.on_get = None
    return t, raw, state, error


@pytest.mark.parametrize("times", [0, 1, LIMIT - 1, LIMIT])
def test_a_rebind_overtaken_up_to_the_limit_completes(cfn, ntexport, engine, times):
    t, raw, state, error = _overtaken(cfn, ntexport, engine, times)
    assert error is None
    assert state["left"] == 0
    assert state["exports"] == times + 2         # the conversion, then every preparation
    assert t.bindings[1] == state["k"] == 1 + times   # each inner rebind is kept
    assert t() == raw.sum() * state["k"]         # n follows x: all five elements
    t.release()


@pytest.mark.parametrize("times", [LIMIT + 1, LIMIT + 2])
def test_a_rebind_overtaken_past_the_limit_is_refused_saying_how_often(cfn, ntexport, engine,
                                                                       times):
    t, raw, state, error = _overtaken(cfn, ntexport, engine, times)
    assert isinstance(error, RuntimeError)
    assert str(error) == ("rebind() was overtaken by other rebinds of this thunk "
                          f"{LIMIT + 1} times in a row (it prepares again at most "
                          f"{LIMIT} times)")
    assert state["exports"] == LIMIT + 2         # the conversion and LIMIT + 1 preparations
    assert state["left"] == times - LIMIT - 1
    assert t.bindings[0] is not None and type(t.bindings[0]) is np.ndarray   # x unchanged
    assert t.bindings[1] == state["k"]           # the rebinds that overtook it are kept
    assert t() == 3 * state["k"]                 # a = 0, 1, 2 and its own size
    t.release()


def test_an_export_that_raises_while_followers_are_prepared_leaves_the_thunk(cfn, ntexport,
                                                                             engine):
    """The buffer exports once for its conversion, then raises when the
    size that follows it is prepared: the rebind is refused naming the
    size's parameter and the exception, and the thunk keeps its old
    bindings and holds no export."""
    a = np.arange(3, dtype=np.int64)
    raw = np.arange(5, dtype=np.int64)
    buf = ntexport.Buffer(raw, "q", 8, (5,))
    t = bind(engine, cfn("f_l_plz", PLZ), a, 2, nt.size(a))
    calls = []

    def on_get():
        calls.append(1)
        if len(calls) == 2:
            raise KeyError("second export")

    buf.on_get = on_get
    with pytest.raises(TypeError, match=r"^argument 3 \(n: size_t\): ntexport.Buffer .*"
                                        r"KeyError: 'second export'$"):
        t.rebind("x", buf)
    buf.on_get = None
    assert len(calls) == 2
    assert buf.exports == 0
    assert t.bindings[0] is a
    assert t() == 2 * 3
    t.rebind("x", buf)                            # without the hook it binds
    assert t() == 2 * raw.sum()
    assert buf.exports == 1
    t.release()                                   # teardown gives every view back
    assert buf.exports == 0


def test_an_export_that_releases_the_thunk_refuses_the_rebind(cfn, ntexport, engine):
    a = np.arange(3, dtype=np.int64)
    buf = ntexport.Buffer(np.arange(5, dtype=np.int64), "q", 8, (5,))
    t = bind(engine, cfn("f_l_plz", PLZ), a, 2, nt.size(a))
    calls = []

    def on_get():
        calls.append(1)
        if len(calls) == 2:
            t.release()

    buf.on_get = on_get
    with pytest.raises(ValueError, match="released while rebind"):
        t.rebind("x", buf)
    buf.on_get = None
    assert t.released
    assert buf.exports == 0


def test_values_replaced_by_many_rebinds_are_all_kept_until_reclaim(cfn, engine):
    """life/commit.c prepare_followers makes room for what a rebind retires
    (the array, its size, a dependency) before it commits; the retired
    list grows past each capacity it had. Every replaced array stays
    alive until reclaim(), and no longer."""
    import weakref
    first = np.arange(1.0)
    t = bind(engine, cfn("f_d_pi", "double (const double *x, int n)"), first, nt.size(first))
    del first
    t.rebind("x", np.arange(2.0))
    old = []
    for k in range(3, 300):
        a = np.arange(float(k))
        old.append(weakref.ref(t.bindings[0]))
        t.rebind("x", a)
        del a
        assert t() == k * (k - 1) / 2
        if k in (3, 4, 5, 8, 9, 16, 17, 64, 65, 128, 129, 299):
            assert all(r() is not None for r in old), k
    t.reclaim()
    assert all(r() is None for r in old)
    assert t() == 299 * 298 / 2
    t.release()
