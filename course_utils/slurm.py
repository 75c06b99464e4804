"""Slurm for the course: a local one-node cluster, a submit helper, and a resolver for CPU-only nodes.

:func:`local_cluster` starts a private Slurm cluster on this machine (Debian's ``slurm-wlm`` and ``munge``;
:func:`available` says whether it can): its own munge key, ``slurm.conf``, ports, state and logs in a
temporary directory (a system Slurm is never touched), ``munged``, ``slurmctld`` and ``slurmd`` as child
processes (:mod:`course_utils.processes`). On exit, error or Ctrl-C it cancels the jobs, stops its daemons,
kills what the jobs left (:func:`leftovers`) and removes the directory. :func:`submit` runs ``sbatch`` and
waits; a job Slurm would leave pending forever (more tasks than CPUs: reason ``PartitionConfig``) is
cancelled and raises :class:`JobNeverStarts`, saying what to change. What runs inside a job's tasks
(the resolver, the ``TF_CONFIG`` wrapper) is in :mod:`course_utils.slurm_tasks`.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from course_utils import processes

SBIN = "/usr/sbin:/sbin"  # Debian's daemons live there, outside a normal user's PATH
COMMANDS = ("munged", "slurmctld", "slurmd", "sinfo", "sbatch", "scontrol", "scancel", "squeue")
# Pending reasons that never resolve on a cluster nobody reconfigures: the job asks for what is not there.
NEVER_STARTS = {"PartitionConfig", "PartitionNodeLimit", "PartitionTimeLimit", "BadConstraints",
                "ReqNodeNotAvail", "InvalidAccount", "InvalidQOS", "DependencyNeverSatisfied"}
FINISHED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
            "BOOT_FAIL", "DEADLINE"}


class SlurmError(RuntimeError):
    """The local cluster did not start, or Slurm refused a command (the message says why)."""


class JobFailed(SlurmError):
    """A job ended other than COMPLETED with exit code 0; ``.job`` holds its :class:`Job`."""

    def __init__(self, message: str, job: Job):
        super().__init__(message)
        self.job = job


class JobNeverStarts(JobFailed):
    """A job that Slurm would keep pending forever; it was cancelled."""


class JobTimeout(JobFailed):
    """A job unfinished after the ``timeout`` given to :func:`submit`; it was cancelled."""


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
    node: str  # this machine's short host name
    cpus: int
    env: dict
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
        return subprocess.run([str(c) for c in command], env={**self.env, **(env or {})}, cwd=cwd,
                              capture_output=True, text=True, check=check, timeout=timeout)


def _write_conf(directory: Path, settings: dict) -> LocalCluster:
    import portpicker  # noqa: PLC0415

    node, cpus = socket.gethostname().split(".")[0], os.cpu_count() or 1
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
    lines += [f"NodeName={node} CPUs={cpus} State=UNKNOWN",
              f"PartitionName=course Nodes={node} Default=YES MaxTime=INFINITE State=UP"]
    (directory / "slurm.conf").write_text("\n".join(lines) + "\n")
    for name in ("state", "spool"):
        (directory / name).mkdir()
    env = {**os.environ, "SLURM_CONF": str(directory / "slurm.conf")}
    return LocalCluster(directory, directory / "slurm.conf", node, cpus, env)


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
        return cluster.run("sinfo", "-h", "-N", "-o", "%t", check=False, timeout=2).stdout.strip() == "idle"
    except subprocess.TimeoutExpired:
        return False


@contextlib.contextmanager
def local_cluster(*, start_timeout: float = 120.0, settings: dict | None = None):
    """Start a one-node Slurm cluster (see the module's docstring); yield its :class:`LocalCluster`.

    ``settings``: ``slurm.conf`` lines to add or change (``{"KillWait": 5}``). A daemon that exits, or a
    node not idle after ``start_timeout`` seconds (about 1 s here; the margin is for a loaded machine),
    raises :class:`SlurmError` with the daemons' last log lines.
    """
    ok, why = available()
    if not ok:
        raise SlurmError(f"Cannot start a local Slurm cluster: {why}")
    directory = Path(tempfile.mkdtemp(prefix="course-slurm-"))
    directory.chmod(0o711)  # munged: every user must be able to reach its socket
    cluster = None
    try:
        cluster = _write_conf(directory, settings or {})
        key = directory / "munge.key"  # our own key: no other munged accepts our credentials
        key.touch(mode=0o600)
        key.write_bytes(os.urandom(128))
        output: queue.Queue = queue.Queue()  # the daemons' lines (each also in <name>.log)
        daemons = {"munged": ["--foreground", f"--socket={directory / 'munge.socket'}", f"--key-file={key}",
                              f"--pid-file={directory / 'munged.pid'}", f"--seed-file={directory / 'munged.seed'}"],
                   "slurmctld": ["-D", "-f", cluster.conf], "slurmd": ["-D", "-f", cluster.conf]}
        start = time.monotonic()
        deadline = start + start_timeout
        for name, args in daemons.items():
            cluster.daemons[name], cluster.readers[name] = processes.start(
                [_which(name), *args], env=cluster.env, lines=output, tag=name, log_path=directory / f"{name}.log")
            if name == "munged":  # Slurm's daemons need it from their first message on
                _wait(cluster, (directory / "munge.socket").exists, "munged's socket", deadline)
        _wait(cluster, lambda: _node_idle(cluster), f"node {cluster.node} to be idle (sinfo)", deadline)
        cluster.started_s = time.monotonic() - start
        yield cluster
    finally:
        if cluster is not None:
            _shut_down(cluster)
        shutil.rmtree(directory, ignore_errors=True)


def _shut_down(cluster: LocalCluster, grace: float = 10.0) -> None:
    """Cancel the jobs, stop the daemons (munged last), kill whatever the jobs left behind."""
    import psutil  # noqa: PLC0415

    slurm = [cluster.daemons[name] for name in ("slurmctld", "slurmd") if name in cluster.daemons]
    try:
        if len(slurm) == 2 and all(proc.poll() is None for proc in slurm):
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


def leftovers(directory) -> list:
    """Live processes of the local cluster in ``directory``: daemons whose command line names it, job
    steps and tasks (their ``SLURM_CONF`` is in it). This process and its ancestors are not counted."""
    import psutil  # noqa: PLC0415

    me = {os.getpid(), *(p.pid for p in psutil.Process().parents())}
    inside, found = str(Path(directory)) + os.sep, []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            if proc.pid not in me and proc.status() != psutil.STATUS_ZOMBIE and (
                    any(inside in arg for arg in proc.cmdline())
                    or proc.environ().get("SLURM_CONF", "").startswith(inside)):
                found.append(proc)
    return found


@dataclass
class Job:
    """A job as Slurm last showed it (``scontrol show job``), and how long we waited for it."""

    id: str
    state: str
    exit_code: int | None
    elapsed_s: float  # submitted to finished, as seen from here (Slurm's own count: fields["RunTime"])
    output: list[Path]  # its StdOut and StdErr files
    fields: dict  # every field of `scontrol show job`

    def text(self) -> str:
        """The job's output files, read back."""
        return "".join(path.read_text(errors="replace") for path in self.output if path.exists())


def job_fields(cluster: LocalCluster, job_id: str) -> dict:
    """``scontrol show job -o``, parsed: ``{"JobState": "PENDING", "Reason": "PartitionConfig", ...}``."""
    proc = cluster.run("scontrol", "show", "job", "-o", job_id, check=False)
    if proc.returncode != 0:
        raise SlurmError(f"scontrol show job {job_id} failed: {proc.stderr.strip()}")
    return dict(re.findall(r"(\S+?)=(.*?)(?= \S+?=|\s*$)", proc.stdout.strip()))


def _job(job_id: str, fields: dict, start: float) -> Job:
    code = fields.get("ExitCode", "")
    paths = dict.fromkeys(Path(fields[k]) for k in ("StdOut", "StdErr") if fields.get(k))
    return Job(job_id, fields.get("JobState", ""), int(code.split(":")[0]) if code[:1].isdigit() else None,
               time.monotonic() - start, list(paths), fields)


def _never_starts(job_id: str, fields: dict, cluster: LocalCluster) -> str:
    tasks, cpus = fields.get("NumTasks", "?"), int(fields.get("NumCPUs") or 0)
    nodes = fields.get("NumNodes", "1").split("-")[0]
    asks = f"{tasks} tasks ({cpus} CPUs{f', so {nodes} nodes' if nodes != '1' else ''})"
    message = (f"Slurm job {job_id} can never start (PENDING, reason {fields['Reason']}), so it was cancelled: "
               f"it asks for {asks}, and this cluster has 1 node ({cluster.node}) with {cluster.cpus} CPUs.")
    if cpus > cluster.cpus or nodes != "1":
        return message + (f" Ask for at most {cluster.cpus} CPUs on 1 node, e.g. #SBATCH --ntasks={cluster.cpus} "
                          "and --cpus-per-task=1 (or sbatch --ntasks=... on the command line).")
    return message + f" See `scontrol show job {job_id}` and change the job's #SBATCH lines."


def free_port_base(n: int, host: str = "localhost") -> int:
    """A port ``p`` such that ``p .. p+n-1`` are all free: ``SlurmClusterResolver(port_base=p)`` gives
    task ``i`` of a node the port ``p + i``."""
    import portpicker  # noqa: PLC0415

    from course_utils.tf_config import port_in_use  # noqa: PLC0415

    for _ in range(100):
        base = portpicker.pick_unused_port()
        if base + n <= 65536 and not any(port_in_use(host, base + i) for i in range(1, n)):
            return base
    raise SlurmError(f"found no {n} consecutive free ports on {host}")


@contextlib.contextmanager
def _interrupt_held():
    """Hold Ctrl-C (SIGINT, Jupyter's stop button) back for the block; yield a list that records it.

    ``sbatch`` creates the job before it prints the job's id: an interrupt in between would leave a job
    that nobody cancels. In the main thread only (signal handlers can be set there only).
    """
    caught: list = []
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return
    previous = signal.signal(signal.SIGINT, lambda *_: caught.append(True))
    try:
        yield caught
    finally:  # a handler installed from C reads as None: Python's default stands for it
        signal.signal(signal.SIGINT, signal.default_int_handler if previous is None else previous)


def submit(script, cluster: LocalCluster, *, args=(), options=(), cwd=None, env=None, timeout: float = 600,
           check: bool = True, poll: float = 0.2, show: bool = False) -> Job:
    """``sbatch --parsable *options script *args`` on ``cluster``, from ``cwd``, with ``env``'s variables
    added to the job's environment; wait for the job and return its :class:`Job`.

    ``show``: print the job's state (as ``squeue`` would show it) each time it changes.
    A job that can never start raises :class:`JobNeverStarts` at once, one unfinished after ``timeout``
    seconds :class:`JobTimeout`; both are cancelled, as is the job on Ctrl-C. With ``check``, a job that
    ends other than COMPLETED with exit code 0 raises :class:`JobFailed` with the end of its output.
    """
    start = time.monotonic()
    with _interrupt_held() as interrupted:  # Ctrl-C while sbatch hands the job over: cancelled below
        proc = cluster.run("sbatch", "--parsable", *options, Path(script).resolve(), *args,
                           check=False, cwd=cwd, env=env)
    if proc.returncode != 0:
        if interrupted:
            raise KeyboardInterrupt
        raise SlurmError(f"sbatch refused {script}: {proc.stderr.strip()}")
    job_id = proc.stdout.strip().split(";")[0]
    seen = None
    try:
        if interrupted:
            raise KeyboardInterrupt
        while True:
            fields = job_fields(cluster, job_id)
            state = (fields.get("JobState"), fields.get("Reason"))
            if show and state != seen:
                print(f"job {job_id} at {time.monotonic() - start:5.1f} s: {state[0]}"
                      + (f" ({state[1]})" if state[1] not in (None, "None") else ""), flush=True)
                seen = state
            if state[0] in FINISHED:
                break
            if fields.get("JobState") == "PENDING" and fields.get("Reason") in NEVER_STARTS:
                raise JobNeverStarts(_never_starts(job_id, fields, cluster), _job(job_id, fields, start))
            if time.monotonic() - start > timeout:
                raise JobTimeout(f"Slurm job {job_id} ({fields.get('JobState')}) did not finish within "
                                 f"{timeout:g} s, so it was cancelled: give submit() a longer timeout, or "
                                 "the job less to do.", _job(job_id, fields, start))
            time.sleep(poll)
    except (JobFailed, KeyboardInterrupt):  # an interrupt (Jupyter's stop button) cancels the job too
        cluster.run("scancel", job_id, check=False)
        raise
    job = _job(job_id, fields, start)
    if check and (job.state != "COMPLETED" or job.exit_code != 0):
        tail = "\n".join(job.text().splitlines()[-15:])
        raise JobFailed(f"Slurm job {job_id} ended {job.state} with exit code {job.exit_code}; "
                        f"its output ({', '.join(map(str, job.output))}) ends:\n{tail}", job)
    return job
