"""Shared fixtures: the C fixture library, compiled by the system compiler
for this test session and loaded with ctypes."""

import ctypes
import os
import shutil
import subprocess
import sys
import sysconfig

import pytest

import numthunk as nt

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.join(HERE, "_build")


def compile_shared(source, name, compiler=None, extra=()):
    """Compile a C file into a shared library under tests/_build and return its path."""
    cc = compiler or os.environ.get("CC") or sysconfig.get_config_var("CC").split()[0] or "cc"
    if shutil.which(cc) is None:
        raise RuntimeError(f"C compiler {cc!r} not found: the tests need one (the compiler "
                           "is the oracle)")
    os.makedirs(BUILD, exist_ok=True)
    out = os.path.join(BUILD, f"{name}-{os.path.basename(cc)}{sysconfig.get_config_var('SHLIB_SUFFIX') or '.so'}")
    cmd = [cc, "-O2", "-shared", "-fPIC", "-std=c11", "-Wall", "-Wextra", "-Werror",
           *extra, "-o", out, source]
    subprocess.run(cmd, check=True)
    return out


@pytest.fixture(scope="session")
def fixture_path():
    return compile_shared(os.path.join(HERE, "fixtures", "fixture.c"), "fixture")


@pytest.fixture(scope="session")
def lib(fixture_path):
    return ctypes.CDLL(fixture_path)


@pytest.fixture(scope="session")
def cfn(lib):
    """cfn(name, signature) -> numthunk.Function for a fixture function."""

    def make(name, signature, **kw):
        addr = ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
        return nt.Function(addr, signature, owner=lib, name=name, **kw)

    return make
