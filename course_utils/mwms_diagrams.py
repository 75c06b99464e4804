"""Diagrams of a ``MultiWorkerMirroredStrategy`` job: its processes and their ``TF_CONFIG``, and what a worker's
death does to a run against time. Each returns the Figure; :mod:`course_utils.diagrams` re-exports them, so the
lessons call ``diagrams.mwms_cluster()``; the drawing kit is :mod:`course_utils._drawing`.
"""

from __future__ import annotations

from course_utils._drawing import FONT, _arrow, _box, _canvas, _check, _finish, _legend, _num

MAX_WORKERS = 4  # more columns than this are too narrow for a task's TF_CONFIG


def mwms_cluster(workers: int = 2, chief: bool = False, port: int = 2222):
    """The processes of one job, a column each: every process gets the same ``cluster`` (drawn once, on top, with
    its addresses ``host<k>:port``) and its own ``task``; the chief (the ``chief`` task, or worker 0 when there is
    none) keeps what it writes, the others write temporary copies that they delete; at the bottom the all-reduce
    that joins every task at every step."""
    n = _check("workers", workers, 1, MAX_WORKERS)
    _check("port", port, 1, 65535)
    tasks = ([("chief", 0)] if chief else []) + [("worker", i) for i in range(n)]
    width, height = 8.0, 3.5
    fig, ax = _canvas(width, height)
    column = (width - 0.2) / len(tasks)
    names = {t: f"host{k}:{port}" for k, t in enumerate(tasks)}
    jobs = (['"chief": [' + f'"{names[("chief", 0)]}"]'] if chief else []) + \
        ['"worker": [' + ", ".join(f'"{names[t]}"' for t in tasks if t[0] == "worker") + "]"]
    spec = "{" + ", ".join(jobs) + "}"
    _box(ax, 0.1, 2.62, width - 0.2, 0.42, "coordinator", f'"cluster": {spec}  (the same in every process)',
         f'"cluster": {spec}', '"cluster": the same in every process')
    for k, (kind, i) in enumerate(tasks):
        x0 = 0.1 + k * column
        centre = x0 + column / 2
        is_chief = kind == "chief" or (not chief and i == 0)
        _arrow(ax, (centre, 2.6), (centre, 2.4))
        _box(ax, x0 + 0.08, 1.75, column - 0.16, 0.62, "forward",
             f"process on machine {k}\n\"task\": {{\"type\": \"{kind}\", \"index\": {i}}}",
             f"machine {k}\n\"task\": {kind} {i}", f"{kind} {i}")
        if is_chief:
            _box(ax, x0 + 0.08, 1.0, column - 0.16, 0.62, "update",
                 "the chief: writes checkpoints,\nbackups, the saved model", "chief: checkpoints,\nbackup, model",
                 "chief: keeps\nits files", "chief")
        else:
            _box(ax, x0 + 0.08, 1.0, column - 0.16, 0.62, "fixed", "writes temporary copies,\nthen deletes them",
                 "temporary copies,\ndeleted", "temp copies", "temp")
        _arrow(ax, (centre, 1.0), (centre, 0.86))
    _box(ax, 0.1, 0.6, width - 0.2, 0.24, "allreduce", "every step: the gradients all-reduced across every task "
         "(gRPC between the machines)", "every step: the gradients all-reduced across every task", "all-reduce")
    rule = "the chief task" if chief else "no chief task: worker 0 is the chief"
    ax.text(0.1, 0.08, f"{len(tasks)} processes read TF_CONFIG: one cluster, each its own task; {rule}.\n"
            "Every task takes part in saving (collectives); only the chief's files stay.", va="bottom", fontsize=FONT)
    return _finish(fig, f"A MultiWorkerMirroredStrategy job: {len(tasks)} processes, one TF_CONFIG each",
                   layout=False)


def _fault_times(kill_s, noticed_s, restart_s, end_s, backup_s) -> tuple[float, float, float, float]:
    """``(backup, noticed, restart, end)`` in seconds, illustrative where not given, checked to come in order."""
    for name, value in [("kill_s", kill_s), ("noticed_s", noticed_s)]:
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{name} must be a positive number of seconds (got {value!r})")
    noticed = kill_s + noticed_s
    restart = noticed + 1.0 if restart_s is None else float(restart_s)
    end = restart + 1.2 * kill_s if end_s is None else float(end_s)
    backup = 0.6 * kill_s if backup_s is None else float(backup_s)
    if not 0 <= backup <= kill_s < noticed <= restart < end:
        raise ValueError("the times must come in order: 0 <= backup_s <= kill_s < kill_s + noticed_s <= restart_s "
                         f"< end_s (got {backup:g}, {kill_s:g}, {noticed:g}, {restart:g}, {end:g})")
    return backup, noticed, restart, end


def fault_timeline(kill_s: float = 16.0, noticed_s: float = 1.8, restart_s: float | None = None,
                   end_s: float | None = None, backup_s: float | None = None, workers: int = 2, killed: int = 1,
                   error: str = "Socket closed", resumed: str = "the last backup"):
    """A worker's death against time, a row per worker and attempt: attempt 1 trains until worker ``killed`` is
    killed at ``kill_s``; every other worker fails ``noticed_s`` later (with ``error``); the cluster starts again
    at ``restart_s`` and trains from ``resumed`` (the state of the last backup, at ``backup_s``) to ``end_s``.
    Seconds from the start of the run; those not given are illustrative (the title says so).
    """
    import matplotlib.pyplot as plt  # noqa: PLC0415  (matplotlib only when a diagram is drawn)

    n = _check("workers", workers, 2, MAX_WORKERS)
    dead = _check("killed", killed, 0, n - 1)
    given = restart_s is not None and end_s is not None
    backup, noticed, restart, end = _fault_times(kill_s, noticed_s, restart_s, end_s, backup_s)
    rows = 2 * n
    fig, ax = plt.subplots(figsize=(8, 1.9 + 0.36 * rows))
    for i in range(n):
        y = i - 0.3
        if i == dead:
            _box(ax, 0, y, kill_s, 0.6, "forward", "training", "train")
            ax.plot([kill_s], [i], marker="X", color="#c0392b", markersize=10)
        else:
            _box(ax, 0, y, kill_s, 0.6, "forward", "training", "train")
            _box(ax, kill_s, y, noticed - kill_s, 0.6, "idle", "waits", "")
            ax.plot([noticed], [i], marker="o", color="#c0392b", markersize=6)
    for i in range(n):
        y = n + i - 0.3
        redo = min(kill_s - backup, end - restart)  # the work since the last backup, done again (start-up aside)
        _box(ax, restart, y, redo, 0.6, "allreduce", "lost work", "")
        _box(ax, restart + redo, y, end - restart - redo, 0.6, "forward", f"resumes from {resumed}", "resumes",
             "train")
    ax.axvline(backup, color="#555555", linewidth=0.8, linestyle="--")
    ax.axvline(kill_s, color="#c0392b", linewidth=0.8, linestyle=":")
    top = -0.75
    ax.text(backup, top, "last backup ", ha="right", va="bottom", fontsize=FONT)
    ax.text(kill_s, top, f" kill: worker {dead}", ha="left", va="bottom", fontsize=FONT, color="#c0392b")
    survivor = next(i for i in range(n) if i != dead)
    ax.text(noticed, survivor, f"  fails: {error}, {_num(noticed_s)} s after the kill", ha="left", va="center",
            fontsize=FONT)
    ax.text(restart, n - 0.5, f"restart at {_num(restart)} s", ha="left", va="center", fontsize=FONT)
    ax.set_xlim(0, end * 1.01)
    ax.set_xticks([t for t in ax.get_xticks() if 0 <= t <= end])  # no tick label past the end
    ax.set_xlim(0, end * 1.01)
    ax.set_ylim(2 * n + 0.35, -1.15)
    ax.set_yticks(range(2 * n), [f"attempt 1: worker {i}" for i in range(n)] +
                  [f"attempt 2: worker {i}" for i in range(n)], fontsize=FONT)
    ax.tick_params(left=False, labelsize=FONT)
    ax.set_xlabel("seconds since the job started", fontsize=FONT)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    _legend(fig, ["forward", "idle", "allreduce"], {"forward": "training (start-up included)",
                                                    "idle": "waiting for the dead peer",
                                                    "allreduce": "the steps since the backup, again"},
            loc="lower center", ncol=3, bbox_to_anchor=(0.5, 0.0), handlelength=1.5, columnspacing=1.2)
    legend_room = 0.3 / fig.get_size_inches()[1]
    note = "measured times" if given else "illustrative times"
    return _finish(fig, f"A worker killed, the job restarted from its backup ({note})", rect=(0, legend_room, 0.97, 1))
