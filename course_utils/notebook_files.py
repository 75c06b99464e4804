"""The files a notebook writes with ``%%writefile``, read from the notebook itself.

Notebook 05 writes its worker scripts in cells that start with ``%%writefile`` (``-a`` appends). Other
notebooks and tests run the same scripts: :func:`write` produces a script from notebook 05's cells
without running notebook 05, so it is the script the student read, unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path


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
