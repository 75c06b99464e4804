"""tools/nblint.py: every rule on every notebook (one test each, so every failure shows), and each rule
shown to catch what it is for, to pass a notebook that follows it, and to repair it where it is fixable;
tools/prose.py's counting, which the budgets rest on."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys

import nbformat
import pytest

from tools import nblint, prose
from tools.notebook_params import ROOT

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

pytestmark = pytest.mark.versionless  # the oldest-versions check skips it: see pyproject's markers

NOTEBOOKS = nblint.notebooks()
CASES = [(rule, path) for path in NOTEBOOKS for rule in nblint.RULES]


@pytest.mark.parametrize("rule,path", CASES, ids=[f"{r}-{p.relative_to(ROOT)}" for r, p in CASES])
def test_notebook_follows_the_rule(rule, path):
    problems = nblint.check(path, rule)
    assert not problems, "\n".join(problems) + "\n(`python3 tasks.py lint --fix` repairs the fixable rules)"


def test_the_course_follows_the_budget_table():
    """The course-wide part of ``budget``: no stale row, the course's run times within its one-run budget."""
    problems = nblint.check_course()
    assert not problems, "\n".join(problems)


def test_the_lint_covers_lessons_deeper_notebooks_solutions_exercises_and_the_template():
    folders = {p.parent.name for p in NOTEBOOKS}
    assert folders == {"notebooks", "deeper", "solutions", "exercises", "tools"}
    assert nblint.TEMPLATE in NOTEBOOKS and "notebooks/deeper" in nblint.FOLDERS


def broken(tmp_path, change, where="tools/notebook_template.ipynb"):
    """A copy of the template at ``tmp_path / where``, changed by ``change(nb)``."""
    nb = nbformat.read(nblint.TEMPLATE, as_version=4)
    change(nb)
    path = tmp_path / where
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def _at(nb, start):
    """The index of the cell whose source starts with ``start``."""
    return next(i for i, c in enumerate(nb.cells) if c.source.startswith(start))


def _copy(cell):
    """A copy of a cell with an id of its own."""
    twin = copy.deepcopy(cell)
    twin.id = f"{int(cell.id, 16) ^ 1:08x}"
    return twin


def _code(nb, k):
    """The template's code cell ``k`` (1: parameters, 2: install, 3: check-parameters, 4: devices)."""
    return [c for c in nb.cells if c.cell_type == "code"][k - 1]


def _papermill_run(nb):
    nb.metadata["papermill"] = {"duration": 1.0}
    nb.metadata["language_info"] = {"name": "python", "version": "3.11.7"}
    _code(nb, 1).metadata["execution"] = {"iopub.status.busy": "2026-11-24T10:00:00Z"}
    _code(nb, 2).metadata["tags"] = []


def _ids(nb):
    nb.cells[0].id = "cell-00"


def test_repeated_and_missing_ids_are_found_in_the_file_itself(tmp_path, monkeypatch):
    """nbformat renames a repeated id and adds a missing one as it reads: the rule reads the JSON."""
    monkeypatch.setattr(nblint, "ROOT", tmp_path)
    path = broken(tmp_path, lambda nb: None)
    data = json.loads(path.read_text())
    data["cells"][2]["id"] = data["cells"][1]["id"]
    del data["cells"][3]["id"]
    path.write_text(json.dumps(data, indent=1))
    problems = nblint.check(path, "cell-ids")
    assert any("cell 2" in p and "repeated" in p for p in problems), problems
    assert any("cell 3 id None: missing" in p for p in problems), problems
    nblint.lint([path], fix=True)
    ids = [c.get("id") for c in json.loads(path.read_text())["cells"]]
    assert None not in ids and len(set(ids)) == len(ids) and nblint.check(path, "cell-ids") == []


def _badge(nb):
    nb.cells[0].source = nb.cells[0].source.replace("tools/notebook_template.ipynb", "notebooks/other.ipynb")
    install = next(c for c in nb.cells if "# Colab: install" in c.source)
    install.source = install.source.replace("git+", "git+https://example.org/old.git#")


FIXABLE = [("metadata", _papermill_run, ["'papermill'", "'language_info'", "'execution'", "'tags' (empty)"]),
           ("cell-ids", _ids, ["'cell-00': not 8 lower-case hex digits"]),
           ("colab", _badge, ["badge", "install cell"])]


@pytest.mark.parametrize("rule,change,said", FIXABLE, ids=[f[0] for f in FIXABLE])
def test_a_fixable_rule_finds_the_fault_and_fix_repairs_it(tmp_path, monkeypatch, rule, change, said):
    monkeypatch.setattr(nblint, "ROOT", tmp_path)
    path = broken(tmp_path, change)
    problems = nblint.check(path, rule)
    for words in said:
        assert any(words in p for p in problems), (words, problems)
    nblint.lint([path], fix=True)
    assert nblint.check(path, rule) == [] and nblint.lint([path]) == []


def _without(text):
    return lambda nb: nb.cells.remove(next(c for c in nb.cells if text in c.source))


def _move_install_after_the_check(nb):
    install = nb.cells.pop(nb.cells.index(_code(nb, 2)))
    nb.cells.insert(nb.cells.index(_code(nb, 2)) + 1, install)


def _legacy(change):
    """The template as a legacy notebook (Exercises last, no Going deeper), then ``change``."""
    def both(nb):
        _without("## Going deeper")(nb)
        change(nb)
    return both


SKELETON = [
    (lambda nb: setattr(nb.cells[0], "source", "Title without a heading"), "the first cell must be markdown"),
    (lambda nb: _code(nb, 3).metadata.pop("tags"), "the check-parameters cell must be code cell 3"),
    (_move_install_after_the_check, "the install cell must be code cell 2"),
    (lambda nb: nb.cells.insert(_at(nb, "## Setup") + 1, _copy(_code(nb, 4))),
     "the devices cell must be code cell 4"),
    (lambda nb: setattr(_code(nb, 1), "source", "import tensorflow as tf\nX = 1"), "uses TensorFlow before"),
    (lambda nb: setattr(_code(nb, 1), "source", "# nothing here"), "assigns no parameter"),
    (_without("## Setup"), "'## Setup' heading"),
]
LEGACY = "exercises/07_copy.ipynb"  # an exercise is legacy (as is a lesson whose budget row says so)
SKELETON_LEGACY = [
    (_legacy(_without("## Summary")), "no '## Summary'"),
    (_legacy(lambda nb: nb.cells.append(nbformat.v4.new_markdown_cell("## After"))), "'## Exercises'"),
]


@pytest.mark.parametrize("change,said", SKELETON, ids=[s[1] for s in SKELETON])
def test_the_skeleton_rule_names_what_is_missing(tmp_path, change, said):
    for where in ("tools/notebook_template.ipynb", LEGACY, "notebooks/deeper/04_copy.ipynb"):  # every kind
        problems = nblint.check(broken(tmp_path, change, where), "skeleton")
        assert any(said in p for p in problems), (where, problems)
        assert "(fix by hand" not in " ".join(problems)


@pytest.mark.parametrize("change,said", SKELETON_LEGACY, ids=[s[1] for s in SKELETON_LEGACY])
def test_a_legacy_notebook_keeps_summary_and_exercises_last(tmp_path, change, said):
    assert nblint.check(broken(tmp_path, _legacy(lambda nb: None), LEGACY), "skeleton") == []
    problems = nblint.check(broken(tmp_path, change, LEGACY), "skeleton")
    assert any(said in p for p in problems), problems


def test_a_lesson_ends_with_going_deeper_not_exercises(tmp_path):
    """The template is a lesson: its skeleton passes with Going deeper last; as a legacy notebook it would not."""
    assert nblint.check(broken(tmp_path, lambda nb: None), "skeleton") == []
    assert any("'## Exercises'" in p for p in nblint.check(broken(tmp_path, lambda nb: None, LEGACY), "skeleton"))
    assert nblint.check(broken(tmp_path, lambda nb: None, LEGACY), "shape") == []  # legacy: the skeleton only


def test_a_code_cell_that_does_not_parse_is_named_and_magics_are_not_faults(tmp_path):
    def nested_quote(nb):  # the f-string that reached a notebook run in the session that added this rule
        nb.cells.append(nbformat.v4.new_code_cell("best = 1\nprint(f\"{'its processes' own' if best else 'the'}\")"))
        nb.cells.append(nbformat.v4.new_code_cell("%matplotlib inline\n!echo shell lines are IPython's"))

    code_cells = sum(c.cell_type == "code" for c in nbformat.read(nblint.TEMPLATE, as_version=4).cells)
    problems = nblint.check(broken(tmp_path, nested_quote), "syntax")
    assert problems == [f"code cell {code_cells + 1} does not parse, line 2: f-string: unterminated string"], problems


def test_an_old_or_invalid_notebook_is_reported(tmp_path):
    path = broken(tmp_path, lambda nb: None)
    text = path.read_text().replace('"nbformat_minor": 5', '"nbformat_minor": 4')
    path.write_text(text)
    assert any("4.5 or later" in p for p in nblint.check(path, "valid"))


def test_command_line_exit_status_and_fix(tmp_path):
    path = broken(tmp_path, _papermill_run)
    run = [sys.executable, "-m", "tools.nblint"]
    found = subprocess.run([*run, str(path)], cwd=ROOT, capture_output=True, text=True)
    assert found.returncode == 1 and "metadata: notebook metadata 'papermill'" in found.stdout
    fixed = subprocess.run([*run, "--fix", str(path)], cwd=ROOT, capture_output=True, text=True)
    assert fixed.returncode == 0 and "nblint: 0 problem(s)" in fixed.stdout


# --- shape: the lesson standard ------------------------------------------------------------------------------


def _sentences(count, words):
    """``count`` sentences of ``words`` words each, as prose counts them."""
    return " ".join("Word " + "x " * (words - 2) + "end." for _ in range(count))


def _insert_after(start, *cells):
    def change(nb):
        at = _at(nb, start) + 1
        nb.cells[at:at] = list(cells)
    return change


def _source(start, old, new):
    def change(nb):
        cell = nb.cells[_at(nb, start)]
        assert old in cell.source, (old, cell.source)
        cell.source = cell.source.replace(old, new)
    return change


def _swap(a, b):
    def change(nb):
        i, j = _at(nb, a), _at(nb, b)
        nb.cells[i], nb.cells[j] = nb.cells[j], nb.cells[i]
    return change


def _printing(start, lines):
    """The code cell after the markdown cell starting ``start`` prints ``lines`` lines."""
    def change(nb):
        cell = next(c for c in nb.cells[_at(nb, start):] if c.cell_type == "code")
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="line\n" * lines)]
    return change


def _takeaway(nb, words):
    nb.cells[_at(nb, "**Takeaway:**")].source = "**Takeaway:** " + " ".join(["word"] * words) + "."


def _md(text):
    return nbformat.v4.new_markdown_cell(text)


SHAPE = [
    (_source("# ", "colab-badge.svg", "badge.svg"), "the first cell must hold the Colab badge"),
    (_source("# ", "**You will**", "You will"), "'**You will**' line"),
    (_source("# ", "- one bullet", "- two\n- three\n- four\n- five\n- six\n- one bullet"),
     "1 to 6 '- ' bullets; found 7"),
    (_without("## In brief"), "the second cell must be markdown starting '## In brief'"),
    (_source("## In brief", "The lesson", _sentences(15, 10) + " The lesson"), "'## In brief' has 2"),
    (_swap("## In brief", "# "), "the first cell must hold"),
    (_source("## 1.", "answers?", "answers"), "must ask its question"),
    (_without("**Takeaway:**"), "must hold one '**Takeaway:**' paragraph (its one-line takeaway); found 0"),
    (_insert_after("**Takeaway:**", _md("**Takeaway:** a second one.")), "found 2"),
    (lambda nb: _takeaway(nb, 31), "its takeaway has 31 words, over 30"),
    (_source("## 1.", "## 1.", "## 2."), "must be numbered 1."),
    (_insert_after("**Takeaway:**", _md("## Unnumbered\n\nText.")), "after '## Setup' the '## ' headings"),
    (_without("## Summary"), "found ['1. A question this section answers?', 'What this run showed', 'Exercises'"),
    (_swap("## Summary", "## Exercises"), "in this order"),
    (_source("## Summary", "## Summary", "# Summary"), "only the title is a '# ' heading"),
    (lambda nb: nb.cells.insert(_at(nb, "## Summary"), _copy(nb.cells[_at(nb, "## Summary") - 1])),
     "'## What this run showed' must hold exactly one code cell; found 2"),
    (_printing("## What this run showed", 13), "'## What this run showed' prints 13 lines, over 12"),
    (lambda nb: nb.cells.append(_md("More text.")), "'## Going deeper' must be in the last cell"),
    (_swap("## Going deeper", "## Exercises"), "'## Going deeper' must be in the last cell"),
    (_source("## Going deeper", "[TensorFlow's distributed training guide]"
                                "(https://www.tensorflow.org/guide/distributed_training)", "The guide"),
     "'## Going deeper' must link onward"),
]


@pytest.mark.parametrize("change,said", SHAPE, ids=[s[1] for s in SHAPE])
def test_the_shape_rule_names_what_breaks_the_lesson_standard(tmp_path, change, said):
    problems = nblint.check(broken(tmp_path, change), "shape")
    assert any(said in p for p in problems), problems


PASSING_SHAPES = [
    (_source("## 1.", "answers?\n\nProse", "answers\n\nWhich question? Prose"), "question in the first paragraph"),
    (lambda nb: _takeaway(nb, 30), "30-word takeaway"),
    (_source("# ", "- one bullet", "- two\n- three\n- four\n- five\n- one bullet"), "6 bullets"),
    (_source("# ", "- one bullet", "- one bullet\n  continued on an indented line"), "a bullet's second line"),
    (_insert_after("**Takeaway:**", _md("```\n## Not a heading: in fenced code\n```")), "a heading in a fence"),
    (_insert_after("**Takeaway:**", _md("## 2. A second question?\n\n**Takeaway:** the second answer.")),
     "two numbered sections"),
    (_printing("## What this run showed", 12), "12 printed lines"),
]


@pytest.mark.parametrize("change,why", PASSING_SHAPES, ids=[s[1] for s in PASSING_SHAPES])
def test_the_shape_rule_passes_a_lesson_that_follows_it(tmp_path, change, why):
    assert nblint.check(broken(tmp_path, lambda nb: None), "shape") == []
    assert nblint.check(broken(tmp_path, change), "shape") == []


def _deeper(tmp_path, first=None, lesson=True):
    """A deeper notebook (the template's setup, no Summary or Exercises) beside its lesson."""
    if lesson:
        broken(tmp_path, lambda nb: None, "notebooks/04_lesson.ipynb")

    def change(nb):
        nb.cells[0].source = first if first is not None else (
            "# Where the time goes\n\n" + nb.cells[0].source.splitlines()[2] + "\n\n"
            "The evidence behind [lesson 04](../04_lesson.ipynb)'s claims.")
        del nb.cells[1]  # In brief
        del nb.cells[_at(nb, "## What this run showed"):]
    return broken(tmp_path, change, "notebooks/deeper/04_where.ipynb")


def test_a_deeper_notebook_links_its_lesson_and_needs_no_summary(tmp_path):
    path = _deeper(tmp_path)
    assert nblint.check(path, "shape") == [] and nblint.check(path, "skeleton") == []
    assert "lesson 04" in nbformat.read(path, as_version=4).cells[0].source
    no_link = _deeper(tmp_path, first="# Where the time goes\n\n[![Open In Colab](colab-badge.svg)](x)\n\nText.")
    assert any("must link the lesson" in p for p in nblint.check(no_link, "shape"))
    no_badge = _deeper(tmp_path, first="# Where the time goes\n\nFrom [lesson 04](../04_lesson.ipynb).")
    assert nblint.check(no_badge, "shape") == ["the first cell must hold the Colab badge"]
    (tmp_path / "notebooks" / "04_lesson.ipynb").unlink()
    assert any("'../04_lesson.ipynb', which does not exist" in p for p in nblint.check(path, "shape"))


# --- budget ---------------------------------------------------------------------------------------------------

STANDARD = """
[defaults.lesson]
words = 2500
cells = 50
mean_sentence_words = 22
long_sentence_percent = 10
output_lines = 120
wall_time_s = 420

[defaults.deeper]
mean_sentence_words = 22
long_sentence_percent = 10

[defaults.course]
wall_time_s = 2100
"""


def test_the_committed_table_holds_the_course_standard():
    with open(nblint.BUDGETS, "rb") as f:
        table = tomllib.load(f)
    assert table["defaults"] == tomllib.loads(STANDARD)["defaults"]
    for name, row in table["override"].items():  # every number with its why (the rule checks it too)
        assert all(isinstance(v, dict) and v["why"].strip() for k, v in row.items() if k in nblint.LIMITS), name


@pytest.fixture
def table(tmp_path, monkeypatch):
    """The standard as the budget table, with the rows given, and ``tmp_path`` as the repository."""
    def write(rows=""):
        path = tmp_path / "tools" / "budgets.toml"
        path.parent.mkdir(exist_ok=True)
        path.write_text(STANDARD + rows)
        return path
    monkeypatch.setattr(nblint, "BUDGETS", write())
    monkeypatch.setattr(nblint, "ROOT", tmp_path)
    return write


def _add(*cells):
    return lambda nb: nb.cells.extend(cells)


def _timed(seconds):
    return lambda nb: nb.metadata.update({"course": {"wall_time_s": seconds}})


OVER = [
    (_insert_after("## 1.", _md(_sentences(220, 10))), "words: 2528, over the limit of 2500: cut, move"),
    (_insert_after("## 1.", _md(_sentences(4, 41))), "sentences over 40 words: 12.1 %, over the limit of 10 %"),
    (_insert_after("## 1.", _md(_sentences(50, 30))), "mean sentence: 23.1 words, over the limit of 22 words"),
    (_insert_after("## 1.", *[nbformat.v4.new_code_cell(f"x = {i}") for i in range(34)]),
     "cells: 51, over the limit of 50"),
    (_printing("## 1.", 121), "printed output: 121 lines, over the limit of 120 lines"),
    (_timed(421), "run time: 421 s, over the limit of 420 s"),
]
WITHIN = [
    (_insert_after("## 1.", _md(_sentences(217, 10))), "2498 words"),
    (_insert_after("## 1.", _md(_sentences(4, 40))), "40-word sentences are not long"),
    (_insert_after("## 1.", *[nbformat.v4.new_code_cell(f"x = {i}") for i in range(33)]), "50 cells"),
    (_printing("## 1.", 120), "120 lines"),
    (_timed(420), "420 s"),
]


@pytest.mark.parametrize("change,said", OVER, ids=[s[1].split(",")[0] for s in OVER])
def test_the_budget_rule_names_the_measure_the_limit_and_what_to_do(table, tmp_path, change, said):
    table()
    assert nblint.check(broken(tmp_path, lambda nb: None, "notebooks/01_x.ipynb"), "budget") == []
    problems = nblint.check(broken(tmp_path, change, "notebooks/01_x.ipynb"), "budget")
    assert any(said in p for p in problems), problems


@pytest.mark.parametrize("change,why", WITHIN, ids=[s[1] for s in WITHIN])
def test_the_budget_rule_passes_a_lesson_at_its_limits(table, tmp_path, change, why):
    table()
    assert nblint.check(broken(tmp_path, change, "notebooks/01_x.ipynb"), "budget") == []


def test_a_deeper_notebook_has_only_the_sentence_limits(table, tmp_path):
    table()
    long_but_plain = _insert_after("## 1.", _md(_sentences(300, 10)), *[_md("More.") for _ in range(40)])
    path = broken(tmp_path, lambda nb: (long_but_plain(nb), _timed(900)(nb)), "notebooks/deeper/01_x.ipynb")
    assert nblint.check(path, "budget") == []
    path = broken(tmp_path, _insert_after("## 1.", _md(_sentences(10, 41))), "notebooks/deeper/01_x.ipynb")
    assert any("sentences over 40 words" in p for p in nblint.check(path, "budget"))
    path = broken(tmp_path, _insert_after("## 1.", _md(_sentences(300, 10))), "exercises/01_x.ipynb")
    assert nblint.check(path, "budget") == []  # exercises: today's checks only


def test_an_override_needs_its_why_and_is_quoted(table, tmp_path):
    over = _insert_after("## 1.", _md(_sentences(260, 10)))  # 2928 words
    path = broken(tmp_path, over, "notebooks/01_x.ipynb")
    table('[override."notebooks/01_x.ipynb"]\nwords = { max = 3000, why = "issue #1: seven questions" }\n')
    assert nblint.check(path, "budget") == []
    table('[override."notebooks/01_x.ipynb"]\nwords = { max = 2900, why = "issue #1: seven questions" }\n')
    assert nblint.check(path, "budget") == [
        "words: 2928, over the limit of 2900 (an override: 'issue #1: seven questions'): cut, move to the deeper "
        "notebook, or split sentences"]
    for bare in ("words = 3000", 'words = { max = 3000 }', 'words = { max = 3000, why = " " }'):
        table(f'[override."notebooks/01_x.ipynb"]\n{bare}\n')
        problems = nblint.check(path, "budget")
        assert any("override without a why" in p for p in problems), (bare, problems)
    table('[override."notebooks/01_x.ipynb"]\nwordz = { max = 3000, why = "typo" }\n')
    assert any("unknown key 'wordz'" in p for p in nblint.check(path, "budget"))


def test_a_legacy_row_needs_a_why_and_leaves_the_skeleton_rule_only(table, tmp_path):
    path = broken(tmp_path, _legacy(lambda nb: None), "notebooks/01_x.ipynb")  # no In brief is missed
    table('[override."notebooks/01_x.ipynb"]\nshape = "legacy"\nwhy = "not yet on the course standard: #50"\n')
    assert nblint.check(path, "shape") == [] and nblint.check(path, "budget") == []
    assert nblint.check(path, "skeleton") == []
    table('[override."notebooks/01_x.ipynb"]\nshape = "legacy"\n')
    assert any("shape 'legacy' needs a why" in p for p in nblint.check(path, "budget"))
    table('[override."notebooks/01_x.ipynb"]\nshape = "other"\n')
    assert any("shape 'other' is not one of" in p for p in nblint.check(path, "budget"))
    assert any("'## Going deeper'" in p for p in nblint.check(path, "shape"))  # an unknown shape: the kind's


def test_a_row_for_a_notebook_that_does_not_exist_is_stale(table, tmp_path):
    broken(tmp_path, lambda nb: None, "notebooks/01_x.ipynb")
    table('[override."notebooks/01_x.ipynb"]\ncells = { max = 60, why = "w" }\n')
    assert nblint.check_course() == []
    table('[override."notebooks/02_gone.ipynb"]\ncells = { max = 60, why = "w" }\n')
    assert nblint.check_course() == ["tools/budgets.toml row 'notebooks/02_gone.ipynb' names no notebook "
                                     "(a stale row: remove or rename it)"]


def test_the_course_total_sums_the_run_times_once_per_lint(table, tmp_path):
    table()
    first = broken(tmp_path, _timed(1500), "notebooks/01_x.ipynb")
    untimed = broken(tmp_path, lambda nb: None, "notebooks/02_x.ipynb")
    broken(tmp_path, _timed(500), "solutions/07_x.ipynb")
    assert nblint.check_course() == []  # 2000 s
    broken(tmp_path, _timed(700), "solutions/07_x.ipynb")
    problems = nblint.check_course()
    assert len(problems) == 1 and "the course's run time" in problems[0] and "2200 s, over the limit of 2100 s" \
        in problems[0] and "not timed (counted 0): notebooks/02_x.ipynb" in problems[0], problems
    course = [p for p in nblint.lint([first, untimed]) if p.startswith("course:")]
    assert course == [f"course: budget: {problems[0]}"]  # once, not per notebook
    assert not [p for p in nblint.lint([broken(tmp_path, lambda nb: None)]) if p.startswith("course:")]
    table('[override.course]\nwall_time_s = { max = 2300, why = "issue #49" }\n')
    assert nblint.check_course() == []
    table('[override.course]\nwall_time_s = 2300\n')
    assert any("override without a why" in p for p in nblint.check_course())


# --- prose: what the budgets count ----------------------------------------------------------------------------


def test_prose_counts_words_and_sentences_as_its_docstring_defines():
    text = """# A heading with `tf.distribute.MirroredStrategy(devices)` in it

[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://example.org/nb)

First sentence here. Second one, see [the guide](https://example.org/a.b) or https://example.org/x.
Still the second paragraph's third sentence, e.g. this is not a new one; `code spans` count once.
"Quoted" starts a fourth? 2026 starts a fifth! lower case does not start one.
<!-- a comment
over lines --> Sixth sentence.

- an item without a full stop
- **bold** item

| name | value |
|------|-------|
| a b  | `x y` |

```python
print("fenced code is no prose. Not counted")
```

---
"""
    # heading 6 (the code span is one word; the badge: 0 words, no sentence), paragraph 3, 6, 16 ("e.g." does
    # not end one), 4, 10 (no split before lower case), 2 (after the comment), items 6 and 2, table rows 2 and 3
    assert prose.sentence_lengths(text) == [6, 3, 6, 16, 4, 10, 2, 6, 2, 2, 3]
    assert prose.words(text) == 60


def test_prose_counts_output_lines_images_as_none():
    out = nbformat.v4.new_output
    cell = nbformat.v4.new_code_cell("x", outputs=[
        out("stream", name="stdout", text="a\nb"), out("stream", name="stdout", text="c\n"),  # one stream: 2 lines
        out("stream", name="stderr", text="1/3\r2/3\r3/3\n"),  # a progress bar: 1 line
        out("display_data", data={"image/png": "iVBO", "text/plain": "<Figure size 640x480>"}),  # 0
        out("execute_result", data={"text/plain": "(1,\n 2)"}, execution_count=1),  # 2
    ])
    assert prose.output_lines(cell) == 5
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(_sentences(9, 10) + " " + _sentences(1, 41)),
                                         cell, nbformat.v4.new_code_cell("y")],
                                  metadata={"course": {"wall_time_s": 12}})
    stats = prose.stats(nb)
    assert (stats.cells, stats.words, stats.sentences, stats.long_sentences, stats.output_lines, stats.wall_time_s) \
        == (3, 131, 10, 1, 5, 12)
    assert stats.mean_sentence_words == 13.1 and stats.long_sentence_percent == 10.0
    cell.outputs = []
    assert prose.stats(nb).output_lines is None  # not run: the output budget is skipped


def test_prose_command_line_prints_a_line_per_notebook():
    found = subprocess.run([sys.executable, "-m", "tools.prose", str(nblint.TEMPLATE)], cwd=ROOT,
                           capture_output=True, text=True, check=True)
    header, line = found.stdout.splitlines()
    assert header.split()[:3] == ["notebook", "cells", "words"] and line.startswith("tools/notebook_template.ipynb")


@pytest.mark.notebook
def test_the_template_runs(tmp_path, notebook_data_env):
    """A notebook started from the template runs as it is (papermill, smoke setting)."""
    import papermill as pm  # noqa: PLC0415

    out = tmp_path / "template.ipynb"
    shutil.copy(nblint.TEMPLATE, tmp_path / "in.ipynb")
    pm.execute_notebook(str(tmp_path / "in.ipynb"), str(out), parameters={"EPOCHS": 1}, kernel_name="python3",
                        cwd=str(ROOT), progress_bar=False)
    printed = "".join(o.get("text", "") for c in nbformat.read(out, as_version=4).cells for o in c.get("outputs", []))
    assert "replicas in sync: 2" in printed
