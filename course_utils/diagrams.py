"""Conceptual diagrams for the lessons, drawn with matplotlib: PNG outputs, nothing to fetch. Each returns the Figure.

One colour per kind of work in every diagram (``COLORS``). Box labels that do not fit their box once the figure
is laid out are moved beside it, shortened or hidden (the legend or the caption still says what the colour is);
the drawing kit is :mod:`course_utils._drawing`.
"""

from __future__ import annotations

import math
from numbers import Real

from course_utils._drawing import (
    COLORS,
    FONT,
    MAX_REPLICAS,
    _arrow,
    _box,
    _canvas,
    _check,
    _finish,
    _legend,
    _ms,
    _num,
    _plural,
    _share,
    _sum,
)
from course_utils.mwms_diagrams import fault_timeline, mwms_cluster  # noqa: F401 (re-exported)
from course_utils.network_diagrams import network_links  # noqa: F401 (re-exported)
from course_utils.ps_diagrams import async_timeline, variable_placement  # noqa: F401 (re-exported)
from course_utils.slurm_diagrams import slurm_job  # noqa: F401 (re-exported)
from course_utils.strategy_diagrams import mirrored_variable, sync_vs_parameter_servers  # noqa: F401 (re-exported)

ROW_GAP = 1.3  # in rows: from the one device's row to the first replica's, room for the line between them


def strong_vs_weak_scaling(replicas: int = 5, global_batch: int = 320, per_replica_batch: int | None = None,
                           fixed_share: float = 0.3):
    """Strong vs weak scaling as one training step on each device, two panels on the same x scale.

    A bar per device (one device on top, then each replica) from 0: the step's fixed cost, grey and the same in
    every row (launching the step, the all-reduce, the update: it does not shrink with the batch), then the work
    on the device's images, proportional to their number. Strong scaling splits the same ``global_batch`` across
    the ``replicas`` (so it must divide evenly): each replica's bar is mostly fixed cost. Weak scaling keeps
    ``per_replica_batch`` images on every replica (default: ``global_batch``, what the one device trained on), so
    every step is as long as one device's and the global batch grows ``replicas`` times.

    ``fixed_share``: the fixed cost as a share of one device's step on ``global_batch`` images, greater than 0
    and less than 1. Illustrative (0.3 by default), not measured.
    """
    import matplotlib.pyplot as plt  # noqa: PLC0415  (matplotlib only when a diagram is drawn)

    n = _check("replicas", replicas, 1, MAX_REPLICAS)
    _check("global_batch", global_batch, 1)
    each = global_batch if per_replica_batch is None else _check("per_replica_batch", per_replica_batch, 1)
    share = _share("fixed_share", fixed_share)
    if global_batch % n:
        raise ValueError(f"global_batch {global_batch} does not split evenly across {n} replicas: "
                         f"pick a multiple of {n}")
    piece, fixed = global_batch // n, global_batch * share / (1 - share)  # fixed: in images' worth of work
    pitch = min(0.28, max(0.235, 2.0 / (n + 1)))  # inches a row: compressed for many replicas, a label still fits
    rows = [0.0] + [ROW_GAP + i for i in range(n)]
    fig, axes = plt.subplots(1, 2, figsize=(8, 1.5 + pitch * (rows[-1] + 1)), sharex=True, sharey=True)
    _scaling_panel(axes[0], rows, fixed, [global_batch] + [piece] * n, f"Strong scaling: global batch "
                   f"{global_batch} kept", f"each replica: {global_batch} / {n} = {piece} images;\n"
                   "the fixed cost stays")
    _scaling_panel(axes[1], rows, fixed, [each] * (n + 1), f"Weak scaling: {each} per replica kept",
                   f"global batch {n} × {each} = {n * each:,};\neach step the same length as one device's")
    axes[0].set_xlim(0, (fixed + max(global_batch, each)) * 1.02)
    axes[0].set_ylim(rows[-1] + 0.5, -0.5)
    axes[0].set_yticks(rows, ["1 device"] + [f"replica {i}" for i in range(n)], fontsize=FONT)
    _legend(fig, ["fixed", "forward"], {"fixed": "fixed cost per step: launch, all-reduce, update (illustrative)",
                                        "forward": "work: proportional to the device's images"},
            loc="lower center", ncol=2, bbox_to_anchor=(0.5, 0.0), handlelength=1.5, columnspacing=1.5)
    legend_room = 0.3 / fig.get_size_inches()[1]
    return _finish(fig, f"Strong vs weak scaling, {_plural(n, 'replica')}: each bar is one training step on "
                   "one device", rect=(0, legend_room, 1, 1))


def _scaling_panel(ax, rows, fixed: float, images: list[int], title: str, caption: str) -> None:
    """One panel of :func:`strong_vs_weak_scaling`: a bar per row, the fixed cost then the work on ``images``."""
    for y, count in zip(rows, images):
        _box(ax, 0, y - 0.4, fixed, 0.8, "fixed", *(["fixed cost", "fixed"] if y == rows[0] else []))
        _box(ax, fixed, y - 0.4, count, 0.8, "forward", f"{count} images", str(count), beside=True)
    ax.axvline(fixed + images[0], color="#777777", linewidth=0.8, linestyle=":")  # where one device's step ends
    ax.axhline(ROW_GAP / 2, color="#999999", linewidth=0.8, linestyle=":")
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(caption, fontsize=FONT)
    ax.tick_params(bottom=False, labelbottom=False, left=False)
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)


def _duration_labels(name: str, short: str, value: float, given: bool) -> list[str]:
    ms = f"{_num(value)} ms"
    return [f"{name} {ms}", f"{name}\n{ms}", f"{short} {ms}", ms, _num(value)] if given else [name, short]


def _compute_ms(compute_ms, replicas: int) -> list[float]:
    """Forward plus backward per replica: illustrative (the last replica the slowest), one number, or one each."""
    if compute_ms is None:
        return [18 + 4 * i / max(replicas - 1, 1) for i in range(replicas)]
    if isinstance(compute_ms, Real):
        return [_ms("compute_ms", compute_ms, 0)] * replicas
    if len(compute_ms) != replicas:
        raise ValueError(f"compute_ms needs one number or one per replica ({replicas}), got {len(compute_ms)}")
    return [_ms("compute_ms", c, 0) for c in compute_ms]


def mirrored_step_timeline(replicas: int = 2, input_ms: float | None = None, compute_ms=None,
                           allreduce_ms: float | None = None, update_ms: float | None = None):
    """One MirroredStrategy training step against time: a row per replica (its piece of the batch arriving,
    forward, backward, the wait for the slowest replica), the all-reduce across all rows, the update on each;
    above, the input pipeline preparing the next batch meanwhile (prefetch), faint.

    Durations in ms; those not given are illustrative (the title says so), those given are written on their bars.
    ``compute_ms`` (forward plus backward, drawn 1:2) is one number or one per replica.
    """
    import matplotlib.pyplot as plt  # noqa: PLC0415  (matplotlib only when a diagram is drawn)

    _check("replicas", replicas, 1, MAX_REPLICAS)
    inp, ar, up = _ms("input_ms", input_ms, 3), _ms("allreduce_ms", allreduce_ms, 6), _ms("update_ms", update_ms, 4)
    compute = _compute_ms(compute_ms, replicas)
    slowest, end = max(compute), inp + max(compute) + ar + up
    fig, ax = plt.subplots(figsize=(8, 1.5 + 0.42 * (replicas + 2)))
    _box(ax, inp, -0.3, inp, 0.6, "input", alpha=0.35, dashed=True)
    ax.text(2 * inp + end * 0.01, 0, "next batch, prepared meanwhile (prefetch)", va="center", fontsize=FONT,
            color="#555555")
    for row, c in enumerate(compute, start=1):
        y = row - 0.3
        _box(ax, 0, y, inp, 0.6, "input", *_duration_labels("input", "in", inp, input_ms is not None))
        _box(ax, inp, y, c / 3, 0.6, "forward", *([] if compute_ms is not None else ["forward", "fwd"]))
        _box(ax, inp + c / 3, y, 2 * c / 3, 0.6, "backward", *([] if compute_ms is not None else ["backward", "bwd"]))
        if compute_ms is not None:
            _box(ax, inp, y, c, 0.6, None, *_duration_labels("forward + backward", "fwd+bwd", c, True))
        if c < slowest:
            _box(ax, inp + c, y, slowest - c, 0.6, "idle", "wait")
        _box(ax, end - up, y, up, 0.6, "update", *_duration_labels("update", "upd", up, update_ms is not None))
    labels = _duration_labels("all-reduce", "sum", ar, allreduce_ms is not None)
    _box(ax, inp + slowest, 0.7, ar, replicas - 0.4, "allreduce", *labels[:2], *((t, 90) for t in labels[:2]),
         *labels[2:])
    ax.annotate("all-reduce: the gradients summed; every replica waits for the slowest", fontsize=FONT,
                xy=(inp + slowest + ar / 2, replicas + 0.3), xytext=(end, replicas + 0.95), ha="right", va="center",
                arrowprops={"arrowstyle": "-|>", "color": "#555555", "shrinkB": 2})
    ax.set_xlim(0, end * 1.01)
    ax.set_ylim(replicas + 1.3, -0.5)
    ax.set_yticks(range(replicas + 1), ["input pipeline"] + [f"replica {i}" for i in range(replicas)], fontsize=FONT)
    ax.tick_params(left=False, labelsize=FONT)
    ax.set_xlabel("time (ms)", fontsize=FONT)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    _legend(ax, ["input", "forward", "backward", "idle", "allreduce", "update"], loc="upper left",
            bbox_to_anchor=(1.0, 1.0))
    given = sum(d is not None for d in (input_ms, compute_ms, allreduce_ms, update_ms))
    notes = ["illustrative durations", "given ms on bars, rest illustrative", "durations as given"]
    return _finish(fig, f"One MirroredStrategy training step, {_plural(replicas, 'replica')} "
                   f"({notes[(given > 0) + (given == 4)]})")


def allreduce(replicas: int = 3):
    """Before and after an all-reduce: each replica's own gradient g0, g1, ..., then their sum on every replica."""
    _check("replicas", replicas, 1, MAX_REPLICAS)
    height = 0.95 + 0.45 * replicas
    fig, ax = _canvas(8, height)
    top = height - 0.85  # the first row's centre
    ax.text(1.8, height - 0.5, "before: each replica's own gradient", ha="center", va="center", fontsize=FONT)
    ax.text(6.7, height - 0.5, "after: every replica holds the sum", ha="center", va="center", fontsize=FONT)
    for i in range(replicas):
        y = top - 0.45 * i
        ax.text(0.15, y, f"replica {i}", va="center", fontsize=FONT)
        _box(ax, 1.2, y - 0.16, 1.2, 0.32, "backward", f"g{i}")
        _arrow(ax, (2.45, y), (3.35, y))
        _arrow(ax, (4.65, y), (5.55, y))
        _box(ax, 5.6, y - 0.16, 2.2, 0.32, "backward", _sum("g", 0, replicas))
    bottom = top - 0.45 * (replicas - 1) - 0.2
    _box(ax, 3.4, bottom, 1.2, top + 0.2 - bottom, "allreduce", "all-reduce\n(sum)", "all-reduce", ("all-reduce", 90))
    return _finish(fig, f"All-reduce across {_plural(replicas, 'replica')}: each ends with the sum", layout=False)


def global_batch_loss(replicas: int = 2, per_replica_batch: int = 4):
    """Loss scaling in one picture: the global batch split across the replicas, each replica's per-example losses
    summed and divided by the GLOBAL batch size (not its own), its gradient computed, the replicas' gradients
    summed by the all-reduce."""
    n, b = _check("replicas", replicas, 1, MAX_REPLICAS), _check("per_replica_batch", per_replica_batch, 1, 8)
    height = 1.5 + 0.5 * n
    fig, ax = _canvas(8, height)
    top, width = height - 0.95, min(0.55, 2.4 / b)  # the first row's centre; one loss's box
    for x, header in [(0.85 + b * width / 2, f"the global batch ({n * b}), split:\nper-example losses"),
                      (4.3, f"÷ the GLOBAL batch ({n * b})"),
                      (5.8, "gradient"), (7.3, "summed gradient")]:
        ax.text(x, height - 0.55, header, ha="center", va="center", fontsize=FONT)
    for r in range(n):
        y = top - 0.5 * r
        ax.text(0.1, y, f"replica {r}", va="center", fontsize=FONT)
        for j in range(b):
            _box(ax, 0.85 + j * width, y - 0.17, width, 0.34, "forward", f"ℓ{r * b + j}", "ℓ")
        terms = _sum("ℓ", r * b, b)
        _box(ax, 3.5, y - 0.17, 1.6, 0.34, "forward", f"({terms}) / {n * b}" if b > 1 else f"{terms} / {n * b}")
        _box(ax, 5.45, y - 0.17, 0.7, 0.34, "backward", f"g{r}")
        _box(ax, 6.95, y - 0.17, 0.95, 0.34, "backward", _sum("g", 0, n), "sum")
        for x0, x1 in [(0.9 + b * width, 3.45), (5.15, 5.4), (6.2, 6.3), (6.8, 6.9)]:
            _arrow(ax, (x0, y), (x1, y))
    bottom = top - 0.5 * (n - 1) - 0.2
    _box(ax, 6.3, bottom, 0.5, top + 0.2 - bottom, "allreduce", "all-\nreduce", ("all-reduce", 90), ("sum", 90))
    ax.text(0.1, 0.12, f"Divided by {n * b} = {n} × {b}, not by the replica's own {b}: the all-reduce SUMS the "
            f"replicas' gradients,\nand that sum is the gradient of the mean loss over all {n * b} examples"
            + (f" (÷ {b} would make it {n}× too big)." if n > 1 else "."), va="bottom", fontsize=FONT)
    return _finish(fig, f"Loss scaling, {_plural(n, 'replica')} × {_plural(b, 'example')}: every loss divided by "
                   "the global batch", layout=False)


def ring_allreduce(workers: int = 4):
    """Ring all-reduce: the workers in a ring, each gradient cut into ``workers`` chunks; reduce-scatter (N-1 steps)
    leaves worker k with chunk k summed, all-gather (N-1 more) passes the sums round. Each worker sends
    2(N-1)/N of the gradient's bytes."""
    from matplotlib.patches import Circle  # noqa: PLC0415  (matplotlib only when a diagram is drawn)

    n = _check("workers", workers, 2, 8)
    fig, ax = _canvas(8, 3.1)
    spots = [(0.8 + 0.55 * math.sin(2 * math.pi * k / n), 1.7 + 0.55 * math.cos(2 * math.pi * k / n)) for k in range(n)]
    for k, (x, y) in enumerate(spots):
        ax.add_patch(Circle((x, y), 0.17, facecolor="white", edgecolor="#555555"))
        ax.text(x, y, f"w{k}", ha="center", va="center", fontsize=FONT)
        _arrow(ax, (x, y), spots[(k + 1) % n], color=COLORS["allreduce"], rad=-0.3, shrink=14)
    ax.text(0.8, 0.95, "each worker sends\nto the next", ha="center", va="top", fontsize=FONT)
    cell, top = min(0.28, 1.12 / n), 2.5
    side = n * cell
    stages = [(1.95, "start: each worker's own\ngradient, in N chunks", lambda r, c: "backward"),
              (4.2, "reduce-scatter done: worker k\nhas chunk k summed (Σ)", lambda r, c: "idle"),
              (6.45, "all-gather done: every\nworker has every sum", lambda r, c: "allreduce")]
    for x0, caption, kind in stages:
        for r in range(n):
            for c in range(n):
                summed = kind(r, c) == "allreduce" or r == c and x0 == 4.2
                _box(ax, x0 + c * cell, top - (r + 1) * cell, cell, cell, "allreduce" if summed else kind(r, c),
                     *["Σ"] * summed)
        ax.text(x0 + side / 2, top - side - 0.1, caption, ha="center", va="top", fontsize=FONT)
        ax.text(x0 + side / 2, top + 0.12, "chunks", ha="center", va="center", fontsize=FONT)
    for r in range(n):
        ax.text(1.9, top - (r + 0.5) * cell, f"w{r}", ha="right", va="center", fontsize=FONT)
    for x0, phase in [(1.95 + side, "reduce-scatter"), (4.2 + side, "all-gather")]:
        _arrow(ax, (x0 + 0.08, top - side / 2), (x0 + 2.17 - side, top - side / 2), color=COLORS["allreduce"])
        ax.text(x0 + 1.125 - side / 2, top - side / 2 + 0.06, f"{phase}\n{_plural(n - 1, 'step')}", ha="center",
                va="bottom", fontsize=FONT)
    ax.text(4.0, 0.12, f"each worker sends 2(N−1)/N = 2·{n - 1}/{n} = {2 * (n - 1) / n:.3g}× the gradient's bytes "
            "(1/N of it per step, 2(N−1) steps)", ha="center", va="bottom", fontsize=FONT)
    return _finish(fig, f"Ring all-reduce with N = {n} workers: reduce-scatter, then all-gather", layout=False)

