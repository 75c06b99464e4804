"""Child processes that never outlive the course: each in its own process group, always stopped.

:func:`start` runs a command in a new process group (session), pinned to CPU cores if asked, with
its output (stdout and stderr together) copied line by line to a log file and handed to a queue.
On Linux the child also gets ``PR_SET_PDEATHSIG``: it is killed when the process that started it
dies, even by SIGKILL. :func:`stop` ends process groups (SIGTERM, then SIGKILL after a grace
period) and reaps them; an interrupt while it waits kills what is left at once. Every process
started here is registered in :data:`LIVE` until stopped, and an ``atexit`` handler stops the rest
when Python exits normally. :class:`Piped` is a child spoken to line by line (stdin and stdout), with a
wait for its next line that gives up on a child that hangs.

Stopping the *group* matters: a task that started children of its own (a shell, ``timeout``, a data
loader) leaves them running if only its own pid is killed.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

LIVE: dict[int, subprocess.Popen] = {}  # pid -> process, until stopped
_SETUP = Path(__file__).with_name("_exec_child.py")  # pins cores, sets PR_SET_PDEATHSIG, execs the command
_held: list | None = None  # the interrupts caught while held (see interrupts_held), None when not held


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
    A Ctrl-C meanwhile is held until the process is registered (in :data:`LIVE`), then raised.
    """
    command = [str(c) for c in command]
    program = str(Path(cwd) / command[0]) if cwd and os.sep in command[0] else command[0]
    if shutil.which(program, path=env.get("PATH", os.environ.get("PATH"))) is None:
        raise FileNotFoundError(f"{command[0]!r} is not a program found on PATH: install it or give its full path")
    allowed = os.sched_getaffinity(0) if cpus and hasattr(os, "sched_getaffinity") else None
    if allowed is not None and not set(cpus) <= allowed:
        raise ValueError(f"cores {sorted(set(cpus) - allowed)} are not available to this process "
                         f"(it may use {sorted(allowed)}): pin the task to those")
    cores = ",".join(str(c) for c in sorted(cpus)) if cpus else "-"
    with interrupts_held():
        proc = subprocess.Popen([sys.executable, "-I", "-S", str(_SETUP), str(os.getpid()), cores, "--", *command],
                                env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
        LIVE[proc.pid] = proc
        reader = threading.Thread(target=_copy_lines, args=(proc, log_path, lines, tag), daemon=True)
        reader.start()
    return proc, reader


class Piped:
    """A child spoken to line by line: started in a process group of its own with pipes to its stdin and
    stdout (text), registered in :data:`LIVE`, its stdout read by a thread of its own so that a wait for
    a line can give up on a child that hangs. ``stderr``: where its stderr goes (with stdout by default).
    Like :func:`start`'s children it is set up by ``_exec_child.py`` (``PR_SET_PDEATHSIG``: killed when the
    thread that started it ends, a kernel killed or restarted included); :meth:`stop` it (the ``atexit``
    handler stops it at a normal exit)."""

    def __init__(self, command, *, env=None, stderr=subprocess.STDOUT):
        command = [sys.executable, "-I", "-S", str(_SETUP), str(os.getpid()), "-", "--", *(str(c) for c in command)]
        with interrupts_held():  # a Ctrl-C between starting and recording would leave it running
            self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=stderr, text=True, errors="replace", start_new_session=True, env=env)
            LIVE[self.proc.pid] = self.proc
        self._lines: queue.Queue = queue.Queue()
        self._ended = self._stopped = False  # its stdout's end has been read; stop has run
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        with self.proc.stdout:
            for line in self.proc.stdout:
                self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def next_line(self, timeout: float) -> str | None:
        """Its next stdout line; ``None`` once its stdout has ended (it exited, or closed it, and no process
        it started holds it open); ``TimeoutError`` after ``timeout`` seconds without a line."""
        if self._ended:
            return None
        try:
            line = self._lines.get(timeout=max(timeout, 0.0))
        except queue.Empty:
            raise TimeoutError(f"no line for {timeout:g} s") from None
        self._ended = line is None
        return line

    def wait_for(self, prefix: str, timeout: float, tail=None) -> str | None:
        """The rest of its next stdout line that starts with ``prefix``; the lines before it are appended to
        ``tail`` (a list or deque) if given. ``None`` if its stdout ends first; ``TimeoutError`` when
        ``timeout`` seconds pass in all without such a line (a child that hangs, or one that keeps talking:
        the deadline holds however many lines are waiting)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                if left <= 0:
                    raise TimeoutError
                line = self.next_line(left)
            except TimeoutError:
                raise TimeoutError(f"no line starting with {prefix!r} in {timeout:g} s") from None
            if line is None:
                return None
            if line.startswith(prefix):
                return line[len(prefix):]
            if tail is not None:
                tail.append(line)

    def send(self, line: str) -> bool:
        """Write ``line`` to its stdin; ``False`` if it cannot take it (it has exited: a broken pipe; or its
        stdin was closed here)."""
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except (OSError, ValueError):
            return False
        return True

    def stop(self, grace: float = 0.0) -> None:
        """Close its stdin (a child that reads lines until their end leaves by itself), wait up to ``grace``
        seconds for it to exit, then stop its process group (SIGTERM, SIGKILL after 5 s) and reap it,
        however the wait ends (an interrupt too). Once: later calls do nothing."""
        if self._stopped:
            return
        try:
            with contextlib.suppress(OSError):  # one that died: its unsent bytes cannot flush
                self.proc.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=grace)
        finally:
            stop([self.proc], grace=5.0)
            self._stopped = True


@contextlib.contextmanager
def interrupts_held():
    """Hold Ctrl-C (SIGINT, Jupyter's stop button) back for the block, then deliver it.

    For the few lines between starting something and recording it (or between killing a group and
    reaping it): an interrupt there would leave a process nobody stops. Blocks nest (the outermost
    delivers). Only the main thread gets SIGINT, so elsewhere this does nothing.
    """
    global _held
    if _held is not None or threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list = []
    previous = signal.signal(signal.SIGINT, lambda *_: caught.append(True))  # a Ctrl-C before: raised here
    _held = caught
    try:
        yield
    finally:  # _held first: a Ctrl-C in between is still caught, and the next block holds again
        _held = None
        # a handler installed from C reads as None: Python's default stands for it
        signal.signal(signal.SIGINT, signal.default_int_handler if previous is None else previous)
        if caught:  # delivered even if the block raised: the user asked to stop
            signal.raise_signal(signal.SIGINT)  # to the handler that was there before: KeyboardInterrupt by default


def _signal_group(proc: subprocess.Popen, sig) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _groups_running(pgids: set[int]) -> set[int]:
    """Those of the process groups ``pgids`` in which a process still runs (a zombie does not: whoever
    inherited it reaps it). A group with no process left at all costs one ``killpg`` (the usual case);
    the others are told apart from zombies by Linux's /proc, read once (elsewhere they count as running)."""
    existing = {pgid for pgid in pgids if _group_exists(pgid)}  # zombies included
    if not existing or not os.path.isdir("/proc/self"):
        return existing
    running = set()
    for entry in os.scandir("/proc"):
        try:  # /proc/PID/stat: "PID (name) STATE PPID PGRP ..."; the name may hold spaces and parentheses
            state, _ppid, group = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, ValueError, IndexError):
            continue  # not a process, or it ended meanwhile
        if int(group) in existing and state not in ("Z", "X"):
            running.add(int(group))
    return running


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def stop(procs, grace: float = 5.0, kill: bool = False) -> None:
    """Stop the process groups of ``procs`` together: SIGTERM (SIGKILL at once with ``kill``), SIGKILL
    to what is left after ``grace`` seconds, then reap. Groups whose leader already exited are killed
    too (their leftover children). It returns once no process of the groups runs (SIGKILL takes effect
    when the process is next scheduled: on a busy machine, later than ``kill`` returns; at most 5 s more).
    An interrupt meanwhile kills everything left, then propagates."""
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
        with interrupts_held():  # every group is killed and reaped, even if Ctrl-C comes again meanwhile
            for proc in procs:
                _signal_group(proc, signal.SIGKILL)
                proc.wait()
                LIVE.pop(proc.pid, None)
            left, gone_by = {proc.pid for proc in procs}, time.monotonic() + 5.0
            while left and time.monotonic() < gone_by:
                left = _groups_running(left)
                if left:
                    time.sleep(0.01)


@atexit.register
def stop_all_live() -> None:
    """Stop every process registered in :data:`LIVE` (by :func:`start` or :class:`Piped`) and not stopped yet."""
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
