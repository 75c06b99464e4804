"""The local cluster's janitor: when the process that started a cluster dies without stopping it (``kill -9``,
a kernel that crashed), it stops what is left of the cluster and removes its directory.

:func:`course_utils.slurm.local_cluster` starts it in a session of its own (an interrupt sent to the
kernel's process group does not reach it) and without ``PR_SET_PDEATHSIG`` (it must outlive its parent),
and writes the cluster's directory on its standard input. The janitor then waits for end of file: the
cluster closes the pipe once it has stopped (a normal stop: the sweep finds nothing), and the operating
system closes it when the parent dies, however it dies. The sweep kills every process of the cluster
(:func:`course_utils.slurm.leftovers`: daemons, job steps, tasks) and removes the directory, munge key
included.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def sweep(directory: Path) -> list[int]:
    """Kill the cluster's processes, remove its directory; return the killed pids."""
    import psutil  # noqa: PLC0415

    from course_utils.slurm._daemons import leftovers  # noqa: PLC0415

    left = leftovers(directory)
    for proc in left:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(left, timeout=10)
    shutil.rmtree(directory, ignore_errors=True)
    return [proc.pid for proc in left]


def main() -> int:
    directory = Path(sys.stdin.readline().strip())
    if not directory.name.startswith("course-slurm-"):  # never sweep anything but a local cluster's directory
        print(f"janitor: {directory} is not a local Slurm cluster's directory", file=sys.stderr)
        return 2
    sys.stdin.read()  # until the parent closes the pipe or dies
    killed = sweep(directory)
    if killed:
        print(f"janitor: the process that started the local Slurm cluster in {directory} died; "
              f"stopped its processes {killed} and removed the directory", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
