"""numthunk/_core.pyi against the built module, by mypy's stubtest: every
name the stub declares exists in numthunk._core with the declared kind and
parameters, and every public name of the module is in the stub.

When _core's names change, change the stub with them; `python -m
mypy.stubtest numthunk._core` (run from the directory holding numthunk/)
says what differs."""

import os
import subprocess
import sys
import sysconfig

import numthunk as nt


def test_core_stub_matches_the_module(tmp_path):
    # From the directory that holds the package (the source tree, or
    # site-packages for an installed wheel): mypy finds numthunk/_core.pyi
    # beside the extension it checks it against.
    where = os.path.dirname(os.path.dirname(os.path.abspath(nt.__file__)))
    # The stub is what is checked: mypy also reads the package around it
    # (numthunk/__init__.py and what it imports), whose own type errors
    # would stop stubtest before it compares anything.
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\nfollow_imports = silent\nignore_missing_imports = True\n\n"
                      "[mypy-numthunk.*]\nignore_errors = True\n\n"
                      "[mypy-numthunk._core]\nignore_errors = False\n")
    # An installed numthunk is found in site-packages (py.typed); run from
    # there, mypy would also read every top-level module beside it.
    installed = where in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    out = subprocess.run([sys.executable, "-m", "mypy.stubtest", "--mypy-config-file",
                          str(config), "numthunk._core"],
                         capture_output=True, text=True, cwd=tmp_path if installed else where,
                         timeout=600,
                         env={**os.environ, "MYPY_CACHE_DIR": str(tmp_path / "mypy-cache")})
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Success" in out.stdout, out.stdout
