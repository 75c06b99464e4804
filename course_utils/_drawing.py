"""The drawing kit of :mod:`course_utils.diagrams`: its colours, argument checks, boxes, arrows, legends, layout.

One colour per kind of work in every diagram (``COLORS``). Box labels that do not fit their box once the figure
is laid out are moved beside it (if the box allows), shortened or hidden (the legend or the caption still says
what the colour is).
"""

from __future__ import annotations

import math
from numbers import Integral, Real

COLORS = {"input": "#f5c85c", "forward": "#a8cff2", "backward": "#5b9bd5", "allreduce": "#f08a5d",
          "update": "#82c785", "idle": "#e4e4e4", "fixed": "#b3b3b3", "variable": "#c9b6e4", "coordinator": "#f2e6d0"}
NAMES = {"input": "input", "forward": "forward", "backward": "backward", "allreduce": "all-reduce",
         "update": "optimizer update", "idle": "idle / wait", "fixed": "fixed cost per step",
         "variable": "variables (model weights)", "coordinator": "coordinator"}
MAX_REPLICAS = 16  # more rows than this are too thin to read at notebook width
FONT = 9  # points: the smallest text in every diagram


def _check(name: str, value, low: int, high: int | None = None) -> int:
    """``value`` if it is an integer from ``low`` to ``high``, else a ValueError naming the argument."""
    if isinstance(value, bool) or not isinstance(value, Integral) or value < low or (high and value > high):
        bound = f"from {low} to {high}" if high else f"of at least {low}"
        raise ValueError(f"{name} must be an integer {bound} (got {value!r})")
    return int(value)


def _share(name: str, value) -> float:
    """``value`` if it is a number greater than 0 and less than 1, else a ValueError naming the argument."""
    if isinstance(value, bool) or not isinstance(value, Real) or not 0 < value < 1:
        raise ValueError(f"{name} must be a number greater than 0 and less than 1 (got {value!r})")
    return float(value)


def _ms(name: str, value, default: float) -> float:
    """A duration in ms: ``default`` for None, else a positive finite number or a ValueError."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, Real) or not 0 < value < math.inf:
        raise ValueError(f"{name} must be a positive number of milliseconds (got {value!r})")
    return float(value)


def _num(value: float) -> str:
    return f"{value:.0f}" if value >= 10 else f"{value:.2g}"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + "s" * (count != 1)


def _canvas(width: float, height: float):
    """A figure whose one axes fills it with inches as data units, (0, 0) at the bottom left, no axis drawn."""
    import matplotlib.pyplot as plt  # noqa: PLC0415  (matplotlib only when a diagram is drawn)

    fig = plt.figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1), xlim=(0, width), ylim=(0, height))
    ax.axis("off")
    return fig, ax


def _box(ax, x: float, y: float, w: float, h: float, kind: str | None, *labels, alpha: float = 1.0,
         dashed: bool = False, beside: bool = False):
    """A rectangle in the colour of its kind of work (``None``: unfilled, just room for a label), labelled by the
    first of ``labels`` that fits inside it when :func:`_finish` runs; a label may be ``(text, rotation)``.
    ``beside``: when none fits inside, the first that fits right of the box, within the axes."""
    from matplotlib.patches import Rectangle  # noqa: PLC0415  (matplotlib only when a diagram is drawn)

    patch = ax.add_patch(Rectangle((x, y), w, h, facecolor=COLORS[kind] if kind else "none", alpha=alpha,
                                   edgecolor="#555555" if kind else "none", linewidth=0.8,
                                   hatch="///" if kind == "idle" else None, linestyle="--" if dashed else "-"))
    if labels:
        text = ax.text(x + w / 2, y + h / 2, "", ha="center", va="center", fontsize=FONT)
        text.fit_in = (patch, labels, beside)
    return patch


def _arrow(ax, start, end, color: str = "#555555", rad: float = 0.0, shrink: float = 0.0) -> None:
    ax.annotate("", xy=end, xytext=start, arrowprops={"arrowstyle": "-|>", "color": color, "lw": 1.2,
                                                      "connectionstyle": f"arc3,rad={rad}", "mutation_scale": 12,
                                                      "shrinkA": shrink, "shrinkB": shrink})


def _legend(where, kinds, labels: dict[str, str] | None = None, **placed) -> None:
    """A legend of ``kinds`` on an axes or a figure (``where``), each named by ``labels`` or else ``NAMES``."""
    from matplotlib.patches import Patch  # noqa: PLC0415  (matplotlib only when a diagram is drawn)

    names = {**NAMES, **(labels or {})}
    handles = [Patch(facecolor=COLORS[k], edgecolor="#555555", hatch="///" if k == "idle" else None, label=names[k])
               for k in kinds]
    where.legend(handles=handles, fontsize=FONT, frameon=False, **placed)


def _try(text, labels, fits) -> bool:
    """Set ``text`` to the first of ``labels`` whose ink ``fits``: True, or False if none does."""
    for label in labels:
        words, rotation = (label, 0) if isinstance(label, str) else label
        text.set_text(words)
        text.set_rotation(rotation)
        if fits(text.get_window_extent()):
            return True
    return False


def _fit_label(text) -> None:
    """A box label: inside its box, else (if allowed) right of it within the axes, else hidden."""
    from matplotlib.transforms import offset_copy  # noqa: PLC0415  (matplotlib only when a diagram is drawn)

    patch, labels, beside = text.fit_in
    room = patch.get_window_extent().padded(-2)
    if _try(text, labels, lambda ink: room.x0 <= ink.x0 and ink.x1 <= room.x1 and room.y0 <= ink.y0
            and ink.y1 <= room.y1):
        return
    if beside:
        ax = text.axes
        text.set_transform(offset_copy(ax.transData, fig=ax.figure, x=3, units="points"))
        text.set_position((patch.get_x() + patch.get_width(), patch.get_y() + patch.get_height() / 2))
        text.set_horizontalalignment("left")
        edge = ax.get_window_extent().x1
        if _try(text, [label for label in labels if isinstance(label, str)], lambda ink: ink.x1 <= edge):
            return
    text.set_visible(False)


def _finish(fig, title: str, layout: bool = True, rect=(0, 0, 1, 1)):
    """Title, layout (within ``rect``, figure fractions), then each box label placed by :func:`_fit_label`."""
    fig.suptitle(title, fontsize=11)
    if layout:
        fig.tight_layout(rect=rect)
    for text in fig.findobj(lambda artist: hasattr(artist, "fit_in")):
        _fit_label(text)
    return fig


def _sum(name: str, first: int, count: int) -> str:
    """``g0+g1+g2``, or ``g0+…+g7`` when long."""
    last = f"{name}{first + count - 1}"
    return "+".join(f"{name}{first + i}" for i in range(count)) if count <= 4 else f"{name}{first}+…+{last}"
