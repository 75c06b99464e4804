"""Servers for parameter-server training: start the workers and parameter servers, return at once.

With ``ParameterServerStrategy`` the program runs in one process, the coordinator (here: the notebook's
kernel). The workers and parameter servers only run ``tf.distribute.Server`` and wait for work. So,
unlike :func:`course_utils.cluster.run`, which waits for its tasks to finish, :func:`start` starts
the server tasks of a cluster and returns a :class:`Servers` handle while they keep running::

    with servers.start("ps/server.py", cluster=spec, threads=1) as tasks:
        tasks.wait_listening()
        ...                       # the coordinator's program: strategy, ClusterCoordinator, schedule
        tasks.join(coordinator)   # coordinator.join() with a timeout and a check that workers are left
        tasks.kill("worker 1")    # a lost machine; tasks.restart("worker 1") brings it back

Every task gets the *whole* cluster (chief included) in its ``TF_CONFIG``, its own process group, log
file and temporary directory, exactly as with :func:`course_utils.cluster.run`; whatever happens, the
tasks are stopped on :meth:`Servers.stop` (or leaving the ``with`` block), and by the ``atexit``
handler and ``PR_SET_PDEATHSIG`` of :mod:`course_utils.processes` otherwise (if this process is
killed outright, that ends the servers themselves; a child a server started would need its own).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path

from course_utils import processes
from course_utils import tf_config as tfc
from course_utils.cluster import Launcher, visible_gpus
from course_utils.run_results import ClusterError, ClusterTimeout, RunResult
from course_utils.task_output import NOISE

MIN_WORKER_INTEROP = 2  # measured: a worker with one inter-op thread never runs a scheduled function


class Servers:
    """The running server tasks of one cluster (what :func:`start` returns); a context manager."""

    def __init__(self, launcher: Launcher, show: str):
        self.launcher, self.cluster, self.show = launcher, launcher.cluster, show
        self.names = [tfc.task_name(*m) for m in launcher.members]
        self._owner = threading.get_ident()
        self._closed, self._stopping = threading.Event(), threading.Lock()
        self._pump = threading.Thread(target=self._drain, name="servers-output", daemon=True)
        self._pump.start()

    def _drain(self) -> None:  # follow the tasks' output in the background (progress, optional printing)
        while not self._closed.is_set():
            try:
                task, line = self.launcher.lines.get(timeout=0.2)
            except queue.Empty:
                continue
            task.progress.update(line)
            if self.show == "lines" and not NOISE.search(line):
                print(f"{task.name} | {line}", flush=True)

    @property
    def result(self) -> RunResult:
        """Every process started so far (restarts included), with exit codes once they ended."""
        return self.launcher.result

    def running(self) -> list[str]:
        """The tasks whose process is alive (``"worker 0"``, ``"ps 1"``, ...)."""
        self._reap()
        return self.launcher.running()

    def table(self) -> str:
        self._reap()
        return self.launcher.result.table()

    def _reap(self) -> None:
        exited = [n for n in self.launcher.running() if self.launcher.current[n][0].poll() is not None]
        if exited:
            self.launcher.stop(exited, "exit")  # their leaders are gone: take their children too

    def _task(self, name: str):
        if name not in self.names:
            raise ValueError(f"{name!r} is not one of these servers ({', '.join(self.names)})")
        return self.launcher.current[name][1]

    def wait_listening(self, timeout: float = 60.0, ready: str | None = None) -> float:
        """Wait until every task accepts connections on its port (and, with ``ready``, has a line
        containing it in its log); return the seconds it took."""
        t0 = time.monotonic()
        for name in self.names:
            kind, index = name.split()
            host, port = self.cluster[kind][int(index)].rsplit(":", 1)
            while True:
                if name not in self.running():
                    raise ClusterError(f"{name} exited before it listened on {host}:{port}:\n"
                                       f"{self.launcher.tails([name])}", self.result)
                try:
                    socket.create_connection((host, int(port)), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() - t0 > timeout:
                        raise ClusterTimeout(f"{name} did not listen on {host}:{port} within {timeout:g} s:\n"
                                             f"{self.launcher.tails([name])}", self.result) from None
                    time.sleep(0.1)
            log = self.launcher.current[name][1].log_path
            while ready is not None and ready not in (log.read_text(errors="replace") if log.exists() else ""):
                if name not in self.running():
                    raise ClusterError(f"{name} exited before it printed {ready!r}:\n"
                                       f"{self.launcher.tails([name])}", self.result)
                if time.monotonic() - t0 > timeout:
                    raise ClusterTimeout(f"{name} listens on {host}:{port} but did not print {ready!r} within "
                                         f"{timeout:g} s:\n{self.launcher.tails([name])}", self.result)
                time.sleep(0.05)
        return time.monotonic() - t0

    def join(self, coordinator, timeout: float = 600.0) -> float:
        """``coordinator.join()``, but bounded: fail with a message when no worker is left to run the
        scheduled functions, or after ``timeout`` seconds; return the seconds it waited."""
        t0 = time.monotonic()
        while not coordinator.done():  # raises the first error of a scheduled function, as join() does
            workers = [n for n in self.running() if n.startswith("worker ")]
            if not workers:
                raise ClusterError("Every worker has stopped, so the scheduled functions cannot run: restart "
                                   "one (servers.restart('worker 0')).\n" + self.table(), self.result)
            if time.monotonic() - t0 > timeout:
                raise ClusterTimeout(
                    f"The scheduled functions did not finish within {timeout:g} s. If no step finished at all, "
                    f"are the workers' inter-op thread pools big enough (at least {MIN_WORKER_INTEROP})?\n"
                    + self.launcher.tails(workers), self.result)
            time.sleep(0.05)
        coordinator.join()
        return time.monotonic() - t0

    def kill(self, name: str) -> None:
        """SIGKILL the task's process group, as if its machine were lost."""
        self._task(name)
        self.launcher.stop([name], "fault", kill=True)

    def restart(self, *names: str) -> None:
        """Start these tasks again (all of them if none is named), on the same ports; a task still
        running is killed first. Call it from the thread that called :func:`start` (the notebook's):
        Linux kills a child when the *thread* that started it ends."""
        if threading.get_ident() != self._owner:
            raise RuntimeError("Call restart() from the thread that started the servers: a process started "
                               "from another thread is killed when that thread ends.")
        names = names or tuple(self.names)
        old = [self._task(name) for name in names]
        alive = [name for name in names if name in self.running()]
        if alive:
            self.launcher.stop(alive, "fault", kill=True)
        for name, task in zip(names, old):
            self.launcher.start(self.launcher.by_name[name], task.attempt + 1)

    def stop(self) -> None:
        """Stop every task (SIGTERM, then SIGKILL after the grace period) and remove their temporary files."""
        with self._stopping:  # the caller and an atexit handler may both stop
            if self._closed.is_set():
                return
            self._stop()

    def _stop(self) -> None:
        try:
            self.launcher.stop(self.launcher.running(), "stop")
        finally:
            self._closed.set()
            self._pump.join(timeout=2)
            shutil.rmtree(self.launcher.tmp_root, ignore_errors=True)

    def __enter__(self) -> Servers:
        return self

    def __exit__(self, *exc) -> bool:
        self.stop()
        return False


def start(script=None, *, module: str | None = None, cluster: dict, types=("worker", "ps"), args=(),
          threads: int | None = None, interop_threads: dict | None = None, env: dict | None = None,
          cpus="auto", gpus="auto", log_dir="logs/servers", show: str = "quiet",
          stop_grace: float = 5.0) -> Servers:
    """Start ``python script *args`` (or ``python -m module``) for each task of ``cluster`` whose type is
    in ``types``, and return at once. Each task's ``TF_CONFIG`` has the whole cluster, so the tasks
    left out (the chief: this process) can join it later.

    ``threads``, ``cpus`` and ``gpus`` as for :func:`course_utils.cluster.run`. ``interop_threads``:
    TensorFlow inter-op thread counts by task type (the pool that runs independent operations side by
    side); by default workers and parameter servers get the number of workers + 1 (or ``threads``, if
    more). A worker with fewer than 2 is refused: with one, the functions scheduled on it never run, and
    nothing says why. ``show``: ``"quiet"`` (logs only) or ``"lines"``.
    """
    interop = dict(interop_threads or {})
    for kind in ("worker", "ps"):  # never fewer than workers + 1 (and never TensorFlow's 1 on a 1-core machine)
        interop.setdefault(kind, max(threads or 0, len(cluster.get("worker", [])) + 1, MIN_WORKER_INTEROP))
    if interop["worker"] < MIN_WORKER_INTEROP:
        raise ValueError(f"A ParameterServerStrategy worker needs at least {MIN_WORKER_INTEROP} inter-op threads "
                         f"(got {interop['worker']}): with fewer, schedule() and join() wait forever.")
    members = [m for m in tfc.tasks(cluster) if m[0] in types]
    if not members:
        raise tfc.TFConfigError(f"The cluster {cluster!r} has no task of the types {', '.join(types)}.")
    for k, (kind, i) in enumerate(members):
        tfc.validate({"cluster": cluster, "task": {"type": kind, "index": i}}, check_ports=k == 0)
    if (script is None) == (module is None):
        raise ValueError("Give either a script path or module=")
    if show not in ("quiet", "lines"):
        raise ValueError(f"show must be 'quiet' or 'lines', not {show!r}")
    cpus = processes.cores_per_task(cpus, threads, len(members))
    command = ["-m", module] if module else [str(Path(script).resolve())]
    launcher = Launcher(command, cluster, members, cpus, visible_gpus() if gpus == "auto" else gpus,
                        tuple(args), {"TF_FORCE_GPU_ALLOW_GROWTH": "true", **(env or {})}, threads,
                        Path(log_dir).resolve(), "quiet", stop_grace, interop=interop)
    launcher.log_dir.mkdir(parents=True, exist_ok=True)
    launcher.tmp_root = tempfile.mkdtemp(prefix="tasks-tmp-", dir=launcher.log_dir)
    try:
        for member in members:
            launcher.start(member, 1)
    except BaseException:
        launcher.stop(launcher.running(), "stop")
        shutil.rmtree(launcher.tmp_root, ignore_errors=True)
        raise
    return Servers(launcher, show)


@contextlib.contextmanager
def coordinator_log(level: int = logging.INFO):
    """Collect what TensorFlow's Python logger says in the block at ``level`` and above (a coordinator
    logs every failed remote call at length, and at INFO its recovery: "Cluster successfully recovered.")
    instead of printing it; yields the list of messages, appended as they come."""
    logger, messages = logging.getLogger("tensorflow"), []
    collector = logging.Handler()
    collector.emit = lambda record: messages.append(record.getMessage())
    handlers, propagate, level_before = logger.handlers[:], logger.propagate, logger.level
    logger.handlers, logger.propagate = [collector], False
    logger.setLevel(level)
    try:
        yield messages
    finally:
        logger.handlers, logger.propagate = handlers, propagate
        logger.setLevel(level_before)
