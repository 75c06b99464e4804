#!/usr/bin/env python3
"""The course's commands. Needs only Python 3.10+ to start; it builds everything else.

    python3 tasks.py course   # set up, then execute every notebook (outputs written in place)
    python3 tasks.py test     # set up, then run the whole test suite
    python3 tasks.py lab      # set up, then open JupyterLab for students
    python3 tasks.py setup    # only set up: .venv, dependencies, offline data
    python3 tasks.py links    # point every Colab badge and install cell at pyproject's
                              # [project.urls] Repository (--check: only list disagreements)
    python3 tasks.py lock     # write constraints.txt from .venv's exact versions
                              # (--upgrade: first install the newest versions pyproject allows)

Set-up creates ``.venv`` beside this file, installs ``course_utils`` (editable)
with its ``dev`` extra, pinned to the exact versions in ``constraints.txt``, and --
where ``apt-get`` exists and we are root -- installs Debian's ``dataset-fashion-mnist``
for offline real data. It re-installs only when ``pyproject.toml`` or
``constraints.txt`` changed since the last set-up.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PY = VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
STAMP = VENV / ".course-installed"
CONSTRAINTS = ROOT / "constraints.txt"
SETUP_INPUTS = ("pyproject.toml", "constraints.txt")  # a change to either re-installs
FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")
KERNEL_NAME = "python3"


def say(msg: str) -> None:
    print(f"[tasks] {msg}", flush=True)


def run(cmd: list[str], **kw) -> None:
    subprocess.run([str(c) for c in cmd], check=True, **kw)


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _apt_install(*packages: str) -> bool:
    """Install Debian packages when we can (root + apt-get); quietly skip otherwise."""
    if not (_is_root() and shutil.which("apt-get")):
        return False
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": env}
    if subprocess.run(["apt-get", "install", "-y", "-q", *packages], **quiet).returncode == 0:
        return True
    subprocess.run(["apt-get", "update", "-q"], **quiet)
    return subprocess.run(["apt-get", "install", "-y", "-q", *packages], **quiet).returncode == 0


def make_venv() -> None:
    if PY.exists():
        return
    say(f"creating {VENV}")
    try:
        venv.EnvBuilder(with_pip=True).create(VENV)
    except (subprocess.CalledProcessError, OSError):
        shutil.rmtree(VENV, ignore_errors=True)
        # Debian's Python ships venv's pip bootstrap separately.
        minor = f"python{sys.version_info.major}.{sys.version_info.minor}-venv"
        if not _apt_install(minor, "python3-venv"):
            sys.exit(f"Could not create a virtual environment. Install {minor} "
                     f"(sudo apt-get install {minor}) and run this command again.")
        venv.EnvBuilder(with_pip=True).create(VENV)


def setup_digest(root: Path = ROOT) -> str:
    """What the set-up stamp records: the bytes of pyproject.toml and constraints.txt."""
    digest = hashlib.sha256()
    for name in SETUP_INPUTS:
        path = root / name
        digest.update(name.encode() + b"\0" + (path.read_bytes() if path.exists() else b"(missing)") + b"\0")
    return digest.hexdigest()


def _install_course() -> None:
    """``pip install -e .[dev]``, pinned by constraints.txt where its versions install here."""
    install = [PY, "-m", "pip", "install", "-q", "-e", f"{ROOT}[dev]"]
    if not CONSTRAINTS.exists():
        say("no constraints.txt: installing the newest versions pyproject.toml allows")
        run(install)
        return
    if subprocess.run([str(c) for c in [*install, "-c", CONSTRAINTS]]).returncode != 0:
        # constraints.txt was frozen on one Python and platform (see its header); elsewhere some
        # pinned version may not exist. The course still runs on the versions pyproject.toml allows.
        say("the versions pinned in constraints.txt do not install here; "
            "installing the newest versions pyproject.toml allows instead")
        run(install)


def setup() -> None:
    make_venv()
    digest = setup_digest()
    if not (STAMP.exists() and STAMP.read_text() == digest):
        say("installing course_utils and its dependencies into .venv (first time: a few minutes)")
        run([PY, "-m", "pip", "install", "-q", "--upgrade", "pip"])
        _install_course()
        run([PY, "-m", "ipykernel", "install", "--sys-prefix", "--name", KERNEL_NAME,
             "--display-name", "Python 3 (distributed-training-course)"],
            stdout=subprocess.DEVNULL)
        STAMP.write_text(digest)
    if not FASHION_MNIST.exists():
        if _apt_install("dataset-fashion-mnist"):
            say("installed Debian's dataset-fashion-mnist (offline Fashion-MNIST)")
        else:
            say("offline Fashion-MNIST not installed (needs root + apt-get); notebooks will use TFDS")


def _venv_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{PY.parent}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(VENV)
    return env


def course(args: list[str]) -> int:
    setup()
    return subprocess.run([PY, ROOT / "tools" / "run_notebooks.py", *args], env=_venv_env()).returncode


def test(args: list[str]) -> int:
    setup()
    env = _venv_env()
    env["COURSE_OFFLINE"] = "1"  # no test ever needs the network
    say("unit tests and papermill smoke runs")
    rc = subprocess.run([PY, "-m", "pytest", "tests", *args], cwd=ROOT, env=env).returncode
    if rc != 0:
        return rc
    say("nbval: checked outputs of the committed notebooks, in the smoke setting")
    if not FASHION_MNIST.exists() and "COURSE_FASHION_MNIST_DIR" not in env:
        # No offline Fashion-MNIST (not root?): the checked cells do not depend on the data,
        # so small generated IDX files keep the run offline.
        fake = ROOT / "build" / "fake_fashion_mnist"
        run([PY, ROOT / "tests" / "fake_data.py", fake], env=env, stdout=subprocess.DEVNULL)
        env["COURSE_FASHION_MNIST_DIR"] = str(fake)
        say(f"offline Fashion-MNIST not installed: using generated stand-in files in {fake}")
    staged = ROOT / "build" / "nbval"
    run([PY, ROOT / "tools" / "stage_nbval.py", staged], env=env)
    return subprocess.run(
        [PY, "-m", "pytest", "-p", "no:cacheprovider", "--nbval-lax", "--nbval-current-env",
         "--nbval-sanitize-with", ROOT / "tests" / "nbval_sanitize.cfg", "-o", "testpaths=",
         staged], cwd=staged, env=env).returncode


def lab(args: list[str]) -> int:
    setup()
    return subprocess.run([PY, "-m", "jupyter", "lab", *args], cwd=ROOT, env=_venv_env()).returncode


def links(args: list[str]) -> int:
    setup()
    return subprocess.run([PY, ROOT / "tools" / "links.py", *args], cwd=ROOT, env=_venv_env()).returncode


LOCK_HEADER = """\
# constraints.txt -- the exact versions, frozen from .venv, that produced the committed
# notebook outputs. Frozen on {python}.
# `python3 tasks.py setup` (so also course, test, lab) installs `-e .[dev] -c constraints.txt`.
# Regenerate: `python3 tasks.py lock` freezes .venv as it is; `python3 tasks.py lock --upgrade`
# first installs the newest versions pyproject.toml allows. Then re-run `python3 tasks.py course`.
# pyproject.toml keeps version ranges, for Colab and pip users; this file only pins versions,
# it never adds a package.
"""


def lock_lines(freeze: str) -> list[str]:
    """``pip freeze`` output less course-utils itself, comments and direct-URL lines."""
    lines = []
    for line in freeze.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "-e ")) or re.match(r"course[-_.]utils\b", line, re.I):
            continue
        if " @ " in line:
            say(f"not pinned (installed from a URL, which a constraint cannot name): {line}")
            continue
        lines.append(line)
    return lines


def lock(args: list[str]) -> int:
    if args not in ([], ["--upgrade"]):
        print("usage: python3 tasks.py lock [--upgrade]", file=sys.stderr)
        return 2
    if args:
        make_venv()
        say("installing the newest versions pyproject.toml allows")
        run([PY, "-m", "pip", "install", "-q", "--upgrade", "--upgrade-strategy", "eager", "-e", f"{ROOT}[dev]"])
    elif not PY.exists():
        setup()
    freeze = subprocess.run([PY, "-m", "pip", "freeze", "--exclude-editable"], check=True,
                            capture_output=True, text=True).stdout
    python = subprocess.run(
        [PY, "-c", "import platform; print(f'Python {platform.python_version()}, "
                   "{platform.system()} {platform.machine()}')"],
        check=True, capture_output=True, text=True).stdout.strip()
    lines = lock_lines(freeze)
    CONSTRAINTS.write_text(LOCK_HEADER.format(python=python) + "\n".join(lines) + "\n")
    say(f"wrote {CONSTRAINTS.name}: {len(lines)} pinned versions ({python})")
    return 0


def main(argv: list[str]) -> int:
    commands = {"course": course, "test": test, "lab": lab, "links": links, "lock": lock}
    if not argv or argv[0] not in {*commands, "setup"}:
        print(__doc__)
        return 2
    if argv[0] == "setup":
        setup()
        return 0
    return commands[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
