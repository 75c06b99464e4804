"""Stage the committed notebooks for nbval, in the smoke setting.

Each copy keeps its committed outputs and gets papermill's injected-parameters
cell with the smoke values, so nbval re-executes it fast and compares every cell
marked ``# NBVAL_CHECK_OUTPUT`` with the committed output. Those cells must not
depend on parameters or timing, so a difference means the code changed what
they print. A ``conftest.py`` beside them (``nbval_conftest.py``) lengthens
nbval's fixed wait for a cell's output messages.

    python -m tools.stage_nbval build/nbval
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import nbformat

from tools.notebook_params import ROOT, course_notebooks, smoke_notebook


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    target = Path(argv[0]).resolve()
    shutil.rmtree(target, ignore_errors=True)
    for path in course_notebooks():
        staged = smoke_notebook(path)
        out = target / path.relative_to(ROOT)
        out.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(staged, out)
        print(f"staged {out.relative_to(target)}")
    shutil.copyfile(Path(__file__).with_name("nbval_conftest.py"), target / "conftest.py")  # nbval's output wait
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
