"""tools/stress.py (``tasks.py stress``): failures counted per test over rounds; its busy loops never outlive it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from process_checks import wait_until
from tools import stress
from tools.notebook_params import ROOT

pytestmark = pytest.mark.versionless  # the oldest-versions check skips it: see pyproject's markers


def busy_loops() -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if proc.info["cmdline"] and stress.BUSY_LOOP in proc.info["cmdline"]:
            found.append(proc)
    return found


def write_tests(tmp_path, flaky_marker):
    path = tmp_path / "test_sample.py"
    path.write_text(textwrap.dedent(f"""
        import os, time
        def test_passes():
            pass
        def test_fails_in_the_first_round_only():
            marker = {str(flaky_marker)!r}
            if not os.path.exists(marker):
                open(marker, "w").close()
                assert False, "first round"
        def test_waits():
            time.sleep(float(os.environ.get("SAMPLE_WAIT", "0")))
        """))
    return path


def test_failures_are_counted_per_test_and_the_loops_are_stopped(tmp_path):
    tests = write_tests(tmp_path, tmp_path / "ran-once")
    # --load-nice 19: the loop takes only idle time, not the other tests' (tasks.py runs two files at a time)
    done = subprocess.run([sys.executable, "-m", "tools.stress", "--rounds", "2", "--load", "1", "--load-nice", "19",
                           "--out", tmp_path / "out", str(tests)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "[stress] 3 tests x 2 rounds: 1 failures" in done.stdout
    # JUnit's class name carries the sample file's directory where pytest's rootdir is above it (CI)
    assert re.search(r"^\[stress\] 1/2 rounds failed: \S*test_sample::test_fails_in_the_first_round_only$",
                     done.stdout, re.M), done.stdout
    assert "test_passes" not in done.stdout.split("failures")[-1]
    assert sorted(p.name for p in (tmp_path / "out").glob("round*.xml")) == ["round1.xml", "round2.xml"]
    assert busy_loops() == []


def test_a_clean_run_exits_0(tmp_path):
    marker = tmp_path / "ran-once"
    marker.touch()  # the flaky test passes from the start
    done = subprocess.run([sys.executable, "-m", "tools.stress", "--rounds", "1", "--load", "0",
                           "--out", tmp_path / "out", str(write_tests(tmp_path, marker))],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 tests x 1 rounds: 0 failures (no test failed in any round)" in done.stdout


def test_ctrl_c_stops_the_busy_loops(tmp_path):
    tests = write_tests(tmp_path, tmp_path / "ran-once")
    proc = subprocess.Popen([sys.executable, "-m", "tools.stress", "--rounds", "1", "--load", "2", "--load-nice", "19",
                             "--out", tmp_path / "out", str(tests)], cwd=ROOT, env={**os.environ, "SAMPLE_WAIT": "60"},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # each loop is seen first as the launcher's wrapper, then as `nice`, which renices and runs it
        wait_until(lambda: [loop.nice() for loop in busy_loops()] == [19, 19],
                   what="two busy loops at niceness 19 (--load-nice reaches them)", timeout=60)
        time.sleep(0.5)  # pytest is inside test_waits now or soon; either way the loops must go
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    wait_until(lambda: busy_loops() == [], what="no busy loop left", timeout=10)
