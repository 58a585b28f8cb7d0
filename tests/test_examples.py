"""Every script in examples/ runs as users run it: a fresh interpreter,
``python examples/<name>.py``. The scripts check their own results; for
some, a line of their output is checked here too."""

import os
import subprocess
import sys

import pytest

import numthunk as nt

# the directory holding the numthunk package in use (the checkout, or
# site-packages for an installed wheel), for the scripts' PYTHONPATH
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(nt.__file__)))
# the scripts sit beside tests/, wherever the tests are run from
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
SCRIPTS = sorted(f for f in os.listdir(EXAMPLES) if f.endswith(".py"))

EXPECT = {
    "calcbox.py": "after vec[0] = 100: numthunk 109.0 | Numba cfunc closure 10.0",
    "integrand.py": "live parameters: 4.000000 -> 2.000000",
    "cython_kernel.py": "refused: argument 2",
    "dask_sweep.py": "the workers' results are equal to the serial run",
    "sweep_kernels.py": "f(0.0) = 1.000000",
}


@pytest.mark.parametrize("script", SCRIPTS)
def test_example(script):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([ROOT] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH")
                                                  else []))
    proc = subprocess.run([sys.executable, os.path.join(EXAMPLES, script)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert EXPECT.get(script, "") in proc.stdout


def test_the_numba_examples_are_there():
    assert set(EXPECT) <= set(SCRIPTS)
