"""Inside a Slurm task: where every task of the job step listens, read from Slurm's own variables, and
``TF_CONFIG`` from it.

TensorFlow's ``SlurmClusterResolver`` (tensorflow/python/distribute/cluster_resolver/slurm_cluster_resolver.py)
misplaces tasks on common clusters: it orders the nodes by sorting their names as strings (``c10`` before
``c9``, while Slurm numbers the tasks in its host list's order), counts GPUs with ``nvidia-smi`` (which
CPU-only nodes lack), divides a task's GPUs by the tasks per node (``--gpus-per-task=1`` with two tasks
gives 0 and a crash) and overwrites the ``CUDA_VISIBLE_DEVICES`` Slurm set. :func:`layout` instead:

- runs only in a job step (``srun``): the batch script itself has no ``SLURM_STEP_*`` variables, and a worker
  started there would wait forever for peers that never start;
- orders the tasks as Slurm numbers them (``SLURM_PROCID``): the step's host list in Slurm's order
  (:mod:`course_utils.slurm_hostlist`, plain Python), its tasks per node, ``block`` distribution (Slurm's
  default) or ``cyclic``; it checks the result against what Slurm told this task (its node
  ``SLURMD_NODENAME``, rank and local id) and refuses other distributions (``plane``, ``arbitrary``, the
  ``,pack``/``,nopack`` suffixes), which place tasks where its variables do not say;
- gives task ``i`` of a node the port ``port_base + i``; the default base comes from the job id and the step
  id (:func:`default_port_base`: two jobs, or two steps of one job, on a node do not collide; Slurm's MPI
  ports 12000-12999 are avoided), and at most ``PORTS_PER_JOB`` tasks per node use it;
- writes each address as the node's name plus an optional suffix (``-ib0``: the fast network's name of the
  node) or as a map says (``host_map``), so that the all-reduce does not go over the management Ethernet;
- leaves the GPUs as Slurm gave them, or shares one list out by local rank (:mod:`course_utils.slurm_gpus`).

``python -m course_utils.slurm_tasks tf-config -- COMMAND`` checks that this task's port is free, sizes
TensorFlow's thread pools to the CPUs this task may use, prints its place and runs COMMAND with it as
``TF_CONFIG`` (``cluster/slurm/``). Nothing here imports TensorFlow or starts Slurm (that is
:mod:`course_utils.slurm`).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from course_utils import slurm_gpus
from course_utils.slurm_hostlist import expand_hostlist, expand_tasks_per_node

PORTS_PER_JOB = 16  # the ports one job step may use on a node: task i of a node listens on base + i
FIRST_PORT = 13000  # above Slurm's usual MPI ports (MpiParams=ports=12000-12999)
LAST_PORT = 32767  # below Linux's ephemeral range (32768-60999), where outgoing connections take theirs
PORT_SLOTS = (LAST_PORT + 1 - FIRST_PORT) // PORTS_PER_JOB  # 1,235


@dataclass(frozen=True)
class Layout:
    """This task's place in its job step, as Slurm numbers the tasks."""

    addresses: list[str]  # "host:port" of every task, index = SLURM_PROCID
    rank: int  # this task's SLURM_PROCID
    local_rank: int  # its index among its node's tasks (SLURM_LOCALID)
    gpus: list[str]  # the GPUs this task is to see ([] on CPU-only nodes)
    set_visible_devices: bool  # True when CUDA_VISIBLE_DEVICES is to be set to ``gpus``
    gpus_how: str = "none"  # where the GPUs came from (slurm_gpus.Gpus.how)

    def tf_config(self) -> dict:
        return {"cluster": {"worker": list(self.addresses)}, "task": {"type": "worker", "index": self.rank}}

    @property
    def port(self) -> int:
        return int(self.addresses[self.rank].rsplit(":", 1)[1])


def _need(env: Mapping[str, str], name: str) -> str:
    if env.get(name):
        return env[name]
    raise SystemExit(f"{name} is not set: run this inside a Slurm job step (srun ... python -m "
                     "course_utils.slurm_tasks ...), where Slurm sets it. Run in the batch script itself, a "
                     "worker would wait forever for peers that never start.")


def default_port_base(job_id: int, step_id: int = 0) -> int:
    """Ports 13000-32767, ``PORTS_PER_JOB`` per job step: jobs whose ids differ by less than 1,235 never share
    one, and step 1 of a job is half the range away from its step 0."""
    return FIRST_PORT + ((job_id + step_id * (PORT_SLOTS // 2)) % PORT_SLOTS) * PORTS_PER_JOB


def task_order(hosts: list[str], counts: list[int], distribution: str = "block") -> list[tuple[str, int]]:
    """``(host, local index)`` of every task, index = its rank, for Slurm's ``block`` or ``cyclic`` layout."""
    if len(hosts) != len(counts):
        raise SystemExit(f"Slurm lists {len(hosts)} nodes ({','.join(hosts)}) but tasks for {len(counts)}: "
                         "the step's SLURM_STEP_NODELIST and SLURM_STEP_TASKS_PER_NODE disagree.")
    if distribution == "block":
        return [(host, i) for host, count in zip(hosts, counts) for i in range(count)]
    order, placed = [], [0] * len(hosts)
    while len(order) < sum(counts):  # cyclic: one task per node in turn, skipping full nodes
        for n, host in enumerate(hosts):
            if placed[n] < counts[n]:
                order.append((host, placed[n]))
                placed[n] += 1
    return order


def _distribution(env: Mapping[str, str]) -> str:
    """The node-level distribution of ``SLURM_DISTRIBUTION`` (``block:cyclic`` -> block), or a refusal."""
    given = env.get("SLURM_DISTRIBUTION", "")
    nodes_level = given.split(",")[0].split(":")[0] or "block"
    if "," in given:
        raise SystemExit(f"SLURM_DISTRIBUTION={given}: the ,pack/,nopack suffix lets Slurm place tasks on nodes "
                         "in a way its variables do not say; run srun without it (or without -m/--distribution).")
    if nodes_level not in ("block", "cyclic"):
        raise SystemExit(f"SLURM_DISTRIBUTION={given}: only Slurm's block (the default) and cyclic layouts can "
                         "be worked out from its variables; run srun without -m/--distribution.")
    return nodes_level


def parse_host_map(text: str | None) -> dict[str, str]:
    """``"c9=c9-ib0,c10=10.1.0.10"`` -> ``{"c9": "c9-ib0", "c10": "10.1.0.10"}``."""
    mapping = {}
    for item in filter(None, (part.strip() for part in (text or "").split(","))):
        name, sep, address = item.partition("=")
        if not sep or not name or not address:
            raise SystemExit(f"host map entry {item!r}: write NODE=ADDRESS, e.g. c9=c9-ib0")
        mapping[name] = address
    return mapping


def layout(env: Mapping[str, str] | None = None, port_base: int | None = None, host_suffix: str = "",
           host_map: Mapping[str, str] | None = None, dev="/dev") -> Layout:
    """This task's :class:`Layout`, from Slurm's variables in ``env`` (default: this process's environment).
    Each task's address is ``host_map[node]`` if given, else the node's name followed by ``host_suffix``."""
    env = os.environ if env is None else env
    hosts = expand_hostlist(_need(env, "SLURM_STEP_NODELIST"))
    counts = expand_tasks_per_node(_need(env, "SLURM_STEP_TASKS_PER_NODE"))
    rank, local = int(_need(env, "SLURM_PROCID")), int(_need(env, "SLURM_LOCALID"))
    distribution = _distribution(env)
    order = task_order(hosts, counts, distribution)
    ntasks = int(env.get("SLURM_STEP_NUM_TASKS") or env.get("SLURM_NTASKS") or len(order))
    node = env.get("SLURMD_NODENAME")
    if ntasks != len(order) or rank >= len(order) or order[rank][1] != local or (node and order[rank][0] != node):
        raise SystemExit(f"Slurm says this is task {rank} of {ntasks}, local task {local} on {node}, but its "
                         f"{distribution} layout of {','.join(hosts)} with {counts} tasks per node places task "
                         f"{rank} at {order[rank] if rank < len(order) else 'no node'}.")
    if port_base is None:
        if max(counts) > PORTS_PER_JOB:
            raise SystemExit(f"{max(counts)} tasks on one node, but a job step has {PORTS_PER_JOB} ports per node "
                             "(more would take the next job's): pass --port-base with a free range of that size.")
        port_base = default_port_base(int(_need(env, "SLURM_JOB_ID")), int(env.get("SLURM_STEP_ID") or 0))
    tasks_here = counts[hosts.index(order[rank][0])]
    gpus = slurm_gpus.for_task(env, local, tasks_here, dev=dev)
    mapping = dict(host_map or {})
    addresses = [f"{mapping.get(host, host + host_suffix)}:{port_base + i}" for host, i in order]
    return Layout(addresses, rank, local, gpus.visible, gpus.set_visible, gpus.how)


def resolver(env: Mapping[str, str] | None = None, port_base: int | None = None, **where):
    """A ``tf.distribute`` cluster resolver for this task (``SimpleClusterResolver`` of :func:`layout`);
    sets ``CUDA_VISIBLE_DEVICES`` only where :mod:`course_utils.slurm_gpus` says so."""
    import tensorflow as tf  # noqa: PLC0415

    found = layout(env, port_base, **where)
    if found.set_visible_devices:
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(found.gpus)
        os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    return tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(found.tf_config()["cluster"]), task_type="worker", task_id=found.rank,
        num_accelerators={"GPU": len(found.gpus)} if found.gpus else {}, rpc_layer="grpc")


def tf_config(port_base: int | None = None, env: Mapping[str, str] | None = None) -> dict:
    """This Slurm task's ``TF_CONFIG``."""
    return layout(env, port_base).tf_config()


def task_cpus(env: Mapping[str, str] | None = None) -> tuple[int, list[int]]:
    """``(how many cores this task is to use, the cores it may run on)``: its affinity (what Slurm bound it
    to), or ``SLURM_CPUS_PER_TASK`` of them where Slurm binds nothing (no task plugin: every task may run
    everywhere, and would otherwise size its thread pools to the whole node)."""
    env = os.environ if env is None else env
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count()))
    given = env.get("SLURM_CPUS_PER_TASK", "")
    return (min(int(given), len(cores)) if given.isdigit() and int(given) > 0 else len(cores)), cores


def thread_settings(cpus: int) -> dict[str, str]:
    """TensorFlow's thread pools for a task with ``cpus`` cores: intra-op (and OpenMP) one per core, inter-op
    at most 2 (independent ops rarely run more than two at once in these models)."""
    return {"TF_NUM_INTRAOP_THREADS": str(cpus), "TF_NUM_INTEROP_THREADS": str(min(2, cpus)),
            "OMP_NUM_THREADS": str(cpus)}


def check_port_free(port: int) -> None:
    """Bind this task's port once, before TensorFlow does: a port another process listens on fails here with
    what to do. (``SO_REUSEADDR``, as gRPC's server: the last run's closed connections do not count.)"""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("", port))
        except OSError as error:
            raise SystemExit(f"port {port} is in use on {socket.gethostname()} ({error.strerror}): another job "
                             "or step listens there. Pass another --port-base (PORT_BASE in the batch script).") \
                from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m course_utils.slurm_tasks")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("tf-config", help="in a Slurm task: print its TF_CONFIG, or run a command with it")
    run.add_argument("--port-base", type=int, default=None,
                     help="task i of a node listens on port_base + i (default: from SLURM_JOB_ID and SLURM_STEP_ID)")
    run.add_argument("--host-suffix", default="", help="appended to every node's name, e.g. -ib0 (fast network)")
    run.add_argument("--host-map", default=None, help="NODE=ADDRESS,...: the address to use for these nodes")
    run.add_argument("command_line", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS]: run it with TF_CONFIG set")
    return parser


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    found = layout(port_base=args.port_base, host_suffix=args.host_suffix, host_map=parse_host_map(args.host_map))
    config = json.dumps(found.tf_config())
    command = args.command_line[1:] if args.command_line[:1] == ["--"] else args.command_line
    if not command:
        print(config)
        return 0
    check_port_free(found.port)
    cpus, cores = task_cpus()
    os.environ.update({"TF_CONFIG": config, **thread_settings(cpus)})
    if found.set_visible_devices:
        os.environ.update({"CUDA_VISIBLE_DEVICES": ",".join(found.gpus), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    gpus = ",".join(found.gpus) or "none"
    uuids = slurm_gpus.uuids(found.gpus)
    how = f" {','.join(uuids)}" * bool(uuids) + f" ({found.gpus_how})" * bool(found.gpus)
    print(f"task {found.rank} (local {found.local_rank}) at {found.addresses[found.rank]}, GPUs {gpus}{how}, "
          f"{cpus} CPU(s) of {_ranges(cores)}: "
          f"TF_CONFIG={config}", flush=True)  # the job's output shows what each task got
    os.execvp(command[0], command)


def _ranges(cores: list[int]) -> str:
    """[0, 1, 2, 5] -> '0-2,5'."""
    spans, start = [], None
    for i, core in enumerate(cores):
        start = core if start is None else start
        if i + 1 == len(cores) or cores[i + 1] != core + 1:
            spans.append(f"{start}" if start == core else f"{start}-{core}")
            start = None
    return ",".join(spans)


if __name__ == "__main__":
    sys.exit(main())
