"""Notebook hygiene as rules: ``python -m tools.nblint [--fix] [NOTEBOOK ...]``.

Each rule checks one thing of one notebook and names what is wrong; the fixable ones repair it with
``--fix`` (the others say what to do by hand). Without NOTEBOOKs: every lesson, deeper notebook, solution
and exercise, and the template new notebooks start from (``tools/notebook_template.ipynb``);
``python3 tasks.py lint`` runs this after ruff. Kinds: a *lesson* is ``notebooks/[0-9]*.ipynb``,
``solutions/[0-9]*.ipynb`` or the template (any other notebook is checked as one); a *deeper notebook* is
``notebooks/deeper/[0-9]*.ipynb``, the evidence beside a lesson; an *exercise* (``exercises/``, generated from
its solution) keeps the legacy skeleton and has no budgets. The rules:

- ``valid``      -- nbformat 4.5 or later (cell ids), valid against its schema.
- ``metadata``   -- only the allowlisted metadata (:mod:`tools.notebook_metadata`; as tensorflow/docs'
                    ``nbfmt`` keeps): no run timestamps, ``language_info``, empty ``tags`` (fixable).
- ``cell-ids``   -- one id style, 8 lower-case hex digits, unique (fixable: new ids for the others).
- ``colab``      -- the Colab badge links this notebook, the install cell is the canonical one for
                    pyproject's repository URL (:mod:`tools.links`; fixable where it exists).
- ``skeleton``   -- common to every notebook: a ``# `` title first, ``## Setup`` before the code; the first
                    code cells are the ``parameters`` cell, the install cell, the ``check-parameters`` cell
                    (it imports ``course_utils``: on Colab only the install cell provides it) and the device
                    configuration, in that order, before anything uses TensorFlow. For a legacy notebook
                    (its budget row says ``shape = "legacy"``; every exercise) also ``## Summary``, and
                    ``## Exercises`` in the last cell.
- ``shape``      -- the course standard's skeleton, by kind. A lesson: the first cell
                    holds the title, the Colab badge and a ``**You will**`` line with 1-6 ``- `` bullets;
                    the next cell starts ``## In brief`` (at most 150 words up to ``## Setup``, which comes
                    next); after Setup the ``## `` headings are the numbered sections ``## 1. ...``,
                    ``## 2. ...``, each asking its question (a ``?`` in its heading or first paragraph) and
                    holding one ``**Takeaway:**`` paragraph of at most 30 words, then ``## What this run
                    showed`` with exactly one code cell (printing at most 12 lines), ``## Summary``,
                    ``## Exercises`` and ``## Going deeper`` (in the last cell, with a link). A deeper
                    notebook (``notebooks/deeper/``): the badge and a relative link ``../NN_*.ipynb`` to its
                    lesson in the first cell. A legacy notebook: nothing more than ``skeleton``.
- ``budget``     -- the limits of ``tools/budgets.toml`` (words, cells, mean sentence, sentences over 40
                    words, output lines, run time; measured as :mod:`tools.prose` defines), by kind, with the
                    notebook's row overriding them; an override without its ``why`` fails, as does a row
                    for a notebook that does not exist. Once per run over the course's notebooks (reported
                    as ``course``): the sum of their run times against the course's one-run budget.
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

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from tools import links, prose
from tools.notebook_metadata import keep_allowed_metadata, wall_time, write_notebook
from tools.notebook_params import NOTEBOOK_DIRS, ROOT

TEMPLATE = ROOT / "tools" / "notebook_template.ipynb"
BUDGETS = ROOT / "tools" / "budgets.toml"
FOLDERS = ("notebooks", "notebooks/deeper", "solutions", "exercises")
COURSE_FOLDERS = NOTEBOOK_DIRS  # what the course command runs: the course total sums their run times
COURSE = "course"  # the pseudo path of the course-wide checks (and the budget table's row for them)
_ID = re.compile(r"[0-9a-f]{8}")
_TF = re.compile(r"\btf\.|import tensorflow|import keras|from tensorflow|from keras")


def notebooks() -> list[Path]:
    """Every notebook the lint covers by default, in course order, then the template."""
    return [p for folder in FOLDERS for p in sorted((ROOT / folder).glob("[0-9]*.ipynb"))] + [TEMPLATE]


def course_notebooks() -> list[Path]:
    """The notebooks the course command runs, whose run times the course budget sums."""
    return [p for folder in COURSE_FOLDERS for p in sorted((ROOT / folder).glob("[0-9]*.ipynb"))]


def _rel(path: Path) -> str:
    path = Path(path).resolve()
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name


def kind(path: Path) -> str:
    """``lesson``, ``deeper`` or ``exercise``, by folder (the template and any other notebook: a lesson)."""
    folder = Path(path).parent.name
    return {"deeper": "deeper", "exercises": "exercise"}.get(folder, "lesson")


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


# --- the budget table -------------------------------------------------------------------------------------

# name -> (what it measures, its measure, the unit after the number, what to do when over)
_CUT = "cut, move to the deeper notebook, or split sentences"
LIMITS = {
    "words": ("words", lambda s: s.words, "", _CUT),
    "cells": ("cells", lambda s: s.cells, "", "merge or cut cells, or move them to the deeper notebook"),
    "mean_sentence_words": ("mean sentence", lambda s: round(s.mean_sentence_words, 1), " words", _CUT),
    "long_sentence_percent": (f"sentences over {prose.LONG_SENTENCE} words",
                              lambda s: round(s.long_sentence_percent, 1), " %", _CUT),
    "output_lines": ("printed output", lambda s: s.output_lines, " lines",
                     "print less (the verdict, not the table behind it), or move it to the deeper notebook"),
    "wall_time_s": ("run time", lambda s: s.wall_time_s, " s",
                    "make it faster (fewer or smaller runs), or move the measurement to the deeper notebook "
                    "or benchmarks/"),
}
SHAPES = {"lesson": ("lesson", "legacy"), "deeper": ("deeper",), "exercise": ("legacy",)}  # kind -> allowed


def budget_table() -> dict:
    """``tools/budgets.toml`` as read (``defaults`` by kind and ``course``, ``override`` rows by path)."""
    with open(BUDGETS, "rb") as f:
        return tomllib.load(f)


def _row_problems(name: str, row, allowed: tuple[str, ...]) -> list[str]:
    """What is wrong with one override row: an override without its why, an unknown key or shape."""
    if not isinstance(row, dict):
        return [f"{_rel(BUDGETS)} row {name!r} is not a table"]
    problems = []
    for key, value in row.items():
        if key == "why":
            continue
        if key == "shape":
            if value not in allowed:
                problems.append(f"{_rel(BUDGETS)} row {name!r}: shape {value!r} is not one of {list(allowed)}")
            elif value != allowed[0] and not str(row.get("why", "")).strip():
                problems.append(f"{_rel(BUDGETS)} row {name!r}: shape {value!r} needs a why (why = \"...\")")
        elif key not in LIMITS:
            problems.append(f"{_rel(BUDGETS)} row {name!r}: unknown key {key!r} (limits: {', '.join(LIMITS)})")
        elif not isinstance(value, dict) or not isinstance(value.get("max"), int | float):
            problems.append(f"{_rel(BUDGETS)} row {name!r}: {key} = {value!r} is an override without a why: "
                            f"write {key} = {{ max = {value!r}, why = \"...\" }}")
        elif not str(value.get("why", "")).strip():
            problems.append(f"{_rel(BUDGETS)} row {name!r}: {key} = {value['max']} is an override without a why")
    return problems


def _limits(table: dict, what: str, row: dict) -> dict[str, tuple[float, str | None]]:
    """Limit name -> (limit, the override's why or None), the defaults of ``what`` overridden by ``row``."""
    limits = {name: (value, None) for name, value in table.get("defaults", {}).get(what, {}).items()}
    for name, value in row.items():
        if name in LIMITS and isinstance(value, dict) and isinstance(value.get("max"), int | float):
            limits[name] = (value["max"], value.get("why") or None)
    return limits


def _row(table: dict, path: Path) -> dict:
    row = table.get("override", {}).get(_rel(path), {})
    return row if isinstance(row, dict) else {}


def shape(path: Path) -> str:
    """``lesson``, ``legacy`` or ``deeper``: what the notebook's kind and its budget row make it."""
    allowed = SHAPES[kind(path)]
    try:
        wanted = _row(budget_table(), path).get("shape", allowed[0])
    except (OSError, tomllib.TOMLDecodeError):  # the budget rule reports the table
        wanted = allowed[0]
    return wanted if wanted in allowed else allowed[0]


def _over(label: str, measured, limit, unit: str, why: str | None, advice: str) -> str:
    because = f" (an override: {why!r})" if why else ""
    return f"{label}: {measured:g}{unit}, over the limit of {limit:g}{unit}{because}: {advice}"


def check_budget(path: Path, nb) -> list[str]:
    if kind(path) == "exercise":
        return []
    try:
        table = budget_table()
    except (OSError, tomllib.TOMLDecodeError) as error:
        return [f"cannot read the budget table {_rel(BUDGETS)}: {error}"]
    row = _row(table, path)
    problems = _row_problems(_rel(path), row, SHAPES[kind(path)])
    stats = prose.stats(nb)
    for name, (limit, why) in _limits(table, kind(path), row).items():
        if name not in LIMITS:
            problems.append(f"{_rel(BUDGETS)}: unknown limit {name!r} in defaults.{kind(path)}")
            continue
        label, measure, unit, advice = LIMITS[name]
        measured = measure(stats)
        if measured is not None and measured > limit:  # None: not run (no outputs, no recorded run time)
            problems.append(_over(label, measured, limit, unit, why, advice))
    return problems


def check_course() -> list[str]:
    """The course-wide part of ``budget``: stale rows, the course row, the sum of the run times."""
    try:
        table = budget_table()
    except (OSError, tomllib.TOMLDecodeError) as error:
        return [f"cannot read the budget table {_rel(BUDGETS)}: {error}"]
    problems, covered = [], {_rel(p) for p in course_notebooks()} | {_rel(TEMPLATE)}
    for name, row in table.get("override", {}).items():
        if name == COURSE:
            problems += _row_problems(name, {k: v for k, v in row.items() if k != "shape"}, ())
        elif not (ROOT / name).is_file():
            problems.append(f"{_rel(BUDGETS)} row {name!r} names no notebook (a stale row: remove or rename it)")
        elif name not in covered:
            problems.append(f"{_rel(BUDGETS)} row {name!r}: not a notebook the budgets cover")
    limits = _limits(table, COURSE, table.get("override", {}).get(COURSE, {}))
    if "wall_time_s" in limits:
        limit, why = limits["wall_time_s"]
        times = {_rel(p): wall_time(p) for p in course_notebooks()}
        total = sum(t or 0 for t in times.values())
        if total > limit:
            untimed = [name for name, t in times.items() if t is None]
            problems.append(_over("the course's run time (its notebooks' wall_time_s summed)", total, limit, " s", why,
                                  "make lessons faster, or move measurements to benchmarks/")
                            + (f"; not timed (counted 0): {', '.join(untimed)}" if untimed else ""))
    return problems


# --- the skeleton and the shape ---------------------------------------------------------------------------


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
    first_code = next((i for i, c in enumerate(cells) if c.cell_type == "code"), len(cells))
    if not any(c.cell_type == "markdown" and c.source.startswith("## Setup") for c in cells[:first_code]):
        problems.append("a '## Setup' heading must come before the first code cell")
    if shape(path) == "legacy":
        headings = [c.source.splitlines()[0] for c in cells if c.cell_type == "markdown" and c.source]
        if "## Summary" not in headings:
            problems.append("no '## Summary' heading")
        if not cells or "## Exercises" not in cells[-1].source.splitlines():
            problems.append("the last cell must hold the '## Exercises'")
    return problems


class Section:
    """A ``# `` or ``## `` heading, the markdown after it up to the next such heading, its code cells."""

    def __init__(self, level: int, title: str, cell: int):
        self.level, self.title, self.cell = level, title, cell
        self.lines: list[str] = []
        self.code: list[int] = []  # indices of its code cells

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


_SECTION_HEADING = re.compile(r"^(#{1,2})\s+(.*?)\s*$")


def sections(nb) -> list[Section]:
    """The notebook's ``# `` and ``## `` sections in order (headings inside fenced code are text)."""
    found: list[Section] = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            if found:
                found[-1].code.append(i)
            continue
        if cell.cell_type != "markdown":
            continue
        fence = None
        if found:
            found[-1].lines.append("")  # a cell ends its paragraph
        for line in cell.source.splitlines():
            opened = re.match(r"^\s*(`{3,}|~{3,})", line)
            if opened:
                fence = None if fence and opened[1][0] == fence[0] else fence or opened[1]
            heading = None if fence else _SECTION_HEADING.match(line)
            if heading:
                found.append(Section(len(heading[1]), heading[2], i))
            elif found:
                found[-1].lines.append(line)
    return found


IN_BRIEF_WORDS = 150
YOU_WILL_BULLETS = 6
TAKEAWAY_WORDS = 30
SHOWED_LINES = 12
ENDING = ["What this run showed", "Summary", "Exercises", "Going deeper"]  # the headings after the sections
_NUMBERED = re.compile(r"(\d+)\.\s+\S")
_MD_LINK = re.compile(r"\[[^\]]+\]\([^)\s]+\)")
_LESSON_LINK = re.compile(r"\]\((\.\./\d+[a-z]?_[^)\s#]*\.ipynb)[^)]*\)")


def _you_will(first: str) -> list[str]:
    lines = first.splitlines()
    at = next((i for i, line in enumerate(lines) if line.startswith("**You will")), None)
    if at is None:
        return ["the first cell must hold a '**You will**' line followed by its '- ' bullets"]
    bullets, rest = 0, lines[at + 1:]
    while rest and not rest[0].strip():
        rest.pop(0)
    for line in rest:
        if line.startswith("- "):
            bullets += 1
        elif not line.strip() or not line.startswith((" ", "\t")):  # a bullet's continuation is indented
            break
    if not 1 <= bullets <= YOU_WILL_BULLETS:
        return [f"'**You will**' must be followed by 1 to {YOU_WILL_BULLETS} '- ' bullets; found {bullets}"]
    return []


def _numbered_section(section: Section) -> list[str]:
    problems, name = [], f"section '## {section.title}'"
    blocks = prose.blocks(section.text)
    if "?" not in section.title and not (blocks and "?" in blocks[0]):
        problems.append(f"{name} must ask its question: a '?' in its heading or its first paragraph")
    takeaways = [b for b in blocks if b.startswith("**Takeaway:**")]
    if len(takeaways) != 1:
        problems.append(f"{name} must hold one '**Takeaway:**' paragraph (its one-line takeaway); "
                        f"found {len(takeaways)}")
    for text in takeaways:
        n = prose.words(text) - 1  # "Takeaway:" is the label
        if n > TAKEAWAY_WORDS:
            problems.append(f"{name}: its takeaway has {n} words, over {TAKEAWAY_WORDS}: say it shorter")
    return problems


def _lesson_opening(nb, level2: list[Section]) -> list[str]:
    """The first cell (badge, You will) and In brief."""
    problems, cells = [], nb.cells
    first = cells[0].source if cells and cells[0].cell_type == "markdown" else ""
    if "colab-badge.svg" not in first:
        problems.append("the first cell must hold the Colab badge")
    problems += _you_will(first)
    brief = level2[0] if level2 and level2[0].title == "In brief" else None
    if brief is None or brief.cell != 1 or not cells[1].source.startswith("## In brief"):
        problems.append("the second cell must be markdown starting '## In brief' (the lesson in a few sentences)")
    if brief is not None and prose.words(brief.text) > IN_BRIEF_WORDS:
        problems.append(f"'## In brief' has {prose.words(brief.text)} words before '## Setup', over "
                        f"{IN_BRIEF_WORDS}: cut it, or move detail to the sections or the deeper notebook")
    return problems


def _lesson_ending(nb, level2: list[Section]) -> list[str]:
    """What this run showed (one code cell, few lines) and Going deeper (last, with a link)."""
    problems, by_name = [], {s.title: s for s in level2}
    showed = by_name.get("What this run showed")
    if showed is not None and len(showed.code) != 1:
        problems.append(f"'## What this run showed' must hold exactly one code cell; found {len(showed.code)}")
    elif showed is not None and prose.output_lines(nb.cells[showed.code[0]]) > SHOWED_LINES:
        problems.append(f"'## What this run showed' prints {prose.output_lines(nb.cells[showed.code[0]])} lines, "
                        f"over {SHOWED_LINES}: print the verdicts, short form")
    deeper = by_name.get("Going deeper")
    if deeper is not None and deeper.cell != len(nb.cells) - 1:
        problems.append("'## Going deeper' must be in the last cell")
    if deeper is not None and not _MD_LINK.search(deeper.text):
        problems.append("'## Going deeper' must link onward (at least one [text](link))")
    return problems


def _lesson_shape(nb) -> list[str]:
    found = sections(nb)
    level2 = [s for s in found if s.level == 2]
    problems = _lesson_opening(nb, level2)
    titles = [s.title for s in found if s.level == 1]
    if len(titles) > 1:
        problems.append(f"only the title is a '# ' heading; found also {titles[1:]}")
    names = [s.title for s in level2]
    if "Setup" not in names:
        return problems + ["no '## Setup' heading"]
    after = names.index("Setup") + 1
    if names[:after] != ["In brief", "Setup"]:
        problems.append(f"the '## ' headings before the code must be '## In brief', then '## Setup'; "
                        f"found {names[:after]}")
    numbered = [section for section in level2[after:] if _NUMBERED.match(section.title)]
    if not numbered:
        problems.append("no numbered section ('## 1. ...') after '## Setup'")
    if names[after:] != [s.title for s in numbered] + ENDING:
        problems.append("after '## Setup' the '## ' headings must be the numbered sections ('## 1. ...', "
                        f"'## 2. ...'), then {', '.join(repr('## ' + e) for e in ENDING)}, in this order; "
                        f"found {names[after:]}")
    for k, section in enumerate(numbered, 1):
        if _NUMBERED.match(section.title)[1] != str(k):
            problems.append(f"section '## {section.title}' must be numbered {k}.")
        problems += _numbered_section(section)
    return problems + _lesson_ending(nb, level2)


def _deeper_shape(path: Path, nb) -> list[str]:
    problems = []
    first = nb.cells[0].source if nb.cells and nb.cells[0].cell_type == "markdown" else ""
    if "colab-badge.svg" not in first:
        problems.append("the first cell must hold the Colab badge")
    link = _LESSON_LINK.search(first)
    if link is None:
        problems.append("the first cell must link the lesson this notebook belongs to ('[...](../NN_name.ipynb)')")
    elif not (Path(path).parent / link[1]).is_file():
        problems.append(f"the first cell links the lesson {link[1]!r}, which does not exist")
    return problems


def check_shape(path: Path, nb) -> list[str]:
    which = shape(path)
    if which == "lesson":
        return _lesson_shape(nb)
    if which == "deeper":
        return _deeper_shape(path, nb)
    return []  # legacy: the skeleton rule only


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
         "colab": (fix_colab, True), "skeleton": (check_skeleton, False), "shape": (check_shape, False),
         "budget": (check_budget, False), "syntax": (check_syntax, False)}


def check(path: Path, rule: str) -> list[str]:
    """What ``rule`` finds wrong with the notebook at ``path`` (nothing is changed)."""
    nb = nbformat.read(path, as_version=4)
    function, _ = RULES[rule]
    return function(path, copy.deepcopy(nb))


def lint(paths, fix: bool = False) -> list[str]:
    """Every problem, as ``path: rule: what``; with ``fix``, repair the fixable ones and list only the rest.

    When ``paths`` include a notebook of the course, the course-wide budget checks run once, as ``course``."""
    problems = []
    course = {p.resolve() for p in course_notebooks()}
    if any(Path(path).resolve() in course for path in paths):
        problems += [f"{COURSE}: budget: {p}" for p in check_course()]
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
