"""Keep executed notebooks reviewable: metadata by allowlist, one wall time kept.

Papermill records start/end times, durations and paths for the notebook and every cell (and an empty
``tags`` list on each), nbclient adds per-cell ``execution`` timestamps, the kernel its ``language_info``,
JupyterLab whatever an extension saves: each re-run or save would rewrite hundreds of lines of the
committed notebooks. :func:`keep_allowed_metadata` keeps only :data:`NOTEBOOK_KEYS` and :data:`CELL_KEYS`
(as tensorflow/docs' ``nbfmt`` does); :func:`strip_run_metadata` applies it after a run (outputs and
execution counts stay) and keeps one value, ``metadata["course"]["wall_time_s"]``, which the README's
wall-time sentence (between ``<!-- wall-times -->`` markers) is generated from.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import nbformat

COURSE_KEY = "course"
WALL_TIME_KEY = "wall_time_s"
MACHINE_KEY = "machine"  # course_utils.machine.describe() of the run: outcomes compare only within one machine
# What a committed notebook may carry (None: any sub-keys). Everything else is dropped.
NOTEBOOK_KEYS = {"kernelspec": {"name", "display_name", "language"}, COURSE_KEY: {WALL_TIME_KEY, MACHINE_KEY},
                 "colab": None,
                 "accelerator": None}  # Colab's runtime type (GPU), which nbfmt keeps too
CELL_KEYS = {"tags": None, "nbgrader": None, "deletable": None, "editable": None}  # nbgrader: exercises


def keep_allowed_metadata(nb: nbformat.NotebookNode) -> list[str]:
    """Drop every metadata key outside the allowlists, and empty ``tags``, in place; return what was dropped."""
    dropped = []
    for key in list(nb.metadata):
        allowed = NOTEBOOK_KEYS.get(key, False)
        if allowed is False:
            dropped.append(f"notebook metadata {key!r}")
            del nb.metadata[key]
        elif allowed is not None and isinstance(nb.metadata[key], dict):
            for sub in [k for k in nb.metadata[key] if k not in allowed]:
                dropped.append(f"notebook metadata {key}.{sub}")
                del nb.metadata[key][sub]
    for i, cell in enumerate(nb.cells):
        for key in [k for k in cell.metadata if k not in CELL_KEYS or (k == "tags" and not cell.metadata[k])]:
            dropped.append(f"cell {i} metadata {key!r}" + (" (empty)" if key == "tags" else ""))
            del cell.metadata[key]
    return dropped
README_MARKERS = ("<!-- wall-times -->", "<!-- /wall-times -->")
DEFAULT_MACHINE = "the development machine"


def strip_run_metadata(nb: nbformat.NotebookNode, wall_time_s: float | None = None, machine: str | None = None) -> bool:
    """Remove papermill/nbclient run metadata from ``nb`` in place; return whether it changed.

    With ``wall_time_s``, record it (whole seconds) as ``metadata.course.wall_time_s``, and ``machine`` (the
    machine the run was on) as ``metadata.course.machine``; with ``None`` (a failed run), drop both, which
    would be stale.
    """
    before = nbformat.writes(nb)
    keep_allowed_metadata(nb)
    course = dict(nb.metadata.get(COURSE_KEY, {}))
    course.pop(MACHINE_KEY, None)
    if wall_time_s is None:
        course.pop(WALL_TIME_KEY, None)
    else:
        course[WALL_TIME_KEY] = int(round(wall_time_s))
        if machine:
            course[MACHINE_KEY] = machine
    if course:
        nb.metadata[COURSE_KEY] = course
    else:
        nb.metadata.pop(COURSE_KEY, None)
    return nbformat.writes(nb) != before


def write_notebook(nb: nbformat.NotebookNode, path: Path) -> None:
    """Write ``nb`` like the file it replaces: papermill writes no final newline, Jupyter does."""
    path = Path(path)
    newline = path.exists() and path.read_text(encoding="utf-8").endswith("\n")
    path.write_text(nbformat.writes(nb) + ("\n" if newline else ""), encoding="utf-8")


def strip_file(path: Path, wall_time_s: float | None, machine: str | None = None) -> None:
    nb = nbformat.read(path, as_version=4)
    if strip_run_metadata(nb, wall_time_s, machine):
        write_notebook(nb, path)


def _recorded(path: Path) -> tuple[str | None, int | None]:
    """The machine and the wall time the course command recorded in a notebook (None where it recorded none)."""
    course = nbformat.read(path, as_version=4).metadata.get(COURSE_KEY, {})
    value = course.get(WALL_TIME_KEY)
    return course.get(MACHINE_KEY), int(value) if value is not None else None


def machine(path: Path) -> str | None:
    """The machine a notebook's recorded run was on, or None."""
    return _recorded(path)[0]


def wall_time(path: Path) -> int | None:
    """The wall time recorded in a notebook by the course command, or None."""
    return _recorded(path)[1]


def label(path: Path) -> str:
    """``01`` for notebooks/01_*.ipynb (``05b`` for 05b_*), ``solutions/07`` for other folders."""
    path = Path(path)
    number = path.name.split("_", 1)[0]
    return number if path.parent.name == "notebooks" else f"{path.parent.name}/{number}"


def wall_times(paths: list[Path]) -> dict[str, int]:
    """Label -> recorded wall time, for the notebooks that have one (in the given order)."""
    times = {}
    for path in paths:
        value = wall_time(path)
        if value is not None:
            times[label(path)] = value
    return times


def one_run_set(paths: list[Path]) -> tuple[str | None, str]:
    """``(machine, "")`` when every notebook records a wall time and all ran on one machine, else
    ``(None, why)``, naming the notebooks that differ from the most common machine or have no run."""
    recorded = {label(path): _recorded(path) for path in paths}  # each notebook read once
    found = {name: ran_on for name, (ran_on, _) in recorded.items()}
    untimed = [name for name, (_, seconds) in recorded.items() if seconds is None]
    ran_on = [m for m in found.values() if m]
    common = max(set(ran_on), key=ran_on.count) if ran_on else None
    differ = {name: m for name, m in found.items() if m is None or m != common}  # no machine differs even from none
    if not untimed and common and not differ:
        return common, ""
    why = [f"no recorded run: {', '.join(untimed)}"] if untimed else []
    other = [f"{name} ({m or 'no machine recorded'})" for name, m in differ.items() if name not in untimed]
    if other:
        why.append(f"not run on {common or 'one recorded machine'}: {', '.join(other)}")
    return None, "; ".join(why)


def wall_time_sentence(times: dict[str, int], machine: str = DEFAULT_MACHINE) -> str:
    """``(on AMD EPYC, 2 cores, no GPU: 01 6 s, 02 156 s; 162 s in all, under 3 minutes)``."""
    seconds = sum(times.values())
    minutes = math.floor(seconds / 60) + 1
    total = "under a minute" if minutes == 1 else f"under {minutes} minutes"
    listed = ", ".join(f"{name} {value} s" for name, value in times.items())
    return f"(on {machine}: {listed}; {seconds:,} s in all, {total})"


_MARKED = re.compile(re.escape(README_MARKERS[0]) + r"(?P<sentence>.*?)" + re.escape(README_MARKERS[1]),
                     re.DOTALL)


def readme_sentence(readme: str) -> str | None:
    """The text between the wall-time markers, or None when the README has no markers."""
    match = _MARKED.search(readme)
    return match["sentence"] if match else None


def readme_machine(readme: str) -> str:
    """The machine the README's wall-time sentence names (``AMD EPYC, 2 cores, no GPU``)."""
    sentence = readme_sentence(readme) or ""
    match = re.match(r"\(on (?P<machine>.*?): (?=\S+ \d+ s)", sentence)
    return match["machine"] if match else DEFAULT_MACHINE


def update_readme(readme_path: Path, paths: list[Path]) -> bool:
    """Regenerate the README's wall-time sentence from the notebooks' metadata; return whether it changed.

    Only from one run set (``one_run_set``: every notebook timed, all on one machine, which the sentence
    names); otherwise, or without markers, the README stays as it is.
    """
    readme_path = Path(readme_path)
    text = readme_path.read_text(encoding="utf-8")
    ran_on, _ = one_run_set(paths)
    if ran_on is None or readme_sentence(text) is None:
        return False
    sentence = wall_time_sentence(wall_times(paths), ran_on)
    new = _MARKED.sub(lambda _: README_MARKERS[0] + sentence + README_MARKERS[1], text, count=1)
    if new == text:
        return False
    readme_path.write_text(new, encoding="utf-8")
    return True
