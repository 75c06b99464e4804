"""Plots used by several notebooks. Each returns the matplotlib Figure."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Collection, Mapping, Sequence


def _history_dict(history) -> Mapping[str, Sequence[float]]:
    return history.history if hasattr(history, "history") else history


def plot_history(history, metrics: Sequence[str] = ("loss", "accuracy"), title: str | None = None):
    """Training curves: one panel per metric, with ``val_<metric>`` beside it when present.

    ``history`` is what ``Model.fit`` returns, or a ``{name: [value per epoch]}`` dict.
    """
    import matplotlib.pyplot as plt  # noqa: PLC0415

    hist = _history_dict(history)
    missing = [m for m in metrics if m not in hist]
    if missing:
        raise KeyError(f"history has no {missing}; it has {sorted(hist)}")
    fig, axes = plt.subplots(1, len(metrics), figsize=(5 * len(metrics), 3.5), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        epochs = range(1, len(hist[metric]) + 1)
        ax.plot(epochs, hist[metric], marker="o", label=f"train {metric}")
        if f"val_{metric}" in hist:
            ax.plot(epochs, hist[f"val_{metric}"], marker="o", label=f"validation {metric}")
        ax.set_xlabel("epoch")
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3)
        ax.legend()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


MUTED = "0.62"  # plot_medians: the grey of the variants a rule did not tell apart
WRAP = 14  # plot_medians: characters per line of a variant's name under its bar


def _wrapped(name: str) -> str:
    """``name`` broken into lines of about :data:`WRAP` characters, never inside a word nor after a lone sign
    ("+ steps_per_execution 8" keeps its "+" on the line of "steps_per_execution")."""
    glued = re.sub(r"(?<!\S)([^\w\s]) ", "\\1\u00a0", name)  # textwrap breaks at ASCII whitespace only
    width = max(WRAP, *(len(word) for word in glued.split(" ")))
    return textwrap.fill(glued, width, break_long_words=False, break_on_hyphens=False).replace("\u00a0", " ")


def plot_medians(groups: Mapping[str, Mapping[str, Sequence[float]]], ylabel: str, title: str | None = None,
                 muted: Collection[str] = (), notes: Mapping[str, str] | None = None,
                 muted_label: str = "not told apart from the row before"):
    """Median bars with min-max whiskers: one panel per group, one bar per variant.

    ``groups`` is ``{panel title: {variant: [value per repeat]}}``, e.g. throughput of several loop
    variants at two batch sizes. Each bar is annotated with its median; each variant's name is written
    under its bar, level and wrapped at about 14 characters, so that long names do not run into each other.
    ``muted``: variants drawn grey (in every panel), with a legend ``muted_label`` (e.g. those
    :func:`course_utils.verdicts.speed_side` does not tell apart from the row before, or from the
    baseline); ``notes``: ``{variant: short text}`` written at the foot of its bar (e.g. its test accuracy).
    """
    import matplotlib.pyplot as plt  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415
    from matplotlib.patches import Patch  # noqa: PLC0415

    if not groups or not all(groups.values()):
        raise ValueError("plot_medians needs at least one group with at least one variant")
    muted, notes = set(muted), dict(notes or {})
    names = [name for variants in groups.values() for name in variants]
    if unknown := sorted((muted | set(notes)) - set(names)):
        raise KeyError(f"muted or notes name {unknown}, which no group has; the variants are {sorted(set(names))}")
    widest = max(len(variants) for variants in groups.values())
    line = max(len(row) for name in names for row in _wrapped(name).splitlines())  # the longest label line
    per_bar = max(1.7, 0.075 * line + 0.3)  # inches: a label line of 10-point text fits under its bar
    fig, axes = plt.subplots(1, len(groups), figsize=(max(5, per_bar * widest) * len(groups), 3.8 + 0.15 * max(
        _wrapped(name).count("\n") for name in names)), squeeze=False)
    for ax, (panel, variants) in zip(axes[0], groups.items()):
        medians = [float(np.median(v)) for v in variants.values()]
        low = [m - min(v) for m, v in zip(medians, variants.values())]
        high = [max(v) - m for m, v in zip(medians, variants.values())]
        colors = [MUTED if name in muted else "tab:blue" for name in variants]
        bars = ax.bar(range(len(variants)), medians, yerr=[low, high], capsize=4, color=colors)
        ax.bar_label(bars, labels=[f"{m:.0f}" for m in medians], label_type="center", color="white")
        for k, name in enumerate(variants):
            if name in notes:
                ax.annotate(notes[name], (k, 0.0), xytext=(0, 3), textcoords="offset points", ha="center",
                            va="bottom", fontsize="small", color="white")
        ax.set_xticks(range(len(variants)), [_wrapped(name) for name in variants])
        ax.set_ylabel(ylabel)
        ax.set_title(panel)
        if muted & set(variants):
            ax.legend(handles=[Patch(color=MUTED, label=muted_label)], fontsize="small", loc="best")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_ps_cluster(workers: int = 2, ps: int = 2, title: str | None = None):
    """A parameter-server cluster as a diagram: the coordinator above its workers, the parameter
    servers below, with what flows between them."""
    import matplotlib.pyplot as plt  # noqa: PLC0415

    if workers < 1 or ps < 1:
        raise ValueError(f"a parameter-server cluster needs at least one worker and one ps (got {workers}, {ps})")
    fig, ax = plt.subplots(figsize=(8, 4.2))
    width = max(workers, ps)

    def row(n, y, label, color):
        xs = [(i + 0.5) * width / n for i in range(n)]
        for i, x in enumerate(xs):
            ax.text(x, y, label.format(i=i), ha="center", va="center", fontsize=10,
                    bbox={"boxstyle": "round,pad=0.5", "facecolor": color, "edgecolor": "gray"})
        return xs

    top = row(1, 2.0, "coordinator (chief)\nthis notebook: the program,\ncreates variables, schedules steps", "#fde9c4")
    mid = row(workers, 1.0, "worker {i}\nruns scheduled steps\non its own data", "#d6e9f8")
    low = row(ps, 0.0, "ps {i}\nholds variables,\napplies updates", "#dff3d6")
    for x in mid:
        ax.annotate("", xy=(x, 1.22), xytext=(top[0], 1.72), arrowprops={"arrowstyle": "->", "color": "tab:orange"})
        for x_ps in low:
            ax.annotate("", xy=(x_ps, 0.25), xytext=(x, 0.75), arrowprops={"arrowstyle": "<->", "color": "tab:green"})
    ax.text(width * 0.98, 1.5, "schedule(step) ->\n<- fetch(loss)", ha="right", va="center", color="tab:orange")
    ax.text(width * 0.98, 0.5, "read variables,\nsend updates", ha="right", va="center", color="tab:green")
    ax.set_xlim(-0.1, width + 0.1)
    ax.set_ylim(-0.5, 2.5)
    ax.axis("off")
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig


def plot_measured_vs_predicted(x: Sequence[float], measured: Mapping[str, Sequence[Sequence[float]]],
                               predicted: Mapping[str, Sequence[float]], xlabel: str, ylabel: str,
                               title: str | None = None):
    """One line per series: the measured medians with min-max whiskers (solid), the prediction dashed.

    ``measured`` is ``{series: [values at x[0], values at x[1], ...]}`` (several repeats per point) and
    ``predicted`` ``{series: [value at each x]}``, with the same series names. The x axis is logarithmic.
    """
    import matplotlib.pyplot as plt  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415

    if set(measured) != set(predicted) or not measured:
        raise ValueError(f"measured {sorted(measured)} and predicted {sorted(predicted)} need the same series")
    bad = [s for s in measured if len(measured[s]) != len(x) or len(predicted[s]) != len(x)]
    if bad:
        raise ValueError(f"series {bad} do not have one point per x value ({len(x)})")
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for k, series in enumerate(measured):
        color = f"C{k}"
        medians = np.array([np.median(v) for v in measured[series]])
        whiskers = [medians - [min(v) for v in measured[series]], [max(v) for v in measured[series]] - medians]
        ax.errorbar(x, medians, yerr=whiskers, marker="o", capsize=3, color=color, label=f"{series}, measured")
        ax.plot(x, predicted[series], linestyle="--", color=color, alpha=0.7, label=f"{series}, predicted")
    ax.set_xscale("log")
    ax.set_xticks(list(x), [str(v) for v in x])
    ax.minorticks_off()  # a log axis labels minor ticks too, over the batch sizes
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig


def plot_system(monitor, rates: Mapping[str, float] | None = None, title: str | None = None):
    """A :class:`~course_utils.monitor.SystemMonitor`'s samples over time: one line per CPU core (and per GPU,
    utilisation and memory, where it has them), each marked phase shaded and labelled with its name and,
    from ``rates`` (``{phase: images/s}``), its throughput."""
    import matplotlib.pyplot as plt  # noqa: PLC0415

    gpus = monitor.gpu_utilization.shape[1]
    fig, axes = plt.subplots(2 if gpus else 1, 1, figsize=(8, 5.5 if gpus else 3.4), sharex=True, squeeze=False)
    panels = [(axes[0, 0], monitor.cpu, "CPU core {}", "CPU utilisation (%)")]
    if gpus:
        panels.append((axes[1, 0], monitor.gpu_utilization, "GPU {} busy", "GPU (%)"))
        for k in range(gpus):
            axes[1, 0].plot(monitor.times, monitor.gpu_memory[:, k], linestyle=":", label=f"GPU {k} memory")
    for ax, series, name, ylabel in panels:
        for k in range(series.shape[1]):
            ax.plot(monitor.times, series[:, k], linewidth=1, label=name.format(k))
        for i, phase in enumerate(monitor.phases()):
            ax.axvspan(phase.start, phase.end, color=f"C{i % 10}", alpha=0.08)
            if ax is axes[0, 0]:
                rate = f"\n{rates[phase.label]:,.0f} images/s" if rates and phase.label in rates else ""
                ax.text((phase.start + phase.end) / 2, 103, phase.label + rate, ha="center", va="bottom",
                        fontsize="small")
        ax.set_ylim(0, 100)
        ax.set_ylabel(ylabel)
        ax.legend(fontsize="x-small", loc="lower right")
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("seconds")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_stacked(bars: Mapping[str, Mapping[str, float]], xlabel: str, title: str | None = None):
    """Horizontal bars, one per key of ``bars``, each made of its ``{segment: value}`` side by side
    (the same segment, the same colour, in every bar); e.g. a step's op time by owner, per strategy."""
    import matplotlib.pyplot as plt  # noqa: PLC0415

    if not bars:
        raise ValueError("plot_stacked needs at least one bar")
    segments = list(dict.fromkeys(s for parts in bars.values() for s in parts))
    fig, ax = plt.subplots(figsize=(8, 0.9 + 0.6 * len(bars)))
    left = [0.0] * len(bars)
    for segment in segments:
        widths = [parts.get(segment, 0.0) for parts in bars.values()]
        ax.barh(list(bars), widths, left=left, label=segment)
        left = [a + b for a, b in zip(left, widths)]
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig
