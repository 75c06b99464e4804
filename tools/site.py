"""The course as a static website, built from the committed notebooks without running any of them.

    python -m tools.site            # build build/site/ (python3 tasks.py site)
    python -m tools.site --serve    # build, then serve it on http://127.0.0.1:8000/ until Ctrl-C (--port N)

Sphinx with MyST-NB (notebooks rendered with their committed outputs, ``nb_execution_mode = "off"``) and the
sphinx-book-theme, all installed from PyPI with the dev extra: the build needs no network, and neither does a
page. What the pages hold is ``tools/site_pages.py``'s: the sources are staged in ``build/site-src/``.

The build fails (exit 1) on any Sphinx warning (``-W --keep-going``: a broken cross-reference, a missing
image, a document outside the table of contents), on a notebook in the course's folders that became no page,
and on any page or stylesheet that loads something from another host (a CDN script, font or stylesheet: MathJax
or require.js, say), so the site renders offline.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import importlib.util
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

from tools.links import repository_url
from tools.notebook_params import ROOT
from tools.site_pages import ASSETS, LEXER, ORIGINALS, PAGE_FOLDERS, Page, course_pages, stage

OUT = ROOT / "build" / "site"
SRC = ROOT / "build" / "site-src"
TITLE = "Distributed training with TensorFlow"

CONF = r'''
# Written by tools/site.py for each build: edit it there.
project = {title!r}
author = "the distributed-training-course authors"
copyright = "the distributed-training-course authors, Apache-2.0"
language = "en"
extensions = ["myst_nb", "sphinx.ext.githubpages"]  # githubpages: a .nojekyll file, so GitHub Pages serves _static/
exclude_patterns = [{originals!r}, {assets!r}, "**/.ipynb_checkpoints"]
nb_execution_mode = "off"  # the committed outputs, as they are: nothing runs
nb_ipywidgets_js = {{}}  # no require.js or widget manager from a CDN (the notebooks hold no widget state)
nb_merge_streams = True
myst_heading_anchors = 3  # links to a section of another notebook (page.ipynb#a-heading)
html_theme = "sphinx_book_theme"
html_title = {title!r}
html_static_path = ["_static"]
html_css_files = ["course.css"]
html_copy_source = False  # the download link gives the committed notebook instead
html_show_sourcelink = False
html_last_updated_fmt = None
html_context = {{"default_mode": "auto"}}  # the theme's light/dark default (unset, its script logs an error)
html_theme_options = {{
    "repository_url": {url!r},
    "use_repository_button": True,
    "use_download_button": False,
    "home_page_in_toc": True,
    "show_navbar_depth": 1,
    "show_toc_level": 2,
}}


def setup(app):
    """The notebooks' lexer: IPython's, but a `%%writefile` cell that writes a shell script (notebook 08's
    sbatch script) is highlighted as Bash, not as Python (which fails on its `$`)."""
    from pygments.lexer import bygroups, using
    from pygments.lexers import BashLexer, get_lexer_by_name
    from pygments.token import Operator, Text

    ipython = type(get_lexer_by_name("ipython3"))

    class CourseLexer(ipython):
        name, aliases = "IPython (the course's)", [{lexer!r}]
        tokens = {{**ipython.tokens, "root": [
            (r"(?s)(\s*)(%%writefile)([^\n]*\.(?:sh|bash|sbatch)\s*\n)(.*)",
             bygroups(Text, Operator, Text, using(BashLexer))), *ipython.tokens["root"]]}}

    app.add_lexer({lexer!r}, CourseLexer)
'''

CSS = """\
.course-meta { margin: 0.5rem 0 1.5rem; padding: 0.5rem 0.8rem; border-left: 4px solid #e8710a;
               background: var(--pst-color-surface); line-height: 1.9; }
.course-meta p { margin: 0; }
.course-meta img { vertical-align: middle; margin-right: 0.6rem; }
.course-meta a.download code { font-family: inherit; font-size: inherit; background: none; border: none;
                               padding: 0; color: inherit; }
.course-meta a.download::before { content: "\\2B07\\00A0"; }
"""


def write_sources(src: Path, pages: list[Page], root: Path = ROOT) -> None:
    """The Sphinx source folder: conf.py, the stylesheet, then :func:`tools.site_pages.stage`'s pages."""
    shutil.rmtree(src, ignore_errors=True)
    (src / "_static").mkdir(parents=True)
    (src / "conf.py").write_text(CONF.format(title=TITLE, originals=ORIGINALS, assets=ASSETS, lexer=LEXER,
                                             url=repository_url(root / "pyproject.toml")).lstrip(), encoding="utf-8")
    (src / "_static" / "course.css").write_text(CSS, encoding="utf-8")
    stage(src, pages, root)


def sphinx(src: Path, out: Path, jobs: str = "auto") -> subprocess.CompletedProcess:
    """``sphinx-build -W --keep-going`` (a warning is an error) into ``out``, from a fresh environment."""
    doctrees = src.parent / (src.name + "-doctrees")
    shutil.rmtree(doctrees, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    return subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q", "-j", jobs,
                           "-d", doctrees, src, out], cwd=src)


def missing_pages(out: Path, pages: list[Page], root: Path = ROOT) -> list[str]:
    """The course folders' notebooks with no page in ``out``, and pages without the line under their title."""
    problems = []
    expected = {p.rel: p for p in pages}
    for folder in PAGE_FOLDERS:
        for path in sorted((root / folder).glob("*.ipynb")):
            rel = path.relative_to(root).as_posix()
            if rel not in expected:
                problems.append(f"{rel}: a notebook of the course's folders that the site does not list")
    for page in pages:
        html = out / page.html
        if not html.exists():
            problems.append(f"{page.rel}: no page {page.html}")
        elif "course-meta" not in html.read_text(encoding="utf-8"):
            problems.append(f"{page.html}: no line with its Colab link, download and times")
    if not (out / "index.html").exists():
        problems.append("index.html: no landing page")
    return problems


class _Loads(HTMLParser):
    """What a page loads: script src, link href (stylesheets, icons, fonts, preloads), img/iframe/... src."""

    SOURCES = {"script": "src", "img": "src", "iframe": "src", "source": "src", "audio": "src", "video": "src",
               "embed": "src", "object": "data", "link": "href"}

    def __init__(self):
        super().__init__()
        self.urls: list[str] = []
        self._style = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in self.SOURCES and attrs.get(self.SOURCES[tag]):
            self.urls.append(attrs[self.SOURCES[tag]])
        if tag == "img" and attrs.get("srcset"):
            self.urls += [part.split()[0] for part in attrs["srcset"].split(",") if part.strip()]
        self._style = tag == "style"
        if attrs.get("style"):
            self.urls += _css_urls(attrs["style"])

    def handle_data(self, data):
        if self._style:
            self.urls += _css_urls(data)

    def handle_endtag(self, tag):
        self._style = False


def _css_urls(css: str) -> list[str]:
    return re.findall(r"""(?:url\(\s*['"]?|@import\s+['"])([^'")\s]+)""", css)


def external_loads(out: Path) -> list[str]:
    """Every place in the built site where a page or stylesheet loads from another host (http:, https:, //)."""
    found = []
    for path in sorted(out.rglob("*")):
        if path.suffix == ".html":
            parser = _Loads()
            parser.feed(path.read_text(encoding="utf-8", errors="replace"))
            urls = parser.urls
        elif path.suffix == ".css":
            urls = _css_urls(path.read_text(encoding="utf-8", errors="replace"))
        else:
            continue
        found += [f"{path.relative_to(out)}: {u}" for u in urls if re.match(r"(https?:)?//", u.strip(), re.I)]
    return found


def build(out: Path = OUT, src: Path = SRC, root: Path = ROOT, pages: list[Page] | None = None,
          jobs: str = "auto") -> int:
    """Stage, build and check the site; 0 when it is complete and loads nothing from elsewhere."""
    started = time.monotonic()
    if importlib.util.find_spec("myst_nb") is None:
        print("[site] Sphinx, MyST-NB and sphinx-book-theme are not installed: the dev extra installs them on "
              "Python 3.11+ (`python3 tasks.py site` sets it up)", file=sys.stderr)
        return 2
    pages = course_pages(root) if pages is None else pages
    print(f"[site] {len(pages)} pages from the committed notebooks (nothing is executed); sources in {src}",
          flush=True)
    write_sources(src, pages, root)
    if sphinx(src, out, jobs).returncode != 0:
        print("[site] Sphinx warned (every warning is an error here): see its messages above", file=sys.stderr)
        return 1
    problems = missing_pages(out, pages, root)
    problems += [f"{where} (loaded from another host: the page would need the network; ship a local copy or turn "
                 f"it off in tools/site.py's conf)" for where in external_loads(out)]
    for problem in problems:
        print(f"[site] {problem}", file=sys.stderr)
    if problems:
        return 1
    print(f"[site] built {out} in {time.monotonic() - started:.0f} s: {len(pages) + 1} pages, no warning, "
          "nothing loaded from another host", flush=True)
    return 0


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serve(directory: Path = OUT, port: int = 0, quiet: bool = True) -> Iterator[str]:
    """Serve ``directory`` on 127.0.0.1 (``port`` 0: a free one) from a thread; yield its URL. The server is
    shut down and its socket closed on leaving, however the block ends."""
    handler = functools.partial(_Quiet if quiet else http.server.SimpleHTTPRequestHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    thread = threading.Thread(target=server.serve_forever, name="site-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--serve", action="store_true", help="after the build, serve the site until Ctrl-C")
    parser.add_argument("--port", type=int, default=8000, help="the port --serve listens on (0: any free one)")
    parser.add_argument("--out", type=Path, default=OUT, help="where the site is written (default build/site)")
    args = parser.parse_args(argv)
    rc = build(args.out.resolve())
    if rc != 0 or not args.serve:
        return rc
    try:
        server = serve(args.out.resolve(), args.port, quiet=False)
        url = server.__enter__()
    except OSError as error:  # the port is taken: any free one
        print(f"[site] port {args.port}: {error.strerror}; serving on a free port instead", flush=True)
        server = serve(args.out.resolve(), 0, quiet=False)
        url = server.__enter__()
    print(f"[site] serving {args.out} at {url} (Ctrl-C stops it)", flush=True)
    # Ctrl-C stops it, and so does SIGTERM (`kill PID`), also when started as a background job (SIGINT ignored)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        print("[site] stopped", flush=True)
    finally:
        server.__exit__(None, None, None)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
