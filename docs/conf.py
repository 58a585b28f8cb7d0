"""Sphinx configuration of numthunk's documentation site.

    pip install -e ".[docs]"
    python -m sphinx -W -b html docs docs/_build/html      # the site
    python -m sphinx -W -b doctest docs docs/_build/doctest # the API examples

The pages are MyST Markdown. Their code blocks are run by
tests/test_docs.py (see its docstring for the markers a page may use); the
built site is checked by tests/site/ (.ci/run's docs step).
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# autodoc imports the package being documented: the checkout's, unless an
# installed numthunk is asked for (the checkout needs its extension built)
if os.environ.get("NUMTHUNK_DOCS_INSTALLED") != "1":
    sys.path.insert(0, os.path.dirname(HERE))

import numthunk  # noqa: E402

project = "numthunk"
author = "the numthunk developers"
copyright = "the numthunk developers"
release = version = numthunk.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.doctest",
]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

# Headings get anchors, so pages link to sections as [x](page.md#heading).
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

autodoc_member_order = "bysource"
autodoc_typehints = "none"

# The API reference's examples assume these two imports (api.md says so).
doctest_global_setup = "import numpy as np\nimport numthunk as nt"

html_theme = "furo"
html_title = f"numthunk {release}"
html_show_sourcelink = False

# Link check: external links are not followed (CI has no network beyond
# the package registries); internal links and anchors are checked by MyST
# at build time (-W) and by tests/site/test_site.py on the built pages.
linkcheck_ignore = [r"https?://.*"]

# Pages that other work adds are listed in index.md's toctrees once they
# exist: their toctree line is kept out until the file is there.
OPTIONAL_PAGES = ["architecture"]
OPTIONAL_MARK = "<!-- optional pages: conf.py OPTIONAL_PAGES -->"


def _optional_pages(app, docname, source):
    if docname != root_doc:
        return
    if OPTIONAL_MARK not in source[0]:
        raise RuntimeError(f"{docname}.md lost the line {OPTIONAL_MARK!r}")
    present = [p for p in OPTIONAL_PAGES if os.path.exists(os.path.join(HERE, p + ".md"))]
    source[0] = source[0].replace(OPTIONAL_MARK + "\n", "".join(p + "\n" for p in present))


def setup(app):
    app.connect("source-read", _optional_pages)
