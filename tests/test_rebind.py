"""rebind(): a thunk's bound values replaced in place, its address kept.
The new value is counted and the old one given back once no call can read
it (reclaim); sizes and other derived values follow the array they were
made from, in whatever form it was bound; a rebind from inside a
conversion (an __index__ that rebinds) is not lost. On both engines.

Rebind's interplay with other features lives with them: threads in
test_threads.py, chains of thunks in test_composition.py, DLPack in
test_dlpack.py, Numba in test_numba*.py, the C API in test_capi.py, bad
keys in test_refusals.py, the limits of its guards in test_rebind_guards.py."""

import ctypes
import gc
import os
import subprocess
import sys
import weakref

import numpy as np
import pytest

import numthunk as nt

from thunks import MIXED, SUM, Index, bind, count_is, kept, sum_fn


def test_rebind_counts_the_new_value_and_gives_back_the_old():
    f = kept(nt.Function(sum_fn(), "double (const double *x, int n)"))
    a, b = kept(np.arange(3.0), np.arange(4.0))
    gc.collect()
    ra, rb = sys.getrefcount(a), sys.getrefcount(b)
    t = nt.bind(f, a, 3)
    t.rebind(0, b)
    assert t() == 3.0                              # b[:3] summed
    assert sys.getrefcount(b) >= rb + 1
    # a stays pinned while a racing caller may still read the old values
    t.release()
    ok_a, got_a = count_is(a, ra)
    ok_b, got_b = count_is(b, rb)
    gc.collect()
    assert (ok_a, ok_b) == (True, True), f"counts {got_a}/{ra} and {got_b}/{rb} after release"
    del t
    gc.collect()
    assert count_is(a, ra)[0] and count_is(b, rb)[0]


def test_rebind_follows_arrays_and_keeps_address(cfn):
    a = np.array([1.0, 2.0])
    t = nt.bind(cfn("f_d_pi", "double (const double *x, int n)"), a, nt.size(a))
    addr = t.address
    b = np.arange(5.0)
    t.rebind(0, b)                 # size(a) follows: it now reads b
    assert t() == 10.0 and t.address == addr
    t.rebind("n", 2)
    assert t() == 1.0
    with pytest.raises(OverflowError, match="argument 2 \\(n: int\\)"):
        t.rebind("n", 2**40)
    assert t() == 1.0               # a failed rebind changes nothing
    with pytest.raises(TypeError):
        t.rebind(0, np.zeros(3, dtype=np.float32))
    fwd = nt.bind(cfn("f_d_pi", "double (const double *x, int n)"), nt.ARG, 3)
    with pytest.raises(ValueError, match="forwarded"):
        fwd.rebind(0, a)
    t.reclaim()
    assert t() == 1.0


def test_a_value_derived_from_the_held_array_follows_after_its_shape_changed(cfn, engine):
    """The array a parameter holds may change its shape in place (a.shape =
    ...): the buffer bound keeps the layout it had, and a value derived from
    the array afterwards is still derived from the array that parameter
    holds, so it follows a rebind of that parameter like any other."""
    a = np.arange(12.0)
    t = nt.bind(cfn("f_d_pi", "double (const double *x, int n)"), a, nt.size(a), engine=engine)
    a.shape = (3, 4)
    t.rebind("n", nt.shape(a, 0))         # 3: the first three of the 12 bound
    assert t() == 3.0
    b = np.arange(5.0)
    t.rebind("x", b)
    assert t.bindings[1].obj is b and t() == 10.0
    t.rebind("x", a)                      # a as it is now, 3 x 4: n is its shape(a, 0) again
    assert t.bindings[1].obj is a and t() == 3.0


def test_rebind_keeps_old_buffers_until_reclaim(cfn):
    a, b = np.ones(3), np.ones(5)
    before_a = sys.getrefcount(a)
    t = nt.bind(cfn("f_d_pi", SUM), a, nt.size(a))
    t.rebind(0, b)
    assert t() == 5.0
    assert sys.getrefcount(a) > before_a        # a caller may still read the old context
    t.reclaim()
    assert sys.getrefcount(a) == before_a
    t.release()


def test_nested_rebind_is_not_lost(cfn, engine):
    t = bind(engine, cfn("f_d_idfl", MIXED), 1, 2.0, 3.0, 4)
    t.rebind("a", Index(10, lambda: t.rebind("d", 100)))
    assert t() == 10 + 2.0 + 3.0 + 100
    assert [v for v in t.bindings][3] == 100


def test_nested_rebind_then_reclaim_reads_no_freed_array(cfn, engine):
    a, b = np.arange(4.0), np.arange(10.0, 20.0)
    ref_a = weakref.ref(a)
    t = bind(engine, cfn("f_d_pi", SUM), a, 4)
    t.rebind("n", Index(2, lambda: t.rebind("x", b)))
    assert t.bindings[0] is b
    t.reclaim()
    del a
    gc.collect()
    assert ref_a() is None              # a is gone, and the thunk does not read it
    assert t() == 10.0 + 11.0


# ---------------------------------------------------------------- derived values follow


def _forms():
    return {
        "ndarray": lambda a: a,
        "ctypes": lambda a: a.ctypes,
        "memoryview": lambda a: memoryview(a),
        "ctypes-array": lambda a: (ctypes.c_double * a.size).from_buffer(a),
    }


@pytest.mark.parametrize("form", list(_forms()))
def test_size_follows_rebind_in_any_form(cfn, engine, form):
    wrap = _forms()[form]
    a, b = np.arange(4.0), np.arange(100.0)
    t = bind(engine, cfn("f_d_pi", SUM), wrap(a), nt.size(wrap(a)))
    assert t() == 6.0
    t.rebind(0, wrap(b))
    assert t() == b.sum()               # n followed: all 100 elements
    t.rebind("x", wrap(a))
    assert t() == 6.0


def test_size_of_one_form_follows_the_array_bound_in_another(cfn, engine):
    a, b = np.arange(4.0), np.arange(100.0)
    t = bind(engine, cfn("f_d_pi", SUM), memoryview(a), nt.size(a))
    t.rebind(0, b.ctypes)
    assert t() == b.sum()


def test_derived_value_of_another_array_does_not_follow(cfn, engine):
    a, b, c = np.arange(4.0), np.arange(100.0), np.arange(3.0)
    t = bind(engine, cfn("f_d_pi", SUM), a, nt.size(c))
    t.rebind(0, b)
    assert t() == b[:3].sum()


def test_rebind_to_a_pointer_with_a_follower_is_refused(cfn, engine):
    a = np.arange(4.0)
    t = bind(engine, cfn("f_d_pi", SUM), a, nt.size(a))
    with pytest.raises(TypeError, match="argument 2 \\(n: int\\) holds size\\(\\) of the array"):
        t.rebind(0, nt.address(a.ctypes.data))
    assert t() == 6.0


PIPI = "double (const double *x, int n, const double *y, int m)"
IIPP = "double (int n, int m, const double *x, const double *y)"   # x + 10 y


def test_same_array_twice_each_size_follows_its_own_parameter(cfn, engine):
    a, big, other = np.arange(4.0), np.arange(100.0), np.arange(7.0)
    t = bind(engine, cfn("f_d_pipi", PIPI), a, nt.size(a), a, nt.size(a))
    t.rebind(0, big)                    # moves n only: m stays 4
    assert t() == big.sum() + a.sum()
    assert t.bindings[1].obj is big and t.bindings[3].obj is a
    t.rebind(2, other)
    assert t() == big.sum() + other.sum()
    t.rebind("x", a)
    assert t() == a.sum() + other.sum()


def test_sizes_before_their_arrays_pair_by_position(cfn, engine):
    a, big = np.arange(4.0), np.arange(100.0)
    t = bind(engine, cfn("f_d_iipp", IIPP), nt.size(a), nt.size(a), a, a)
    t.rebind(2, big)                    # x: the first size follows
    assert t() == big.sum() + 10 * a.sum()
    t.rebind(3, big[:50].copy())        # y: the second one
    assert t() == big.sum() + 10 * big[:50].sum()


def test_one_size_of_an_array_bound_twice_follows_the_buffer_before_it(cfn, engine):
    a, big = np.arange(4.0), np.arange(100.0)
    t = bind(engine, cfn("f_d_pipi", PIPI), a, nt.size(a), a, 2)
    t.rebind(2, big)                    # y: n was bound beside x, and stays
    assert t() == a.sum() + big[:2].sum()
    t.rebind(0, big)                    # x: n follows
    assert t() == big.sum() + big[:2].sum()


def test_a_size_follows_the_buffer_holding_its_array_object(cfn, engine):
    a, big = np.arange(4.0), np.arange(100.0)
    # x holds a memoryview of a, y holds a itself: size(a) was made from a
    t = bind(engine, cfn("f_d_pipi", PIPI), memoryview(a), 2, a, nt.size(a))
    t.rebind(0, big)
    assert t() == big[:2].sum() + a.sum()
    t.rebind(2, big)
    assert t() == big[:2].sum() + big.sum()


def test_values_derived_from_one_array_follow_its_buffer_not_each_other(cfn, engine):
    # x holds a memoryview of a (its layout, not a itself, is what the
    # derived values follow); n = size(a) and m = shape(a, 0) both follow x,
    # and m does not take n, the derived value before it, for a's buffer
    a, big, y = np.arange(4.0), np.arange(100.0), np.arange(200.0) * 0.5
    for n, m in [(nt.size(a), nt.shape(a, 0)), (nt.shape(a, 0), nt.size(a))]:
        t = bind(engine, cfn("f_d_pipi", PIPI), memoryview(a), n, memoryview(y), m)
        assert t() == a.sum() + y[:4].sum()
        t.rebind(0, memoryview(big))
        assert t() == big.sum() + y[:100].sum()
        t.release()


def test_derived_values_of_other_kinds_are_no_peers_when_pairing(cfn, engine):
    # shape(a, 0) and size(a) before two parameters holding a: one of each
    # kind, two buffers, so no pairing by rank: each follows the nearest
    # buffer, x, and a rebind of y moves neither
    a, big, c = np.arange(4.0), np.arange(100.0), np.arange(3.0)
    t = bind(engine, cfn("f_d_iipp", IIPP), nt.shape(a, 0), nt.size(a), a, a)
    assert t() == a.sum() + 10 * a.sum()
    t.rebind(3, big)
    assert t() == a.sum() + 10 * big[:4].sum()
    t.rebind(2, c)                      # n and m follow x
    assert t() == c.sum() + 10 * big[:3].sum()


def test_shapes_of_other_axes_are_no_peers_when_pairing(cfn, engine):
    # shape(a, 0) and shape(a, 1) before two parameters holding a: one
    # derived value per axis, two buffers, so no pairing by rank: each
    # follows the nearest buffer, x, and a rebind of y moves neither
    a, big, c = np.arange(12.0).reshape(3, 4), np.arange(60.0).reshape(6, 10), np.arange(10.0)
    t = bind(engine, cfn("f_d_iipp", IIPP), nt.shape(a, 0), nt.shape(a, 1), a, a)
    flat = a.ravel()
    assert t() == flat[:3].sum() + 10 * flat[:4].sum()
    t.rebind(3, big)
    assert t() == flat[:3].sum() + 10 * big.ravel()[:4].sum()
    t.rebind(2, c.reshape(2, 5))        # n and m follow x
    assert t() == c[:2].sum() + 10 * big.ravel()[:5].sum()


# Views that share one buffer with other layouts: each derived value follows
# the parameter holding its own array object, else the one reading the same
# memory with the same layout, never another view of the same memory. The
# target is a ctypes function that records what each call receives: the two
# pointers, then what size, shape(0), shape(1), stride(0) in bytes and
# stride(1) in elements read of each array.


def recorder(layout):
    """(calls, fn): a ctypes function of void * ('p') and ssize_t ('i')
    parameters in the order of layout, appending each call's arguments."""
    calls = []
    types = [ctypes.c_void_p if c == "p" else ctypes.c_ssize_t for c in layout]
    return calls, ctypes.CFUNCTYPE(None, *types)(lambda *args: calls.append(args))


def derived_of(v):
    return [nt.size(v), nt.shape(v, 0), nt.shape(v, 1), nt.stride(v, 0),
            nt.stride(v, 1, elements=True)]


def read_of(v):
    """What derived_of(v) reads, and v's data pointer."""
    v = np.asarray(v)
    return [v.size, v.shape[0], v.shape[1], v.strides[0], v.strides[1] // v.itemsize]


def _views(b):
    m = b.reshape(6, 8)
    return {
        "reshaped": (m, b.reshape(8, 6)),
        "transposed": (b[:16].reshape(4, 4), b[:16].reshape(4, 4).T),   # strides alone differ
        "every other row": (m, m[::2]),
        "every other column": (m, m[:, ::2]),
        "first rows": (m, m[:3]),                                      # the shape alone
        "float32 every other": (m, b.view(np.float32).reshape(6, 16)[:, ::2]),  # item size alone
        "column and row": (b.reshape(48, 1), b.reshape(1, 48)),
    }


SHARED_FORMS = {"ndarray": lambda v: v, "memoryview": memoryview, "ctypes": lambda v: v.ctypes}


def _follow_views(engine, pair, wrap, made_of, swap, x_first):
    """One thunk over views p (at x) and q (at y) of one buffer, each with
    its derived values (x's first or y's first), rebound at x, at y, and at
    x again: each call receives, besides the pointers, what each view and
    then each new array reads, as it was bound beside."""
    r = np.zeros((5, 14))[:, ::2]                  # what x and y are rebound to
    s = np.zeros((3, 9)).T
    p, q = _views(np.arange(48.0))[pair][::-1 if swap else 1]
    x, y = wrap(p), wrap(q)
    dx = derived_of(x if made_of == "the bound object" else wrap(p.view()))
    dy = derived_of(y if made_of == "the bound object" else wrap(q.view()))
    calls, fn = recorder("pp" + "i" * 10)
    t = bind(engine, fn, nt.strided(x), nt.strided(y), *(dx + dy if x_first else dy + dx))
    at = np.asarray(p).ctypes.data
    steps = [
        (None, None, (at, read_of(p)), (at, read_of(q))),
        (0, r, (r.ctypes.data, read_of(r)), (at, read_of(q))),        # x's values only
        (1, s, (r.ctypes.data, read_of(r)), (s.ctypes.data, read_of(s))),  # y's only
        (0, p, (at, read_of(p)), (s.ctypes.data, read_of(s))),
    ]
    for i, value, (px, vx), (py, vy) in steps:
        if i is not None:
            t.rebind(i, nt.strided(wrap(value)))
        t()
        want = (px, py, *(vx + vy if x_first else vy + vx))
        assert calls[-1] == want, (swap, x_first, i)
    t.release()


@pytest.mark.parametrize("pair", list(_views(np.arange(48.0))))
@pytest.mark.parametrize("form", list(SHARED_FORMS))
@pytest.mark.parametrize("made_of", ["the bound object", "a view alike"])
def test_values_derived_from_views_of_one_buffer_follow_their_own_view(engine, pair, form,
                                                                       made_of):
    """Two views of one buffer in other layouts (the same start; shape,
    strides or item size differ), bound in one form (ndarray, memoryview,
    arr.ctypes), the values derived from each made of the bound object or
    of another view alike, either view first, either view's values first."""
    for swap in (False, True):
        for x_first in (True, False):
            _follow_views(engine, pair, SHARED_FORMS[form], made_of, swap, x_first)


@pytest.mark.parametrize("form", ["memoryview", "ctypes array", "strided"])
def test_a_derived_value_follows_its_array_object_before_a_nearer_buffer_alike(engine, form):
    """The array itself at one parameter, the same memory with the same
    layout in another form at another: a value derived from the array
    follows the parameter holding it, whichever of the two is nearer, on
    either side. (strided: every other element, nt.strided of the array
    and of a memoryview of it.)"""
    if form == "strided":
        a, big, other = np.arange(12.0)[::2], np.arange(200.0)[::2], np.arange(18.0)[::2]
        wrap, mine, alike = nt.strided, nt.strided(a), nt.strided(memoryview(a))
    else:
        a, big, other = np.arange(6.0), np.arange(100.0), np.arange(9.0)
        wrap, mine = (lambda v: v), a
        alike = memoryview(a) if form == "memoryview" else (ctypes.c_double * 6).from_buffer(a)
    # layout, values, the array's parameter, the other one, the derived value's
    for layout, args, at, its, n in [
        ("ppi", (mine, alike, nt.size(a)), 0, 1, 2),    # the one alike nearer, before
        ("pipi", (mine, 3, alike, nt.size(a)), 0, 2, 3),
        ("ipp", (nt.size(a), alike, mine), 2, 1, 0),    # the one alike nearer, after
        ("ippi", (nt.size(a), alike, mine, 3), 2, 1, 0),
    ]:
        calls, fn = recorder(layout)
        t = bind(engine, fn, *args)
        t()
        assert calls[-1][n] == 6, layout
        t.rebind(its, wrap(other))                      # the buffer alike: n stays
        t()
        assert calls[-1][n] == 6, layout
        t.rebind(at, wrap(big))                         # the array's own parameter: n follows
        t()
        assert calls[-1][n] == 100, layout
        t.release()


def test_kernel_reads_each_array_by_its_own_size_under_asan(engine):
    """The issue's case: one array bound to two pointer parameters, each with
    its size(); after rebind(0, big) the kernel reads n elements of x and m
    of y. Built with AddressSanitizer, a read past y is a report."""
    from conftest import HERE
    from ntbuild import compile_shared, compiler_env
    cc = os.environ.get("CC") or "gcc"
    path = compile_shared(os.path.join(HERE, "fixtures", "fixture.c"), "fixture",
                          compiler=cc, extra=["-fsanitize=address", "-g"], label="asan")
    runtime = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True,
                             text=True, check=True, env=compiler_env()).stdout.strip()
    assert os.path.isabs(runtime), f"{cc} has no AddressSanitizer runtime: {runtime!r}"
    code = f"""
import ctypes, numpy as np, numthunk as nt
lib = ctypes.CDLL({path!r})
fn = nt.Function(ctypes.cast(lib.f_d_pipi, ctypes.c_void_p).value, {PIPI!r}, owner=lib)
a, big = np.arange(4.0), np.arange(100.0)
t = nt.bind(fn, a, nt.size(a), a, nt.size(a), engine={engine!r})
t.rebind(0, big)
print(t())
"""
    env = {**os.environ, "LD_PRELOAD": runtime, "ASAN_OPTIONS": "detect_leaks=0"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert "AddressSanitizer" not in out.stderr, out.stderr[-3000:]
    assert out.returncode == 0, out.stderr[-3000:]
    assert float(out.stdout) == sum(range(100)) + 6.0


def _rebind_x_while_a_finalizer_rebinds_n(cfn, engine, k):
    # the outer rebind of x with a collection at every allocation, whose
    # k-th runs a finalizer that rebinds n; whether it ran inside the outer
    import gc
    a, b = np.arange(4.0), np.arange(10.0)
    t = bind(engine, cfn("f_d_pi", SUM), a, nt.size(a))
    state = {"left": k, "armed": True, "fired": False}

    class Rebinder:
        def __init__(self):
            self.me = self                          # a cycle: the collector frees it

        def __del__(self):
            if not state["armed"]:
                return
            state["left"] -= 1
            if state["left"] == 0:
                state["armed"], state["fired"] = False, True
                t.rebind("n", 2)
            else:
                Rebinder()                          # found by the next collection

    old = gc.get_threshold()
    Rebinder()
    gc.set_threshold(1)
    try:
        t.rebind("x", b)
    finally:
        gc.set_threshold(*old)
        inside, state["armed"] = state["fired"], False
    gc.collect()
    assert t.bindings[0] is b
    if inside:
        assert t.bindings[1] == 2, k                 # the inner rebind is not lost
        assert t() == b[:2].sum()
    else:
        assert type(t.bindings[1]) is type(nt.size(b))  # n follows x: all of b
        assert t() == b.sum()
    t.release()
    return inside


def test_rebind_from_a_finalizer_while_followers_are_prepared(cfn, engine):
    """A rebind that completes while another one prepares the values that
    follow its array is kept: the outer rebind prepares them again. Here a
    finalizer rebinds n; a collection at every allocation (CPython 3.11
    collects inside the allocation; 3.12 and later at the next bytecode)
    runs it at the k-th collection, somewhere in the outer rebind for some k."""
    inside = [_rebind_x_while_a_finalizer_rebinds_n(cfn, engine, k) for k in range(1, 16)]
    assert any(inside) or sys.version_info >= (3, 12)


def test_a_name_with_a_nul_names_no_parameter(cfn):
    """rebind by name compares the whole str: a NUL inside (C text would end
    there) makes it another name, refused with the name as given, and
    nothing changes."""
    a = np.arange(3.0)
    t = nt.bind(cfn("f_d_pi", "double (const double *x, int n)"), a, nt.size(a))
    for name in ("x\0", "x\0y", "\0x", "n\0", "\0"):
        with pytest.raises(KeyError) as info:
            t.rebind(name, np.ones(2))
        assert info.value.args[0] == (
            f"the target has no parameter named {name!r}; its named parameters are 'x' (0), "
            "'n' (1), and any parameter may be named by its index, rebind(0, ...) to "
            "rebind(1, ...)")
    assert t() == 3.0 and t.bindings[0] is a
    t.rebind("x", np.ones(2))
    assert t() == 2.0
