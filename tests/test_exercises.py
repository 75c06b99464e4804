"""Exercises are generated from their solutions by nbgrader's preprocessors, are up to date, and leak nothing."""

from __future__ import annotations

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

pytest.importorskip("nbgrader")  # the dev extra installs it on Python 3.11+

from tools import make_exercises

PAIRS = make_exercises.pairs()


def _nbgrader(grade_id, *, solution=False, grade=False, locked=False, points=None):
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3, "solution": solution}
    return {"nbgrader": {**meta, **({"points": points} if points else {})}}


def test_there_is_an_exercise_for_every_solution():
    assert PAIRS, "no solution notebooks found"
    assert all(exercise.exists() for _, exercise in PAIRS)


def test_committed_exercises_are_up_to_date_with_their_solutions(capsys):
    assert make_exercises.main(["--check"]) == 0, capsys.readouterr().out


@pytest.mark.parametrize("solution, exercise", PAIRS, ids=[p.name for p, _ in PAIRS])
def test_no_solution_code_leaks_and_no_outputs_remain(solution, exercise):
    sol, ex = nbformat.read(solution, as_version=4), nbformat.read(exercise, as_version=4)
    hidden = make_exercises.solution_lines(sol)
    assert len(hidden) >= 5, "the solution marks its answers"
    text = "\n".join(cell.source for cell in ex.cells)
    leaked = [line for line in hidden if line in text]
    assert not leaked, f"solution code in the exercise: {leaked[:3]}"
    assert all(not cell.get("outputs") and cell.get("execution_count") is None
               for cell in ex.cells if cell.cell_type == "code")
    stubs = [c for c in ex.cells if c.metadata.get("nbgrader", {}).get("solution")]
    assert stubs and all("YOUR CODE HERE" in c.source or "YOUR ANSWER HERE" in c.source for c in stubs)
    checks = [c for c in ex.cells if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code"]
    assert checks and all(c.metadata.get("editable") is False for c in checks), "check cells are locked"
    assert "/blob/main/exercises/" in ex.cells[0].source and "/blob/main/solutions/" not in ex.cells[0].source


def test_generation_turns_regions_into_stubs_and_keeps_everything_else():
    nb = new_notebook(cells=[
        new_markdown_cell("# Title [badge](https://x/blob/main/solutions/07_x.ipynb)"),
        new_code_cell("SETUP = 1\n### BEGIN SOLUTION\nANSWER = SETUP * 42\n### END SOLUTION\nprint(ANSWER)",
                      metadata=_nbgrader("q1", solution=True), execution_count=3),
        new_code_cell("assert ANSWER == 42, 'ANSWER is wrong'",
                      metadata=_nbgrader("t1", grade=True, locked=True, points=1)),
        new_markdown_cell("Because the cores are shared.",
                          metadata=_nbgrader("a1", solution=True, grade=True, points=2)),
    ], metadata={"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"},
                 "course": {"wall_time_s": 9}})
    ex = make_exercises.exercise_from(nb)
    assert ex.cells[1].source == "SETUP = 1\n# YOUR CODE HERE\nraise NotImplementedError()\nprint(ANSWER)"
    assert ex.cells[1].execution_count is None
    assert ex.cells[2].source == nb.cells[2].source and ex.cells[2].metadata["editable"] is False
    assert ex.cells[3].source == "YOUR ANSWER HERE"
    assert "/blob/main/exercises/07_x.ipynb" in ex.cells[0].source and "course" not in ex.metadata
    assert "ANSWER = SETUP * 42" in nb.cells[1].source, "the solution itself is left alone"
    assert make_exercises.solution_lines(nb) == ["ANSWER = SETUP * 42"]


def test_a_region_in_an_unmarked_cell_is_refused():
    nb = new_notebook(cells=[new_code_cell("### BEGIN SOLUTION\nx = 1\n### END SOLUTION")],
                      metadata={"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}})
    with pytest.raises(RuntimeError, match="Solution region detected in a non-solution cell"):
        make_exercises.exercise_from(nb)
