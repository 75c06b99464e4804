"""The local cluster's daemons: a private ``munged``, ``slurmctld`` and ``slurmd``, started and always stopped."""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from course_utils import processes
from course_utils.slurm import _janitor, _nodes
from course_utils.slurm._janitor import leftovers

SBIN = "/usr/sbin:/sbin"  # Debian's daemons live there, outside a normal user's PATH
COMMANDS = ("munged", "slurmctld", "slurmd", "sinfo", "sbatch", "scontrol", "scancel", "squeue")


class SlurmError(RuntimeError):
    """The local cluster did not start, or Slurm refused a command (the message says why)."""


def _which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path=SBIN)


def available() -> tuple[bool, str]:
    """``(True, "")`` if :func:`local_cluster` can run here, else ``(False, why and what to do)``."""
    missing = [name for name in COMMANDS if not _which(name)]
    if missing:
        return False, (f"Slurm is not installed (missing: {', '.join(missing)}): apt-get install slurm-wlm "
                       "munge, as root (`python3 tasks.py setup` does it)")
    if os.geteuid() != 0:
        return False, "the local Slurm cluster runs slurmd, which starts the jobs, as root: run as root (CI does)"
    return True, ""


@dataclass
class LocalCluster:
    """A running :func:`local_cluster`. Slurm commands need ``env`` (its ``SLURM_CONF`` names ``conf``)."""

    directory: Path
    conf: Path
    node: str  # the first node's host name (one node: this machine's short host name)
    cpus: int  # CPUs of each node
    env: dict
    nodes: list = field(default_factory=list)  # every node's host name
    prefix: list = field(default_factory=list)  # runs a Slurm command where slurmctld is (several nodes: its namespace)
    daemons: dict = field(default_factory=dict)  # name -> subprocess.Popen
    readers: dict = field(default_factory=dict)  # name -> the thread copying its output to <name>.log
    started_s: float = 0.0  # first daemon started to node idle

    @property
    def pids(self) -> dict[str, int]:
        return {name: proc.pid for name, proc in self.daemons.items()}

    def log_tail(self, name: str, n: int = 15) -> str:
        log = self.directory / f"{name}.log"
        lines = log.read_text(errors="replace").splitlines() if log.exists() else ["(no log)"]
        return "\n".join(f"  {name} | {line}" for line in lines[-n:])

    def run(self, *command, check=True, cwd=None, env=None, timeout=30.0) -> subprocess.CompletedProcess:
        """A Slurm command (``sinfo``, ``scontrol``, ...) on this cluster; ``env``: variables to add."""
        # its own session: Jupyter's interrupt goes to the kernel's process group, and `sbatch` must not be
        # killed after it created a job but before it printed the job's id
        return subprocess.run([str(c) for c in (*self.prefix, *command)], env={**self.env, **(env or {})}, cwd=cwd,
                              capture_output=True, text=True, check=check, timeout=timeout, start_new_session=True)


def _write_conf(directory: Path, settings: dict, nodes=None, cpus_per_node: int | None = None) -> LocalCluster:
    import portpicker  # noqa: PLC0415

    node, cpus = socket.gethostname().split(".")[0], os.cpu_count() or 1
    if nodes is not None:  # several nodes share this machine's cores
        node, cpus = nodes.names[0], max(1, cpus // len(nodes.names))
    cpus = cpus_per_node or cpus
    if nodes is not None:
        node_settings, node_lines = nodes.conf_lines(cpus)
        settings = {**node_settings, **settings}
    conf = {
        "ClusterName": "course", "SlurmctldHost": node, "SlurmUser": "root",
        "SlurmctldPort": portpicker.pick_unused_port(), "SlurmdPort": portpicker.pick_unused_port(),
        "AuthType": "auth/munge", "AuthInfo": f"socket={directory / 'munge.socket'}", "CredType": "cred/munge",
        "StateSaveLocation": directory / "state", "SlurmdSpoolDir": directory / "spool",
        "SlurmctldPidFile": directory / "slurmctld.pid", "SlurmdPidFile": directory / "slurmd.pid",
        # No systemd, no cgroups: track processes by their parents, bind nothing, account nothing.
        "ProctrackType": "proctrack/linuxproc", "TaskPlugin": "task/none",
        "JobAcctGatherType": "jobacct_gather/none", "AccountingStorageType": "accounting_storage/none",
        "SelectType": "select/cons_tres", "SelectTypeParameters": "CR_Core",
        "ReturnToService": 2, "MpiDefault": "none", "MailProg": "/bin/true",
        "SchedulerParameters": "batch_sched_delay=0",  # start a job at once, not ~2 s later
        "KillWait": 2,  # a cancelled job's tasks get SIGKILL 2 s after SIGTERM
        **settings,
    }
    lines = [f"{key}={value}" for key, value in conf.items()]
    lines += node_lines if nodes is not None else [
        f"NodeName={node} CPUs={cpus} State=UNKNOWN",
        f"PartitionName=course Nodes={node} Default=YES MaxTime=INFINITE State=UP"]
    (directory / "slurm.conf").write_text("\n".join(lines) + "\n")
    for name in ("state", "spool"):
        (directory / name).mkdir()
    env = {**os.environ, "SLURM_CONF": str(directory / "slurm.conf")}
    names = nodes.names if nodes is not None else [node]
    prefix = nodes.controller_prefix() if nodes is not None else []
    return LocalCluster(directory, directory / "slurm.conf", node, cpus, env, nodes=names, prefix=prefix)


def _wait(cluster: LocalCluster, ready, what: str, deadline: float) -> None:
    """Poll ``ready()`` until true; a daemon that exits, or the deadline, raises with the logs."""
    while True:
        for name, proc in cluster.daemons.items():
            if proc.poll() is not None:
                cluster.readers[name].join(timeout=5)  # its last lines are in its log before we read them
                raise SlurmError(f"{name} exited with code {proc.returncode} while waiting for {what}; "
                                 f"the last lines of its log:\n{cluster.log_tail(name)}")
        if ready():
            return
        if time.monotonic() > deadline:
            logs = "\n".join(cluster.log_tail(name) for name in cluster.daemons)
            raise SlurmError(f"timed out waiting for {what}; the daemons' last log lines:\n{logs}")
        time.sleep(0.1)


def _node_idle(cluster: LocalCluster) -> bool:
    try:  # sinfo retries for seconds while slurmctld is not listening: rather ask again
        return cluster.run("sinfo", "-h", "-N", "-o", "%t", check=False, timeout=2).stdout.split() == [
            "idle"] * len(cluster.nodes)
    except subprocess.TimeoutExpired:
        return False


@contextlib.contextmanager
def local_cluster(*, nodes: list[str] | None = None, cpus_per_node: int | None = None, start_timeout: float = 120.0,
                  settings: dict | None = None):
    """Start a local Slurm cluster (see the module's docstring); yield its :class:`LocalCluster`.

    ``nodes``: host names of several nodes (``["c9", "c10"]``), each ``slurmd`` in network and UTS
    namespaces of its own (:mod:`course_utils.slurm._nodes`), sharing this machine's cores; ``None``: one
    node, this machine. ``cpus_per_node``: the CPUs Slurm is told each node has (default: this machine's
    cores shared out); more places more tasks than cores (2 nodes x 2 tasks on 2 cores), sharing them.

    ``settings``: ``slurm.conf`` lines to add or change (``{"KillWait": 5}``). A daemon that exits, or a
    node not idle after ``start_timeout`` seconds (about 1 s here; the margin is for a loaded machine),
    raises :class:`SlurmError` with the daemons' last log lines.
    """
    ok, why = available()
    if not ok:
        raise SlurmError(f"Cannot start a local Slurm cluster: {why}")
    directory = Path(tempfile.mkdtemp(prefix="course-slurm-"))
    directory.chmod(0o711)  # munged: every user must be able to reach its socket
    cluster = janitor = network = None
    try:
        janitor = _janitor.start(directory)
        if nodes is not None:
            network = _nodes.Nodes(nodes, directory).__enter__()
        cluster = _write_conf(directory, settings or {}, network, cpus_per_node)
        key = directory / "munge.key"  # our own key: no other munged accepts our credentials
        key.touch(mode=0o600)
        key.write_bytes(os.urandom(128))
        output: queue.Queue = queue.Queue()  # the daemons' lines (each also in <name>.log)
        daemons = {"munged": ["--foreground", f"--socket={directory / 'munge.socket'}", f"--key-file={key}",
                              f"--pid-file={directory / 'munged.pid'}", f"--seed-file={directory / 'munged.seed'}"],
                   "slurmctld": [*cluster.prefix, _which("slurmctld"), "-D", "-f", cluster.conf]}
        if network is None:
            daemons["slurmd"] = [_which("slurmd"), "-D", "-f", cluster.conf]
        for node in cluster.nodes if network is not None else []:
            daemons[f"slurmd-{node}"] = [*network.node_prefix(node), _which("slurmd"), "-D", "-N", node,
                                         "-f", cluster.conf]
        daemons["munged"].insert(0, _which("munged"))
        start = time.monotonic()
        deadline = start + start_timeout
        for name, command in daemons.items():
            cluster.daemons[name], cluster.readers[name] = processes.start(
                command, env=cluster.env, lines=output, tag=name, log_path=directory / f"{name}.log")
            if name == "munged":  # Slurm's daemons need it from their first message on
                _wait(cluster, (directory / "munge.socket").exists, "munged's socket", deadline)
        _wait(cluster, lambda: _node_idle(cluster), f"node(s) {','.join(cluster.nodes)} to be idle (sinfo)", deadline)
        cluster.started_s = time.monotonic() - start
        yield cluster
    finally:
        try:
            try:
                if cluster is not None:
                    _shut_down(cluster)
            finally:
                if network is not None:
                    network.__exit__()
                shutil.rmtree(directory, ignore_errors=True)
        finally:
            if janitor is not None:  # stopped: the janitor's sweep finds nothing, and it exits
                janitor.stdin.close()
                janitor.wait(timeout=30)


def _shut_down(cluster: LocalCluster, grace: float = 10.0) -> None:
    """Cancel the jobs, stop the daemons (munged last), kill whatever the jobs left behind."""
    import psutil  # noqa: PLC0415

    slurm = [proc for name, proc in cluster.daemons.items() if name != "munged"]
    try:
        if len(slurm) == 1 + len(cluster.nodes) and all(proc.poll() is None for proc in slurm):
            jobs = cluster.run("squeue", "-h", "-o", "%A", check=False).stdout.split()
            if jobs:
                cluster.run("scancel", *jobs, check=False)
                deadline = time.monotonic() + grace
                while cluster.run("squeue", "-h", check=False).stdout.strip() and time.monotonic() < deadline:
                    time.sleep(0.1)
    finally:
        processes.stop(slurm)
        processes.stop([cluster.daemons["munged"]] if "munged" in cluster.daemons else [])
        left = leftovers(cluster.directory)  # job steps that outlived their job (none, if scancel worked)
        for proc in left:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        psutil.wait_procs(left, timeout=5)
