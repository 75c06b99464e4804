"""tools/leftovers.py: what the course's clusters and networks leave, checked per test session and per run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from tools import leftovers

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.versionless  # the course's own process handling: the oldest-versions check skips it


def test_a_run_fails_on_what_appeared_since_its_start_and_names_it(tmp_path, capsys):
    before = tmp_path / "before.txt"
    already = Path(tempfile.mkdtemp(prefix="course-slurm-"))  # there before the run: not the run's
    try:
        assert leftovers.main(["--save", str(before)]) == 0 and f"directory {already}" in before.read_text()
        appeared = Path(tempfile.mkdtemp(prefix="course-slurm-"))
        try:
            assert leftovers.main(["--since", str(before)]) == 1
            said = capsys.readouterr().err
            assert f"directory {appeared}" in said and str(already) not in said
        finally:
            appeared.rmdir()
        assert leftovers.main(["--since", str(before)]) == 0
    finally:
        already.rmdir()


def test_every_notebooks_network_and_slurms_namespaces_are_the_courses():
    assert all(leftovers.COURSE_NAMESPACE.match(name) for name in ("dtc-hub", "dtc-0", "dtcin-1", "s0f3a-node1"))
    assert not any(leftovers.COURSE_NAMESPACE.match(name) for name in ("t01234-0", "other-0", "dtc0-1", "sx12-0"))


def test_a_run_stops_at_its_start_on_a_killed_runs_network_and_says_how_to_remove_it(monkeypatch, tmp_path,
                                                                                      capsys):
    there = {"namespace dtcin-hub", "namespace dtcin-0", "namespace dtc-probe-4242", "namespace s0f3a-node1"}
    monkeypatch.setattr(leftovers, "course_leftovers", lambda: set(there))
    assert leftovers.main(["--save", str(tmp_path / "before.txt")]) == 1
    said = capsys.readouterr().err
    assert "ip netns delete dtcin-0 && ip netns delete dtcin-hub" in said and "probe" not in said
    there -= {"namespace dtcin-hub", "namespace dtcin-0"}  # a probe in flight, a Slurm cluster's: names of their own
    assert leftovers.main(["--save", str(tmp_path / "before.txt")]) == 0


LEAVES = """
import tempfile

def test_leaves_a_cluster_directory():
    with open(tempfile.gettempdir() + "/course-leftovers-made.txt", "w") as made:
        made.write(tempfile.mkdtemp(prefix="course-slurm-"))
"""


@pytest.mark.parametrize("checked_by", [None, "tasks.py"])
def test_a_session_fails_on_what_it_left_unless_tasks_py_checks_the_whole_run(tmp_path, checked_by):
    (tmp_path / "test_leaves.py").write_text(textwrap.dedent(LEAVES))
    env = {k: v for k, v in os.environ.items() if k != "COURSE_LEFTOVERS_CHECKED_BY"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tests"), str(ROOT)])
    if checked_by:
        env["COURSE_LEFTOVERS_CHECKED_BY"] = checked_by
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-q",
                           "--rootdir", tmp_path, tmp_path / "test_leaves.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    made = Path(tempfile.gettempdir(), "course-leftovers-made.txt")
    shutil.rmtree(made.read_text(), ignore_errors=True)
    made.unlink()
    if checked_by:  # it runs beside other phases, whose clusters come and go: tasks.py checks the whole run
        assert done.returncode == 0, done.stdout + done.stderr
    else:
        assert done.returncode == 1 and "Left behind by this test session" in done.stderr, done.stdout + done.stderr
