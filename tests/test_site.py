"""The course's website (``tools/site.py``, ``python3 tasks.py site``): its pages in course order, a build that
loads nothing from another host, and the built site in a real browser (marker ``browser``: Debian's chromium
driven by Playwright, as ``tests/test_browser.py`` does), served over HTTP on a free port.

By hand: ``.venv/bin/python -m pytest -m browser tests/test_site.py``. Screenshots: ``build/screenshots/``
(``site_index.png``, ``site_04_single_vs_multi_device.png``, ``site_04_figure.png``).
"""

from __future__ import annotations

import re
import shutil
import socket
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

import tasks
from tools import site, site_pages
from tools.notebook_params import ROOT, course_notebooks

CHROMIUM = next(filter(None, map(shutil.which, tasks.CHROMIUM_COMMANDS)), None)
SHOTS = ROOT / "build" / "screenshots"
LESSON_04 = "notebooks/04_single_vs_multi_device"
SEARCHED = ("MirroredVariable", "notebooks/02_mirrored_strategy_fit")  # a word of lesson 02's prose, its page


def needs_sphinx():
    pytest.importorskip("myst_nb", reason="the site's tools (Sphinx, MyST-NB) come with the dev extra on Python 3.11+")


# --- what the site holds (no browser) ----------------------------------------------------------------------

def test_the_site_lists_every_course_notebook_in_course_order():
    pages = site_pages.course_pages()
    rels = [p.rel for p in pages]
    assert len(rels) == len(set(rels))
    exercises = sorted((ROOT / "exercises").glob("[0-9]*.ipynb"))
    deeper = sorted((ROOT / "notebooks" / "deeper").glob("[0-9]*.ipynb"))
    assert {p.relative_to(ROOT).as_posix() for p in [*course_notebooks(), *exercises, *deeper]} == set(rels)
    groups = [p.group for p in pages]
    assert groups == sorted(groups, key=site_pages.GROUPS.index), "lessons, then solutions, then deeper notebooks"
    lessons = [p.rel for p in pages if p.group == site_pages.LESSONS]
    assert lessons == sorted(lessons, key=lambda r: site_pages.number(Path(r)))
    assert lessons.index("exercises/07_svhn.ipynb") == lessons.index("notebooks/06_parameter_servers.ipynb") + 1
    assert all(p.group == site_pages.DEEPER for p in pages if p.rel.startswith("notebooks/deeper/"))
    # the landing page's tables of contents (the navigation, and previous/next) list them in this order
    landing = site_pages.landing_page(pages, (ROOT / "README.md").read_text(), "https://github.com/o/r")
    blocks = re.findall(r"```\{toctree\}\n(.*?)```", landing, re.S)
    toc = [re.fullmatch(r"(.+) <(.+)>", line).groups() for block in blocks
           for line in block.splitlines() if line and not line.startswith(":")]
    assert [doc for _, doc in toc] == [p.docname for p in pages]
    assert toc[0][0] == "01 Strategies overview", "the README table's short names, numbered"


def test_pages_show_reading_and_running_times_from_the_notebooks():
    pages = {p.rel: p for p in site_pages.course_pages()}
    first = pages["notebooks/01_strategies_overview.ipynb"]
    assert first.words > 200 and first.wall_time_s is not None
    assert pages["exercises/07_svhn.ipynb"].wall_time_s == pages["solutions/07_svhn.ipynb"].wall_time_s
    assert site_pages.minutes(59) == "< 1 min" and site_pages.minutes(61) == "2 min"


def test_the_shown_notebook_has_a_local_badge_its_download_and_no_kernel_only_output(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(
                    "# Title\n\n[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
                    "(https://colab.research.google.com/github/o/r/blob/main/notebooks/01_x.ipynb)\n\nSee "
                    "[the script](../tasks.py) and [lesson 02](02_y.ipynb)."),
                nbformat.v4.new_code_cell("board", outputs=[nbformat.v4.new_output(
                    "display_data", data={"text/html": '<iframe id="tensorboard-frame-1"></iframe><script>x()</script>',
                                          "text/plain": "<IPython.core.display.HTML object>"})])]
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "tasks.py").write_text("")
    nbformat.write(nb, tmp_path / "notebooks" / "01_x.ipynb")
    page = site_pages.Page("notebooks/01_x.ipynb", site_pages.LESSONS, "Title", "01 Title", 400, 90)
    shown = site_pages.site_notebook(page, "https://github.com/o/r", "a machine",
                                     {page.rel, "notebooks/02_y.ipynb"}, tmp_path)
    text = shown.cells[0].source
    assert "colab.research.google.com/assets" not in text and f"](/{site_pages.BADGE})" in text
    assert "(https://colab.research.google.com/github/o/r/blob/main/notebooks/01_x.ipynb)" in text
    assert f"</{site_pages.ORIGINALS}/notebooks/01_x.ipynb>" in text, "the download: the committed notebook"
    assert "**Reading time** 2 min" in text and "**Running time** 2 min on a machine" in text
    assert "[the script](https://github.com/o/r/blob/main/tasks.py)" in text, "a repository file: on GitHub"
    assert "[lesson 02](02_y.ipynb)" in text, "a page: left to Sphinx"
    assert shown.cells[1].outputs[0].data == {"text/markdown": site_pages.KERNEL_ONLY_NOTE}


def test_the_offline_check_finds_what_loads_from_another_host(tmp_path):
    (tmp_path / "a.html").write_text(
        '<link rel="stylesheet" href="https://cdn.example/x.css"><script src="//cdn.example/mathjax.js"></script>'
        '<script src="_static/local.js"></script><img src="_images/a.png"><a href="https://example.org">fine</a>'
        "<style>@import 'https://fonts.example/f.css';</style>")
    (tmp_path / "b.css").write_text("@font-face { src: url(https://fonts.example/f.woff2); } .x { background: "
                                    "url('../img/ok.png'); }")
    assert site.external_loads(tmp_path) == [
        "a.html: https://cdn.example/x.css", "a.html: //cdn.example/mathjax.js", "a.html: https://fonts.example/f.css",
        "b.css: https://fonts.example/f.woff2"]


@pytest.mark.versionless  # Sphinx and Jupyter Book are dev tools, at the same versions in both venvs
def test_a_small_course_builds_with_no_warning_and_loads_nothing_from_another_host(tmp_path, capsys):
    """The whole pipeline (staging, Sphinx with -W, the checks) on a copy holding notebook 01 only (seconds)."""
    needs_sphinx()
    root = tmp_path / "repo"
    (root / "notebooks").mkdir(parents=True)
    shutil.copy(ROOT / "pyproject.toml", root)
    # its links to the other notebooks become plain text: they are not in this small copy (the whole site's
    # build checks them)
    lesson = nbformat.read(ROOT / "notebooks" / "01_strategies_overview.ipynb", as_version=4)
    for cell in lesson.cells:
        if cell.cell_type == "markdown":
            cell.source = re.sub(r"\[([^\]\n]*)\]\((?:\.\./)?(?:deeper/)?\d\d\w*\.ipynb[^)\s]*\)", r"\1", cell.source)
    nbformat.write(lesson, root / "notebooks" / "01_strategies_overview.ipynb")
    readme = (ROOT / "README.md").read_text()
    rows = [line for line in readme.splitlines() if line.startswith("| 01 ")]
    table = "| # | Notebook | What you do | |\n|---|---|---|---|\n" + "\n".join(rows)
    (root / "README.md").write_text(readme.split("\n\n| #")[0] + "\n\n" + table + "\n")
    out = tmp_path / "site"
    assert site.build(out, tmp_path / "src", root, jobs="1") == 0, capsys.readouterr()
    html = (out / "notebooks" / "01_strategies_overview.html").read_text()
    assert "course-meta" in html and "colab.research.google.com/github/" in html
    assert site.external_loads(out) == []
    assert not re.search(r"<(script|link)[^>]+(src|href)=\"(https?:)?//", html)
    nbformat.write(nbformat.v4.new_notebook(), root / "notebooks" / "zz_stray.ipynb")  # no number: no page
    assert site.missing_pages(out, site_pages.course_pages(root), root) == [
        "notebooks/zz_stray.ipynb: a notebook of the course's folders that the site does not list"]


def test_the_server_stops_when_its_block_ends(tmp_path):
    (tmp_path / "index.html").write_text("<p>hi</p>")
    with site.serve(tmp_path) as url:
        assert urllib.request.urlopen(url, timeout=5).status == 200
        port = urllib.parse.urlparse(url).port
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass


# --- the built site in a real browser ------------------------------------------------------------------------

def _visit(browser, url: str) -> SimpleNamespace:
    """Open ``url`` in a fresh page: its console errors, uncaught errors, failed and off-machine requests,
    images that did not load, links and element ids."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    seen = SimpleNamespace(errors=[], elsewhere=[], failed=[])
    page.on("console", lambda m: m.type == "error" and seen.errors.append(m.text))
    page.on("pageerror", lambda e: seen.errors.append(str(e)))
    page.on("requestfailed", lambda r: seen.failed.append(f"{r.url}: {r.failure}"))
    page.on("response", lambda r: r.status >= 400 and seen.failed.append(f"{r.url}: HTTP {r.status}"))

    def local_only(route):
        if urllib.parse.urlparse(route.request.url).hostname in ("127.0.0.1", None):
            return route.continue_()
        seen.elsewhere.append(route.request.url)
        return route.abort()

    page.route("**/*", local_only)
    page.goto(url, wait_until="load")
    page.wait_for_load_state("networkidle")
    seen.broken_images = page.evaluate(
        "Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)")
    seen.images = page.evaluate("document.images.length")
    seen.links = page.evaluate("Array.from(document.querySelectorAll('a[href]')).map(a => a.href)")
    seen.ids = set(page.evaluate("Array.from(document.querySelectorAll('[id]')).map(e => e.id)"))
    seen.page = page
    return seen


@pytest.fixture(scope="module")
def built_site():
    """build/site built by `python3 tasks.py site`'s code, served on a free port, every page visited once."""
    if CHROMIUM is None:
        pytest.skip("no chromium on this machine (`python3 tasks.py setup` installs Debian's as root)")
    playwright = pytest.importorskip("playwright.sync_api")
    needs_sphinx()
    assert site.build() == 0, "the site did not build: see the output above"
    SHOTS.mkdir(parents=True, exist_ok=True)
    pages = ["index.html", *(p.html for p in site_pages.course_pages()), "search.html", "genindex.html"]
    with site.serve(site.OUT) as base, playwright.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            visits = {}
            for rel in pages:
                visits[rel] = _visit(browser, base + rel)
                if rel != "index.html" and not rel.startswith(LESSON_04):
                    visits[rel].page.close()
            yield SimpleNamespace(base=base, browser=browser, visits=visits)
        finally:
            browser.close()
    port = urllib.parse.urlparse(base).port
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass  # the server is gone with its block


@pytest.mark.browser
def test_every_page_opens_with_no_console_error_and_nothing_from_another_host(built_site):
    for rel, seen in built_site.visits.items():
        assert seen.errors == [], f"{rel}: console errors"
        assert seen.failed == [], f"{rel}: failed requests"
        assert seen.elsewhere == [], f"{rel}: requests to another host"


@pytest.mark.browser
def test_every_image_has_loaded(built_site):
    for rel, seen in built_site.visits.items():
        assert seen.broken_images == [], f"{rel}: images not loaded"
    lesson = built_site.visits[f"{LESSON_04}.html"]
    committed = nbformat.read(ROOT / f"{LESSON_04}.ipynb", as_version=4)
    figures = sum("image/png" in o.get("data", {}) for c in committed.cells for o in c.get("outputs", []))
    assert lesson.images >= figures + 1, "every committed figure, and the Colab badge"


@pytest.mark.browser
def test_every_internal_link_resolves(built_site):
    links = {link for seen in built_site.visits.values() for link in seen.links if link.startswith(built_site.base)}
    assert len(links) > 20
    broken = []
    for link in sorted(links):
        address, _, anchor = link.partition("#")
        try:
            status = urllib.request.urlopen(address, timeout=10).status
        except urllib.error.HTTPError as error:
            status = error.code
        rel = address.removeprefix(built_site.base) or "index.html"
        if status != 200:
            broken.append(f"{link}: HTTP {status}")
        elif anchor and rel in built_site.visits and urllib.parse.unquote(anchor) not in built_site.visits[rel].ids:
            broken.append(f"{link}: no element with that id")
    assert broken == []


@pytest.mark.browser
def test_search_finds_a_word_from_a_lesson(built_site):
    word, page = SEARCHED
    prose = "".join(c.source for c in nbformat.read(ROOT / f"{page}.ipynb", as_version=4).cells)
    assert word in prose, f"the test's word is no longer in {page}: pick another"
    results = built_site.browser.new_page()
    results.goto(f"{built_site.base}search.html?q={word}")
    found = results.locator("#search-results ul.search li a")
    found.first.wait_for(timeout=30_000)
    assert any(f"{page}.html" in (a.get_attribute("href") or "") for a in found.all())
    results.close()


@pytest.mark.browser
def test_screenshots_of_the_landing_page_and_lesson_04(built_site):
    landing = built_site.visits["index.html"].page
    landing.screenshot(path=SHOTS / "site_index.png", full_page=True)
    lesson = built_site.visits[f"{LESSON_04}.html"].page
    lesson.screenshot(path=SHOTS / "site_04_single_vs_multi_device.png")
    figure = lesson.locator("img[src$='.png']").first  # the first committed figure
    figure.scroll_into_view_if_needed()
    lesson.screenshot(path=SHOTS / "site_04_figure.png")
    for name in ("site_index.png", "site_04_single_vs_multi_device.png", "site_04_figure.png"):
        assert (SHOTS / name).stat().st_size > 10_000
