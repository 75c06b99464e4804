"""Test set-up: offline always, two logical CPU devices, and data that needs no network."""

from __future__ import annotations

import os
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


# --- two tests at a time (tasks.py test: -n 2 --dist loadfile): see machine_wide.py ---------------------

from machine_wide import pytest_collection_modifyitems, pytest_xdist_make_scheduler  # noqa: E402, F401

# --- nothing the course starts outlives the test session ------------------------------------------------

def course_leftovers() -> set[str]:
    """What the course's clusters and networks leave when something fails to stop them: local Slurm
    clusters' directories, their janitors and daemons, network namespaces (netlab's ``dtc-*``, a
    multi-node Slurm cluster's ``sXXXX-*``)."""
    import glob
    import re
    import shutil
    import subprocess
    import tempfile

    import psutil

    from course_utils import netlab

    found = {f"directory {d}" for d in glob.glob(os.path.join(tempfile.gettempdir(), "course-slurm-*"))}
    ip = shutil.which("ip") or shutil.which("ip", path="/usr/sbin:/sbin")
    listed = subprocess.run([ip, "netns", "list"], capture_output=True, text=True).stdout if ip else ""
    ours = re.compile(rf"^({netlab.PREFIX}|s[0-9a-f]{{4}})-")
    found |= {f"namespace {line.split()[0]}" for line in listed.splitlines() if ours.match(line)}
    for proc in psutil.process_iter(["cmdline", "status"]):
        line = " ".join(proc.info["cmdline"] or [])
        if proc.info["status"] != psutil.STATUS_ZOMBIE and (
                "course-slurm-" in line or "course_utils.slurm._janitor" in line):
            found.add(f"process {proc.pid}: {line[:100]}")
    return found


def in_xdist_worker(config) -> bool:
    """This process is one of pytest-xdist's workers: the controller checks the whole run."""
    return hasattr(config, "workerinput")


def pytest_sessionstart(session):
    if not in_xdist_worker(session.config):
        session.config._course_leftovers_before = course_leftovers()


def pytest_sessionfinish(session, exitstatus):
    """Fail the session if a test left a cluster, a network or a process of the course behind."""
    if in_xdist_worker(session.config):
        return
    left = course_leftovers() - getattr(session.config, "_course_leftovers_before", set())
    if left:
        print("\nLeft behind by this test session (each must be stopped by what started it):\n  "
              + "\n  ".join(sorted(left)), file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
