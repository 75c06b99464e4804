"""Diagrams of parameter-server training (notebook 06): where the variables live on the parameter servers, before
and after a partitioner, and an asynchronous timeline of workers whose steps go stale. Each returns the Figure;
:mod:`course_utils.diagrams` re-exports them; the drawing kit is :mod:`course_utils._drawing`.
"""

from __future__ import annotations

from numbers import Real

from course_utils._drawing import FONT, _box, _canvas, _check, _finish, _legend, _plural

# The course's CNN (models.build_cnn) in float32: its trainable variables in the order Keras creates them, MB.
CNN_VARIABLES = [("conv1/kernel", 288 * 4e-6), ("conv1/bias", 32 * 4e-6), ("conv2/kernel", 18_432 * 4e-6),
                 ("conv2/bias", 64 * 4e-6), ("dense/kernel", 2_359_296 * 4e-6), ("dense/bias", 64 * 4e-6),
                 ("logits/kernel", 640 * 4e-6), ("logits/bias", 10 * 4e-6)]
SMALL = 0.02  # a variable under this share of the largest column is drawn in its column's "small variables" box


def round_robin(variables=None, ps: int = 2, split: str | None = None, shift: int = 0) -> list[tuple[str, int, float]]:
    """``[(name, ps, MB)]``: the i-th variable on ps (i + ``shift``) mod ``ps``, as ``ParameterServerStrategy``
    places them; ``split``: the name of one variable cut into ``ps`` equal shards (``name/part_k``), one per
    server, as a partitioner does. ``variables``: ``[(name, MB)]`` in creation order (default: the course's CNN)."""
    p = _check("ps", ps, 1, 8)
    placed, i = [], shift
    for name, mb in CNN_VARIABLES if variables is None else variables:
        parts = p if name == split else 1
        for k in range(parts):
            placed.append((f"{name}/part_{k}" if parts > 1 else name, i % p, mb / parts))
            i += 1
    return placed


def _placement(placed, what: str) -> list[tuple[str, int, float]]:
    rows = []
    for row in placed:
        if len(row) != 3:
            raise ValueError(f"{what} needs (name, ps, MB) for each variable, got {row!r}")
        name, where, mb = row
        if isinstance(where, bool) or not isinstance(where, int) or where < 0:
            raise ValueError(f"{what}: the ps of {name!r} must be a whole number >= 0 (got {where!r})")
        if isinstance(mb, bool) or not isinstance(mb, Real) or mb < 0:
            raise ValueError(f"{what}: the MB of {name!r} must be a number >= 0 (got {mb!r})")
        rows.append((str(name), where, float(mb)))
    if not rows:
        raise ValueError(f"{what} has no variables")
    return rows


def _mb(mb: float) -> str:
    return f"{mb:.2f} MB" if mb >= 0.01 or mb == 0 else f"{mb * 1e3:.2f} kB"


def variable_placement(before=None, after=None, ps: int | None = None,
                       titles=("round robin (no partitioner)", "with a partitioner")):
    """Which parameter server holds which variable: a column per ps, its variables stacked, heights in MB (one
    scale for both panels); the ps's total on top. ``before`` and ``after``: ``[(name, ps, MB)]`` (see
    :func:`round_robin`, the defaults: the course's CNN on 2 servers, then with its dense kernel split).
    Variables under 2 % of the tallest column are drawn together as "small"."""
    before = _placement(round_robin() if before is None else before, "before")
    after = _placement(round_robin(split="dense/kernel") if after is None else after, "after")
    p = _check("ps", ps if ps is not None else 1 + max(w for _, w, _ in before + after), 1, 8)
    if any(w >= p for _, w, _ in before + after):
        raise ValueError(f"a variable is placed on a ps beyond the {p} drawn")
    height = 3.2
    fig, ax = _canvas(8, height)
    base, top = 0.55, height - 1.45  # room above the tallest column for its labels, under the panel's title
    totals = [[sum(mb for _, w, mb in panel if w == i) for i in range(p)] for panel in (before, after)]
    scale = (top - base) / max(max(t) for t in totals) if max(max(t) for t in totals) > 0 else 1.0
    for left, panel, sums, title in [(0.2, before, totals[0], titles[0]), (4.2, after, totals[1], titles[1])]:
        ax.text(left + 1.8, height - 0.5, title, ha="center", va="center", fontsize=FONT)
        pitch = 3.6 / p
        for i in range(p):
            x, w, y = left + i * pitch + 0.1, pitch - 0.2, base
            mine = [(n, mb) for n, where, mb in panel if where == i]
            big = [(n, mb) for n, mb in mine if mb >= SMALL * max(max(t) for t in totals)]
            small = [(n, mb) for n, mb in mine if (n, mb) not in big]
            for name, mb in big:
                h = mb * scale
                short = name.replace("/part_", " part ")
                _box(ax, x, y, w, h, "variable", f"{short}\n{_mb(mb)}", short, _mb(mb))
                y += h
            if small:
                count = sum(1 for _ in small)
                _box(ax, x, y, w, 0.08, "idle")
                y += 0.08
                what = f"{count} small" if pitch < 1.5 else _plural(count, "small variable")
                total = _mb(sum(mb for _, mb in small)) + " in all" * (pitch >= 1.5)
                label = f"+ {what}" if big else f"{what}:\n{total}"  # only small ones: their total is the column's
                ax.text(x + w / 2, y + 0.03, label, ha="center", va="bottom", fontsize=FONT)
                y += 0.2 if big else 0.4
            if big or not small:  # a column of small variables only: their label gave its total
                ax.text(x + w / 2, y + 0.03, _mb(sums[i]), ha="center", va="bottom", fontsize=FONT)
            ax.text(x + w / 2, base - 0.08, f"ps {i}", ha="center", va="top", fontsize=FONT)
    ax.plot([4.0, 4.0], [0.15, height - 0.3], color="#999999", linewidth=0.8, linestyle=":")
    return _finish(fig, f"Variables on {_plural(p, 'parameter server')}: each column what one ps holds "
                   "(heights: MB)", layout=False)


def async_steps(compute=(1.0, 2.5), horizon: float = 7.0, pull: float = 0.15, push: float = 0.15):
    """The steps of workers that never wait for each other: ``[(worker, start, read, end, staleness)]`` in order of
    their end. Each step pulls the variables (``pull``, reading the version then on the servers), computes for its
    worker's ``compute`` time, and pushes its update (``push``); the next starts at once. Staleness: the updates
    other workers applied between this step's read and its own update."""
    steps, clock = [], [0.0] * len(compute)
    for w, c in enumerate(compute):
        while clock[w] + pull + c + push <= horizon:
            steps.append([w, clock[w], clock[w] + pull + c + push])
            clock[w] = steps[-1][2]
    steps.sort(key=lambda s: s[2])
    ends = [s[2] for s in steps]
    out = []
    for w, start, end in steps:
        read = sum(e <= start + pull for e in ends)  # updates applied when the pull finished
        before = sum(e < end for e in ends)  # updates applied before this one
        out.append((w, start, read, end, before - read))
    return out


def async_timeline(compute=(1.0, 2.5), horizon: float = 7.0):
    """Two (or more) workers training asynchronously: a row per worker, each step a pull of the variables, the
    forward and backward pass labelled with the version it read and its staleness, and the push of its update;
    a row for the version of the variables on the parameter servers. ``compute``: each worker's time per step
    (illustrative units; default: worker 1 is 2.5 times slower), ``horizon``: how much time is drawn."""
    n = len(compute)
    _check("workers", n, 1, 6)
    for c in compute:
        if isinstance(c, bool) or not isinstance(c, Real) or not 0 < c <= horizon / 2:
            raise ValueError(f"each compute time must be a number > 0 and at most horizon / 2 (got {c!r})")
    pull = push = 0.15
    steps = async_steps(compute, horizon, pull, push)
    height = 2.3 + 0.5 * n  # room under the ps row for the labels of short versions
    fig, ax = _canvas(8, height)
    x0, span = 1.05, 6.8
    unit = span / horizon

    def x(t):
        return x0 + t * unit

    rows = [height - 1.0 - 0.5 * w for w in range(n)]
    for w in range(n):
        ax.text(0.1, rows[w], f"worker {w}", va="center", fontsize=FONT)
    for w, start, read, end, stale in steps:
        y = rows[w] - 0.17
        _box(ax, x(start), y, pull * unit, 0.34, "variable")
        _box(ax, x(start + pull), y, (end - start - pull - push) * unit, 0.34, "backward",
             f"read v{read}, stale {stale}", f"v{read}, stale {stale}", f"v{read}, s{stale}", f"s{stale}")
        _box(ax, x(end - push), y, push * unit, 0.34, "update")
    ps_y = rows[-1] - 0.6
    ax.text(0.1, ps_y, "ps version", va="center", fontsize=FONT)
    ends = sorted(s[3] for s in steps)
    below = -1.0  # where the last label written under the row ends: a version too short for its label gets it there
    for v, (a, b) in enumerate(zip([0.0, *ends], [*ends, horizon])):
        if b - a > 1e-9:  # two updates at the same time (up to rounding): no version in between
            narrow = (b - a) * unit < 0.3
            _box(ax, x(a), ps_y - 0.14, (b - a) * unit, 0.28, "variable", *([] if narrow else [f"v{v}"]),
                 alpha=0.45 + 0.3 * (v % 2))
            if narrow:
                level = 0.2 if x((a + b) / 2) - 0.15 > below else 0.4
                ax.text(x((a + b) / 2), ps_y - level, f"v{v}", ha="center", va="top", fontsize=FONT)
                below = x((a + b) / 2) + 0.15 if level == 0.2 else below
    worst = max((s[4] for s in steps), default=0)
    ax.text(0.1, 0.08, f"Staleness: updates applied by the other workers between a step's read and its own update. "
            f"Here up to {worst}\nwith {n - 1} other worker{'s' * (n > 2)}: a fast worker applies several updates "
            "while a slow one computes one.", va="bottom", fontsize=FONT)
    _legend(fig, ["variable", "backward", "update"], {"variable": "pull the variables", "backward":
            "forward + backward", "update": "push: update on the ps"}, loc="upper center", ncol=3,
            bbox_to_anchor=(0.5, 1 - 0.38 / height))
    return _finish(fig, f"Asynchronous training, {_plural(n, 'worker')}: each step reads a version of the "
                   "variables (illustrative times)", layout=False)


