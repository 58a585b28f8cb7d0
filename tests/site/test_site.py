"""The built site as a reader meets it: every internal link and anchor
resolves, every public name and C API function has its entry, and a real
browser (headless Chromium, Debian's `chromium` package) renders the
landing page and a guide with their navigation and code blocks."""

import html.parser
import os
import re
import shutil
import struct
import subprocess
import urllib.parse

import pytest

import numthunk as nt

SKIP_DIRS = {"_static", "_sources", "_images", "_downloads"}


class _Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.links = set(), []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("name"):
            self.ids.add(a["name"])
        for attr in ("href", "src"):
            if a.get(attr) and (tag, attr) in (("a", "href"), ("img", "src"), ("link", "href"),
                                              ("script", "src")):
                self.links.append(a[attr])


def _pages(html_dir):
    out = {}
    for dirpath, dirnames, files in os.walk(html_dir):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        for f in files:
            if f.endswith(".html"):
                path = os.path.join(dirpath, f)
                page = _Page()
                with open(path, encoding="utf-8") as fh:
                    page.feed(fh.read())
                out[os.path.normpath(path)] = page
    return out


def test_every_internal_link_and_anchor_resolves(html_dir):
    pages = _pages(html_dir)
    assert len(pages) >= 15, sorted(pages)
    broken, checked = [], 0
    for path, page in pages.items():
        for link in page.links:
            url = urllib.parse.urlsplit(link)
            if url.scheme or url.netloc:
                continue            # external: not followed
            target = (os.path.normpath(os.path.join(os.path.dirname(path),
                                                    urllib.parse.unquote(url.path)))
                      if url.path else path)
            checked += 1
            if not os.path.exists(target):
                broken.append(f"{os.path.relpath(path, html_dir)}: {link} (no file)")
            elif url.fragment and target.endswith(".html"):
                ids = pages[target].ids if target in pages else set()
                if urllib.parse.unquote(url.fragment) not in ids:
                    broken.append(f"{os.path.relpath(path, html_dir)}: {link} (no anchor)")
    assert checked > 200
    assert not broken, "\n".join(broken)


def test_every_public_name_and_c_function_is_on_the_site(html_dir):
    with open(os.path.join(html_dir, "api.html"), encoding="utf-8") as f:
        api = f.read()
    missing = [n for n in nt.__all__ if f'id="numthunk.{n}"' not in api]
    assert not missing, missing
    header = os.path.join(nt.get_include(), "numthunk", "capi.h")
    with open(header, encoding="utf-8") as f:
        names = re.findall(r"^static inline \w[\w\s*]*?\b(numthunk_\w+)\(", f.read(), re.M)
    with open(os.path.join(html_dir, "capi.html"), encoding="utf-8") as f:
        capi = f.read()
    assert len(names) >= 8
    for name in names:
        anchor = name.replace("_", "-")
        m = re.search(rf'<section id="{anchor}">(.*?)</section>', capi, re.S)
        assert m, f"capi.html has no section for {name}"
        for field in ("Returns:", "References:", "GIL:", "Errors:"):
            assert f"<strong>{field}</strong>" in m.group(1), (name, field)


def _chromium():
    exe = shutil.which("chromium")
    if exe is None:
        pytest.fail("chromium is needed to check the site in a browser "
                    "(Debian: apt-get install chromium)")
    return [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--disable-dev-shm-usage", "--window-size=1280,1400"]


def _browse(html_dir, page, screenshot):
    url = "file://" + os.path.join(html_dir, page)
    dom = subprocess.run(_chromium() + ["--virtual-time-budget=3000", "--dump-dom", url],
                         capture_output=True, text=True, timeout=180)
    assert dom.returncode == 0, dom.stderr
    shot = subprocess.run(_chromium() + [f"--screenshot={screenshot}", url],
                          capture_output=True, text=True, timeout=180)
    assert shot.returncode == 0, shot.stderr
    with open(screenshot, "rb") as f:
        png = f.read()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert (width, height) == (1280, 1400) and len(png) > 30_000, (width, height, len(png))
    return dom.stdout


GUIDES = ["binding.html", "numba.html", "scipy.html", "cython.html", "cffi-ctypes.html",
          "dlpack.html", "travel.html", "lifetime.html", "threads.html", "engines.html",
          "performance.html", "api.html", "capi.html"]


def _check_navigation(dom, current=None):
    nav = re.search(r'<div class="sidebar-tree">(.*?)</div>', dom, re.S)
    assert nav, "no navigation sidebar"
    for page in GUIDES:
        if page == current:
            continue        # its own entry links to "#"
        assert f'href="{page}"' in nav.group(1), f"the navigation has no link to {page}"


def test_landing_page_renders(html_dir, screenshot_dir):
    dom = _browse(html_dir, "index.html", os.path.join(screenshot_dir, "docs-landing.png"))
    _check_navigation(dom)
    assert re.search(r"<h1>numthunk<a class=\"headerlink\"", dom)
    # the seed example, highlighted: Pygments spans inside the code block
    block = re.search(r'<div class="highlight-python notranslate">(.*?)</pre>', dom, re.S)
    assert block and '<span class="nd">@cfunc</span>' in block.group(1)
    assert "nt.bind" in re.sub(r"<[^>]+>", "", block.group(1))


def test_a_guide_renders(html_dir, screenshot_dir):
    dom = _browse(html_dir, "scipy.html", os.path.join(screenshot_dir, "docs-guide.png"))
    _check_navigation(dom, current="scipy.html")
    assert 'class="current reference internal" href="#"' in dom   # its own entry is current
    blocks = re.findall(r'<div class="highlight-python notranslate">', dom)
    assert len(blocks) >= 3
    text = re.sub(r"<[^>]+>", "", dom)
    assert "t.rebind(1, c)" in text and "integrate.quad(llc, 0.0, 1.0)" in text
    assert re.search(r"<table[^>]*>.*generic_filter", dom, re.S)
