"""The charts of :mod:`course_utils.waterfall`'s runs: the waterfall that adds the differences up from the first
configuration's time to the last's (:func:`plot_waterfall`), and the differences alone, one bar each from zero,
grouped, with a scale that one wide range does not flatten (:func:`plot_differences`)."""

from __future__ import annotations

from collections.abc import Sequence


def plot_waterfall(start: tuple[str, float], parts: Sequence[tuple[str, float, float, float]],
                   end: tuple[str, float], title: str | None = None, unit: str = "s"):
    """Bars from ``start`` (label, value) through each part (label, median, low, high) to ``end``.

    Each part floats where the running total has reached; its whisker is the range of its differences (low
    to high, drawn where they would take the running total, whether or not the bar's value lies inside it).
    Whatever the parts do not add up to is drawn as the last part, "remainder", in grey.
    """
    import matplotlib.pyplot as plt  # noqa: PLC0415

    labels, bottoms, heights, colors, whiskers = [start[0]], [0.0], [start[1]], ["tab:blue"], []
    total = start[1]
    for label, value, low, high in parts:
        labels.append(label)
        bottoms.append(total if value >= 0 else total + value)
        heights.append(abs(value))
        colors.append("tab:red" if value >= 0 else "tab:green")
        whiskers.append((len(labels) - 1, total + low, total + high))
        total += value
    remainder = end[1] - total
    labels.append("remainder")
    bottoms.append(total if remainder >= 0 else total + remainder)
    heights.append(abs(remainder))
    colors.append("tab:gray")
    labels.append(end[0])
    bottoms.append(0.0)
    heights.append(end[1])
    colors.append("tab:blue")
    fig, ax = plt.subplots(figsize=(max(6.0, 0.75 * len(labels)), 4.0))
    x = range(len(labels))
    ax.bar(x, heights, bottom=bottoms, color=colors)
    if whiskers:
        at, lows, highs = zip(*whiskers)
        ax.vlines(at, lows, highs, color="black")
        for ends in (lows, highs):
            ax.scatter(at, ends, marker="_", color="black", s=60)
    ax.set_xticks(list(x), labels, rotation=30, ha="right")
    ax.set_ylabel(unit)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig


COSTS, SAVES, NEITHER = "tab:red", "tab:green", "tab:gray"  # plot_differences' bars: > 0, < 0, 0
REACH = 0.5  # plot_differences: whiskers shown up to this share of the bars' span beyond the bars


def _signed(x: float) -> str:
    """A difference with its sign and 2-3 significant digits: +0.35, -1.24, +22.1, +150."""
    a = abs(x)
    return f"{x:+.0f}" if a >= 100 else f"{x:+.1f}" if a >= 10 else f"{x:+.2f}"


def plot_differences(rows: Sequence[tuple[str, str, float, float, float]], title: str | None = None,
                     unit: str = "s"):
    """What each difference cost, one horizontal bar per row ``(group, label, value, low, high)``: the bar
    from 0 to ``value`` (positive: it costs time, red; negative: it saves time, green), its whisker the range
    ``low`` to ``high`` (e.g. the paired differences round by round, whether or not ``value`` lies inside),
    the value written at the bar's end. Rows stay in the order given, under a bold heading per group (a new
    heading whenever the group changes), with a line at zero.

    One large difference does not flatten the rest by its whisker: the axis is linear and spans the bars
    (all of them, to scale) plus at most half their span beyond them (:data:`REACH`); a whisker that reaches
    further is cut at that edge, ends in an arrowhead, and its true range is written after its value. (A
    symlog axis would keep every end on the chart, but its distances no longer add up by eye.)"""
    import matplotlib.pyplot as plt  # noqa: PLC0415

    rows = _checked(rows)
    values = [float(r[2]) for r in rows]
    span, shown_lo, shown_hi = _shown(rows, values)

    ys, labels, headings, previous = [], [], [], object()
    for group, label, *_ in rows:
        if group != previous:
            headings.append(len(labels))
            labels.append(str(group))
            previous = group
        ys.append(len(labels))
        labels.append(str(label))
    fig, ax = plt.subplots(figsize=(9.0, 0.9 + 0.34 * len(labels) + (0.3 if title else 0.0)))
    colors = [COSTS if v > 0 else SAVES if v < 0 else NEITHER for v in values]
    ax.barh(ys, values, height=0.6, color=colors)
    ax.axvline(0.0, color="black", linewidth=0.8)
    texts = []
    for y, (_, _, value, low, high) in zip(ys, rows):
        left, right = max(low, shown_lo), min(high, shown_hi)
        ax.hlines(y, left, right, color="black", linewidth=1.2)
        for end, cut, marker in ((left, left > low, "<"), (right, right < high, ">")):
            ax.plot([end], [y], marker=marker if cut else "|", color="black", markersize=7 if cut else 9)
        said = f"{_signed(value)} {unit}"
        if left > low or right < high:
            said += f" (range {_signed(low)} to {_signed(high)})"
        outward = 1 if value >= 0 else -1
        texts.append(ax.annotate(said, (max(value, right) if outward > 0 else min(value, left), y),
                                 xytext=(4 * outward, 0), textcoords="offset points", va="center",
                                 ha="left" if outward > 0 else "right", fontsize="small", annotation_clip=False))
    ax.set_yticks(range(len(labels)), labels)
    for k in headings:
        ax.get_yticklabels()[k].set_fontweight("bold")
        if k:
            ax.axhline(k - 0.5, color="0.8", linewidth=0.8)
    ax.set_ylim(len(labels) - 0.5, -0.5)  # the first row at the top
    ax.tick_params(axis="y", length=0)
    ax.set_xlabel(f"{unit} per run: right of 0 it costs time, left of 0 it saves time")
    _legend(ax)
    if title:
        ax.set_title(title)
    ax.set_xlim(shown_lo - 0.02 * span, shown_hi + 0.02 * span)
    _fit_texts(fig, ax, texts)
    return fig


def _checked(rows) -> list[tuple]:
    rows = [tuple(r) for r in rows]
    if not rows:
        raise ValueError("plot_differences needs at least one row (group, label, value, low, high)")
    if bad := [r for r in rows if len(r) != 5]:
        raise ValueError(f"each row is (group, label, value, low, high), got {bad[0]!r}")
    if bad := [r for r in rows if not r[3] <= r[4]]:
        raise ValueError(f"a row's range is (low, high) with low <= high, got {bad[0]!r}")
    return rows


def _legend(ax) -> None:
    from matplotlib.lines import Line2D  # noqa: PLC0415
    from matplotlib.patches import Patch  # noqa: PLC0415

    ax.legend(handles=[Patch(color=COSTS, label="costs time"), Patch(color=SAVES, label="saves time"),
                       Line2D([], [], color="black", marker="|", label="range")],
              loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")


def _shown(rows, values) -> tuple[float, float, float]:
    """The bars' span, and the part of the axis shown: the bars plus at most :data:`REACH` of their span."""
    bars_lo, bars_hi = min(0.0, *values), max(0.0, *values)
    span = bars_hi - bars_lo or max(max(abs(r[3]), abs(r[4])) for r in rows) or 1.0
    shown_lo = max(bars_lo - REACH * span, min(bars_lo, *(r[3] for r in rows)))
    shown_hi = min(bars_hi + REACH * span, max(bars_hi, *(r[4] for r in rows)))
    return span, shown_lo, shown_hi


def _fit_texts(fig, ax, texts) -> None:
    """Widen the axis until every value's text fits (each widening shrinks the texts in data units)."""
    fig.tight_layout()
    for _ in range(3):
        renderer, to_data = fig.canvas.get_renderer(), ax.transData.inverted()
        ends = [to_data.transform(t.get_window_extent(renderer))[:, 0] for t in texts]
        low, high = ax.get_xlim()
        need_lo, need_hi = min(low, *(e.min() for e in ends)), max(high, *(e.max() for e in ends))
        if need_lo >= low and need_hi <= high:
            break
        margin = 0.02 * (need_hi - need_lo)
        ax.set_xlim(need_lo - (margin if need_lo < low else 0.0), need_hi + (margin if need_hi > high else 0.0))
        fig.tight_layout()
