"""The instructor's grading command: nbgrader autogrades each submission against the solution, and the table
and CSV say, per check, ok or the message the student saw.

A two-exercise assignment in plain Python tests the grader itself in seconds (scores, the layouts, an edited
check put back, the smoke parameters, the CSV). The last test grades notebook 07 itself: the solution passes
every check, the unanswered exercise none ("not answered yet"), and each classic mistake gets the message that
names it (one notebook per group of mistakes, ``exercise_mistakes.TOGETHER``: 11 groups, about 30 s each in
the smoke setting). It executes notebook 07 thirteen times, so ``tasks.py test`` leaves it out (marker
``smoke_run``; nbval runs 07 once there, and ``tests/test_exercise_checks.py`` gives each check the mistakes);
run it with ``pytest tests/test_grade.py -m smoke_run``."""

from __future__ import annotations

import copy
import csv

import nbformat
import pytest

pytest.importorskip("nbgrader")

from tools import exercise_mistakes, grade, notebook_params
from tools.notebook_params import ROOT

# the course's grading tool (nbgrader's API), whatever the runtime libraries' versions: the oldest-versions
# check skips it (see pyproject's markers)
pytestmark = pytest.mark.versionless


def test_submissions_in_either_layout_and_a_clear_error_for_none(tmp_path):
    (tmp_path / "ada.ipynb").write_text("{}")
    (tmp_path / "bob").mkdir()
    (tmp_path / "bob" / "07_svhn.ipynb").write_text("{}")
    (tmp_path / "notes").mkdir()
    assert sorted(grade.submissions(tmp_path, "07_svhn")) == ["ada", "bob"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit, match="No submissions in .*<student>.ipynb or <student>/07_svhn.ipynb"):
        grade.submissions(tmp_path / "empty", "07_svhn")


def test_every_mistake_edits_the_solution_once():
    for name in exercise_mistakes.MISTAKES:
        exercise_mistakes.with_mistakes([name])  # raises when a solution edit no longer matches
    grouped = [name for group in exercise_mistakes.TOGETHER for name in group]
    assert len(grouped) == len(set(grouped)) and set(grouped) == set(exercise_mistakes.MISTAKES), "one group each"


@pytest.mark.parametrize("group", exercise_mistakes.TOGETHER, ids=lambda g: g[0])
def test_a_group_of_mistakes_can_blame_each_one(group):
    """One notebook per group: one mistake per answer, and no mistake breaks the check that blames another."""
    mistakes = [exercise_mistakes.MISTAKES[name] for name in group]
    assert len({m.answer for m in mistakes}) == len(mistakes), "two mistakes in one answer"
    for name, mistake in zip(group, mistakes):
        others = {m.check for m in mistakes if m is not mistake}
        assert not others & set(mistake.also), f"{name} also fails {others & set(mistake.also)}"


def test_every_answer_has_mistakes_and_every_check_catches_one():
    """The answers a student writes each have their classic wrong ones, and each graded check catches one."""
    solution = nbformat.read(ROOT / "solutions" / "07_svhn.ipynb", as_version=4)
    graded = {c.metadata["nbgrader"]["grade_id"]: c for c in solution.cells
              if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade_id")}
    answers = {g for g, c in graded.items() if c.metadata["nbgrader"].get("solution")}
    checks = {g for g, c in graded.items() if c.metadata["nbgrader"].get("grade")}
    mistakes = exercise_mistakes.MISTAKES.values()
    assert answers == {m.answer for m in mistakes}
    assert checks == {m.check for m in mistakes}
    per_answer = {a: sum(m.answer == a for m in mistakes) for a in answers}
    assert all(n >= 2 for a, n in per_answer.items() if a not in ("build_in_scope", "one_device")), per_answer


def _toy_assignment(folder):
    """A two-exercise nbgrader assignment in plain Python (no TensorFlow), so that grading runs in seconds:
    its parameters cell declares EPOCHS, and the second check passes only in the smoke setting."""

    def cell(make, source, grade_id=None, solution=False, points=None, tags=None):
        c = make(source)
        if grade_id:
            c.metadata["nbgrader"] = {"grade_id": grade_id, "grade": points is not None, "solution": solution,
                                      "locked": not solution, "schema_version": 3,
                                      **({"points": points} if points is not None else {})}
        if tags:
            c.metadata["tags"] = tags
        return c

    code, md = nbformat.v4.new_code_cell, nbformat.v4.new_markdown_cell
    smoke_epochs = notebook_params.SMOKE["EPOCHS"]
    nb = nbformat.v4.new_notebook(cells=[
        cell(code, "EPOCHS = 30", tags=["parameters"]),
        cell(md, "**Exercise 1.** Set `x` to 2."),
        cell(code, "### BEGIN SOLUTION\nx = 2\n### END SOLUTION", "answer_x", solution=True),
        cell(code, "assert \"x\" in globals(), \"Exercise 1 is not answered yet\"\n"
                   "assert x == 2, f\"x is {x}: it must be 2\"", "check_x", points=1),
        cell(code, "### BEGIN SOLUTION\nsteps = EPOCHS * 10\n### END SOLUTION", "answer_steps", solution=True),
        cell(code, f"assert steps == {smoke_epochs * 10}, f\"steps is {{steps}}, not {smoke_epochs * 10}\"",
             "check_steps", points=1),
    ], metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    solution = folder / "toy.ipynb"
    nbformat.write(nb, solution)
    return solution, nb


def test_grading_scores_each_check_restores_edited_checks_and_writes_the_csv(tmp_path, capsys):
    solution, nb = _toy_assignment(tmp_path)
    subs = tmp_path / "submissions"
    (subs / "bob").mkdir(parents=True)
    nbformat.write(nb, subs / "ada.ipynb")  # the solution itself
    wrong = copy.deepcopy(nb)
    wrong.cells[2].source = "x = 3"
    wrong.cells[4].source = "steps = EPOCHS"
    wrong.cells[5].source = "print('steps: right')"  # edits the check: nbgrader puts the solution's back
    nbformat.write(wrong, subs / "bob" / "toy.ipynb")  # nbgrader collect's layout
    blank = copy.deepcopy(nb)
    for c in (blank.cells[2], blank.cells[4]):
        c.source = "# YOUR CODE HERE\nraise NotImplementedError()"
    nbformat.write(blank, subs / "cy.ipynb")

    assert grade.main([str(subs), "--assignment", "toy", "--solution", str(solution), "--smoke",
                       "--csv", str(tmp_path / "out.csv"), "--timeout", "60"]) == 0
    out = capsys.readouterr().out
    with open(tmp_path / "out.csv", newline="", encoding="utf-8") as f:
        rows = {row["student"]: row for row in csv.DictReader(f)}
    assert rows["ada"] == {"student": "ada", "passed": "2", "total": "2", "check_x": "ok", "check_steps": "ok"}
    assert rows["bob"]["passed"] == "0"
    assert rows["bob"]["check_x"] == "AssertionError: x is 3: it must be 2"
    smoke_epochs = notebook_params.SMOKE["EPOCHS"]
    assert rows["bob"]["check_steps"] == f"AssertionError: steps is {smoke_epochs}, not {smoke_epochs * 10}"
    assert rows["cy"]["passed"] == "0" and rows["cy"]["check_x"] == "AssertionError: Exercise 1 is not answered yet"
    assert " 2/2 " in out and "AssertionError: x is 3" in out and str(tmp_path / "out.csv") in out


def test_without_smoke_the_notebooks_own_parameters_run(tmp_path, capsys):
    solution, nb = _toy_assignment(tmp_path)
    subs = tmp_path / "submissions"
    subs.mkdir()
    nbformat.write(nb, subs / "ada.ipynb")
    assert grade.main([str(subs), "--assignment", "toy", "--solution", str(solution)]) == 0
    with open(subs / "grades.csv", newline="", encoding="utf-8") as f:
        (row,) = csv.DictReader(f)
    assert row["check_x"] == "ok" and row["check_steps"].startswith("AssertionError: steps is 300")


def test_a_missing_solution_says_what_to_pass(tmp_path):
    (tmp_path / "ada.ipynb").write_text("{}")
    with pytest.raises(SystemExit, match="No solution notebook .*pass --solution"):
        grade.grade(tmp_path, "no_such_assignment")


def _grade_real(tmp_path, notebooks, env, monkeypatch, capsys):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    subs = tmp_path / "submissions"
    subs.mkdir()
    for student, nb in notebooks.items():
        nbformat.write(nb, subs / f"{student}.ipynb")
    assert grade.main([str(subs), "--smoke"]) == 0
    with open(subs / "grades.csv", newline="", encoding="utf-8") as f:
        rows = {row["student"]: row for row in csv.DictReader(f)}
    assert sorted(rows) == sorted(notebooks)
    return rows, capsys.readouterr().out


@pytest.mark.notebook
@pytest.mark.smoke_run  # tasks.py test leaves it out: nbval's run of notebook 07 fails on any failed check
def test_grading_the_solution_gives_every_point(tmp_path, notebook_data_env, monkeypatch, capsys):
    solution = nbformat.read(ROOT / "solutions" / "07_svhn.ipynb", as_version=4)
    rows, out = _grade_real(tmp_path, {"solution": solution}, notebook_data_env, monkeypatch, capsys)
    total = int(rows["solution"]["total"])
    assert total >= 11 and rows["solution"]["passed"] == str(total), rows["solution"]
    assert f"{total}/{total}" in out and "grades.csv" in out


def _assert_each_mistake_blamed(row, names, checks):
    for name in names:
        mistake = exercise_mistakes.MISTAKES[name]
        assert row[mistake.check].startswith("CheckFailed: ") and mistake.message in row[mistake.check], name
    blamed = {c for name in names for c in (exercise_mistakes.MISTAKES[name].check,
                                             *exercise_mistakes.MISTAKES[name].also)}
    assert all(row[c] == "ok" for c in checks if c not in blamed), row  # nothing else is blamed


@pytest.mark.notebook
def test_grading_the_unanswered_exercise(tmp_path, notebook_data_env, monkeypatch, capsys):
    """The exercise as handed out, graded end to end: every check says it is not answered yet, 0 points."""
    notebooks = {"unanswered": nbformat.read(ROOT / "exercises" / "07_svhn.ipynb", as_version=4)}
    rows, out = _grade_real(tmp_path, notebooks, notebook_data_env, monkeypatch, capsys)
    checks = [key for key in rows["unanswered"] if key.startswith("check_")]
    assert len(checks) >= 11 and rows["unanswered"]["passed"] == "0"
    assert all("is not answered yet" in rows["unanswered"][c] for c in checks), rows["unanswered"]
    assert "0/" in out


@pytest.mark.notebook
@pytest.mark.smoke_run  # tasks.py test leaves it out for time (a notebook run of ~20 s each): every mistake
@pytest.mark.parametrize("group", range(len(exercise_mistakes.TOGETHER)))  # is caught in seconds by
def test_grading_the_mistakes(tmp_path, notebook_data_env, monkeypatch, capsys, group):  # test_exercise_checks
    names = exercise_mistakes.TOGETHER[group]
    nb = exercise_mistakes.with_mistakes(names)
    if group == 0:  # a student who edits a check into passing: nbgrader puts the solution's check back
        check = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "check_build_in_scope")
        check.source = 'print("all weights created in the strategy\'s scope: right")'
    rows, _ = _grade_real(tmp_path, {"mistakes": nb}, notebook_data_env, monkeypatch, capsys)
    _assert_each_mistake_blamed(rows["mistakes"], names, [k for k in rows["mistakes"] if k.startswith("check_")])
