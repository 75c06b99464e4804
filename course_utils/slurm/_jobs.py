"""Jobs on the local cluster: ``sbatch`` and wait, jobs that never start, what a job left."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from course_utils import processes
from course_utils.slurm._daemons import LocalCluster, SlurmError
from course_utils.tf_config import port_in_use

# Pending reasons that never resolve on a cluster nobody reconfigures: the job asks for what is not there.
NEVER_STARTS = {"PartitionConfig", "PartitionNodeLimit", "PartitionTimeLimit", "BadConstraints",
                "ReqNodeNotAvail", "InvalidAccount", "InvalidQOS", "DependencyNeverSatisfied"}
FINISHED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
            "BOOT_FAIL", "DEADLINE"}


class JobFailed(SlurmError):
    """A job ended other than COMPLETED with exit code 0; ``.job`` holds its :class:`Job`."""

    def __init__(self, message: str, job: Job):
        super().__init__(message)
        self.job = job


class JobNeverStarts(JobFailed):
    """A job that Slurm would keep pending forever; it was cancelled."""


class JobTimeout(JobFailed):
    """A job unfinished after the ``timeout`` given to :func:`submit`; it was cancelled."""


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
    n = len(cluster.nodes)
    has = (f"1 node ({cluster.node}) with {cluster.cpus} CPUs" if n == 1 else
           f"{n} nodes ({', '.join(cluster.nodes)}) with {cluster.cpus} CPU{'s' * (cluster.cpus > 1)} each")
    message = (f"Slurm job {job_id} can never start (PENDING, reason {fields['Reason']}), so it was cancelled: "
               f"it asks for {asks}, and this cluster has {has}.")
    if cpus > cluster.cpus * n or int(nodes) > n or (n == 1 and nodes != "1"):
        cpu_word = "CPU" if cluster.cpus == 1 else "CPUs"
        return message + (f" Ask for at most {cluster.cpus} {cpu_word} on each of at most {n} node(s), e.g. "
                          f"#SBATCH --nodes={n} --ntasks-per-node={cluster.cpus} and --cpus-per-task=1 "
                          "(or the same options on sbatch's command line).")
    return message + (f" At most {cluster.cpus} CPUs fit on one node: see `scontrol show job {job_id}` and "
                      "change the job's #SBATCH lines (--ntasks-per-node, --cpus-per-task).")


def free_port_base(n: int, host: str = "localhost") -> int:
    """A port ``p`` such that ``p .. p+n-1`` are all free: ``SlurmClusterResolver(port_base=p)`` gives
    task ``i`` of a node the port ``p + i``."""
    import portpicker  # noqa: PLC0415

    for _ in range(100):
        base = portpicker.pick_unused_port()
        if base + n <= 65536 and not any(port_in_use(host, base + i) for i in range(1, n)):
            return base
    raise SlurmError(f"found no {n} consecutive free ports on {host}")


def requeued_starter(cluster: LocalCluster, after_s: int = 2):
    """An ``on_poll`` hook for :func:`submit` that starts a requeued job ``after_s`` seconds after its requeue.

    Slurm holds a requeued job back for about two minutes (reason ``BeginTime``); its owner may move the start
    (``scontrol update JobId=... StartTime=...``). Not to "now": Slurm revokes the old run's job credential at
    the requeue, to the second, and a run started within that second is refused, and the job FAILS. Slurm may
    set its own begin time again while the old run completes, so the hook repeats the same time at every
    look until the job runs; the next requeue gets a new time.
    """
    due: dict[str, str] = {}

    def start(job_id: str, fields: dict) -> None:
        if fields.get("JobState") == "RUNNING":
            due.pop(job_id, None)
        elif fields.get("Reason") == "BeginTime":
            when = due.setdefault(job_id, (datetime.now() + timedelta(seconds=after_s)).isoformat(timespec="seconds"))
            cluster.run("scontrol", "update", f"JobId={job_id}", f"StartTime={when}")

    return start


def submit(script, cluster: LocalCluster, *, args=(), options=(), cwd=None, env=None, timeout: float = 600,
           check: bool = True, poll: float = 0.2, show: bool = False, on_poll=None) -> Job:
    """``sbatch --parsable *options script *args`` on ``cluster``, from ``cwd``, with ``env``'s variables
    added to the job's environment; wait for the job and return its :class:`Job`.

    ``show``: print the job's state (as ``squeue`` would show it) each time it changes. ``on_poll``:
    called with the job's id and its fields (``scontrol show job``) at every look until it ends, to act on
    the job meanwhile (``scontrol requeue``).
    A job that can never start raises :class:`JobNeverStarts` at once, one unfinished after ``timeout``
    seconds :class:`JobTimeout`; both are cancelled, as is the job on Ctrl-C. With ``check``, a job that
    ends other than COMPLETED with exit code 0 raises :class:`JobFailed` with the end of its output.
    """
    start, job_id, seen = time.monotonic(), None, None
    try:
        with processes.interrupts_held():  # sbatch creates the job, then prints its id: Ctrl-C waits for the id
            proc = cluster.run("sbatch", "--parsable", *options, Path(script).resolve(), *args,
                               check=False, cwd=cwd, env=env)
            if proc.returncode == 0:
                job_id = proc.stdout.strip().split(";")[0]
        if job_id is None:
            raise SlurmError(f"sbatch refused {script}: {proc.stderr.strip()}")
        while True:
            fields = job_fields(cluster, job_id)
            state = (fields.get("JobState"), fields.get("Reason"))
            if show and state != seen:
                print(f"job {job_id} at {time.monotonic() - start:5.1f} s: {state[0]}"
                      + (f" ({state[1]})" if state[1] not in (None, "None") else ""), flush=True)
                seen = state
            if state[0] in FINISHED:
                break
            if on_poll is not None:
                on_poll(job_id, fields)
            if fields.get("JobState") == "PENDING" and fields.get("Reason") in NEVER_STARTS:
                raise JobNeverStarts(_never_starts(job_id, fields, cluster), _job(job_id, fields, start))
            if time.monotonic() - start > timeout:
                raise JobTimeout(f"Slurm job {job_id} ({fields.get('JobState')}) did not finish within "
                                 f"{timeout:g} s, so it was cancelled: give submit() a longer timeout, or "
                                 "the job less to do.", _job(job_id, fields, start))
            time.sleep(poll)
    except (JobFailed, KeyboardInterrupt):  # an interrupt (Jupyter's stop button) cancels the job too
        if job_id is not None:
            cluster.run("scancel", job_id, check=False)
        raise
    job = _job(job_id, fields, start)
    if check and (job.state != "COMPLETED" or job.exit_code != 0):
        tail = "\n".join(job.text().splitlines()[-15:])
        raise JobFailed(f"Slurm job {job_id} ended {job.state} with exit code {job.exit_code}; "
                        f"its output ({', '.join(map(str, job.output))}) ends:\n{tail}", job)
    return job
