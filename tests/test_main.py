"""python -m numthunk: the main job runs end to end, with Numba and, as on a
machine without it, with the reference kernel."""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# a row of the timing table: its label, then a time
TIMING_ROW = re.compile(r"^  ((?:make a thunk|call from)[^\n]*?)\s{2,}[\d.]+ [µnm]?s$", re.M)


def run(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)


def test_main_job_with_numba():
    out = run("import runpy; runpy.run_module('numthunk', run_name='__main__')")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "Numba @cfunc" in text
    assert "called through .address with ctypes:  10.0" in text
    assert "from an @njit loop (3 calls):          30.0" in text
    assert "after vec[0] = 100 (live binding):     109.0" in text
    assert "STALE" in text                    # the Numba closure froze the array
    assert "does not fit in a 32-bit C int" in text
    assert "make a thunk: Numba cfunc closure" in text
    # the README shows this table (its figures from one run): the same rows
    printed = TIMING_ROW.findall(text)
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    shown = TIMING_ROW.findall(readme)
    assert len(printed) == 8 and shown == printed, (shown, printed)


def test_main_job_without_numba():
    out = run("import sys; sys.modules['numba'] = None\n"
              "import runpy; runpy.run_module('numthunk', run_name='__main__')")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "reference kernel" in text
    assert "after vec[0] = 100 (live binding):     109.0" in text
    assert "call from a C loop: numthunk thunk" in text
