"""Inside a Slurm task: which GPUs this task is to use, from what Slurm set, never from numbers it cannot use.

The rule (:func:`for_task`):

1. ``CUDA_VISIBLE_DEVICES`` set (Slurm's GPU plugin sets it whenever it gives a step GPUs):

   - Slurm bound GPUs per task (``--gpus-per-task``, or ``--gpu-bind`` of a kind that gives each task its
     own: ``single``, ``map_gpu``, ``mask_gpu``), or the task is alone on its node: the list is kept as it
     is. (A site's default ``--gpu-bind=closest`` binds no GPU to one task.) With device
     cgroups every task then sees its own GPU as ``0``, and that is right.
   - several tasks on the node and no per-task binding (``--gres=gpu:4 --ntasks-per-node=4``): every task
     got the same list, so each takes its share *of that list* by its local rank (``SLURM_LOCALID``): task
     1 of 4 with ``0,1,2,3`` keeps ``1``. A list that does not divide by the tasks is refused with the
     options that work (``--gpus-per-task=1``).
2. ``CUDA_VISIBLE_DEVICES`` not set but Slurm named the node's GPUs (``SLURM_STEP_GPUS``, ``SLURM_JOB_GPUS``):
   those are the node's *global* device numbers (``SLURM_JOB_GPUS`` even node 0's). They are used (shared
   out as above, with ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` so CUDA numbers the devices as Slurm does) only when
   this task can open every ``/dev/nvidiaN``: inside a device cgroup some of them refuse to open
   (``EPERM``), the task sees only its own devices, numbered from 0, and a global number such as ``3``
   would hide them all. There the task is left with what the cgroup shows.
3. Otherwise: no GPUs.

:func:`uuids` asks ``nvidia-smi`` for the UUIDs of the task's GPUs, so that the job's output shows which
physical GPU each task holds (with cgroups, every task says ``GPU 0``).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

NO_DEVICES = ("", "-1", "NoDevFiles")


@dataclass(frozen=True)
class Gpus:
    """The GPUs one task is to use."""

    visible: list[str]  # the task's CUDA_VISIBLE_DEVICES entries ([]: none)
    set_visible: bool  # True: CUDA_VISIBLE_DEVICES must be set to ``visible`` (Slurm's value differs)
    how: str  # where they came from, in a few words (printed by the task)


def in_device_cgroup(dev: str | os.PathLike = "/dev", opener: Callable = os.open) -> bool:
    """True when some ``/dev/nvidiaN`` exists that this process may not open (a device cgroup hides it)."""
    for path in sorted(Path(dev).glob("nvidia*")):
        if not re.fullmatch(r"nvidia\d+", path.name):
            continue
        try:
            os.close(opener(str(path), os.O_RDONLY))
        except PermissionError:
            return True
        except OSError:  # no driver behind the file, busy, ...: not a cgroup's refusal
            continue
    return False


def _share(devices: list[str], local_rank: int, tasks_here: int, said: str) -> list[str]:
    if len(devices) % tasks_here:
        raise SystemExit(
            f"{said}: {len(devices)} GPU(s) visible to each of this node's {tasks_here} tasks, which cannot be "
            f"shared out evenly. Ask Slurm for one GPU per task (--gpus-per-task=1 with --ntasks-per-node equal "
            f"to the node's GPUs), or run one task per node that uses all of them (--ntasks-per-node=1).")
    per_task = len(devices) // tasks_here
    return devices[local_rank * per_task:(local_rank + 1) * per_task]


def binds_one_gpu_per_task(gpu_bind: str) -> bool:
    """Whether ``--gpu-bind`` (``SLURM_GPU_BIND``) gives each task GPUs of its own: ``single:N``, ``map_gpu:...``,
    ``mask_gpu:...`` do; ``closest`` and ``none`` (a site's default, often) leave every task the node's list."""
    kinds = [part.split(":", 1)[0].strip() for part in gpu_bind.split(",")]
    return any(kind in ("single", "map_gpu", "mask_gpu") for kind in kinds)


def for_task(env: Mapping[str, str], local_rank: int, tasks_here: int, dev: str | os.PathLike = "/dev",
             opener: Callable = os.open) -> Gpus:
    """This task's :class:`Gpus`, by the rule in the module's docstring."""
    bound = bool(env.get("SLURM_GPUS_PER_TASK")) or binds_one_gpu_per_task(env.get("SLURM_GPU_BIND", ""))
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        devices = [] if visible.strip() in NO_DEVICES else [d.strip() for d in visible.split(",")]
        if not devices or bound or tasks_here == 1:
            return Gpus(devices, False, "as Slurm set them")
        said = f"CUDA_VISIBLE_DEVICES={visible} in every task, no --gpus-per-task"
        return Gpus(_share(devices, local_rank, tasks_here, said), True, f"share {local_rank + 1} of {visible}")
    named_by = next((name for name in ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS") if env.get(name)), None)
    if named_by is None:
        return Gpus([], False, "none")
    if in_device_cgroup(dev, opener):  # global numbers mean nothing here: keep what the cgroup shows
        return Gpus([], False, f"{named_by} set, inside a device cgroup: left to it")
    devices = [d.strip() for d in env[named_by].split(",") if d.strip()]
    if not bound and tasks_here > 1:
        devices = _share(devices, local_rank, tasks_here, f"{named_by}={env[named_by]}")
    elif bound and env.get("SLURM_GPUS_PER_TASK", "").isdigit():
        per_task = int(env["SLURM_GPUS_PER_TASK"])
        devices = devices[local_rank * per_task:(local_rank + 1) * per_task]
    return Gpus(devices, True, f"from {named_by} (no device cgroup)")


def uuids(visible: list[str], command=("nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader"),
          timeout: float = 20) -> list[str]:
    """The UUIDs of ``visible`` (CUDA_VISIBLE_DEVICES entries) as ``nvidia-smi`` numbers this task's GPUs; []
    without ``nvidia-smi``. Entries that are UUIDs already are returned as they are."""
    if not visible:
        return []
    try:
        listed = subprocess.run(command, capture_output=True, text=True, timeout=timeout).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    by_index = {}
    for line in listed.splitlines():
        index, _, uuid = (part.strip() for part in line.partition(","))
        if index.isdigit() and uuid:
            by_index[index] = uuid
    return [entry if not entry.isdigit() else by_index.get(entry, f"? (no GPU {entry} in nvidia-smi)")
            for entry in visible]
