"""Grade students' exercise notebooks with nbgrader's autograder; print a table and write a CSV.

    python3 tasks.py grade SUBMISSIONS [--assignment 07_svhn] [--solution FILE] [--smoke] [--csv FILE]
                                       [--timeout S]

SUBMISSIONS holds one notebook per student: ``SUBMISSIONS/<student>.ipynb``, or
``SUBMISSIONS/<student>/<assignment>.ipynb`` (the layout ``nbgrader collect`` leaves). Each is
autograded against the solution (``solutions/<assignment>.ipynb``, or ``--solution``) in a throwaway nbgrader course
directory, its gradebook an SQLite file there: nbgrader puts the check cells back as the solution has
them (a student cannot edit a check into passing), runs every cell (a failing cell does not stop the
ones after it) and scores each check cell. ``--smoke`` runs each notebook in CI's smoke setting (the
parameters of ``tools/notebook_params.py``, injected after the parameters cell, as papermill does).

The table has one row per student: checks passed out of all, then each check: ``ok``, or the first
words of its message (``CheckFailed: Exercise 1 is not answered yet ...``). The CSV (default
``SUBMISSIONS/grades.csv``) holds each check's score and whole message. Written answers (the markdown
cells nbgrader marks for manual grading) are listed as such, not scored.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import sys
import tempfile
from pathlib import Path

import nbformat

from tools.notebook_params import ROOT, smoke_parameters


def submissions(folder: Path, assignment: str) -> dict[str, Path]:
    """``{student: notebook}`` from either layout; raises ``SystemExit`` with what to do when there is none."""
    found = {path.stem: path for path in sorted(folder.glob("*.ipynb"))}
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
        if (sub / f"{assignment}.ipynb").exists():
            found[sub.name] = sub / f"{assignment}.ipynb"
    if not found:
        raise SystemExit(f"No submissions in {folder}: put one notebook per student there, as <student>.ipynb "
                         f"or <student>/{assignment}.ipynb.")
    return found


def _prepare(notebook: Path, target: Path, smoke: bool, solution: Path) -> None:
    nb = nbformat.read(notebook, as_version=4)
    if smoke:
        from papermill.parameterize import parameterize_notebook  # noqa: PLC0415

        nb.metadata.setdefault("papermill", {})
        for cell in nb.cells:
            cell.metadata.setdefault("tags", [])
        nb = parameterize_notebook(nb, smoke_parameters(solution))
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)


def _messages(autograded: Path) -> dict[str, str]:
    """``{grade_id: "ok" or the check's error}`` of the code check cells of an autograded notebook."""
    nb = nbformat.read(autograded, as_version=4)
    found = {}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade"):
            errors = [o for o in cell.outputs if o.output_type == "error"]
            found[meta["grade_id"]] = f"{errors[0].ename}: {errors[0].evalue}" if errors else "ok"
    return found


def grade(folder: Path, assignment: str = "07_svhn", smoke: bool = False, timeout: int = 1800,
          solution: Path | None = None) -> list[dict]:
    """One row per student: ``{"student", "passed", "total", grade_id: message, ...}`` (see the module's doc)."""
    from nbgrader.apps import NbGraderAPI  # noqa: PLC0415
    from traitlets.config import Config  # noqa: PLC0415

    solution = solution or ROOT / "solutions" / f"{assignment}.ipynb"
    if not solution.exists():
        raise SystemExit(f"No solution notebook {solution}: name an assignment that has one, or pass --solution.")
    students = submissions(folder, assignment)
    bin_dir = str(Path(sys.executable).parent)  # nbgrader runs `alembic` from PATH for its gradebook
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    rows = []
    with tempfile.TemporaryDirectory(prefix="grade-") as tmp:
        course = Path(tmp)
        (course / "source" / assignment).mkdir(parents=True)
        shutil.copy(solution, course / "source" / assignment / f"{assignment}.ipynb")
        config = Config()
        config.CourseDirectory.root = str(course)
        config.CourseDirectory.db_url = f"sqlite:///{course / 'gradebook.db'}"
        config.ExecutePreprocessor.timeout = timeout
        api = NbGraderAPI(config=config)
        _must(api.generate_assignment(assignment), "generate the assignment from the solution")
        for student, notebook in students.items():
            _prepare(notebook, course / "submitted" / student / assignment / f"{assignment}.ipynb", smoke, solution)
            _must(api.autograde(assignment, student), f"autograde {student}")
            messages = _messages(course / "autograded" / student / assignment / f"{assignment}.ipynb")
            passed = sum(message == "ok" for message in messages.values())
            rows.append({"student": student, "passed": passed, "total": len(messages), **messages})
    return rows


def _must(result: dict, what: str) -> None:
    if not result.get("success"):
        raise SystemExit(f"nbgrader could not {what}:\n{result.get('error') or result.get('log')}")


def table(rows: list[dict]) -> str:
    checks = [key for key in rows[0] if key not in ("student", "passed", "total")]
    width = max(len("student"), *(len(row["student"]) for row in rows))
    lines = [f"{'student':<{width}}  passed  " + "  ".join(checks)]
    for row in rows:
        cells = ["ok" if row[c] == "ok" else row[c][:40].replace("\n", " ") for c in checks]
        lines.append(f"{row['student']:<{width}}  {row['passed']:>2}/{row['total']:<3} " + " | ".join(cells))
    return "\n".join(lines)


def write_csv(rows: list[dict], path: Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("submissions", type=Path)
    parser.add_argument("--assignment", default="07_svhn")
    parser.add_argument("--solution", type=Path, help="the solution notebook (default solutions/ASSIGNMENT.ipynb)")
    parser.add_argument("--smoke", action="store_true", help="run each notebook in CI's smoke setting")
    parser.add_argument("--csv", type=Path, help="where to write the CSV (default SUBMISSIONS/grades.csv)")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds a cell may run")
    args = parser.parse_args(argv)
    if not args.submissions.is_dir():
        parser.error(f"{args.submissions} is not a directory of submitted notebooks")
    rows = grade(args.submissions, args.assignment, args.smoke, args.timeout, args.solution)
    print(table(rows))
    out = args.csv or args.submissions / "grades.csv"
    write_csv(rows, out)
    print(f"\nper check, with whole messages: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
