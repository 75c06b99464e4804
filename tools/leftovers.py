"""What the course's clusters and networks leave behind when something fails to stop them.

Local Slurm clusters' directories, their janitors and daemons, network namespaces (netlab's: ``dtc-*`` and
every notebook's own ``dtc...-*``; a multi-node Slurm cluster's ``sXXXX-*``). A pytest session fails when it
leaves one (tests/conftest.py), and so does ``tasks.py test`` as a whole (the notebooks that nbval runs start
clusters too): ``python -m tools.leftovers --since FILE`` lists what is there now and was not in FILE (written
by ``--save FILE`` at the start), and exits 1 if anything is.

``--save`` exits 1 when netlab namespaces are already there: a killed run left them, and the notebook that
uses those names would stop on them ("already exist") late in the run. It says how to remove them.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil

from course_utils import netlab

COURSE_NAMESPACE = re.compile(rf"^({netlab.PREFIX}[a-z]*|s[0-9a-f]{{4}})-")  # netlab's and notebooks', Slurm's
NETWORK_NAMESPACE = re.compile(rf"^namespace {netlab.PREFIX}[a-z]*-(hub|[0-9]+)$")  # fixed: a second one fails


def course_leftovers() -> set[str]:
    """One line per cluster directory, namespace or process of the course's that exists now."""
    found = {f"directory {d}" for d in glob.glob(os.path.join(tempfile.gettempdir(), "course-slurm-*"))}
    ip = shutil.which("ip") or shutil.which("ip", path="/usr/sbin:/sbin")
    listed = subprocess.run([ip, "netns", "list"], capture_output=True, text=True).stdout if ip else ""
    found |= {f"namespace {line.split()[0]}" for line in listed.splitlines() if COURSE_NAMESPACE.match(line)}
    for proc in psutil.process_iter(["cmdline", "status"]):
        line = " ".join(proc.info["cmdline"] or [])
        if proc.info["status"] != psutil.STATUS_ZOMBIE and (
                "course-slurm-" in line or "course_utils.slurm._janitor" in line):
            found.add(f"process {proc.pid}: {line[:100]}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--save", type=Path, help="write what is there now to this file")
    what.add_argument("--since", type=Path, help="list what is there now and not in this file; 1 if anything")
    args = parser.parse_args(argv)
    now = course_leftovers()
    if args.save:
        args.save.parent.mkdir(parents=True, exist_ok=True)
        args.save.write_text("".join(f"{line}\n" for line in sorted(now)))
        fixed = sorted(line.split()[1] for line in now if NETWORK_NAMESPACE.match(line))
        if fixed:
            print(f"Network namespaces from an earlier run that was killed: {', '.join(fixed)}. The notebook "
                  "that creates them would stop on them. Remove them first:\n  ip netns delete " + " && ip netns "
                  "delete ".join(fixed), file=sys.stderr)
        return 1 if fixed else 0
    left = now - set(args.since.read_text().splitlines())
    if left:
        print("Left behind (each must be stopped by what started it):\n  " + "\n  ".join(sorted(left)),
              file=sys.stderr)
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
