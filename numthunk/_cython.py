"""Cython adapter: ``cdef api`` and ``cpdef`` functions from ``__pyx_capi__``.

A Cython module exports its C functions as capsules in the module dict
``__pyx_capi__``; each capsule's name is the function's C signature in
Cython's spelling, where a module's private typedefs appear mangled
(``__pyx_t_5numpy_float64_t``: ``__pyx_t_``, then ``<len><part>_`` for each
part of the module's dotted name, then the typedef's own name). This module
reads the pointer from the capsule, resolves those names to C types and
returns what a :class:`numthunk.Function` ready for :func:`numthunk.bind`
is made of (numthunk._recipe makes it, and records the call for pickling).
It also reads Cython's memoryview declarations (``'double[:, ::1]'``).

Typedef resolution order: the user's ``typedefs=`` (short or mangled name),
NumPy's standard Cython typedefs, then the ``ctypedef`` lines of the ``.pxd``
(or ``.pyx``) of the module named inside the mangled name, found next to
that installed module, following ``cimport`` and chains of typedefs.

Needs neither Cython nor a compiler: only the installed module (and, for
its own typedefs, its ``.pxd``/``.pyx``).
"""

import difflib
import glob
import importlib
import importlib.util
import os
import re
import sys

from . import _core, _numba_sig
from ._signature import Signature

__all__ = ["cython_target", "parse_memview", "CythonError"]


_MEMVIEW_RE = re.compile(r"^\s*(const\s+)?(.+?)\s*\[(.*)\]\s*$")


def parse_memview(decl, typedefs=None):
    """'const double[:, ::1]' -> (dtype text, ndim, contig, const); a
    dtype in Numba's names is given to the core as C (numthunk/_numba_sig.py)."""
    if isinstance(decl, tuple):
        if decl and isinstance(decl[0], str):
            return (_numba_sig.translate_type(decl[0])[0],) + decl[1:]
        return decl
    if not isinstance(decl, str):
        raise TypeError(f"memoryview declaration: expected text such as 'double[:, ::1]', "
                        f"got {type(decl).__name__} {decl!r}")
    if "\0" in decl:
        raise ValueError(f"memoryview declaration {decl!r}: NUL byte")
    m = _MEMVIEW_RE.match(decl)
    if not m:
        raise ValueError(f"memoryview declaration {decl!r}: expected e.g. 'double[:, ::1]'")
    is_const, dtype, dims = bool(m.group(1)), m.group(2).strip(), m.group(3)
    if typedefs and dtype in typedefs:
        dtype = typedefs[dtype]
    dtype = _numba_sig.translate_type(dtype)[0]
    parts = [p.replace(" ", "") for p in dims.split(",")]
    if any(p not in (":", "::1") for p in parts):    # split gives one part at least
        raise ValueError(f"memoryview declaration {decl!r}: each axis must be ':' or '::1'")
    contig = None
    if "::1" in parts:
        if parts[-1] == "::1" and parts.count("::1") == 1:
            contig = "C"
        elif parts[0] == "::1" and parts.count("::1") == 1:
            contig = "F"
        else:
            raise ValueError(f"memoryview declaration {decl!r}: '::1' must be the first "
                             "or the last axis")
    return (dtype, len(parts), contig, is_const)


# Cython spellings of C types that the C parser spells differently.
_CYTHON_SPELLINGS = {
    "long double": None, "long double complex": None,
    "float complex": "__pyx_t_float_complex", "double complex": "__pyx_t_double_complex",
}


def _kind_typedef(k):
    """What NumPy's <kind>_t typedef of a kind table row is: C's exact-width
    integer of that name, or the row's float or complex type as Cython
    spells it."""
    if isinstance(k.max, int):
        return f"{k.name}_t"
    return _CYTHON_SPELLINGS.get(k.c, k.c)


# NumPy's numpy/__init__.pxd typedefs as C types the parser knows: one
# <kind>_t per kind of the kind table but bool (int32_t, float64_t,
# complex128_t), then NumPy's other names. int_t, long_t, uint_t and ulong_t
# are NumPy 1.x's (npy_long, npy_longlong, npy_ulong, npy_ulonglong); a
# module compiled against NumPy 1 keeps those names in its capsules.
NUMPY_TYPEDEFS = {
    **{f"{k.name}_t": _kind_typedef(k) for k in _core.kinds.values() if k.name != "bool"},
    "cfloat_t": "__pyx_t_float_complex", "cdouble_t": "__pyx_t_double_complex",
    "complex_t": "__pyx_t_double_complex",
    "longlong_t": "long long", "ulonglong_t": "unsigned long long",
    "intp_t": "npy_intp", "uintp_t": "npy_uintp",
    "float_t": "double", "double_t": "double",
    "int_t": "long", "long_t": "long long", "uint_t": "unsigned long",
    "ulong_t": "unsigned long long",
    "npy_intp": "npy_intp", "npy_uintp": "npy_uintp",
    # NumPy 1.x's .pxd declares these in `cdef extern` as `ctypedef int`, a
    # stand-in: C's definition is pointer-sized.
    "Py_intptr_t": "intptr_t", "Py_uintptr_t": "uintptr_t",
}

_IDENT_RE = re.compile(r"[A-Za-z_]\w*")
_FUSE_INDEX_RE = re.compile(r"^\d+(?:_\d+)*$")
# Words of C declarators that are not type names.
_C_WORDS = {"const", "volatile", "struct", "union", "enum", "signed", "unsigned", "short",
            "long", "int", "char", "float", "double", "void", "_Complex", "complex"}


class CythonError(TypeError):
    pass


def _demangle(name):
    """'__pyx_t_6ntk_cy_5types_REAL' -> ('ntk_cy.types', 'REAL'), or None."""
    if not name.startswith("__pyx_t_"):
        return None
    rest = name[len("__pyx_t_"):]
    parts = []
    while rest[:1].isdigit():
        m = re.match(r"(\d+)", rest)
        n = int(m.group(1))
        body = rest[m.end():m.end() + n]
        if len(body) != n or rest[m.end() + n:m.end() + n + 1] != "_":
            return None
        parts.append(body.replace("_dot_", "."))
        rest = rest[m.end() + n + 1:]
    if not parts or not rest:
        return None
    return ".".join(parts), rest


_builtin_cache = {}


def _is_builtin(text):
    """Whether ``text`` is a type without typedefs: C, or Numba's and
    NumPy's names (read as C by numthunk/_numba_sig.py)."""
    r = _builtin_cache.get(text)
    if r is None:
        try:
            # through a pointer, so that pointee-only names (DLTensor) count
            Signature(f"void ({text} *)")
            r = True
        except (ValueError, TypeError):
            r = False
        _builtin_cache[text] = r
    return r


# ------------------------------------------------------------ .pxd reading


class _Source:
    """The ctypedefs and cimports of one module's .pxd/.pyx files."""

    def __init__(self, modname, files):
        self.modname = modname
        self.files = []         # the files read: those given, then what they include
        self.typedefs = {}      # name -> raw Cython type text
        self.fnptrs = {}        # name -> (ret text, [arg texts])
        self.aliases = {}       # 'cnp' -> 'numpy' (cimport X as Y, cimport X)
        self.names = {}         # 'REAL' -> ('ntk_cy.types', 'REAL') (from X cimport)
        self.structs = {}       # 'zeros_full_output' -> 'struct' (ctypedef struct)
        self.fused = {}         # 'np_numeric_t' -> ['cnp.int8_t', ...] in order
        self.stars = []         # modules of 'from X cimport *', in order
        for path in files:
            self._read_file(path)

    def _read_file(self, path):
        if path in self.files:
            return              # included twice, or including itself
        self.files.append(path)
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        self._read(text)
        # `include "x.pxi"` is textual: Cython looks beside the including
        # file first (Cython/Compiler/Main.py, search_include_directories).
        for m in re.finditer(r"^[ \t]*include[ \t]+([\"'])([^\"'\n]+)\1", text, re.M):
            inc = os.path.join(os.path.dirname(path), m.group(2))
            if os.path.isfile(inc):
                self._read_file(inc)

    def _absolute(self, mod):
        if not mod.startswith("."):
            return mod
        level = len(mod) - len(mod.lstrip("."))
        base = self.modname.split(".")[:-level]
        rest = mod[level:]
        return ".".join(base + ([rest] if rest else []))

    def _read(self, text):
        # 'from X cimport (a,\n b)' on one line.
        text = re.sub(r"(\bcimport\s*)\(([^()]*)\)",
                      lambda m: m.group(1) + " ".join(m.group(2).split()), text)
        members = None          # the fused type whose member lines follow
        for raw in text.splitlines():
            line = raw.lstrip()
            if members is not None:
                item = line.split("#", 1)[0].strip()
                if raw[:1] in (" ", "\t") and item:
                    members.append(item.strip("()").strip())
                    continue
                if item:
                    members = None
            m = re.match(r"^ctypedef\s+fused\s+(\w+)\s*:", line)
            if m:
                members = self.fused[m.group(1)] = []
                continue
            if not line.startswith(("ctypedef ", "cimport ", "from ")):
                continue
            line = line.split("#", 1)[0].strip()
            m = re.match(r"^cimport\s+(.+)$", line)
            if m:
                for item in m.group(1).split(","):
                    w = item.split()
                    if len(w) == 3 and w[1] == "as":
                        self.aliases[w[2]] = w[0]
                    elif len(w) == 1:
                        self.aliases[w[0]] = w[0]
                        self.aliases[w[0].split(".")[0]] = w[0].split(".")[0]
                continue
            m = re.match(r"^from\s+(\S+)\s+cimport\s+(.+)$", line)
            if m:
                mod = self._absolute(m.group(1))
                if m.group(2).strip() == "*":
                    if mod not in self.stars:
                        self.stars.append(mod)
                    continue
                for item in m.group(2).split(","):
                    w = item.split()
                    if len(w) == 3 and w[1] == "as":
                        self.names[w[2]] = (mod, w[0])
                    elif len(w) == 1:
                        self.names[w[0]] = (mod, w[0])
                        # from pkg cimport submodule
                        self.aliases.setdefault(w[0], f"{mod}.{w[0]}")
                continue
            if not line.startswith("ctypedef "):
                continue
            body = line[len("ctypedef "):].rstrip(":").strip()
            words = body.split()
            first = words[0] if words else ""
            if first in ("struct", "union") and len(words) == 2:
                # a struct known by name: usable through a pointer, opaque
                self.structs[words[1]] = first
                continue
            if first in ("struct", "union", "enum", "fused", "class", "packed", "cppclass",
                         "public", "readonly"):
                continue
            m = re.match(r"^(.+?)\(\s*\*\s*(\w+)(?:\s+\"[^\"]*\")?\s*\)\s*\((.*)\)", body)
            if m:
                args = [a.strip() for a in _split_args(m.group(3)) if a.strip()]
                self.fnptrs[m.group(2)] = (m.group(1).strip(), args)
                continue
            m = re.match(r"^(.+?[\s*])(\w+)\s*(?:\"([^\"]*)\")?$", body)
            if m:
                self.typedefs[m.group(2)] = m.group(1).strip()
                if m.group(3):
                    self.typedefs[m.group(3)] = m.group(1).strip()


def _split_args(text):
    depth, cur, out = 0, "", []
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return out


_cython_version_cache = []


def _cython_version():
    """The installed Cython's version as Cython compares it to the
    ``.cython-NN`` of a file name ("3.1.2" -> 31), or None without Cython."""
    if not _cython_version_cache:
        import importlib.metadata  # not at import time: `import numthunk` stays lean

        try:
            m = re.match(r"^([0-9]+)[.]([0-9]+)", importlib.metadata.version("Cython"))
        except importlib.metadata.PackageNotFoundError:
            m = None
        _cython_version_cache.append(int(m.group(1) + m.group(2)) if m else None)
    return _cython_version_cache[0]


_VERSIONED_RE = re.compile(r"[.]cython-([0-9]+)[.][^./\\]+$")


def _cython_reads(directory, stem, ext):
    """The file Cython reads for ``<directory>/<stem><ext>``, or None.

    A package may ship versioned files beside the plain one: NumPy's
    ``__init__.cython-30.pxd`` is its header for Cython 3.0 and later, and
    from NumPy 2.5 its ``__init__.pxd`` is a stub that only fails on older
    Cythons. Cython takes the highest ``<stem>.cython-NN<ext>`` whose NN is at
    most its own version, else the plain file (Cython/Utils.py,
    find_versioned_file). Without Cython installed the highest NN is taken:
    whatever compiled the module was a Cython at least that new, as the
    versioned files exist for it."""
    plain = os.path.join(directory, stem + ext)
    best, path = -1, plain if os.path.isfile(plain) else None
    current = _cython_version()
    for candidate in glob.glob(glob.escape(plain[:-len(ext)]) + ".cython-*" + ext):
        m = _VERSIONED_RE.search(candidate)
        if m is None or not os.path.isfile(candidate):
            continue
        version = int(m.group(1))
        if best < version and (current is None or version <= current):
            best, path = version, candidate
    return path


def _source_files(modname, hint=None):
    """The .pxd and .pyx of ``modname`` next to where it is installed, as
    Cython would pick them (see _cython_reads); ``hint``: the module itself,
    where it is imported."""
    parts = modname.split(".")
    last = parts[-1]
    dirs, pkg_dirs = [], []
    if hint is not None:
        f = getattr(hint, "__file__", None)
        if f:
            dirs.append(os.path.dirname(os.path.abspath(f)))
        pkg_dirs.extend(getattr(hint, "__path__", None) or [])
    try:
        spec = importlib.util.find_spec(modname)
    except (ImportError, ValueError, AttributeError):
        spec = None
    if spec is not None:
        if spec.origin and os.path.isfile(spec.origin):
            dirs.append(os.path.dirname(spec.origin))
        pkg_dirs.extend(spec.submodule_search_locations or [])
    if len(parts) > 1:
        # A .pxd-only module has no spec: look in its package.
        try:
            pspec = importlib.util.find_spec(".".join(parts[:-1]))
        except (ImportError, ValueError, AttributeError):
            pspec = None
        if pspec is not None:
            dirs.extend(pspec.submodule_search_locations or [])
    else:
        dirs.extend(p or os.getcwd() for p in sys.path if isinstance(p, str))
    found = []

    def add(directory, stem):
        for ext in (".pyx", ".pxd"):
            p = _cython_reads(directory, stem, ext)
            if p is not None and p not in found:
                found.append(p)

    for d in pkg_dirs:
        add(d, "__init__")
    for d in dirs:
        add(d, last)
        if found:
            break
    return found


_source_cache = {}


def _stats(paths):
    out = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            out.append((path, None))
        else:
            out.append((path, st.st_mtime_ns, st.st_size))
    return tuple(out)


def _source(modname, files):
    """A parsed _Source, reused while its files (and those they include)
    keep their size and mtime (scipy's cython_lapack .pyx and .pxd are
    900 kB: ~90 ms to parse)."""
    key = (modname, _stats(files))
    cached = _source_cache.get(key)
    if cached is not None and _stats(cached[0].files) == cached[1]:
        return cached[0]
    src = _Source(modname, files)
    _source_cache[key] = (src, _stats(src.files))
    return src


def _declared_memviews(files, name, params=None):
    """{index: 'FLOAT64[:, ::1]'} as the function's definition in the
    module's source declares its memoryview parameters; ``params``, if a
    list, receives every parameter's declaration."""
    pat = re.compile(rf"\b(?:cdef|cpdef)\b[^\n(]*?\b{re.escape(name)}\s*\(")
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        m = pat.search(text)
        if m is None:
            continue
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        params_text = re.sub(r"#[^\n]*", "", text[m.end():i - 1])
        out = {}
        for k, arg in enumerate(_split_args(params_text)):
            arg = " ".join(arg.split())
            if params is not None:
                params.append(arg)
            if "[" in arg and "]" in arg:
                out[k] = arg[:arg.rindex("]") + 1].replace(" [", "[")
        return path, out
    return None, {}


# ------------------------------------------------------------ resolution


def _np_dtype_name(obj):
    """np.float64 or np.dtype('int32') -> 'float64' / 'int32' (names the
    parser knows); TypeError for anything else."""
    import numpy as np

    try:
        dt = np.dtype(obj)
    except Exception:
        raise TypeError(obj) from None
    if dt.kind not in "biufc" or not dt.isnative:
        raise TypeError(obj)
    return "bool" if dt.kind == "b" else dt.name


class _Resolver:
    """Maps Cython type names (mangled or short) to C text the parser knows."""

    def __init__(self, module, user, where):
        self.module = module
        self.modname = module.__name__
        self.where = where
        self.user = {}
        for k, v in (user or {}).items():
            if not isinstance(v, str):
                try:
                    v = _np_dtype_name(v)
                except TypeError:
                    v = None
            if not isinstance(k, str) or v is None:
                raise TypeError("typedefs must map names (str) to C types (str) or NumPy "
                                "dtypes, e.g. typedefs={'FLOAT64': 'double'}, got "
                                f"{k!r}: {user[k]!r}")
            self.user[k] = v
        self.sources = {}

    def source(self, modname):
        src = self.sources.get(modname)
        if src is None:
            hint = self.module if modname == self.modname else sys.modules.get(modname)
            src = _source(modname, _source_files(modname, hint))
            self.sources[modname] = src
        return src

    def _fail(self, name, detail):
        short = name
        d = _demangle(name)
        if d is not None:
            short = d[1]
        raise CythonError(
            f"{self.where}: unknown typedef '{name}'{detail}; pass its C type as "
            f"typedefs={{'{short}': '<C type>'}} (keyed by the short or the full mangled "
            "name), e.g. 'double', 'int64_t', 'npy_intp' (see docs/cython.md, 'Signatures "
            "and typedefs')")

    # -- entry points

    def mangled(self, name):
        """C text for a name from a capsule signature, or None if unknown."""
        if name in self.user:
            return self.text(self.user[name], None, {name})
        d = _demangle(name)
        if d is None:
            # An extern typedef keeps its C name: the module's own source
            # may declare it ('ctypedef double real_c "ntk_real_t"').
            src = self.source(self.modname)
            if name in src.typedefs:
                return self.text(src.typedefs[name], self.modname, {name})
            return None
        modname, short = d
        if short in self.user:
            return self.text(self.user[short], None, {name})
        return self.lookup(modname, short, set(), name)

    def fnptr(self, name):
        """For a mangled function-pointer typedef: its C text, or None."""
        d = _demangle(name)
        if d is None or name in self.user or d[1] in self.user:
            return None
        src = self.source(d[0])
        fp = src.fnptrs.get(d[1])
        if fp is None:
            return None
        ret = self.text(fp[0], d[0], {name})
        args = []
        for a in fp[1]:
            a = re.sub(r"\b(noexcept|nogil)\b", "", a).strip()
            args.append(self.text(_drop_param_name(a), d[0], {name}))
        return f"{ret} (*)({', '.join(args) or 'void'})"

    def short(self, text):
        """C text for a type the user wrote (a memoryview dtype, a fused choice):
        a builtin, a NumPy name, or a typedef of the module or the user."""
        return self.text(text, self.modname, set())

    # -- recursion

    def _starred(self, src, short, visited=None):
        """The module that declares ``short`` for ``src`` through its
        ``from X cimport *`` lines (followed on through X's own), or None."""
        visited = set() if visited is None else visited
        for mod in src.stars:
            if mod in visited:
                continue
            visited.add(mod)
            other = self.source(mod)
            if (short in other.typedefs or short in other.fnptrs or short in other.names
                    or short in other.structs):
                return mod
            found = self._starred(other, short, visited)
            if found is not None:
                return found
        return None

    def lookup(self, modname, short, seen, orig):
        key = f"{modname}.{short}"
        if key in seen:
            raise CythonError(f"{self.where}: typedef '{orig}' refers back to itself "
                              f"through {', '.join(sorted(seen))}")
        seen = seen | {key}
        if short in self.user and short not in seen:
            return self.text(self.user[short], None, seen | {short})
        if modname == "numpy":
            if short in NUMPY_TYPEDEFS:
                return NUMPY_TYPEDEFS[short]
            if short in ("longdouble_t", "clongdouble_t", "float96_t", "float128_t"):
                raise CythonError(f"{self.where}: '{orig}' is a long double type, which "
                                  "numthunk does not support")
            if _is_builtin(short):
                return short
        src = self.source(modname)
        if short in src.typedefs:
            return self.text(src.typedefs[short], modname, seen)
        if short in src.fnptrs:
            raise CythonError(f"{self.where}: '{orig}' is a function pointer typedef; it "
                              "is supported as a parameter of its own, not inside another "
                              "type")
        if short in src.names:
            mod2, short2 = src.names[short]
            return self.lookup(mod2, short2, seen, orig)
        star = self._starred(src, short)
        if star is not None:
            return self.lookup(star, short, seen, orig)
        if short in src.structs:
            # an opaque struct: the parser keeps the typedef's (mangled)
            # name for it, so the signature prints back as the capsule reads
            return f"{src.structs[short]} {short}"
        if _is_builtin(short):              # (NumPy's names returned above)
            return short
        if src.files:
            where = ", ".join(src.files)
            self._fail(orig, f" ('{short}' of module {modname}): no ctypedef of it in {where}")
        self._fail(orig, f" ('{short}' of module {modname}): no .pxd or .pyx of {modname} "
                   "was found next to the installed module")

    def text(self, text, modname, seen):
        """Resolve Cython type text (maybe 'const', '*', 'np.float64_t')."""
        text = " ".join(text.split())
        m = re.match(r"^(.*?)\s*((?:\*\s*(?:const\s*)?)*)$", text)
        base, stars = m.group(1), m.group(2).replace(" ", "")
        const = ""
        if base.startswith("const "):
            const, base = "const ", base[len("const "):]
        if base.endswith(" const"):
            const, base = "const ", base[:-len(" const")]
        stars = " " + stars.replace("*const", "*const ").strip() if stars else ""
        if base in _CYTHON_SPELLINGS:
            if _CYTHON_SPELLINGS[base] is None:
                raise CythonError(f"{self.where}: C type '{base}' is not supported by numthunk")
            return f"{const}{_CYTHON_SPELLINGS[base]}{stars}"
        local = self.source(modname) if modname else None
        if "." in base:
            # 'cnp.float64_t' after 'cimport numpy as cnp'
            prefix, short = base.rsplit(".", 1)
            head, _, tail = prefix.partition(".")
            aliases = local.aliases if local is not None else {}
            if prefix in aliases:
                target = aliases[prefix]
            elif head in aliases:
                target = f"{aliases[head]}.{tail}"
            else:
                target = prefix
            return f"{const}{self.lookup(target, short, seen, base)}{stars}"
        if local is not None and (base in local.typedefs or base in local.fnptrs):
            return f"{const}{self.lookup(modname, base, seen, base)}{stars}"
        if local is not None and base in local.names:
            mod2, short2 = local.names[base]
            return f"{const}{self.lookup(mod2, short2, seen, base)}{stars}"
        star = self._starred(local, base) if local is not None else None
        if star is not None:
            return f"{const}{self.lookup(star, base, seen, base)}{stars}"
        if base in self.user and base not in seen:
            return f"{const}{self.text(self.user[base], None, seen | {base})}{stars}"
        if base in NUMPY_TYPEDEFS and not _is_builtin(base):
            return f"{const}{NUMPY_TYPEDEFS[base]}{stars}"
        if _is_builtin(base):
            return f"{const}{base}{stars}"
        d = _demangle(base)
        if d is not None:
            return f"{const}{self.lookup(d[0], d[1], seen, base)}{stars}"
        where = f" in module {modname}" if modname else ""
        self._fail(base, where)


def _drop_param_name(arg):
    """'double x' -> 'double', 'const double *x' -> 'const double *'."""
    arg = arg.strip()
    m = re.match(r"^(.*?[\s\*])(\w+)$", arg)
    if m and m.group(2) not in _C_WORDS and m.group(1).strip() not in ("", "const", "unsigned",
                                                                          "signed"):
        return m.group(1).strip()
    return arg


# ------------------------------------------------------------ the adapter


def _module(module):
    if isinstance(module, str):
        return importlib.import_module(module)
    if not hasattr(module, "__dict__") or not hasattr(module, "__name__"):
        raise TypeError(f"numthunk.cython(): expected a module or a module name, got "
                        f"{type(module).__name__}")
    return module


def _specialisations(capi, name):
    """{(i,) or (i, j, ...): capsule key} for '__pyx_fuse_<i>[_<j>...]<name>'."""
    out = {}
    for key in capi:
        if key.startswith("__pyx_fuse_") and key.endswith(name):
            m = _FUSE_INDEX_RE.match(key[len("__pyx_fuse_"):len(key) - len(name)])
            if m:
                out[tuple(int(i) for i in m.group(0).split("_"))] = key
    return dict(sorted(out.items()))


def _parse(capsule, resolver, where):
    try:
        address, text = _core._capsule_pointer(capsule)
    except ValueError as exc:
        raise CythonError(f"{where}: {exc}") from None
    if not text:
        raise CythonError(f"{where}: the capsule has no name (Cython names it by the "
                          "function's C signature)")
    # optional arguments come in a struct: 'struct ...__pyx_opt_args_<mangled>
    # *__pyx_optional_args', the type there whatever the parameter is named
    if "__pyx_opt_args" in text:
        raise CythonError(
            f"{where}: the function has optional arguments ('{text}'); Cython passes "
            "them through a struct pointer that numthunk does not build. Export a "
            "wrapper without default values (docs/cython.md: 'cpdef, fused and "
            "optional arguments')")
    _refuse_unsupported(text, where)
    typedefs = {}
    for tok in dict.fromkeys(_IDENT_RE.findall(text)):
        if tok in _C_WORDS or tok == "__pyx_skip_dispatch" or _is_builtin(tok):
            continue
        fp = resolver.fnptr(tok)
        if fp is not None:
            # The parser has no function-pointer typedefs: a capsule names a
            # parameter's type alone, so the text can stand in its place.
            new = re.sub(rf"\b{tok}\b(?=\s*[,)])", fp, text)
            if tok in new:
                raise CythonError(f"{where}: function pointer typedef '{tok}' is "
                                  "supported only as a parameter type of its own")
            text = new
            continue
        value = resolver.mangled(tok)
        if value is None:
            resolver._fail(tok, " (not a Cython-mangled name, nor a C type numthunk knows)")
        typedefs[tok] = value
    try:
        sig = Signature(text, typedefs=typedefs or None)
    except ValueError as exc:
        raise CythonError(f"{where}: cannot parse the capsule signature: {exc}") from None
    return address, text, sig


# What Cython writes for types no thunk can carry.
_UNSUPPORTED = [
    (re.compile(r"\bPyObject\b"), "Python objects (PyObject *)",
     ": a thunk never touches Python objects; export a function on C types"),
    (re.compile(r"\b__pyx_ctuple_\w+"), "a C tuple (Cython's ctuple, a struct)", ""),
    # a pointer to a cdef struct (Cython mangles its name: __pyx_t_...) is an
    # opaque pointer; a struct by value is not, nor "struct X *" under any
    # other name: Cython writes extension types' object structs that way
    (re.compile(r"\bstruct\s+(?!__pyx_t_\w+\s*\*)\w+"),
     "a struct or extension type ('{0}')",
     ": parameters may be scalars, pointers to scalars or structs, function pointers "
     "and typed memoryviews"),
    (re.compile(r"\blong\s+double\b"), "long double", ""),
]


def _refuse_unsupported(text, where):
    for pattern, what, hint in _UNSUPPORTED:
        m = pattern.search(text)
        if m:
            raise CythonError(f"{where}: '{text}' uses {what.format(m.group(0))}, which "
                              f"numthunk does not support{hint}")


def _visible(sig):
    """The parameter descriptions callers bind (without skip_dispatch)."""
    ret, args = sig._describe()
    names = sig.names
    if args and names[-1] == "__pyx_skip_dispatch":
        args = args[:-1]
    return ret, args


def _choose_fused(capi, name, fused, resolver, where, modname):
    specs = _specialisations(capi, name)
    if not specs:
        if fused is not None:
            raise CythonError(f"{where}: fused= was given, but {modname} exports no fused "
                              f"specialisation of '{name}'")
        return None

    def listing():
        lines = []
        for idx, key in specs.items():
            try:
                sig = _parse(capi[key], resolver, where)[2]
                shown = _shown(sig)
            except CythonError:
                shown = _core._capsule_pointer(capi[key])[1]
            lines.append(f"  fused={idx[0] if len(idx) == 1 else idx!r}: {shown}")
        return "\n".join(lines)

    if fused is None:
        raise CythonError(f"{where}: '{name}' is a fused function; choose a "
                          f"specialisation by index or by its parameter types:\n{listing()}")
    if isinstance(fused, bool) or (isinstance(fused, tuple) and any(
            isinstance(i, bool) or not isinstance(i, (int, str)) for i in fused)) \
            or not isinstance(fused, (int, str, tuple, list)):
        raise TypeError(f"{where}: fused= takes an index (int), a tuple of indexes, a C "
                        f"signature or a tuple of parameter types (str), not {fused!r}:\n"
                        f"{listing()}")
    if isinstance(fused, int):
        fused = (fused,)
    if isinstance(fused, tuple) and fused and all(isinstance(i, int) for i in fused):
        key = specs.get(tuple(fused))
        if key is None:
            raise CythonError(f"{where}: no specialisation fused={fused!r} of '{name}':\n"
                              f"{listing()}")
        return key
    return _fused_by_types(capi, specs, name, fused, resolver, where, listing)


def _wanted(fused, resolver):
    """(return description or None, parameter descriptions) that fused=
    asks for: a whole signature, or the parameter types in order."""
    if isinstance(fused, str) and "(" in fused:
        return Signature(_resolve_sig_text(fused, resolver))._describe()
    types = (fused,) if isinstance(fused, str) else tuple(fused)
    if not all(isinstance(t, str) for t in types):
        raise TypeError("fused= takes an index, a tuple of indexes, a C signature or a "
                        "tuple of parameter types")
    text = ", ".join(resolver.short(t) for t in types) or "void"
    return None, Signature(f"void ({text})")._describe()[1]


def _fused_by_types(capi, specs, name, fused, resolver, where, listing):
    want_ret, want_args = _wanted(fused, resolver)
    # Same C types first; among those, the same spellings (long and
    # Py_ssize_t are one type on LP64, yet distinct specialisations).
    hits, exact, refused = [], [], []
    for idx, key in specs.items():
        try:
            ret, args = _visible(_parse(capi[key], resolver, where)[2])
        except CythonError as exc:
            # a sibling numthunk does not take (long double, optional
            # arguments) cannot be the one asked for; why is said when
            # nothing else matches
            refused.append((idx, str(exc)))
            continue
        if [a[:3] for a in args] == [a[:3] for a in want_args] and (
                want_ret is None or ret[:3] == want_ret[:3]):
            hits.append(key)
            if [a[4] for a in args] == [a[4] for a in want_args] and (
                    want_ret is None or ret[4] == want_ret[4]):
                exact.append(key)
    if len(hits) > 1 and len(exact) == 1:
        hits = exact
    if not hits and refused:
        reasons = "\n".join(
            f"  fused={idx[0] if len(idx) == 1 else idx!r}: "
            f"{text[len(where) + 2:] if text.startswith(where + ': ') else text}"
            for idx, text in refused)
        if len(refused) == len(specs):
            raise CythonError(f"{where}: no specialisation of '{name}' matches "
                              f"fused={fused!r}: numthunk can take none of them:\n{reasons}")
        raise CythonError(f"{where}: no specialisation of '{name}' matches fused={fused!r}:"
                          f"\n{listing()}\nof which numthunk cannot take:\n{reasons}")
    if len(hits) != 1:
        what = "no" if not hits else "more than one"
        raise CythonError(f"{where}: {what} specialisation of '{name}' matches "
                          f"fused={fused!r}:\n{listing()}")
    return hits[0]


def _resolve_sig_text(text, resolver):
    """Replace typedef names the user wrote in a signature with C text."""
    def sub(m):
        tok = m.group(0)
        if tok in _C_WORDS or _is_builtin(tok):
            return tok
        return resolver.short(tok)
    return re.sub(r"[A-Za-z_][\w.]*", sub, text)


def _shown(sig):
    """The signature without a cpdef's skip_dispatch, for listings."""
    text = str(sig)
    if sig.names and sig.names[-1] == "__pyx_skip_dispatch":
        head, _, tail = text.rpartition(", ")
        text = (head + ")") if head else text.replace("(int)", "(void)")
    return text


def cython_target(module, name, typedefs=None, memoryviews=None, nogil=False, fused=None,
                  structs=None):
    """What the :class:`numthunk.Function` for ``module.__pyx_capi__[name]``
    is made of: a dict of its arguments (``address``, ``signature`` and the
    keywords).

    ``module``: a Cython extension module (or its dotted name). ``name``: a
    ``cdef api`` function or a function declared in the module's ``.pxd``.
    ``typedefs``: ``{name: C type}`` for typedef names numthunk cannot find
    (short names such as ``'FLOAT64'`` or mangled ones). ``memoryviews``:
    ``{index: 'const double[:, ::1]'}`` for each typed-memoryview parameter,
    keyed by the 0-based parameter index (the capsule does not carry their
    dtype or ndim). ``nogil=True`` only for functions declared ``nogil``:
    otherwise calls from Python hold the GIL and re-raise an exception the
    function left set. ``fused``: for a fused function, the specialisation's
    index (``1`` or ``(2, 0)``) or its parameter types (``('double',)``, or a
    whole signature ``'double (double)'``). ``structs``: the layouts of the
    structs the function takes by pointer, by their short names
    (``{'point': dtype}``, see :class:`numthunk.Function`).

    A ``cpdef`` function's hidden ``int __pyx_skip_dispatch`` parameter is
    bound to 0 and does not appear in bind().
    """
    mod = _module(module)
    modname = mod.__name__
    where = f"numthunk.cython({modname}, {name!r})"
    capi = getattr(mod, "__pyx_capi__", None)
    if not isinstance(capi, dict):
        raise CythonError(f"{where}: module {modname} has no __pyx_capi__: it is not a "
                          "Cython module, or it exports no C functions (declare them "
                          "'cdef api', or in the module's .pxd)")
    if not isinstance(name, str):
        raise TypeError(f"{where}: the function name must be a str")
    resolver = _Resolver(mod, typedefs, where)
    key = _capsule_key(capi, name, fused, resolver, where, modname)
    capsule = capi[key]
    address, text, sig = _parse(capsule, resolver, where)
    fixed = {}
    if sig.nargs and sig.names[-1] == "__pyx_skip_dispatch":
        fixed[sig.nargs - 1] = 0
    mvs = _memviews(sig, text, memoryviews, resolver, where, modname, name, key)
    return dict(address=address, signature=sig, nogil=nogil, owner=(mod, capsule),
                name=f"{modname}.{key}", memoryviews=mvs or None, fixed=fixed or None,
                structs=structs)


def _capsule_key(capi, name, fused, resolver, where, modname):
    """The key of ``__pyx_capi__`` that ``name`` (and ``fused=``) choose."""
    if fused is None and name in capi:
        return name
    key = _choose_fused(capi, name, fused, resolver, where, modname)
    if key is None:
        close = difflib.get_close_matches(name, list(capi), n=6, cutoff=0.6)
        hint = f" (similar: {', '.join(close)})" if close else ""
        raise CythonError(f"{where}: {modname}.__pyx_capi__ has no function "
                          f"'{name}'{hint}; it exports {len(capi)} function(s)")
    return key


def _memviews(sig, text, memoryviews, resolver, where, modname, name, key):
    """{index: (dtype, ndim, contig, const)} for the typed-memoryview
    parameters: as declared, from the chosen fused specialisation, or a
    refusal naming the ones left undeclared."""
    described = sig._describe()[1]
    mv_params = [i for i, d in enumerate(described) if d[0] == "memoryview slice"]
    mvs = {}
    for k, decl in (memoryviews or {}).items():
        if isinstance(k, bool) or not isinstance(k, int):
            raise TypeError(f"{where}: memoryviews keys are 0-based parameter indexes, "
                            f"got {k!r}")
        if k not in mv_params:
            raise CythonError(
                f"{where}: memoryviews={{{k}: ...}}: parameter {k} of '{text}' is not a "
                f"typed memoryview (those are parameters {mv_params or 'none'})")
        spec = parse_memview(decl)
        if key != name and spec[0] in resolver.source(modname).fused:
            continue    # the specialisation gives the element type (below)
        try:
            dtype = resolver.short(spec[0])
        except CythonError as exc:
            raise CythonError(f"{exc} (memoryview {k}: {decl!r})") from None
        if "*" in dtype:
            raise CythonError(f"{where}: memoryview {k} ({decl!r}): dtype {spec[0]!r} is a "
                              "pointer type")
        mvs[k] = (dtype,) + tuple(spec[1:])
    if mv_params and key != name:
        _fused_memviews(resolver, modname, name, key, mv_params, mvs, memoryviews or {}, where)
    missing = [i for i in mv_params if i not in mvs]
    if missing:
        _refuse_undeclared(resolver, modname, name, text, missing, where)
    return mvs


def _refuse_undeclared(resolver, modname, name, text, missing, where):
    src = resolver.source(modname)
    path, found = _declared_memviews(src.files, name)
    if all(i in found for i in missing):    # missing is never empty
        hint = (f"; {os.path.basename(path)} declares them: memoryviews={{"
                + ", ".join(f"{i}: {found[i]!r}" for i in missing) + "}")
    else:
        hint = (", e.g. memoryviews={" + ", ".join(f"{i}: 'double[:, ::1]'"
                                                    for i in missing[:2]) + "}")
    raise CythonError(
        f"{where}: parameter(s) {', '.join(map(str, missing))} of '{text}' are typed "
        "memoryviews (__Pyx_memviewslice), whose dtype and dimensions the capsule "
        "does not carry; declare each one by its 0-based index" + hint)


def _fused_memviews(resolver, modname, name, key, mv_params, mvs, given, where):
    """Memoryview parameters declared with a fused element type
    ('np_numeric_t[:, ::1]') take the element type of the chosen
    specialisation; a declaration that contradicts it is refused (it would
    read the array as the wrong type)."""
    src = resolver.source(modname)
    params = []
    _path, found = _declared_memviews(src.files, name, params)
    index = tuple(int(i) for i in key[len("__pyx_fuse_"):len(key) - len(name)].split("_"))
    order = []          # fused types in order of first appearance
    for p in params:
        for tok in _IDENT_RE.findall(p):
            if tok in src.fused and tok not in order:
                order.append(tok)
    for k in mv_params:
        decl = found.get(k)
        if decl is None:
            continue
        spec = parse_memview(decl)
        fused_name = spec[0]
        if fused_name not in src.fused or order.index(fused_name) >= len(index):
            continue
        member = src.fused[fused_name][index[order.index(fused_name)]]
        try:
            dtype = resolver.short(member)
        except CythonError as exc:
            detail = str(exc)
            detail = detail[len(where) + 2:] if detail.startswith(where) else detail
            raise CythonError(f"{where}: specialisation {key} has memoryview {k} of "
                              f"{member} ({fused_name}): {detail}") from None
        derived = (dtype,) + tuple(spec[1:])
        mine = mvs.get(k)
        if mine is not None and parse_memview(given[k])[0] != fused_name:
            want = Signature(f"void ({dtype})")._describe()[1][0][:3]
            got = Signature(f"void ({mine[0]})")._describe()[1][0][:3]
            if want != got:
                raise CythonError(
                    f"{where}: memoryviews={{{k}: {given[k]!r}}} contradicts the chosen "
                    f"specialisation {key}, whose memoryview {k} is {member}[...] "
                    f"({fused_name} = {member}, C {dtype}); declare "
                    f"'{dtype}{decl[decl.index('['):]}' or leave it out")
            continue
        mvs[k] = derived if mine is None else (dtype,) + tuple(mine[1:])
