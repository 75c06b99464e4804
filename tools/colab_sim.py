"""Colab, simulated: the notebooks' install cell run as written on Colab's preinstalled versions.

A fresh virtual environment gets exactly the packages Colab's runtime has preinstalled that the
course's install touches (``colab-runtime.txt``: Colab's own ``pip freeze``, filtered), and a
stand-in ``google.colab`` module that the kernel imports at start, as Colab's does. Notebooks
01-03, in the smoke setting, then run there with papermill, their install cell pointed at this
checkout (``git+file://``) instead of GitHub. The install needs the package registry, as on Colab.

Checked afterwards, from ``pip list`` before and after the install cell:
- TensorFlow and Keras are still Colab's versions, and no second TensorFlow distribution appeared;
- ``tf-keras`` and ``tensorboard`` have TensorFlow's minor version;
- no other preinstalled package changed, except those in ``EXPECTED_CHANGES`` (each with its reason);
- no process the notebooks started is left running.

    python -m tools.colab_sim            # build/colab/: the venv, the executed notebooks, report.json
    python -m tools.colab_sim --regenerate FREEZE   # rewrite colab-runtime.txt from Colab's pip freeze
    python3 tasks.py test                # runs it beside the unit tests (--colab: only it)
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import papermill
import psutil

from tools.links import INSTALL_MARKER, install_cell
from tools.notebook_params import ROOT, smoke_notebook

RUNTIME = ROOT / "colab-runtime.txt"
BUILD = ROOT / "build" / "colab"
NOTEBOOKS = ("notebooks/01_strategies_overview.ipynb", "notebooks/02_mirrored_strategy_fit.ipynb",
             "notebooks/03_custom_training_loop.ipynb")
KERNEL = "colab-sim"
OTHER_TENSORFLOWS = ("tensorflow-cpu", "tensorflow-gpu", "tensorflow-intel", "tensorflow-macos", "tf-nightly",
                     "tf-nightly-cpu", "intel-tensorflow")
# Preinstalled packages the install cell may change, and why (pyproject.toml's ranges say the same).
EXPECTED_CHANGES = {
    "tensorflow-metadata": "Colab's 1.21.0 is generated for protobuf 6.31 and fails to load its protos under "
                           "Colab's protobuf 5.29 (measured); pyproject.toml bounds it below 1.21",
}
COLAB_MODULE = '''"""A stand-in for Colab's ``google.colab`` (tools/colab_sim.py): Colab's kernel imports it
at start, and the course's install cell takes its Colab path when it is in ``sys.modules``."""
'''


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def runtime_python(runtime: Path = RUNTIME) -> str:
    """Colab's Python version, from the file's ``# python: X.Y`` line."""
    found = re.search(r"^# python: (\d+\.\d+)", runtime.read_text(), re.M)
    if not found:
        raise SystemExit(f"{runtime.name} has no '# python: X.Y' line")
    return found.group(1)


def find_python(version: str) -> tuple[str, bool]:
    """An interpreter of ``version`` (PATH, pyenv's versions, /usr/local), else this one; and whether it matched."""
    candidates = [shutil.which(f"python{version}"), *sorted(glob.glob(os.path.expanduser(
        f"~/.pyenv/versions/{version}*/bin/python{version}"))), f"/usr/local/bin/python{version}"]
    for candidate in (c for c in candidates if c and os.path.exists(c)):
        probe = subprocess.run([candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                               capture_output=True, text=True)
        if probe.returncode == 0 and probe.stdout.strip() == version:
            return candidate, True
    return sys.executable, False


def make_runtime(venv: Path, runtime: Path = RUNTIME) -> Path:
    """A fresh venv with Colab's preinstalled versions and the stand-in ``google.colab``; its python."""
    shutil.rmtree(venv, ignore_errors=True)
    version = runtime_python(runtime)
    python, matched = find_python(version)
    if not matched:
        print(f"!!! Python {version} (Colab's) not found: simulating Colab's packages on Python "
              f"{sys.version.split()[0]} instead", flush=True)
    uv = [sys.executable, "-m", "uv"]
    subprocess.run([*uv, "venv", "-q", "--python", python, venv], check=True)
    py = venv / "bin" / "python"
    # No --compile-bytecode (21 CPU-s, a third of the simulation's own time): the first kernel compiles and caches
    # only what it imports (about 6 CPU-s), provided bytecode may be written (tasks.py lets it).
    subprocess.run([*uv, "pip", "install", "-q", "--python", py, "-r", runtime], check=True)
    site = Path(subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "google" / "colab").mkdir(parents=True, exist_ok=True)
    (site / "google" / "colab" / "__init__.py").write_text(COLAB_MODULE)
    kernel = venv / "share" / "jupyter" / "kernels" / KERNEL
    kernel.mkdir(parents=True)
    (kernel / "kernel.json").write_text(json.dumps({
        "argv": [str(py), "-m", "ipykernel_launcher", "-f", "{connection_file}",
                 "--IPKernelApp.exec_lines=import google.colab"],
        "display_name": "Colab (simulated)", "language": "python"}))
    return py


def installed(py: Path) -> dict[str, str]:
    listed = subprocess.run([py, "-m", "pip", "list", "--format=json"], capture_output=True, text=True, check=True)
    return {norm(p["name"]): p["version"] for p in json.loads(listed.stdout)}


def stage(rel: str, target: Path, url: str) -> Path:
    """The notebook in the smoke setting, its install cell pointed at ``url``, at the same relative path."""
    nb = smoke_notebook(ROOT / rel)
    cells = [cell for cell in nb.cells if cell.cell_type == "code" and INSTALL_MARKER in cell.source]
    if len(cells) != 1:
        raise SystemExit(f"{rel}: expected one install cell ({INSTALL_MARKER!r}), found {len(cells)}")
    cells[0].source = install_cell(url)
    out = target / rel
    out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, out)
    return out


def check(before: dict[str, str], after: dict[str, str]) -> tuple[list[str], list[str]]:
    """What the install cell did to Colab's packages: (failures, notes)."""
    failures, notes = [], []
    for name in ("tensorflow", "keras"):
        if after.get(name) != before.get(name):
            failures.append(f"{name} changed: Colab's {before.get(name)} -> {after.get(name)}")
    failures += [f"a second TensorFlow was installed: {name} {after[name]}"
                 for name in OTHER_TENSORFLOWS if name in after and name not in before]
    minor = ".".join(after.get("tensorflow", "?").split(".")[:2])
    for name in ("tf-keras", "tensorboard"):
        if ".".join(after.get(name, "missing").split(".")[:2]) != minor:
            failures.append(f"{name} {after.get(name, 'missing')} does not have TensorFlow's minor version {minor}")
    if "course-utils" not in after:
        failures.append("course-utils was not installed")
    for name, version in sorted(before.items()):
        if name not in after:
            failures.append(f"a preinstalled package was removed: {name} {version}")
        elif after[name] != version and name not in ("tensorflow", "keras"):
            change = f"{name} {version} -> {after[name]}"
            if name in EXPECTED_CHANGES:
                notes.append(f"changed, as expected: {change} ({EXPECTED_CHANGES[name]})")
            else:
                failures.append(f"a preinstalled package changed: {change}")
    added = sorted(set(after) - set(before))
    notes.append("added: " + (", ".join(f"{name} {after[name]}" for name in added) or "nothing"))
    return failures, notes


def _kernel_environment(venv: Path) -> None:
    """This process's environment as the kernels get it: the simulated venv's kernel found, the course's
    own venv out of the way, data offline (the install cell still reaches the package registry)."""
    os.environ["JUPYTER_PATH"] = str(venv / "share" / "jupyter")
    own = os.environ.pop("VIRTUAL_ENV", None)
    if own:
        os.environ["PATH"] = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                                             if not p.startswith(own))
    os.environ["COURSE_OFFLINE"] = "1"


def _running(process: psutil.Process) -> str:
    """``"pid name"`` while the process runs (not a zombie), else ``""``."""
    try:
        return "" if process.status() == psutil.STATUS_ZOMBIE else f"{process.pid} {process.name()}"
    except psutil.NoSuchProcess:
        return ""


def simulate(notebooks=NOTEBOOKS, build: Path = BUILD) -> int:
    os.environ.pop("PYTHONPATH", None)  # Colab has none; one naming this checkout would find course_utils
    py = make_runtime(build / "venv")
    before = installed(py)
    version = subprocess.run([py, "--version"], capture_output=True, text=True).stdout.split()[1]
    family = ", ".join(f"{name} {before.get(name)}" for name in ("tensorflow", "keras", "tf-keras", "tensorboard"))
    print(f"Colab (simulated): Python {version}, {family}", flush=True)
    _kernel_environment(build / "venv")
    report = {"before": before, "notebooks": {}}
    failures: list[str] = []
    for rel in notebooks:
        staged = stage(rel, build, f"file://{ROOT}")
        try:
            papermill.execute_notebook(str(staged), str(staged), kernel_name=KERNEL, cwd=str(staged.parent),
                                       progress_bar=False)
            report["notebooks"][rel] = "ran"
        except papermill.PapermillExecutionError as err:
            report["notebooks"][rel] = f"failed: {err.ename}: {err.evalue}"
            failures.append(f"{rel} failed in cell {err.exec_count}: {err.ename}: {err.evalue}")
        print(f"  {rel}: {report['notebooks'][rel]}", flush=True)
        if "after" not in report:  # the first notebook's install cell has installed course_utils
            report["after"] = installed(py)
            found, notes = check(before, report["after"])
            failures += found
            print("\n".join(f"  {line}" for line in notes), flush=True)
        if failures:
            break
    time.sleep(1)  # papermill has asked the last kernel to shut down
    left = [name for name in map(_running, psutil.Process().children(recursive=True)) if name]
    if left:
        failures.append(f"processes the notebooks started are still running: {left}")
    report["failures"] = failures
    (build / "report.json").write_text(json.dumps(report, indent=1))
    for line in failures:
        print(f"FAILED: {line}", file=sys.stderr)
    return 1 if failures else 0


def regenerate(freeze: Path, source: str, python: str, runtime: Path = RUNTIME) -> None:
    """``colab-runtime.txt`` from Colab's ``pip freeze``: the versions Colab has of every package the course's
    install can touch (its runtime dependencies and theirs, the kernel, pip)."""
    import tomllib  # noqa: PLC0415 (Python 3.11+; only regenerating needs it)

    with open(ROOT / "pyproject.toml", "rb") as f:
        deps = tomllib.load(f)["project"]["dependencies"]
    names = [re.split(r"[\s<>=!~;\[]", spec, maxsplit=1)[0] for spec in deps] + ["ipykernel", "ipython", "pip"]
    pinned = {norm(line.split("==")[0]): line.strip() for line in freeze.read_text().splitlines()
              if re.match(r"^[A-Za-z0-9_.-]+==\S+$", line.strip())}
    build_dir = BUILD / "regenerate"
    shutil.rmtree(build_dir, ignore_errors=True)
    build_dir.mkdir(parents=True)
    (requested := build_dir / "in.txt").write_text("\n".join(names) + "\n")
    (build_dir / "colab.txt").write_text("\n".join(pinned.values()) + "\n")
    subprocess.run([sys.executable, "-m", "uv", "pip", "compile", "-q", "--python-version", python,
                    "--no-header", "--no-annotate", "-c", build_dir / "colab.txt", requested,
                    "-o", build_dir / "closure.txt"], check=True)
    closure = [norm(line.split("==")[0]) for line in (build_dir / "closure.txt").read_text().splitlines()
               if "==" in line]
    kept = sorted(pinned[name] for name in closure if name in pinned)
    runtime.write_text(
        "# colab-runtime.txt -- the packages Colab's runtime has preinstalled that the course's install cell can\n"
        "# touch, at Colab's versions (tools/colab_sim.py installs exactly these to simulate Colab).\n"
        f"# Source: {source}.\n"
        "# Regenerate: python -m tools.colab_sim --regenerate FREEZE --source '...' --python X.Y\n"
        f"# python: {python}\n" + "\n".join(kept) + "\n")
    print(f"wrote {runtime.name}: {len(kept)} packages (Python {python})")


def _exit_on_sigterm(signum, frame):
    raise SystemExit(128 + signum)  # papermill then shuts the kernel down on its way out


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGTERM, _exit_on_sigterm)  # `tasks.py test` stops a background run so
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--regenerate", type=Path, metavar="FREEZE", help="Colab's `pip freeze` output")
    parser.add_argument("--source", default="", help="where FREEZE came from (written into the file)")
    parser.add_argument("--python", default="", help="Colab's Python, X.Y")
    args = parser.parse_args(argv)
    if args.regenerate:
        if not (args.source and args.python):
            parser.error("--regenerate needs --source and --python")
        regenerate(args.regenerate, args.source, args.python)
        return 0
    return simulate()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
