#!/usr/bin/env python3
"""The course's commands. Needs only Python 3.10+ to start; it builds everything else.

    python3 tasks.py course   # set up, then execute every notebook (outputs written in place)
    python3 tasks.py test     # set up, then run the whole test suite (lint, unit tests, nbval, the
                              # browser test), the oldest-versions check and Colab simulated, the lighter
                              # checks beside the unit tests and nbval (--newest: the suite, one phase
                              # after another; --oldest, --colab, --browser: only that check)
    python3 tasks.py lab      # set up, then open JupyterLab for students, on notebook 01
                              # (--instructor: with nbgrader's menus; other arguments go to jupyter lab)
    python3 tasks.py lint     # set up, then ruff check (pyproject's [tool.ruff]) and the notebook rules
                              # (tools/nblint.py); --fix repairs what they can
    python3 tasks.py stress   # set up, then run the tests that race the machine N times under load
                              # (--rounds N, default 3; --load K busy loops, default 2; long)
    python3 tasks.py grade DIR  # set up, then autograde the students' exercise notebooks in DIR with
                              # nbgrader: a table of checks passed per student, and DIR/grades.csv
                              # (--smoke: in CI's smoke setting; --assignment, --csv, --timeout)
    python3 tasks.py site     # set up, then build the course's website into build/site/ from the committed
                              # notebooks, executing nothing (tools/site.py; --serve: then serve it locally)
    python3 tasks.py setup    # only set up: .venv, dependencies, offline data
    python3 tasks.py links    # point every Colab badge and install cell at pyproject's
                              # [project.urls] Repository (--check: only list disagreements)
    python3 tasks.py lock     # resolve constraints.txt with uv for every platform and Python claimed,
                              # keeping the versions it pins where they still resolve (--upgrade: the
                              # newest; --oldest: constraints-oldest.txt, every runtime floor)

Set-up creates ``.venv`` beside this file, installs ``course_utils`` (editable)
with its ``dev`` extra, pinned to the exact versions in ``constraints.txt`` (by uv, pip where uv
cannot), and -- where ``apt-get`` exists and we are root -- installs Debian's
``dataset-fashion-mnist`` for offline real data, ``slurm-wlm`` and ``munge`` for a local Slurm
cluster, ``chromium`` for the browser test and ``iproute2`` for notebook 05b's links. It
re-installs only when ``pyproject.toml`` or ``constraints.txt`` changed since the last set-up.

The oldest-versions check builds a second environment, ``.venv-oldest``, the same way
from ``constraints-oldest.txt`` (every runtime dependency at the floor of its range in
``pyproject.toml``) and runs the unit tests and one notebook there. Colab simulated
(``tools/colab_sim.py``) builds a third, ``build/colab/venv``, from ``colab-runtime.txt``.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent


def venv_python(venv_dir: Path) -> Path:
    return venv_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


STAMP_NAME = ".course-installed"
VENV = ROOT / ".venv"
PY = venv_python(VENV)
STAMP = VENV / STAMP_NAME
CONSTRAINTS = ROOT / "constraints.txt"
SETUP_INPUTS = ("pyproject.toml", "constraints.txt")  # a change to either re-installs
# The oldest-versions check: its own venv, pinned to the floors of pyproject's ranges.
VENV_OLDEST = ROOT / ".venv-oldest"
PY_OLDEST = venv_python(VENV_OLDEST)
CONSTRAINTS_OLDEST = ROOT / "constraints-oldest.txt"
OLDEST_INPUTS = ("pyproject.toml", "constraints-oldest.txt")
# What runs there: the unit tests (tests marked `notebook` execute notebooks: slow), and one notebook.
OLDEST_SMOKE = "tests/test_notebooks.py::test_runs_in_smoke_setting[notebooks/01_strategies_overview.ipynb]"
FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")
SLURM_COMMANDS = ("sinfo", "slurmctld", "munged")  # slurm-wlm and munge: course_utils.slurm's local cluster
CHROMIUM_COMMANDS = ("chromium", "chromium-browser")  # tests/test_browser.py (Playwright cannot download one here)
NETLAB_COMMANDS = ("ip", "tc")  # iproute2: course_utils.netlab's network namespaces and rate limits
KERNEL_NAME = "python3"


STARTED = time.monotonic()


def say(msg: str) -> None:
    """A line of this command's own, with the seconds since it started: where the time of a long run went."""
    print(f"[tasks +{time.monotonic() - STARTED:.0f} s] {msg}", flush=True)


def run(cmd: list[str], **kw) -> None:
    subprocess.run([str(c) for c in cmd], check=True, **kw)


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


APT_FAILED = ROOT / "build" / "apt-failed.txt"  # installs that failed here: not tried again by every command


_APT = threading.Lock()  # one apt-get at a time: setup's packages install beside the venv, which may need one too


def _apt_install(*packages: str) -> bool:
    """Install Debian packages when we can (root + apt-get); quietly skip otherwise. A failure (offline, an
    unknown package) is recorded in ``APT_FAILED`` and not retried until that line is deleted."""
    with _APT:
        return _apt_install_now(*packages)


def _apt_install_now(*packages: str) -> bool:
    if not (_is_root() and shutil.which("apt-get")):
        return False
    wanted = " ".join(packages)
    if APT_FAILED.exists() and wanted in APT_FAILED.read_text().splitlines():
        say(f"not retrying `apt-get install {wanted}`, which failed here before (delete {APT_FAILED} to retry)")
        return False
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": env}
    if subprocess.run(["apt-get", "install", "-y", "-q", *packages], **quiet).returncode == 0:
        return True
    subprocess.run(["apt-get", "update", "-q"], **quiet)
    if subprocess.run(["apt-get", "install", "-y", "-q", *packages], **quiet).returncode == 0:
        return True
    APT_FAILED.parent.mkdir(parents=True, exist_ok=True)
    with APT_FAILED.open("a") as failed:
        failed.write(wanted + "\n")
    return False


def make_venv(venv_dir: Path = VENV) -> None:
    if venv_python(venv_dir).exists():
        return
    say(f"creating {venv_dir}")
    try:
        venv.EnvBuilder(with_pip=True).create(venv_dir)
    except (subprocess.CalledProcessError, OSError):
        shutil.rmtree(venv_dir, ignore_errors=True)
        # Debian's Python ships venv's pip bootstrap separately.
        minor = f"python{sys.version_info.major}.{sys.version_info.minor}-venv"
        if not _apt_install(minor, "python3-venv"):
            sys.exit(f"Could not create a virtual environment. Install {minor} "
                     f"(sudo apt-get install {minor}) and run this command again.")
        venv.EnvBuilder(with_pip=True).create(venv_dir)


def setup_digest(root: Path = ROOT, inputs: tuple[str, ...] = SETUP_INPUTS) -> str:
    """What the set-up stamp records: the bytes of pyproject.toml and the constraints file."""
    digest = hashlib.sha256()
    for name in inputs:
        path = root / name
        digest.update(name.encode() + b"\0" + (path.read_bytes() if path.exists() else b"(missing)") + b"\0")
    return digest.hexdigest()


def uv_pin(constraints: Path) -> str:
    """The ``uv==X`` line of a constraints file (uv is a dev tool, pinned there), or ``uv``."""
    found = re.search(r"^uv==[^\s;]+", constraints.read_text() if constraints.exists() else "", re.M)
    return found.group(0) if found else "uv"


def pip_install(py: Path, args: list, constraints: Path, capture: bool = False,
                compile_bytecode: bool = True) -> subprocess.CompletedProcess:
    """``pip install -q ARGS`` into the venv of ``py``, done by uv where it installs (uv, pinned as in
    ``constraints``, downloads and unpacks in parallel: ~15 s instead of ~50 s for the course's venv).
    uv reads no pip.conf: where it fails (a private index, a platform without its wheel), pip does it.
    ``compile_bytecode=False``: Python compiles each module when first imported instead (uv only)."""
    quiet = {"capture_output": True, "text": True}
    bootstrap = [str(c) for c in [py, "-m", "pip", "install", "-q", uv_pin(constraints)]]
    if subprocess.run(bootstrap, **quiet).returncode == 0:
        # --compile-bytecode: as pip does; without .pyc files every process would compile TensorFlow's
        # Python again where PYTHONDONTWRITEBYTECODE is set (3 s more per `import tensorflow` here).
        done = subprocess.run([str(c) for c in [py, "-m", "uv", "pip", "install", "--python", py, "-q",
                                                *["--compile-bytecode"] * compile_bytecode, *args]],
                              **(quiet if capture else {}))
        if done.returncode == 0:
            return done
        say("uv could not install it" + ("" if capture else " (its message is above)") + "; pip tries instead")
    return subprocess.run([str(c) for c in [py, "-m", "pip", "install", "-q", *args]], **(quiet if capture else {}))


def _install_course() -> None:
    """``pip install -e .[dev]``, pinned by constraints.txt where its versions install here."""
    install = ["-e", f"{ROOT}[dev]"]
    if not CONSTRAINTS.exists():
        say("no constraints.txt: installing the newest versions pyproject.toml allows")
        _check(pip_install(PY, install, CONSTRAINTS))
        return
    pinned = pip_install(PY, [*install, "-c", CONSTRAINTS], CONSTRAINTS, capture=True)
    if pinned.returncode != 0:
        # constraints.txt is resolved for every platform and Python pyproject.toml claims (see its header),
        # but a pinned version may still lack a wheel for this machine. The course runs on other versions too:
        # install them, and say so loudly, for results may then differ from the committed outputs.
        said = ((pinned.stdout or "") + (pinned.stderr or "")).strip().splitlines()
        tail = "\n".join(f"!!!   {line}" for line in said[-8:])
        print(f"!!! WARNING: the versions pinned in {CONSTRAINTS.name} do not install on this machine "
              f"({sys.platform}, Python {sys.version.split()[0]}). The installer said:\n{tail}\n"
              "!!! Installing the newest versions pyproject.toml allows instead: outputs may differ from the "
              "committed ones. Please report this (with the message above).", file=sys.stderr, flush=True)
        _check(pip_install(PY, install, CONSTRAINTS))


def _check(done: subprocess.CompletedProcess) -> None:
    if done.returncode != 0:
        sys.exit(f"installing failed (exit {done.returncode}): the installer's message is above")


def install_oldest() -> None:
    """The oldest-versions install: exactly the pins, no fallback (other versions would prove nothing)."""
    # Not compiled ahead: only the tests use this venv, with bytecode written where first imported (_venv_env), so
    # the modules they import are compiled once; compiling all 12,000 cost 17 CPU-s beside nbval in CI.
    _check(pip_install(PY_OLDEST, ["-e", f"{ROOT}[dev]", "-c", CONSTRAINTS_OLDEST], CONSTRAINTS_OLDEST,
                       compile_bytecode=False))


def _install_kernel(py: Path) -> None:
    """The kernel named "python3" inside the venv, so notebooks run there when its bin/ is first on PATH."""
    run([py, "-m", "ipykernel", "install", "--sys-prefix", "--name", KERNEL_NAME,
         "--display-name", "Python 3 (distributed-training-course)"],
        stdout=subprocess.DEVNULL)


def _provision(venv_dir: Path, inputs: tuple[str, ...], install, what: str) -> None:
    """Create ``venv_dir`` and install into it, unless its stamp says ``inputs`` are unchanged."""
    make_venv(venv_dir)
    stamp = venv_dir / STAMP_NAME
    digest = setup_digest(ROOT, inputs)
    if stamp.exists() and stamp.read_text() == digest:
        return
    say(f"installing {what} into {venv_dir.name} (first time: a few minutes)")
    py = venv_python(venv_dir)
    install()
    _install_kernel(py)
    stamp.write_text(digest)


def setup() -> None:
    """The course's venv, and the Debian packages the tests and notebooks use, side by side: on a fresh machine
    both wait on downloads and unpacking (65 s one after the other here, the packages 30 s of it)."""
    debian = threading.Thread(target=_debian_packages, name="apt-get")
    debian.start()
    try:
        _provision(VENV, SETUP_INPUTS, _install_course, "course_utils and its dependencies")
    finally:
        debian.join()


def _debian_packages() -> None:
    if not FASHION_MNIST.exists():
        if _apt_install("dataset-fashion-mnist"):
            say("installed Debian's dataset-fashion-mnist (offline Fashion-MNIST)")
        else:
            say("offline Fashion-MNIST not installed (needs root + apt-get); notebooks will use TFDS")
    if not all(shutil.which(c) or shutil.which(c, path="/usr/sbin:/sbin") for c in SLURM_COMMANDS):
        if _apt_install("slurm-wlm", "munge"):
            say("installed Debian's slurm-wlm and munge (a local Slurm cluster for the Slurm tests and notebook)")
        else:
            say("Slurm not installed (needs root + apt-get): the Slurm tests (outside CI) and notebook section skip")
    if not any(shutil.which(c) for c in CHROMIUM_COMMANDS):
        if _apt_install("chromium"):
            say("installed Debian's chromium (the browser test drives JupyterLab in it)")
        else:
            say("chromium not installed (needs root + apt-get): the browser test skips")
    if not all(shutil.which(c) or shutil.which(c, path="/usr/sbin:/sbin") for c in NETLAB_COMMANDS):
        if _apt_install("iproute2"):
            say("installed Debian's iproute2 (network namespaces and rate limits for notebook 05b)")
        else:
            say("iproute2 not installed (needs root + apt-get): netlab's tests (outside CI) and notebook 05b's "
                "measured sections skip")
    if not shutil.which("shellcheck"):
        if _apt_install("shellcheck"):
            say("installed Debian's shellcheck (the tests lint cluster/slurm/'s batch scripts with it)")
        else:
            say("shellcheck not installed (needs root + apt-get): the batch scripts' shellcheck test skips")


def setup_oldest() -> None:
    """Like :func:`setup`, for ``.venv-oldest`` and ``constraints-oldest.txt`` (its own stamp)."""
    if not CONSTRAINTS_OLDEST.exists():
        sys.exit(f"{CONSTRAINTS_OLDEST.name} is missing: run `python3 tasks.py lock --oldest`")
    _provision(VENV_OLDEST, OLDEST_INPUTS, install_oldest,
               f"the oldest supported versions ({CONSTRAINTS_OLDEST.name})")


def _venv_env(venv_dir: Path = VENV, offline: bool = False) -> dict[str, str]:
    """This environment with ``venv_dir`` first on PATH; ``offline``: COURSE_OFFLINE=1 (no test needs the network)."""
    env = dict(os.environ, **({"COURSE_OFFLINE": "1"} if offline else {}))
    # Bytecode cached in __pycache__ (git ignores it): where PYTHONDONTWRITEBYTECODE is set, every pytest process
    # would rewrite and compile every test module again (3 CPU-s of the 10 s a collection of tests/ takes here).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PATH"] = f"{venv_python(venv_dir).parent}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv_dir)
    return env


def course(args: list[str]) -> int:
    """Execute the notebooks and solutions in place, then generate the exercises from the solutions."""
    setup()
    ran = subprocess.run([PY, "-m", "tools.run_notebooks", *args], cwd=ROOT, env=_venv_env()).returncode
    return ran or subprocess.run([PY, "-m", "tools.make_exercises"], cwd=ROOT, env=_venv_env()).returncode


# The unit tests three at a time (THREE_AT_A_TIME, pytest-xdist): most wait on processes they start; two at a time
# (and the checks beside them) left 215 of the phase's 760 core-seconds idle in CI. Each file stays on one
# worker; tests/machine_wide.py keeps the tests that look at every process on the machine (Slurm, network
# namespaces) on one worker, one at a time, and hands out the longest files first (xdist would otherwise
# reorder them by their number of tests).
BY_FILE = ["--dist", "loadfile", "--no-loadscope-reorder"]  # a file's tests on one worker; files in the order collected
TWO_AT_A_TIME, THREE_AT_A_TIME = ["-n", "2", *BY_FILE], ["-n", "3", *BY_FILE]


def oldest_test_commands(args: list[str]) -> list[list]:
    """The oldest-versions check: the unit tests, then one notebook in the smoke setting."""
    pytest = [PY_OLDEST, "-m", "pytest", "-p", "no:cacheprovider"]
    return [[*pytest, *TWO_AT_A_TIME, "-m", "not notebook and not versionless and not browser", "tests", *args],
            [*pytest, OLDEST_SMOKE, *args]]


def oldest_check(args: list[str]) -> int:
    setup_oldest()
    env = _venv_env(VENV_OLDEST, offline=True)
    env["COURSE_CONSTRAINTS"] = CONSTRAINTS_OLDEST.name  # what the tests compare the venv with
    say(f"oldest supported versions ({CONSTRAINTS_OLDEST.name}): unit tests, then {OLDEST_SMOKE.split('[')[1][:-1]}")
    for cmd in oldest_test_commands(args):
        rc = subprocess.run([str(c) for c in cmd], cwd=ROOT, env=env).returncode
        if rc != 0:
            return rc
    return 0


COLAB_COMMAND = [str(PY), "-m", "tools.colab_sim"]  # tools/colab_sim.py, in the foreground or beside the tests
COLAB_SAYS = ("Colab, simulated: Colab's preinstalled versions (colab-runtime.txt), the install cell as written "
              "(pointed at this checkout), notebooks 01-03 in the smoke setting")


def colab_check() -> int:
    """Colab, simulated (``tools/colab_sim.py``): notebooks 01-03's install cell and cells on Colab's versions."""
    setup()
    say(COLAB_SAYS)
    return subprocess.run(COLAB_COMMAND, cwd=ROOT, env=_venv_env()).returncode


def test(args: list[str]) -> int:
    """Every check: ``--newest`` (lint, unit tests, nbval, browser, one after another), ``--oldest``,
    ``--colab`` or ``--browser`` alone; with none of them, all, side by side (``side_by_side``). Other
    arguments go to pytest (the unit tests'; for ``--oldest``, to both of its runs)."""
    if "--oldest" in args:
        return oldest_check([a for a in args if a != "--oldest"])
    if "--colab" in args:
        return colab_check()
    if "--browser" in args:
        setup()
        return browser_tests(_venv_env(offline=True))
    if "--newest" in args:
        return suite([a for a in args if a != "--newest"])
    return side_by_side(args)


TEST_LOGS = ROOT / "build" / "test-logs"  # the output of the checks that run beside the others, unit.xml
LEFTOVERS_BEFORE = ROOT / "build" / "leftovers-before.txt"


def set_up_and_lint() -> bool:
    """Set up, then lint: a finding fails the tests before they start."""
    setup()
    return ruff([]) == 0


def side_by_side(args: list[str]) -> int:
    """Lint, then the unit tests, then nbval, with the lighter checks beside them: most of each phase waits
    on processes it started, and leaves a core idle about half the time. Colab simulated and the browser
    tests run beside the unit tests, the oldest-versions check beside nbval (it starts no cluster or
    network, which nbval's notebooks do). Each runs in a process group of its own, its output in
    build/test-logs/ and printed when it ends; all are stopped however the run ends. Last, nothing the
    course starts may be left on the machine (``tools/leftovers.py``)."""
    if not set_up_and_lint():
        return 1
    if subprocess.run([PY, "-m", "tools.leftovers", "--save", LEFTOVERS_BEFORE], cwd=ROOT, env=_venv_env()).returncode:
        return 1  # a killed run's network namespaces, which a notebook would stop on (it says how to remove them)
    beside: dict[str, subprocess.Popen] = {}
    try:
        beside[COLAB_SAYS] = start_beside("colab", COLAB_COMMAND)
        beside["browser tests"] = start_beside("browser", [sys.executable, ROOT / "tasks.py", "test", "--browser"],
                                               stop=signal.SIGINT)
        env = _venv_env(offline=True)
        rc = unit_tests(args, env)
        if rc == 0:
            # One pytest process (-n 0): beside nbval it has time, and each xdist worker costs ~12 CPU-s of start-up
            # and collection that nbval would wait for.
            beside["oldest supported versions"] = start_beside(
                "oldest", [sys.executable, ROOT / "tasks.py", "test", "--oldest", "-n", "0"], stop=signal.SIGINT)
            rc = nbval(env)
        for name, process in beside.items():
            if rc != 0:
                break
            say(f"{name} (ran beside the tests above; its output, also in {process.course_log}):")
            rc = process.wait()
            print(process.course_log.read_text(), end="", flush=True)
        if rc == 0:
            say("nothing the course started is left on this machine (tools/leftovers.py)")
            rc = subprocess.run([PY, "-m", "tools.leftovers", "--since", LEFTOVERS_BEFORE], cwd=ROOT,
                                env=_venv_env()).returncode
        return rc
    finally:
        for process in beside.values():
            stop_group(process, grace_s=30, sig=process.course_stop)


BESIDE_NICENESS = 10  # the phases' own processes come first; what runs beside them takes the idle core time


def _beside_priority() -> None:
    os.nice(BESIDE_NICENESS)


def start_beside(name: str, command: list, stop: int = signal.SIGTERM) -> subprocess.Popen:
    """``command`` in the background, in a process group of its own, its output to build/test-logs/NAME.log;
    ``stop``: the signal that stops it (``stop_group``). Its pytest sessions leave the leftovers check to
    this run: other phases' clusters come and go meanwhile."""
    TEST_LOGS.mkdir(parents=True, exist_ok=True)
    log_path = TEST_LOGS / f"{name}.log"
    env = {**_venv_env(), "COURSE_LEFTOVERS_CHECKED_BY": "tasks.py"}
    with log_path.open("w") as log:
        process = subprocess.Popen([str(c) for c in command], cwd=ROOT, env=env, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_beside_priority)
    process.course_log, process.course_stop = log_path, stop
    return process


def stop_group(process: subprocess.Popen, grace_s: float = 20, sig: int = signal.SIGTERM) -> None:
    """Stop a process started with ``start_new_session`` and its group: ``sig`` (SIGTERM: colab_sim then
    shuts its kernel down; SIGINT: pytest runs its fixtures' teardowns, which stop their servers), SIGKILL
    after ``grace_s``."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, sig)
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def ruff(args: list[str]) -> int:
    """``ruff check`` over the repository (pyproject's ``[tool.ruff]``), then the notebooks' rules
    (``tools/nblint.py``); ``--fix`` repairs what each can. Non-zero when either finds something left."""
    if args not in ([], ["--fix"]):
        print("usage: python3 tasks.py lint [--fix]", file=sys.stderr)
        return 2
    say("lint: ruff check" + (" --fix" if args else ""))
    code = subprocess.run([PY, "-m", "ruff", "check", *args, ROOT], cwd=ROOT).returncode
    say("lint: notebook rules (tools/nblint.py)" + (" --fix" if args else ""))
    notebooks = subprocess.run([PY, "-m", "tools.nblint", *args], cwd=ROOT).returncode
    return code or notebooks


def lint(args: list[str]) -> int:
    setup()
    return ruff(args)


# nbval's smoke run hands out the longest notebooks first, so that no worker is left alone with a long one at
# the end (seconds each took three at a time in CI, 2026-11-29: 281, 197, 196, 183, 143, 141, 138, 119, 84, 84,
# 60, 56, 48, 26, 26, 6; course order, the last two long ones among them, left one core idle for 40 s at the end).
# A notebook not listed goes last.
NBVAL_LONGEST_FIRST = ("notebooks/deeper/04_where_the_time_goes.ipynb", "notebooks/05_multi_worker.ipynb",
                       "notebooks/04_single_vs_multi_device.ipynb", "notebooks/deeper/05_multi_worker_inside.ipynb",
                       "notebooks/deeper/08_slurm_checks.ipynb", "notebooks/06_parameter_servers.ipynb",
                       "notebooks/05b_network_links.ipynb", "notebooks/08_slurm.ipynb",
                       "notebooks/deeper/03_loss_scaling_and_loop_speed.ipynb",
                       "notebooks/deeper/05b_network_links_inside.ipynb", "notebooks/03_custom_training_loop.ipynb",
                       "notebooks/deeper/06_parameter_servers_inside.ipynb", "notebooks/02_mirrored_strategy_fit.ipynb",
                       "notebooks/deeper/02_inside_fit.ipynb", "solutions/07_svhn.ipynb",
                       "notebooks/01_strategies_overview.ipynb")


def nbval_order(staged: Path) -> list[Path]:
    """The staged notebooks, the longest first, then any not listed, in course order."""
    rest = sorted(p.relative_to(staged).as_posix() for p in staged.rglob("*.ipynb"))
    order = [name for name in NBVAL_LONGEST_FIRST if name in rest] + [n for n in rest if n not in NBVAL_LONGEST_FIRST]
    return [staged / name for name in order]


def suite(args: list[str]) -> int:
    """Lint, the unit tests, nbval, then the browser tests, one after another."""
    if not set_up_and_lint():
        return 1
    env = _venv_env(offline=True)
    return unit_tests(args, env) or nbval(env) or browser_tests(env)


def unit_tests(args: list[str], env: dict) -> int:
    say("unit tests")
    # Each notebook is executed once: nbval's run below is the smoke run (it fails on any error), so the
    # papermill smoke tests (marker smoke_run, for running pytest directly) are left out here.
    select = [] if "-m" in args else ["-m", "not smoke_run and not browser"]
    # The slowest tests and notebook cells are listed at the end of each run (--durations), and every test's
    # time is in build/test-logs/unit.xml: what to look at first when the suite outgrows its time budget.
    return subprocess.run([PY, "-m", "pytest", "tests", *THREE_AT_A_TIME, "--durations=15",
                           f"--junitxml={TEST_LOGS / 'unit.xml'}", *select, *args], cwd=ROOT, env=env).returncode


def nbval(env: dict) -> int:
    say("nbval: every notebook executed in the smoke setting; checked outputs compared with the committed ones")
    env = dict(env)
    if not FASHION_MNIST.exists() and "COURSE_FASHION_MNIST_DIR" not in env:
        # No offline Fashion-MNIST (not root?): the checked cells do not depend on the data,
        # so small generated IDX files keep the run offline.
        fake = ROOT / "build" / "fake_fashion_mnist"
        run([PY, "-m", "tools.fake_data", fake], cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
        env["COURSE_FASHION_MNIST_DIR"] = str(fake)
        say(f"offline Fashion-MNIST not installed: using generated stand-in files in {fake}")
    staged = ROOT / "build" / "nbval"
    run([PY, "-m", "tools.stage_nbval", staged], cwd=ROOT, env=env)
    # Three notebooks at a time (pytest-xdist, a notebook's cells on one worker: --dist loadfile): each waits
    # on worker processes, barriers and start-ups; two at a time, with the oldest-versions check beside them,
    # left 12 % of the phase's core time idle in CI (2026-11-29). The longest first, so that no worker is left
    # alone with one at the end.
    return subprocess.run(
        [PY, "-m", "pytest", "-p", "no:cacheprovider", *THREE_AT_A_TIME, "--durations=15",
         f"--junitxml={TEST_LOGS / 'nbval.xml'}", "--nbval-lax",
         "--nbval-current-env", "--nbval-sanitize-with", ROOT / "tests" / "nbval_sanitize.cfg", "-o", "testpaths=",
         *nbval_order(staged)], cwd=staged, env=env).returncode


def browser_tests(env: dict) -> int:
    say("browser: JupyterLab (as `tasks.py lab` serves it) in chromium, notebooks run as a student runs them; "
        "then the course's website, built and served (screenshots in build/screenshots/)")
    return subprocess.run([PY, "-m", "pytest", "-p", "no:cacheprovider", "-m", "browser", "tests/test_browser.py",
                           "tests/test_site.py"], cwd=ROOT, env=env).returncode


def grade(args: list[str]) -> int:
    """Autograde submitted exercise notebooks (``tools/grade.py``)."""
    setup()
    return subprocess.run([PY, "-m", "tools.grade", *args], cwd=ROOT, env=_venv_env()).returncode


def stress(args: list[str]) -> int:
    """The multi-process tests and the smoke runs of notebooks 05, 05b, 06 and 08, ``--rounds`` times
    while ``--load`` busy loops keep the cores busy (``tools/stress.py``); failures per test."""
    setup()
    return subprocess.run([PY, "-m", "tools.stress", *args], cwd=ROOT, env=_venv_env(offline=True)).returncode


JUPYTER = ROOT / "tools" / "jupyter"  # the course's JupyterLab settings (see lab_command)
FIRST_NOTEBOOK = "notebooks/01_strategies_overview.ipynb"


def lab_command(args: list[str]) -> tuple[list, dict]:
    """``jupyter lab`` as students get it, and its environment: opened on the first notebook (file browser
    in ``notebooks/``), no news pop-up or update check (``tools/jupyter/settings/overrides.json``), and no
    nbgrader menu, sidebar or server pages (``tools/jupyter/student``: instructor tools, for
    ``--instructor``). Other arguments go to ``jupyter lab``."""
    instructor = "--instructor" in args
    args = [a for a in args if a != "--instructor"]
    env = _venv_env()
    if not instructor:
        env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(
            [str(JUPYTER / "student"), *filter(None, [os.environ.get("JUPYTER_CONFIG_PATH")])])
    command = [PY, "-m", "jupyter", "lab", f"--LabApp.app_settings_dir={JUPYTER / 'settings'}",
               f"--ServerApp.root_dir={ROOT}"]
    if not any(a.startswith("--LabApp.default_url") or a.startswith("--ServerApp.default_url") for a in args):
        command.append(f"--LabApp.default_url=/lab/tree/{FIRST_NOTEBOOK}")
    if hasattr(os, "geteuid") and os.geteuid() == 0 and "--allow-root" not in args:
        command.append("--allow-root")  # containers and Colab-like machines run as root
    return [*command, *args], env


def lab(args: list[str]) -> int:
    setup()
    command, env = lab_command(args)
    return subprocess.run([str(c) for c in command], cwd=ROOT, env=env).returncode


def site(args: list[str]) -> int:
    """The course as a static website in build/site/, built from the committed notebooks without running them
    (``tools/site.py``: Sphinx with MyST-NB, offline, every warning an error); ``--serve``: then serve it."""
    setup()
    return subprocess.run([PY, "-m", "tools.site", *args], cwd=ROOT, env=_venv_env()).returncode


def links(args: list[str]) -> int:
    setup()
    return subprocess.run([PY, "-m", "tools.links", *args], cwd=ROOT, env=_venv_env()).returncode


LOCK_HEADER = """\
# constraints.txt -- the exact versions that produced the committed notebook outputs, resolved by
# `uv pip compile` from pyproject.toml (the dev extra included) for every platform and every Python
# pyproject.toml claims ({python}): a line with a marker holds where its marker does.
# `python3 tasks.py setup` (so also course, test, lab) installs `-e .[dev] -c constraints.txt`.
# Regenerate: `python3 tasks.py lock` (keeps every version that still resolves; after a range changed in
# pyproject.toml), `python3 tasks.py lock --upgrade` (the newest versions the ranges allow). Then re-run
# `python3 tasks.py course`. This file only pins versions; it never adds a package.
"""

OLDEST_HEADER = """\
# constraints-oldest.txt -- the oldest versions the course supports, resolved by `uv pip compile
# --resolution lowest-direct` from pyproject.toml ({python}): every runtime dependency at the floor of its
# range (a test checks it), the dev tools at their versions in constraints.txt, and what the packages
# pull in at the newest versions that resolve with them.
# `python3 tasks.py test` (after the suite) and `python3 tasks.py test --oldest` install
# `-e .[dev] -c constraints-oldest.txt` into .venv-oldest and run the unit tests and one notebook there.
# Regenerate after changing a floor in pyproject.toml: `python3 tasks.py lock --oldest`.
"""


def _pyproject() -> dict:
    try:
        import tomllib  # noqa: PLC0415 (only `lock` reads pyproject.toml)
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # noqa: PLC0415
        except ModuleNotFoundError:
            sys.exit("`python3 tasks.py lock` reads pyproject.toml: run it with Python 3.11+")
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def lowest_python(requires: str) -> str:
    """The lowest Python a ``requires-python`` range allows (``">=3.10,<3.14"`` -> ``"3.10"``)."""
    found = re.search(r">=\s*(\d+\.\d+)", requires)
    if not found:
        sys.exit(f"pyproject.toml's requires-python {requires!r} has no lower bound (>=3.X): add one")
    return found.group(1)


def compile_command(out: Path, python: str, *extra) -> list:
    """``uv pip compile`` of pyproject.toml with the dev extra, for every platform and Python >= ``python``."""
    return [PY, "-m", "uv", "pip", "compile", ROOT / "pyproject.toml", "--extra", "dev", "--universal",
            "--python-version", python, "--no-header", "--no-annotate", "--quiet", "-o", out, *extra]


def dev_tool_pins(constraints: str, dev: list[str]) -> str:
    """The lines of ``constraints`` that pin a package named in the ``dev`` extra (markers kept)."""
    names = {re.split(r"[\s<>=!~;\[]", spec, maxsplit=1)[0].lower().replace("_", "-") for spec in dev}
    return "".join(line + "\n" for line in constraints.splitlines()
                   if line and not line.startswith("#")
                   and re.split(r"[\s=;]", line, maxsplit=1)[0].lower().replace("_", "-") in names)


def _resolve(target: Path, header: str, *extra, preferences: Path | None = None) -> int:
    """Resolve into ``target`` (via a temporary file, so a failure leaves it as it was); 0 on success."""
    project = _pyproject()["project"]
    python = lowest_python(project["requires-python"])
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / target.name
        if preferences is not None and preferences.exists():
            shutil.copy(preferences, out)  # uv keeps the versions already in the output file where it can
        done = subprocess.run([str(c) for c in compile_command(out, python, *extra)], cwd=ROOT)
        if done.returncode != 0:
            say(f"uv could not resolve {target.name}; it is unchanged (uv's message is above)")
            return done.returncode
        body = out.read_text()
    claimed = f"Python {project['requires-python']}, Linux, macOS and Windows"
    target.write_text(header.format(python=claimed) + body)
    pins = sum(1 for line in body.splitlines() if line and not line.startswith("#"))
    say(f"wrote {target.name}: {pins} pins ({claimed})")
    return 0


def lock(args: list[str]) -> int:
    if args not in ([], ["--upgrade"], ["--oldest"]):
        print("usage: python3 tasks.py lock [--upgrade | --oldest]", file=sys.stderr)
        return 2
    setup()  # uv comes with the dev extra
    if args == ["--oldest"]:
        dev = _pyproject()["project"]["optional-dependencies"]["dev"]
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as pins:
            pins.write(dev_tool_pins(CONSTRAINTS.read_text(), dev))
        try:
            return _resolve(CONSTRAINTS_OLDEST, OLDEST_HEADER, "--resolution", "lowest-direct", "-c", pins.name)
        finally:
            os.unlink(pins.name)
    if args == ["--upgrade"]:
        return _resolve(CONSTRAINTS, LOCK_HEADER, "--upgrade")
    return _resolve(CONSTRAINTS, LOCK_HEADER, preferences=CONSTRAINTS)


def interrupts_back() -> None:
    """Run as a background job of a non-interactive shell (`python3 tasks.py test &`), this process starts
    with SIGINT ignored, and so would every process it starts (an ignored signal survives exec): no Ctrl-C
    would reach the tests, notebooks and workers, and the tests that interrupt them fail. Handle it again."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def main(argv: list[str]) -> int:
    interrupts_back()
    commands = {"course": course, "test": test, "lab": lab, "links": links, "lock": lock, "stress": stress,
                "lint": lint, "grade": grade, "site": site}
    if not argv or argv[0] not in {*commands, "setup"}:
        print(__doc__)
        return 2
    if argv[0] == "setup":
        setup()
        return 0
    return commands[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
