"""The built documentation site, for tests/site.

    python -m pytest tests/site [--html-dir DIR] [--screenshot-dir DIR]

--html-dir: a site already built with ``python -m sphinx -W -b html docs
DIR`` (.ci/run builds it first); without it the site is built here, into a
temporary directory, with warnings as errors. --screenshot-dir: where the
browser test leaves its screenshots (default: a temporary directory).
"""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def pytest_addoption(parser):
    parser.addoption("--html-dir", default=None, help="the built HTML site")
    parser.addoption("--screenshot-dir", default=None, help="where screenshots go")


@pytest.fixture(scope="session")
def html_dir(request, tmp_path_factory):
    given = request.config.getoption("--html-dir")
    if given:
        assert os.path.isfile(os.path.join(given, "index.html")), f"no site in {given}"
        return os.path.abspath(given)
    out = str(tmp_path_factory.mktemp("html"))
    p = subprocess.run([sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html",
                        os.path.join(ROOT, "docs"), out], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    return out


@pytest.fixture(scope="session")
def screenshot_dir(request, tmp_path_factory):
    given = request.config.getoption("--screenshot-dir")
    if given:
        os.makedirs(given, exist_ok=True)
        return given
    return str(tmp_path_factory.mktemp("screenshots"))
