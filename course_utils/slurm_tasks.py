"""Inside a Slurm task: TensorFlow's ``SlurmClusterResolver`` fixed for CPU-only nodes, and ``TF_CONFIG`` from it.

:func:`resolver` is ``SlurmClusterResolver`` that works on nodes without GPUs. In each task that
``srun`` starts, ``python -m course_utils.slurm_tasks tf-config -- COMMAND`` resolves this task's place
in the job's cluster, prints it, and runs COMMAND with it as ``TF_CONFIG``, so that notebook 05's worker
scripts run under Slurm unchanged (``cluster/slurm/``). Nothing here starts Slurm: that is
:mod:`course_utils.slurm`.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import sys


def _no_gpus() -> bool:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return visible.strip() in ("", "-1") if visible is not None else shutil.which("nvidia-smi") is None


@functools.cache
def cpu_cluster_resolver_class():
    """The class ``CPUClusterResolver``, made on first use: TensorFlow is imported then, not with this module."""
    import tensorflow as tf  # noqa: PLC0415

    class CPUClusterResolver(tf.distribute.cluster_resolver.SlurmClusterResolver):
        """``SlurmClusterResolver`` that reports no GPUs on a node without any, and is the parent elsewhere.

        The bug (tensorflow/python/distribute/cluster_resolver/slurm_cluster_resolver.py): ``__init__``
        counts GPUs with ``_get_num_nvidia_gpus()``, which runs ``nvidia-smi`` and dies with
        ``FileNotFoundError`` where there is none, and ``gpus_per_node=0`` makes ``cluster_spec()`` call
        ``range(0, gpus_per_node, gpus_per_task)`` with a step of 0. CPU-only here: ``gpus_per_node=0``, or
        none given, no ``nvidia-smi`` on ``PATH`` and no GPU in ``CUDA_VISIBLE_DEVICES``; the parent then
        gets GPU slots it never hands out (``auto_set_gpu=False``) to lay out the ports with.
        """

        def __init__(self, jobs=None, port_base=8888, gpus_per_node=None, **kwargs):
            self.cpu_only = gpus_per_node == 0 or (gpus_per_node is None and _no_gpus())
            if self.cpu_only:
                gpus_per_node = 1 << 20  # more slots than any node has tasks
                kwargs.update(gpus_per_task=1, auto_set_gpu=False)
            super().__init__(jobs=jobs, port_base=port_base, gpus_per_node=gpus_per_node, **kwargs)

        def num_accelerators(self, task_type=None, task_id=None, config_proto=None):
            return {} if self.cpu_only else super().num_accelerators(task_type, task_id, config_proto)

    return CPUClusterResolver


def resolver(**kwargs):
    """A ``CPUClusterResolver`` for this Slurm task (inside ``srun``); keywords as ``SlurmClusterResolver``'s."""
    return cpu_cluster_resolver_class()(**kwargs)


def tf_config(port_base: int = 8888) -> dict:
    """This Slurm task's ``TF_CONFIG``: the cluster and task that :func:`resolver` resolves."""
    found = resolver(port_base=port_base)
    cluster = found.cluster_spec().as_dict()  # also sets task_type and task_id
    return {"cluster": cluster, "task": {"type": found.task_type, "index": found.task_id}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_utils.slurm_tasks")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("tf-config", help="in a Slurm task: print its TF_CONFIG, or run a command with it")
    run.add_argument("--port-base", type=int, default=8888, help="task i of a node listens on port_base + i")
    run.add_argument("command_line", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS]: run it with TF_CONFIG set")
    args = parser.parse_args(argv)
    from course_utils import devices  # noqa: PLC0415

    level = os.environ.get("TF_CPP_MIN_LOG_LEVEL")
    devices.quiet_tensorflow()  # TensorFlow's start-up lines: the command prints its own
    config = json.dumps(tf_config(args.port_base))  # on GPU nodes this also sets CUDA_VISIBLE_DEVICES
    if level is None:
        del os.environ["TF_CPP_MIN_LOG_LEVEL"]
    command = args.command_line[1:] if args.command_line[:1] == ["--"] else args.command_line
    if not command:
        print(config)
        return 0
    os.environ["TF_CONFIG"] = config
    print(f"TF_CONFIG={config}", flush=True)  # the job's output shows what each task got
    os.execvp(command[0], command)


if __name__ == "__main__":
    sys.exit(main())
