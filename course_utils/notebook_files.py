"""The files a notebook writes: its ``%%writefile`` scripts, and the folder its runs write to.

Notebook 05 writes its worker scripts in cells that start with ``%%writefile`` (``-a`` appends). Other
notebooks and tests run the same scripts: :func:`write` produces a script from notebook 05's cells
without running notebook 05, so it is the script the student read, unchanged.

What a notebook's runs write (logs, checkpoints, saved models, results) goes to one folder per notebook,
``runs/<notebook>/`` beside the lesson folders, i.e. at the top of the repository (:func:`fresh_run_directory`),
so that the lesson folders hold the lessons and the scripts to read, not run debris. The course command and
a student in JupyterLab write there, nbval's staged copies beside their own copies; outside the lesson
folders (Colab's ``/content``) it is ``runs/<notebook>/`` in the working directory.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

RUNS = "runs"  # beside the lesson folders: one folder per notebook inside
LESSON_FOLDERS = ("notebooks", "solutions", "exercises")
DEEPER = "deeper"  # notebooks/deeper/: the deeper notebooks beside the lessons


def runs_root(start=None) -> Path:
    """Where the ``runs/`` folder goes for a notebook running in ``start`` (default: the working directory):
    beside the lesson folder (``notebooks/`` -> ``runs/`` at the same level, so the course command, nbval's
    staged copies and a student all print ``../runs/...``; ``notebooks/deeper/`` -> the same ``runs/``), or
    inside ``start`` anywhere else (Colab)."""
    here = Path.cwd() if start is None else Path(start)
    if here.name == DEEPER and here.parent.name in LESSON_FOLDERS:  # notebooks/deeper/ -> runs/ too
        here = here.parent
    return (here.parent if here.name in LESSON_FOLDERS else here) / RUNS


def fresh_run_directory(notebook: str, start=None) -> Path:
    """``runs/<notebook>/`` (see :func:`runs_root`), emptied and created: a run starts from nothing, so
    "the latest checkpoint" is this run's. Returned relative to the working directory where it can be
    (``../runs/02_mirrored_strategy_fit``), so printed paths stay short and the same on every machine."""
    if not notebook or Path(notebook).name != notebook or notebook in (".", ".."):
        raise ValueError(f"notebook must be a plain folder name such as '02_mirrored_strategy_fit', not {notebook!r}")
    directory = runs_root(start) / notebook
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    try:
        return Path(os.path.relpath(directory))
    except ValueError:  # another drive (Windows)
        return directory


def writefile_cells(notebook) -> dict[str, str]:
    """``{path: content}`` of every file the notebook's ``%%writefile`` cells write, appends included."""
    files: dict[str, str] = {}
    for cell in json.loads(Path(notebook).read_text())["cells"]:
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] != "code" or not source.startswith("%%writefile"):
            continue
        magic, _, body = source.partition("\n")
        words = magic.split()
        path = words[-1]
        body += "" if body.endswith("\n") else "\n"  # IPython ends every cell with a newline
        files[path] = files.get(path, "") + body if "-a" in words[1:-1] else body
    return files


def write(notebook, path: str, into=None) -> Path:
    """Write the file ``path`` (as the notebook names it, relative to its folder) into ``into`` (default:
    the notebook's folder); return where it went. A path the notebook does not write raises ``KeyError``."""
    files = writefile_cells(notebook)
    if path not in files:
        written = ", ".join(sorted(files)) or "none"
        raise KeyError(f"{Path(notebook).name} writes no file {path!r}; it writes: {written}")
    target = Path(into if into is not None else Path(notebook).parent) / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(files[path])
    return target
