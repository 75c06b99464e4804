"""Diagrams of what a strategy makes of variables and workers: a ``MirroredVariable``'s copies, and synchronous
all-reduce beside parameter servers. Each returns the Figure; :mod:`course_utils.diagrams` re-exports them, so
the lessons call ``diagrams.mirrored_variable()``; the drawing kit is :mod:`course_utils._drawing`.
"""

from __future__ import annotations

from course_utils._drawing import COLORS, FONT, MAX_REPLICAS, _arrow, _box, _canvas, _check, _finish, _plural, _sum


def mirrored_variable(replicas: int = 2, devices=None, value: str = "[1, 2]"):
    """A ``MirroredVariable``: one variable made in ``strategy.scope()``, an equal copy of it on each replica's device;
    then one training update: each replica's gradient, the all-reduce summing them, the same update on every copy.

    ``devices``: the replicas' device names, one each (default ``GPU:0``, ``GPU:1``, ...); ``value``: the copies'
    value as written on them.
    """
    n = _check("replicas", replicas, 1, MAX_REPLICAS)
    names = [f"GPU:{i}" for i in range(n)] if devices is None else [str(d) for d in devices]
    if len(names) != n:
        raise ValueError(f"devices needs one name per replica ({n}), got {len(names)}")
    height = 1.55 + 0.5 * n
    fig, ax = _canvas(8, height)
    top = height - 0.95  # the first row's centre
    for x, header in [(1.45, "one variable"), (3.25, "a copy per replica, equal"), (4.75, "gradient"),
                      (7.05, "same update, every copy")]:
        ax.text(x, height - 0.55, header, ha="center", va="center", fontsize=FONT)
    bottom = top - 0.5 * (n - 1) - 0.2
    _box(ax, 0.85, bottom, 1.2, top + 0.2 - bottom, "variable", "Mirrored-\nVariable w", "w")
    for r, device in enumerate(names):
        y = top - 0.5 * r
        ax.text(0.1, y, f"replica {r}", va="center", fontsize=FONT)
        _box(ax, 2.45, y - 0.17, 1.6, 0.34, "variable", f"{device}: w = {value}", f"w = {value}", "w")
        _box(ax, 4.5, y - 0.17, 0.5, 0.34, "backward", f"g{r}")
        _box(ax, 6.2, y - 0.17, 1.7, 0.34, "variable", f"w − η·({_sum('g', 0, n)})", "w − η·Σg")
        for x0, x1 in [(2.05, 2.4), (4.1, 4.45), (5.05, 5.35), (5.85, 6.15)]:
            _arrow(ax, (x0, y), (x1, y))
    _box(ax, 5.35, bottom, 0.5, top + 0.2 - bottom, "allreduce", "all-\nreduce", ("all-reduce", 90), ("sum", 90))
    ax.text(0.1, 0.12, "Made in strategy.scope(): one variable with a copy on each replica's device. The optimizer "
            "applies\nthe all-reduced gradients to every copy (η: the learning rate), so the copies start equal and "
            "stay equal.",
            va="bottom", fontsize=FONT)
    return _finish(fig, f"A MirroredVariable on {_plural(n, 'replica')}: equal copies, one update applied to all",
                   layout=False)


def sync_vs_parameter_servers(workers: int = 3, ps: int = 2):
    """Side by side: synchronous all-reduce (every worker holds all the variables, the workers' gradients summed by
    an all-reduce each step, everyone waiting for the slowest) and parameter servers (the variables sharded over
    ``ps`` tasks; each worker pulls the variables and pushes its gradients on its own, as the coordinator hands it
    steps: asynchronous)."""
    w, p = _check("workers", workers, 2, 5), _check("ps", ps, 1, 4)
    fig, ax = _canvas(8, 3.25)
    ax.plot([4.0, 4.0], [0.15, 2.85], color="#999999", linewidth=0.8, linestyle=":")
    for x, title in [(2.0, "Synchronous: all-reduce"), (6.05, "Asynchronous: parameter servers")]:
        ax.text(x, 2.75, title, ha="center", va="center", fontsize=10)
    # left: each worker holds every variable; the gradients meet in one all-reduce
    pitch = min(0.42, 1.4 / (w - 1))
    rows = [2.3 - pitch * i for i in range(w)]
    for i, y in enumerate(rows):
        ax.text(0.1, y, f"worker {i}", va="center", fontsize=FONT)
        _box(ax, 0.8, y - 0.14, 1.2, 0.28, "variable", "all variables", "all vars", "vars")
        _box(ax, 2.2, y - 0.14, 0.45, 0.28, "backward", f"g{i}", "g")
        _arrow(ax, (2.02, y), (2.18, y))
        _arrow(ax, (2.67, y), (2.93, y))
    _box(ax, 2.95, rows[-1] - 0.14, 0.55, rows[0] - rows[-1] + 0.28, "allreduce", "all-\nreduce", ("all-reduce", 90),
         ("sum", 90))
    ax.text(0.1, 0.15, "Every step, each worker waits for all the\nothers: the gradients are summed, and every\n"
            "worker applies the same update.", va="bottom", fontsize=FONT)
    # right: the variables sharded over the ps tasks; workers pull and push on their own, as the coordinator says
    ps_w = 3.75 / p - 0.15
    for i in range(p):
        _box(ax, 4.15 + i * 3.75 / p, 2.05, ps_w, 0.4, "variable", f"ps {i}: variables,\nshard {i + 1} of {p}",
             f"ps {i}\nshard {i + 1}/{p}", f"ps {i}")
    # every worker talks to every ps: one line joins them all (a worker's pull and push reach each shard)
    bus_y = 1.86
    ps_centres = [4.15 + i * 3.75 / p + ps_w / 2 for i in range(p)]
    worker_w = 2.7 / w - 0.12
    worker_centres = [5.2 + i * 2.7 / w + worker_w / 2 for i in range(w)]
    for x in ps_centres:
        ax.plot([x, x], [2.05, bus_y], color="#555555", linewidth=1)
    ax.plot([min(ps_centres + worker_centres), max(ps_centres + worker_centres)], [bus_y, bus_y],
            color="#555555", linewidth=1)
    for i, centre in enumerate(worker_centres):
        _box(ax, centre - worker_w / 2, 0.95, worker_w, 0.35, "backward", f"worker {i}", f"w{i}")
        _arrow(ax, (centre - 0.07, bus_y), (centre - 0.07, 1.35), color="#7d5fb0")  # pull the variables
        _arrow(ax, (centre + 0.07, 1.35), (centre + 0.07, bus_y), color=COLORS["backward"])  # push the gradients
    # the coordinator, beside the workers, hands steps to every one of them
    _box(ax, 4.15, 0.95, 0.9, 0.35, "coordinator", "coordinator", "coord.")
    ax.plot([4.6, 4.6, worker_centres[-1]], [0.93, 0.8, 0.8], color="#555555", linewidth=1)
    for centre in worker_centres:
        _arrow(ax, (centre, 0.8), (centre, 0.93))  # hands out steps
    ax.text(4.15, 0.15, "↓ pull variables, ↑ push gradients, from and to every\nps; each worker on its own, "
            "as the coordinator hands it\nsteps. A slow worker delays no one.", va="bottom", fontsize=FONT)
    return _finish(fig, f"Synchronous all-reduce vs parameter servers, {_plural(w, 'worker')}", layout=False)
