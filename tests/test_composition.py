"""Thunks that use thunks, on both engines: whatever spelling carries a
thunk's address (the thunk, an int with signature=, t.ctypes, t.cffi(ffi),
a LowLevelCallable's capsule, a Function, a ctypes cast, numthunk.address),
a thunk bound to it as target or as a function-pointer value holds it,
counts it in its chain depth, keeps the GIL it needs, refuses cycles at bind
and at rebind, and raises from Python (never aborts) once it is released."""

import copy
import ctypes
import gc
import pickle
import re
import sys
import threading
import time
import weakref

import cffi
import pytest

import numthunk as nt

from conftest import ENGINE_NAME
from thunks import bind, run_bounded

D_D = "double (double)"
APPLY = "double (double (*f)(double), double x)"


@pytest.fixture
def fns(cfn):
    class F:
        d = cfn("f_d_d", D_D)
        apply = cfn("f_d_Fd", APPLY)
        integrate = cfn("f_d_Fddi", "double (double (*f)(double), double a, double b, int n)")
        call_int = cfn("f_i_F", "int (int (*f)(void))")
    return F



class Releasing:
    """A float whose conversion releases a thunk first."""

    def __init__(self, thunk, value=1.0):
        self.thunk, self.value = thunk, value

    def __float__(self):
        self.thunk.release()
        return self.value


def collected(ref):
    gc.collect()
    return ref() is None


# ---------------------------------------------------------------- spellings

_FFI = cffi.FFI()


def _target_spellings():
    cast = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)
    return {
        "thunk": lambda t: (t, {}),
        "int": lambda t: (t.address, {"signature": D_D}),
        "ctypes": lambda t: (t.ctypes, {}),
        "cffi": lambda t: (t.cffi(_FFI), {}),
        "capsule": lambda t: (t.lowlevelcallable().function, {}),
        "Function": lambda t: (nt.Function(t.address, D_D), {}),
        "ctypes cast": lambda t: (ctypes.cast(t.address, cast), {}),
    }


def _value_spellings():
    cast = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)
    return {
        "thunk": lambda t: t,
        "address": lambda t: nt.address(t.address),
        "ctypes": lambda t: t.ctypes,
        "cffi": lambda t: t.cffi(_FFI),
        "capsule": lambda t: t.lowlevelcallable().function,
        "Function": lambda t: nt.Function(t.address, D_D),
        "ctypes cast": lambda t: ctypes.cast(t.address, cast),
    }


@pytest.mark.parametrize("spelling", list(_target_spellings()))
def test_a_target_spelled_any_way_is_its_thunk(fns, engine, spelling):
    inner = bind(engine, fns.d, nt.ARG)
    target, kw = _target_spellings()[spelling](inner)
    outer = bind(engine, target, nt.ARG, **kw)
    assert outer.dependencies == (inner,)
    assert outer.chain == 1
    ref = weakref.ref(inner)
    del inner, target
    assert not collected(ref)               # the outer thunk holds it
    assert outer(2.5) == 2.5
    del outer
    assert collected(ref)


@pytest.mark.parametrize("spelling", list(_value_spellings()))
def test_a_function_value_spelled_any_way_is_its_thunk(fns, engine, spelling):
    inner = bind(engine, fns.d, nt.ARG)
    value = _value_spellings()[spelling](inner)
    outer = bind(engine, fns.apply, value, nt.ARG)
    assert outer.dependencies == (inner,)
    assert outer.chain == 1
    ref = weakref.ref(inner)
    del inner, value
    assert not collected(ref)               # even a bare address(t.address)
    assert outer(4.0) == 4.0
    outer.release()
    assert collected(ref)


def test_a_cycle_through_a_dependency_is_collected(fns, engine):
    """The inner thunk's target (a ctypes callback) refers to the outer
    thunk, which holds the inner one: a cycle the collector frees."""
    proto = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)
    box = {}
    cb = proto(lambda x: x + (1.0 if "outer" in box else 0.0))  # noqa: F821 (del box below)
    inner = bind(engine, cb, nt.ARG)
    box["outer"] = bind(engine, fns.apply, inner, nt.ARG)
    cb.box = box
    assert box["outer"](1.0) == 2.0
    refs = [weakref.ref(inner), weakref.ref(box["outer"])]
    del inner, cb, box
    gc.collect()
    assert [r() for r in refs] == [None, None]


def test_registry_finds_live_thunks_among_many_released(fns, engine):
    # entries leave the registry's table as thunks go: those left behind
    # are still found, the released ones no longer are
    thunks = [bind(engine, fns.d, nt.ARG) for _ in range(3000)]
    for t in thunks[::2]:
        t.release()
    live = thunks[1::2]
    for t in live[::97]:
        assert bind(engine, t.address, nt.ARG, signature=D_D).dependencies == (t,)
    for t in live:
        t.release()


# ---------------------------------------------------------------- chain depth

# every engine's limit, each named, in the message of a chain refused
LIMITS = re.escape(f"(libffi: 128, {ENGINE_NAME['native']}: 1024; ")


def test_chain_through_ctypes_is_bounded_at_bind(fns):
    """20,000 libffi levels through t.ctypes would overflow the C stack: the
    chain is refused where bind(thunk) chains are."""
    t = nt.bind(fns.d, nt.ARG, engine="ffi")
    chain = [t]
    with pytest.raises(ValueError, match=r"chain of 129 thunks.*at most 128 levels on the "
                                         r"engines in this chain " + LIMITS):
        for _ in range(20_000):
            chain.append(nt.bind(chain[-1].ctypes, nt.ARG, engine="ffi"))
    assert len(chain) == 128 and chain[-1].chain == 127
    threading.stack_size(256 * 1024)
    try:
        out = []
        th = threading.Thread(target=lambda: out.append(chain[-1](1.5)))
        th.start()
        th.join(30)
        assert out == [1.5]
    finally:
        threading.stack_size(0)


@pytest.mark.parametrize("how", ["int", "function value"])
def test_native_chains_of_any_spelling_are_bounded(fns, how):
    t = nt.bind(fns.d, nt.ARG, engine="native")
    chain = [t]
    with pytest.raises(ValueError, match="at most 1024 levels"):
        for _ in range(5000):
            if how == "int":
                chain.append(nt.bind(chain[-1].address, nt.ARG, signature=D_D,
                                     engine="native"))
            else:
                chain.append(nt.bind(fns.apply, nt.address(chain[-1].address), nt.ARG,
                                     engine="native"))
    assert chain[-1].chain == 1023
    assert chain[-1](3.0) == 3.0


def test_rebind_from_a_c_function_pointer_to_thunks_and_back(fns, engine):
    """life/commit.c prepare_dep: a thunk whose function pointer is a plain C
    function uses no thunk; rebound to one it holds and uses it (room made
    for its first dependency), and is broken by its release; back to a C
    function, then to thunks again, each rebind keeping the address."""
    c_d = nt.address(fns.d.address)                              # f_d_d(x) = x
    t = nt.bind(fns.apply, c_d, 3.0, engine=engine)
    address = t.address
    assert t() == 3.0
    half = nt.bind(fns.apply, c_d, nt.ARG, engine=engine)         # a thunk of double (double)
    t.rebind(0, half)
    ref = weakref.ref(half)
    del half
    gc.collect()
    assert ref() is not None and t() == 3.0 and t.address == address
    ref().release()
    with pytest.raises(ValueError, match="^this thunk uses a released thunk"):
        t()
    t.rebind(0, c_d)
    assert t() == 3.0
    for _ in range(3):
        t.rebind(0, nt.bind(fns.d, nt.ARG, engine=engine))         # a thunk replaced by a thunk
        assert t() == 3.0 and t.address == address


def test_rebind_that_deepens_a_chain_is_refused(fns):
    leaf = nt.bind(fns.d, nt.ARG, engine="ffi")
    bottom = nt.bind(fns.apply, leaf, nt.ARG, engine="ffi")
    above = [bottom]
    for _ in range(100):
        above.append(nt.bind(above[-1], nt.ARG, engine="ffi"))
    deep = [leaf]
    for _ in range(40):
        deep.append(nt.bind(fns.apply, deep[-1], nt.ARG, engine="ffi"))
    assert above[-1].chain == 101
    with pytest.raises(ValueError, match="at most 128 levels"):
        bottom.rebind(0, deep[-1])          # 101 + 40 levels
    assert bottom.dependencies == (leaf,) and above[-1](2.0) == 2.0
    bottom.rebind(0, deep[10])              # 101 + 10: fits
    assert bottom.chain == 11 and above[-1].chain == 111
    assert above[-1](2.0) == 2.0
    bottom.rebind(0, leaf)                  # shallower again: the chain follows
    assert above[-1].chain == 101


@pytest.mark.parametrize("engine, limit", [("ffi", 128), ("native", 1024)])
def test_a_rebind_joining_two_chains_names_the_depth_of_the_result(fns, engine, limit):
    """life/commit.c within_limit: a bound function pointer of a thunk in the
    middle of one chain rebound to the top of another is refused with the
    depth the joined chain would have (the new value's chain, the rebound
    thunk, and the longest path of its users above it), not the level where
    the walk up first went past the limit; bind names its own depth."""
    below = limit - 28                        # the new value: `below` thunks
    deep = [bind(engine, fns.d, nt.ARG)]
    for _ in range(below - 1):
        deep.append(bind(engine, fns.apply, deep[-1], nt.ARG))
    assert deep[-1].chain == below - 1
    a = bind(engine, fns.apply, bind(engine, fns.d, nt.ARG), nt.ARG)
    above = [a]
    for _ in range(100):                      # 100 thunks above a, on two branches
        above.append(bind(engine, above[-1], nt.ARG))
    side = [bind(engine, fns.apply, a, nt.ARG) for _ in range(3)]
    with pytest.raises(ValueError) as info:
        a.rebind(0, deep[-1])                 # below + a + 100 above
    assert str(info.value) == (
        f"this would make a chain of {below + 101} thunks, each calling the next (as its "
        f"target, through a bound function pointer or a declared dependency); composed "
        f"thunks may nest at most {limit} levels on the engines in this chain "
        f"(libffi: 128, {ENGINE_NAME['native']}: 1024; each level calls the next, and a deeper "
        f"chain could overflow a thread's C stack)")
    assert a.chain == 1 and above[-1].chain == 101 and above[-1](2.0) == 2.0
    assert all(s.chain == 2 for s in side)
    top = bind(engine, fns.apply, above[-1], nt.ARG)
    for _ in range(limit - 103):
        top = bind(engine, top, nt.ARG)
    assert top.chain == limit - 1
    with pytest.raises(ValueError, match=rf"^this would make a chain of {limit + 1} thunks, "):
        bind(engine, top, nt.ARG)             # a new thunk: nothing above it


@pytest.mark.parametrize("engine, limit", [("ffi", 128), ("native", 1024)])
def test_rebind_to_exactly_the_chain_limit(fns, engine, limit):
    """life/commit.c within_limit / prepare_dep: a rebind that makes the chain
    exactly `limit` levels deep is taken, one level more is refused (and
    leaves every thunk as it was)."""
    leaf = bind(engine, fns.d, nt.ARG)
    bottom = bind(engine, fns.apply, leaf, nt.ARG)
    above = [bottom]
    for _ in range(limit // 2):
        above.append(bind(engine, above[-1], nt.ARG))
    top = above[-1]
    assert top.chain == 1 + limit // 2
    deep = [bind(engine, fns.d, nt.ARG)]
    fits = limit - 2 - limit // 2            # deep[fits]: the top at chain limit - 1
    for _ in range(fits + 1):
        deep.append(bind(engine, fns.apply, deep[-1], nt.ARG))
    with pytest.raises(ValueError, match=rf"chain of {limit + 1} thunks.*at most {limit} "
                                         rf"levels"):
        bottom.rebind(0, deep[fits + 1])
    assert bottom.dependencies == (leaf,) and top.chain == 1 + limit // 2
    bottom.rebind(0, deep[fits])
    assert top.chain == limit - 1 and bottom.chain == fits + 1
    assert top(2.5) == 2.5
    with pytest.raises(ValueError, match=rf"chain of {limit + 1} thunks"):
        bind(engine, top, nt.ARG)            # one more on top: refused at bind


def test_a_libffi_thunk_anywhere_below_limits_a_native_chain_to_128(fns):
    """life/commit.c: the least limit of the engines at or below a thunk is its
    limit, at bind and when a rebind brings a libffi thunk in."""
    chain = [bind("ffi", fns.d, nt.ARG)]
    for _ in range(127):
        chain.append(bind("native", fns.apply, chain[-1], nt.ARG))
    assert chain[-1].chain == 127 and chain[-1](1.5) == 1.5
    with pytest.raises(ValueError, match=r"chain of 129 thunks.*at most 128 levels"):
        bind("native", fns.apply, chain[-1], nt.ARG)
    native = [bind("native", fns.d, nt.ARG)]
    for _ in range(200):
        native.append(bind("native", fns.apply, native[-1], nt.ARG))
    assert native[-1].chain == 200
    # the first level past 128 is native[128], but the refusal names the
    # depth of the whole result: native[0] to native[200], 201 thunks
    with pytest.raises(ValueError, match=r"chain of 201 thunks.*at most 128 levels"):
        native[1].rebind(0, bind("ffi", fns.d, nt.ARG))
    assert native[-1](2.0) == 2.0 and native[1].dependencies == (native[0],)
    one_deep = bind("ffi", fns.apply, bind("ffi", fns.d, nt.ARG), nt.ARG)
    with pytest.raises(ValueError, match=r"chain of 129 thunks"):
        native[74].rebind(0, one_deep)                  # 200 - 74 + 2 = chain 128
    native[74].rebind(0, bind("ffi", fns.d, nt.ARG))    # 200 - 74 + 1 = chain 127
    assert native[-1].chain == 127 and native[-1](3.0) == 3.0


@pytest.mark.parametrize("bound_chain, declared_chain, fits",
                         [(126, 126, True), (126, 127, False), (127, 126, False)])
def test_a_rebind_counts_the_depth_of_every_other_dependency(cfn, fns, bound_chain,
                                                             declared_chain, fits):
    """life/commit.c prepare_dep: the chain a rebind of one function pointer makes
    is one more than the deepest of all: the new value, the other bound
    function pointers and the declared dependencies, whichever comes first
    (here native chains, under the libffi limit the new value brings in)."""
    def chain_of(levels):
        c = [bind("native", fns.d, nt.ARG)]
        for _ in range(levels):
            c.append(bind("native", fns.apply, c[-1], nt.ARG))
        return c

    bound, declared = chain_of(bound_chain), chain_of(declared_chain)
    both = cfn("f_d_FFd", "double (double (*f)(double), double (*g)(double), double x)")
    fn = nt.Function(both.address, both.csig, owner=both.owner, depends=(declared[-1],))
    t = bind("native", fn, bound[-1], bind("native", fns.d, nt.ARG), nt.ARG)
    deepest = max(bound_chain, declared_chain) + 1
    assert t.chain == deepest and t(1.5) == 3.0
    g = bind("ffi", fns.d, nt.ARG)
    if fits:
        t.rebind(1, g)
        assert t.chain == deepest and t.dependencies[1] is g and t(1.5) == 3.0
    else:
        with pytest.raises(ValueError, match=r"chain of 129 thunks.*at most 128 levels"):
            t.rebind(1, g)
        assert g not in t.dependencies and t(1.5) == 3.0


def test_a_thunk_used_by_many(fns, engine):
    inner = bind(engine, fns.d, nt.ARG)
    outers = [bind(engine, fns.apply, inner, nt.ARG) for _ in range(20_000)]
    order = list(range(len(outers)))
    order = order[1::2] + order[::4]               # released out of order
    for k in order:
        outers[k].release()
    kept = [t for k, t in enumerate(outers) if k % 4 == 2]
    inner.release()                                # every remaining user breaks
    assert all(t.released for k, t in enumerate(outers) if k % 4 != 2)
    for t in kept[::250]:
        with pytest.raises(ValueError, match="uses a released thunk"):
            t(1.0)
    fresh = bind(engine, fns.d, nt.ARG)
    for t in kept:
        t.rebind(0, fresh)
    assert all(t(2.0) == 2.0 for t in kept[::250])


def test_rebind_under_a_lattice_of_thunks_is_quick(cfn, fns, engine):
    """Each level uses both thunks of the level below: 2**60 paths from top
    to bottom. A rebind at the bottom walks each thunk once."""
    both = cfn("f_d_FFd", "double (double (*f)(double), double (*g)(double), double x)")
    leaf = bind(engine, fns.d, nt.ARG)
    bottom = [bind(engine, fns.apply, leaf, nt.ARG) for _ in range(2)]
    level = bottom
    for _ in range(60):
        level = [bind(engine, both, level[0], level[1], nt.ARG) for _ in range(2)]
    assert level[0].chain == 61
    deeper = bind(engine, fns.apply, bind(engine, fns.d, nt.ARG), nt.ARG)
    t0 = time.monotonic()
    bottom[0].rebind(0, deeper)                    # every thunk above deepens
    leaf.release()                                 # bottom[1] breaks, and all above
    assert time.monotonic() - t0 < 5
    assert level[0].chain == 62
    with pytest.raises(ValueError, match="uses a released thunk"):
        level[1](1.0)
    bottom[1].rebind(0, deeper)                    # mended, all the way up
    assert not any(t.released for t in level)
    assert bottom[1](3.0) == 3.0


# ---------------------------------------------------------------- cycles


def test_a_thunk_rebound_into_itself_is_refused(fns, engine):
    t = bind(engine, fns.apply, bind(engine, fns.d, nt.ARG), nt.ARG)
    for spelled in (t, nt.address(t.address), t.ctypes):
        with pytest.raises(ValueError, match="own address: a call would call itself"):
            t.rebind(0, spelled)
    assert t(1.25) == 1.25                  # unchanged


def test_cycles_are_refused_at_rebind(fns, engine):
    leaf = bind(engine, fns.d, nt.ARG)
    a = bind(engine, fns.apply, leaf, nt.ARG)
    b = bind(engine, fns.apply, leaf, nt.ARG)
    a.rebind(0, b)                          # a uses b
    with pytest.raises(ValueError, match="uses this one .* would make a cycle"):
        b.rebind(0, a)
    with pytest.raises(ValueError, match="would make a cycle"):
        b.rebind(0, nt.address(a.address))
    c = bind(engine, a, nt.ARG)             # through a target: c -> a -> b
    with pytest.raises(ValueError, match="would make a cycle"):
        b.rebind(0, c)
    assert a(2.0) == b(2.0) == c(2.0) == 2.0


def test_deep_chains_pickle_and_deepcopy_say_why(fns):
    # deeper than pickle and copy follow: the native engine nests 1,024 levels
    # (libffi's 128 would refuse the chain before it is that deep)
    t = nt.bind(fns.d, nt.ARG, engine="native")
    for _ in range(600):
        t = nt.bind(fns.apply, t, nt.ARG, engine="native")
    with pytest.raises(pickle.PicklingError, match="composed 601 thunks deep"):
        pickle.dumps(t)
    with pytest.raises(RecursionError, match="nest deeper than copy can follow"):
        copy.deepcopy(t)
    # past a quarter of the recursion limit, with room left: it travels
    levels = sys.getrecursionlimit() // 4 // 5 + 2      # 5 pickle frames a level
    t = nt.bind(fns.d, nt.ARG, engine="native")
    for _ in range(levels - 1):
        t = nt.bind(fns.apply, t, nt.ARG, engine="native")
    assert t.chain + 1 == levels
    assert pickle.loads(pickle.dumps(t))(1.5) == t(1.5) == 1.5


# ---------------------------------------------------------------- Function.depends


def test_declared_dependencies(fns, engine):
    used = bind(engine, fns.d, nt.ARG)
    fn = nt.Function(fns.d.address, D_D, owner=fns.d.owner, depends=(used,))
    t = bind(engine, fn, 2.0)
    assert t.dependencies == (used,) and t.chain == 1
    ref = weakref.ref(used)
    del used
    assert not collected(ref)
    ref().release()
    with pytest.raises(ValueError, match="uses a released thunk .* declares it uses"):
        t()
    with pytest.raises(ValueError, match="is a released thunk"):
        bind(engine, fn, 2.0)
    # one thunk stands for a tuple of one; anything else is refused
    assert nt.Function(fns.d.address, D_D, depends=t).depends == (t,)
    with pytest.raises(TypeError, match="depends= takes thunks"):
        nt.Function(fns.d.address, D_D, depends=(1,))
    fn.depends = ("not a thunk",)
    with pytest.raises(TypeError, match="must be thunks; item 0 is of type str"):
        bind(engine, fn, 2.0)


def test_a_released_declared_dependency_says_to_bind_anew(fns, engine):
    # no parameter holds a declared dependency, so there is none to rebind:
    # the message says what mends it, and doing that does
    used = bind(engine, fns.d, nt.ARG)
    t = bind(engine, nt.Function(fns.d.address, D_D, owner=fns.d.owner, depends=(used,)), 2.0)
    used.release()
    with pytest.raises(ValueError) as info:
        t()
    assert str(info.value) == (
        f"this thunk uses a released thunk (double (double) over double (double), target at "
        f"{fns.d.address:#x}) through a thunk the target declares it uses (Function.depends): "
        f"a call would reach the released thunk's trap; a declared dependency cannot be "
        f"rebound: bind a new thunk over a Function whose depends= names live thunks "
        f"(see docs/lifetime.md)")
    live = bind(engine, fns.d, nt.ARG)
    mended = bind(engine, nt.Function(fns.d.address, D_D, owner=fns.d.owner, depends=(live,)),
                  2.0)
    assert mended() == 2.0 and mended.dependencies == (live,)


def test_thunk_via_takes_a_thunk_or_a_tuple_of_thunks(fns):
    sig, addr = fns.d._signature, fns.d.address
    used = nt.bind(fns.d, 1.0)
    for via in (1, [used], {used}, "t"):
        with pytest.raises(TypeError) as info:
            nt.Thunk(sig, addr, (2.0,), via=via)
        assert str(info.value) == ("Thunk(via=...) takes the thunks the target uses: a thunk or a "
                                   f"tuple of thunks (Function.depends), got "
                                   f"{type(via).__name__}")
    with pytest.raises(TypeError, match=r"must be thunks; item 1 is of type list$"):
        nt.Thunk(sig, addr, (2.0,), via=(used, [used]))
    for via, deps in [(used, (used,)), ((used,), (used,)), ((used, used), (used, used)),
                      ((), ()), (None, ())]:
        t = nt.Thunk(sig, addr, (2.0,), via=via)
        assert t.dependencies == deps and t() == 2.0


def test_declared_dependencies_count_in_depth_and_gil(fns, engine, gil_check):
    holder = bind(engine, gil_check.needs)
    fn = nt.Function(fns.d.address, D_D, owner=fns.d.owner, depends=(holder,))
    t = bind(engine, fn, nt.ARG)
    assert not t.nogil and t.chain == 1
    with pytest.raises(ValueError, match="at most"):
        deep = t
        for _ in range(2000):
            deep = bind(engine, nt.Function(fns.d.address, D_D, depends=(deep,)), nt.ARG)


# ---------------------------------------------------------------- the GIL


@pytest.fixture
def gil_check():
    """int PyGILState_Check(void), as a function that needs the GIL and as
    one that does not: through a thunk, 1 means the GIL was held."""
    addr = ctypes.cast(ctypes.pythonapi.PyGILState_Check, ctypes.c_void_p).value

    class G:
        needs = nt.Function(addr, "int (void)", nogil=False)
        free = nt.Function(addr, "int (void)", nogil=True)
    return G


def test_a_gil_needing_thunk_bound_as_a_function_keeps_the_gil(fns, engine, gil_check):
    needs = bind(engine, gil_check.needs)
    free = bind(engine, gil_check.free)
    assert not needs.nogil and free.nogil
    outer = bind(engine, fns.call_int, needs)
    assert not outer.nogil and outer() == 1          # the GIL is kept
    other = bind(engine, fns.call_int, free)
    assert other.nogil and other() == 0              # released: nothing needs it
    top = bind(engine, fns.call_int, other)          # one more level
    assert top.nogil and top() == 0
    other.rebind(0, needs)                           # the need travels up
    assert not other.nogil and not top.nogil and top() == 1
    other.rebind(0, free)
    assert other.nogil and top.nogil and top() == 0


def test_a_rebind_recomputes_the_gil_from_the_target_and_every_value(fns, engine, gil_check):
    needs, free = bind(engine, gil_check.needs), bind(engine, gil_check.free)
    # a plain Function that needs the GIL, rebound in and out (no thunk below)
    outer = bind(engine, fns.call_int, free)
    assert outer.nogil and outer() == 0
    outer.rebind(0, gil_check.needs)
    assert not outer.nogil and outer() == 1
    outer.rebind(0, gil_check.free)
    assert outer.nogil and outer() == 0
    # a target that needs the GIL itself keeps it whatever lies below, when
    # a thunk below changes too
    held = nt.Function(fns.call_int.address, fns.call_int.signature, nogil=False,
                       owner=fns.call_int)
    middle = bind(engine, fns.call_int, needs)
    top = bind(engine, held, middle)
    assert not top.nogil and top() == 1
    middle.rebind(0, free)                           # nothing below needs it now
    assert middle.nogil and middle() == 0
    assert not top.nogil and top() == 1              # the target still does


def test_a_thunk_as_target_gives_its_function_the_thunk_s_gil_need(fns, engine, gil_check):
    """as_function(thunk): the Function over a thunk needs the GIL exactly
    when the thunk does; nogil= given to bind still decides."""
    for fn, nogil in ((gil_check.needs, False), (gil_check.free, True)):
        inner = bind(engine, fn)
        top = bind(engine, inner)
        assert (top.target.nogil, top.nogil, top()) == (nogil, nogil, int(not nogil))
        assert top.target.owner is inner
    forced = bind(engine, bind(engine, gil_check.free), nogil=False)
    assert (forced.target.nogil, forced.nogil, forced()) == (False, False, 1)


def test_a_function_with_const_parameters_is_a_value_of_the_unqualified_type(fns, engine, cfn):
    """A parameter's own const is no part of a function's type: a target
    declared double (const double) is a double (*)(double), as a value
    bound, forwarded and rebound, and as a thunk; a pointee's const is."""
    own = cfn("f_d_d", "const double (const double x)")
    t = bind(engine, fns.apply, own, 2.5)
    assert t() == 2.5
    assert bind(engine, fns.apply, bind(engine, own, nt.ARG), 3.0)() == 3.0
    assert bind(engine, fns.apply, nt.ARG, 4.0)(own) == 4.0
    t.rebind(0, fns.d)
    t.rebind("f", own)
    assert t() == 2.5
    unqualified = bind(engine, cfn("f_d_Fd", "double (double (*const f)(const double), double)"),
                       fns.d, 5.0)
    assert unqualified() == 5.0
    # a pointee's const counts (bound, never called: the refusal comes at bind)
    with pytest.raises(TypeError, match=re.escape(
            "expected a function 'double (const double *, int)', got 'double (double *, int)'")):
        bind(engine, cfn("f_d_Fd", "double (double (*f)(const double *, int))"),
             cfn("f_d_pi", "double (double *, int)"))


def test_one_function_pointer_bound_and_another_forwarded(fns, engine, cfn):
    """f(x) + g(x) with f bound and g forwarded (or the other way round):
    the forwarded parameter holds no value at bind time, and the GIL need
    comes from what is bound, then from each call's function."""
    ffd = cfn("f_d_FFd", "double (double (*f)(double), double (*g)(double), double x)")
    same = nt.Function(fns.d.address, D_D)          # f_d_d: x itself
    for args in ((fns.d, nt.ARG, 3.0), (nt.ARG, fns.d, 3.0), (fns.d, nt.ARG, nt.ARG)):
        t = bind(engine, ffd, *args)
        assert t.nogil
        assert t(same, *([3.0] if args[2] is nt.ARG else [])) == 6.0
    held = nt.Function(fns.d.address, D_D, nogil=False)
    t = bind(engine, ffd, held, nt.ARG, 2.0)
    assert not t.nogil and t(same) == 4.0


def test_a_gil_needing_function_forwarded_keeps_the_gil(fns, engine, gil_check):
    fwd = bind(engine, fns.call_int, nt.ARG)
    assert fwd.nogil
    assert fwd(bind(engine, gil_check.free)) == 0
    assert fwd(bind(engine, gil_check.needs)) == 1
    assert fwd(gil_check.needs) == 1                 # a Function, not a thunk
    assert fwd(gil_check.free) == 0
    assert fwd(nt.address(gil_check.needs.address, nogil=False)) == 1
    # bound, a non-thunk function's own need counts too
    assert bind(engine, fns.call_int, gil_check.needs)() == 1


FIF = "int (int (*f)(void), int a, int (*g)(void))"      # 100 a + 10 f() + g()


def gil_values(engine, gil_check):
    """int (void) values over PyGILState_Check in every spelling, each with
    the GIL need it carries: (name, value, needs). None: a thunk's address
    in a spelling that says otherwise of itself (the thunk's own need is
    its dependency's), where bound and forwarded must only agree."""
    needs, free = bind(engine, gil_check.needs), bind(engine, gil_check.free)
    addr = gil_check.needs.address
    return [
        ("thunk that needs it", needs, True),
        ("thunk that does not", free, False),
        ("Function(nogil=False)", gil_check.needs, True),
        ("Function", gil_check.free, False),
        ("address(nogil=False)", nt.address(addr, nogil=False), True),
        ("address", nt.address(addr), False),
        ("capsule", nt._core._capsule(addr, "int (void)", None), True),   # capsules need it
        ("capsule, nogil=True", nt.Function(addr, "int (void)"), False),
        ("ctypes", ctypes.cast(addr, ctypes.CFUNCTYPE(ctypes.c_int)), False),
        ("cffi", _FFI.cast("int (*)(void)", addr), False),
        ("address of a thunk that needs it", nt.address(needs.address), True),
        ("ctypes of a thunk that needs it", needs.ctypes, True),
        ("cffi of a thunk that needs it", needs.cffi(_FFI), True),
        ("capsule of a thunk that needs it", needs.lowlevelcallable().function, True),
        ("ctypes of a thunk that does not", free.ctypes, False),
        ("capsule of a thunk that does not", free.lowlevelcallable().function, None),
        ("address(nogil=False) of a thunk that does not",
         nt.address(free.address, nogil=False), None),
    ]


def test_a_function_value_needs_the_gil_alike_bound_and_forwarded(fns, engine, gil_check):
    """Every spelling of a function value: bound, the thunk keeps the GIL
    (t.nogil False, its calls see the GIL held) exactly when forwarded,
    one call keeps it; calls with values of either need alternate, and the
    forwarding thunk's own need never changes."""
    fwd = bind(engine, fns.call_int, nt.ARG)
    for name, value, needs in gil_values(engine, gil_check) * 2:
        bound = bind(engine, fns.call_int, value)
        got = (bound.nogil, bound(), fwd(value))
        if needs is None:
            assert got[1] == got[2] == int(not got[0]), (name, got)
        else:
            assert got == (not needs, int(needs), int(needs)), (name, got)
        assert fwd.nogil, name


def test_the_gil_is_kept_when_any_forwarded_function_needs_it(cfn, engine, gil_check):
    """Two function pointers forwarded around a bound int (the thunk's
    second parameter is the target's third), every pair of values: the call
    keeps the GIL if either needs it, and both see the same. One forwarded
    beside a bound function, before and after a forwarded int; a bound
    function that needs it keeps it whatever is forwarded, and beside a
    bound thunk that does not (on either side of it)."""
    fif = cfn("f_i_FiF", FIF)
    values = [(n, v, w) for n, v, w in gil_values(engine, gil_check) if w is not None]
    both = bind(engine, fif, nt.ARG, 3, nt.ARG)
    first = bind(engine, fif, nt.ARG, nt.ARG, gil_check.free)    # f, then a
    last = bind(engine, fif, gil_check.free, nt.ARG, nt.ARG)     # a, then g
    held = bind(engine, fif, gil_check.needs, nt.ARG, nt.ARG)
    assert (both.nogil, first.nogil, last.nogil, held.nogil) == (True, True, True, False)
    free = bind(engine, gil_check.free)
    for f, g in ((gil_check.needs, free), (free, nt.address(gil_check.free.address, nogil=False))):
        beside = bind(engine, fif, f, nt.ARG, g)
        assert (beside.nogil, beside.dependencies, beside(7)) == (False, (free,), 711)
    for n1, v1, w1 in values:
        for n2, v2, w2 in values:
            assert both(v1, v2) == 300 + 11 * (w1 or w2), (n1, n2)
    for name, value, needs in values:
        assert first(value, 4) == 400 + 11 * needs, name
        assert last(5, value) == 500 + 11 * needs, name
        assert held(6, value) == 611, name


def test_the_gil_need_of_a_forwarded_function_through_chains(fns, cfn, engine, gil_check):
    """Forwarded values whose need comes from below them (a thunk over a
    thunk that needs the GIL, two levels down), forwarded through thunks
    that forward them on (two levels up), and a need bound at the bottom of
    a forwarding chain, rebound away and back."""
    needs, free = bind(engine, gil_check.needs), bind(engine, gil_check.free)
    over_needs = bind(engine, fns.call_int, needs)          # int (void): needs it, from below
    over_free = bind(engine, fns.call_int, free)
    deep_needs, deep_free = bind(engine, over_needs), bind(engine, over_free)
    assert (over_needs.nogil, over_free.nogil, deep_needs.nogil, deep_free.nogil) == (
        False, True, False, True)
    fwd = bind(engine, fns.call_int, nt.ARG)                # int (int (*)(void))
    top = bind(engine, fwd, nt.ARG)                         # forwards to fwd, which forwards
    topper = bind(engine, top, nt.ARG)
    assert (fwd.chain, top.chain, topper.chain) == (0, 1, 2)
    for t in (fwd, top, topper):
        assert t.nogil
        for value, want in ((over_needs, 1), (over_free, 0), (deep_needs, 1), (deep_free, 0),
                            (nt.address(deep_needs.address), 1), (deep_free.ctypes, 0),
                            (gil_check.needs, 1), (gil_check.free, 0),
                            (nt.address(gil_check.free.address, nogil=False), 1)):
            assert t(value) == want, (t.chain, value)
        assert t.nogil
    # bound at the bottom, forwarded above: the need is the chain's own,
    # and follows a rebind at the bottom (up is made while nothing below
    # needs it: a Function over a thunk takes the thunk's need as it is)
    low = bind(engine, cfn("f_i_FiF", FIF), free, 1, nt.ARG)
    up = bind(engine, low, nt.ARG)
    assert (low.nogil, up.nogil) == (True, True)
    assert (up(free), up(needs), up(deep_needs), up(deep_free)) == (100, 111, 111, 100)
    low.rebind(0, needs)
    assert (low.nogil, up.nogil) == (False, False)
    assert up(free) == up(needs) == 111
    low.rebind("f", free)
    assert (low.nogil, up.nogil, up(free)) == (True, True, 100)
    low.rebind(0, deep_needs)                               # three levels below low
    assert (low.nogil, up.nogil, up(free)) == (False, False, 111)


# ---------------------------------------------------------------- released dependencies


@pytest.mark.parametrize("how", ["target", "function value"])
def test_calling_a_thunk_whose_dependency_was_released_raises(fns, engine, how):
    inner = bind(engine, fns.d, nt.ARG)
    outer = bind(engine, inner, nt.ARG) if how == "target" \
        else bind(engine, fns.apply, inner, nt.ARG)
    top = bind(engine, fns.apply, outer, nt.ARG)
    assert top(1.0) == 1.0
    target = f"{fns.d.address:#x}"
    inner.release()
    what, remedy = (
        ("the target", "a target cannot be rebound: bind a new thunk over a live one")
        if how == "target" else
        ("argument 1 (f: double (*)(double))",
         "rebind that parameter, or bind again with live thunks"))
    with pytest.raises(ValueError) as info:
        outer(1.0)
    assert str(info.value) == (
        f"this thunk uses a released thunk (double (double) over double (double), target at "
        f"{target}) through {what}: a call would reach the released thunk's trap; {remedy} "
        f"(see docs/lifetime.md)")
    with pytest.raises(ValueError, match="uses a released thunk .* through argument 1"):
        top(1.0)                              # any level up
    with pytest.raises(ValueError, match="uses a released thunk"):
        bind(engine, fns.apply, outer, nt.ARG)
    fwd = bind(engine, fns.apply, nt.ARG, nt.ARG)
    with pytest.raises(ValueError, match="uses a released thunk"):
        fwd(outer, 1.0)                       # forwarded
    if how == "function value":               # rebinding a live one mends it
        outer.rebind(0, bind(engine, fns.d, nt.ARG))
        assert outer(3.0) == 3.0 and top(3.0) == 3.0


@pytest.mark.parametrize("spelling", list(_value_spellings()))
def test_a_released_thunk_spelled_any_way_is_refused(fns, engine, spelling):
    inner = bind(engine, fns.d, nt.ARG)
    value = _value_spellings()[spelling](inner)     # made while it was live
    inner.release()
    fwd = bind(engine, fns.apply, nt.ARG, nt.ARG)
    if spelling == "thunk":                          # its address is gone
        with pytest.raises(ValueError, match="released"):
            bind(engine, fns.apply, value, nt.ARG)
        return
    with pytest.raises(ValueError, match=r"argument 1 \(f: .*\) is a released thunk"):
        bind(engine, fns.apply, value, nt.ARG)
    with pytest.raises(ValueError, match=r"argument 1 \(f: .*\) is a released thunk"):
        fwd(value, 1.0)
    live = bind(engine, fns.apply, bind(engine, fns.d, nt.ARG), nt.ARG)
    with pytest.raises(ValueError, match="is a released thunk"):
        live.rebind(0, value)
    assert live(2.0) == 2.0


def test_dependency_released_while_the_outer_thunk_converts(fns, engine):
    inner = bind(engine, fns.d, nt.ARG)
    with pytest.raises(ValueError, match=r"argument 1 \(f: .*\) is a released thunk"):
        bind(engine, fns.integrate, inner, Releasing(inner), 1.0, 10)
    inner = bind(engine, fns.d, nt.ARG)
    with pytest.raises(ValueError, match="the target is a released thunk"):
        bind(engine, inner, Releasing(inner))


def test_rebind_to_a_thunk_that_uses_a_released_one_is_refused(fns, engine):
    inner = bind(engine, fns.d, nt.ARG)
    broken = bind(engine, fns.apply, inner, nt.ARG)
    t = bind(engine, fns.apply, bind(engine, fns.d, nt.ARG), nt.ARG)
    inner.release()
    with pytest.raises(ValueError, match="uses a released thunk"):
        t.rebind(0, broken)
    assert t(5.0) == 5.0


def test_composed_depth_is_bounded_for_libffi(cfn):
    t = nt.bind(cfn("f_d_d", "double (double)"), nt.ARG, engine="ffi")
    chain = [t]
    for _ in range(127):
        chain.append(nt.bind(chain[-1], nt.ARG, engine="ffi"))
    assert chain[-1].chain == 127
    with pytest.raises(ValueError, match=r"chain of 129 thunks.*at most 128 levels on the "
                                         r"engines in this chain " + LIMITS):
        nt.bind(chain[-1], nt.ARG, engine="ffi")
    with pytest.raises(ValueError, match="at most 128 levels"):
        nt.bind(chain[-1], nt.ARG, engine="native")    # a libffi thunk is in the chain
    # the deepest allowed chain runs on a 256 KiB thread stack
    threading.stack_size(256 * 1024)
    try:
        assert run_bounded(lambda: chain[-1](2.5)) == 2.5
    finally:
        threading.stack_size(0)


def test_composed_depth_of_native_chains(cfn):
    t = nt.bind(cfn("f_d_d", "double (double)"), nt.ARG, engine="native")
    chain = [t]
    for _ in range(1023):
        chain.append(nt.bind(chain[-1], nt.ARG, engine="native"))
    assert chain[-1].chain == 1023
    with pytest.raises(ValueError, match=r"at most 1024 levels .*native-[\w-]+: 1024"):
        nt.bind(chain[-1], nt.ARG, engine="native")
    threading.stack_size(256 * 1024)
    try:
        assert run_bounded(lambda: chain[-1](2.5)) == 2.5
    finally:
        threading.stack_size(0)


# Random rebinds of users' function-pointer parameters among two thunks and
# a plain function, with thunks over those two made and dropped between,
# then a release: a user that holds the released thunk is
# refused from Python, one that does not still runs. Every edge is moved
# around the dependency and user lists (life/commit.c commit_dep, unlink_user),
# so a list left stale by one move shows as a user refused wrongly, or not
# refused and calling the trap (an abort): run in a child process.
DEPENDENCY_WALK = """
import ctypes, random, sys
import numthunk as nt
lib = ctypes.CDLL({path!r})
def fn(name, sig):
    return nt.Function(ctypes.cast(getattr(lib, name), ctypes.c_void_p).value, sig, owner=lib)
plain = fn("f_d_d", "double (double)")
both = fn("f_d_FFd", "double (double (*f)(double), double (*g)(double), double x)")
engine = {engine!r}
for trial in range({trials}):
    rnd = random.Random(trial)
    deps = [nt.bind(plain, nt.ARG, engine=engine) for _ in range(2)]
    users = [nt.bind(both, plain, plain, nt.ARG, engine=engine) for _ in range(3)]
    holds = [[None, None] for _ in users]
    overs = []        # thunks whose target is a dependency: (thunk, which)
    for _ in range(rnd.randint(1, 14)):
        u, i, d = rnd.randrange(3), rnd.randrange(2), rnd.choice([None, 0, 1])
        if d is not None and rnd.random() < 0.2:
            overs.append((nt.bind(deps[d], nt.ARG, engine=engine), d))
        elif overs and rnd.random() < 0.1:
            del overs[rnd.randrange(len(overs))]
        else:
            users[u].rebind(i, plain if d is None else deps[d])
            holds[u][i] = d
    order = rnd.sample(range(2), 2)
    released = set()
    for victim in order:
        deps[victim].release()
        released.add(victim)
        for u, t in enumerate(users):
            if t is None:
                continue
            broken = any(d in released for d in holds[u])
            try:
                value = t(1.5)
            except ValueError as exc:
                assert "uses a released thunk" in str(exc), exc
                assert broken, (trial, u, holds[u], "refused, but holds no released thunk")
            else:
                assert not broken and value == 3.0, (trial, u, holds[u], value)
        for t, d in overs:
            try:
                value = t(1.5)
            except ValueError as exc:
                assert "released" in str(exc) and d in released, (trial, d, exc)
            else:
                assert d not in released and value == 1.5, (trial, d, value)
        # a user dropped before the next release leaves no entry behind
        gone = rnd.randrange(3)
        users[gone] = None
print("walked", {trials})
"""


def test_users_follow_every_rebind_of_their_dependencies(fixture_path, engine):
    from thunks import run_py
    out = run_py(DEPENDENCY_WALK.format(path=fixture_path, engine=engine, trials=400))
    assert out.returncode == 0 and out.stdout.strip() == "walked 400", out.stderr[-3000:]


def test_depth_and_gil_of_every_thunk_above_follow_a_rebind_below(fns, cfn, engine):
    """A rebind in the middle of a composition changes the depth and the GIL
    need of every thunk above it, at once: each is checked against its own
    computation (no thunk below: 0, else one more than the deepest thunk it
    calls; the GIL kept if anything below keeps it) after every step of a
    random walk, and the top still computes."""
    import random

    gil_d = cfn("f_d_d", D_D, nogil=False)

    def tower(n, base):
        t = nt.bind(base, nt.ARG, engine=engine)
        for _ in range(n - 1):
            t = nt.bind(t, nt.ARG, engine=engine)
        return t

    mid = nt.bind(fns.apply, fns.d, nt.ARG, engine=engine)
    top = nt.bind(fns.apply, mid, nt.ARG, engine=engine)
    over = nt.bind(top, nt.ARG, engine=engine)
    rnd = random.Random(7)
    for _ in range(60):
        n, base = rnd.randrange(0, 6), rnd.choice([fns.d, gil_d])
        below = base if n == 0 else tower(n, base)
        mid.rebind(0, below)
        depth = 0 if n == 0 else n       # the tower's top is n - 1 deep
        assert (mid.chain, top.chain, over.chain) == (depth, depth + 1, depth + 2), n
        nogil = base is fns.d
        assert (mid.nogil, top.nogil, over.nogil) == (nogil,) * 3, (n, nogil)
        assert over(2.5) == 2.5
