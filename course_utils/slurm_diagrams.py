"""Diagrams of a Slurm job as the course runs it: its tasks on its nodes, with what each task is told. The function
returns the Figure; :mod:`course_utils.diagrams` re-exports it, so the lessons call ``diagrams.slurm_job()``; the
drawing kit is :mod:`course_utils._drawing`.
"""

from __future__ import annotations

from course_utils._drawing import FONT, _box, _canvas, _check, _finish, _plural

MAX_NODES = 4  # more columns than this are too narrow for a task's address
MAX_TASKS_PER_NODE = 8


def slurm_job(nodes: int = 2, tasks_per_node: int = 2, gpus_per_node: int = 0, port_base: int = 13016,
              names=None):
    """A job of ``nodes`` x ``tasks_per_node`` tasks in Slurm's default (*block*) order: task ``r`` of the job
    (``SLURM_PROCID``, ``TF_CONFIG``'s index) is task ``l`` of its node (``SLURM_LOCALID``) and listens on
    ``port_base + l`` at its node's name. ``gpus_per_node``: each node's GPUs, shared evenly between its tasks
    (with ``--gpus-per-task`` and device cgroups every task sees its own as ``GPU 0``); 0: CPU-only nodes.
    ``names``: the nodes' host names (default ``c9``, ``c10``, ...: unpadded, as the local cluster's).
    """
    n = _check("nodes", nodes, 1, MAX_NODES)
    t = _check("tasks_per_node", tasks_per_node, 1, MAX_TASKS_PER_NODE)
    g = _check("gpus_per_node", gpus_per_node, 0, 8) if gpus_per_node else 0
    port = _check("port_base", port_base, 1024, 65535 - t)
    if g and g % t:
        raise ValueError(f"gpus_per_node ({g}) must be a multiple of tasks_per_node ({t}): Slurm gives each task "
                         "the same number of GPUs")
    hosts = [f"c{9 + i}" for i in range(n)] if names is None else [str(name) for name in names]
    if len(hosts) != n:
        raise ValueError(f"names needs one host name per node ({n}), got {len(hosts)}")
    per_task = g // t if g else 0
    row = 0.62 if per_task else 0.46  # a task's height: its box, and its GPUs' row under it
    width, pitch = 8.0, 0.1
    height = 1.55 + t * (row + pitch)
    fig, ax = _canvas(width, height)
    column = (width - 0.2) / n
    top = height - 0.55  # the node boxes' top edge
    for k, host in enumerate(hosts):
        x0 = 0.1 + k * column
        _box(ax, x0 + 0.05, top - t * (row + pitch) - 0.35, column - 0.1, t * (row + pitch) + 0.35, "coordinator")
        ax.text(x0 + column / 2, top - 0.17, f"node {host}" + (f", {g} GPUs" if g else ""), ha="center",
                va="center", fontsize=FONT)
        for local in range(t):
            rank = k * t + local
            y = top - 0.35 - (local + 1) * (row + pitch) + pitch / 2
            w = column - 0.3
            task_h = 0.4 if not per_task else 0.36
            y_task = y + row - task_h
            _box(ax, x0 + 0.15, y_task, w, task_h, "forward",
                 f"task {rank} · local {local} · {host}:{port + local}",
                 f"task {rank} · local {local}\n{host}:{port + local}", f"task {rank}, local {local}", f"task {rank}")
            if per_task:
                gpu_w = min(0.7, (w - 0.05 * (per_task - 1)) / per_task)
                for i in range(per_task):
                    number = local * per_task + i
                    _box(ax, x0 + 0.15 + i * (gpu_w + 0.05), y, gpu_w, row - task_h - 0.04, "update",
                         f"GPU {number}", f"{number}")
    gpus = " Green: each task's GPUs, as the node numbers them." if g else " No GPUs: CPU-only nodes."
    ax.text(0.1, 0.12, "SLURM_PROCID = the task's rank in the job (TF_CONFIG's task index); SLURM_LOCALID = its rank "
            f"on its node;\nits port = a base from the job's id + its local rank.{gpus}", va="bottom", fontsize=FONT)
    workers = n * t
    return _finish(fig, f"A Slurm job: {_plural(n, 'node')} × {_plural(t, 'task')} = {_plural(workers, 'worker')}, "
                   "ranks in Slurm's order", layout=False)

