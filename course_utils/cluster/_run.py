"""``cluster.run``: start every task, watch them to the end, stop what is left; the watching is a state machine.

A run is in one of four phases; each poll (``tick``) reads the tasks' output, records the tasks that
exited, and moves on:

- ``RUNNING``: wait for the waited-for tasks to finish; a task failing moves to ``FAILING`` (a fault not
  yet injected then never is: the run has failed by itself); the fault, when due, kills its task and
  moves to ``RESTARTING`` (restart the cluster), stays (``"task"``: the task alone was restarted) or
  moves to ``FAILING`` (no restart). A task silent for ``start_timeout`` seconds, or a run longer than
  ``timeout``, raises :class:`ClusterTimeout`.
- ``FAILING``: give the others ``fail_grace`` seconds to notice and exit by themselves, then ``DONE``.
- ``RESTARTING``: the same grace, then stop the rest and start every task again (next attempt) in ``RUNNING``.
- ``DONE``: the launcher stops what still runs (a parameter server) when the run leaves its ``with``.
"""

from __future__ import annotations

import enum
import time

from course_utils import tf_config as tfc
from course_utils.cluster._launcher import Launcher, job
from course_utils.cluster._results import ClusterTimeout, Fault, RunResult, TaskFailed


class Phase(enum.Enum):
    RUNNING = "running"
    FAILING = "failing"
    RESTARTING = "restarting"
    DONE = "done"


class Watch:
    """The phase of one run and what moves it (see the module's docstring)."""

    def __init__(self, launcher: Launcher, *, timeout, start_timeout, fail_grace, fault, wait_for):
        self.launcher, self.timeout, self.start_timeout, self.fail_grace = launcher, timeout, start_timeout, fail_grace
        self.fault, self.wait_for = fault, set(wait_for)
        self.t0 = self.since = time.monotonic()
        self.phase, self.attempt = Phase.RUNNING, 1

    def enter(self, phase: Phase) -> None:
        self.phase, self.since = phase, time.monotonic()

    def tick(self) -> None:
        self.launcher.read()
        failed = self.launcher.reap()
        now = time.monotonic()  # after reap(): a failure counts from when it was seen
        {Phase.RUNNING: self._running, Phase.FAILING: self._failing,
         Phase.RESTARTING: self._restarting}[self.phase](failed, now)

    def _running(self, failed, now) -> None:
        launcher, fault = self.launcher, self.fault
        if failed:
            return self.enter(Phase.FAILING)
        if fault is not None and fault.task in launcher.running():
            task = launcher.task(fault.task)
            if fault.due(task.progress, now - task.started):
                return self._inject(fault)
        running = launcher.running()
        waited = [n for n in running if n.split()[0] in self.wait_for]
        if not waited:
            return self.enter(Phase.DONE)
        silent = sorted(n for n in waited if launcher.task(n).progress.describe() == "no progress yet"
                        and now - launcher.task(n).started > self.start_timeout)
        if silent or now - self.t0 > self.timeout:
            why = (f"{', '.join(silent)} reported no progress within {self.start_timeout:g} s: did it start and "
                   "connect to the others?" if silent else f"the run took longer than {self.timeout:g} s")
            tails = launcher.tails(silent or sorted(running))
            launcher.stop(running, "stop")
            launcher.result.wall_s = time.monotonic() - self.t0
            raise ClusterTimeout(f"Stopped the cluster: {why}\n{tails}", launcher.result)
        return None

    def _inject(self, fault: Fault) -> None:
        """Kill the fault's task, then restart that task, the cluster (after the grace) or nothing."""
        launcher, task = self.launcher, self.launcher.task(fault.task)
        launcher.say(f"[launcher] fault: killing {fault.task} at {task.progress.describe()}")
        launcher.stop([fault.task], "fault", kill=True)
        launcher.result.fault_at = time.monotonic()
        launcher.status(fault.task, f"killed by the fault at {task.progress.describe()}")
        self.fault = None
        if fault.restart == "task":
            launcher.say(f"[launcher] restarting {fault.task}")
            launcher.start(fault.task, task.attempt + 1)
        else:
            self.enter(Phase.RESTARTING if fault.restart == "cluster" else Phase.FAILING)

    def _failing(self, failed, now) -> None:
        if not self.launcher.running() or now - self.since > self.fail_grace:
            self.enter(Phase.DONE)

    def _restarting(self, failed, now) -> None:  # the others should fail on their own; else they are stopped
        running = self.launcher.running()
        if running and now - self.since <= self.fail_grace:
            return
        self.launcher.stop(running, "stop")
        self.attempt += 1
        self.launcher.say(f"[launcher] restarting the cluster (attempt {self.attempt})")
        self.launcher.start_all(self.attempt)
        self.enter(Phase.RUNNING)


def run(script=None, *, module: str | None = None, cluster: dict | None = None, workers: int = 2,
        evaluator: bool = False, args=(), env: dict | None = None, threads: int | None = None, cpus="auto",
        log_dir="logs/cluster", timeout: float = 900, start_timeout: float = 180, fail_grace: float = 60,
        show: str = "lines", fault: Fault | None = None, wait_for=("chief", "worker", "evaluator"),
        check: bool = True, stop_grace: float = 5.0, gpus="auto", prefix=None) -> RunResult:
    """Run ``python script *args`` (or ``python -m module *args``) once per task of ``cluster`` (default:
    ``workers`` workers on free ports) and wait for the tasks of the types in ``wait_for``; the others
    (parameter servers) are then stopped. ``show``: ``"lines"`` (prefixed output), ``"status"`` (a line per
    task) or ``"quiet"``.

    ``threads`` sets TensorFlow's and OpenMP's thread counts per task; ``cpus``: ``"auto"`` (one core
    per task when ``threads`` is given), ``None`` or a list of core sets, one per task. ``gpus``: the
    number of GPUs to share out (task ``i`` sees GPU ``i % gpus`` only; ``"auto"``: those TensorFlow
    sees in this process, if it is imported); every task grows its GPU memory as needed. ``prefix``: a
    function of ``(task type, index)`` giving the command to run that task's Python under (for example
    ``ip netns exec NS``, from :mod:`course_utils.netlab`); it must exec the command, not fork it. A task that
    reports no progress (``epoch N`` or ``step N`` in a line) within ``start_timeout`` seconds,
    or a run longer than ``timeout``, stops everything and raises :class:`ClusterTimeout`; a failed task
    raises :class:`TaskFailed` (with ``check=True``). Ctrl-C stops everything, then raises ``KeyboardInterrupt``.
    """
    cluster = tfc.local_cluster(workers) if cluster is None else cluster
    members = tfc.tasks(cluster, evaluator=evaluator)
    the_job = job(script, module, cluster, members, args=args, env=env, threads=threads, cpus=cpus, gpus=gpus,
                  log_dir=log_dir, stop_grace=stop_grace, prefix=prefix)
    names = the_job.names()
    if fault is not None and fault.task not in names:
        raise ValueError(f"The fault names {fault.task!r}, which is not a task of this cluster ({', '.join(names)})")
    if fault is not None and fault.restart not in ("cluster", "task", None):
        raise ValueError(f"Fault.restart must be 'cluster', 'task' or None, not {fault.restart!r}")
    with Launcher(the_job, show) as launcher:
        watch = Watch(launcher, timeout=timeout, start_timeout=start_timeout, fail_grace=fail_grace, fault=fault,
                      wait_for=wait_for)
        launcher.start_all(1)
        while watch.phase is not Phase.DONE:
            watch.tick()
    result = launcher.result
    result.wall_s = time.monotonic() - watch.t0
    if check and not result.ok:
        bad = [t.name for t in result.latest() if t.returncode != 0 and t.stopped_by is None]
        raise TaskFailed(f"{', '.join(bad) or 'A task'} failed.\n{launcher.tails(bad)}\n{result.table()}", result)
    return result
