"""Generate the exercise notebooks (exercises/) from the solution notebooks (solutions/) with nbgrader.

    python -m tools.make_exercises          # write exercises/NN_*.ipynb from solutions/NN_*.ipynb
    python -m tools.make_exercises --check  # only report exercises that are missing or out of date

A solution marks what the student writes with nbgrader's markers, in cells whose metadata says
``nbgrader.solution: true``::

    ### BEGIN SOLUTION
    GLOBAL_BATCH = PER_REPLICA_BATCH * strategy.num_replicas_in_sync
    ### END SOLUTION

nbgrader's own preprocessors (the ones ``nbgrader generate_assignment`` runs, without its database)
turn each region into ``# YOUR CODE HERE`` and ``raise NotImplementedError()`` (a markdown answer cell
into ``YOUR ANSWER HERE``), lock the check cells (``nbgrader.grade: true``), validate the cell metadata,
and clear every output; the Colab badge is pointed at the exercise. The course command
runs this after executing the solutions; the tests run ``--check``.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS, EXERCISES = ROOT / "solutions", ROOT / "exercises"
MARKER = re.compile(r"### (BEGIN|END) SOLUTION")


def exercise_from(solution: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The exercise notebook of a solution notebook (a new notebook; the solution is not changed)."""
    from nbgrader.preprocessors import CheckCellMetadata, ClearOutput, ClearSolutions, LockCells  # noqa: PLC0415

    nb = nbformat.from_dict(nbformat.reader.reads(nbformat.writes(solution)))  # a deep copy
    resources: dict = {}
    for step in (CheckCellMetadata(), LockCells(), ClearSolutions(), ClearOutput(), CheckCellMetadata()):
        nb, resources = step.preprocess(nb, resources)
    nb.cells[0].source = nb.cells[0].source.replace("/blob/main/solutions/", "/blob/main/exercises/")  # its badge
    nb.metadata.pop("course", None)  # the solution's wall time is not the exercise's
    nb.metadata.pop("papermill", None)
    return nb


def solution_lines(solution: nbformat.NotebookNode) -> list[str]:
    """The non-trivial lines that only the solution regions hold (what must never reach an exercise;
    what the notebook also gives outside a region, such as ``with strategy.scope():`` or an instruction
    naming a variable, may)."""
    inside_lines, outside_lines, inside = [], [], False
    for cell in solution.cells:
        for line in cell.source.splitlines():
            if MARKER.search(line):
                inside = "BEGIN" in line
            else:
                (inside_lines if inside else outside_lines).append(line.strip())
    given = "\n".join(outside_lines)
    return [line for line in inside_lines if len(line) > 12 and line not in given]


def pairs() -> list[tuple[Path, Path]]:
    return [(path, EXERCISES / path.name) for path in sorted(SOLUTIONS.glob("[0-9]*.ipynb"))]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="report out-of-date exercises; write nothing")
    args = parser.parse_args(argv)
    stale = []
    for solution_path, exercise_path in pairs():
        text = nbformat.writes(exercise_from(nbformat.read(solution_path, as_version=4))) + "\n"
        current = exercise_path.read_text(encoding="utf-8") if exercise_path.exists() else None
        if current == text:
            continue
        if args.check:
            stale.append(exercise_path.relative_to(ROOT))
        else:
            exercise_path.write_text(text, encoding="utf-8")
            print(f"wrote {exercise_path.relative_to(ROOT)} from {solution_path.relative_to(ROOT)}")
    if stale:
        print("Out of date with their solutions: " + ", ".join(map(str, stale))
              + ". Run `python -m tools.make_exercises` (the course command does) and commit them.")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
