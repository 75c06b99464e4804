"""tools/links.py: every link to the repository comes from pyproject's [project.urls] Repository."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from tools import links
from tools.notebook_params import ROOT, course_notebooks

OTHER_URL = "https://github.com/someone-else/a-fork"
BADGE = "[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"

# The install cell the notebooks had before tools/links.py (no marker): replaced the first time.
OLD_INSTALL_CELL = '''\
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # quiet TensorFlow's C++ start-up lines
try:
    import course_utils
except ImportError:
    if "google.colab" not in sys.modules:
        raise ImportError("course_utils is not installed: run `python3 tasks.py lab` "
                          "from the repository, or `pip install -e .` in it") from None
    import subprocess
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                           "git+https://github.com/distributed-training-course/distributed-training-course"])'''


def test_every_link_agrees_with_pyproject():
    """Badges in the notebooks and README, and every install cell: run `python3 tasks.py links` to fix."""
    disagreements = links.check()
    assert not disagreements, "run `python3 tasks.py links`:\n" + "\n".join(disagreements)


def test_repository_url_is_read_from_pyproject():
    url = links.repository_url()
    assert re.fullmatch(r"https://github\.com/[^/]+/[^/]+", url)
    assert url in (ROOT / "pyproject.toml").read_text()
    assert links.colab_link(url, "notebooks/01_x.ipynb") == (
        "https://colab.research.google.com/github/" + url.removeprefix("https://github.com/")
        + "/blob/main/notebooks/01_x.ipynb")


def _fake_repo(tmp_path, url):
    """A copy of README.md and one notebook, with pyproject naming ``url``."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    pyproject = re.sub(r'(?m)^Repository = ".*"$', f'Repository = "{url}"', pyproject)
    (tmp_path / "pyproject.toml").write_text(pyproject)
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    source = course_notebooks()[0]
    copy = tmp_path / source.relative_to(ROOT)
    copy.parent.mkdir(parents=True)
    shutil.copy(source, copy)
    return copy


def test_rewrites_a_copy_for_another_url_and_a_second_run_changes_nothing(tmp_path):
    copy = _fake_repo(tmp_path, OTHER_URL)
    rel = copy.relative_to(tmp_path).as_posix()
    before = nbformat.read(copy, as_version=4)
    readme_before = (tmp_path / "README.md").read_text()

    checked = links.check(tmp_path, [copy])
    assert checked and (tmp_path / "README.md").read_text() == readme_before
    assert nbformat.read(copy, as_version=4) == before, "--check changes nothing"

    changes = links.sync(tmp_path, [copy])
    assert changes == checked
    after = nbformat.read(copy, as_version=4)
    assert f"](https://colab.research.google.com/github/someone-else/a-fork/blob/main/{rel})" in after.cells[0].source
    installs = [c for c in after.cells if c.cell_type == "code" and links.INSTALL_MARKER in c.source]
    assert [c.source for c in installs] == [links.install_cell(OTHER_URL)]
    assert f"course-utils @ git+{OTHER_URL}" in installs[0].source
    # Everything else is preserved: ids, metadata, outputs, execution counts, other cells.
    assert after.metadata == before.metadata and len(after.cells) == len(before.cells)
    for old, new in zip(before.cells, after.cells):
        assert (old.get("id"), old.metadata, old.get("outputs"), old.get("execution_count")) == \
               (new.get("id"), new.metadata, new.get("outputs"), new.get("execution_count"))
        if new is not after.cells[0] and new not in installs:
            assert new.source == old.source

    readme = (tmp_path / "README.md").read_text()
    badges = re.findall(r"\]\((https://colab\.research\.google\.com/github/[^)]*)\)", readme)
    assert badges and all(b.startswith("https://colab.research.google.com/github/someone-else/a-fork/blob/main/")
                          for b in badges)
    assert readme.replace("someone-else/a-fork", "X") == re.sub(
        r"(?<=colab\.research\.google\.com/github/)[^/]+/[^/]+(?=/blob/)", "X", readme_before)

    written = copy.read_bytes(), (tmp_path / "README.md").read_bytes()
    assert links.sync(tmp_path, [copy]) == []
    assert links.check(tmp_path, [copy]) == []
    assert (copy.read_bytes(), (tmp_path / "README.md").read_bytes()) == written


def test_recognises_the_old_install_cell_without_marker(tmp_path):
    repo_url = "https://github.com/distributed-training-course/distributed-training-course"
    _fake_repo(tmp_path, repo_url)
    path = tmp_path / "notebooks" / "09_synthetic.ipynb"
    nb = new_notebook(cells=[
        new_markdown_cell(f"# Title\n\n{BADGE}(https://colab.research.google.com/github/a/b/blob/main/x.ipynb)"),
        new_code_cell("EPOCHS = 1", metadata={"tags": ["parameters"]}, execution_count=1),
        new_code_cell(OLD_INSTALL_CELL, execution_count=2,
                      outputs=[new_output("stream", name="stdout", text="kept\n")]),
        new_code_cell("print('google.colab is not here, nor is p-i-p')", execution_count=3),
    ])
    nbformat.write(nb, path)
    changes = links.sync(tmp_path, [path])
    assert len(changes) == 2, changes  # the badge, the install cell; nothing in the README
    after = nbformat.read(path, as_version=4)
    assert after.cells[0].source.endswith(
        "(https://colab.research.google.com/github/distributed-training-course/distributed-training-course"
        "/blob/main/notebooks/09_synthetic.ipynb)")
    assert after.cells[2].source == links.install_cell(repo_url)
    assert after.cells[2].outputs == nb.cells[2].outputs and after.cells[2].execution_count == 2
    assert after.cells[3].source == nb.cells[3].source
    assert links.sync(tmp_path, [path]) == []


def test_reports_what_it_cannot_fix(tmp_path):
    _fake_repo(tmp_path, OTHER_URL)
    path = tmp_path / "notebooks" / "09_bare.ipynb"
    nbformat.write(new_notebook(cells=[new_markdown_cell("# No badge"), new_code_cell("x = 1")]), path)
    problems = links.sync(tmp_path, [path], check=True)
    assert any("no Colab badge" in p for p in problems) and any("found 0" in p for p in problems)


def test_install_cell_is_canonical_and_does_not_use_tensorflow():
    cell = links.install_cell(OTHER_URL)
    assert cell.startswith(links.INSTALL_MARKER) and cell.count(OTHER_URL) == 1
    assert 'os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")' in cell
    compile(cell, "install-cell", "exec")
    # tests/test_notebooks.py's rule for "uses TensorFlow before the devices are configured"
    code = "\n".join(line.split("#")[0] for line in cell.splitlines())
    assert not re.search(r"\btf\.|import tensorflow|import keras", code)


def _run_cell(tmp_path, prelude: str, *python_flags: str):
    script = tmp_path / "cell.py"
    script.write_text(textwrap.dedent(prelude) + "\n" + links.install_cell(OTHER_URL) + "\n"
                      "print(json.dumps({'tf': 'tensorflow' in sys.modules, "
                      "'log': os.environ.get('TF_CPP_MIN_LOG_LEVEL'), 'pip': globals().get('CALLS')}))\n")
    return subprocess.run([sys.executable, *python_flags, str(script)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)


def test_install_cell_does_nothing_where_course_utils_is_installed(tmp_path):
    proc = _run_cell(tmp_path, "import json, os, sys")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"tf": False, "log": "3", "pip": None}


def test_install_cell_outside_colab_without_course_utils_says_how_to_install(tmp_path):
    proc = _run_cell(tmp_path, "import json, os, sys", "-S")  # -S: no site-packages, no course_utils
    assert proc.returncode != 0
    assert "ImportError: course_utils is not installed: run `python3 tasks.py lab`" in proc.stderr


def test_install_cell_on_colab_keeps_tensorflow_and_matches_its_minor_version(tmp_path):
    prelude = """\
        import importlib.metadata, json, os, subprocess, sys, types
        sys.modules["google.colab"] = types.ModuleType("google.colab")
        importlib.metadata.version = lambda name: {"tensorflow": "2.19.1"}[name]
        CALLS = []
        subprocess.check_call = lambda cmd: CALLS.append(cmd)
        """
    proc = _run_cell(tmp_path, prelude, "-S")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["tf"] is False and result["log"] == "3"
    assert result["pip"] == [[sys.executable, "-m", "pip", "install", "-q", "tensorflow==2.19.1",
                              "tf-keras==2.19.*", "tensorboard==2.19.*", f"course-utils @ git+{OTHER_URL}"]]


@pytest.mark.versionless  # the check alone, in a subprocess: no library the course supports a range of
def test_command_line_check_mode(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "tools.links", "--check"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == (1 if links.check() else 0), proc.stdout + proc.stderr
    assert links.repository_url() in proc.stdout
