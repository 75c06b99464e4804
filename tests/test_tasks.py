"""tasks.py's set-up and lock file, the dependency split, and the course runner's metadata stripping."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from importlib.metadata import PackageNotFoundError, version
from types import SimpleNamespace

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from pathlib import Path

import nbformat
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from process_checks import alive, wait_until
from tools.notebook_params import ROOT, course_notebooks

DEV_TOOLS = {"jupyterlab", "ipykernel", "nbformat", "papermill", "nbval", "pytest"}


def _load_tasks():
    spec = importlib.util.spec_from_file_location("course_tasks", ROOT / "tasks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tasks = _load_tasks()


def _pyproject() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


# The constraints file the running venv was installed from: `tasks.py test --oldest` names its own.
VENV_CONSTRAINTS = os.environ.get("COURSE_CONSTRAINTS", "constraints.txt")


def _constraints(name: str = "constraints.txt") -> dict[str, str]:
    """The pins that hold here (lines whose marker, if any, is true for this Python and platform)."""
    pins = {}
    for line in (ROOT / name).read_text().splitlines():
        if line and not line.startswith("#"):
            req = Requirement(line)
            (spec,) = req.specifier
            assert spec.operator == "==" and re.fullmatch(r"[\w.+!-]+", spec.version), f"not an exact pin: {line}"
            if req.marker is None or req.marker.evaluate():
                assert canonicalize_name(req.name) not in pins, f"two pins hold here for {req.name}"
                pins[canonicalize_name(req.name)] = spec.version
    return pins


# --- tasks.py -------------------------------------------------------------------------------------

def test_usage_lists_every_command(capsys):
    assert tasks.main([]) == 2
    usage = capsys.readouterr().out
    for command in ("course", "test", "lab", "setup", "links", "lock", "lint", "stress", "site"):
        assert f"python3 tasks.py {command}" in usage
    assert "--oldest" in usage and "--newest" in usage


def test_site_sets_up_then_builds_the_website_with_tools_site(monkeypatch):
    calls = []
    monkeypatch.setattr(tasks, "setup", lambda: calls.append("setup"))
    monkeypatch.setattr(tasks.subprocess, "run",
                        lambda cmd, **kw: calls.append([str(c) for c in cmd]) or SimpleNamespace(returncode=0))
    assert tasks.main(["site", "--serve"]) == 0
    assert calls == ["setup", [str(tasks.PY), "-m", "tools.site", "--serve"]]


def test_setup_digest_covers_pyproject_and_constraints(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\n")
    missing = tasks.setup_digest(tmp_path)
    (tmp_path / "constraints.txt").write_text("numpy==2.0.0\n")
    first = tasks.setup_digest(tmp_path)
    (tmp_path / "constraints.txt").write_text("numpy==2.0.1\n")
    second = tasks.setup_digest(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    third = tasks.setup_digest(tmp_path)
    assert len({missing, first, second, third}) == 4
    assert tasks.setup_digest(tmp_path) == third


def _uv_then(py, *args, compiled=True):
    """The two commands of one install by uv: uv itself (pinned as in constraints.txt), then uv installing
    (``compiled``: every module compiled to bytecode as it installs)."""
    return [[str(py), "-m", "pip", "install", "-q", "uv==0.13.9"],
            [str(py), "-m", "uv", "pip", "install", "--python", str(py), "-q", *["--compile-bytecode"] * compiled,
             *map(str, args)]]


def test_setup_installs_the_dev_extra_pinned_by_constraints_with_uv(monkeypatch):
    calls = []

    def fake_run(cmd, *args, **kwargs):
        calls.append([str(c) for c in cmd])
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(tasks.subprocess, "run", fake_run)
    tasks._install_course()
    assert tasks.uv_pin(tasks.CONSTRAINTS) == "uv==0.13.9", "the pin the expected commands below name"
    assert calls == _uv_then(tasks.PY, "-e", f"{ROOT}[dev]", "-c", ROOT / "constraints.txt")


def test_pip_installs_where_uv_does_not(monkeypatch, capsys):
    calls = []

    def fake_run(cmd, *args, **kwargs):
        calls.append([str(c) for c in cmd])
        return subprocess.CompletedProcess(cmd, 1 if calls[-1][2] == "uv" else 0)

    monkeypatch.setattr(tasks.subprocess, "run", fake_run)
    tasks._install_course()
    assert calls[:2] == _uv_then(tasks.PY, "-e", f"{ROOT}[dev]", "-c", ROOT / "constraints.txt")
    assert calls[2] == [str(tasks.PY), "-m", "pip", "install", "-q", "-e", f"{ROOT}[dev]", "-c",
                        str(ROOT / "constraints.txt")] and len(calls) == 3
    assert "uv could not install it; pip tries instead" in capsys.readouterr().out


def test_setup_falls_back_to_ranges_where_the_pins_do_not_install_and_says_so_loudly(monkeypatch, capsys):
    calls = []

    def fake_run(cmd, *args, **kwargs):
        calls.append([str(c) for c in cmd])
        pinned = "-c" in calls[-1]
        return subprocess.CompletedProcess(cmd, 1 if pinned else 0, stdout="",
                                           stderr="ERROR: No matching distribution found for tensorflow==2.21.0"
                                           if pinned else "")

    monkeypatch.setattr(tasks.subprocess, "run", fake_run)
    tasks._install_course()
    installs = [c for c in calls if "install" in c and "uv==0.13.9" not in c]
    # the pins, by uv then by pip; then the ranges, by uv
    assert [("-c" in c, "uv" in c) for c in installs] == [(True, True), (True, False), (False, True)]
    assert installs[-1][-1] == f"{ROOT}[dev]"
    err = capsys.readouterr().err
    assert "!!! WARNING: the versions pinned in constraints.txt do not install on this machine" in err
    assert "No matching distribution found for tensorflow==2.21.0" in err and "outputs may differ" in err


def test_setup_installs_slurm_munge_chromium_iproute2_and_shellcheck_with_apt_only_where_missing(monkeypatch, capsys):
    monkeypatch.setattr(tasks, "_provision", lambda *args: None)
    monkeypatch.setattr(tasks, "FASHION_MNIST", ROOT / "tasks.py")  # present: apt is not asked for the data
    installs, apt_works = [], [True]
    monkeypatch.setattr(tasks, "_apt_install", lambda *packages: installs.append(packages) or apt_works[0])
    monkeypatch.setattr(tasks.shutil, "which", lambda name, path=None: None)
    tasks.setup()
    assert installs == [("slurm-wlm", "munge"), ("chromium",), ("iproute2",), ("shellcheck",)]
    out = capsys.readouterr().out
    assert "installed Debian's slurm-wlm and munge" in out and "installed Debian's iproute2" in out
    assert "installed Debian's shellcheck" in out
    assert "installed Debian's chromium" in out
    apt_works[0] = False
    tasks.setup()
    out = capsys.readouterr().out
    assert "Slurm not installed (needs root + apt-get)" in out and "iproute2 not installed" in out
    assert "chromium not installed (needs root + apt-get): the browser test skips" in out
    assert "shellcheck not installed (needs root + apt-get)" in out
    installs.clear()
    monkeypatch.setattr(tasks.shutil, "which", lambda name, path=None: f"/usr/sbin/{name}")
    tasks.setup()
    out = capsys.readouterr().out
    assert installs == [] and not any(name in out for name in ("Slurm", "iproute2", "chromium", "shellcheck")), \
        "installed: nothing to do"
    monkeypatch.setattr(tasks.shutil, "which", lambda name, path=None: None if name == "tc" else f"/x/{name}")
    tasks.setup()
    assert installs == [("iproute2",)], "one of ip and tc missing is enough to install iproute2"
    installs.clear()
    monkeypatch.setattr(tasks.shutil, "which", lambda name, path=None: None if name == "chromium" else f"/x/{name}")
    tasks.setup()
    assert installs == [], "Ubuntu's chromium-browser will do"


def test_setup_installs_the_debian_packages_while_the_venv_installs(monkeypatch):
    import threading

    asked = threading.Event()
    monkeypatch.setattr(tasks, "FASHION_MNIST", ROOT / "missing")
    monkeypatch.setattr(tasks, "_apt_install", lambda *packages: asked.set() or True)
    overlapped = []
    monkeypatch.setattr(tasks, "_provision", lambda *args: overlapped.append(asked.wait(timeout=10)))
    tasks.setup()
    assert overlapped == [True], "apt-get was asked for nothing while the venv installed"


def test_apt_gets_run_one_at_a_time(monkeypatch, tmp_path):
    import threading
    import time

    monkeypatch.setattr(tasks, "APT_FAILED", tmp_path / "apt-failed.txt")
    monkeypatch.setattr(tasks, "_is_root", lambda: True)
    monkeypatch.setattr(tasks.shutil, "which", lambda name, path=None: f"/usr/bin/{name}")
    running, most = [], []

    def fake_apt(cmd, **kw):
        running.append(cmd)
        most.append(len(running))
        time.sleep(0.2)
        running.remove(cmd)
        return SimpleNamespace(returncode=0)

    monkeypatch.setattr(tasks.subprocess, "run", fake_apt)
    threads = [threading.Thread(target=tasks._apt_install, args=(name,)) for name in ("chromium", "python3-venv")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most == [1, 1]


def test_a_failed_apt_install_is_recorded_and_not_retried(monkeypatch, tmp_path, capsys):
    calls = []
    monkeypatch.setattr(tasks, "APT_FAILED", tmp_path / "build" / "apt-failed.txt")
    monkeypatch.setattr(tasks, "_is_root", lambda: True)
    monkeypatch.setattr(tasks.shutil, "which", lambda name, path=None: f"/usr/bin/{name}")
    monkeypatch.setattr(tasks.subprocess, "run",
                        lambda cmd, **kw: calls.append(cmd[1]) or SimpleNamespace(returncode=100))
    assert tasks._apt_install("slurm-wlm", "munge") is False
    assert calls == ["install", "update", "install"]
    assert (tmp_path / "build" / "apt-failed.txt").read_text() == "slurm-wlm munge\n"
    calls.clear()
    assert tasks._apt_install("slurm-wlm", "munge") is False and calls == []  # not again
    assert "not retrying `apt-get install slurm-wlm munge`" in capsys.readouterr().out
    assert tasks._apt_install("iproute2") is False and calls == ["install", "update", "install"]  # others still tried


def test_setup_digest_of_the_oldest_venv_covers_its_own_constraints(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\n")
    (tmp_path / "constraints-oldest.txt").write_text("numpy==1.26.0\n")
    first = tasks.setup_digest(tmp_path, tasks.OLDEST_INPUTS)
    (tmp_path / "constraints.txt").write_text("numpy==2.0.0\n")
    assert tasks.setup_digest(tmp_path, tasks.OLDEST_INPUTS) == first, "constraints.txt is not its input"
    (tmp_path / "constraints-oldest.txt").write_text("numpy==1.26.1\n")
    assert tasks.setup_digest(tmp_path, tasks.OLDEST_INPUTS) != first


def _record_commands(monkeypatch):
    calls = []

    def fake_run(cmd, *args, **kwargs):
        calls.append(([str(c) for c in cmd], kwargs.get("env")))
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(tasks.subprocess, "run", fake_run)
    return calls


def test_oldest_setup_installs_exactly_the_oldest_pins_once(monkeypatch, tmp_path):
    venv_dir = tmp_path / ".venv-oldest"
    py = tasks.venv_python(venv_dir)
    monkeypatch.setattr(tasks, "VENV_OLDEST", venv_dir)
    monkeypatch.setattr(tasks, "PY_OLDEST", py)
    made = []
    monkeypatch.setattr(tasks, "make_venv", lambda d=tasks.VENV: (made.append(d), d.mkdir(exist_ok=True)))
    calls = _record_commands(monkeypatch)
    tasks.setup_oldest()
    assert made == [venv_dir]
    assert [c for c, _ in calls] == [
        *_uv_then(py, "-e", f"{ROOT}[dev]", "-c", ROOT / "constraints-oldest.txt", compiled=False),
        [str(py), "-m", "ipykernel", "install", "--sys-prefix", "--name", "python3",
         "--display-name", "Python 3 (distributed-training-course)"],
    ]
    assert (venv_dir / ".course-installed").read_text() == tasks.setup_digest(ROOT, tasks.OLDEST_INPUTS)
    calls.clear()
    tasks.setup_oldest()
    assert calls == [], "stamp up to date: no re-install"


def test_oldest_check_runs_the_unit_tests_then_one_notebook_in_the_oldest_venv(monkeypatch):
    monkeypatch.setattr(tasks, "setup_oldest", lambda: None)
    calls = _record_commands(monkeypatch)
    assert tasks.main(["test", "--oldest"]) == 0
    py = str(ROOT / ".venv-oldest" / "bin" / "python")
    assert [c for c, _ in calls] == [
        [py, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadfile", "--no-loadscope-reorder",
         "-m", "not notebook and not versionless and not browser", "tests"],
        [py, "-m", "pytest", "-p", "no:cacheprovider",
         "tests/test_notebooks.py::test_runs_in_smoke_setting[notebooks/01_strategies_overview.ipynb]"],
    ]
    for _, env in calls:
        assert env["PATH"].split(os.pathsep)[0] == str(ROOT / ".venv-oldest" / "bin"), \
            "the kernel named python3 must be the oldest venv's"
        assert env["VIRTUAL_ENV"] == str(ROOT / ".venv-oldest")
        assert env["COURSE_OFFLINE"] == "1" and env["COURSE_CONSTRAINTS"] == "constraints-oldest.txt"


def test_oldest_smoke_names_a_test_that_exists():
    path, _, test_id = tasks.OLDEST_SMOKE.partition("::")
    name, _, notebook = test_id.partition("[")
    assert f"def {name}(" in (ROOT / path).read_text()
    assert ROOT / notebook.rstrip("]") in course_notebooks()


class _Background:
    """A stand-in for a check started beside the others (``start_beside``): records how it was waited for
    or stopped."""

    def __init__(self, name, calls, rc, log):
        self.name, self.calls, self.rc, self.running = name, calls, rc, True
        self.course_log, self.course_stop = log, "its stop signal"

    def poll(self):
        return None if self.running else self.rc

    def wait(self, timeout=None):
        self.running = False
        self.calls.append(("waited for", self.name))
        return self.rc


def test_the_whole_run_puts_the_lighter_checks_beside_the_unit_tests_and_nbval(monkeypatch, tmp_path):
    calls, rcs = [], {"unit": 0, "nbval": 0, "colab": 0, "browser": 0, "oldest": 0, "leftovers": 0,
                      "killed run's network": 0}

    commands = {}

    def start_beside(name, command, stop=None):
        calls.append(("started", name))
        commands[name] = [str(c) for c in command]
        log = tmp_path / f"{name}.log"
        log.write_text(f"{name}'s output\n")
        return _Background(name, calls, rcs[name], log)

    def fake_run(cmd, **kwargs):  # only the leftovers check runs through subprocess.run here
        option = str(cmd[3])
        assert [str(c) for c in cmd[1:3]] == ["-m", "tools.leftovers"] and option in ("--save", "--since")
        calls.append(("leftovers saved",) if option == "--save" else ("leftovers checked",))
        return SimpleNamespace(returncode=rcs["killed run's network" if option == "--save" else "leftovers"])

    monkeypatch.setattr(tasks, "setup", lambda: None)
    monkeypatch.setattr(tasks, "ruff", lambda args: calls.append(("lint",)) or 0)
    monkeypatch.setattr(tasks, "unit_tests", lambda args, env: calls.append(("unit", args)) or rcs["unit"])
    monkeypatch.setattr(tasks, "nbval", lambda env: calls.append(("nbval",)) or rcs["nbval"])
    monkeypatch.setattr(tasks, "start_beside", start_beside)
    monkeypatch.setattr(tasks.subprocess, "run", fake_run)
    stopped = []
    monkeypatch.setattr(tasks, "stop_group", lambda process, grace_s, sig: stopped.append(process.name)
                        if process.poll() is None else None)
    everything = [("lint",), ("leftovers saved",), ("started", "colab"), ("started", "browser"), ("unit", ["-x"]),
                  ("started", "oldest"), ("nbval",), ("waited for", "colab"), ("waited for", "browser"),
                  ("waited for", "oldest"), ("leftovers checked",)]
    assert tasks.main(["test", "-x"]) == 0 and calls == everything and stopped == []
    assert commands["oldest"][-4:] == ["test", "--oldest", "-n", "0"], "beside nbval, the oldest check needs no xdist"
    calls.clear()
    rcs["unit"] = 1
    assert tasks.main(["test"]) == 1
    assert calls == [("lint",), ("leftovers saved",), ("started", "colab"), ("started", "browser"), ("unit", [])]
    assert stopped == ["colab", "browser"], "a failed phase stops the checks running beside it"
    calls.clear(), stopped.clear()
    rcs["unit"], rcs["browser"] = 0, 1
    assert tasks.main(["test"]) == 1 and ("leftovers checked",) not in calls
    assert calls[-1] == ("waited for", "browser") and stopped == ["oldest"], "the first failure stops the rest"
    calls.clear(), stopped.clear()
    rcs["browser"], rcs["leftovers"] = 0, 1
    assert tasks.main(["test", "-x"]) == 1 and calls == everything, \
        "something left on the machine fails the run"
    calls.clear()
    rcs["leftovers"], rcs["killed run's network"] = 0, 1
    assert tasks.main(["test"]) == 1 and calls == [("lint",), ("leftovers saved",)], \
        "a killed run's network stops the run before anything starts"


def test_each_check_alone(monkeypatch):
    calls = []
    monkeypatch.setattr(tasks, "setup", lambda: None)
    monkeypatch.setattr(tasks, "suite", lambda args: calls.append(("suite", args)) or 0)
    monkeypatch.setattr(tasks, "oldest_check", lambda args: calls.append(("oldest", args)) or 0)
    monkeypatch.setattr(tasks, "colab_check", lambda: calls.append(("colab",)) or 0)
    monkeypatch.setattr(tasks, "browser_tests", lambda env: calls.append(("browser", env["COURSE_OFFLINE"])) or 0)
    for argv, expected in [(["--newest", "-x"], ("suite", ["-x"])), (["--oldest", "-x"], ("oldest", ["-x"])),
                           (["--colab"], ("colab",)), (["--browser"], ("browser", "1"))]:
        calls.clear()
        assert tasks.main(["test", *argv]) == 0 and calls == [expected], argv


def test_a_check_beside_logs_its_output_and_is_stopped_with_its_whole_group(tmp_path, monkeypatch):
    monkeypatch.setattr(tasks, "TEST_LOGS", tmp_path)
    code = ("import os, signal, subprocess, sys, time; "
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); "
            "print(os.environ['COURSE_LEFTOVERS_CHECKED_BY'], child.pid, os.nice(0), flush=True); "
            "signal.signal(signal.SIGINT, lambda *_: print('interrupted', flush=True) or sys.exit(3)); "
            "[time.sleep(1) for _ in range(120)]")  # in steps: a signal handled just before one long sleep would wait
    process = tasks.start_beside("demo", [sys.executable, "-c", code], stop=tasks.signal.SIGINT)
    log = tmp_path / "demo.log"
    deadline = time.monotonic() + 60
    while not log.read_text().strip() and time.monotonic() < deadline:
        time.sleep(0.1)
    said, child, niceness = log.read_text().split()
    assert said == "tasks.py", "its pytest sessions leave the leftovers check to tasks.py"
    assert int(niceness) == min(19, os.nice(0) + tasks.BESIDE_NICENESS), "the phases' own processes come first"
    assert os.getpgid(int(child)) == process.pid != os.getpgid(0), "a process group of its own"
    tasks.stop_group(process, grace_s=30, sig=process.course_stop)
    assert process.returncode == 3 and "interrupted" in log.read_text(), "stopped by its own signal first"
    wait_until(lambda: not alive(int(child)), timeout=10, what="its child gone with its group")


def test_the_oldest_check_beside_nbval_starts_no_cluster_or_network():
    """It runs beside nbval, whose notebooks start Slurm clusters and networks, and whose tests look at every
    such process: a test that starts one must be marked versionless or notebook, which the oldest check skips."""
    import test_netlab
    import test_slurm

    for module in (test_slurm, test_netlab):
        marked = getattr(module, "pytestmark", [])
        module_marks = [m.name for m in (marked if isinstance(marked, list) else [marked])]
        for name, function in vars(module).items():
            if not name.startswith("test_"):
                continue
            marks = getattr(function, "pytestmark", [])
            starts = any(m.name == "skipif" and m.kwargs.get("reason", "").startswith(
                ("no local Slurm cluster here", "network namespaces unavailable")) for m in marks)
            if starts or {"local_cluster", "Network"} & set(function.__code__.co_names):
                skipped = {"versionless", "notebook"} & {*module_marks, *(m.name for m in marks)}
                assert skipped, f"{module.__name__}.{name} starts a cluster or network in the oldest check"


def test_the_suite_lints_first_and_a_finding_fails_it(monkeypatch):
    ran = []
    monkeypatch.setattr(tasks, "setup", lambda: None)
    monkeypatch.setattr(tasks, "ruff", lambda args: ran.append("ruff") or findings[0])
    monkeypatch.setattr(tasks.subprocess, "run", lambda cmd, **kw: ran.append(cmd[2]) or SimpleNamespace(returncode=0))
    findings = [1]
    assert tasks.suite([]) == 1 and ran == ["ruff"], "no test runs after a lint finding"
    ran.clear()
    findings[0] = 0
    assert tasks.suite([]) == 0 and ran[:2] == ["ruff", "pytest"]
    assert ran[-1] == "pytest" and len(ran) == 5, "unit tests, staging, nbval, then the browser test"


def test_nbval_hands_out_the_longest_notebooks_first_then_every_other_once(tmp_path):
    committed = [path.relative_to(ROOT).as_posix() for path in course_notebooks()]
    for name in committed:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).touch()
    order = [path.relative_to(tmp_path).as_posix() for path in tasks.nbval_order(tmp_path)]
    assert order[:len(tasks.NBVAL_LONGEST_FIRST)] == list(tasks.NBVAL_LONGEST_FIRST), "a longest one is gone"
    assert sorted(order) == sorted(committed) and len(order) == len(set(order))


def test_ruff_is_configured_to_flag_what_the_course_cares_about(tmp_path):
    """pyproject's [tool.ruff] applied to a file with an unused import, a blind except and a late import."""
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n\n\ndef f():\n    import json\n    try:\n        return json\n"
                   "    except Exception:\n        return None\n")
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--config", ROOT / "pyproject.toml",
                           "--output-format", "concise", bad], capture_output=True, text=True)
    assert done.returncode == 1
    for code in ("F401", "PLC0415", "BLE001"):
        assert code in done.stdout, done.stdout


def test_lowest_python_is_the_floor_of_requires_python():
    assert tasks.lowest_python(">=3.10,<3.14") == "3.10" and tasks.lowest_python("<3.14, >= 3.11") == "3.11"
    with pytest.raises(SystemExit, match="no lower bound"):
        tasks.lowest_python("<3.14")


def test_dev_tool_pins_keep_the_dev_extras_lines_with_their_markers():
    constraints = ("# header\nabsl-py==2.5.1\nnbgrader==0.9.6 ; python_full_version >= '3.11'\n"
                   "tomli==2.4.0 ; python_full_version < '3.11'\nPyYAML==6.0.3\nnumpy==2.4.6\n")
    dev = ["nbgrader>=0.9.6,<0.10; python_version >= '3.11'", "tomli>=2; python_version < '3.11'", "pyyaml>=6"]
    assert tasks.dev_tool_pins(constraints, dev) == ("nbgrader==0.9.6 ; python_full_version >= '3.11'\n"
                                                      "tomli==2.4.0 ; python_full_version < '3.11'\nPyYAML==6.0.3\n")


@pytest.mark.parametrize("args,expected", [([], []), (["--upgrade"], ["--upgrade"]),
                                           (["--oldest"], ["--resolution", "lowest-direct", "-c"])])
def test_lock_resolves_with_uv_for_every_platform_and_writes_only_on_success(monkeypatch, tmp_path, args, expected):
    target = tmp_path / ("constraints-oldest.txt" if args == ["--oldest"] else "constraints.txt")
    target.write_text("# old\nkeras==3.10.0\n")
    monkeypatch.setattr(tasks, "CONSTRAINTS", tmp_path / "constraints.txt")
    monkeypatch.setattr(tasks, "CONSTRAINTS_OLDEST", tmp_path / "constraints-oldest.txt")
    if args == ["--oldest"]:  # the dev tools' pins come from constraints.txt
        (tmp_path / "constraints.txt").write_text("# old\nkeras==3.15.1\nruff==0.17.6\n")
    monkeypatch.setattr(tasks, "setup", lambda: None)
    seen, outcome = [], [0]

    def fake_run(cmd, *a, **kw):
        cmd = [str(c) for c in cmd]
        out = Path(cmd[cmd.index("-o") + 1])
        seen.append((cmd, out.read_text() if out.exists() else None))
        if outcome[0] == 0:
            out.write_text("keras==3.15.1 ; python_full_version >= '3.11'\n"
                           "keras==3.12.4 ; python_full_version < '3.11'\n")
        return subprocess.CompletedProcess(cmd, outcome[0])

    monkeypatch.setattr(tasks.subprocess, "run", fake_run)
    assert tasks.lock(args) == 0
    cmd, before = seen[-1]
    assert cmd[:5] == [str(tasks.PY), "-m", "uv", "pip", "compile"] and "--universal" in cmd
    assert cmd[cmd.index("--python-version") + 1] == "3.10" and cmd[cmd.index("--extra") + 1] == "dev"
    assert all(flag in cmd for flag in expected)
    assert before == ("# old\nkeras==3.10.0\n" if args == [] else None)  # lock keeps the pinned versions
    text = target.read_text()
    assert text.startswith("# constraints") and "keras==3.12.4 ; python_full_version < '3.11'" in text
    outcome[0] = 1
    target.write_text("unchanged\n")
    assert tasks.lock(args) == 1 and target.read_text() == "unchanged\n"


# --- dependencies ---------------------------------------------------------------------------------

def test_runtime_dependencies_exclude_dev_tools():
    project = _pyproject()["project"]
    runtime = {canonicalize_name(Requirement(r).name) for r in project["dependencies"]}
    dev = {canonicalize_name(Requirement(r).name) for r in project["optional-dependencies"]["dev"]}
    assert {"tensorflow", "tensorboard", "tf-keras", "keras", "tensorflow-datasets", "importlib-resources",
            "numpy", "matplotlib", "portpicker", "psutil"} <= runtime
    assert not runtime & DEV_TOOLS and DEV_TOOLS <= dev
    assert project["urls"]["Repository"].startswith("https://github.com/")


def test_environment_yml_installs_the_same_as_setup():
    env = (ROOT / "environment.yml").read_text()
    assert '"-e .[dev]"' in env and '"-c constraints.txt"' in env


def test_constraints_pin_every_dependency_within_pyproject_ranges():
    header = [line for line in (ROOT / "constraints.txt").read_text().splitlines() if line.startswith("#")]
    assert "python3 tasks.py lock" in "\n".join(header) and "pyproject.toml" in "\n".join(header)
    pins = _constraints()
    assert "course-utils" not in pins
    project = _pyproject()["project"]
    for spec in project["dependencies"] + project["optional-dependencies"]["dev"]:
        req = Requirement(spec)
        if req.marker and not req.marker.evaluate():
            continue
        name = canonicalize_name(req.name)
        assert name in pins, f"constraints.txt does not pin {name}: run `python3 tasks.py lock`"
        assert req.specifier.contains(pins[name], prereleases=True), f"{name}=={pins[name]} is outside {req}"


def test_oldest_constraints_pin_the_floors_of_pyproject_ranges():
    """constraints-oldest.txt holds the lowest versions pyproject.toml declares, so the oldest check tests them."""
    text = (ROOT / "constraints-oldest.txt").read_text()
    header = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    assert "python3 tasks.py lock --oldest" in header and "python3 tasks.py test --oldest" in header
    pins = _constraints("constraints-oldest.txt")
    assert "course-utils" not in pins
    project = _pyproject()["project"]
    for spec in project["dependencies"]:
        req = Requirement(spec)
        name = canonicalize_name(req.name)
        floors = [s.version for s in req.specifier if s.operator == ">="]
        assert name in pins, f"constraints-oldest.txt does not pin {name}: run `python3 tasks.py lock --oldest`"
        assert len(floors) == 1, f"{spec}: a runtime dependency needs one lower bound (the oldest version tested)"
        assert Version(pins[name]) == Version(floors[0]), \
            f"{name}=={pins[name]} is not the floor of {spec}: run `python3 tasks.py lock --oldest`"
    for spec in project["optional-dependencies"]["dev"]:
        req = Requirement(spec)
        if req.marker and not req.marker.evaluate():
            continue
        name = canonicalize_name(req.name)
        assert req.specifier.contains(pins[name], prereleases=True), f"{name}=={pins[name]} is outside {req}"
    for name in ("tensorflow", "keras", "tf-keras", "tensorboard"):
        assert name in pins
    same_minor = {Version(pins[n]).release[:2] for n in ("tensorflow", "tf-keras", "tensorboard")}
    assert len(same_minor) == 1, "tf-keras and tensorboard share tensorflow's minor version"


def test_oldest_venv_is_not_committed():
    assert ".venv-oldest/" in (ROOT / ".gitignore").read_text().splitlines()


def test_venv_has_the_locked_versions_of_the_dependencies():
    pins = _constraints(VENV_CONSTRAINTS)
    project = _pyproject()["project"]
    for spec in project["dependencies"] + project["optional-dependencies"]["dev"]:
        req = Requirement(spec)
        if req.marker and not req.marker.evaluate():
            continue
        try:
            installed = version(req.name)
        except PackageNotFoundError:
            pytest.fail(f"{req.name} is not installed: run `python3 tasks.py setup`")
        assert installed == pins[canonicalize_name(req.name)], \
            f"{req.name} {installed} differs from {VENV_CONSTRAINTS}: `python3 tasks.py setup` or `tasks.py lock`"


@pytest.mark.notebook
def test_course_runner_in_smoke_mode_prints_progress_and_strips_run_metadata(tmp_path, notebook_data_env):
    """...and leaves README alone, and says so when no notebook matches."""
    readme = (ROOT / "README.md").read_bytes()
    env = dict(os.environ, **notebook_data_env)
    proc = subprocess.run([sys.executable, "-m", "tools.run_notebooks", "--smoke",
                           "--output-dir", str(tmp_path), "01_"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[1/1] notebooks/01_strategies_overview.ipynb ..." in proc.stdout  # a progress line per notebook
    assert re.search(r"\[1/1\] notebooks/01_strategies_overview.ipynb done in \d+ s; longest code cells: \d+ \d+ s, ",
                     proc.stdout)
    times = json.loads((tmp_path / "course-cell-times.json").read_text())["notebooks"]["01"]
    assert isinstance(times["wall_time_s"], int) and times["cells"][0][0] >= 1  # code cells, longest first
    assert [t for _, t, _ in times["cells"]] == sorted((t for _, t, _ in times["cells"]), reverse=True)
    out = next(tmp_path.glob("notebooks/01_*.ipynb"))
    nb = nbformat.read(out, as_version=4)
    assert "papermill" not in nb.metadata and isinstance(nb.metadata["course"]["wall_time_s"], int)
    from course_utils import machine
    assert nb.metadata["course"]["machine"] == machine.describe() and f"on {machine.describe()}\n" in proc.stdout
    assert not [c for c in nb.cells if {"papermill", "execution"} & set(c.metadata)]
    assert all(c.execution_count for c in nb.cells if c.cell_type == "code")
    assert (ROOT / "README.md").read_bytes() == readme
    missing = subprocess.run([sys.executable, "-m", "tools.run_notebooks", "no-such-notebook"],
                             cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "No notebook matches" in missing.stderr


# --- the student's JupyterLab ---------------------------------------------------------------------------

def test_lab_command_opens_notebook_01_without_instructor_tools_or_news(monkeypatch):
    monkeypatch.delenv("JUPYTER_CONFIG_PATH", raising=False)
    command, env = tasks.lab_command(["--no-browser"])
    assert command[:4] == [tasks.PY, "-m", "jupyter", "lab"] and command[-1] == "--no-browser"
    assert f"--LabApp.default_url=/lab/tree/{tasks.FIRST_NOTEBOOK}" in command
    assert (ROOT / tasks.FIRST_NOTEBOOK).exists()
    assert env["JUPYTER_CONFIG_PATH"] == str(ROOT / "tools" / "jupyter" / "student")
    instructor_command, instructor_env = tasks.lab_command(["--instructor"])
    assert "--instructor" not in instructor_command and "JUPYTER_CONFIG_PATH" not in instructor_env
    assert ("--allow-root" in command) == (os.geteuid() == 0)


@pytest.mark.versionless  # the lab runs from .venv (tasks.PY), whichever venv runs the test
def test_the_student_lab_serves_no_nbgrader_and_no_news_prompt(tmp_path):
    """A real `jupyter lab` started as tasks.py starts it: nbgrader's pages are not served and its lab
    extension is disabled, the news setting defaults to "false" (no pop-up), / opens notebook 01."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command, env = tasks.lab_command(["--no-browser", f"--port={port}", "--IdentityProvider.token=course"])
    env["JUPYTER_RUNTIME_DIR"] = str(tmp_path)
    log = open(tmp_path / "lab.log", "w")
    lab = subprocess.Popen([str(c) for c in command], cwd=ROOT, env=env, stdout=log, stderr=log,
                           start_new_session=True)

    def get(path):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}{'&' if '?' in path else '?'}token=course",
                                    timeout=10) as response:
            return response.status, response.geturl(), response.read().decode()

    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                get("/api/status")
                break
            except (urllib.error.URLError, ConnectionError):
                assert lab.poll() is None and time.monotonic() < deadline, (tmp_path / "lab.log").read_text()
                time.sleep(0.5)
        status, url, page = get("/")
        assert url.split("?")[0].endswith(f"/lab/tree/{tasks.FIRST_NOTEBOOK}"), url
        assert '"disabledExtensions": ["@jupyter/nbgrader"]' in page
        _, _, notification = get("/lab/api/settings/@jupyterlab/apputils-extension:notification")
        schema = json.loads(notification)["schema"]["properties"]
        assert schema["fetchNews"]["default"] == "false" and schema["checkForUpdates"]["default"] is False
        with pytest.raises(urllib.error.HTTPError, match="404"):
            get("/formgrader")
    finally:
        tasks.stop_group(lab, grace_s=15)
        log.close()


def test_a_background_start_with_ctrl_c_ignored_still_passes_interrupts_on():
    """`python3 tasks.py test &` in a non-interactive shell starts with SIGINT ignored: tasks.py handles it again,
    so that the processes it starts (which would inherit an ignored SIGINT) get Python's KeyboardInterrupt."""
    child = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    code = ("import signal, subprocess, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); import tasks; "
            f"before = subprocess.run([sys.executable, '-c', {child!r}], capture_output=True, text=True).stdout; "
            "tasks.interrupts_back(); "
            f"after = subprocess.run([sys.executable, '-c', {child!r}], capture_output=True, text=True).stdout; "
            "print(before.strip(), after.strip())")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["False", "True"], done.stderr
