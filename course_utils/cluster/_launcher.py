"""The launcher: starts a cluster's task processes, shows their output, notes exits, stops them.

A :class:`Job` says what to run (validated once, by :func:`job`); a :class:`Launcher` owns the
processes of one job: it starts a task (a Ctrl-C meanwhile is held until the process is recorded),
drains the tasks' output for a bounded time, records tasks that exited, stops tasks by process
group, and on :meth:`Launcher.close` stops whatever still runs and removes the tasks' temporary
directories. :func:`course_utils.cluster.run` (tasks that finish) and :mod:`course_utils.servers`
(tasks that keep serving) are built on it.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from course_utils import processes
from course_utils import tf_config as tfc
from course_utils.cluster._output import NOISE, StatusBoard
from course_utils.cluster._results import RunResult, TaskResult

SHOW = ("lines", "status", "quiet")


def visible_gpus() -> int:
    """The GPUs TensorFlow sees in this process (0 if TensorFlow is not imported: it is not started for this)."""
    tf = sys.modules.get("tensorflow")
    return len(tf.config.list_physical_devices("GPU")) if tf is not None else 0


@dataclass(frozen=True)
class Job:
    """What to run for each task of ``members`` (``(type, index)`` pairs of ``cluster``)."""

    command: tuple  # after the Python interpreter: ("-m", module) or (script path,)
    cluster: dict
    members: tuple
    cpus: tuple  # one core set (or None) per member
    log_dir: Path
    args: tuple = ()
    env: dict = field(default_factory=dict)
    gpus: int = 0
    threads: int | None = None
    interop: dict = field(default_factory=dict)  # inter-op threads by task type, overriding threads
    prefix: Callable | None = None  # (type, index) -> the command to exec the task's Python under
    stop_grace: float = 5.0

    def names(self) -> list[str]:
        return [tfc.task_name(*m) for m in self.members]


def job(script, module, cluster: dict, members, *, args=(), env=None, threads=None, cpus="auto", gpus="auto",
        log_dir, stop_grace=5.0, interop=None, prefix=None) -> Job:
    """Check what :func:`course_utils.cluster.run` and :func:`course_utils.servers.start` were given, once,
    and return the :class:`Job`."""
    if not members:
        raise tfc.TFConfigError(f"The cluster {cluster!r} has no tasks to start.")
    for k, (kind, i) in enumerate(members):  # the cluster part (and its ports) once, each task's part
        tfc.validate({"cluster": cluster, "task": {"type": kind, "index": i}}, check_ports=k == 0)
    if (script is None) == (module is None):
        raise ValueError("Give either a script path or module=")
    return Job(command=("-m", module) if module else (str(Path(script).resolve()),), cluster=cluster,
               members=tuple(members), cpus=tuple(processes.cores_per_task(cpus, threads, len(members))),
               log_dir=Path(log_dir).resolve(), args=tuple(args),
               env={"TF_FORCE_GPU_ALLOW_GROWTH": "true", **(env or {})},
               gpus=visible_gpus() if gpus == "auto" else gpus, threads=threads, interop=dict(interop or {}),
               prefix=prefix, stop_grace=stop_grace)


class Launcher:
    """The processes of one :class:`Job`; a context manager (leaving it stops them all).

    ``show``: ``"lines"`` (output prefixed by task), ``"status"`` (a line per task) or ``"quiet"``.
    """

    def __init__(self, job: Job, show: str = "lines"):
        if show not in SHOW:
            raise ValueError(f"show must be one of {', '.join(map(repr, SHOW))}, not {show!r}")
        self.job, self.show = job, show
        self.result = RunResult(tasks=[])
        self._lines: queue.Queue = queue.Queue()
        self._current: dict[str, tuple] = {}  # name -> (process, TaskResult, reader) of its latest start
        self._tmp_root: str | None = None
        self._board = StatusBoard(job.names(), enabled=show == "status")

    def __enter__(self) -> Launcher:
        self.job.log_dir.mkdir(parents=True, exist_ok=True)
        self._tmp_root = tempfile.mkdtemp(prefix="tasks-tmp-", dir=self.job.log_dir)
        return self

    def __exit__(self, *exc) -> bool:
        self.close()
        return False

    def close(self) -> None:
        """Stop every task still running, show its last lines, remove the temporary directories."""
        try:
            self.stop(self.running(), "stop")
            self.read(wait=0, budget=float("inf"))  # every task is stopped: what is queued is all there is
        finally:
            if self._tmp_root:
                shutil.rmtree(self._tmp_root, ignore_errors=True)
            self._board.close()

    def _environment(self, kind: str, i: int, tmp: str) -> dict:
        job = self.job
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "0", **job.env,  # full logs; shown filtered
               "TF_CONFIG": json.dumps(tfc.for_task(job.cluster, kind, i)), "TMPDIR": tmp, "PYTHONUNBUFFERED": "1"}
        if job.gpus and "CUDA_VISIBLE_DEVICES" not in job.env:
            env["CUDA_VISIBLE_DEVICES"] = str(job.members.index((kind, i)) % job.gpus)  # task k: GPU k mod gpus
        if job.threads:
            n = str(job.threads)
            env.update(TF_NUM_INTRAOP_THREADS=n, TF_NUM_INTEROP_THREADS=n, OMP_NUM_THREADS=n)
        if kind in job.interop:
            env["TF_NUM_INTEROP_THREADS"] = str(job.interop[kind])
        return env

    def start(self, name: str, attempt: int) -> None:
        """Start (attempt ``attempt`` of) the task ``name``. A Ctrl-C meanwhile comes after it is recorded."""
        k = self.job.names().index(name)
        kind, i = self.job.members[k]
        tmp = tempfile.mkdtemp(prefix=f"{kind}-{i}-", dir=self._tmp_root)
        suffix = "" if attempt == 1 else f".attempt{attempt}"
        task = TaskResult(name, attempt, self.job.log_dir / f"{kind}-{i}{suffix}.log", started=time.monotonic())
        wrapper = list(self.job.prefix(kind, i)) if self.job.prefix else []
        command = [*wrapper, sys.executable, *self.job.command, *self.job.args]
        with processes.interrupts_held():
            proc, reader = processes.start(command, env=self._environment(kind, i, tmp), log_path=task.log_path,
                                           lines=self._lines, tag=task, cpus=self.job.cpus[k])
            task.pid = proc.pid
            self._current[name] = (proc, task, reader)
            self.result.tasks.append(task)
        self._board.update(name, f"started (attempt {attempt})")

    def start_all(self, attempt: int) -> None:
        for name in self.job.names():
            self.start(name, attempt)

    def task(self, name: str) -> TaskResult:
        """The latest process of the task ``name``."""
        return self._current[name][1]

    def running(self) -> list[str]:
        """The tasks whose latest process has not been recorded as ended."""
        return [name for name, (_, task, _) in self._current.items() if task.ended is None]

    def status(self, name: str, text: str) -> None:
        """Set the task's line on the status board (``show="status"``)."""
        self._board.update(name, text)

    def say(self, message: str) -> None:
        if self.show == "status":
            self._board.note(message)
        elif self.show == "lines":
            print(message, flush=True)

    def stop(self, names, reason: str, kill: bool = False) -> None:
        """Stop these tasks' process groups together and record how they ended."""
        entries = [self._current[name] for name in names]
        for proc, task, _ in entries:
            if task.ended is None and proc.poll() is None:
                task.stopped_by = reason
        processes.stop([proc for proc, _, _ in entries], self.job.stop_grace, kill=kill)
        for proc, task, reader in entries:
            reader.join(timeout=5)
            if task.ended is None:
                task.ended, task.returncode = time.monotonic(), proc.returncode

    def read(self, wait: float = 0.2, budget: float = 0.5) -> None:
        """Show the lines that arrived (waiting up to ``wait`` seconds for the first; 0: not at all) and
        note each task's progress; return after ``budget`` seconds even if more keep coming (a chatty task
        must not keep the caller from its timeout and fault checks)."""
        end = time.monotonic() + budget
        try:
            task, line = self._lines.get(timeout=wait) if wait > 0 else self._lines.get_nowait()
            while True:
                if task.progress.update(line) and task.ended is None:
                    self._board.update(task.name, task.progress.describe())
                if self.show == "lines" and not NOISE.search(line):
                    print(f"{task.name} | {line}", flush=True)
                if time.monotonic() > end:
                    return
                task, line = self._lines.get_nowait()
        except queue.Empty:
            pass

    def reap(self, drain: bool = True) -> list[str]:
        """Record the tasks that exited by themselves (and stop their leftover children); return those that
        failed. ``drain``: show their last lines first (False when another thread reads the output)."""
        exited = [name for name in self.running() if self._current[name][0].poll() is not None]
        self.stop(exited, "exit")
        if exited and drain:  # stop() joined their readers: their last lines are queued
            self.read(wait=0, budget=5)
        for name in exited:
            task = self._current[name][1]
            self._board.update(name, f"exited with code {task.returncode} ({task.progress.describe()})")
            if task.returncode != 0:
                self.say(f"[launcher] {name} exited with code {task.returncode}")
        return [name for name in exited if self._current[name][1].returncode != 0]

    def tails(self, names) -> str:
        """The last log lines of these tasks, with their log files' paths."""
        parts = []
        for name in names:
            task = self.task(name)
            tail = "\n".join(f"  {line}" for line in task.last_lines()) or "  (no output)"
            parts.append(f"--- last lines of {name} (full log: {task.log_path}):\n{tail}")
        return "\n".join(parts)
