"""tests/machine_wide.py: two tests at a time, and never two of the machine-wide files' tests at once."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from machine_wide import IN_STEP, LONGEST_FIRST, MACHINE_WIDE, scope

pytestmark = pytest.mark.versionless  # pytest and xdist are dev tools, at the same versions in both venvs

TESTS = Path(__file__).resolve().parent

SAMPLE = textwrap.dedent("""
    import json, os, time
    import pytest

    @pytest.mark.parametrize("i", range(3))
    def test_records_when_it_ran(i, request):
        start = time.monotonic()
        time.sleep(0.3)
        record = {"test": request.node.nodeid, "worker": os.environ.get("PYTEST_XDIST_WORKER"),
                  "start": start, "end": time.monotonic()}
        with open(os.environ["RECORDS"], "a") as f:
            f.write(json.dumps(record) + "\\n")
    """)


def test_the_machine_wide_files_run_on_one_worker_one_test_at_a_time(tmp_path):
    names = ["test_slurm.py", "test_netlab.py", "test_stress.py", "test_other_a.py", "test_other_b.py",
             "test_worker_exit.py", "test_multi_worker_scripts.py"]
    for name in names:  # test_worker_exit.py (first in LONGEST_FIRST) has the fewest tests: xdist would send it last
        one = name == "test_worker_exit.py"
        (tmp_path / name).write_text(SAMPLE.replace("range(3)", "range(1)") if one else SAMPLE)
    (tmp_path / "conftest.py").write_text("from machine_wide import pytest_collection_modifyitems, "
                                          "pytest_xdist_make_scheduler  # noqa: F401\n")
    records = tmp_path / "records.jsonl"
    env = {"RECORDS": str(records), "PYTHONPATH": str(TESTS), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadfile",
                           "--no-loadscope-reorder", "-q", str(tmp_path)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    ran = [json.loads(line) for line in records.read_text().splitlines()]
    assert len(ran) == 3 * len(names) - 2
    for group, what in ((MACHINE_WIDE, "machine-wide"), (IN_STEP, "in-step")):
        wide = [r for r in ran if r["test"].split("::")[0] in group]
        assert len({r["worker"] for r in wide}) == 1, f"the {what} files' tests ran on two workers"
        wide.sort(key=lambda r: r["start"])
        assert all(a["end"] <= b["start"] for a, b in zip(wide, wide[1:])), f"two {what} tests overlapped"
    assert {r["worker"] for r in ran} == {"gw0", "gw1"}, "the other files did not use the second worker"
    for name in ("test_other_a.py", "test_other_b.py", "test_worker_exit.py", "test_multi_worker_scripts.py"):
        assert len({r["worker"] for r in ran if r["test"].startswith(name)}) == 1, f"{name} was split"
    others = min(r["start"] for r in ran if r["test"].startswith("test_other"))
    assert next(r for r in ran if r["test"].startswith("test_worker_exit.py"))["start"] < others, \
        "a file of LONGEST_FIRST was handed out after the rest"


def test_scopes_and_the_order_name_files_that_exist():
    assert scope("tests/test_slurm.py::test_x[a::b]") == scope("tests/test_netlab.py::test_y") == "machine-wide"
    assert scope("tests/test_tasks.py::test_z") == "tests/test_tasks.py"
    in_step = scope("tests/test_worker_exit.py::test_a"), scope("tests/test_multi_worker_scripts.py::test_b")
    assert in_step == ("in-step", "in-step")
    missing = [name for name in LONGEST_FIRST if not (TESTS / name).exists()]
    assert not missing, f"machine_wide.py names files that are gone: {missing}"
