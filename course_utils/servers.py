"""Servers for parameter-server training: start the workers and parameter servers, return at once.

With ``ParameterServerStrategy`` the program runs in one process, the coordinator (here: the notebook's
kernel). The workers and parameter servers only run ``tf.distribute.Server`` and wait for work. So,
unlike :func:`course_utils.cluster.run`, which waits for its tasks to finish, :func:`start` starts
the server tasks of a cluster and returns a :class:`Servers` handle while they keep running::

    with servers.start("workers/ps_server.py", cluster=spec, threads=1) as tasks:
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
import socket
import threading
import time

from course_utils import tf_config as tfc
from course_utils.cluster import ClusterError, ClusterTimeout, Launcher, RunResult, job

# Measured (TensorFlow 2.21): a worker with one inter-op thread never runs a scheduled function. TensorFlow's
# parameter-server tutorial gives workers num_workers + 1 of them, on machines with fewer cores than that.
MIN_WORKER_INTEROP = 2


class Servers:
    """The running server tasks of one cluster (what :func:`start` returns); a context manager.

    It owns a :class:`~course_utils.cluster.Launcher` whose tasks are never waited for: a background
    thread shows their output, and :meth:`stop` (or leaving the ``with`` block) closes the launcher.
    """

    def __init__(self, launcher: Launcher):
        self.launcher, self.cluster = launcher, launcher.job.cluster
        self.names = launcher.job.names()
        self._owner = threading.get_ident()
        self._closed, self._stopping = threading.Event(), threading.Lock()
        self._pump = threading.Thread(target=self._drain, name="servers-output", daemon=True)
        self._pump.start()

    def _drain(self) -> None:  # follow the tasks' output in the background (progress, optional printing)
        while not self._closed.is_set():
            self.launcher.read(wait=0.2)

    @property
    def result(self) -> RunResult:
        """Every process started so far (restarts included), with exit codes once they ended."""
        return self.launcher.result

    def running(self) -> list[str]:
        """The tasks whose process is alive (``"worker 0"``, ``"ps 1"``, ...)."""
        self.launcher.reap(drain=False)  # the output thread reads their lines
        return self.launcher.running()

    def table(self) -> str:
        self.launcher.reap(drain=False)
        return self.launcher.result.table()

    def _check(self, name: str) -> None:
        if name not in self.names:
            raise ValueError(f"{name!r} is not one of these servers ({', '.join(self.names)})")

    def wait_listening(self, timeout: float = 60.0, ready: str | None = None) -> float:
        """Wait until every task accepts connections on its port (and, with ``ready``, has a line
        containing it in its log); return the seconds it took."""
        t0 = time.monotonic()
        for name in self.names:
            kind, index = name.split()
            host, port = self.cluster[kind][int(index)].rsplit(":", 1)
            self._wait(name, (f"exited before it listened on {host}:{port}", f"did not listen on {host}:{port}"),
                       lambda h=host, p=int(port): _accepts(h, p), t0, timeout)
            if ready is not None:
                log = self.launcher.task(name).log_path
                self._wait(name, (f"exited before it printed {ready!r}",
                                  f"listens on {host}:{port} but did not print {ready!r}"),
                           lambda f=log: f.exists() and ready in f.read_text(errors="replace"), t0, timeout)
        return time.monotonic() - t0

    def _wait(self, name: str, goal: tuple, done, t0: float, timeout: float) -> None:
        """Wait until ``done()``; ``goal``: what went wrong if the task exits first, or if time runs out."""
        while not done():
            if name not in self.running():
                raise ClusterError(f"{name} {goal[0]}:\n{self.launcher.tails([name])}", self.result)
            if time.monotonic() - t0 > timeout:
                raise ClusterTimeout(f"{name} {goal[1]} within {timeout:g} s:\n"
                                     f"{self.launcher.tails([name])}", self.result)
            time.sleep(0.05)

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
        self._check(name)
        self.launcher.stop([name], "fault", kill=True)

    def restart(self, *names: str) -> None:
        """Start these tasks again (all of them if none is named), on the same ports; a task still
        running is killed first. Call it from the thread that called :func:`start` (the notebook's):
        Linux kills a child when the *thread* that started it ends."""
        if threading.get_ident() != self._owner:
            raise RuntimeError("Call restart() from the thread that started the servers: a process started "
                               "from another thread is killed when that thread ends.")
        names = names or tuple(self.names)
        for name in names:
            self._check(name)
        alive = [name for name in names if name in self.running()]
        if alive:
            self.launcher.stop(alive, "fault", kill=True)
        for name in names:
            self.launcher.start(name, self.launcher.task(name).attempt + 1)

    def stop(self) -> None:
        """Stop every task (SIGTERM, then SIGKILL after the grace period) and remove their temporary files."""
        with self._stopping:  # the caller and an atexit handler may both stop
            if self._closed.is_set():
                return
            self._closed.set()  # the output thread first, so that close() reads the last lines alone, in order
            self._pump.join(timeout=2)
            self.launcher.close()

    def __enter__(self) -> Servers:
        return self

    def __exit__(self, *exc) -> bool:
        self.stop()
        return False


def _accepts(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=1).close()
        return True
    except OSError:
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
    if show not in ("quiet", "lines"):
        raise ValueError(f"show must be 'quiet' or 'lines', not {show!r}")
    members = [m for m in tfc.tasks(cluster) if m[0] in types]
    if not members:
        raise tfc.TFConfigError(f"The cluster {cluster!r} has no task of the types {', '.join(types)}.")
    the_job = job(script, module, cluster, members, args=args, env=env, threads=threads, cpus=cpus, gpus=gpus,
                  log_dir=log_dir, stop_grace=stop_grace, interop=interop)
    launcher = Launcher(the_job, show).__enter__()
    try:
        launcher.start_all(1)
    except BaseException:
        launcher.close()
        raise
    return Servers(launcher)


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
