"""Test set-up: offline always, two logical CPU devices, and data that needs no network."""

from __future__ import annotations

import os
import resource
import signal
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the tools package
sys.path.insert(0, str(Path(__file__).resolve().parent))

os.environ["COURSE_OFFLINE"] = "1"  # no test ever needs the network
os.environ.setdefault("MPLBACKEND", "Agg")
# Started as a background job of a non-interactive shell (`pytest ... &`), Python finds SIGINT ignored and
# installs no KeyboardInterrupt handler, so the tests that send a Ctrl-C (and the processes they start,
# which inherit an ignored signal) would never see one. Put Python's own handler back.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

from course_utils.devices import simulate_devices  # noqa: E402

# Configure devices before any test runs a TensorFlow op (it can only happen once per process).
TEST_DEVICES = simulate_devices(2, verbose=False)


@pytest.fixture(scope="session")
def fake_idx_dir(tmp_path_factory) -> Path:
    from tools.fake_data import write_fake_fashion_mnist

    return write_fake_fashion_mnist(tmp_path_factory.mktemp("fashion_mnist_idx"))


@pytest.fixture(scope="session")
def notebook_data_env(fake_idx_dir) -> dict[str, str]:
    """Environment for notebook kernels: real offline Fashion-MNIST if installed, else the fake files."""
    from course_utils.datasets import DEBIAN_FASHION_MNIST_DIR, FASHION_MNIST_DIR_ENV

    env = {"COURSE_OFFLINE": "1"}
    if not (DEBIAN_FASHION_MNIST_DIR / "train-images-idx3-ubyte.gz").exists():
        env[FASHION_MNIST_DIR_ENV] = str(fake_idx_dir)
    return env


# --- two tests at a time (tasks.py test: -n 2 --dist loadfile): see machine_wide.py; and nothing the course
# starts outlives the test session (tools/leftovers.py) ---------------------------------------------------

from machine_wide import pytest_collection_modifyitems, pytest_xdist_make_scheduler  # noqa: E402, F401
from tools.leftovers import course_leftovers  # noqa: E402


def in_xdist_worker(config) -> bool:
    """This process is one of pytest-xdist's workers: the controller checks the whole run."""
    return hasattr(config, "workerinput")


# `tasks.py test` runs the browser tests and the oldest-versions check beside the other tests and notebooks:
# their clusters come and go meanwhile, so these sessions leave the check to tasks.py, which checks the whole run.
CHECKED_BY_CALLER = os.environ.get("COURSE_LEFTOVERS_CHECKED_BY") == "tasks.py"


def pytest_sessionstart(session):
    if not in_xdist_worker(session.config) and not CHECKED_BY_CALLER:
        session.config._course_leftovers_before = course_leftovers()


def pytest_sessionfinish(session, exitstatus):
    """Fail the session if a test left a cluster, a network or a process of the course behind."""
    if in_xdist_worker(session.config) or CHECKED_BY_CALLER:
        return
    left = course_leftovers() - getattr(session.config, "_course_leftovers_before", set())
    if left:
        print("\nLeft behind by this test session (each must be stopped by what started it):\n  "
              + "\n  ".join(sorted(left)), file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# --- each test's CPU seconds: CI is CPU-bound on two cores, so CPU, not wall time, is what a test costs it -----

def _cpu_seconds() -> float:
    """This process's CPU time and its ended, waited-for children's (``subprocess.run``, the launcher's workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    item._course_cpu_before = _cpu_seconds()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """``cpu_s`` (set-up, call and tear-down, a module fixture's set-up in its first test) as a property of
    the test: in build/test-logs/unit.xml, and the largest at the end of the run."""
    if call.when == "teardown" and hasattr(item, "_course_cpu_before"):
        item.user_properties.append(("cpu_s", round(_cpu_seconds() - item._course_cpu_before, 1)))
    yield


def pytest_terminal_summary(terminalreporter):
    spent = sorted((dict(r.user_properties)["cpu_s"], r.nodeid) for reports in terminalreporter.stats.values()
                   for r in reports if getattr(r, "when", None) == "teardown" and "cpu_s" in dict(r.user_properties))
    if spent:
        terminalreporter.write_sep("=", f"most CPU seconds (with the processes they waited for), of "
                                        f"{sum(c for c, _ in spent):.0f} in {len(spent)} tests")
        for cpu, nodeid in spent[::-1][:15]:
            terminalreporter.write_line(f"{cpu:7.1f} s  {nodeid}")
