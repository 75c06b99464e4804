"""What a run of cluster tasks returns or raises: each process's exit code, times, log and progress.

:class:`RunResult` holds every process a run started (:class:`TaskResult`, restarts included),
:class:`Fault` describes a task to kill on purpose, and :class:`ClusterError` and its subclasses
carry the result of a run that did not succeed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from course_utils.cluster._output import NOISE, Progress


class ClusterError(RuntimeError):
    """A run that did not succeed; ``.result`` holds what happened (exit codes, logs)."""

    def __init__(self, message: str, result: RunResult):
        super().__init__(message)
        self.result = result


class TaskFailed(ClusterError):
    """A task exited with an error (its last lines are in the message)."""


class ClusterTimeout(ClusterError):
    """A task reported no progress in time (it never connected?), or the run exceeded its timeout."""


@dataclass(frozen=True)
class Fault:
    """Kill ``task`` (SIGKILL to its process group, like a lost machine) once it reports ``epoch`` (and
    ``step`` within it), or ``after_seconds`` after it started; then restart ``"cluster"`` (all tasks, once
    every one has exited), ``"task"`` (that task alone) or nothing (``None``)."""

    task: str = "worker 1"
    epoch: int | None = None
    step: int | None = None
    after_seconds: float | None = None
    restart: str | None = "cluster"

    def due(self, progress: Progress, running_s: float) -> bool:
        if self.after_seconds is not None and running_s >= self.after_seconds:
            return True
        if self.epoch is None or progress.epoch is None:
            return False
        return progress.epoch > self.epoch or (
            progress.epoch == self.epoch and (progress.step or 0) >= (self.step or 0))


@dataclass
class TaskResult:
    """One process of one attempt: its exit code (negative: killed by that signal), times and log."""

    name: str
    attempt: int
    log_path: Path
    pid: int = 0
    returncode: int | None = None
    started: float = 0.0
    ended: float | None = None
    stopped_by: str | None = None  # "fault", "stop" (the launcher stopped it) or None (it exited itself)
    progress: Progress = field(default_factory=Progress)

    @property
    def wall_s(self) -> float:
        return (self.ended or time.monotonic()) - self.started

    def last_lines(self, n: int = 12) -> list[str]:
        """The task's last ``n`` log lines, TensorFlow's log noise left out."""
        lines = self.log_path.read_text(errors="replace").splitlines() if self.log_path.exists() else []
        return [line for line in lines if not NOISE.search(line)][-n:]


@dataclass
class RunResult:
    """Every process the run started, in start order; ``fault_at``: when the fault killed its task."""

    tasks: list[TaskResult]
    wall_s: float = 0.0
    fault_at: float | None = None

    def attempt(self, k: int) -> list[TaskResult]:
        return [t for t in self.tasks if t.attempt == k]

    def latest(self) -> list[TaskResult]:
        """The last process of each task (after restarts, the restarted one)."""
        return list({t.name: t for t in self.tasks}.values())

    @property
    def ok(self) -> bool:
        """Every task's last process exited with 0, or was stopped after the others finished (a ps)."""
        last = self.latest()
        return all(t.returncode == 0 or t.stopped_by == "stop" for t in last) and any(t.returncode == 0 for t in last)

    def noticed_s(self) -> dict[str, float]:
        """For the attempt a fault hit: seconds from the kill until each other task exited by itself."""
        if self.fault_at is None:
            return {}
        hit = [t for t in self.tasks if t.stopped_by == "fault"][0].attempt
        return {t.name: t.ended - self.fault_at for t in self.attempt(hit)
                if t.stopped_by is None and t.ended is not None}

    def table(self) -> str:
        rows = [f"{'task':<12}{'attempt':>8}{'exit':>6}{'seconds':>9}  log"]
        for t in self.tasks:
            how = {"fault": " (fault)", "stop": " (stopped)"}.get(t.stopped_by, "")
            rows.append(f"{t.name:<12}{t.attempt:>8}{str(t.returncode):>6}{t.wall_s:>9.1f}  {t.log_path}{how}")
        return "\n".join(rows)
