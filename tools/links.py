"""Point every link to the repository at the one URL in pyproject.toml.

The repository URL lives in ONE place: ``[project.urls] Repository`` in pyproject.toml. This tool
rewrites, in every course notebook and in README.md, each "Open In Colab" badge link (to
``https://colab.research.google.com/github/OWNER/REPO/blob/main/<path of the notebook>``), and
replaces each notebook's install cell (the code cell marked ``# Colab: install course_utils``)
with the canonical text below.

    python -m tools.links           # rewrite what disagrees, print each change
    python -m tools.links --check   # change nothing; exit 1 listing every disagreement
    python3 tasks.py links [--check]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from tools.notebook_metadata import write_notebook
from tools.notebook_params import ROOT, course_notebooks

INSTALL_MARKER = "# Colab: install course_utils"

# The first code cell after the parameters in every notebook. It must not import TensorFlow
# (the next cell configures devices before TensorFlow starts). On Colab it installs what Colab
# lacks, keeping Colab's TensorFlow: tf-keras and tensorboard must have TensorFlow's minor version.
INSTALL_CELL = '''\
# Colab: install course_utils (locally, `python3 tasks.py lab` has installed it already)
import importlib.util
import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # quiet TensorFlow's C++ start-up lines
if importlib.util.find_spec("course_utils") is None:
    if "google.colab" not in sys.modules:
        raise ImportError("course_utils is not installed: run `python3 tasks.py lab` in the repository, "
                          "or `pip install -e .` there")
    from importlib.metadata import version
    tf_version = version("tensorflow")  # keep Colab's TensorFlow, match its minor version
    tf_minor = ".".join(tf_version.split(".")[:2])
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", f"tensorflow=={tf_version}",
                           f"tf-keras=={tf_minor}.*", f"tensorboard=={tf_minor}.*",
                           "course-utils @ git+{url}"])
    importlib.invalidate_caches()'''

COLAB = "https://colab.research.google.com/github/"
_BADGE = re.compile(
    r"(\[!\[Open In Colab\]\(https://colab\.research\.google\.com/assets/colab-badge\.svg\)\]\()"
    r"(?P<link>[^)\s]*)(\))")
_GITHUB = re.compile(r"https://github\.com/(?P<repo>[^/\s]+/[^/\s]+?)(?:\.git)?/?$")


def repository_url(pyproject: Path = ROOT / "pyproject.toml") -> str:
    with open(pyproject, "rb") as f:
        url = tomllib.load(f)["project"]["urls"]["Repository"]
    if not _GITHUB.match(url):
        raise ValueError(f"{pyproject}: [project.urls] Repository must be https://github.com/OWNER/REPO, not {url!r}")
    return url.rstrip("/").removesuffix(".git")


def install_cell(url: str) -> str:
    return INSTALL_CELL.replace("{url}", url)


def colab_link(url: str, rel: str) -> str:
    return f"{COLAB}{_GITHUB.match(url)['repo']}/blob/main/{rel}"


def _is_install_cell(cell) -> bool:
    if cell.cell_type != "code":
        return False
    # The marker, or (the first time) the old cell that had none.
    return INSTALL_MARKER in cell.source or ("google.colab" in cell.source and "pip" in cell.source)


def _fix_badges(text: str, link_for, where: str, changes: list[str]) -> str:
    def replace(match):
        want = link_for(match["link"])
        if want is None or want == match["link"]:
            return match[0]
        changes.append(f"{where}: Colab badge {match['link']} -> {want}")
        return match[1] + want + match[3]

    return _BADGE.sub(replace, text)


def fix_colab(nb, rel: str, url: str) -> list[str]:
    """Make the notebook's badge(s) and install cell agree with ``url``, in memory; return the changes
    made, and what must be fixed by hand (no badge, not exactly one install cell)."""
    changes: list[str] = []
    badges = 0
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            badges += len(_BADGE.findall(cell.source))
            cell.source = _fix_badges(cell.source, lambda _: colab_link(url, rel), rel, changes)
    if not badges:
        changes.append(f"{rel}: no Colab badge (fix by hand: add one to the first markdown cell)")
    installs = [cell for cell in nb.cells if _is_install_cell(cell)]
    if len(installs) != 1:
        changes.append(f"{rel}: expected one install cell (a code cell with {INSTALL_MARKER!r}), "
                       f"found {len(installs)} (fix by hand)")
    for cell in installs:
        if cell.source != install_cell(url):
            changes.append(f"{rel}: install cell {cell.get('id', '')} -> the canonical text for {url}")
            cell.source = install_cell(url)
    return changes


def sync_notebook(path: Path, rel: str, url: str, check: bool = False) -> list[str]:
    """Make one notebook's badge(s) and install cell agree with ``url``; return the changes (made or needed)."""
    nb = nbformat.read(path, as_version=4)
    before = nbformat.writes(nb)
    changes = fix_colab(nb, rel, url)
    if nbformat.writes(nb) != before and not check:
        write_notebook(nb, path)
    return changes


def sync_readme(path: Path, url: str, check: bool = False) -> list[str]:
    """Make README.md's Colab badges point at ``url``, each keeping the notebook path it links to."""
    text = path.read_text(encoding="utf-8")
    changes: list[str] = []

    def link_for(link: str) -> str | None:
        match = re.search(r"/blob/[^/]+/(?P<rel>.+)$", link)
        if not match:
            changes.append(f"{path.name}: Colab badge link {link!r} names no notebook path (fix by hand)")
            return None
        return colab_link(url, match["rel"])

    new = _fix_badges(text, link_for, path.name, changes)
    if new != text and not check:
        path.write_text(new, encoding="utf-8")
    return changes


def sync(root: Path = ROOT, notebooks: list[Path] | None = None, check: bool = False) -> list[str]:
    """Every change needed (check=True) or made, for the notebooks and root/README.md."""
    url = repository_url(root / "pyproject.toml")
    notebooks = course_notebooks() if notebooks is None else notebooks
    changes: list[str] = []
    for path in notebooks:
        changes += sync_notebook(path, path.relative_to(root).as_posix(), url, check=check)
    changes += sync_readme(root / "README.md", url, check=check)
    return changes


def check(root: Path = ROOT, notebooks: list[Path] | None = None) -> list[str]:
    """Every disagreement with pyproject's repository URL; changes nothing."""
    return sync(root, notebooks, check=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 listing disagreements")
    args = parser.parse_args(argv)
    changes = sync(check=args.check)
    url = repository_url()
    unfixable = [c for c in changes if "(fix by hand" in c]
    for change in changes:
        print(change)
    if args.check:
        print(f"{len(changes)} disagreement(s) with {url}" if changes else f"every link agrees with {url}")
        return 1 if changes else 0
    print(f"{len(changes) - len(unfixable)} change(s) made for {url}" if changes
          else f"every link already agrees with {url}")
    return 1 if unfixable else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
