"""tools/nblint.py: every rule on every notebook (one test each, so every failure shows), and each rule
shown to catch what it is for, and to repair it where it is fixable."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys

import nbformat
import pytest

from tools import nblint
from tools.notebook_params import ROOT

pytestmark = pytest.mark.versionless  # the oldest-versions check skips it: see pyproject's markers

NOTEBOOKS = nblint.notebooks()
CASES = [(rule, path) for path in NOTEBOOKS for rule in nblint.RULES]


@pytest.mark.parametrize("rule,path", CASES, ids=[f"{r}-{p.relative_to(ROOT)}" for r, p in CASES])
def test_notebook_follows_the_rule(rule, path):
    problems = nblint.check(path, rule)
    assert not problems, "\n".join(problems) + "\n(`python3 tasks.py lint --fix` repairs the fixable rules)"


def test_the_lint_covers_lessons_solutions_exercises_and_the_template():
    folders = {p.parent.name for p in NOTEBOOKS}
    assert folders == {"notebooks", "solutions", "exercises", "tools"} and nblint.TEMPLATE in NOTEBOOKS


def broken(tmp_path, change):
    """A copy of the template, changed by ``change(nb)``."""
    nb = nbformat.read(nblint.TEMPLATE, as_version=4)
    change(nb)
    path = tmp_path / "tools" / "notebook_template.ipynb"
    path.parent.mkdir(exist_ok=True)
    nbformat.write(nb, path)
    return path


def _papermill_run(nb):
    nb.metadata["papermill"] = {"duration": 1.0}
    nb.metadata["language_info"] = {"name": "python", "version": "3.11.7"}
    nb.cells[2].metadata["execution"] = {"iopub.status.busy": "2026-11-24T10:00:00Z"}
    nb.cells[6].metadata["tags"] = ["check-parameters"]
    nb.cells[4].metadata["tags"] = []


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


SKELETON = [
    (lambda nb: setattr(nb.cells[0], "source", "Title without a heading"), "the first cell must be markdown"),
    (lambda nb: nb.cells[6].metadata.pop("tags"), "the check-parameters cell must be code cell 3"),
    (lambda nb: nb.cells.insert(6, nb.cells.pop(4)), "the install cell must be code cell 2"),
    (lambda nb: nb.cells.insert(2, copy.deepcopy(nb.cells[7])), "the devices cell must be code cell 4"),
    (lambda nb: setattr(nb.cells[2], "source", "import tensorflow as tf\nX = 1"), "uses TensorFlow before"),
    (lambda nb: setattr(nb.cells[2], "source", "# nothing here"), "assigns no parameter"),
    (_without("## Setup"), "'## Setup' heading"),
    (_without("## Summary"), "no '## Summary'"),
    (lambda nb: nb.cells.append(nbformat.v4.new_markdown_cell("## After")), "'## Exercises'"),
]


@pytest.mark.parametrize("change,said", SKELETON, ids=[s[1] for s in SKELETON])
def test_the_skeleton_rule_names_what_is_missing(tmp_path, change, said):
    problems = nblint.check(broken(tmp_path, change), "skeleton")
    assert any(said in p for p in problems), problems
    assert "(fix by hand" not in " ".join(problems)


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
