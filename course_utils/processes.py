"""Child processes that never outlive the course: each in its own process group, always stopped.

:func:`start` runs a command in a new process group (session), pinned to CPU cores if asked, with
its output (stdout and stderr together) copied line by line to a log file and handed to a queue.
On Linux the child also gets ``PR_SET_PDEATHSIG``: it is killed when the process that started it
dies, even by SIGKILL. :func:`stop` ends process groups (SIGTERM, then SIGKILL after a grace
period) and reaps them; an interrupt while it waits kills what is left at once. Every process
started here is registered in :data:`LIVE` until stopped, and an ``atexit`` handler stops the rest
when Python exits normally.

Stopping the *group* matters: a task that started children of its own (a shell, ``timeout``, a data
loader) leaves them running if only its own pid is killed.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import queue
import signal
import subprocess
import sys
import threading
import time

LIVE: dict[int, subprocess.Popen] = {}  # pid -> process, until stopped
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
_PR_SET_PDEATHSIG = 1


def _child_setup(cpus, parent: int) -> None:  # runs in the child between fork and exec
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)
    if cpus:
        os.sched_setaffinity(0, cpus)


def _copy_lines(proc: subprocess.Popen, log_path, lines: queue.Queue, tag) -> None:
    with open(log_path, "w") as log, proc.stdout:
        for raw in proc.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            log.write(line + "\n")
            log.flush()
            lines.put((tag, line))


def start(command, *, env: dict, log_path, lines: queue.Queue, tag=None, cpus=None, cwd=None):
    """Start ``command`` in a new process group; return ``(process, reader thread)``.

    Each output line goes to ``log_path`` and, as ``(tag, line)``, to ``lines``. ``cpus``: a set of
    cores to pin the process (and every thread it starts) to.

    Call it from a thread that outlives the child (the main thread, or a supervisor thread): Linux
    sends ``PR_SET_PDEATHSIG`` when the *thread* that started the child ends, not only the process.
    """
    parent = os.getpid()
    proc = subprocess.Popen([str(c) for c in command], env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=lambda: _child_setup(cpus, parent))
    LIVE[proc.pid] = proc
    reader = threading.Thread(target=_copy_lines, args=(proc, log_path, lines, tag), daemon=True)
    reader.start()
    return proc, reader


def _signal_group(proc: subprocess.Popen, sig) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop(procs, grace: float = 5.0, kill: bool = False) -> None:
    """Stop the process groups of ``procs`` together: SIGTERM (SIGKILL at once with ``kill``), SIGKILL
    to what is left after ``grace`` seconds, then reap. Groups whose leader already exited are killed
    too (their leftover children). An interrupt meanwhile kills everything left, then propagates."""
    procs = list(procs)
    try:
        for proc in procs:
            _signal_group(proc, signal.SIGKILL if kill else signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in procs:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
    finally:
        for proc in procs:
            _signal_group(proc, signal.SIGKILL)
            proc.wait()
            LIVE.pop(proc.pid, None)


@atexit.register
def stop_all_live() -> None:
    """Stop every process :func:`start` started and nobody stopped yet."""
    stop(list(LIVE.values()), grace=2.0)


def default_cpus(n_tasks: int) -> list:
    """One core per task, round-robin over the cores this process may use (``None`` each where unknown)."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    return [{cores[i % len(cores)]} for i in range(n_tasks)] if cores else [None] * n_tasks


def cores_per_task(cpus, threads, n_tasks: int) -> list:
    """The core set of each of ``n_tasks`` tasks: ``cpus="auto"`` gives one core each when ``threads`` is
    set (else none), ``None`` none; a list must give one core set per task."""
    if cpus == "auto":
        cpus = default_cpus(n_tasks) if threads else None
    cpus = [None] * n_tasks if cpus is None else list(cpus)
    if len(cpus) != n_tasks:
        raise ValueError(f"cpus gives {len(cpus)} core sets for {n_tasks} tasks: give one per task")
    return cpus
