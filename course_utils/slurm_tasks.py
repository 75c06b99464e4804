"""Inside a Slurm task: where every task of the job step listens, read from Slurm's own variables, and
``TF_CONFIG`` from it.

TensorFlow's ``SlurmClusterResolver`` (tensorflow/python/distribute/cluster_resolver/slurm_cluster_resolver.py)
misplaces tasks on common clusters: it orders the nodes by sorting their names as strings (``c10`` before
``c9``, while Slurm numbers the tasks in its host list's order), counts GPUs with ``nvidia-smi`` (which
CPU-only nodes lack), divides a task's GPUs by the tasks per node (``--gpus-per-task=1`` with two tasks
gives 0 and a crash) and overwrites the ``CUDA_VISIBLE_DEVICES`` Slurm set. :func:`layout` instead:

- orders the tasks as Slurm numbers them (``SLURM_PROCID``): the step's host list in Slurm's order, its
  tasks per node, ``block`` distribution (Slurm's default) or ``cyclic``; it checks the result against
  what Slurm told this task (its node ``SLURMD_NODENAME``, rank and local id) and says so when another
  distribution (``plane``, ``arbitrary``) places tasks elsewhere;
- gives task ``i`` of a node the port ``port_base + i``; the default base comes from the job id, so two
  jobs sharing a node do not collide (:func:`default_port_base`);
- leaves the GPUs as Slurm gave them: a ``CUDA_VISIBLE_DEVICES`` Slurm set is kept; only when Slurm
  set none but named the node's GPUs (``SLURM_STEP_GPUS``/``SLURM_JOB_GPUS``) is each task given its
  share (``SLURM_GPUS_PER_TASK``, else the node's GPUs divided by its tasks, which must be >= 1).

``python -m course_utils.slurm_tasks tf-config -- COMMAND`` prints this task's place and runs COMMAND
with it as ``TF_CONFIG``, so that notebook 05's worker scripts run under Slurm unchanged (``cluster/slurm/``).
Nothing here starts Slurm (that is :mod:`course_utils.slurm`), and TensorFlow is imported only to expand
Slurm's host lists with its own parser (``expand_hostlist``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

PORTS_PER_JOB = 16  # the ports one job may use on a node: task i of a node listens on base + i


@dataclass(frozen=True)
class Layout:
    """This task's place in its job step, as Slurm numbers the tasks."""

    addresses: list[str]  # "host:port" of every task, index = SLURM_PROCID
    rank: int  # this task's SLURM_PROCID
    local_rank: int  # its index among its node's tasks (SLURM_LOCALID)
    gpus: list[str]  # the GPUs this task sees ([] on CPU-only nodes)
    set_visible_devices: bool  # True when CUDA_VISIBLE_DEVICES is to be set to ``gpus`` (Slurm set none)

    def tf_config(self) -> dict:
        return {"cluster": {"worker": list(self.addresses)}, "task": {"type": "worker", "index": self.rank}}


def _need(env: Mapping[str, str], *names: str) -> str:
    for name in names:
        if env.get(name):
            return env[name]
    raise SystemExit(f"{' or '.join(names)} is not set: run this inside a Slurm job step (srun ... python -m "
                     "course_utils.slurm_tasks ...), where Slurm sets it.")


def _expand(nodelist: str, tasks_per_node: str) -> tuple[list[str], list[int]]:
    from tensorflow.python.distribute.cluster_resolver.slurm_cluster_resolver import (  # noqa: PLC0415
        expand_hostlist,
        expand_tasks_per_node,
    )

    return expand_hostlist(nodelist), expand_tasks_per_node(tasks_per_node)


def default_port_base(job_id: int) -> int:
    """Ports 12000-32639, below Linux's ephemeral range (32768-60999, where outgoing connections take theirs),
    ``PORTS_PER_JOB`` per job: jobs whose ids differ by less than 1,290 never share one."""
    return 12000 + (job_id % 1290) * PORTS_PER_JOB


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


def _gpus(env: Mapping[str, str], local_rank: int, tasks_here: int) -> tuple[list[str], bool]:
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:  # Slurm's (or the user's) list is kept as it is
        return ([] if visible.strip() in ("", "-1", "NoDevFiles") else visible.split(",")), False
    node_gpus = (env.get("SLURM_STEP_GPUS") or env.get("SLURM_JOB_GPUS") or "").split(",")
    node_gpus = [g for g in node_gpus if g]
    if not node_gpus:
        return [], False
    per_task = int(env.get("SLURM_GPUS_PER_TASK") or len(node_gpus) // tasks_here)
    if per_task < 1:
        raise SystemExit(f"{len(node_gpus)} GPU(s) on this node for {tasks_here} tasks: ask Slurm for at least "
                         "one per task (--gpus-per-task=1), or run fewer tasks per node.")
    return node_gpus[local_rank * per_task:(local_rank + 1) * per_task], True


def layout(env: Mapping[str, str] | None = None, port_base: int | None = None) -> Layout:
    """This task's :class:`Layout`, from Slurm's variables in ``env`` (default: this process's environment)."""
    env = os.environ if env is None else env
    hosts, counts = _expand(_need(env, "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"),
                            _need(env, "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"))
    rank, local = int(_need(env, "SLURM_PROCID")), int(_need(env, "SLURM_LOCALID"))
    distribution = env.get("SLURM_DISTRIBUTION", "block").split(":")[0] or "block"
    if distribution not in ("block", "cyclic"):
        raise SystemExit(f"SLURM_DISTRIBUTION={env['SLURM_DISTRIBUTION']}: only Slurm's block (the default) and "
                         "cyclic layouts can be worked out from its variables; run srun without -m/--distribution.")
    order = task_order(hosts, counts, distribution)
    ntasks = int(env.get("SLURM_STEP_NUM_TASKS") or env.get("SLURM_NTASKS") or len(order))
    node = env.get("SLURMD_NODENAME")
    if ntasks != len(order) or rank >= len(order) or order[rank][1] != local or (node and order[rank][0] != node):
        raise SystemExit(f"Slurm says this is task {rank} of {ntasks}, local task {local} on {node}, but its "
                         f"{distribution} layout of {','.join(hosts)} with {counts} tasks per node places task "
                         f"{rank} at {order[rank] if rank < len(order) else 'no node'}.")
    if port_base is None:
        port_base = default_port_base(int(_need(env, "SLURM_JOB_ID")))
    gpus, set_visible = _gpus(env, local, counts[hosts.index(order[rank][0])])
    return Layout([f"{host}:{port_base + i}" for host, i in order], rank, local, gpus, set_visible)


def resolver(env: Mapping[str, str] | None = None, port_base: int | None = None):
    """A ``tf.distribute`` cluster resolver for this task (``SimpleClusterResolver`` of :func:`layout`);
    sets ``CUDA_VISIBLE_DEVICES`` only where Slurm named the node's GPUs without setting it."""
    import tensorflow as tf  # noqa: PLC0415

    found = layout(env, port_base)
    if found.set_visible_devices:
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(found.gpus)
    return tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(found.tf_config()["cluster"]), task_type="worker", task_id=found.rank,
        num_accelerators={"GPU": len(found.gpus)} if found.gpus else {}, rpc_layer="grpc")


def tf_config(port_base: int | None = None, env: Mapping[str, str] | None = None) -> dict:
    """This Slurm task's ``TF_CONFIG``."""
    return layout(env, port_base).tf_config()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_utils.slurm_tasks")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("tf-config", help="in a Slurm task: print its TF_CONFIG, or run a command with it")
    run.add_argument("--port-base", type=int, default=None,
                     help="task i of a node listens on port_base + i (default: from SLURM_JOB_ID)")
    run.add_argument("command_line", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS]: run it with TF_CONFIG set")
    args = parser.parse_args(argv)
    from course_utils import devices  # noqa: PLC0415

    level = os.environ.get("TF_CPP_MIN_LOG_LEVEL")
    devices.quiet_tensorflow()  # TensorFlow's start-up lines (its host-list parser): the command prints its own
    found = layout(port_base=args.port_base)
    if level is None:
        del os.environ["TF_CPP_MIN_LOG_LEVEL"]
    config = json.dumps(found.tf_config())
    command = args.command_line[1:] if args.command_line[:1] == ["--"] else args.command_line
    if not command:
        print(config)
        return 0
    os.environ["TF_CONFIG"] = config
    if found.set_visible_devices:
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(found.gpus)
    gpus = ",".join(found.gpus) or "none"
    print(f"task {found.rank} (local {found.local_rank}) at {found.addresses[found.rank]}, GPUs {gpus}: "
          f"TF_CONFIG={config}", flush=True)  # the job's output shows what each task got
    os.execvp(command[0], command)


if __name__ == "__main__":
    sys.exit(main())
