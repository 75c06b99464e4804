"""Run a multi-worker job on this machine: one process per task, always reaped.

:func:`run` starts one Python process per task of a cluster (``tf_config.local_cluster``), each with
its own ``TF_CONFIG``, thread counts, optional CPU core, temporary directory and process group. It
streams their output prefixed by task (``worker 0 | ...``) with TensorFlow's run-dependent log lines
left out (every line is in the task's log file), or shows one status line per task. It can kill a
task on purpose (:class:`Fault`) and restart the task or the whole cluster.

Whatever happens, no process it started survives it (:mod:`course_utils.processes`): after success,
after a task fails (the others get ``fail_grace`` seconds to notice on their own, then are stopped),
on a timeout, on Ctrl-C (a Jupyter interrupt), when the Python process exits (``atexit``), and, for
the tasks themselves, when the parent dies outright (Linux: ``PR_SET_PDEATHSIG``). Tasks are stopped
by process group, so children a task started go too.

Progress: a task reports it by printing lines containing ``epoch N`` and/or ``step N``.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import sys
import tempfile
import time
from pathlib import Path

from course_utils import processes
from course_utils import tf_config as tfc
from course_utils.run_results import ClusterError, ClusterTimeout, Fault, RunResult, TaskFailed, TaskResult  # noqa: F401 (part of this module's interface)
from course_utils.task_output import NOISE, StatusBoard


def visible_gpus() -> int:
    """The GPUs TensorFlow sees in this process (0 if TensorFlow is not imported: it is not started for this)."""
    tf = sys.modules.get("tensorflow")
    return len(tf.config.list_physical_devices("GPU")) if tf is not None else 0


def run(script, *, module: str | None = None, cluster: dict | None = None, workers: int = 2,
        evaluator: bool = False, args=(), env: dict | None = None, threads: int | None = None, cpus="auto",
        log_dir="logs/cluster", timeout: float = 900, start_timeout: float = 180, fail_grace: float = 60,
        show: str = "lines",
        fault: Fault | None = None, wait_for=("chief", "worker", "evaluator"), check: bool = True,
        stop_grace: float = 5.0, gpus="auto", prefix=None) -> RunResult:
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
    reports no progress (:class:`~course_utils.task_output.Progress`) within ``start_timeout`` seconds,
    or a run longer than ``timeout``, stops everything and raises :class:`ClusterTimeout`; a failed task
    raises :class:`TaskFailed` (with ``check=True``). Ctrl-C stops everything, then raises ``KeyboardInterrupt``.
    """
    cluster = tfc.local_cluster(workers) if cluster is None else cluster
    members = tfc.tasks(cluster, evaluator=evaluator)
    if not members:
        raise tfc.TFConfigError(f"The cluster {cluster!r} has no tasks.")
    for k, (kind, i) in enumerate(members):  # the cluster part (and its ports) once, each task's part
        tfc.validate({"cluster": cluster, "task": {"type": kind, "index": i}}, check_ports=k == 0)
    if show not in ("lines", "status", "quiet"):
        raise ValueError(f"show must be 'lines', 'status' or 'quiet', not {show!r}")
    names = [tfc.task_name(*m) for m in members]
    if fault is not None and fault.task not in names:
        raise ValueError(f"The fault names {fault.task!r}, which is not a task of this cluster ({', '.join(names)})")
    if fault is not None and fault.restart not in ("cluster", "task", None):
        raise ValueError(f"Fault.restart must be 'cluster', 'task' or None, not {fault.restart!r}")
    cpus = processes.cores_per_task(cpus, threads, len(members))
    if (script is None) == (module is None):
        raise ValueError("Give either a script path or module=")
    command = ["-m", module] if module else [str(Path(script).resolve())]
    if gpus == "auto":
        gpus = visible_gpus()
    env = {"TF_FORCE_GPU_ALLOW_GROWTH": "true", **(env or {})}
    launcher = Launcher(command, cluster, members, cpus, gpus, args, env, threads,
                         Path(log_dir).resolve(), show, stop_grace, prefix=prefix)
    return launcher.run(timeout, start_timeout, fail_grace, fault, set(wait_for), check)


class Launcher:
    """Starts, watches and stops the processes of one cluster (used by :func:`run` and :mod:`course_utils.servers`).

    ``interop``: TensorFlow inter-op thread counts by task type, overriding ``threads`` for those types.
    """

    def __init__(self, command, cluster, members, cpus, gpus, args, env, threads, log_dir, show, stop_grace,
                 interop: dict | None = None, prefix=None):
        self.command, self.cluster, self.members, self.cpus, self.gpus = command, cluster, members, cpus, gpus
        self.args, self.env, self.threads, self.show, self.stop_grace = args, env, threads, show, stop_grace
        self.interop, self.prefix = interop or {}, prefix
        self.log_dir, self.tmp_root = log_dir, None
        self.lines: queue.Queue = queue.Queue()
        self.current: dict[str, tuple] = {}  # name -> (process, TaskResult, reader) of its latest start
        self.result = RunResult(tasks=[])
        self.by_name = {tfc.task_name(*m): m for m in members}
        self.board = StatusBoard(list(self.by_name), enabled=show == "status")

    def start(self, member, attempt: int) -> None:
        kind, i = member
        name, k = tfc.task_name(kind, i), self.members.index(member)
        tmp = Path(tempfile.mkdtemp(prefix=f"{kind}-{i}-", dir=self.tmp_root))
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "0", **self.env,  # full logs; shown filtered
               "TF_CONFIG": json.dumps(tfc.for_task(self.cluster, kind, i)), "TMPDIR": str(tmp),
               "PYTHONUNBUFFERED": "1"}
        if self.gpus and "CUDA_VISIBLE_DEVICES" not in self.env:
            env["CUDA_VISIBLE_DEVICES"] = str(k % self.gpus)
        if self.threads:
            n = str(self.threads)
            env.update(TF_NUM_INTRAOP_THREADS=n, TF_NUM_INTEROP_THREADS=n, OMP_NUM_THREADS=n)
        if kind in self.interop:
            env["TF_NUM_INTEROP_THREADS"] = str(self.interop[kind])
        suffix = "" if attempt == 1 else f".attempt{attempt}"
        task = TaskResult(name, attempt, self.log_dir / f"{kind}-{i}{suffix}.log", started=time.monotonic())
        wrapper = list(self.prefix(kind, i)) if self.prefix else []
        proc, reader = processes.start([*wrapper, sys.executable, *self.command, *self.args], env=env,
                                       cpus=self.cpus[k],
                                       log_path=task.log_path, lines=self.lines, tag=task)
        task.pid = proc.pid
        self.current[name] = (proc, task, reader)
        self.result.tasks.append(task)
        self.board.update(name, f"started (attempt {attempt})")

    def say(self, message: str) -> None:
        if self.show == "status":
            self.board.note(message)
        elif self.show == "lines":
            print(message, flush=True)

    def stop(self, names, reason: str, kill: bool = False) -> None:
        """Stop these tasks' process groups together and record how they ended."""
        entries = [self.current[name] for name in names]
        for proc, task, _ in entries:
            if task.ended is None and proc.poll() is None:
                task.stopped_by = reason
        processes.stop([proc for proc, _, _ in entries], self.stop_grace, kill=kill)
        for proc, task, reader in entries:
            reader.join(timeout=5)
            if task.ended is None:
                task.ended, task.returncode = time.monotonic(), proc.returncode

    def running(self) -> list[str]:
        return [name for name, (_, task, _) in self.current.items() if task.ended is None]

    def read(self, wait: float = 0.2) -> None:
        """Show the lines that arrived (waiting up to ``wait`` seconds for the first; 0: not at all) and
        note each task's progress."""
        try:
            task, line = self.lines.get(timeout=wait) if wait > 0 else self.lines.get_nowait()
            while True:
                if task.progress.update(line) and task.ended is None:
                    self.board.update(task.name, task.progress.describe())
                if self.show == "lines" and not NOISE.search(line):
                    print(f"{task.name} | {line}", flush=True)
                task, line = self.lines.get_nowait()
        except queue.Empty:
            pass

    def reap(self) -> list[str]:
        """Record the tasks that exited by themselves; return those that failed."""
        exited = [name for name in self.running() if self.current[name][0].poll() is not None]
        self.stop(exited, "exit")  # their leaders are gone: take their children too
        if exited:  # stop() joined their readers: their last lines are queued; note them before the status
            self.read(wait=0)
        for name in exited:
            task = self.current[name][1]
            self.board.update(name, f"exited with code {task.returncode} ({task.progress.describe()})")
            if task.returncode != 0:
                self.say(f"[launcher] {name} exited with code {task.returncode}")
        return [name for name in exited if self.current[name][1].returncode != 0]

    def inject(self, fault: Fault) -> str:
        """Kill the fault's task; restart it if asked; return the fault's restart mode."""
        task = self.current[fault.task][1]
        self.say(f"[launcher] fault: killing {fault.task} at {task.progress.describe()}")
        self.stop([fault.task], "fault", kill=True)
        self.result.fault_at = time.monotonic()
        self.board.update(fault.task, f"killed by the fault at {task.progress.describe()}")
        if fault.restart == "task":
            self.say(f"[launcher] restarting {fault.task}")
            self.start(self.by_name[fault.task], task.attempt + 1)
        return fault.restart

    def run(self, timeout, start_timeout, fail_grace, fault, wait_for, check) -> RunResult:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.tmp_root = tempfile.mkdtemp(prefix="tasks-tmp-", dir=self.log_dir)
        t0, attempt, failed_at, restart_at, pending = time.monotonic(), 1, None, None, fault
        try:
            for member in self.members:
                self.start(member, attempt)
            while True:
                self.read()
                failed = self.reap()
                now = time.monotonic()  # after reap(): a failure counts from when it was seen, not before
                if failed and failed_at is None and restart_at is None:
                    failed_at = now
                if pending is not None and pending.task in self.running():
                    task = self.current[pending.task][1]
                    if pending.due(task.progress, now - task.started):
                        mode, pending, now = self.inject(pending), None, time.monotonic()
                        restart_at = now if mode == "cluster" else None
                        failed_at = now if mode is None else failed_at
                running = self.running()
                if restart_at is not None:  # wait for the others to fail (or stop them), then start again
                    if not running or now - restart_at > fail_grace:
                        self.stop(running, "stop")
                        attempt, restart_at, failed_at = attempt + 1, None, None
                        self.say(f"[launcher] restarting the cluster (attempt {attempt})")
                        for member in self.members:
                            self.start(member, attempt)
                    continue
                if failed_at is not None:
                    if not running or now - failed_at > fail_grace:
                        break
                    continue
                waited = [n for n in running if n.split()[0] in wait_for]
                if not waited:
                    break
                silent = sorted(n for n in waited if self.current[n][1].progress.describe() == "no progress yet"
                                and now - self.current[n][1].started > start_timeout)
                if silent or now - t0 > timeout:
                    why = (f"{', '.join(silent)} reported no progress within {start_timeout:g} s: did it start "
                           "and connect to the others?" if silent else f"the run took longer than {timeout:g} s")
                    tails = self.tails(silent or sorted(running))
                    self.stop(running, "stop")
                    self.result.wall_s = time.monotonic() - t0
                    raise ClusterTimeout(f"Stopped the cluster: {why}\n{tails}", self.result)
        finally:
            try:
                self.stop(self.running(), "stop")
                self.read()
            finally:
                shutil.rmtree(self.tmp_root, ignore_errors=True)
                self.board.close()
        self.result.wall_s = time.monotonic() - t0
        if check and not self.result.ok:
            bad = [t.name for t in self.result.latest() if t.returncode != 0 and t.stopped_by is None]
            raise TaskFailed(f"{', '.join(bad) or 'A task'} failed.\n{self.tails(bad)}\n{self.result.table()}",
                             self.result)
        return self.result

    def tails(self, names) -> str:
        parts = []
        for name in names:
            task = self.current[name][1]
            tail = "\n".join(f"  {line}" for line in task.last_lines()) or "  (no output)"
            parts.append(f"--- last lines of {name} (full log: {task.log_path}):\n{tail}")
        return "\n".join(parts)
