"""What stops a local cluster when its owner cannot. The janitor: when the process that started a cluster
dies without stopping it (``kill -9``, a kernel that crashed), it stops what is left of the cluster and
removes its directory.

:func:`course_utils.slurm.local_cluster` starts it in a session of its own (an interrupt sent to the
kernel's process group does not reach it) and without ``PR_SET_PDEATHSIG`` (it must outlive its parent),
and writes the cluster's directory on its standard input. The janitor then waits for end of file: the
cluster closes the pipe once it has stopped (a normal stop: the sweep finds nothing), and the operating
system closes it when the parent dies, however it dies. The sweep kills every process of the cluster
(:func:`course_utils.slurm.leftovers`: daemons, job steps, tasks) and removes the directory, munge key
included. :func:`stop_when_a_cell_fails` stops the cluster when a notebook cell raises.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path


def leftovers(directory) -> list:
    """Live processes of the local cluster in ``directory``: daemons whose command line names it, job
    steps and tasks (their ``SLURM_CONF`` is in it). This process and its ancestors are not counted."""
    import psutil  # noqa: PLC0415

    me = {os.getpid(), *(p.pid for p in psutil.Process().parents())}
    inside, found = str(Path(directory)) + os.sep, []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            if proc.pid not in me and proc.status() != psutil.STATUS_ZOMBIE and (
                    any(inside in arg for arg in proc.cmdline()) or _conf_in_environ(proc, inside)):
                found.append(proc)
    return found


def _conf_in_environ(proc, inside: str) -> bool:
    """Whether ``proc`` started with ``SLURM_CONF`` in ``inside``. Read from the raw ``/proc/PID/environ``:
    ``slurmstepd`` writes its title (``slurmstepd: [1.batch]``) over the start of its environment, where
    ``psutil``'s parser stops, and the variable is still there after it."""
    try:
        with open(f"/proc/{proc.pid}/environ", "rb") as f:
            return f"SLURM_CONF={inside}".encode() in f.read()
    except OSError:
        return proc.environ().get("SLURM_CONF", "").startswith(inside)


def sweep(directory: Path) -> list[int]:
    """Kill the cluster's processes, remove its directory; return the killed pids."""
    import psutil  # noqa: PLC0415

    left = leftovers(directory)
    for proc in left:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(left, timeout=10)
    from course_utils.slurm import _nodes  # noqa: PLC0415

    _nodes.remove(directory)  # a multi-node cluster's namespaces and host files
    shutil.rmtree(directory, ignore_errors=True)
    return [proc.pid for proc in left]


def start(directory: Path) -> subprocess.Popen:
    """The process that sweeps the cluster if this one dies without stopping it (``_janitor``)."""
    janitor = subprocess.Popen([sys.executable, "-m", "course_utils.slurm._janitor"], stdin=subprocess.PIPE,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    janitor.stdin.write(f"{directory}\n".encode())
    janitor.stdin.flush()
    return janitor


def stop_when_a_cell_fails(stack: contextlib.ExitStack, what: str = "the local Slurm cluster") -> bool:
    """In IPython (Jupyter, papermill), close ``stack`` after the first cell that raises, so that a Run All
    stopped by an error leaves nothing running; ``False`` outside IPython. Closing the stack first ends it."""
    try:
        from IPython import get_ipython  # noqa: PLC0415
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None:
        return False

    def after(result) -> None:
        if result.error_in_exec is None and result.error_before_exec is None:
            return
        forget()
        stack.close()
        print(f"A cell failed, so {what} was stopped: run the notebook again from the top to start it again.")

    def forget() -> None:
        with contextlib.suppress(ValueError):
            shell.events.unregister("post_run_cell", after)

    shell.events.register("post_run_cell", after)
    stack.callback(forget)
    return True


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
