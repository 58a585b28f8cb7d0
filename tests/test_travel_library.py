"""Where a travelling function is found: Function.from_library (its
spellings, the library kept, missing libraries and symbols, constructors
run on unpickling), the loader that names a function's library (dladdr,
dlinfo, dl_iterate_phdr, ELF segments), and names that are no functions
(variables refused, IFUNCs and untyped code symbols taken)."""

import ctypes
import ctypes.util
import gc
import os
import pathlib
import pickle
import re
import struct
import subprocess
import sys

import numpy as np
import pytest

import numthunk as nt

from conftest import ENGINES
from travel import HERE, ROOT, SUM, lowest_mapping


def test_library_paths_without_dlinfo_come_from_the_cdll_name(fixture_path, monkeypatch):
    # a C library without dlinfo (the loader's own answer): the path is the
    # name the CDLL was opened with, absolute where it names a file by path;
    # the process itself (no name) and a bare name stay as they are
    from numthunk import _loader
    dladdr, _dlinfo, dladdr1, phdr = _loader._dl()
    monkeypatch.setattr(_loader, "_dl_functions", (dladdr, None, dladdr1, phdr))
    assert _loader.loaded_path(ctypes.CDLL(None)) is None
    rel = os.path.relpath(fixture_path)
    assert os.sep in rel
    assert _loader.loaded_path(ctypes.CDLL(rel)) == os.path.abspath(fixture_path)
    assert _loader.loaded_path(ctypes.CDLL("libm.so.6")) == "libm.so.6"


_DL_NAMES = ("dladdr", "dlinfo", "dladdr1", "dl_iterate_phdr")


def _cdll_hiding(hidden):
    """A ctypes.CDLL whose libraries lack the loader functions hidden(name)
    names: as a C library without them (glibc before 2.34 keeps them in
    libdl; musl has no dladdr1 or dlinfo)."""
    class CDLL(ctypes.CDLL):
        def __getattr__(self, sym):
            if sym in hidden(self._name):
                raise AttributeError(sym)
            return super().__getattr__(sym)
    return CDLL


def test_loader_functions_come_from_libdl_or_not_at_all(fixture_path, monkeypatch):
    # each of the four is taken from the first of the C library and libdl
    # that has it, and is None where neither has it; without them the
    # loader's answers degrade to what the CDLL says of itself
    from numthunk import _loader
    libdl = ctypes.util.find_library("dl")
    assert libdl is not None
    lib = ctypes.CDLL(fixture_path)
    addr = ctypes.cast(lib.f_d_pi, ctypes.c_void_p).value
    path = _loader.loaded_path(lib)          # as the C library's dlinfo says
    monkeypatch.setattr(_loader, "_dl_functions", None)
    monkeypatch.setattr(_loader.ctypes, "CDLL",
                        _cdll_hiding(lambda name: _DL_NAMES if name is None else ()))
    found = _loader._dl()
    assert all(f is not None for f in found)
    assert [f.__name__ for f in found] == list(_DL_NAMES)
    assert _loader.loaded_path(lib) == path
    # libdl without dlinfo and dladdr1, the C library without any
    monkeypatch.setattr(_loader, "_dl_functions", None)
    monkeypatch.setattr(_loader.ctypes, "CDLL", _cdll_hiding(
        lambda name: _DL_NAMES if name is None else ("dlinfo", "dladdr1")))
    dladdr, dlinfo, dladdr1, phdr = _loader._dl()
    assert dlinfo is None and dladdr1 is None and dladdr is not None and phdr is not None
    assert _loader.dladdr(addr)[1] == "f_d_pi"
    # none at all: no path from the loader, no symbol check, no lookup
    monkeypatch.setattr(_loader, "_dl_functions", None)
    monkeypatch.setattr(_loader.ctypes, "CDLL", _cdll_hiding(lambda name: _DL_NAMES))
    assert _loader._dl() == (None, None, None, None)
    assert _loader.dladdr(addr) is None
    assert _loader.code_symbol_problem(addr) is None
    rel = os.path.relpath(fixture_path)
    assert _loader.loaded_path(ctypes.CDLL(rel)) == os.path.abspath(fixture_path)


def test_a_dladdr_answer_without_a_file_name_is_no_answer(fixture_path, monkeypatch):
    # a C library's dladdr may report success and leave dli_fname NULL (the
    # fields are its to fill): the loader takes that as not found, as it
    # takes a failure, and a found one as the file and symbol
    from numthunk import _loader
    real = _loader._dl()
    addr = ctypes.cast(ctypes.CDLL(fixture_path).f_d_pi, ctypes.c_void_p).value
    assert _loader.dladdr(addr)[1] == "f_d_pi"
    proto = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(_loader._DlInfo))
    for answer in (1, 0):
        quiet = proto(lambda _address, _info, answer=answer: answer)   # fills nothing
        monkeypatch.setattr(_loader, "_dl_functions", (quiet, *real[1:]))
        assert _loader.dladdr(addr) is None, answer


def _load_segments(path, base):
    """[(start, end, executable)] of the PT_LOAD program headers of an ELF64
    file, read from the file itself, relocated by base."""
    with open(path, "rb") as f:
        elf = f.read()
    assert elf[:4] == b"\x7fELF" and elf[4] == 2, "an ELF64 file"
    phoff, = struct.unpack_from("<Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    out = []
    for k in range(phnum):
        p_type, p_flags, _off, vaddr, _paddr, _filesz, memsz, _align = struct.unpack_from(
            "<IIQQQQQQ", elf, phoff + k * phentsize)
        if p_type == 1:                                   # PT_LOAD
            out.append((base + vaddr, base + vaddr + memsz, bool(p_flags & 1)))
    return out


def test_segments_are_found_by_their_bounds(fixture_path):
    # _segment_of (dl_iterate_phdr) against the file's own program headers:
    # each loaded segment holds its first and last byte, and neither the
    # byte before it nor the one past its end (unless a neighbour does)
    from numthunk import _loader
    lib = ctypes.CDLL(fixture_path)
    info = _loader._DlInfo()
    assert _loader._dl()[0](ctypes.cast(lib.f_d_pi, ctypes.c_void_p).value,
                            ctypes.byref(info))
    segments = _load_segments(fixture_path, info.dli_fbase)
    assert any(x for _s, _e, x in segments) and not all(x for _s, _e, x in segments)
    name = os.fsdecode(info.dli_fname)
    for start, end, executable in segments:
        assert _loader._segment_of(start) == (name, executable)
        assert _loader._segment_of(end - 1) == (name, executable)
        for outside in (start - 1, end):
            if not any(s <= outside < e for s, e, _x in segments):
                found = _loader._segment_of(outside)
                assert found is None or found[0] != name, hex(outside)


def test_the_segments_of_the_program_itself_are_named_the_program():
    # the loader gives the executable no name: its segments, read from the
    # file and placed where /proc/self/maps shows it, are "the program"
    from numthunk import _loader
    exe = os.path.realpath(sys.executable)
    placed = _load_segments(exe, 0)
    base = lowest_mapping(exe) - (min(s for s, _e, _x in placed) & ~0xFFF)
    for start, end, executable in _load_segments(exe, base):
        assert _loader._segment_of(start) == ("the program", executable)
        assert _loader._segment_of(end - 1) == ("the program", executable)


# ------------------------------------------------------------ from_library


def test_from_library_spellings(fixture_path, lib, tmp_path, monkeypatch):
    direct = ctypes.cast(lib.f_d_pi, ctypes.c_void_p).value
    rel = os.path.relpath(fixture_path)
    for spelling in (fixture_path, pathlib.Path(fixture_path), rel, lib,
                     os.fsencode(fixture_path)):
        fn = nt.Function.from_library(spelling, "f_d_pi", SUM)
        assert fn.address == direct, spelling
        assert fn.name == "f_d_pi" and str(fn.signature) == "double (const double *, int)"
        assert fn(np.array([1.0, 2.0]), 2) == 3.0
    libm = ctypes.CDLL("libm.so.6")
    cos = ctypes.cast(libm.cos, ctypes.c_void_p).value
    for spelling in ("m", "libm.so.6", libm):
        fn = nt.Function.from_library(spelling, "cos", "double (double)")
        assert fn.address == cos and fn(0.0) == 1.0
    # a relative path is recorded as the file loaded: it unpickles from any cwd
    fn = nt.Function.from_library(rel, "f_d_pi", SUM)
    monkeypatch.chdir(tmp_path)
    assert pickle.loads(pickle.dumps(fn)).address == direct


def test_from_library_records_names_as_names(fixture_path):
    """A name the loader resolves travels as the name (the other machine's
    loader finds its own copy); a path travels as the absolute path."""
    assert nt.Function.from_library("libm.so.6", "cos", "double (double)")._recipe == \
        ("symbol", "libm.so.6", "cos")
    assert nt.Function.from_library("m", "cos", "double (double)")._recipe[1] == "libm.so.6"
    rec = nt.Function.from_library(os.path.relpath(fixture_path), "f_d_pi", SUM)._recipe
    assert rec == ("symbol", os.path.abspath(fixture_path), "f_d_pi")


def test_from_library_missing_library():
    with pytest.raises(OSError, match=r"cannot load library 'ntk_no_such_lib' for symbol "
                                      r"'f_x'.*find_library"):
        nt.Function.from_library("ntk_no_such_lib", "f_x", "double (double)")
    with pytest.raises(OSError, match=r"cannot load library './nope/libx.so' for symbol "
                                      r"'f_x': no such file '.*/nope/libx.so'"):
        nt.Function.from_library("./nope/libx.so", "f_x", "double (double)")


def test_from_library_file_that_is_no_library(fixture_path, tmp_path):
    text = tmp_path / "libntk_text.so"
    text.write_text("not a shared library\n")
    with pytest.raises(OSError, match=rf"^Function\.from_library\({re.escape(repr(str(text)))}, "
                                      rf"'f_d_d'\): cannot load library "
                                      rf"{re.escape(repr(str(text)))} for symbol 'f_d_d': .*"
                                      r"(invalid ELF header|file too short)"):
        nt.Function.from_library(str(text), "f_d_d", "double (double)")
    lib = tmp_path / "libntk_copy.so"
    lib.write_bytes(pathlib.Path(fixture_path).read_bytes())
    assert nt.Function.from_library(str(lib), "f_d_d", "double (double)")(1.5) == 1.5


CTOR_SOURCE = """
#include <stdio.h>
#include <stdlib.h>

/* writes "ran" to the file $NTK_CTOR_MARK names, if set, when loaded */
__attribute__((constructor)) static void mark(void)
{
    const char *path = getenv("NTK_CTOR_MARK");
    FILE *f = path != NULL ? fopen(path, "w") : NULL;
    if (f != NULL) {
        fputs("ran", f);
        fclose(f);
    }
}

double ctor_twice(double x) { return 2 * x; }
"""


@pytest.mark.parametrize("engine", ENGINES)
def test_unpickling_opens_the_library_and_runs_its_constructors(tmp_path, engine):
    """What docs/travel.md warns of: pickle.loads alone, nothing called,
    loads the library the pickle names, and its constructor runs; the
    warning stands before the page's first example, and in from_library's
    help."""
    from ntbuild import compile_shared

    src = tmp_path / "ctor.c"
    src.write_text(CTOR_SOURCE)
    path = compile_shared(str(src), "ntk_ctor")
    fn = nt.Function.from_library(path, "ctor_twice", "double (double)")
    data = pickle.dumps((fn, nt.bind(fn, 1.5, engine=engine)))
    mark = tmp_path / "mark"
    env = dict(os.environ, NTK_CTOR_MARK=str(mark),
               PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c",
                           "import pickle, sys; pickle.loads(sys.stdin.buffer.read())"],
                          input=data, env=env, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert mark.read_text() == "ran"
    mark.unlink()
    proc = subprocess.run([sys.executable, "-c", "import numthunk"], env=env, timeout=120)
    assert proc.returncode == 0 and not mark.exists()      # the pickle, not the import
    with open(os.path.join(HERE, os.pardir, "docs", "travel.md")) as f:
        page = f.read()
    warning = page.index("```{warning}\nUnpickling a thunk or a `Function` runs code")
    assert warning < page.index("```python")
    assert "runs its constructors" in nt.Function.from_library.__doc__


def test_from_library_missing_symbol(fixture_path):
    with pytest.raises(OSError) as info:
        nt.Function.from_library(os.path.relpath(fixture_path), "f_no_such", SUM)
    msg = str(info.value)
    assert "symbol 'f_no_such' not found" in msg
    assert repr(os.path.relpath(fixture_path)) in msg
    assert f"(loaded from {os.path.abspath(fixture_path)})" in msg
    with pytest.raises(OSError, match=r"symbol 'no_such_fn' not found in library 'm' "
                                      r"\(loaded from /\S*libm\.so\.6\)"):
        nt.Function.from_library("m", "no_such_fn", "double (double)")


def test_from_library_bad_arguments(fixture_path):
    with pytest.raises(TypeError, match="library must be a path, a library name or a "
                                        "ctypes.CDLL, got int"):
        nt.Function.from_library(3, "f_d_pi", SUM)
    with pytest.raises(TypeError, match="symbol must be a non-empty str"):
        nt.Function.from_library(fixture_path, b"f_d_pi", SUM)
    with pytest.raises(ValueError):
        nt.Function.from_library(fixture_path, "f_d_pi", "double (double")


def test_from_library_keeps_the_library(fixture_path):
    """The CDLL is the Function's owner and the thunk holds the Function."""
    lib = ctypes.CDLL(fixture_path)
    fn = nt.Function.from_library(lib, "f_d_pi", SUM, nogil=False)
    assert fn.owner is lib and fn.nogil is False
    a = np.array([4.0, 5.0])
    t = nt.bind(fn, a, nt.size(a))
    del fn, lib
    gc.collect()
    assert t.target.owner._name == fixture_path and t() == 9.0
    assert pickle.loads(pickle.dumps(t)).nogil is False


# ------------------------------------------------------------ names that are no functions


@pytest.mark.parametrize("symbol,why", [
    ("rec_args", r"'rec_args' is a data symbol \(STT_OBJECT\), not a function"),
    ("rec_count", r"'rec_count' is a data symbol \(STT_OBJECT\)"),
    ("f_table", r"'f_table' is a data symbol \(STT_OBJECT\)"),
    ("tls_counter", r"its address 0x[0-9a-f]+ is in no loaded object's code \(a thread-local "
                    r"variable\?\)"),
])
def test_from_library_refuses_variables(fixture_path, symbol, why):
    with pytest.raises(TypeError, match=rf"Function.from_library\(.*, '{symbol}'\): {why}.*; "
                                        "only a function can be a target"):
        nt.Function.from_library(fixture_path, symbol, "double (double)")


def test_from_library_takes_functions_and_ifuncs_not_libc_variables():
    with pytest.raises(TypeError, match="'environ' is a data symbol"):
        nt.Function.from_library("libc.so.6", "environ", "double (double)")
    # glibc's memcpy and strlen are GNU indirect functions: the loader
    # resolves them to an implementation, which is code
    memcpy = nt.Function.from_library("libc.so.6", "memcpy", "void *(void *, void *, size_t)")
    strlen = nt.Function.from_library("libc.so.6", "strlen", "size_t (const char *)")
    src, dst = np.arange(4.0), np.zeros(4)
    nt.bind(memcpy, dst, src, 32)()
    assert dst.tolist() == src.tolist()
    assert nt.bind(strlen, np.frombuffer(b"numthunk\0", dtype=np.uint8))() == 8


@pytest.mark.skipif(__import__("platform").machine() not in ("x86_64", "aarch64"),
                    reason="the fixture's label is written in x86-64 and AArch64 assembly")
def test_from_library_takes_a_code_symbol_without_a_type():
    """An assembly label without .type is an STT_NOTYPE symbol: in a code
    segment it is a function, taken and called (a data symbol of no type
    would not be in one)."""
    import ntbuild

    path = ntbuild.compile_shared(os.path.join(os.path.dirname(__file__), "fixtures",
                                               "notype.c"), "notype")
    out = subprocess.run(["readelf", "--dyn-syms", "-W", path], capture_output=True,
                         text=True)
    if out.returncode == 0:             # binutils, where it is: the fixture is what it says
        assert re.search(r"\bNOTYPE\s+GLOBAL\s+DEFAULT\s+\d+\s+nt_notype_twice\b",
                         out.stdout), out.stdout
    f = nt.Function.from_library(path, "nt_notype_twice", "long (long)")
    assert nt.bind(f, nt.ARG)(21) == 42
    assert pickle.loads(pickle.dumps(nt.bind(f, 5)))() == 10


def test_from_library_refuses_nul_in_names(fixture_path):
    with pytest.raises(ValueError, match=r"the symbol name has a NUL byte at 3 \(the loader "
                                         "would read only the part before it\\)"):
        nt.Function.from_library(fixture_path, "f_d\0_pi", SUM)
    with pytest.raises(ValueError, match="the library name has a NUL byte"):
        nt.Function.from_library(fixture_path + "\0.so", "f_d_pi", SUM)


def test_unpickling_a_symbol_that_became_a_variable_is_refused(fixture_path):
    """The other process's library may define the name as a variable: the
    recipe is checked there as from_library checks it here."""
    with pytest.raises(TypeError, match=r"symbol 'rec_count' of library .* in this process: "
                                        r"'rec_count' is a data symbol"):
        nt._recipe._function_from_recipe(("symbol", fixture_path, "rec_count"),
                                          "double (double)", True, "rec_count", None, None)


def test_unpickling_a_cffi_function_checks_its_declared_type(paths):
    """A cffi API-mode module declares its functions' types: a pickle made
    for another signature is refused (a library symbol declares none)."""
    import ntk_travel_cffi as api

    t = nt.bind(api.lib.twice, nt.ARG)
    blob = pickle.dumps(t)
    nt._recipe._functions.clear()
    assert pickle.loads(blob)(1.5) == 3.0
    with pytest.raises(TypeError, match=r"^the target twice has the signature 'double "
                                        r"\(double\)' in this process; the pickled thunk was "
                                        r"made for 'float \(float\)'"):
        nt._recipe._function_from_recipe(("cffi", "ntk_travel_cffi", "twice"),
                                          "float (float)", True, "twice", None, None)
    # a Function without a name is named by its recipe
    with pytest.raises(TypeError, match=r"^the target \('ntk_travel_cffi', 'twice'\) has "):
        nt._recipe._function_from_recipe(("cffi", "ntk_travel_cffi", "twice"),
                                          "float (float)", True, None, None, None)
