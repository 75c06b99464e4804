"""Every course notebook: its structure, and a papermill run in the smoke setting (one test each)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import nbformat
import papermill as pm
import pytest

from tools.notebook_params import ROOT, course_notebooks, smoke_notebook, smoke_parameters

NOTEBOOKS = course_notebooks()
IDS = [str(p.relative_to(ROOT)) for p in NOTEBOOKS]
CHECK = "# NBVAL_CHECK_OUTPUT"


def test_course_has_notebooks():
    assert [p.name[:2] for p in NOTEBOOKS if p.parent.name == "notebooks"][:2] == ["01", "02"]


# Title, badge, parameters, install cell, devices first, a lesson's shape and its budgets: tools/nblint.py's
# rules (tests/test_nblint.py, one test per rule per notebook).


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_committed_outputs_come_from_a_clean_run(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    counts = [c.execution_count for c in code]
    assert None not in counts and counts == sorted(counts), "run top to bottom by the course command"
    for cell in code:
        assert not [o for o in cell.outputs if o.output_type == "error"]
        if re.search(r"^fig(, \w+)? = ", cell.source, re.M):
            assert any("image/png" in o.get("data", {}) for o in cell.outputs), \
                f"figure cell shows no figure (a non-inline MPLBACKEND?):\n{cell.source[:80]}"
        if cell.source.startswith(CHECK):
            assert cell.outputs, f"checked cell has no stored output (nbval would pass vacuously):\n{cell.source[:80]}"
            assert not [o for o in cell.outputs if o.get("name") == "stderr"], "stderr in a checked cell"


def test_kernel_python3_is_this_environments():
    """The notebooks run on the kernel named python3: it must be the Python running the tests (set-up
    installs it into each venv), or a smoke run would test another environment's versions."""
    from jupyter_client.kernelspec import NATIVE_KERNEL_NAME, KernelSpecManager

    assert NATIVE_KERNEL_NAME == "python3"
    python = KernelSpecManager().get_kernel_spec("python3").argv[0]
    python = python if os.path.isabs(python) else shutil.which(python) or python  # "python": first on PATH
    assert os.path.dirname(os.path.abspath(python)) == os.path.dirname(os.path.abspath(sys.executable))


@pytest.mark.notebook
@pytest.mark.smoke_run
@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_runs_in_smoke_setting(path, tmp_path, notebook_data_env, monkeypatch):
    for key, value in notebook_data_env.items():
        monkeypatch.setenv(key, value)
    # In the repository's layout under tmp_path (what a notebook writes stays there): a deeper notebook reads
    # its lesson beside its folder (../05_multi_worker.ipynb), as in notebooks/ and nbval's staged copy.
    for notebook in NOTEBOOKS:
        copy = tmp_path / notebook.relative_to(ROOT)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(notebook, copy)
    work = tmp_path / path.parent.relative_to(ROOT)
    out = work / f"executed-{path.name}"
    pm.execute_notebook(str(path), str(out), parameters=smoke_parameters(path), cwd=str(work),
                        progress_bar=False, log_output=False, kernel_name="python3")
    executed = nbformat.read(out, as_version=4)
    assert all(c.execution_count for c in executed.cells if c.cell_type == "code")


@pytest.mark.notebook
def test_nbval_fails_when_a_checked_output_changes(tmp_path, notebook_data_env):
    """The suite's nbval run compares checked cells with committed outputs: prove a change is caught."""
    path = ROOT / "notebooks" / "01_strategies_overview.ipynb"
    nb = smoke_notebook(path)
    checked = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith(CHECK)]
    target = checked[-1]
    for output in target.outputs:
        if output.get("name") == "stdout":
            output["text"] = output["text"].replace("True", "False")
    nbformat.write(nb, tmp_path / "changed.ipynb")
    env = dict(os.environ, **notebook_data_env)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--nbval-lax", "--nbval-current-env",
         "-o", "testpaths=", "-q", str(tmp_path / "changed.ipynb")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert "1 failed" in proc.stdout


def test_readme_lists_every_notebook_with_a_colab_badge():
    readme = (ROOT / "README.md").read_text()
    for path in NOTEBOOKS + sorted((ROOT / "exercises").glob("[0-9]*.ipynb")):
        rel = str(path.relative_to(ROOT))
        assert f"]({rel})" in readme, f"README's notebook table misses {rel}"
        assert "colab.research.google.com/github/" in readme and f"/blob/main/{rel})" in readme


def test_ci_runs_exactly_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python3 tasks.py test" in (ROOT / "README.md").read_text()
    assert [line for line in ci.splitlines() if "tasks.py" in line] == ["exec python3 tasks.py test"]
