"""Notebook hygiene as rules: ``python -m tools.nblint [--fix] [NOTEBOOK ...]``.

Each rule checks one thing of one notebook and names what is wrong; the fixable ones repair it with
``--fix`` (the others say what to do by hand). Without NOTEBOOKs: every lesson, solution and exercise,
and the template new notebooks start from (``tools/notebook_template.ipynb``). ``python3 tasks.py lint``
runs this after ruff. The rules:

- ``valid``      -- nbformat 4.5 or later (cell ids), valid against its schema.
- ``metadata``   -- only the allowlisted metadata (:mod:`tools.notebook_metadata`; as tensorflow/docs'
                    ``nbfmt`` keeps): no run timestamps, ``language_info``, empty ``tags`` (fixable).
- ``cell-ids``   -- one id style, 8 lower-case hex digits, unique (fixable: new ids for the others).
- ``colab``      -- the Colab badge links this notebook, the install cell is the canonical one for
                    pyproject's repository URL (:mod:`tools.links`; fixable where it exists).
- ``skeleton``   -- a ``# `` title first, ``## Setup`` before the code; the first code cells are the
                    ``parameters`` cell, the install cell, the ``check-parameters`` cell (it imports
                    ``course_utils``: on Colab only the install cell provides it) and the device
                    configuration, in that order, before anything uses TensorFlow; ``## Summary``, and
                    ``## Exercises`` in the last cell.
- ``syntax``     -- every code cell parses as Python once IPython has turned its ``%magics`` and ``!shell``
                    lines into calls: a cell that cannot parse fails only when a run reaches it, minutes in.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
import uuid
from pathlib import Path

import nbformat

from tools import links
from tools.notebook_metadata import keep_allowed_metadata, write_notebook
from tools.notebook_params import ROOT

TEMPLATE = ROOT / "tools" / "notebook_template.ipynb"
FOLDERS = ("notebooks", "solutions", "exercises")
_ID = re.compile(r"[0-9a-f]{8}")
_TF = re.compile(r"\btf\.|import tensorflow|import keras|from tensorflow|from keras")


def notebooks() -> list[Path]:
    """Every notebook the lint covers by default, in course order, then the template."""
    return [p for folder in FOLDERS for p in sorted((ROOT / folder).glob("[0-9]*.ipynb"))] + [TEMPLATE]


def _rel(path: Path) -> str:
    path = Path(path).resolve()
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name


def check_valid(path: Path, nb) -> list[str]:
    problems = [] if (nb.nbformat, nb.nbformat_minor) >= (4, 5) else \
        [f"nbformat {nb.nbformat}.{nb.nbformat_minor}: save it as 4.5 or later (cell ids)"]
    try:
        nbformat.validate(nb)
    except nbformat.ValidationError as error:
        problems.append(f"not a valid notebook: {error.message}")
    return problems


def fix_metadata(path: Path, nb) -> list[str]:
    return [f"{what}: not kept in committed notebooks" for what in keep_allowed_metadata(nb)]


def fix_cell_ids(path: Path, nb) -> list[str]:
    """Read from the file itself: nbformat, when it reads a notebook, quietly renames repeated ids and adds
    missing ones, so the notebook object alone would hide them."""
    raw = [cell.get("id") for cell in json.loads(Path(path).read_text(encoding="utf-8"))["cells"]]
    seen, changed = set(), []
    for i, (cell, old) in enumerate(zip(nb.cells, raw)):
        why = ("missing" if old is None else "not 8 lower-case hex digits" if not _ID.fullmatch(old)
               else "repeated" if old in seen else None)
        seen.add(old)
        if why:
            cell.id = uuid.uuid4().hex[:8]
            while cell.id in raw:
                cell.id = uuid.uuid4().hex[:8]
            changed.append(f"cell {i} id {old!r}: {why} (-> {cell.id!r})")
    return changed


def fix_colab(path: Path, nb) -> list[str]:
    rel = _rel(path)
    return [p.removeprefix(f"{rel}: ") for p in links.fix_colab(nb, rel, links.repository_url())]


def check_skeleton(path: Path, nb) -> list[str]:
    problems, cells = [], nb.cells
    if not cells or cells[0].cell_type != "markdown" or not cells[0].source.startswith("# "):
        problems.append("the first cell must be markdown starting with the title ('# ...')")
    code = [c for c in cells if c.cell_type == "code"]
    roles = [("parameters", lambda c: "parameters" in c.metadata.get("tags", [])),
             ("install", lambda c: links.INSTALL_MARKER in c.source),
             ("check-parameters", lambda c: "check-parameters" in c.metadata.get("tags", [])),
             ("devices", lambda c: "simulate_devices(" in c.source)]
    for k, (role, is_it) in enumerate(roles):
        where = [i for i, c in enumerate(code) if is_it(c)]
        if where != [k]:
            problems.append(f"the {role} cell must be code cell {k + 1} (and only there); found at "
                            f"{[i + 1 for i in where] or 'none'}")
    params = next((c for c in code if "parameters" in c.metadata.get("tags", [])), None)
    if params is not None and not re.search(r"^[A-Z_][A-Z0-9_]* *=", params.source, re.M):
        problems.append("the parameters cell assigns no parameter (NAME = value, one per line)")
    no_comments = ["\n".join(line.split("#")[0] for line in c.source.splitlines()) for c in code]
    first_tf = next((i for i, text in enumerate(no_comments) if _TF.search(text)), None)
    if first_tf is not None and first_tf < 3:
        problems.append(f"code cell {first_tf + 1} uses TensorFlow before the devices are configured (cell 4)")
    headings = [c.source.splitlines()[0] for c in cells if c.cell_type == "markdown" and c.source]
    first_code = next((i for i, c in enumerate(cells) if c.cell_type == "code"), len(cells))
    if not any(c.cell_type == "markdown" and c.source.startswith("## Setup") for c in cells[:first_code]):
        problems.append("a '## Setup' heading must come before the first code cell")
    if "## Summary" not in headings:
        problems.append("no '## Summary' heading")
    if not cells or "## Exercises" not in cells[-1].source.splitlines():
        problems.append("the last cell must hold the '## Exercises'")
    return problems


def check_syntax(path: Path, nb) -> list[str]:
    from IPython.core.inputtransformer2 import TransformerManager  # noqa: PLC0415 (Jupyter's own)

    problems, transform = [], TransformerManager().transform_cell
    for k, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        try:
            compile(transform(cell.source), f"code cell {k + 1}", "exec")
        except SyntaxError as error:
            problems.append(f"code cell {k + 1} does not parse, line {error.lineno}: {error.msg}")
    return problems


# name -> (function, fixable): a fixable function repairs the notebook in memory and returns what it changed
RULES = {"valid": (check_valid, False), "metadata": (fix_metadata, True), "cell-ids": (fix_cell_ids, True),
         "colab": (fix_colab, True), "skeleton": (check_skeleton, False), "syntax": (check_syntax, False)}


def check(path: Path, rule: str) -> list[str]:
    """What ``rule`` finds wrong with the notebook at ``path`` (nothing is changed)."""
    nb = nbformat.read(path, as_version=4)
    function, _ = RULES[rule]
    return function(path, copy.deepcopy(nb))


def lint(paths, fix: bool = False) -> list[str]:
    """Every problem, as ``path: rule: what``; with ``fix``, repair the fixable ones and list only the rest."""
    problems = []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        before = Path(path).read_text(encoding="utf-8").rstrip("\n")  # the file, not what nbformat made of it
        for rule, (function, fixable) in RULES.items():
            found = function(path, nb if fix and fixable else copy.deepcopy(nb))
            if fix and fixable:
                found = [p for p in found if "(fix by hand" in p]
            problems += [f"{_rel(path)}: {rule}: {p}" for p in found]
        if fix and nbformat.writes(nb) != before:
            write_notebook(nb, path)
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.nblint", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fix", action="store_true", help="repair what the fixable rules find")
    parser.add_argument("paths", nargs="*", type=Path, help="notebooks (default: the course's and the template)")
    args = parser.parse_args(argv)
    problems = lint(args.paths or notebooks(), fix=args.fix)
    for problem in problems:
        print(problem)
    print(f"nblint: {len(problems)} problem(s)" + (" left (fix them by hand)" if args.fix and problems else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
