"""What the course's website holds: its pages in course order, each page's times, the landing page, and the
notebooks as the site shows them (``tools/site.py`` builds it).

A page is a committed notebook, shown as committed (never executed here): the lessons in ``notebooks/``,
the exercise in ``exercises/``, its solution in ``solutions/``, the deeper notebooks in ``notebooks/deeper/``.
The copy the site renders differs from the committed notebook in four ways, all for reading offline:

- the remote Colab badge becomes a line with a local badge, a download link to the committed notebook, the
  reading time (the prose's words at :data:`WORDS_PER_MINUTE`) and the running time (its last run's wall time,
  ``metadata.course.wall_time_s``, on the machine the README names);
- an output that needs the notebook's live kernel (an HTML output with a ``<script>`` or ``<iframe>``, such as
  TensorBoard served by the kernel) is replaced by a note saying so;
- a relative link to a repository file that is not a page points at that file on GitHub;
- ``language_info`` (which the course strips from committed notebooks) is set, for Python highlighting.
"""

from __future__ import annotations

import math
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import nbformat

from tools.links import colab_link, repository_url
from tools.notebook_metadata import readme_machine, wall_time
from tools.notebook_params import ROOT, course_notebooks

try:  # the course's own prose statistics, where this checkout has them
    from tools import prose
except ImportError:  # pragma: no cover - depends on the checkout
    prose = None

WORDS_PER_MINUTE = 200
LESSONS, SOLUTIONS, DEEPER = "Lessons", "Solutions", "Going deeper"
GROUPS = (LESSONS, SOLUTIONS, DEEPER)  # the navigation's sections, in this order
# Every folder a page comes from; a notebook in one of them that is no page fails the build (tools.site).
PAGE_FOLDERS = ("notebooks", "exercises", "solutions", "notebooks/deeper")
ORIGINALS = "_notebooks"  # in the Sphinx source folder: the committed notebooks, for the download links
ASSETS = "_assets"
LEXER = "course-ipython"  # IPython's, with shell scripts written by %%writefile as Bash (tools/site.py's conf)
BADGE = f"{ASSETS}/colab-badge.svg"
KERNEL_ONLY_NOTE = ("*An interactive output was shown here when the notebook ran (TensorBoard, say): it needs "
                    "the notebook's running kernel, so this page cannot show it. Run the notebook to see it.*")

_COLAB_BADGE = re.compile(r"\[!\[Open In Colab\]\([^)\s]*\)\]\([^)\s]*\)")
_LINK = re.compile(r"(?<!!)\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)\)")
_HEADING = re.compile(r"^#\s+(?P<title>.+)$", re.M)
_NUMBER = re.compile(r"^(?P<n>\d+)(?P<suffix>[a-z]*)_")


@dataclass(frozen=True)
class Page:
    rel: str  # the notebook's repository path: notebooks/01_strategies_overview.ipynb
    group: str  # one of GROUPS
    title: str  # its first heading
    nav: str  # its short title in the navigation: "01 Strategies overview" (the README table's words)
    words: int  # of prose: markdown cells
    wall_time_s: int | None  # the last run's, or for an exercise its solution's; None: never run

    @property
    def docname(self) -> str:
        return self.rel.removesuffix(".ipynb")

    @property
    def html(self) -> str:
        return self.docname + ".html"

    @property
    def reading(self) -> str:
        return minutes(self.words / WORDS_PER_MINUTE * 60)

    @property
    def running(self) -> str:
        return "not run yet" if self.wall_time_s is None else minutes(self.wall_time_s)


def minutes(seconds: float) -> str:
    return "< 1 min" if seconds < 60 else f"{math.ceil(seconds / 60)} min"


def number(path: Path) -> tuple[int, str]:
    """The course-order key of a notebook's name: ``05b_...`` -> ``(5, "b")``."""
    found = _NUMBER.match(path.name)
    return (int(found["n"]), found["suffix"]) if found else (math.inf, path.name)


def group_of(rel: str) -> str:
    folder = str(PurePosixPath(rel).parent)
    return DEEPER if folder == "notebooks/deeper" else SOLUTIONS if folder == "solutions" else LESSONS


def discover(root: Path = ROOT) -> list[Path]:
    """The course's notebooks (``course_notebooks()``), the deeper ones and the exercises, in course order:
    the lessons and exercises by number, then the solutions, then the deeper notebooks."""
    found = course_notebooks() if root == ROOT else []
    for folder in ("notebooks", "notebooks/deeper", "exercises", "solutions"):
        found += sorted((root / folder).glob("[0-9]*.ipynb"))
    unique = list(dict.fromkeys(p.resolve() for p in found))
    rels = [p.relative_to(root.resolve()).as_posix() for p in unique]
    return [root / rel for rel in sorted(rels, key=lambda r: (GROUPS.index(group_of(r)), number(Path(r)), r))]


def prose_words(nb: nbformat.NotebookNode) -> int:
    """Words of the notebook's markdown: ``tools.prose``'s count where it exists, else words with a letter or
    digit, code blocks, URLs and HTML comments left out."""
    if prose is not None:
        return prose.stats(nb).words
    text = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "markdown")
    text = re.sub(r"<!--.*?-->|^\s*(```|~~~).*?^\s*\1\s*$|https?://\S+", " ", text, flags=re.S | re.M)
    return sum(1 for token in text.split() if re.search(r"[^\W_]", token))


def title_of(nb: nbformat.NotebookNode, fallback: str) -> str:
    for cell in nb.cells:
        found = cell.cell_type == "markdown" and _HEADING.search(cell.source)
        if found:
            return found["title"].strip()
    return fallback


def course_pages(root: Path = ROOT) -> list[Page]:
    """Every page of the site, in course order (see :func:`discover`)."""
    rows = readme_rows((root / "README.md").read_text(encoding="utf-8"))
    pages = []
    for path in discover(root):
        rel = path.relative_to(root).as_posix()
        nb = nbformat.read(path, as_version=4)
        seconds = wall_time(path)
        solution = root / "solutions" / path.name
        if seconds is None and rel.startswith("exercises/") and solution.exists():
            seconds = wall_time(solution)  # an exercise runs as long as its solution, once answered
        title = title_of(nb, path.stem)
        short = rows[rel].name if rel in rows else title
        nav = f"{path.name.split('_', 1)[0]} {short.replace('`', '')}"
        pages.append(Page(rel, group_of(rel), title, nav, prose_words(nb), seconds))
    return pages


# --- the landing page --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Row:
    """A notebook's row in the README's course table."""

    cell: str  # the "Notebook" cell, links and all
    what: str  # the "What you do" cell
    name: str  # its short name: the link's text ("Exercise: SVHN (solution)" for a row's second link)
    first: bool  # the row's first link (else it is shown in another notebook's row, as a solution is)


def readme_rows(readme: str) -> dict[str, Row]:
    """The README's course table, by the repository path of each notebook its "Notebook" cells link to."""
    rows: dict[str, Row] = {}
    for line in readme.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) < 3 or not re.fullmatch(r"\d+[a-z]*", cells[0]):
            continue
        links = _LINK.findall(cells[1])
        for i, (text, target) in enumerate(links):
            name = text if i == 0 else f"{links[0][0]} ({text})"
            rows.setdefault(target, Row(cells[1], cells[2], name, i == 0))
    return rows


def readme_intro(readme: str) -> tuple[str, str]:
    """The README's title and its first paragraph (what the course is)."""
    heading = _HEADING.search(readme)
    return heading["title"].strip(), readme[heading.end():].strip().split("\n\n", 1)[0].strip()


def landing_page(pages: list[Page], readme: str, url: str, root: Path = ROOT) -> str:
    """``index.md``: what the course is, a table per group (what each page teaches, time to read and to run),
    how to run it, and the hidden tables of contents that order the navigation (and previous/next)."""
    title, intro = readme_intro(readme)
    rows = readme_rows(readme)
    machine = readme_machine(readme)
    out = [f"# {title}", "", intro, "",
           f"Each page shows its notebook as it was last run, outputs and figures included: read it here without "
           f"running anything. *Read* counts its prose at {WORDS_PER_MINUTE} words a minute; *Run* is its last "
           f"run's wall time on {machine}.", ""]
    for group in GROUPS:  # a notebook shown in another's row (a solution in its exercise's) is not listed again
        members = [p for p in pages if p.group == group and (p.rel not in rows or rows[p.rel].first)]
        if not members:
            continue
        out += [f"## {group}", "", "| # | Notebook | What you do | Read | Run |", "|---|---|---|---|---|"]
        for page in members:
            row = rows.get(page.rel, Row(f"[{page.title}]({page.rel})", "", page.title, True))
            number = Path(page.rel).name.split("_", 1)[0]
            cells = link_to_repository(f"{row.cell} | {row.what}", ".", {p.rel for p in pages}, url, root)
            out.append(f"| {number} | {cells} | {page.reading} | {page.running} |")
        out.append("")
    out += ["## Run it yourself", "",
            "Every page has an *Open in Colab* badge and a link to download its notebook. To run the course on "
            f"your own machine, clone [the repository]({url}) and run `python3 tasks.py lab` (JupyterLab, on "
            "notebook 01); the README says more.", ""]
    for group in GROUPS:
        members = [f"{p.nav} <{p.docname}>" for p in pages if p.group == group]
        if members:
            out += ["```{toctree}", ":hidden:", f":caption: {group}", "", *members, "```", ""]
    return "\n".join(out)


# --- the notebooks as the site shows them ------------------------------------------------------------------

def meta_block(page: Page, url: str, machine: str) -> str:
    """The line under a page's title: Colab, download, reading and running time."""
    original = f"/{ORIGINALS}/{page.rel}"
    ran = "not run yet" if page.wall_time_s is None else f"{page.running} on {machine}"
    if page.wall_time_s is not None and page.group == LESSONS and page.rel.startswith("exercises/"):
        ran += " (its solution's run)"
    return (f"```{{container}} course-meta\n[![Open In Colab](/{BADGE})]({colab_link(url, page.rel)})\n"
            f"{{download}}`Download the notebook (.ipynb) <{original}>`\n\n"
            f"**Reading time** {page.reading} · **Running time** {ran}\n```")


def link_to_repository(source: str, folder: str, pages: set[str], url: str, root: Path = ROOT) -> str:
    """Markdown ``source`` (of a file in ``folder``) with each relative link to a repository file that is no
    page pointed at that file on GitHub; links to pages, and broken links, stay for Sphinx to resolve or fail."""
    def replace(match):
        target = match["target"]
        if re.match(r"[a-z][a-z0-9+.-]*:|#|/", target):
            return match[0]
        path, _, anchor = target.partition("#")
        rel = os.path.normpath(PurePosixPath(folder) / path).replace(os.sep, "/")
        resolved = (root / rel).resolve()
        if rel in pages or not resolved.exists() or not resolved.is_relative_to(root.resolve()):
            return match[0]  # a page (Sphinx resolves it), or broken (Sphinx fails the build on it)
        inside = resolved.relative_to(root.resolve()).as_posix()
        kind = "tree" if resolved.is_dir() else "blob"
        return f"[{match['text']}]({url}/{kind}/main/{inside}{'#' + anchor if anchor else ''})"

    return _LINK.sub(replace, source)


def site_notebook(page: Page, url: str, machine: str, pages: set[str], root: Path = ROOT) -> nbformat.NotebookNode:
    """The committed notebook as the site shows it (see the module's docstring); the file is unchanged."""
    nb = nbformat.read(root / page.rel, as_version=4)
    nb.metadata["language_info"] = {"name": "python", "pygments_lexer": LEXER}
    first = next((c for c in nb.cells if c.cell_type == "markdown"), None)
    block = meta_block(page, url, machine)
    badge = _COLAB_BADGE.search(first.source) if first is not None else None
    if badge:  # the first badge becomes the block (which holds the local badge), any other goes
        before, after = first.source[:badge.start()], first.source[badge.end():]
        first.source = f"{_COLAB_BADGE.sub('', before)}\n{block}\n{_COLAB_BADGE.sub('', after)}"
    elif first is not None and _HEADING.search(first.source):
        end = _HEADING.search(first.source).end()
        first.source = first.source[:end] + "\n\n" + block + "\n" + first.source[end:]
    else:
        nb.cells.insert(0, nbformat.v4.new_markdown_cell(f"# {page.title}\n\n{block}"))
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = link_to_repository(cell.source, str(PurePosixPath(page.rel).parent), pages, url, root)
        for output in cell.get("outputs", []):
            html = output.get("data", {}).get("text/html", "")
            if re.search(r"<script|<iframe", html if isinstance(html, str) else "".join(html), re.I):
                output["data"] = {"text/markdown": KERNEL_ONLY_NOTE}
    return nb


COLAB_BADGE_SVG = """\
<svg xmlns="http://www.w3.org/2000/svg" width="117" height="20" role="img" aria-label="Open in Colab">
<rect width="117" height="20" rx="3" fill="#555"/><rect x="24" width="93" height="20" rx="3" fill="#555"/>
<rect width="24" height="20" rx="3" fill="#e8710a"/>
<circle cx="9" cy="10" r="5" fill="none" stroke="#f9ab00" stroke-width="2.5"/>
<circle cx="16" cy="10" r="5" fill="none" stroke="#fff" stroke-width="2.5"/>
<text x="70" y="14" fill="#fff" font-family="DejaVu Sans,Verdana,Geneva,sans-serif" font-size="11"
 text-anchor="middle">Open in Colab</text></svg>
"""


def stage(src: Path, pages: list[Page], root: Path = ROOT) -> None:
    """Write the Sphinx sources into ``src``: the landing page, each page's notebook as the site shows it, the
    committed notebooks (downloads) and the local badge."""
    url = repository_url(root / "pyproject.toml")
    readme = (root / "README.md").read_text(encoding="utf-8")
    machine = readme_machine(readme)
    (src / ASSETS).mkdir(parents=True, exist_ok=True)
    (src / BADGE).write_text(COLAB_BADGE_SVG, encoding="utf-8")
    (src / "index.md").write_text(landing_page(pages, readme, url, root), encoding="utf-8")
    rels = {p.rel for p in pages}
    for page in pages:
        staged = src / page.rel
        staged.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(site_notebook(page, url, machine, rels, root), staged)
        original = src / ORIGINALS / page.rel
        original.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / page.rel, original)
