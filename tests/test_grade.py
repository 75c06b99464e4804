"""The instructor's grading command: nbgrader autogrades each submission against the solution, and the table
and CSV say, per check, ok or the message the student saw. The solution passes every check, the unanswered
exercise none ("not answered yet"), and each classic mistake gets the message that names it."""

from __future__ import annotations

import csv

import nbformat
import pytest

pytest.importorskip("nbgrader")

from tools import exercise_mistakes, grade
from tools.notebook_params import ROOT


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
    assert len(grouped) == len(set(grouped)) and set(grouped) <= set(exercise_mistakes.MISTAKES)


@pytest.mark.notebook
def test_grading_the_solution_the_exercise_and_the_mistakes(tmp_path, notebook_data_env, monkeypatch, capsys):
    for key, value in notebook_data_env.items():
        monkeypatch.setenv(key, value)
    subs = tmp_path / "submissions"
    subs.mkdir()
    nbformat.write(nbformat.read(ROOT / "solutions" / "07_svhn.ipynb", as_version=4), subs / "solution.ipynb")
    nbformat.write(nbformat.read(ROOT / "exercises" / "07_svhn.ipynb", as_version=4), subs / "unanswered.ipynb")
    for i, names in enumerate(exercise_mistakes.TOGETHER):
        nb = exercise_mistakes.with_mistakes(names)
        if i == 0:  # a student who edits a check into passing: nbgrader puts the solution's check back
            check = next(c for c in nb.cells
                         if c.metadata.get("nbgrader", {}).get("grade_id") == "check_build_in_scope")
            check.source = 'print("all weights created in the strategy\'s scope: right")'
        nbformat.write(nb, subs / f"mistakes_{i}.ipynb")

    assert grade.main([str(subs), "--smoke"]) == 0
    out = capsys.readouterr().out
    with open(subs / "grades.csv", newline="", encoding="utf-8") as f:
        rows = {row["student"]: row for row in csv.DictReader(f)}
    assert sorted(rows) == ["mistakes_0", "mistakes_1", "solution", "unanswered"]
    total = int(rows["solution"]["total"])
    assert total >= 11 and rows["solution"]["passed"] == str(total), rows["solution"]
    assert rows["unanswered"]["passed"] == "0"
    checks = [key for key in rows["solution"] if key.startswith("check_")]
    assert all("is not answered yet" in rows["unanswered"][c] for c in checks), rows["unanswered"]
    for i, names in enumerate(exercise_mistakes.TOGETHER):
        for name in names:
            mistake = exercise_mistakes.MISTAKES[name]
            message = rows[f"mistakes_{i}"][mistake.check]
            assert message.startswith("CheckFailed: ") and mistake.message in message, (name, message)
    assert "solution" in out and f"{total}/{total}" in out and "grades.csv" in out
