"""The loader: shared libraries and their symbols, through the dynamic
loader (``dlopen``, ``dlsym``, ``dladdr``, ``dlinfo``).

``Function.from_library`` finds its code here; numthunk._recipe names a
function's code by library and symbol (and finds it again in another
process) with the same calls. Only ctypes: nothing of the package.
"""

import ctypes
import ctypes.util
import os

__all__ = ["check_symbol", "find", "dladdr", "code_symbol_problem", "loaded_path",
           "spec_of", "load", "symbol_address"]


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


class _LinkMap(ctypes.Structure):
    # the two leading members of glibc's struct link_map (<link.h>)
    _fields_ = [("l_addr", ctypes.c_void_p), ("l_name", ctypes.c_char_p)]


_RTLD_DI_LINKMAP = 2
_RTLD_DL_SYMENT = 1
_dl_functions = None


def _dl():
    """(dladdr, dlinfo, dladdr1, dl_iterate_phdr) from the C library (glibc
    >= 2.34) or libdl; None for each the platform does not have."""
    global _dl_functions
    if _dl_functions is None:
        names = ("dladdr", "dlinfo", "dladdr1", "dl_iterate_phdr")
        found = [None] * len(names)
        for name in (None, ctypes.util.find_library("dl")):
            try:
                libdl = ctypes.CDLL(name)
            except OSError:
                continue
            for k, sym in enumerate(names):
                if found[k] is None and hasattr(libdl, sym):
                    found[k] = getattr(libdl, sym)
        if found[0] is not None:
            found[0].argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
            found[0].restype = ctypes.c_int
        if found[1] is not None:
            found[1].argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
            found[1].restype = ctypes.c_int
        if found[2] is not None:
            found[2].argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo),
                                 ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]
            found[2].restype = ctypes.c_int
        if found[3] is not None:
            found[3].argtypes = [_PHDR_CALLBACK, ctypes.c_void_p]
            found[3].restype = ctypes.c_int
        _dl_functions = tuple(found)
    return _dl_functions


# <elf.h>: the symbol entry dladdr1(RTLD_DL_SYMENT) gives, and the program
# headers dl_iterate_phdr walks, in the layout of this process's word size.
_STT_TYPES = {0: "STT_NOTYPE", 1: "STT_OBJECT", 2: "STT_FUNC", 3: "STT_SECTION",
              4: "STT_FILE", 5: "STT_COMMON", 6: "STT_TLS", 10: "STT_GNU_IFUNC"}
_CODE_TYPES = (2, 10)          # STT_FUNC, STT_GNU_IFUNC
_PT_LOAD, _PF_X = 1, 1
_u32, _u16, _u8 = ctypes.c_uint32, ctypes.c_uint16, ctypes.c_uint8
_word = ctypes.c_uint64 if ctypes.sizeof(ctypes.c_void_p) == 8 else ctypes.c_uint32

if ctypes.sizeof(ctypes.c_void_p) == 8:
    class _ElfSym(ctypes.Structure):
        _fields_ = [("st_name", _u32), ("st_info", _u8), ("st_other", _u8),
                    ("st_shndx", _u16), ("st_value", _word), ("st_size", _word)]

    class _ElfPhdr(ctypes.Structure):
        _fields_ = [("p_type", _u32), ("p_flags", _u32), ("p_offset", _word),
                    ("p_vaddr", _word), ("p_paddr", _word), ("p_filesz", _word),
                    ("p_memsz", _word), ("p_align", _word)]
else:
    class _ElfSym(ctypes.Structure):
        _fields_ = [("st_name", _u32), ("st_value", _word), ("st_size", _word),
                    ("st_info", _u8), ("st_other", _u8), ("st_shndx", _u16)]

    class _ElfPhdr(ctypes.Structure):
        _fields_ = [("p_type", _u32), ("p_offset", _word), ("p_vaddr", _word),
                    ("p_paddr", _word), ("p_filesz", _word), ("p_memsz", _word),
                    ("p_flags", _u32), ("p_align", _word)]


class _PhdrInfo(ctypes.Structure):
    # the leading members of struct dl_phdr_info (<link.h>)
    _fields_ = [("dlpi_addr", _word), ("dlpi_name", ctypes.c_char_p),
                ("dlpi_phdr", ctypes.POINTER(_ElfPhdr)), ("dlpi_phnum", _u16)]


_PHDR_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_PhdrInfo), ctypes.c_size_t,
                                  ctypes.c_void_p)


def _segment_of(address):
    """(file, executable) of the loaded segment holding ``address``; None if
    no loaded object maps it; ... (Ellipsis) if the platform cannot say."""
    walk = _dl()[3]
    if walk is None:
        return ...
    found = []

    def visit(info, _size, _data):
        info = info.contents
        for k in range(info.dlpi_phnum):
            ph = info.dlpi_phdr[k]
            start = info.dlpi_addr + ph.p_vaddr
            if ph.p_type == _PT_LOAD and start <= address < start + ph.p_memsz:
                name = os.fsdecode(info.dlpi_name) if info.dlpi_name else ""
                found.append((name or "the program", bool(ph.p_flags & _PF_X)))
                return 1
        return 0

    walk(_PHDR_CALLBACK(visit), None)
    return found[0] if found else None


def code_symbol_problem(address):
    """Why ``address`` (a symbol's address from the loader) is no function to
    call, or None: an ELF symbol there whose type is not STT_FUNC or
    STT_GNU_IFUNC (a variable: calling it runs its bytes), or an address in
    no executable segment of a loaded object (data, a thread-local). Where
    the loader cannot tell (no dladdr1/dl_iterate_phdr), None."""
    dladdr1 = _dl()[2]
    if dladdr1 is not None:
        info, sym = _DlInfo(), ctypes.c_void_p()
        if dladdr1(address, ctypes.byref(info), ctypes.byref(sym), _RTLD_DL_SYMENT) \
                and sym.value and info.dli_saddr == address:
            kind = _ElfSym.from_address(sym.value).st_info & 0xF
            if kind in _CODE_TYPES:
                return None
            if kind != 0:
                name = info.dli_sname.decode("utf-8", "replace") if info.dli_sname else "?"
                return (f"'{name}' is a data symbol ({_STT_TYPES.get(kind, f'ELF type {kind}')}"
                        "), not a function")
    seg = _segment_of(address)
    if seg is None:
        return (f"its address {address:#x} is in no loaded object's code (a thread-local "
                "variable?), not a function")
    if seg is not ... and not seg[1]:
        return (f"its address {address:#x} is in a non-executable segment of {seg[0]}: a "
                "variable, not a function")
    return None


def dladdr(address):
    """``(file, symbol or None, symbol address or None)`` of the shared
    object holding ``address``, or None."""
    fn = _dl()[0]
    if fn is None:
        return None
    info = _DlInfo()
    if not fn(address, ctypes.byref(info)) or not info.dli_fname:
        return None
    fname = os.fsdecode(info.dli_fname)
    sname = info.dli_sname.decode("utf-8", "replace") if info.dli_sname else None
    return fname, sname, info.dli_saddr


def loaded_path(lib):
    """The file the loader mapped for a CDLL ('' for the process itself)."""
    dlinfo = _dl()[1]
    if dlinfo is not None and lib._handle:
        lm = ctypes.POINTER(_LinkMap)()
        if dlinfo(lib._handle, _RTLD_DI_LINKMAP, ctypes.byref(lm)) == 0 and lm:
            name = lm.contents.l_name
            if name is not None:
                return os.fsdecode(name)
    name = lib._name
    return os.path.abspath(name) if isinstance(name, str) and os.sep in name else name


def spec_of(lib):
    """What another process asks the loader for to get ``lib`` again."""
    name = lib._name
    if name is None:
        return None
    if os.sep in name or (os.altsep and os.altsep in name):
        path = loaded_path(lib)
        return path if path else os.path.abspath(name)
    return name


_libraries = {}


def load(spec):
    """The CDLL for a recipe's library, loaded once per process (ctypes
    never unloads a library; the cache only saves the dlopen)."""
    lib = _libraries.get(spec)
    if lib is None:
        lib = _libraries[spec] = ctypes.CDLL(spec)
    return lib


def symbol_address(lib, symbol):
    try:
        fn = getattr(lib, symbol) if isinstance(symbol, str) else lib[symbol]
    except (AttributeError, ValueError):
        return None
    # the address fn holds, read from its buffer (numthunk._ctypes.address_of:
    # ctypes.cast would turn a MemoryError into ctypes.ArgumentError)
    return ctypes.c_void_p.from_address(ctypes.addressof(fn)).value


def check_symbol(library, symbol):
    """The text that starts ``Function.from_library``'s messages, after
    refusing a symbol that is no name."""
    where = f"Function.from_library({_show(library)}, {symbol!r})"
    if not isinstance(symbol, str) or not symbol:
        raise TypeError(f"{where}: the symbol must be a non-empty str")
    if "\0" in symbol:
        raise ValueError(f"{where}: the symbol name has a NUL byte at {symbol.index(chr(0))} "
                         "(the loader would read only the part before it)")
    return where


def find(library, symbol, where):
    """(address, loaded library, what another process loads) of the code
    ``symbol`` of ``library`` (a path, a name or a ``ctypes.CDLL``); OSError
    naming both when either is missing, TypeError for a symbol that is no
    function."""
    if isinstance(library, ctypes.CDLL):
        lib = library
    else:
        try:
            text = os.fspath(library)
        except TypeError:
            raise TypeError(f"{where}: library must be a path, a library name or a "
                            f"ctypes.CDLL, got {type(library).__name__}") from None
        if isinstance(text, bytes):
            text = os.fsdecode(text)
        if "\0" in text:
            raise ValueError(f"{where}: the library name has a NUL byte at "
                             f"{text.index(chr(0))}")
        lib = _open(text, symbol, where)
    address = symbol_address(lib, symbol)
    if not address:
        path = loaded_path(lib) or "the running program and its libraries"
        raise OSError(f"{where}: symbol {symbol!r} not found in library "
                      f"{_show(library)} (loaded from {path}); is it exported "
                      "(not static, not C++-mangled), and spelled as in the library?")
    problem = code_symbol_problem(address)
    if problem is not None:
        raise TypeError(f"{where}: {problem}; only a function can be a target")
    return address, lib, spec_of(lib)


def _open(text, symbol, where):
    is_path = os.sep in text or (os.altsep and os.altsep in text)
    if is_path:
        path = os.path.abspath(text)
        if not os.path.exists(path):
            raise OSError(f"{where}: cannot load library {text!r} for symbol {symbol!r}: "
                          f"no such file {path!r}")
        try:
            return ctypes.CDLL(path)
        except OSError as exc:
            raise OSError(f"{where}: cannot load library {path!r} for symbol "
                          f"{symbol!r}: {exc}") from None
    try:
        return ctypes.CDLL(text)
    except OSError as exc:
        first = exc
    found = ctypes.util.find_library(text)
    if found:
        try:
            return ctypes.CDLL(found)
        except OSError as exc:
            first = exc
    raise OSError(f"{where}: cannot load library {text!r} for symbol {symbol!r}: the "
                  f"dynamic loader does not find it ({first}); ctypes.util.find_library"
                  f"({text!r}) gives {found!r}; pass the library's path") from None


def _show(library):
    if isinstance(library, ctypes.CDLL):
        return f"<CDLL {library._name!r}>"
    return repr(library)
